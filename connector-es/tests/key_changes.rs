//! Key changes that leave a large value behind, applied by the `elasticsearch` section's
//! `apply_changes` against every search server: the change names the old key (`__moved_from`)
//! and lacks `big` (unchanged, so a CDC source could not read it); the document moves to the
//! new id with its `big`, the old id is deleted — also when a change of the old id waits in
//! the same bulk, and when the move is replayed after the old document is gone.

mod common;

use std::sync::Arc;

use rivus_connector_es::pipeline_file::EsSinkSection;
use rivus_sdk::change::{MOVED_FROM, MOVED_TO, UNCHANGED};
use rivus_sdk::error_policy::{ErrorPolicy, FileDeadLetterQueue};
use rivus_sdk::prelude::*;
use rivus_testkit::services::{require, unique_name, Service};
use rivus_testkit::VecSource;
use serde_json::{json, Value};

use common::{call, refresh};

fn write(a: i64, big: Value, n: i64) -> Value {
    json!({"a": a, "big": big, "n": n, "__op": "u", "__deleted": false})
}

/// The changes, in stream order.
fn changes() -> Vec<Value> {
    let big = |s: &str| json!(s.repeat(40));
    vec![
        // Three documents.
        write(1, big("one "), 0),
        write(2, big("two "), 0),
        write(3, big("three "), 0),
        // 1 → 101, `big` left behind.
        json!({"a": 1, "__deleted": true, MOVED_TO: {"a": 101}}),
        json!({"a": 101, "big": UNCHANGED, "n": 1, "__deleted": false, MOVED_FROM: {"a": 1}}),
        // 2's `big` rewritten, then 2 → 102 in the same bulk: the move sees the rewrite.
        write(2, big("two again "), 1),
        json!({"a": 2, "__deleted": true, MOVED_TO: {"a": 102}}),
        json!({"a": 102, "big": UNCHANGED, "n": 2, "__deleted": false, MOVED_FROM: {"a": 2}}),
        // 101 → 201 right after its own move.
        json!({"a": 101, "__deleted": true, MOVED_TO: {"a": 201}}),
        json!({"a": 201, "big": UNCHANGED, "n": 3, "__deleted": false, MOVED_FROM: {"a": 101}}),
    ]
}

/// Runs `records` through the section's sink of `parallelism` subtasks into `index`, in one
/// bulk each (`max_actions` 100).
async fn run(url: &str, index: &str, records: Vec<Value>, parallelism: usize, policy: ErrorPolicy) {
    let section: EsSinkSection = serde_json::from_value(json!({
        "url": url, "index": index, "id_field": "a", "apply_changes": true, "max_actions": 100
    }))
    .unwrap();
    let sink = section.sink(policy).unwrap();
    let splits = Arc::new(vec![records]);
    Pipeline::new(format!("moves-{index}"))
        .source("changes", 1, move |i| {
            VecSource::new(Arc::clone(&splits), i, 1)
        })
        .sink("index", parallelism, move |_| sink.clone())
        .unwrap()
        .run()
        .await
        .unwrap();
}

/// Every document of `index`: id → (`big`, `n`).
async fn docs(url: &str, index: &str) -> Vec<(String, String, i64)> {
    refresh(url, index).await;
    let r = call(
        url,
        reqwest::Method::POST,
        &format!("/{index}/_search"),
        Some(json!({"size": 100, "sort": [{"_id": "asc"}]})),
    )
    .await;
    r["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let s = &h["_source"];
            (
                h["_id"].as_str().unwrap().to_owned(),
                s["big"].as_str().unwrap_or("<none>").to_owned(),
                s["n"].as_i64().unwrap_or(-1),
            )
        })
        .collect()
}

async fn moves_carry_the_fields_the_change_left_behind(service: Service) {
    let Some(url) = require(service) else { return };
    let index = unique_name("moves");
    let expected = vec![
        ("102".to_owned(), "two again ".repeat(40), 2),
        ("201".to_owned(), "one ".repeat(40), 3),
        ("3".to_owned(), "three ".repeat(40), 0),
    ];
    run(&url, &index, changes(), 1, ErrorPolicy::Fail).await;
    assert_eq!(docs(&url, &index).await, expected);
    // A replay (a restore from a checkpoint before the moves): the old documents are gone,
    // the new ones keep what the first run carried across.
    run(&url, &index, changes()[3..].to_vec(), 1, ErrorPolicy::Fail).await;
    assert_eq!(docs(&url, &index).await, expected);
    call(&url, reqwest::Method::DELETE, &format!("/{index}"), None).await;
}
on_every_server!(moves_carry_the_fields_the_change_left_behind);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moves_are_refused_by_name_when_sink_subtasks_share_the_index() {
    let Some(url) = require(Service::Elasticsearch) else {
        return;
    };
    let index = unique_name("moves-parallel");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("letters.jsonl");
    let dlq = Arc::new(FileDeadLetterQueue::open(&path).await.unwrap());
    run(&url, &index, changes(), 2, ErrorPolicy::DeadLetter(dlq)).await;
    let letters = FileDeadLetterQueue::read_all(&path).await.unwrap();
    assert_eq!(letters.len(), 3, "every move: {letters:?}");
    for l in &letters {
        assert!(l.reason.contains("parallelism 1"), "{}", l.reason);
        let record: Value = serde_json::from_slice(&l.payload).unwrap();
        assert!(
            record["from"].is_string() && record["doc"]["n"].is_i64(),
            "{record}"
        );
    }
    // Nothing was deleted: the old documents keep their values.
    let got = docs(&url, &index).await;
    assert!(
        got.iter()
            .any(|(id, big, _)| id == "1" && big == &"one ".repeat(40)),
        "{got:?}"
    );
    call(&url, reqwest::Method::DELETE, &format!("/{index}"), None).await;
}
