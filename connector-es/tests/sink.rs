//! The Elasticsearch sink against the real node started by `dev/services`: the conformance
//! suite, retried rejections, mapping conflicts under each policy, configuration checks and
//! the failure handler.

mod common;

use common::*;

use std::sync::Arc;
use std::time::Duration;

use rivus_connector_es::{DocRequest, EsSink};
use rivus_sdk::error_policy::{ErrorPolicy, FileDeadLetterQueue};
use rivus_sdk::prelude::*;
use rivus_sdk::schema::SchemaError;
use rivus_testkit::run_sequence_into;
use rivus_testkit::services::{require, Service};
use rivus_testkit::suite::{SinkExternal, SinkSuite};
use serde_json::json;

use rivus_testkit::services::unique_name as unique;

struct EsCtx {
    url: String,
    index: String,
}

#[async_trait]
impl SinkExternal for EsCtx {
    type Record = String;
    type Sink = EsSink<String>;

    async fn prepare(&mut self) -> Result<()> {
        self.index = unique("suite");
        Ok(())
    }

    fn create_sink(&self, _: usize, _: usize, policy: ErrorPolicy) -> EsSink<String> {
        let index = self.index.clone();
        EsSink::builder(&self.url)
            .batch_size(100)
            .error_policy(policy)
            .build(move |v: &String, idx| {
                // Deterministic ids: a replay after a failure overwrites instead of duplicating.
                idx.index(&index, Some(v.clone()), json!({"v": v}));
                Ok(())
            })
            .unwrap()
    }

    fn to_record(&self, test: &str) -> String {
        test.to_owned()
    }

    async fn read_back(&self) -> Result<Vec<String>> {
        Ok(all_values(&self.url, &self.index)
            .await
            .into_iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect())
    }

    fn preserves_order(&self) -> bool {
        false
    }
}

async fn sink_passes_the_conformance_suite(service: Service) {
    let Some(url) = require(service) else {
        return;
    };
    let mut suite = SinkSuite::new(EsCtx {
        url,
        index: String::new(),
    })
    .records_per_split(250);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
}

async fn rejected_writes(url: &str) -> u64 {
    let v = call(url, reqwest::Method::GET, "/_nodes/stats/thread_pool", None).await;
    v["nodes"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n["thread_pool"]["write"]["rejected"].as_u64().unwrap_or(0))
        .sum()
}

/// The dev node has a write queue of 2: many small concurrent bulks get items rejected with
/// 429 inside successful responses. Every document must still arrive.
async fn rejected_items_are_retried_and_none_is_lost(service: Service) {
    let Some(url) = require(service) else {
        return;
    };
    let before = rejected_writes(&url).await;
    let mut rounds = 0;
    while rounds < 5 {
        rounds += 1;
        let index = unique("reject");
        // Several shards, so that one bulk fans out into several write tasks.
        create_index(
            &url,
            &index,
            json!({"settings": {"number_of_shards": 6, "number_of_replicas": 0}}),
        )
        .await;
        let ix = index.clone();
        let sink = EsSink::builder(&url)
            .bulk(rivus_sdk::bulk::BulkConfig {
                max_actions: 20,
                concurrent_requests: 8,
                backoff: rivus_sdk::backoff::BackoffPolicy::Exponential {
                    initial: Duration::from_millis(20),
                    max_delay: Duration::from_millis(500),
                    max_retries: 30,
                },
                ..EsSink::default_bulk()
            })
            .build(move |n: &u64, idx| {
                idx.index(&ix, Some(n.to_string()), json!({"v": n}));
                Ok(())
            })
            .unwrap();
        let n = 4000u64;
        run_sequence_into("reject", n, 2, |_| sink.clone())
            .await
            .unwrap();
        let got = sorted_numbers(&url, &index).await;
        assert_eq!(got, (0..n).collect::<Vec<_>>(), "every document arrived");
        if rejected_writes(&url).await > before {
            return;
        }
    }
    panic!("the node rejected nothing in {rounds} rounds: the 429 path was not exercised");
}

async fn mapping_conflict_goes_to_the_failure_policy_and_nothing_else_is_lost(service: Service) {
    let Some(url) = require(service) else {
        return;
    };
    for dead_letter in [false, true] {
        let index = unique("mapping");
        create_index(
            &url,
            &index,
            json!({"mappings": {"properties": {"v": {"type": "long"}}}}),
        )
        .await;
        let dir = std::env::temp_dir().join(unique("dlq"));
        let dlq_path = dir.join("letters.jsonl");
        let policy = if dead_letter {
            ErrorPolicy::DeadLetter(Arc::new(
                FileDeadLetterQueue::open(&dlq_path).await.unwrap(),
            ))
        } else {
            ErrorPolicy::Skip
        };
        let ix = index.clone();
        let sink = EsSink::builder(&url)
            .batch_size(50)
            .error_policy(policy)
            .build(move |n: &u64, idx| {
                index_number(idx, &ix, *n);
                Ok(())
            })
            .unwrap();
        run_sequence_into("mapping", 200, 1, |_| sink.clone())
            .await
            .unwrap();
        let got = sorted_numbers(&url, &index).await;
        let want: Vec<u64> = (0..200).filter(|n| *n != 77).collect();
        assert_eq!(got, want);
        if dead_letter {
            let letters = FileDeadLetterQueue::read_all(&dlq_path).await.unwrap();
            assert_eq!(letters.len(), 1);
            assert_eq!(letters[0].position, format!("{index}/77"));
            assert!(
                letters[0].reason.contains("mapper_parsing_exception"),
                "{}",
                letters[0].reason
            );
        }
    }
}

