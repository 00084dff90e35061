//! Applying a change stream by key (`apply_changes`) to a Delta table on the dev S3 store,
//! read back by `deltalake`: inserts, updates (some without an unchanged TOASTed column) and
//! deletes, the job cancelled and restored twice — the table equals the source's rows, no
//! placeholder ever written, and a record that is not a change goes to the error policy whole.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use common::*;
use rivus_sdk::change::UNCHANGED;
use rivus_sdk::error_policy::{ErrorPolicy, FileDeadLetterQueue};
use rivus_sdk::prelude::*;
use rivus_testkit::wait;
use serde_json::{json, Value};

/// Keys the changes touch.
const KEYS: u64 = 500;
/// Changes in the stream.
const N: u64 = 20_000;

/// The stream (Debezium envelopes, as `postgres-cdc` sends them) and the rows it leaves.
struct Stream {
    changes: Vec<Value>,
    rows: BTreeMap<u64, Value>,
}

/// Change `i` touches key `i * 7919 % KEYS`: an insert when the key has no row, else a delete
/// every fifth change, else an update — every fourth of which leaves `doc` out (unchanged and
/// TOASTed: Debezium's placeholder). Every 997th change is not a change record at all.
fn stream() -> &'static Stream {
    static STREAM: OnceLock<Stream> = OnceLock::new();
    STREAM.get_or_init(|| {
        let mut rows: BTreeMap<u64, Value> = BTreeMap::new();
        let mut changes = Vec::new();
        let source = json!({"table": "items", "schema": "public"});
        for i in 0..N {
            if i % 997 == 996 {
                changes.push(json!({"not": "a change", "i": i}));
                continue;
            }
            let id = i * 7919 % KEYS;
            let change = match rows.get(&id) {
                None => {
                    let row = json!({"id": id, "name": format!("name-{id}"), "n": i,
                        "doc": format!("doc-{i}")});
                    rows.insert(id, row.clone());
                    json!({"op": "c", "before": null, "after": row, "source": source})
                }
                Some(_) if i % 5 == 0 => {
                    rows.remove(&id);
                    json!({"op": "d", "before": {"id": id}, "after": null, "source": source})
                }
                Some(old) => {
                    let toast = i % 4 == 0;
                    let doc = if toast {
                        old["doc"].clone()
                    } else {
                        json!(format!("doc-{i}"))
                    };
                    let row = json!({"id": id, "name": format!("name-{id}"), "n": i, "doc": doc});
                    rows.insert(id, row.clone());
                    let mut after = row;
                    if toast {
                        after["doc"] = json!(UNCHANGED);
                    }
                    json!({"op": "u", "before": null, "after": after, "source": source})
                }
            };
            changes.push(change);
        }
        Stream { changes, rows }
    })
}

