//! The one place the object store's errors become rivus errors, with their fault: a refused
//! key or permission refused, an invalid path or an unsupported operation permanent, the rest
//! (the store unreachable, a 5xx) transient.

use rivus_core::{Error, Fault};

/// `e` as a rivus error, with what was being done.
pub(crate) fn store_error(what: impl Into<String>, e: object_store::Error) -> Error {
    use object_store::Error as E;
    let fault = match &e {
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => Fault::Refused,
        E::InvalidPath { .. } | E::NotSupported { .. } | E::NotImplemented => Fault::Permanent,
        _ => Fault::Transient,
    };
    Error::client(what, e.to_string(), fault)
}
