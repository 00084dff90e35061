//! The Iceberg sink against a real catalog (the SQL catalog on the dev PostgreSQL) and store
//! (the dev S3), read back by pyiceberg through the same catalog: a table created by the sink
//! and written through cancels and restores — every record exactly once, each checkpoint's
//! files in one snapshot per writer; columns the records bring added; bad tables refused.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use common::*;
use rivus_connector_files::SchemaEvolution;
use rivus_core::error_policy::{ErrorPolicy, FileDeadLetterQueue};
use rivus_core::prelude::*;
use rivus_testkit::wait;
use serde_json::{json, Value};

/// The ids of `ids` read more than once, and those of `expected` not read.
fn twice_and_missing(ids: &[u64], expected: impl Iterator<Item = u64>) -> (Vec<u64>, Vec<u64>) {
    let mut counts = BTreeMap::<u64, usize>::new();
    for i in ids {
        *counts.entry(*i).or_default() += 1;
    }
    let twice = counts
        .iter()
        .filter(|(_, c)| **c > 1)
        .map(|(i, _)| *i)
        .collect();
    let missing = expected.filter(|i| !counts.contains_key(i)).collect();
    (twice, missing)
}

/// `n` records through two cancels and restores into a table the sink creates: pyiceberg
/// reads each once, with its values, from files under the table's `data/` whose columns carry
/// the table's field ids; each snapshot is one writer's sequence, none twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iceberg_exactly_once_on_s3_through_cancels_and_restores() {
    let (Some(lake), Some(py)) = (Lake::new("iceberg-once"), python()) else {
        return;
    };
    let table = "lake.orders";
    let sink = sink_into(&lake, table, |f| {
        f.target_file_size(16 * 1024).row_group_bytes(4 * 1024)
    });
    let backend = MemoryStateBackend::new();
    let name = rivus_testkit::services::unique_name("iceberg-once");
    let n = 20_000;
    for at in [5_000, 11_000] {
        let emitted = Arc::new(AtomicU64::new(0));
        let j = job_of(
            record,
            &name,
            n,
            Some(10_000),
            emitted.clone(),
            sink.clone(),
            &backend,
        );
        wait::cancel_at(j, &emitted, at).await;
    }
    let summary = job_of(
        record,
        &name,
        n,
        Some(10_000),
        Arc::default(),
        sink,
        &backend,
    )
    .run()
    .await
    .unwrap();
    assert!(summary.restored_from.is_some());

    let read = lake.read(&py, table);
    let ids = read.ids();
    let (twice, missing) = twice_and_missing(&ids, 0..n);
    assert!(
        twice.is_empty() && missing.is_empty(),
        "every record exactly once: {} read, twice {:?}…, missing {:?}…",
        ids.len(),
        &twice[..twice.len().min(20)],
        &missing[..missing.len().min(20)]
    );
    for r in read.rows.iter().step_by(997) {
        let i = r["id"].as_u64().unwrap();
        let want = record(i);
        assert_eq!(r["name"], want["name"], "{r}");
        assert_eq!(r["price"], want["price"], "{r}");
        assert_eq!(r["ok"], want["ok"], "{r}");
        assert_eq!(r["day"], want["day"], "{r}");
        let at = r["at"].as_str().unwrap();
        assert!(
            at.starts_with("2024-03-01 10:00:") && at.ends_with("+00:00"),
            "{r}"
        );
    }
    assert_eq!(
        read.schema,
        json!({"id": "1:long", "name": "2:string", "price": "3:double", "ok": "4:boolean",
               "day": "5:date", "at": "6:timestamptz"})
    );
    let data = format!("{}/lake/orders/data/", lake.catalog.warehouse);
    assert!(
        read.files.iter().all(|(f, _)| f.starts_with(&data)),
        "{:?}",
        read.files
    );
    // Files of about the target size, not one per checkpoint and writer: at most one smaller
    // file per writer and run (finished at a cancel or at the end).
    let bytes: u64 = read.files.iter().map(|(_, size)| size).sum();
    assert!(
        read.files.len() as u64 <= 2 * 3 + bytes / (16 * 1024),
        "{} files of {bytes} bytes",
        read.files.len()
    );
    let mut seen = BTreeSet::new();
    for s in &read.summaries {
        assert_eq!(s["operation"], "Operation.APPEND", "{s}");
        assert_eq!(s["rivus.job"], name.as_str(), "{s}");
        let key = (
            s["rivus.writer"].to_string(),
            s["rivus.sequence"].to_string(),
        );
        assert!(
            s["rivus.writer"].is_string() && s["rivus.sequence"].is_string(),
            "{s}"
        );
        assert!(seen.insert(key), "a writer's sequence committed twice: {s}");
    }
    // Three runs, two writers each: snapshots from writers of each run.
    let writers: BTreeSet<String> = read
        .summaries
        .iter()
        .map(|s| s["rivus.writer"].as_str().unwrap().to_owned())
        .collect();
    assert!(writers.len() >= 4, "{writers:?}");
}

