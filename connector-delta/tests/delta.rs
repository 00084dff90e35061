//! The Delta sink against real tables, read back by `deltalake` (delta-rs, from `dev/python`):
//! a local table created by the sink and appended to; a table on the dev object store written
//! through cancels and restores — every record exactly once, each checkpoint's files in one
//! commit carrying its writer's application transaction; bad tables refused at open.

mod common;

use std::sync::Arc;

use common::*;
use rivus_connector_delta::{DeltaSink, DeltaSinkBuilder};
use rivus_connector_files::SchemaEvolution;
use rivus_sdk::error_policy::{ErrorPolicy, FileDeadLetterQueue};
use rivus_sdk::prelude::*;
use rivus_testkit::wait;
use serde_json::{json, Value};

/// `n` records into `table` (files of `file_size` bytes) by a job named `name`, cancelled when
/// each attempt has emitted `cancels[i]` records and restored, then run to the end (two
/// subtasks, 10 000 records a second each); asserts the last run restored and `deltalake`
/// reads every record exactly once.
async fn through_cancels(
    table: &Table,
    py: &str,
    name: &str,
    n: u64,
    cancels: [u64; 2],
    file_size: u64,
) {
    let sink = sink_into(table, move |f| f.target_file_size(file_size));
    let backend = MemoryStateBackend::new();
    wait::cut_then_finish(&cancels, |emitted| {
        job(name, n, 2, Some(10_000), emitted, sink.clone(), &backend)
    })
    .await;
    assert_eq!(
        table.read(py).ids(),
        (0..n).collect::<Vec<_>>(),
        "every record exactly once"
    );
}

