//! `kafka-copy`: copies a topic into another exactly-once (a bounded Kafka source at the latest
//! offsets seen at start → a transactional Kafka sink), checkpointing into a directory. Run it
//! again after a crash and it resumes from its last checkpoint. Used by the crash tests.
//!
//! ```text
//! kafka-copy <bootstrap> <from-topic> <to-topic> <state-dir> <txn-id-prefix> [parallelism]
//! ```

use std::sync::Arc;
use std::time::Duration;

use rivus_connector_kafka::{
    KafkaRecord, KafkaSink, KafkaSource, OutRecord, SinkDelivery, StartOffsets, StopOffsets,
};
use rivus_core::prelude::*;
use rivus_core::schema::SchemaError;

/// Key and value, copied as they are.
fn copy(r: &KafkaRecord<'_>) -> Result<OutRecord, SchemaError> {
    Ok(OutRecord {
        key: r.key.map(<[u8]>::to_vec),
        value: r.value.map(<[u8]>::to_vec),
        ..Default::default()
    })
}

struct Copy;

impl rivus_connector_kafka::KafkaDeserializer<OutRecord> for Copy {
    fn deserialize(&self, r: &KafkaRecord<'_>) -> Result<OutRecord, SchemaError> {
        copy(r)
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 5 {
        eprintln!("usage: kafka-copy <bootstrap> <from-topic> <to-topic> <state-dir> <txn-id-prefix> [parallelism]");
        std::process::exit(2);
    }
    let (bootstrap, from, to, dir, prefix) = (&args[0], &args[1], &args[2], &args[3], &args[4]);
    let parallelism: usize = args.get(5).and_then(|p| p.parse().ok()).unwrap_or(2);
    let source = KafkaSource::builder(bootstrap)
        .topics([from.clone()])
        .start(StartOffsets::Earliest)
        .stop(StopOffsets::LatestAtStart)
        .build(Copy)?;
    let sink = KafkaSink::builder(bootstrap)
        .topic(to.clone())
        .delivery(SinkDelivery::ExactlyOnce)
        .transactional_id_prefix(prefix.clone())
        .property("linger.ms", "5")
        .build(|r: &OutRecord| Ok(r.clone()))?;
    let backend = Arc::new(FsStateBackend::new(dir, 3)?);
    let job = Pipeline::new("kafka-copy")
        .checkpointing(CheckpointConfig::new(Duration::from_millis(100), backend))
        .source("from", parallelism, |_| source.clone())
        .sink("to", parallelism, |_| sink.clone())?;
    job.handle().stop_on_signals();
    let summary = job.run().await?;
    println!("done: {summary:?}");
    Ok(())
}
