//! Smoke tests for the services that `dev/services` starts: each test in `tests/` makes a real
//! round trip with the client crate the matching connector uses. Nothing to export.
