//! # rivus-connector-jdbc
//!
//! SQL databases for rivus, on [sqlx](https://docs.rs/sqlx): PostgreSQL, MySQL/MariaDB and
//! SQLite behind one API — the role of Flink's JDBC connector, without a JVM.
//!
//! - [`JdbcSink`]: records become [`RowChange`]s (write or delete a row); the sink reads the
//!   table's columns and key from the catalog at start, converts each field for its column
//!   (a wrong type names the record and the column), and core's `BulkProcessor` sends batches
//!   as multi-row `INSERT`/upsert statements (PostgreSQL: `UNNEST` arrays or `COPY`). Rows the
//!   database refuses are isolated row by row and go to the error policy; the rest of the
//!   batch is kept. At-least-once everywhere (upserts make it effectively exactly-once);
//!   exactly-once on PostgreSQL (prepared transactions) and MySQL/MariaDB (XA), committed
//!   when the checkpoint completes.
//! - [`JdbcSource`]: a query read by keyset pages on tracking columns, bounded (split into
//!   ranges of a numeric column across subtasks) or continuous (polling for new rows), with
//!   positions checkpointed — exactly-once.

mod admin;
mod change;
pub mod config;
mod copy;
mod db;
mod dialect;
mod error;
mod evolve;
#[cfg(feature = "pipeline-file")]
pub mod pipeline_file;
mod sink;
mod source;
mod statement;
mod table;
mod value;

pub use admin::{run_script, table_report};
pub use config::JdbcConfig;
pub use dialect::Dialect;
pub use evolve::SchemaEvolution;
pub use sink::{JdbcSink, JdbcSinkBuilder, JdbcSinkState, Row, RowChange};
pub use source::{JdbcSource, JdbcSourceBuilder, JdbcSourceState, SplitPosition};
pub use statement::{PgMethod, WriteMode};
pub use table::{TableColumn, TableSchema};
pub use value::{BytesText, Class, SqlValue};

pub use rivus_sdk::secrets::redact_url as redact;
