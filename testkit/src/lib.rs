//! # rivus-testkit
//!
//! What a connector author needs to test a rivus connector:
//!
//! - in-memory parts: [`VecSource`] (a replayable source with positions in checkpointed
//!   state and failure injection), [`CollectingSink`], [`TransactionalSink`] (two-phase commit
//!   into a shared [`TxnStore`]), and a [`SinkControl`] to make a sink fail or stall on command;
//! - test shapes every connector repeats: [`read_all`] (a bounded source read back into memory)
//!   and [`restart::sink_restart_mid_stream`] (a service restarted under a running sink);
//! - [`suite`]: the conformance suites [`suite::SourceSuite`] and [`suite::SinkSuite`], run
//!   against an external context the connector implements once;
//! - [`services`]: where the real servers started by `dev/services` are, and a check that
//!   fails under `CI=true` when one is missing (it never passes silently).

pub mod bench;
mod counting;
pub mod fault_proxy;
pub mod faults;
mod memory_log;
pub mod process;
mod read;
pub mod restart;
mod sequence;
pub mod services;
mod sinks;
mod source;
pub mod suite;
pub mod tls_front;
mod transactional;
pub mod wait;

pub use counting::CountingSink;
pub use memory_log::{LogFault, LogPositions, LogSource, MemoryLog, Resume};
pub use read::read_all;
pub use sequence::{run_records_into, run_sequence_into, SequenceSource};
pub use sinks::{CollectingSink, SinkControl};
pub use source::{VecSource, VecSourceState};
pub use transactional::{TransactionalSink, TxnStore};
