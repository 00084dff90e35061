//! The node stops and starts again mid-stream (alone in this file: no other test runs while
//! the node is down). The sink retries through the outage and loses nothing.

use rivus_connector_es::EsSink;
use rivus_testkit::services::{require, unique_name, Service};
use serde_json::json;

mod common;

/// Documents in `index` (0 while the node is away).
async fn count(url: &str, index: &str) -> u64 {
    common::try_count(url, index).await.unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_restart_mid_stream_loses_nothing() {
    let Some(url) = require(Service::Elasticsearch) else {
        return;
    };
    let index = unique_name("restart");
    let ix = index.clone();
    let sink = EsSink::builder(&url)
        .bulk(rivus_sdk::bulk::BulkConfig {
            max_actions: 500,
            backoff: rivus_testkit::restart::outage_backoff(),
            ..EsSink::default_bulk()
        })
        .build(move |n: &u64, idx| {
            idx.index(&ix, Some(n.to_string()), json!({"n": n}));
            Ok(())
        })
        .unwrap();
    rivus_testkit::restart::sink_restart_mid_stream("elasticsearch", sink, 5000, || {
        count(&url, &index)
    })
    .await;
}