fn growing(i: u64) -> Value {
    let mut r = record(i);
    if i >= 6_000 {
        r["extra"] = json!(i * 10);
    }
    if i >= 12_000 {
        r["tags"] = json!(["t", i % 3]);
    }
    if clash(i) {
        r["Name"] = json!("clash");
    }
    r
}

fn clash(i: u64) -> bool {
    i % 1_000 == 7
}

/// Columns added by the records (`schema_evolution = basic`), the job cancelled and restored
/// twice (the first column added in the first run, the second in the second): the table gains
/// both with new field ids, pyiceberg reads each record once with nulls before its field came;
/// a field clashing with a column in another case goes, with its record, to the dead letters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iceberg_columns_follow_the_records_through_restores() {
    let (Some(lake), Some(py)) = (Lake::new("iceberg-evolve"), python()) else {
        return;
    };
    let table = "lake.growing";
    let dir = tempfile::tempdir().unwrap();
    let dlq_path = dir.path().join("dead.jsonl");
    let dlq = Arc::new(FileDeadLetterQueue::open(&dlq_path).await.unwrap());
    let sink = sink_into(&lake, table, move |f| {
        f.target_file_size(256 * 1024)
            .schema_evolution(SchemaEvolution::Basic)
            .error_policy(ErrorPolicy::DeadLetter(dlq.clone()))
    });
    let backend = MemoryStateBackend::new();
    let name = rivus_testkit::services::unique_name("iceberg-evolve");
    let n = 24_000;
    for at in [8_000, 14_000] {
        let emitted = Arc::new(AtomicU64::new(0));
        let j = job_of(
            growing,
            &name,
            n,
            Some(10_000),
            emitted.clone(),
            sink.clone(),
            &backend,
        );
        wait::cancel_at(j, &emitted, at).await;
    }
    let summary = job_of(
        growing,
        &name,
        n,
        Some(10_000),
        Arc::default(),
        sink,
        &backend,
    )
    .run()
    .await
    .unwrap();
    assert!(summary.restored_from.is_some());

    let read = lake.read(&py, table);
    assert_eq!(read.schema["extra"], "7:long", "{:?}", read.schema);
    assert_eq!(read.schema["tags"], "8:string", "{:?}", read.schema);
    assert!(read.schema.get("Name").is_none(), "{:?}", read.schema);
    let ids = read.ids();
    let (twice, missing) = twice_and_missing(&ids, (0..n).filter(|i| !clash(*i)));
    assert!(
        twice.is_empty() && missing.is_empty() && ids.len() as u64 == n - n / 1_000,
        "every record exactly once, but those with `Name`: {} read, twice {:?}…, missing {:?}…",
        ids.len(),
        &twice[..twice.len().min(20)],
        &missing[..missing.len().min(20)]
    );
    for r in &read.rows {
        let i = r["id"].as_u64().unwrap();
        let extra = if i >= 6_000 {
            json!(i * 10)
        } else {
            Value::Null
        };
        assert_eq!(r["extra"], extra, "{r}");
        let tags = if i >= 12_000 {
            json!(format!("[\"t\",{}]", i % 3))
        } else {
            Value::Null
        };
        assert_eq!(r["tags"], tags, "{r}");
    }
    let letters = FileDeadLetterQueue::read_all(&dlq_path).await.unwrap();
    let dead: BTreeSet<u64> = letters
        .iter()
        .map(|l| {
            assert!(l.reason.contains("`Name`"), "{}", l.reason);
            let v: Value = serde_json::from_slice(&l.payload).unwrap();
            assert_eq!(v["Name"], "clash", "the record whole: {v}");
            v["id"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(
        dead,
        (0..n).filter(|i| clash(*i)).collect(),
        "each record with `Name` dead-lettered"
    );
}

/// A missing table is refused by `rivus check` and at open, naming `table`, unless
/// `create_table`; with it, the check says the table is created at start.
#[tokio::test]
async fn iceberg_a_missing_table_is_refused_unless_created() {
    let Some(lake) = Lake::new("iceberg-missing") else {
        return;
    };
    let e = lake
        .builder("lake.none")
        .report()
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("table") && e.contains("create_table"), "{e}");
    let said = lake
        .builder("lake.none")
        .create_table(true)
        .report()
        .await
        .unwrap();
    assert!(said.contains("created at start"), "{said}");
    let e = lake
        .builder("orders")
        .report()
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("table") && e.contains("namespace.table"), "{e}");
}
