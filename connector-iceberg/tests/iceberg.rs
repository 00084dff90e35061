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
use rivus_sdk::error_policy::{ErrorPolicy, FileDeadLetterQueue};
use rivus_sdk::prelude::*;
use rivus_testkit::wait;
use serde_json::{json, Value};

/// The writers and sequences a snapshot's summary names (`rivus.writers`).
fn commits_of(summary: &Value) -> Vec<(&str, u64)> {
    summary["rivus.writers"]
        .as_str()
        .unwrap_or_else(|| panic!("no rivus.writers: {summary}"))
        .split(',')
        .map(|c| {
            let (writer, sequence) = c.rsplit_once(':').unwrap_or_else(|| panic!("{c}"));
            (writer, sequence.parse().unwrap())
        })
        .collect()
}

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
    let read = exactly_once(&lake, &py).await;
    // The SQL catalog places a table under the warehouse, and keeps every snapshot: writers
    // of each run.
    assert_eq!(
        read.location,
        format!("{}/lake/orders", lake.catalog.warehouse)
    );
    let writers: BTreeSet<&str> = read
        .summaries
        .iter()
        .flat_map(|s| commits_of(s).into_iter().map(|(w, _)| w))
        .collect();
    assert!(writers.len() >= 4, "{writers:?}");
}

/// The same through the dev REST catalog (Nessie), which places the table itself and keeps
/// only the current snapshot in the table's metadata: what was committed is known from the
/// table's properties, which it keeps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iceberg_exactly_once_through_a_rest_catalog() {
    let (Some(lake), Some(py)) = (Lake::rest("iceberg-rest"), python()) else {
        return;
    };
    let read = exactly_once(&lake, &py).await;
    assert!(
        read.location.starts_with("s3://") && read.location.contains(&lake.namespace),
        "{}",
        read.location
    );
}

/// 20 000 records through two cancels and restores into `lake`'s table `orders`, created by
/// the sink, checked as above; what pyiceberg read.
async fn exactly_once(lake: &Lake, py: &str) -> Read {
    let table = lake.table("orders");
    let table = table.as_str();
    let sink = sink_into(lake, table, |f| {
        f.target_file_size(16 * 1024).row_group_bytes(4 * 1024)
    });
    let backend = MemoryStateBackend::new();
    let name = rivus_testkit::services::unique_name("iceberg-once");
    let n = 20_000;
    wait::cut_then_finish(&[5_000, 11_000], |emitted| {
        job_of(
            record,
            &name,
            n,
            Some(10_000),
            emitted,
            sink.clone(),
            &backend,
        )
    })
    .await;

    let read = lake.read(py, table);
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
    let data = format!("{}/data/", read.location);
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
        // A group commit: each writer's sequence once, the newest checkpoint among them.
        let commits = commits_of(s);
        assert!(!commits.is_empty(), "{s}");
        for &(writer, sequence) in &commits {
            assert!(
                seen.insert((writer, sequence)),
                "a writer's sequence committed twice: {s}"
            );
        }
        let newest = commits.iter().map(|(_, q)| q / 2).max().unwrap();
        assert_eq!(s["rivus.checkpoint"], newest.to_string(), "{s}");
    }
    // Three runs, two writers each: the last run's writers' sequences in the table's
    // properties, the earlier runs' removed by its commits. (A writer whose subtask had
    // emitted all its records before the last run — subtasks keep their own pace — commits
    // nothing in it, so one writer of the last run may be all there is.)
    let writers: BTreeMap<&String, &Value> = read
        .properties
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.starts_with("rivus.sequence."))
        .collect();
    let owner = format!("rivus.sequence.{name}/iceberg/");
    let runs: BTreeSet<&str> = writers
        .keys()
        .map(|k| {
            let writer = k.strip_prefix(&owner).unwrap_or_else(|| panic!("{k}"));
            writer.split('-').next().unwrap()
        })
        .collect();
    assert!(
        (1..=2).contains(&writers.len()) && runs.len() == 1,
        "the last run's writers alone: {writers:?}"
    );
    read
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
    wait::cut_then_finish(&[8_000, 14_000], |emitted| {
        job_of(
            growing,
            &name,
            n,
            Some(10_000),
            emitted,
            sink.clone(),
            &backend,
        )
    })
    .await;

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

