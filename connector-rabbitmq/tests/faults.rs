//! Network faults and a broker restart between the RabbitMQ sink and the broker, through the
//! testkit's fault proxy: a blackhole mid-stream, connection resets every two seconds, 200 ms
//! latency, the broker restarted. The job keeps running or restarts itself and ends with
//! every record in the queue at least once (the sink is at-least-once: publisher confirms).
//! Alone in this file: it restarts the broker.

mod common;

use common::{channel, declare};

use std::collections::HashSet;
use std::time::Duration;

use lapin::options::BasicGetOptions;
use rivus_connector_rabbitmq::{OutMessage, RabbitSink};
use rivus_testkit::fault_proxy::FaultProxy;
use rivus_testkit::faults::{sink_under_fault, Fault};
use rivus_testkit::services::{require, unique_name, Service};

/// Messages in `queue`, retried while the broker is away.
async fn depth(url: &str, queue: &str) -> u64 {
    loop {
        let got = common::depth(url, queue);
        if let Ok(Some(n)) = tokio::time::timeout(Duration::from_secs(5), got).await {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Drains `queue`: (distinct bodies, messages).
async fn drain(url: &str, queue: &str) -> (HashSet<u64>, usize) {
    let (conn, ch) = channel(url).await;
    let (mut seen, mut total) = (HashSet::new(), 0);
    while let Some(m) = ch
        .basic_get(queue.into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap()
    {
        total += 1;
        seen.insert(String::from_utf8_lossy(&m.delivery.data).parse().unwrap());
    }
    let _ = conn.close(200, "done".into()).await;
    (seen, total)
}

/// Over 60 s (70 s here): the fault table's blackhole, resets and latency each last seconds,
/// and the broker's restart waits for RabbitMQ to boot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sink_rides_out_network_faults_and_a_broker_restart() {
    let Some(url) = require(Service::RabbitMq) else {
        return;
    };
    let (proxy, proxied) = FaultProxy::in_front_of(&url).await.unwrap();
    for fault in Fault::table(Fault::blackhole_from_env(), "rabbitmq") {
        let queue = unique_name("faults");
        {
            let (conn, ch) = channel(&url).await;
            declare(&ch, &queue).await;
            let _ = conn.close(200, "done".into()).await;
        }
        let sink = {
            let (proxied, queue) = (proxied.clone(), queue.clone());
            move || {
                RabbitSink::builder(&proxied)
                    .routing_key(&queue)
                    .confirm_window(100)
                    .build(|n: &u64| {
                        Ok(OutMessage {
                            body: n.to_string().into_bytes(),
                            correlation_id: Some(n.to_string()),
                            ..OutMessage::default()
                        })
                    })
                    .unwrap()
            }
        };
        let run = sink_under_fault(
            "faults-rabbitmq",
            &proxy,
            fault.clone(),
            2_000,
            sink,
            || {
                let (url, queue) = (url.clone(), queue.clone());
                async move { depth(&url, &queue).await }
            },
        )
        .await;
        proxy.clear();
        let (seen, total) = drain(&url, &queue).await;
        let want: HashSet<u64> = (0..run.emitted).collect();
        assert!(
            seen == want,
            "rabbitmq under {}: {} distinct of {} records ({total} messages)",
            run.fault,
            seen.len(),
            run.emitted
        );
        eprintln!(
            "{} | {} duplicates",
            run.report("rabbitmq sink (at-least-once)"),
            total - seen.len()
        );
    }
}