/// A run of `n` records at two subtasks to the end, as a new job (no checkpoint to restore).
async fn fresh_run(name: &str, n: u64, sink: impl Fn() -> DeltaSink + Send + Sync + 'static) {
    job(
        name,
        n,
        2,
        None,
        Arc::default(),
        sink,
        &MemoryStateBackend::new(),
    )
    .run()
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_a_local_table_is_created_appended_to_and_read_by_deltalake() {
    let Some(py) = python() else { return };
    let table = Table::local();
    let sink = sink_into(&table, |f| {
        f.target_file_size(16 * 1024).row_group_bytes(4 * 1024)
    });
    let n = 20_000;
    let name = rivus_testkit::services::unique_name("delta-local");
    for round in 0..2 {
        fresh_run(&name, n, sink.clone()).await;
        let read = table.read(&py);
        let want: Vec<u64> = (0..n)
            .flat_map(|i| std::iter::repeat_n(i, round + 1))
            .collect();
        assert_eq!(
            read.ids(),
            want,
            "round {round}: every record, once per run"
        );
        assert!(read.files > 2, "files rolled by size: {read:?}");
        if round == 0 {
            assert_eq!(
                read.rows[3],
                serde_json::json!({"id": 3, "name": "name-3", "price": 0.75, "ok": false,
                    "day": "2024-03-04", "at": "2024-03-01 10:00:00.003000+00:00"})
            );
            assert_eq!(read.schema["id"], "int64");
            assert_eq!(read.schema["at"], "timestamp[us, tz=UTC]");
        }
    }
    let Table::Local(dir) = &table else {
        unreachable!()
    };
    let txns = local_txns(dir.path());
    assert!(!txns.is_empty(), "commits carry application transactions");
    let check = DeltaSinkBuilder::new(table.url()).report().await.unwrap();
    assert!(
        check.contains(", 6 columns"),
        "`rivus check` reads the log: {check}"
    );
    for (app, versions) in &txns {
        assert!(
            versions.windows(2).all(|w| w[0] < w[1]),
            "{app}: {versions:?}"
        );
    }
}

/// `create_table` without declared columns: the table starts with none and takes the
/// records' fields, typed from their values, before any file holding them is committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_a_table_created_from_the_records() {
    let Some(py) = python() else { return };
    let table = Table::local();
    let url = table.url();
    let name = rivus_testkit::services::unique_name("delta-inferred");
    let n = 3_000;
    fresh_run(&name, n, move || {
        DeltaSinkBuilder::new(&url)
            .create_table(true)
            .files(|f| f.schema_evolution(SchemaEvolution::Basic))
            .build()
            .unwrap()
    })
    .await;
    let read = table.read(&py);
    assert_eq!(read.ids(), (0..n).collect::<Vec<_>>());
    assert_eq!(
        read.schema,
        serde_json::json!({"id": "int64", "name": "string", "price": "double", "ok": "bool",
            "day": "string", "at": "int64"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_exactly_once_on_s3_through_cancels_and_restores() {
    let (Some(table), Some(py)) = (Table::s3("delta-eo"), python()) else {
        return;
    };
    let name = rivus_testkit::services::unique_name("delta-eo");
    through_cancels(&table, &py, &name, 60_000, [15_000, 35_000], 256 * 1024).await;
}

/// The same on a local disk, where the log can be read here: each run's writers commit under
/// their own application ids, each with increasing versions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_exactly_once_locally_with_a_txn_per_writer_of_each_run() {
    let Some(py) = python() else { return };
    let table = Table::local();
    let name = rivus_testkit::services::unique_name("delta-local-eo");
    through_cancels(&table, &py, &name, 40_000, [10_000, 20_000], 128 * 1024).await;
    let Table::Local(dir) = &table else {
        unreachable!()
    };
    let txns = local_txns(dir.path());
    let prefix = format!("rivus-{name}-delta-");
    assert!(
        txns.keys().all(|app| app.starts_with(&prefix)),
        "every commit names the job and the sink (restores too): {txns:?}"
    );
    let attempts: std::collections::BTreeSet<&str> = txns
        .keys()
        .map(|app| app.rsplitn(3, '-').nth(2).unwrap())
        .collect();
    assert_eq!(attempts.len(), 3, "three runs, three attempts: {txns:?}");
    for (app, versions) in &txns {
        assert!(
            versions.windows(2).all(|w| w[0] < w[1]),
            "{app}: {versions:?}"
        );
    }
}

/// `record(i)` gaining fields: `extra` (an integer) from 10 000 on, `tags` (an array) from
/// 20 000 on, and every thousandth a `Name` — which Delta's case-insensitive names cannot take
/// beside `name`.
fn growing(i: u64) -> Value {
    let mut r = record(i);
    if i >= 10_000 {
        r["extra"] = json!(i * 10);
    }
    if i >= 20_000 {
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

/// Columns added by the records (`schema_evolution = basic`) on S3, the job cancelled and
/// restored twice (the first added column in the first run, the second in the second): the
/// table gains both, `deltalake` reads each record once with its values and nulls where the
/// field had not come yet; a field clashing with a column in another case goes, with its whole
/// record, to the dead-letter file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_columns_follow_the_records_through_restores() {
    let (Some(table), Some(py)) = (Table::s3("delta-evolve"), python()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let dlq_path = dir.path().join("dead.jsonl");
    let dlq = Arc::new(FileDeadLetterQueue::open(&dlq_path).await.unwrap());
    let sink = sink_into(&table, move |f| {
        f.target_file_size(256 * 1024)
            .schema_evolution(SchemaEvolution::Basic)
            .error_policy(ErrorPolicy::DeadLetter(dlq.clone()))
    });
    let backend = MemoryStateBackend::new();
    let name = rivus_testkit::services::unique_name("delta-evolve");
    let n = 40_000;
    wait::cut_then_finish(&[12_000, 16_000], |emitted| {
        job_of(
            growing,
            &name,
            n,
            2,
            Some(10_000),
            emitted,
            sink.clone(),
            &backend,
        )
    })
    .await;

    let read = table.read(&py);
    assert_eq!(read.schema["extra"], "int64", "{:?}", read.schema);
    assert_eq!(read.schema["tags"], "string", "{:?}", read.schema);
    assert!(read.schema.get("Name").is_none(), "{:?}", read.schema);
    let ids = read.ids();
    let mut counts = std::collections::BTreeMap::<u64, usize>::new();
    for i in &ids {
        *counts.entry(*i).or_default() += 1;
    }
    let twice: Vec<u64> = counts
        .iter()
        .filter(|(_, c)| **c > 1)
        .map(|(i, _)| *i)
        .collect();
    let missing: Vec<u64> = (0..n)
        .filter(|i| !clash(*i) && !counts.contains_key(i))
        .collect();
    assert!(
        twice.is_empty() && missing.is_empty() && ids.len() as u64 == n - n / 1_000,
        "every record exactly once, but those with `Name`: {} read, twice {:?}…, missing {:?}…",
        ids.len(),
        &twice[..twice.len().min(20)],
        &missing[..missing.len().min(20)]
    );
    for r in &read.rows {
        let i = r["id"].as_u64().unwrap();
        let extra = if i >= 10_000 {
            json!(i * 10)
        } else {
            Value::Null
        };
        assert_eq!(r["extra"], extra, "{r}");
        let tags = if i >= 20_000 {
            json!(format!("[\"t\",{}]", i % 3))
        } else {
            Value::Null
        };
        assert_eq!(r["tags"], tags, "{r}");
    }
    let letters = FileDeadLetterQueue::read_all(&dlq_path).await.unwrap();
    let dead: std::collections::BTreeSet<u64> = letters
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

/// `record(i)`, every 500th with a `day` that is not a date.
fn dated(i: u64) -> Value {
    let mut r = record(i);
    if i % 500 == 499 {
        r["day"] = json!("someday");
    }
    r
}

/// A table another engine made, partitioned by `ok` and `day` (`deltalake`'s
/// `write_deltalake(partition_by=...)`): the sink writes each record under `ok=…/day=…/`,
/// leaves the partition columns out of the files and names their values in the log;
/// `deltalake` reads every record with its own values, and a record whose `day` is not a date
/// goes to the dead-letter file whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_a_partitioned_table_gets_its_files_in_partition_directories() {
    let Some(py) = python() else { return };
    let table = Table::local();
    let Table::Local(dir) = &table else {
        unreachable!()
    };
    let create = r#"
import sys, pyarrow as pa
from deltalake import write_deltalake
schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("price", pa.float64()),
    ("ok", pa.bool_()), ("day", pa.date32()), ("at", pa.timestamp("us", tz="UTC"))])
write_deltalake(sys.argv[1], schema.empty_table(), partition_by=["ok", "day"])
"#;
    let made = std::process::Command::new(&py)
        .args(["-c", create, &dir.path().display().to_string()])
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let dead = tempfile::tempdir().unwrap();
    let dlq_path = dead.path().join("dead.jsonl");
    let dlq = Arc::new(FileDeadLetterQueue::open(&dlq_path).await.unwrap());
    let url = table.url();
    let sink = move || {
        let dlq = dlq.clone();
        DeltaSinkBuilder::new(&url)
            .files(move |f| f.error_policy(ErrorPolicy::DeadLetter(dlq)))
            .build()
            .unwrap()
    };
    let n = 6_000;
    let name = rivus_testkit::services::unique_name("delta-partitioned");
    job_of(
        dated,
        &name,
        n,
        2,
        None,
        Arc::default(),
        sink,
        &MemoryStateBackend::new(),
    )
    .run()
    .await
    .unwrap();

    let read = table.read(&py);
    let bad = |i: u64| i % 500 == 499;
    assert_eq!(
        read.ids(),
        (0..n).filter(|i| !bad(*i)).collect::<Vec<_>>(),
        "every record once, but those without a date"
    );
    for r in &read.rows {
        let want = record(r["id"].as_u64().unwrap());
        assert_eq!(r["day"], want["day"], "{r}");
        assert_eq!(r["ok"], want["ok"], "{r}");
        assert_eq!(r["name"], want["name"], "{r}");
    }
    let partition_dirs = std::fs::read_dir(dir.path().join("ok=true"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("day=2024-03-"))
        .count();
    assert_eq!(partition_dirs, 14, "a directory per even day of `ok=true`");
    let letters = FileDeadLetterQueue::read_all(&dlq_path).await.unwrap();
    let ids: Vec<u64> = letters
        .iter()
        .map(|l| {
            assert!(l.reason.contains("`day`"), "{}", l.reason);
            let v: Value = serde_json::from_slice(&l.payload).unwrap();
            v["id"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(ids.len() as u64, n / 500, "{ids:?}");
}

#[tokio::test]
async fn delta_a_missing_table_is_refused_unless_created() {
    let table = Table::local();
    let url = table.url();
    let err = Pipeline::new("delta-missing")
        .source("seq", 1, |i| {
            rivus_testkit::SequenceSource::new(i, 1, Some(10), Arc::default())
        })
        .map(record)
        .sink("delta", 1, move |_| {
            DeltaSinkBuilder::new(&url).build().unwrap()
        })
        .unwrap()
        .run()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("holds no Delta table"), "{err}");
    assert!(err.to_string().contains("create_table"), "{err}");
    // `rivus check` says the same before a start, and that a table would be created.
    let check = DeltaSinkBuilder::new(table.url())
        .report()
        .await
        .unwrap_err();
    assert!(check.to_string().contains("create_table"), "{check}");
    let check = DeltaSinkBuilder::new(table.url())
        .create_table(true)
        .report()
        .await
        .unwrap();
    assert!(check.contains("no table yet; created at start"), "{check}");
}

/// A table that forgets application transactions (`delta.setTransactionRetentionDuration`) is
/// refused at open, naming the property: a restore after they expired would commit its files
/// again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_a_table_that_expires_transactions_is_refused_by_name() {
    let table = Table::local();
    let sink = sink_into(&table, |f| f);
    let name = rivus_testkit::services::unique_name("delta-txn-retention");
    fresh_run(&name, 10, sink.clone()).await;
    let Table::Local(dir) = &table else {
        unreachable!()
    };
    // A further version setting the property, as another engine's ALTER TABLE would.
    let log = dir.path().join("_delta_log");
    let first = std::fs::read_to_string(log.join(format!("{:020}.json", 0))).unwrap();
    let mut metadata: Value = first
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|a| a.get("metaData").is_some())
        .unwrap();
    metadata["metaData"]["configuration"]["delta.setTransactionRetentionDuration"] =
        json!("interval 1 hours");
    let next = std::fs::read_dir(&log)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "json")
        })
        .count();
    std::fs::write(
        log.join(format!("{next:020}.json")),
        format!("{metadata}\n"),
    )
    .unwrap();
    let err = Pipeline::new(name.as_str())
        .source("seq", 1, |i| {
            rivus_testkit::SequenceSource::new(i, 1, Some(10), Arc::default())
        })
        .map(record)
        .sink("delta", 1, move |_| sink())
        .unwrap()
        .run()
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("delta.setTransactionRetentionDuration") && err.contains("3600s"),
        "{err}"
    );
}

