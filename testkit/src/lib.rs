//! # rivus-testkit
//!
//! What a connector author needs to test a rivus connector:
//!
//! - in-memory parts: [`VecSource`] (a replayable source with positions in checkpointed
//!   state and failure injection), [`CollectingSink`], [`TransactionalSink`] (two-phase commit
//!   into a shared [`TxnStore`]), and a [`SinkControl`] to make a sink fail or stall on command;
//! - [`services`]: where the real servers started by `dev/services` are, and a check that
//!   fails under `CI=true` when one is missing (it never passes silently).

mod sequence;
pub mod services;
mod sinks;
mod source;
mod transactional;

pub use sequence::SequenceSource;
pub use sinks::{CollectingSink, SinkControl};
pub use source::{VecSource, VecSourceState};
pub use transactional::{TransactionalSink, TxnStore};
