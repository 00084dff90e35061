//! The Elasticsearch sink against the real node started by `dev/services`.

use std::sync::Arc;
use std::time::Duration;

use elasticsearch::http::transport::Transport;
use elasticsearch::indices::{IndicesCreateParts, IndicesRefreshParts};
use elasticsearch::{Elasticsearch, SearchParts};
use rivus_connector_es::{DocRequest, EsSink};
use rivus_core::error_policy::{ErrorPolicy, FileDeadLetterQueue};
use rivus_core::prelude::*;
use rivus_core::schema::SchemaError;
use rivus_testkit::run_sequence_into;
use rivus_testkit::services::{require, Service};
use rivus_testkit::suite::{BoundedSourceSuite, SinkExternal, SinkSuite, SourceExternal};
use serde_json::{json, Value};

use rivus_testkit::services::unique_name as unique;

fn client(url: &str) -> Elasticsearch {
    Elasticsearch::new(Transport::single_node(url).unwrap())
}

async fn create_index(url: &str, index: &str, body: Value) {
    let r = client(url)
        .indices()
        .create(IndicesCreateParts::Index(index))
        .body(body)
        .send()
        .await
        .unwrap();
    assert!(
        r.status_code().is_success(),
        "creating index {index}: {}",
        r.status_code()
    );
}

/// Indexes `{"v": n}` with id `n` — except record 77, which carries a string where the
/// mapping of the test indexes wants a number.
fn index_number(idx: &mut rivus_connector_es::RequestIndexer, index: &str, n: u64) {
    let v = if n == 77 {
        json!("seventy-seven")
    } else {
        json!(n)
    };
    idx.add(DocRequest::Index {
        index: index.to_owned(),
        id: Some(n.to_string()),
        routing: None,
        doc: json!({ "v": v }),
    });
}

/// The numeric `v` fields in `index`, sorted.
async fn sorted_numbers(url: &str, index: &str) -> Vec<u64> {
    let mut got: Vec<u64> = all_values(url, index)
        .await
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    got.sort();
    got
}