fn change(i: u64) -> Value {
    stream().changes[i as usize].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_changes_applied_by_key_through_restores_equal_the_source() {
    let (Some(table), Some(py)) = (Table::s3("delta-changes"), python()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let dlq_path = dir.path().join("dead.jsonl");
    let dlq = Arc::new(FileDeadLetterQueue::open(&dlq_path).await.unwrap());
    let (url, s3) = match &table {
        Table::S3 { url, s3, .. } => (url.clone(), s3.clone()),
        Table::Local(_) => unreachable!(),
    };
    let sink = move || {
        let dlq = dlq.clone();
        rivus_connector_delta::DeltaSinkBuilder::new(&url)
            .s3(s3.clone())
            .create_table(true)
            .apply_changes(vec!["id".into()])
            .files(move |f| {
                f.schema(keyed_columns())
                    .error_policy(ErrorPolicy::DeadLetter(dlq))
            })
            .build()
            .unwrap()
    };
    let backend = MemoryStateBackend::new();
    let name = rivus_testkit::services::unique_name("delta-changes");
    wait::cut_then_finish(&[6_000, 5_000], |emitted| {
        job_of(
            change,
            &name,
            N,
            1,
            Some(10_000),
            emitted,
            sink.clone(),
            &backend,
        )
    })
    .await;

    let read = table.read(&py);
    // Change files are deleted once a later checkpoint completed: those of the last ones stay.
    if let Table::S3 { url, endpoint, .. } = &table {
        let prefix = url.splitn(4, '/').nth(3).unwrap();
        let left = rivus_testkit::services::s3_keys(endpoint, &format!("{prefix}/_changes/"));
        assert!(left.len() <= 3, "change files left: {left:?}");
    }
    let want: Vec<Value> = stream().rows.values().cloned().collect();
    assert_eq!(read.rows.len(), want.len(), "one row per live key");
    for (got, want) in read.rows.iter().zip(&want) {
        assert_eq!(got, want, "the row as the source has it");
    }
    assert!(
        read.files <= 3,
        "a merge writes one file of what it rewrites: {} files",
        read.files
    );
    assert!(
        !read.schema.as_object().unwrap().contains_key("_change"),
        "{:?}",
        read.schema
    );
    let letters = FileDeadLetterQueue::read_all(&dlq_path).await.unwrap();
    let dead: std::collections::BTreeSet<u64> = letters
        .iter()
        .map(|l| {
            let v: Value = serde_json::from_slice(&l.payload).unwrap();
            assert_eq!(v["not"], "a change", "the record whole: {v}");
            v["i"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(
        dead,
        (0..N).filter(|i| i % 997 == 996).collect(),
        "every record that is not a change dead-lettered"
    );
}

/// Update `i`: one of ten keys from 100.
fn update(i: u64) -> Value {
    let id = 100 + i % 10;
    json!({"op": "u", "before": null, "source": {"table": "t"},
        "after": {"id": id, "name": format!("name-{id}"), "n": i + 1,
            "doc": UNCHANGED}})
}

/// A merge writes files of about the target size sorted by key, and skips the files whose key
/// statistics lie outside the changed keys: 6 000 keys inserted in one merge (files of ~32 KiB
/// in key order), then ten of them updated in another — one file read and rewritten, the
/// others neither — and `deltalake` reads every row with its last values (the unchanged `doc`
/// kept).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_changes_rewrite_only_the_files_holding_changed_keys() {
    let Some(py) = python() else { return };
    // The merges' counts, labelled by table (the only test of this binary that installs one).
    let recorder = metrics_util::debugging::DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().unwrap();
    // A run's files read and rewritten by merges of `table` (a snapshot drains the counters).
    let counts = |table: &str| -> (u64, u64) {
        let mut out = (0, 0);
        for (k, _, _, v) in snapshotter.snapshot().into_vec() {
            let of_table = k
                .key()
                .labels()
                .any(|l| l.key() == "table" && l.value().starts_with(table));
            let metrics_util::debugging::DebugValue::Counter(n) = v else {
                continue;
            };
            match k.key().name() {
                "rivus_delta_merge_files_read" if of_table => out.0 += n,
                "rivus_delta_merge_files_rewritten" if of_table => out.1 += n,
                _ => {}
            }
        }
        out
    };
    let table = Table::local();
    let url = table.url();
    let sink = keyed_sink(url);
    let name = rivus_testkit::services::unique_name("delta-changes-files");
    let n = 6_000;
    let mut read_rewritten = Vec::new();
    for (map, count) in [(keyed_insert as fn(u64) -> Value, n), (update, 20)] {
        // Checkpoints far apart: the end of the input's is the only one, so each run is one
        // merge (and the files' boundaries do not depend on timing).
        let sink = sink.clone();
        Pipeline::new(&name)
            .checkpointing(CheckpointConfig::new(
                std::time::Duration::from_secs(3_600),
                Arc::new(MemoryStateBackend::new()),
            ))
            .batch_size(500)
            .source("seq", 1, move |i| {
                rivus_testkit::SequenceSource::new(i, 1, Some(count), Arc::default())
            })
            .map(map)
            .sink("delta", 1, move |_| sink())
            .unwrap()
            .run()
            .await
            .unwrap();
        read_rewritten.push(counts(&table.url()));
    }
    assert_eq!(
        read_rewritten[0],
        (0, 0),
        "inserts into an empty table read none"
    );
    assert_eq!(
        read_rewritten[1],
        (1, 1),
        "ten keys of one file: that file alone"
    );
    let read = table.read(&py);
    assert_eq!(read.ids(), (0..n).collect::<Vec<_>>(), "every key once");
    for r in &read.rows {
        let id = r["id"].as_u64().unwrap();
        let want_n = if (100..110).contains(&id) {
            id - 100 + 11
        } else {
            0
        };
        assert_eq!(r["n"], json!(want_n), "{r}");
        assert_eq!(
            r["doc"],
            json!("x".repeat(40)),
            "the unchanged value kept: {r}"
        );
    }
    assert!(read.files >= 8, "files of the target size: {}", read.files);
    // Compare with the table before the updates: a second table read would need a version;
    // the log's removes say which files the updates rewrote.
    let Table::Local(dir) = &table else {
        unreachable!()
    };
    let removed = removed_after_inserts(dir.path());
    assert!(
        removed <= 2,
        "the updates rewrote {removed} of {} files",
        read.files
    );
}

/// Data files the commits after the first merge without updates removed: the log's `remove`
/// actions in versions whose `commitInfo` says `MERGE` and that follow the last insert.
fn removed_after_inserts(dir: &std::path::Path) -> usize {
    let mut commits: Vec<_> = std::fs::read_dir(dir.join("_delta_log"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    commits.sort();
    let actions: Vec<Vec<Value>> = commits
        .iter()
        .map(|c| {
            std::fs::read_to_string(c)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        })
        .collect();
    // The updates' job is the second run: its commits carry another application id.
    let app = |a: &[Value]| {
        a.iter()
            .find_map(|x| x.get("txn")?.get("appId")?.as_str().map(str::to_owned))
    };
    let first = actions.iter().find_map(|a| app(a)).unwrap();
    actions
        .iter()
        .filter(|a| app(a).is_some_and(|id| id != first))
        .map(|a| a.iter().filter(|x| x.get("remove").is_some()).count())
        .sum()
}
