//! What the table sinks' tests (Delta, Iceberg) share: the records and their columns, and a
//! small job of them into a table sink. Included by their `tests/common` (`#[path]`).

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use rivus_connector_files::{Column, ColumnType, FilesSink};
use rivus_sdk::prelude::*;
use rivus_testkit::SequenceSource;
use serde_json::{json, Value};

/// Record `i` of the tests.
pub(crate) fn record(i: u64) -> Value {
    json!({
        "id": i,
        "name": format!("name-{i}"),
        "price": i as f64 / 4.0,
        "ok": i.is_multiple_of(2),
        "day": format!("2024-03-{:02}", 1 + i % 28),
        "at": 1_709_287_200_000u64 + i,
    })
}

/// The columns of `record`.
pub(crate) fn columns() -> Vec<Column> {
    [
        ("id", ColumnType::Int64),
        ("name", ColumnType::String),
        ("price", ColumnType::Float64),
        ("ok", ColumnType::Boolean),
        ("day", ColumnType::Date),
        ("at", ColumnType::Timestamp),
    ]
    .map(|(name, ty)| Column::nullable(name, ty))
    .into()
}

/// `n` records `map` makes of a sequence (a source of `parallelism` subtasks, paced when
/// `per_second` is given) into `sink` (as many subtasks, named `sink_name`), checkpoints
/// every 100 ms into `backend`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn table_job(
    map: fn(u64) -> Value,
    name: &str,
    n: u64,
    parallelism: usize,
    per_second: Option<u64>,
    emitted: Arc<AtomicU64>,
    (sink_name, sink): (&str, impl Fn() -> FilesSink + Send + Sync + 'static),
    backend: &MemoryStateBackend,
) -> Job {
    Pipeline::new(name)
        .checkpointing(CheckpointConfig::new(
            Duration::from_millis(100),
            Arc::new(backend.clone()),
        ))
        .batch_size(500)
        .source("seq", parallelism, move |i| {
            let s = SequenceSource::new(i, parallelism, Some(n), emitted.clone());
            match per_second {
                Some(r) => s.paced(r),
                None => s,
            }
        })
        .map(map)
        .sink(sink_name, parallelism, move |_| sink())
        .unwrap()
}

/// The conformance suites' files: one required string column `v`, small files and row
/// groups (a test's records span several), bad records to `policy`.
pub(crate) fn suite_files(
    f: rivus_connector_files::FilesSinkBuilder,
    policy: rivus_sdk::error_policy::ErrorPolicy,
) -> rivus_connector_files::FilesSinkBuilder {
    f.schema(vec![Column {
        name: "v".into(),
        ty: ColumnType::String,
        nullable: false,
        field_id: None,
    }])
    .target_file_size(4 * 1024)
    .row_group_bytes(1024)
    .error_policy(policy)
}
