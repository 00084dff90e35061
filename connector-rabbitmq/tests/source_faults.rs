//! Network faults and a broker restart between the RabbitMQ source and the broker, through
//! the testkit's fault proxy: a blackhole, connection resets every two seconds, 200 ms
//! latency, the broker restarted, while the test keeps publishing. The job keeps running or
//! restarts itself and receives every message (correlation ids drop redeliveries). Alone in
//! this file: it restarts the broker.

mod common;

use common::{channel, declare, publish_with_ids};

use std::time::Duration;

use rivus_connector_rabbitmq::RabbitSource;
use rivus_sdk::schema::{DeserializationSchema, JsonSchema};
use rivus_testkit::fault_proxy::FaultProxy;
use rivus_testkit::faults::{source_under_fault, Fault};
use rivus_testkit::services::{require, unique_name, Service};

/// Publishes `from..to` (persistent, confirmed); retried while the broker restarts.
async fn publish(url: &str, queue: &str, from: u64, to: u64) {
    loop {
        let sent = async {
            let (conn, ch) = common::try_channel(url).await.ok()?;
            let bodies = (from..to).map(|n| n.to_string());
            if !publish_with_ids(&ch, queue, bodies).await.ok()? {
                return None;
            }
            let _ = conn.close(200, "done".into()).await;
            Some(())
        };
        if tokio::time::timeout(Duration::from_secs(10), sent)
            .await
            .ok()
            .flatten()
            .is_some()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Over 60 s (73 s here): the same fault table on the source side, the broker restarted once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_rides_out_network_faults_and_a_broker_restart() {
    let Some(url) = require(Service::RabbitMq) else {
        return;
    };
    let (proxy, proxied) = FaultProxy::in_front_of(&url).await.unwrap();
    for fault in Fault::table(Fault::blackhole_from_env(), "rabbitmq") {
        let queue = unique_name("source-faults");
        {
            let (conn, ch) = channel(&url).await;
            declare(&ch, &queue).await;
            let _ = conn.close(200, "done".into()).await;
        }
        let source = {
            let (proxied, queue) = (proxied.clone(), queue.clone());
            move || {
                RabbitSource::builder(&proxied)
                    .queues([queue.clone()])
                    .prefetch(200)
                    .use_correlation_ids(true)
                    .build(|m| JsonSchema::<u64>::new().deserialize(m.body, &m.queue))
                    .unwrap()
            }
        };
        let produce = {
            let (url, queue) = (url.clone(), queue.clone());
            move |from: u64, to: u64| {
                let (url, queue) = (url.clone(), queue.clone());
                async move { publish(&url, &queue, from, to).await }
            }
        };
        let r = source_under_fault("source-faults-rabbitmq", &proxy, fault, source, produce).await;
        proxy.clear();
        eprintln!(
            "{} | {} duplicates",
            r.run
                .report("rabbitmq source (exactly-once, correlation ids)"),
            r.duplicates
        );
    }
}
