//! Columns that follow the records (`schema_evolution = basic`) on a local disk, read back by
//! pyarrow: a field that is not a column becomes one in the next file (typed from its values),
//! earlier files keep their columns, a field that is only ever null adds none, and every record
//! is written once with its values.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use rivus_connector_files::{
    Column, ColumnType, Compression, FileFormat, FilesSink, ParquetCompression, SchemaEvolution,
};
use rivus_sdk::prelude::*;
use serde_json::{json, Value};

/// Record `i`: `id` and `name`; `extra` (an integer) from 3 000 on, `doc` (an object) from
/// 6 000 on; `note` always null.
fn growing(i: u64) -> Value {
    let mut r = json!({"id": i, "name": format!("name-{i}"), "note": null});
    if i >= 3_000 {
        r["extra"] = json!(i * 10);
    }
    if i >= 6_000 {
        r["doc"] = json!({"k": i});
    }
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_field_that_is_not_a_column_becomes_one_in_the_next_file() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let n = 9_000;
    let sink = move |_| {
        FilesSink::builder(&url)
            .format(FileFormat::Parquet(ParquetCompression::Zstd))
            .schema(vec![
                Column::nullable("id", ColumnType::Int64),
                Column::nullable("name", ColumnType::String),
            ])
            .schema_evolution(SchemaEvolution::Basic)
            .build()
            .unwrap()
    };
    Pipeline::new(rivus_testkit::services::unique_name("files-evolve"))
        .checkpointing(CheckpointConfig::new(
            Duration::from_millis(100),
            Arc::new(MemoryStateBackend::new()),
        ))
        .batch_size(500)
        .source("seq", 1, move |i| {
            rivus_testkit::SequenceSource::new(i, 1, Some(n), Arc::default())
        })
        .map(growing)
        .sink("files", 1, sink)
        .unwrap()
        .run()
        .await
        .unwrap();

    let files = local_files(dir.path());
    let (schemas, rows) = pyarrow_read(&py, "parquet", &files);
    // Each file has one set of columns: the columns change twice, so three files.
    assert_eq!(
        schemas,
        vec![
            json!({"id": "int64", "name": "string"}),
            json!({"extra": "int64", "id": "int64", "name": "string"}),
            json!({"doc": "string", "extra": "int64", "id": "int64", "name": "string"}),
        ],
        "{files:?}"
    );
    let mut ids: Vec<u64> = rows.iter().map(|r| r["id"].as_u64().unwrap()).collect();
    ids.sort();
    assert_eq!(ids, (0..n).collect::<Vec<_>>(), "every record once");
    for r in &rows {
        let i = r["id"].as_u64().unwrap();
        assert_eq!(r["name"], json!(format!("name-{i}")));
        match i {
            // Before its field came: missing, or null when its batch brought it.
            ..3_000 => assert!(r.get("extra").is_none_or(Value::is_null), "{r}"),
            _ => assert_eq!(r["extra"], json!(i * 10), "{r}"),
        }
        if i >= 6_000 {
            assert_eq!(r["doc"], json!(format!("{{\"k\":{i}}}")), "{r}");
        }
    }
}

#[test]
fn line_files_have_no_columns_to_add() {
    let e = FilesSink::builder("file:///tmp/x")
        .format(FileFormat::JsonLines(Compression::None))
        .schema_evolution(SchemaEvolution::Basic)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("schema_evolution"), "{e}");
}