/// Every tenth version carries the log's checkpoint, written by the sink: six runs of two
/// writers make at least twelve versions; readers (and the sink's own `txn` lookups) start from
/// the checkpoint, and `deltalake` still reads every run's records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_log_is_checkpointed_every_ten_versions() {
    checkpointed_every_ten_versions().await;
}

/// The same on a single-threaded runtime, where the kernel's checkpoint writer gets a runtime
/// of its own.
#[tokio::test]
async fn delta_log_is_checkpointed_on_a_single_threaded_runtime_too() {
    checkpointed_every_ten_versions().await;
}

async fn checkpointed_every_ten_versions() {
    let Some(py) = python() else { return };
    let table = Table::local();
    let sink = sink_into(&table, |f| f);
    let (n, runs) = (500, 6);
    let name = rivus_testkit::services::unique_name("delta-checkpoints");
    for _ in 0..runs {
        fresh_run(&name, n, sink.clone()).await;
    }
    let Table::Local(dir) = &table else {
        unreachable!()
    };
    let log = dir.path().join("_delta_log");
    let commits = std::fs::read_dir(&log)
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().ends_with(".json")
        })
        .count();
    assert!(commits >= 12, "{commits} versions");
    assert!(
        log.join("00000000000000000010.checkpoint.parquet")
            .is_file(),
        "the checkpoint of version 10"
    );
    let last: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(log.join("_last_checkpoint")).unwrap())
            .unwrap();
    assert_eq!(last["version"], 10, "{last}");
    let want: Vec<u64> = (0..n).flat_map(|i| std::iter::repeat_n(i, runs)).collect();
    assert_eq!(table.read(&py).ids(), want, "every run's records");
}
