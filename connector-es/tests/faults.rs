//! Network faults and a node restart between the Elasticsearch sink and the node, through the
//! testkit's fault proxy: a blackhole mid-stream, connection resets every two seconds, 200 ms
//! latency, the node restarted. The job keeps running or restarts itself and ends with every
//! record a document (ids are the sequence numbers, so a replay overwrites). Alone in this
//! file: it restarts the node.

use std::time::Duration;

use rivus_connector_es::EsSink;
use rivus_testkit::fault_proxy::FaultProxy;
use rivus_testkit::faults::{sink_under_fault, Fault};
use rivus_testkit::services::{require, unique_name, Service};
use serde_json::json;

mod common;

/// Documents in `index` (after a refresh), retried while the node is away.
async fn count(url: &str, index: &str) -> u64 {
    loop {
        let got = tokio::time::timeout(Duration::from_secs(5), common::try_count(url, index));
        if let Ok(Some(n)) = got.await {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sink_rides_out_network_faults_and_a_node_restart() {
    faults_on(Service::Elasticsearch, "elasticsearch").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opensearch3_sink_rides_out_network_faults_and_a_node_restart() {
    faults_on(Service::OpenSearch3, "opensearch3").await;
}

/// The fault table between the sink and the server `name` (as `dev/services` knows it).
async fn faults_on(service: Service, name: &'static str) {
    let Some(url) = require(service) else {
        return;
    };
    let (proxy, proxied) = FaultProxy::in_front_of(&url).await.unwrap();
    for fault in Fault::table(Fault::blackhole_from_env(), name) {
        let index = unique_name("faults");
        let sink = {
            let (proxied, index) = (proxied.clone(), index.clone());
            move || {
                let index = index.clone();
                EsSink::builder(&proxied)
                    .bulk(rivus_sdk::bulk::BulkConfig {
                        max_actions: 200,
                        backoff: rivus_testkit::restart::outage_backoff(),
                        ..EsSink::default_bulk()
                    })
                    .build(move |n: &u64, idx| {
                        idx.index(&index, Some(n.to_string()), json!({"n": n}));
                        Ok(())
                    })
                    .unwrap()
            }
        };
        let run = sink_under_fault(
            &format!("faults-{name}"),
            &proxy,
            fault.clone(),
            2_000,
            sink,
            || {
                let (url, index) = (url.clone(), index.clone());
                async move { count(&url, &index).await }
            },
        )
        .await;
        proxy.clear();
        // Ids are 0..emitted: as many documents as records means every one is there.
        let n = count(&url, &index).await;
        assert_eq!(
            n, run.emitted,
            "{name} under {}: every record a document",
            run.fault
        );
        eprintln!(
            "{}",
            run.report(&format!("{name} sink (at-least-once, idempotent ids)"))
        );
    }
}
