//! Deletion vectors written by another engine while a job applies changes: the sink cannot
//! apply them, and rewriting such a file from its Parquet alone would bring its deleted rows
//! back. The next merge that would rewrite the file fails naming it, and nothing is committed
//! after the other engine's commit.
//!
//! The other engine here is this test: it upgrades the table's protocol to the
//! `deletionVectors` feature, enables it, and deletes one row of a data file with a deletion
//! vector written by `delta_kernel`'s writer — the actions Spark's `DELETE` commits.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use delta_kernel::actions::deletion_vector_writer::{
    KernelDeletionVector, StreamingDeletionVectorWriter,
};
use rivus_sdk::change::UNCHANGED;
use rivus_sdk::prelude::*;
use rivus_testkit::wait;
use serde_json::{json, Value};

use common::{keyed_insert, keyed_sink};

/// The log's commits, by version: each commit's actions.
fn commits(dir: &Path) -> BTreeMap<u64, Vec<Value>> {
    std::fs::read_dir(dir.join("_delta_log"))
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let version = name.strip_suffix(".json")?.parse().ok()?;
            let actions = std::fs::read_to_string(e.path())
                .ok()?
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            Some((version, actions))
        })
        .collect()
}

/// The actions of another engine's `DELETE` of the first row of the data file holding key 100,
/// with the protocol upgrade and the property that allow deletion vectors: (the file, the
/// actions).
fn delete_with_a_vector(dir: &Path, log: &BTreeMap<u64, Vec<Value>>) -> (String, Vec<Value>) {
    let all: Vec<&Value> = log.values().flatten().collect();
    let last = |kind: &str| {
        all.iter()
            .rev()
            .find_map(|a| a.get(kind).cloned())
            .unwrap_or_else(|| panic!("a {kind} action in the log"))
    };
    let removed: Vec<&str> = all
        .iter()
        .filter_map(|a| a.get("remove")?.get("path")?.as_str())
        .collect();
    let add = all
        .iter()
        .filter_map(|a| a.get("add"))
        .filter(|a| !removed.contains(&a["path"].as_str().unwrap()))
        .find(|a| {
            let stats: Value = serde_json::from_str(a["stats"].as_str().unwrap()).unwrap();
            (stats["minValues"]["id"].as_u64()..=stats["maxValues"]["id"].as_u64())
                .contains(&Some(100))
        })
        .expect("a live data file holding key 100")
        .clone();
    let file = add["path"].as_str().unwrap().to_owned();

    let mut bytes = Vec::new();
    let mut writer = StreamingDeletionVectorWriter::new(&mut bytes);
    let mut dv = KernelDeletionVector::new();
    dv.add_deleted_row_indexes([0u64]);
    let written = writer.write_deletion_vector(dv).unwrap();
    writer.finalize().unwrap();
    let dv_path = dir.join("deletion_vector_other_engine.bin");
    std::fs::write(&dv_path, bytes).unwrap();

    let mut protocol = last("protocol");
    let mut features: Vec<Value> = protocol["writerFeatures"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| vec![json!("appendOnly"), json!("invariants")]);
    features.push(json!("deletionVectors"));
    protocol["minReaderVersion"] = json!(3);
    protocol["minWriterVersion"] = json!(7);
    protocol["readerFeatures"] = json!(["deletionVectors"]);
    protocol["writerFeatures"] = Value::Array(features);
    let mut meta = last("metaData");
    meta["configuration"]["delta.enableDeletionVectors"] = json!("true");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let mut with_vector = add.clone();
    with_vector["dataChange"] = json!(true);
    with_vector["deletionVector"] = json!({
        "storageType": "p",
        "pathOrInlineDv": format!("file://{}", dv_path.display()),
        "offset": written.offset,
        "sizeInBytes": written.size_in_bytes,
        "cardinality": written.cardinality,
    });
    let actions = vec![
        json!({"commitInfo": {"timestamp": now, "operation": "DELETE", "engineInfo": "another engine"}}),
        json!({"protocol": protocol}),
        json!({"metaData": meta}),
        json!({"remove": {"path": file, "deletionTimestamp": now, "dataChange": true,
            "extendedFileMetadata": true, "size": add["size"], "partitionValues": add["partitionValues"]}}),
        json!({"add": with_vector}),
    ];
    (file, actions)
}

