//! `kafka-copy`: copies a topic into another exactly-once (a bounded Kafka source at the latest
//! offsets seen at start → a transactional Kafka sink), checkpointing into a directory. Run it
//! again after a crash and it resumes from its last checkpoint. Used by the crash tests.
//!
//! ```text
//! kafka-copy <bootstrap> <from-topic> <to-topic> <state-dir> <txn-id-prefix> [parallelism]
//! ```
//!
//! `KAFKA_COPY_CRASH=<step>:<n>` kills the process with SIGKILL the `n`-th time a sink
//! transaction of a checkpoint reaches `<step>` (`pre-commit`, `commit` or `committed`, see
//! [`TxnStep`]), after printing `crash at <step> <checkpoint>`. Every transaction restored and written again
//! from its log prints `recovered <checkpoint>`. A run with a crash point is held to the
//! pace of its transactions: once it has copied [`AHEAD`] records more than the steps it has
//! seen allow, each further record waits a millisecond, so the `n`-th step comes long before
//! the end of a bounded input however fast the copy is and however slow a cold broker's first
//! transaction; a run without one copies at full speed.

use std::sync::Arc;
use std::time::Duration;

use std::sync::atomic::{AtomicU64, Ordering};

use rivus_connector_kafka::{
    KafkaRecord, KafkaSink, KafkaSource, OutRecord, StartOffsets, StopOffsets, TxnStep,
};
use rivus_sdk::prelude::*;
use rivus_sdk::schema::SchemaError;

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

/// Records a run with a crash point copies per step of the crash's kind seen (plus one)
/// before it slows to a record a millisecond.
const AHEAD: u64 = 20_000;

/// The hook of `KAFKA_COPY_CRASH`: `(step, n)`; `seen` counts the steps of that kind.
fn crash_hook(
    spec: Option<String>,
    seen: Arc<AtomicU64>,
) -> impl Fn(TxnStep) + Send + Sync + 'static {
    let spec = spec.map(|s| {
        let (step, n) = s.split_once(':').expect("KAFKA_COPY_CRASH=<step>:<n>");
        (
            step.to_owned(),
            n.parse::<u64>().expect("KAFKA_COPY_CRASH: n"),
        )
    });
    let started = std::time::Instant::now();
    move |step| {
        let (name, checkpoint) = match step {
            TxnStep::PreCommit(c) => ("pre-commit", c),
            TxnStep::Commit(c) => ("commit", c),
            TxnStep::Committed(c) => ("committed", c),
            TxnStep::Recovered(c) => {
                println!("recovered {c}");
                return;
            }
        };
        let Some((want, n)) = &spec else { return };
        // The run's timeline, for a test that fails to say where the time went.
        eprintln!(
            "step {name} {checkpoint} at {} ms",
            started.elapsed().as_millis()
        );
        // `u64::MAX`: the commit at the end of the input, which no checkpoint covers.
        if name == want && checkpoint != u64::MAX && seen.fetch_add(1, Ordering::SeqCst) + 1 == *n {
            println!("crash at {name} {checkpoint}");
            let pid = std::process::id().to_string();
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid])
                .status();
            loop {
                std::thread::park();
            }
        }
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
    let crash = std::env::var("KAFKA_COPY_CRASH").ok();
    let seen = Arc::new(AtomicU64::new(0));
    let source = KafkaSource::builder(bootstrap)
        .topics([from.clone()])
        .start(StartOffsets::Earliest)
        .stop(StopOffsets::LatestAtStart)
        .build(Copy)?;
    let sink = KafkaSink::builder(bootstrap)
        .topic(to.clone())
        .guarantee(DeliveryGuarantee::ExactlyOnce)
        .transactional_id_prefix(prefix.clone())
        .property("linger.ms", "5")
        .transaction_hook(crash_hook(crash.clone(), seen.clone()))
        .build(|r: &OutRecord| Ok(r.clone()))?;
    let backend = Arc::new(FsStateBackend::new(dir, 3)?);
    let pipeline = Pipeline::new("kafka-copy")
        .checkpointing(CheckpointConfig::new(Duration::from_millis(100), backend));
    let mut stream = pipeline.source("from", parallelism, |_| source.clone());
    if crash.is_some() {
        let copied = AtomicU64::new(0);
        stream = stream.map(move |r: OutRecord| {
            let allowed = (seen.load(Ordering::SeqCst) + 1) * AHEAD;
            if copied.fetch_add(1, Ordering::Relaxed) >= allowed {
                std::thread::sleep(Duration::from_millis(1));
            }
            r
        });
    }
    let job = stream.sink("to", parallelism, |_| sink.clone())?;
    job.handle().stop_on_signals();
    let summary = job.run().await?;
    println!("done: {summary:?}");
    Ok(())
}
