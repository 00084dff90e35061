//! Network faults and a broker restart between the Kafka source and the broker, through the
//! testkit's fault proxy (on the listener that advertises the proxy's address): a blackhole,
//! connection resets every two seconds, 200 ms latency, the broker restarted, while the test
//! keeps producing. The job keeps running or restarts itself and receives every record.
//! Alone in this file: it restarts the broker.

mod common;

use rivus_connector_kafka::{KafkaSource, StartOffsets, ValueDeserializer};
use rivus_sdk::schema::JsonSchema;
use rivus_testkit::faults::{source_under_fault, Fault};
use rivus_testkit::services::unique_name;

/// Over 60 s (66 s here): each fault of the table lasts seconds on purpose, and the broker's
/// restart waits for its election.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_rides_out_network_faults_and_a_broker_restart() {
    let Some((bootstrap, proxy, through)) = common::behind_a_fault_proxy().await else {
        return;
    };
    let producer = common::producer(&bootstrap);
    for fault in Fault::table(Fault::blackhole_from_env(), "kafka") {
        let topic = unique_name("source-faults");
        common::create_topic(&bootstrap, &topic, 2).await;
        let source = {
            let (through, topic) = (through.clone(), topic.clone());
            move || {
                KafkaSource::builder(&through)
                    .topics([topic.clone()])
                    .start(StartOffsets::Earliest)
                    .build(ValueDeserializer(JsonSchema::<u64>::new()))
                    .unwrap()
            }
        };
        let produce = {
            let (producer, topic) = (producer.clone(), topic.clone());
            move |from: u64, to: u64| {
                let (producer, topic) = (producer.clone(), topic.clone());
                async move {
                    // Delivered once the broker is back (the producer reconnects).
                    for part in 0..2u64 {
                        let values: Vec<Vec<u8>> = (from..to)
                            .filter(|n| n % 2 == part)
                            .map(|n| n.to_string().into_bytes())
                            .collect();
                        common::produce(&producer, &topic, part as i32, &values).await;
                    }
                }
            }
        };
        let r = source_under_fault("source-faults-kafka", &proxy, fault, source, produce).await;
        proxy.clear();
        eprintln!(
            "{} | {} duplicates",
            r.run.report("kafka source (exactly-once)"),
            r.duplicates
        );
    }
}
