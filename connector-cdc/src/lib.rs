//! # rivus-connector-cdc
//!
//! Change data capture from PostgreSQL for rivus: [`PostgresCdcSource`] reads every insert,
//! update and delete of the tables of a publication from a logical replication slot (the
//! built-in `pgoutput` plugin), after a consistent snapshot of those tables taken at the
//! slot's starting point — nothing lost or doubled at the hand-off. Positions (the commit
//! position of a transaction and a change's index in it) are the source's checkpointed state;
//! the slot is told to release WAL only when a checkpoint completes, so a restore resumes
//! exactly after the last checkpointed change. Records are Debezium's envelope or flat rows
//! ([`Envelope`]), values mapped like Debezium's (see `value.rs`).
//!
//! - `wire/`: a small PostgreSQL client for replication connections and simple queries;
//! - `pgoutput.rs`: the replication stream's messages;
//! - `value.rs`: column values as JSON; `event.rs`: change records; `types.rs`: column
//!   types in records;
//! - `source/`: the source (checks and slot, snapshot, stream);
//! - `lsn.rs`: WAL positions.

mod error;
mod event;
mod lsn;
mod pgoutput;
#[cfg(feature = "pipeline-file")]
pub mod pipeline_file;
mod source;
mod types;
mod value;
pub mod wire;

pub use event::{Envelope, Op, UNCHANGED_TOAST};
pub use lsn::Lsn;
pub use source::{
    CdcState, PostgresCdcSource, PostgresCdcSourceBuilder, Range, SnapshotMode, SnapshotProgress,
    TableProgress, Upto,
};
