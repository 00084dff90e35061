//! VRL, the Vector Remap Language, in pipeline files: the `remap` transform, and the
//! conditions of `filter` (`condition = "…"`) and `route` (`route.NAME = "…"`). A program is
//! compiled once, when the file is read — `rivus validate` prints VRL's own diagnostics under
//! the component's path — with the functions [`functions::enabled`] lists, and runs on each
//! record as a VRL value ([`value`]). Built without the `vrl` feature (on by default), a
//! file using VRL is refused when read, naming the component.

use serde_json::Value;

#[cfg(feature = "vrl")]
mod compiled;
#[cfg(feature = "vrl")]
pub(crate) mod functions;
#[cfg(feature = "vrl")]
pub(crate) mod value;
#[cfg(feature = "vrl")]
pub(crate) use compiled::{condition, run_chain, Program};

#[cfg(not(feature = "vrl"))]
mod absent;
#[cfg(not(feature = "vrl"))]
pub(crate) use absent::{condition, run_chain, Program};

/// One `remap` of a chain, and what its options say about an `abort` and a failure.
#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "vrl"), allow(dead_code))] // no program runs without VRL
pub(crate) struct Link {
    pub program: std::sync::Arc<Program>,
    pub drop_on_error: bool,
    pub drop_on_abort: bool,
}

/// What a chain of remaps made of one record (one of several when a program made `.` an
/// array).
#[derive(Debug, PartialEq)]
#[cfg_attr(not(feature = "vrl"), allow(dead_code))] // no program runs without VRL
pub(crate) enum Ran {
    /// A record passed on.
    Record(Value),
    /// Dropped and counted: by `abort`, or by a failure with `drop_on_error`.
    Dropped(&'static str),
    /// A failure (an error VRL raised at run time, or a result JSON cannot hold): VRL's
    /// message, and the record as it came into the failing remap (VRL's notation as text where
    /// JSON cannot hold it).
    Failed { message: String, record: Value },
}