async fn a_mapping_conflict_fails_the_job_under_the_default_policy(service: Service) {
    let Some(url) = require(service) else {
        return;
    };
    let index = unique("strict");
    create_index(
        &url,
        &index,
        json!({"mappings": {"properties": {"v": {"type": "long"}}}}),
    )
    .await;
    let sink = EsSink::builder(&url)
        .build(move |_: &u64, idx| {
            idx.index(&index, None, json!({"v": "not a number"}));
            Ok(())
        })
        .unwrap();
    let err = run_sequence_into("strict", 3, 1, |_| sink.clone())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("mapper_parsing_exception"),
        "{err}"
    );
}

#[test]
fn bad_configuration_is_refused_with_the_field_path() {
    let ok = |_: &u64, _: &mut rivus_connector_es::RequestIndexer| Ok::<(), SchemaError>(());
    let err = EsSink::builder("not a url").build(ok).unwrap_err();
    assert!(err.to_string().contains("`url`"), "{err}");
    let err = EsSink::builder("http://127.0.0.1:9200")
        .bulk(rivus_sdk::bulk::BulkConfig {
            max_actions: 0,
            max_bytes: 0,
            ..EsSink::default_bulk()
        })
        .build(ok)
        .unwrap_err();
    assert!(err.to_string().contains("`bulk.max_actions`"), "{err}");
}

/// A custom failure handler: the document refused for its mapping is re-added to a side index
/// with the reason (and counts as handled); a 409 conflict goes on to the failure policy; a
/// third kind fails the job with the handler's message.
async fn a_failure_handler_re_adds_refused_documents_elsewhere(service: Service) {
    use rivus_connector_es::{FailureAction, ItemFailure, RequestIndexer};

    let Some(url) = require(service) else {
        return;
    };
    let index = unique("handled");
    let side = format!("{index}-failed");
    create_index(
        &url,
        &index,
        json!({"mappings": {"properties": {"v": {"type": "long"}}}}),
    )
    .await;
    let side_for_handler = side.clone();
    let handler = move |f: &ItemFailure<'_>, idx: &mut RequestIndexer| match f.error_type {
        "mapper_parsing_exception" => {
            idx.index(
                side_for_handler.clone(),
                None,
                json!({
                    "position": f.position,
                    "reason": f.reason,
                    "action": f.action(),
                    "doc": f.document().map(|d| d.to_string()),
                }),
            );
            FailureAction::Handled
        }
        "version_conflict_engine_exception" => FailureAction::Policy,
        other => FailureAction::Fail(format!("unexpected {other}")),
    };
    let ix = index.clone();
    let sink = EsSink::builder(&url)
        .batch_size(50)
        .error_policy(ErrorPolicy::Skip)
        .failure_handler(handler)
        .build(move |n: &u64, idx| {
            index_number(idx, &ix, *n);
            // Record 120 also tries to create document 5 again: 409.
            if *n == 120 {
                idx.add(DocRequest::Create {
                    index: ix.clone(),
                    id: Some("5".into()),
                    routing: None,
                    doc: json!({"v": 5}),
                });
            }
            Ok(())
        })
        .unwrap();
    run_sequence_into("handled", 200, 1, |_| sink.clone())
        .await
        .unwrap();
    let got = sorted_numbers(&url, &index).await;
    let want: Vec<u64> = (0..200).filter(|n| *n != 77).collect();
    assert_eq!(got, want);
    refresh(&url, &side).await;
    let r = call(
        &url,
        reqwest::Method::POST,
        &format!("/{side}/_search"),
        None,
    )
    .await;
    let hits = r["hits"]["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 1, "{r}");
    let doc = &hits[0]["_source"];
    assert_eq!(doc["position"], format!("{index}/77"));
    assert_eq!(doc["action"], "index");
    assert_eq!(doc["doc"], "{\"v\":\"seventy-seven\"}");
    assert!(doc["reason"].as_str().unwrap().contains("v"), "{doc}");

    // A handler that fails the job names the item and its message.
    let ix = index.clone();
    let strict = EsSink::builder(&url)
        .failure_handler(|f: &ItemFailure<'_>, _: &mut RequestIndexer| {
            FailureAction::Fail(format!("no {} here", f.error_type))
        })
        .build(move |_: &u64, idx| {
            idx.index(&ix, Some("x".into()), json!({"v": "not a number"}));
            Ok(())
        })
        .unwrap();
    let err = run_sequence_into("handled-fail", 1, 1, |_| strict.clone())
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains(&format!("{index}/x")), "{text}");
    assert!(text.contains("no mapper_parsing_exception here"), "{text}");
}

on_every_server!(sink_passes_the_conformance_suite);
on_every_server!(rejected_items_are_retried_and_none_is_lost);
on_every_server!(mapping_conflict_goes_to_the_failure_policy_and_nothing_else_is_lost);
on_every_server!(a_mapping_conflict_fails_the_job_under_the_default_policy);
on_every_server!(a_failure_handler_re_adds_refused_documents_elsewhere);
