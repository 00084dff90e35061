//! The node stops and starts again mid-stream (alone in this file: no other test runs while
//! the node is down). The sink retries through the outage and loses nothing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use elasticsearch::http::transport::Transport;
use elasticsearch::indices::IndicesRefreshParts;
use elasticsearch::{CountParts, Elasticsearch};
use rivus_connector_es::EsSink;
use rivus_testkit::services::{require, unique_name, Service};
use serde_json::{json, Value};

async fn count(url: &str, index: &str) -> u64 {
    let c = Elasticsearch::new(Transport::single_node(url).unwrap());
    if c.indices()
        .refresh(IndicesRefreshParts::Index(&[index]))
        .send()
        .await
        .is_err()
    {
        return 0;
    }
    match c.count(CountParts::Index(&[index])).send().await {
        Ok(r) => r
            .json::<Value>()
            .await
            .ok()
            .and_then(|v| v["count"].as_u64())
            .unwrap_or(0),
        Err(_) => 0,
    }
}

async fn wait_for(url: &str, index: &str, n: u64) {
    rivus_testkit::wait::until(
        Duration::from_secs(180),
        || async { count(url, index).await >= n },
        || format!("fewer than {n} documents arrived"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_restart_mid_stream_loses_nothing() {
    let Some(url) = require(Service::Elasticsearch) else {
        return;
    };
    let index = unique_name("restart");
    let ix = index.clone();
    let sink = EsSink::builder(&url)
        .bulk(rivus_core::bulk::BulkConfig {
            max_actions: 500,
            backoff: rivus_testkit::restart::outage_backoff(),
            ..EsSink::default_bulk()
        })
        .build(move |n: &u64, idx| {
            idx.index(&ix, Some(n.to_string()), json!({"n": n}));
            Ok(())
        })
        .unwrap();
    let emitted = Arc::new(AtomicU64::new(0));
    let job =
        rivus_testkit::restart::sequence_job("es-restart", Arc::clone(&emitted), |_| sink.clone())
            .unwrap();
    let handle = job.handle();
    let running = tokio::spawn(job.run());

    wait_for(&url, &index, 5000).await;
    rivus_testkit::restart::bounce("elasticsearch", Duration::from_secs(2)).await;
    let after = count(&url, &index).await;
    wait_for(&url, &index, after + 5000).await;

    assert!(
        !running.is_finished(),
        "the job kept running through the restart"
    );
    handle.stop();
    let summary = running.await.unwrap().unwrap();
    let n = summary.records_read;
    assert_eq!(emitted.load(Ordering::Relaxed), n);
    // Ids are the sequence numbers: every emitted record is a document, once.
    assert_eq!(
        count(&url, &index).await,
        n,
        "all {n} emitted records are documents"
    );
}
