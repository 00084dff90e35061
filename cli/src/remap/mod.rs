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
pub(crate) use compiled::{condition, Program};

#[cfg(not(feature = "vrl"))]
mod absent;
#[cfg(not(feature = "vrl"))]
pub(crate) use absent::{condition, Program};

/// What a program did with one record.
#[derive(Debug, PartialEq)]
#[cfg_attr(not(feature = "vrl"), allow(dead_code))] // no program runs without VRL
pub(crate) enum Outcome {
    /// The records it made: the record (`.`), or one per element when `.` became an array.
    Records(Vec<Value>),
    /// It called `abort`.
    Aborted(String),
    /// It failed (an error VRL raised at run time, or a result JSON cannot hold): the message,
    /// and the record as the program left it (VRL's notation as text where JSON cannot hold
    /// it).
    Failed(String, Value),
}
