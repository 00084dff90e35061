//! A small PostgreSQL client for what logical replication needs and general clients do not
//! offer: a replication connection (`replication=database`) that creates slots with an
//! exported snapshot and streams the write-ahead log, plus simple queries (text results) for
//! snapshots and catalog reads. Message encoding and SCRAM come from `postgres-protocol`.

mod conn;
mod message;
/// Readers of message fields, shared with the replication stream's parser.
pub(crate) mod message_parts {
    pub(crate) use super::message::{cstr, get_i16, get_i32, get_u64, invalid, need};
}
mod params;

pub use conn::{Connection, Rows, WireError};
pub use message::ServerError;
pub use params::{ConnParams, SslMode};
