//! The Elasticsearch source against the real node started by `dev/services`: sliced reads,
//! queries, resuming from a checkpoint, the bounded-source suite and configuration checks.

mod common;

use common::*;

use std::sync::Arc;
use std::time::Duration;

use rivus_connector_es::{Cluster, EsConfig, EsSink};
use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::prelude::*;
use rivus_sdk::schema::SchemaError;
use rivus_testkit::services::{require, Service};
use rivus_testkit::suite::{BoundedSourceSuite, SourceExternal};
use serde_json::json;

use rivus_testkit::services::unique_name as unique;

async fn source_reads_the_whole_index_in_slices_and_with_a_query(service: Service) {
    let Some(url) = require(service) else {
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
async fn source_resumes_from_its_checkpoint_exactly_once(service: Service) {
    let Some(url) = require(service) else {
        return;
    };
    resumes_exactly_once(&url, EsConfig::new(&url)).await;
}

/// Told the server is a version without a point-in-time API (Elasticsearch 7.9, OpenSearch
/// 2.3), the source reads by sliced scroll: every document once with 1 and 3 slices, and a
/// restart skips what its checkpoint covers.
async fn the_scroll_fallback_reads_every_document_and_resumes(service: Service) {
    let Some(url) = require(service) else {
        return;
    };
    let mut config = EsConfig::new(&url);
    config.cluster = Some(match service {
        Service::Elasticsearch => Cluster::elasticsearch(7, 9),
        _ => Cluster::opensearch(2, 3),
    });
    let index = unique("scroll");
    load(&url, &index, 2000).await;
    for parallelism in [1, 3] {
        let source = rivus_connector_es::EsSource::builder(config.clone())
            .index(&index)
            .page_size(300)
            .build(n_of)
            .unwrap();
        let mut got = rivus_testkit::read_all("scroll", source, parallelism).await;
        got.sort();
        assert_eq!(
            got,
            (0..2000).collect::<Vec<_>>(),
            "parallelism {parallelism}"
        );
    }
    resumes_exactly_once(&url, config).await;
}

/// Reads 3000 documents with a failure after 1500 and a restart from the checkpoint.
async fn resumes_exactly_once(url: &str, config: EsConfig) {
    let index = unique("resume");
    load(url, &index, 3000).await;
    let source = rivus_connector_es::EsSource::builder(config)
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
        refresh(&self.url, &self.index).await;
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
async fn source_passes_the_bounded_source_suite(service: Service) {
    let Some(url) = require(service) else {
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
    assert!(err.to_string().contains("`index`"), "{err}");
    let err = rivus_connector_es::EsSource::builder("http://127.0.0.1:9200")
        .index("x")
        .page_size(0)
        .build(n_of)
        .unwrap_err();
    assert!(err.to_string().contains("`page_size`"), "{err}");
}

on_every_server!(source_reads_the_whole_index_in_slices_and_with_a_query);
on_every_server!(source_resumes_from_its_checkpoint_exactly_once);
on_every_server!(source_passes_the_bounded_source_suite);
on_every_server!(the_scroll_fallback_reads_every_document_and_resumes);
