//! The Kafka build: TLS, SASL and every compression codec are compiled in, and both directions
//! handle each codec against the real broker — the sink writes compressed batches a plain
//! consumer reads, and the source reads batches Kafka's own Java producer compressed.

use rdkafka::config::ClientConfig;
use rivus_connector_kafka::{
    KafkaSink, KafkaSource, OutRecord, StartOffsets, StopOffsets, ValueDeserializer,
};

use rivus_sdk::schema::StringSchema;
use rivus_testkit::run_records_into;
use rivus_testkit::services::{require, unique_name as unique, Service};

mod common;
use common::{create_topic, read_topic};

const CODECS: [&str; 4] = ["gzip", "snappy", "lz4", "zstd"];

#[test]
fn the_build_has_tls_sasl_and_every_codec() {
    let conf = ClientConfig::new().create_native_config().unwrap();
    let features = conf.get("builtin.features").unwrap();
    for f in [
        "ssl",
        "sasl_plain",
        "sasl_scram",
        "sasl_oauthbearer",
        "gzip",
        "snappy",
        "lz4",
        "zstd",
    ] {
        assert!(
            features.split(',').any(|x| x == f),
            "librdkafka lacks `{f}`: {features}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sink_writes_every_codec() {
    let Some(bootstrap) = require(Service::Kafka) else {
        return;
    };
    for codec in CODECS {
        let topic = unique(&format!("sink-{codec}"));
        create_topic(&bootstrap, &topic, 1).await;
        let values: Vec<String> = (0..500).map(|i| format!("{codec}-{i:04}")).collect();
        let sink = KafkaSink::builder(&bootstrap)
            .topic(&topic)
            .property("compression.codec", codec)
            .build(|v: &String| {
                Ok(OutRecord {
                    value: Some(v.clone().into_bytes()),
                    ..Default::default()
                })
            })
            .unwrap();
        run_records_into(&format!("compress-{codec}"), values.clone(), |_| {
            sink.clone()
        })
        .await
        .unwrap_or_else(|e| panic!("{codec}: {e}"));
        let (b, t) = (bootstrap.clone(), topic.clone());
        let got: Vec<String> = tokio::task::spawn_blocking(move || read_topic(&b, &t))
            .await
            .unwrap()
            .into_iter()
            .map(|(_, v)| v)
            .collect();
        assert_eq!(got, values, "{codec}");
    }
}

/// Kafka's own Java producer (`dev/kafka/Produce.java`, class path in `RIVUS_KAFKA_JAVA_CP`
/// from `dev/services env`) writes `count` values compressed with `codec`.
fn java_produce(bootstrap: &str, topic: &str, codec: &str, count: usize) {
    let cp = std::env::var("RIVUS_KAFKA_JAVA_CP")
        .expect("RIVUS_KAFKA_JAVA_CP: run `eval \"$(dev/services env)\"` (Kafka's Java client)");
    let out = std::process::Command::new("java")
        .args(["-Xmx128m", "-cp", &cp, "Produce", bootstrap, topic, codec])
        .args([count.to_string(), codec.to_owned()])
        .output()
        .expect("java runs");
    assert!(
        out.status.success(),
        "{codec}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_source_reads_every_codec_from_kafkas_own_producer() {
    let Some(bootstrap) = require(Service::Kafka) else {
        return;
    };
    for codec in CODECS {
        let topic = unique(&format!("src-{codec}"));
        create_topic(&bootstrap, &topic, 1).await;
        let (b, t) = (bootstrap.clone(), topic.clone());
        tokio::task::spawn_blocking(move || java_produce(&b, &t, codec, 500))
            .await
            .unwrap();
        let source = KafkaSource::builder(&bootstrap)
            .topics([topic.clone()])
            .start(StartOffsets::Earliest)
            .stop(StopOffsets::LatestAtStart)
            .build(ValueDeserializer(StringSchema))
            .unwrap();
        let got = rivus_testkit::read_all(&format!("decompress-{codec}"), source, 1).await;
        let expected: Vec<String> = (0..500).map(|i| format!("{codec}-{i:04}")).collect();
        assert_eq!(got, expected, "{codec}");
    }
}