/// Every document's `v` field in `index`, after a refresh.
async fn all_values(url: &str, index: &str) -> Vec<Value> {
    let c = client(url);
    c.indices()
        .refresh(IndicesRefreshParts::Index(&[index]))
        .send()
        .await
        .unwrap();
    let mut out = Vec::new();
    let mut after: Option<Value> = None;
    loop {
        let mut body = json!({"size": 5000, "sort": [{"_id": "asc"}], "query": {"match_all": {}}});
        if let Some(a) = &after {
            body["search_after"] = a.clone();
        }
        let r: Value = c
            .search(SearchParts::Index(&[index]))
            .body(body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let hits = r["hits"]["hits"].as_array().cloned().unwrap_or_default();
        if hits.is_empty() {
            return out;
        }
        after = hits.last().map(|h| h["sort"].clone());
        out.extend(hits.into_iter().map(|h| h["_source"]["v"].clone()));
    }
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sink_passes_the_conformance_suite() {
    let Some(url) = require(Service::Elasticsearch) else {
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
    let v: Value = client(url)
        .transport()
        .send(
            elasticsearch::http::Method::Get,
            "/_nodes/stats/thread_pool",
            elasticsearch::http::headers::HeaderMap::new(),
            None::<&()>,
            None::<&[u8]>,
            None,
        )
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["nodes"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n["thread_pool"]["write"]["rejected"].as_u64().unwrap_or(0))
        .sum()
}

/// The dev node has a write queue of 2: many small concurrent bulks get items rejected with
/// 429 inside successful responses. Every document must still arrive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_items_are_retried_and_none_is_lost() {
    let Some(url) = require(Service::Elasticsearch) else {
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
            .bulk(rivus_core::bulk::BulkConfig {
                max_actions: 20,
                concurrent_requests: 8,
                backoff: rivus_core::backoff::BackoffPolicy::Exponential {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mapping_conflict_goes_to_the_failure_policy_and_nothing_else_is_lost() {
    let Some(url) = require(Service::Elasticsearch) else {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mapping_conflict_fails_the_job_under_the_default_policy() {
    let Some(url) = require(Service::Elasticsearch) else {
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
    assert!(err.to_string().contains("sink.elasticsearch.url"), "{err}");
    let err = EsSink::builder("http://127.0.0.1:9200")
        .bulk(rivus_core::bulk::BulkConfig {
            max_actions: 0,
            max_bytes: 0,
            ..EsSink::default_bulk()
        })
        .build(ok)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("sink.elasticsearch.bulk.max_actions"),
        "{err}"
    );
}

// ---- source ----

/// Creates `index` holding documents `{"n": i, "even": i % 2 == 0}` with ids `d000000`...
async fn load(url: &str, index: &str, n: u64) {
    create_index(
        url,
        index,
        json!({"settings": {"number_of_shards": 3, "number_of_replicas": 0}}),
    )
    .await;
    let c = client(url);
    // Loaded through the sink, which resends what the dev node's tiny write queue rejects.
    let ix = index.to_owned();
    let sink = EsSink::builder(url)
        .build(move |i: &u64, idx| {
            idx.index(
                &ix,
                Some(format!("d{i:06}")),
                json!({"n": i, "even": i % 2 == 0}),
            );
            Ok(())
        })
        .unwrap();
    run_sequence_into("load", n, 1, |_| sink.clone())
        .await
        .unwrap();
    c.indices()
        .refresh(IndicesRefreshParts::Index(&[index]))
        .send()
        .await
        .unwrap();
}

fn n_of(hit: &Value) -> std::result::Result<u64, SchemaError> {
    hit["_source"]["n"].as_u64().ok_or_else(|| {
        SchemaError::new("elasticsearch", hit["_id"].as_str().unwrap_or("?"), "no n")
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_reads_the_whole_index_in_slices_and_with_a_query() {
    let Some(url) = require(Service::Elasticsearch) else {
        return;
    };
    let index = unique("read");
    load(&url, &index, 3000).await;
    for parallelism in [1, 3] {
        let source = rivus_connector_es::EsSource::builder(&url)
            .index(&index)
            .page_size(500)
            .build(n_of)
            .unwrap();
        let mut got = rivus_testkit::read_all("read", source, parallelism).await;
        got.sort();
        assert_eq!(
            got,
            (0..3000).collect::<Vec<_>>(),
            "parallelism {parallelism}: every document once"
        );
    }
    let source = rivus_connector_es::EsSource::builder(&url)
        .index(&index)
        .query(json!({"term": {"even": true}}))
        .build(n_of)
        .unwrap();
    let mut got = rivus_testkit::read_all("query", source, 2).await;
    got.sort();
    assert_eq!(got, (0..3000).filter(|n| n % 2 == 0).collect::<Vec<_>>());
}

/// Killed mid-read and restarted: the source resumes after its last checkpointed document;
/// with a transactional sink every document arrives exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_resumes_from_its_checkpoint_exactly_once() {
    let Some(url) = require(Service::Elasticsearch) else {
        return;
    };
    let index = unique("resume");
    load(&url, &index, 3000).await;
    let source = rivus_connector_es::EsSource::builder(&url)
        .index(&index)
        .page_size(100)
        .build(n_of)
        .unwrap();
    let backend = MemoryStateBackend::new();
    let store = rivus_testkit::TxnStore::<u64>::new();
    let run = |kill: Option<usize>| {
        let received = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        Pipeline::new("resume")
            .checkpointing(CheckpointConfig::new(
                Duration::from_millis(5),
                Arc::new(backend.clone()),
            ))
            .source("es", 2, |_| source.clone())
            .sink("txn", 1, |i| {
                let s = rivus_testkit::TransactionalSink::new(store.clone(), i);
                match kill {
                    Some(k) => s.fail_after(k, Arc::clone(&received)),
                    None => s,
                }
            })
            .unwrap()
            .run()
    };
    assert!(
        run(Some(1500)).await.is_err(),
        "the injected failure stops the first run"
    );
    let summary = run(None).await.unwrap();
    assert!(
        summary.restored_from.is_some(),
        "the second run restored a checkpoint"
    );
    assert!(
        summary.records_read < 3000,
        "it did not read everything again ({})",
        summary.records_read
    );
    let mut got = store.committed();
    got.sort();
    assert_eq!(got, (0..3000).collect::<Vec<_>>());
}

struct IndexCtx {
    url: String,
    index: String,
}

#[async_trait]
impl SourceExternal for IndexCtx {
    type Source = rivus_connector_es::EsSource<String>;

    async fn prepare(&mut self, _splits: usize) -> Result<()> {
        self.index = unique("bounded-suite");
        create_index(
            &self.url,
            &self.index,
            json!({"settings": {"number_of_shards": 2, "number_of_replicas": 0}}),
        )
        .await;
        Ok(())
    }

    async fn write(&mut self, _split: usize, records: &[String]) -> Result<()> {
        // Through the sink (which resends what the dev node's tiny write queue rejects), ids
        // = the test strings, so sorting by _id keeps each split's order.
        let ix = self.index.clone();
        let sink = EsSink::builder(&self.url)
            .build(move |r: &String, idx| {
                idx.index(&ix, Some(r.clone()), json!({ "v": r }));
                Ok(())
            })
            .unwrap();
        rivus_testkit::run_records_into("load", records.to_vec(), |_| sink.clone()).await?;
        client(&self.url)
            .indices()
            .refresh(IndicesRefreshParts::Index(&[&self.index]))
            .send()
            .await
            .map_err(|e| Error::connector("refresh", e.to_string()))?;
        Ok(())
    }

    fn create_source(&self, _: usize, _: usize, policy: ErrorPolicy) -> Self::Source {
        rivus_connector_es::EsSource::builder(&self.url)
            .index(&self.index)
            .page_size(64)
            .error_policy(policy)
            .build(|hit| {
                hit["_source"]["v"]
                    .as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| SchemaError::new("elasticsearch", "hit", "no field `v`"))
            })
            .unwrap()
    }

    fn to_test_record(&self, record: &String) -> String {
        record.clone()
    }
}

/// The bounded-source suite: each subtask reads a slice of the whole index, so records of
/// one split arrive in order only with one reader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_passes_the_bounded_source_suite() {
    let Some(url) = require(Service::Elasticsearch) else {
        return;
    };
    let mut suite = BoundedSourceSuite::new(IndexCtx {
        url,
        index: String::new(),
    })
    .records_per_split(300)
    .ordered(false);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
}

#[test]
fn source_configuration_is_checked() {
    let err = rivus_connector_es::EsSource::builder("http://127.0.0.1:9200")
        .build(n_of)
        .unwrap_err();
    assert!(
        err.to_string().contains("source.elasticsearch.index"),
        "{err}"
    );
    let err = rivus_connector_es::EsSource::builder("http://127.0.0.1:9200")
        .index("x")
        .page_size(0)
        .build(n_of)
        .unwrap_err();
    assert!(
        err.to_string().contains("source.elasticsearch.page_size"),
        "{err}"
    );
}

/// A custom failure handler: the document refused for its mapping is re-added to a side index
/// with the reason (and counts as handled); a 409 conflict goes on to the failure policy; a
/// third kind fails the job with the handler's message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_handler_re_adds_refused_documents_elsewhere() {
    use rivus_connector_es::{FailureAction, ItemFailure, RequestIndexer};

    let Some(url) = require(Service::Elasticsearch) else {
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
    let c = client(&url);
    c.indices()
        .refresh(IndicesRefreshParts::Index(&[side.as_str()]))
        .send()
        .await
        .unwrap();
    let r: Value = c
        .search(SearchParts::Index(&[side.as_str()]))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
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