/// `create_table` without declared columns: the table starts with none and takes the
/// records' fields, typed from their values, before any file holding them is committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iceberg_a_table_created_from_the_records() {
    let (Some(lake), Some(py)) = (Lake::new("iceberg-inferred"), python()) else {
        return;
    };
    let table = "lake.inferred";
    let sink = {
        let lake = lake.clone();
        move || {
            lake.builder(table)
                .create_table(true)
                .files(|f| f.schema_evolution(SchemaEvolution::Basic))
                .build()
                .unwrap()
        }
    };
    let n = 3_000;
    let backend = MemoryStateBackend::new();
    let name = rivus_testkit::services::unique_name("iceberg-inferred");
    job_of(record, &name, n, None, Arc::default(), sink, &backend)
        .run()
        .await
        .unwrap();
    let read = lake.read(&py, table);
    assert_eq!(read.ids(), (0..n).collect::<Vec<_>>());
    let types: BTreeMap<&str, &str> = read
        .schema
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str().unwrap().split(':').nth(1).unwrap()))
        .collect();
    assert_eq!(
        types,
        BTreeMap::from([
            ("at", "long"),
            ("day", "string"),
            ("id", "long"),
            ("name", "string"),
            ("ok", "boolean"),
            ("price", "double"),
        ]),
        "{:?}",
        read.schema
    );
    let r = &read.rows[7];
    assert_eq!(
        (&r["name"], &r["ok"]),
        (&json!("name-7"), &json!(false)),
        "{r}"
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

/// Record `i` of the partitioned test: six minutes apart from 2024-03-01, so that 2 000 span
/// eight days and more, 240 a day.
fn spread(i: u64) -> Value {
    let mut r = record(i);
    r["at"] = json!(1_709_251_200_000u64 + i * 360_000);
    r
}

/// A table another engine (pyiceberg) created partitioned by `day(at)`, `bucket(4, id)` and
/// `ok`: the sink lays each file out in one partition, and its data file names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iceberg_partitioned_table_gets_each_file_in_its_partition() {
    let (Some(lake), Some(py)) = (Lake::new("iceberg-parts"), python()) else {
        return;
    };
    let table = "lake.parts";
    let create = r#"
import json, sys
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import *
from pyiceberg.partitioning import PartitionSpec, PartitionField
from pyiceberg.transforms import DayTransform, BucketTransform, IdentityTransform
name, table, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
catalog = SqlCatalog(name, **options)
catalog.create_namespace("lake")
schema = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
    NestedField(3, "price", DoubleType(), required=False),
    NestedField(4, "ok", BooleanType(), required=False),
    NestedField(5, "day", DateType(), required=False),
    NestedField(6, "at", TimestamptzType(), required=False))
spec = PartitionSpec(
    PartitionField(source_id=6, field_id=1000, transform=DayTransform(), name="at_day"),
    PartitionField(source_id=1, field_id=1001, transform=BucketTransform(4), name="id_bucket"),
    PartitionField(source_id=4, field_id=1002, transform=IdentityTransform(), name="ok"))
catalog.create_table(table, schema=schema, partition_spec=spec)
"#;
    lake.python(&py, create, table);
    partitioned_by_day_bucket_and_ok(&lake, &py, table, vec![]).await;
}

/// The same spec, given as `partition_by` to a table the sink creates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iceberg_a_table_created_partitioned_by_the_sink() {
    let (Some(lake), Some(py)) = (Lake::new("iceberg-created-parts"), python()) else {
        return;
    };
    let by = ["day(at)", "bucket(4, id)", "ok"]
        .map(String::from)
        .to_vec();
    partitioned_by_day_bucket_and_ok(&lake, &py, "lake.parts", by).await;
}