/// Commits the actions `make` derives from the log as the next version, as another writer would
/// (`create_new`: when the sink wrote that version first, the actions are made again from the
/// newer log): the version written and what `make` returned with the actions.
fn commit<T>(dir: &Path, make: impl Fn(&BTreeMap<u64, Vec<Value>>) -> (T, Vec<Value>)) -> (u64, T) {
    loop {
        let log = commits(dir);
        let next = log.keys().max().map_or(0, |v| v + 1);
        let (made, actions) = make(&log);
        let text: String = actions.iter().map(|a| format!("{a}\n")).collect();
        let path = dir.join(format!("_delta_log/{next:020}.json"));
        // Written whole first, then linked under the version's name: the link fails when the
        // name exists, and a reader never sees half a commit.
        let staged = dir.join(format!("_delta_log/.{next:020}.json.other"));
        std::fs::write(&staged, text).unwrap();
        let linked = std::fs::hard_link(&staged, &path);
        std::fs::remove_file(&staged).unwrap();
        match linked {
            Ok(()) => return (next, made),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => panic!("{}: {e}", path.display()),
        }
    }
}

/// A job applying a paced stream of updates to keys 100–109 opens on a table without deletion
/// vectors and commits; another engine then deletes a row with a deletion vector. The job's
/// next merge fails naming the file, and commits nothing after the other engine's version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_vector_written_after_open_fails_the_next_merge_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let name = rivus_testkit::services::unique_name("delta-dv");
    let job = |count: u64, per_second: Option<u64>, map: fn(u64) -> Value| {
        let sink = keyed_sink(url.clone());
        Pipeline::new(&name)
            .checkpointing(CheckpointConfig::new(
                Duration::from_millis(100),
                Arc::new(MemoryStateBackend::new()),
            ))
            .batch_size(50)
            .source("seq", 1, move |i| {
                let s = rivus_testkit::SequenceSource::new(i, 1, Some(count), Arc::default());
                match per_second {
                    Some(r) => s.paced(r),
                    None => s,
                }
            })
            .map(map)
            .sink("delta", 1, move |_| sink())
            .unwrap()
    };
    job(1_000, None, keyed_insert).run().await.unwrap();
    let inserted = *commits(dir.path()).keys().max().unwrap();

    let running = tokio::spawn(job(1_000_000, Some(50), update).run());
    wait::until(
        Duration::from_secs(60),
        || async { commits(dir.path()).keys().max() > Some(&inserted) },
        || "a commit of the updating job".to_owned(),
    )
    .await;
    let (theirs, file) = commit(dir.path(), |log| delete_with_a_vector(dir.path(), log));

    let outcome = tokio::time::timeout(Duration::from_secs(60), running)
        .await
        .unwrap_or_else(|_| {
            let log = commits(dir.path());
            let after: Vec<_> = log.range(theirs..).collect();
            panic!("the job did not end; the log from the other engine's commit on: {after:?}")
        })
        .unwrap();
    let e = outcome
        .expect_err("the merge after the deletion vector fails")
        .to_string();
    assert!(
        e.contains(&format!("the data file {file} has a deletion vector"))
            && e.contains("would bring its deleted rows back"),
        "{e}"
    );
    assert_eq!(
        commits(dir.path()).keys().max(),
        Some(&theirs),
        "nothing committed after the other engine's version"
    );
}

/// Update `i`: one of ten keys from 100, `doc` unchanged.
fn update(i: u64) -> Value {
    let id = 100 + i % 10;
    json!({"op": "u", "before": null, "source": {"table": "t"},
        "after": {"id": id, "name": format!("name-{id}"), "n": i + 1, "doc": UNCHANGED}})
}
