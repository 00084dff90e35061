//! Network faults and a broker restart between the Kafka sink and the broker, through the
//! testkit's fault proxy — on the broker's listener that advertises the proxy's address, so
//! every connection of the client goes through it: a blackhole mid-stream, connection resets
//! every two seconds, 200 ms latency, the broker restarted. At-least-once and exactly-once:
//! the job keeps running or restarts itself and ends with every record in the topic (once,
//! for exactly-once). Alone in this file: it restarts the broker.

mod common;

use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::ClientConfig;
use rivus_connector_kafka::{KafkaSink, OutRecord};
use rivus_sdk::DeliveryGuarantee;
use rivus_testkit::faults::{sink_under_fault, Fault};
use rivus_testkit::services::unique_name;

/// The sum of the topic's high watermarks (markers included), retried while the broker is
/// away; a topic not yet created counts 0.
async fn end_offsets(bootstrap: &str, topic: &str) -> u64 {
    let (b, t) = (bootstrap.to_owned(), topic.to_owned());
    loop {
        let (b, t) = (b.clone(), t.clone());
        let got = tokio::task::spawn_blocking(move || {
            let c: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", &b)
                .create()
                .ok()?;
            let md = c.fetch_metadata(Some(&t), Duration::from_secs(5)).ok()?;
            let parts: Vec<i32> = md.topics()[0].partitions().iter().map(|p| p.id()).collect();
            let mut sum = 0u64;
            for p in parts {
                let (_, hi) = c.fetch_watermarks(&t, p, Duration::from_secs(5)).ok()?;
                sum += hi.max(0) as u64;
            }
            Some(sum)
        })
        .await;
        if let Ok(Some(n)) = got {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Over 60 s (115 s here): each fault of the table holds for seconds on purpose (a blackhole
/// long enough to time requests out, resets every 2 s, the broker's restart and its election),
/// at-least-once then exactly-once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sink_rides_out_network_faults_and_a_broker_restart() {
    let Some((bootstrap, proxy, through)) = common::behind_a_fault_proxy().await else {
        return;
    };
    let logs = tempfile::tempdir().unwrap();
    for exactly_once in [false, true] {
        for fault in Fault::table(Fault::blackhole_from_env(), "kafka") {
            let topic = unique_name("faults");
            common::create_topic(&bootstrap, &topic, 2).await;
            let sink = {
                let (through, topic) = (through.clone(), topic.clone());
                let dir = logs.path().join(&topic);
                move || {
                    let mut b = KafkaSink::builder(&through)
                        .topic(topic.clone())
                        .property("linger.ms", "5");
                    if exactly_once {
                        b = b
                            .guarantee(DeliveryGuarantee::ExactlyOnce)
                            .transactional_id_prefix(topic.clone())
                            .transaction_log_dir(dir.clone());
                    }
                    b.build(|n: &u64| {
                        Ok(OutRecord {
                            key: Some(n.to_string().into_bytes()),
                            value: Some(n.to_string().into_bytes()),
                            ..Default::default()
                        })
                    })
                    .unwrap()
                }
            };
            let run = sink_under_fault("faults-kafka", &proxy, fault.clone(), 2_000, sink, || {
                let (b, t) = (bootstrap.clone(), topic.clone());
                async move { end_offsets(&b, &t).await }
            })
            .await;
            proxy.clear();
            let n = run.emitted as usize;
            let (b, t) = (bootstrap.clone(), topic.clone());
            let values = tokio::task::spawn_blocking(move || common::read_topic(&b, &t))
                .await
                .unwrap();
            let mut distinct: Vec<u64> = values.iter().map(|(_, v)| v.parse().unwrap()).collect();
            distinct.sort_unstable();
            let total = distinct.len();
            distinct.dedup();
            assert_eq!(
                distinct,
                (0..n as u64).collect::<Vec<_>>(),
                "kafka ({}) under {}: every record",
                if exactly_once {
                    "exactly-once"
                } else {
                    "at-least-once"
                },
                run.fault
            );
            if exactly_once {
                assert_eq!(total, n, "exactly-once under {}: no duplicate", run.fault);
            }
            eprintln!(
                "{} | {} duplicates",
                run.report(if exactly_once {
                    "kafka sink exactly-once"
                } else {
                    "kafka sink at-least-once"
                }),
                total - n
            );
        }
    }
}