/// 2 000 records into `table` (created by the sink, partitioned by `by`, when `by` is not
/// empty): each row's partition, computed by pyiceberg's own transforms, is its file's; a
/// scan filtered on a day (pruning files by their partition values) reads exactly that
/// day's rows.
async fn partitioned_by_day_bucket_and_ok(lake: &Lake, py: &str, table: &str, by: Vec<String>) {
    let sink = {
        let (lake, table) = (lake.clone(), table.to_owned());
        move || {
            let b = lake.builder(&table);
            let b = if by.is_empty() {
                b
            } else {
                b.create_table(true).partition_by(by.clone())
            };
            b.files(|f| f.schema(columns()).target_file_size(64 * 1024))
                .build()
                .unwrap()
        }
    };
    let n = 2_000;
    let backend = MemoryStateBackend::new();
    let name = rivus_testkit::services::unique_name("iceberg-parts");
    let emitted = Arc::new(AtomicU64::new(0));
    job_of(spread, &name, n, None, emitted, sink, &backend)
        .run()
        .await
        .unwrap();

    let check = r#"
import datetime, json, sys
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
name, table, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
t = SqlCatalog(name, **options).load_table(table)
spec, schema = t.spec(), t.schema()
epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
def internal(v):
    if isinstance(v, datetime.datetime):
        return (v - epoch) // datetime.timedelta(microseconds=1)
    return v
files = rows = wrong = 0
ids = []
paths = []
for task in t.scan().plan_files():
    files += 1
    paths.append(task.file.file_path)
    with t.io.new_input(task.file.file_path).open() as f:
        data = pq.read_table(f).to_pylist()
    for r in data:
        rows += 1
        ids.append(r["id"])
        for i, field in enumerate(spec.fields):
            source = schema.find_field(field.source_id)
            want = field.transform.transform(source.field_type)(internal(r[source.name]))
            if want != task.file.partition[i]:
                wrong += 1
day = t.scan(row_filter="at >= '2024-03-02T00:00:00+00:00' and at < '2024-03-03T00:00:00+00:00'")
print(json.dumps({"files": files, "rows": rows, "distinct": len(set(ids)), "wrong": wrong,
                  "day_rows": len(day.to_arrow()), "day_files": len(list(day.plan_files())),
                  "spec": [f.name for f in spec.fields], "paths": paths[:3]}))
"#;
    let got: Value = serde_json::from_str(lake.python(py, check, table).trim()).unwrap();
    assert_eq!(got["spec"], json!(["at_day", "id_bucket", "ok"]), "{got}");
    assert_eq!(got["rows"], n, "{got}");
    assert_eq!(got["distinct"], n, "{got}");
    assert_eq!(got["wrong"], 0, "each row in its file's partition: {got}");
    // 2024-03-02 holds records 240..480 (six minutes apart from midnight on 03-01).
    assert_eq!(got["day_rows"], 240, "{got}");
    let (files, day_files) = (
        got["files"].as_u64().unwrap(),
        got["day_files"].as_u64().unwrap(),
    );
    assert!(
        (8..=files / 2).contains(&day_files),
        "a day's scan reads its partitions' files only (4 buckets × 2 of `ok` at least): {got}"
    );
    assert!(
        got["paths"][0]
            .as_str()
            .unwrap()
            .contains("/data/at_day=2024-03-0"),
        "files under their partition's directory: {got}"
    );
}

/// A partition spec changed by another engine (pyiceberg) while the sink's files wait for
/// their commit: the files were laid out by the old spec and carry its id, so their commit is
/// refused, naming the table — never added under the new spec's partition values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iceberg_files_of_an_older_partition_spec_are_refused_not_misfiled() {
    let (Some(lake), Some(py)) = (Lake::new("iceberg-spec"), python()) else {
        return;
    };
    let table = "lake.spec";
    let sink = {
        let (lake, table) = (lake.clone(), table.to_owned());
        move || {
            lake.builder(&table)
                .create_table(true)
                .partition_by(vec!["ok".to_owned()])
                .files(|f| f.schema(columns()).target_file_size(16 * 1024))
                .build()
                .unwrap()
        }
    };
    let backend = MemoryStateBackend::new();
    let name = rivus_testkit::services::unique_name("iceberg-spec");
    let emitted = Arc::new(AtomicU64::new(0));
    let job = job_of(
        spread,
        &name,
        1_000_000,
        Some(2_000),
        emitted,
        sink,
        &backend,
    );
    let history = job.checkpoint_history();
    let running = tokio::spawn(job.run());
    // Files committed under the first spec.
    let h = Arc::clone(&history);
    wait::until(
        std::time::Duration::from_secs(60),
        move || {
            let h = Arc::clone(&h);
            async move { h.totals().0 >= 2 }
        },
        || "two checkpoints",
    )
    .await;
    // The sink commits every checkpoint: the change is tried again when one came between.
    let evolve = r#"
import json, sys
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException
name, table, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
catalog = SqlCatalog(name, **options)
for attempt in range(100):
    try:
        with catalog.load_table(table).update_spec() as u:
            u.add_identity("day")
        break
    except CommitFailedException:
        continue
print(catalog.load_table(table).spec().spec_id)
"#;
    let spec = lake.python(&py, evolve, table);
    assert_eq!(spec.trim(), "1", "{spec}");
    let err = tokio::time::timeout(std::time::Duration::from_secs(120), running)
        .await
        .expect("the next commit is refused")
        .unwrap()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("partition spec") && err.contains("lake.spec"),
        "{err}"
    );
    // What was committed reads back under the spec it was laid out by.
    let read = lake.read(&py, table);
    let ids = read.ids();
    let (twice, _) = twice_and_missing(&ids, 0..0);
    assert!(
        !ids.is_empty() && twice.is_empty(),
        "{} rows, twice {twice:?}",
        ids.len()
    );
}
