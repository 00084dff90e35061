//! The consumer thread: polls the `BaseConsumer` in batches, decodes each record where it
//! lies in librdkafka's buffer (no copy of keys and values: only the decoded value crosses),
//! and hands the batches to the emitting loop through core's `Handover` (Flink's
//! KafkaConsumerThread). Also discovers new partitions on an interval and assigns those this
//! subtask owns.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use rivus_sdk::handover::{Handover, ProduceError};

use super::lag::SourceConsumer;
use super::subscription::Subscription;
use crate::kafka_err;
use crate::record::{KafkaDeserializer, KafkaRecord};
use rivus_sdk::schema::SchemaError;

/// A record the deserializer refused: the error and the value, for the error policy.
#[derive(Debug)]
pub(crate) struct Refused {
    pub error: SchemaError,
    pub position: String,
    pub value: Vec<u8>,
}

/// One consumed record, decoded.
#[derive(Debug)]
pub(crate) struct Fetched<T> {
    /// Index into [`FetchBatch::partitions`].
    pub part: usize,
    pub offset: i64,
    pub timestamp: Option<i64>,
    pub value: Result<T, Box<Refused>>,
}

/// What crosses the handover.
#[derive(Debug)]
pub(crate) struct FetchBatch<T> {
    /// The partitions the records of this batch come from.
    pub partitions: Vec<(String, i32)>,
    pub records: Vec<Fetched<T>>,
    /// Value bytes of the records (for the bytes metric).
    pub bytes: u64,
    /// Partitions discovered and assigned from their beginning.
    pub new_partitions: Vec<(String, i32)>,
    /// When the consumer ran dry (bounded sources): the next offset of every assigned
    /// partition. A partition can end in offsets that carry no record (transaction markers,
    /// compacted records); its position, not its last record, says it is read to the end.
    pub positions: Vec<(String, i32, i64)>,
}

impl<T> Default for FetchBatch<T> {
    fn default() -> Self {
        FetchBatch {
            partitions: Vec::new(),
            records: Vec::new(),
            bytes: 0,
            new_partitions: Vec::new(),
            positions: Vec::new(),
        }
    }
}

/// The first batch's size at most: small, so that the first records go downstream while the
/// consumer still fills; each batch handed over after it may be twice the last, up to
/// `max_batch` (a full topic otherwise starts with `max_batch` records decoded and sent
/// through the chain before the first leaves).
const FIRST_BATCH: usize = 256;

pub(crate) struct Discovery {
    pub every: Duration,
    pub subscription: Subscription,
    pub subtask: usize,
    pub parallelism: usize,
    pub known: BTreeSet<(String, i32)>,
}

pub(crate) struct Fetcher<T> {
    pub consumer: Arc<SourceConsumer>,
    pub handover: Arc<Handover<FetchBatch<T>>>,
    pub deserializer: Arc<dyn KafkaDeserializer<T>>,
    pub running: Arc<AtomicBool>,
    pub max_batch: usize,
    pub discovery: Option<Discovery>,
    /// Report positions when the consumer runs dry (bounded sources).
    pub report_positions: bool,
}

impl<T: Send + 'static> Fetcher<T> {
    pub(super) fn spawn(self, name: String) -> std::io::Result<JoinHandle<()>> {
        std::thread::Builder::new()
            .name(name)
            .spawn(move || self.run())
    }

    fn run(mut self) {
        let mut pending: Option<FetchBatch<T>> = None;
        let mut next_discovery = self.discovery.as_ref().map(|d| Instant::now() + d.every);
        let mut limit = FIRST_BATCH.min(self.max_batch);
        while self.running.load(Ordering::Acquire) {
            let mut batch = pending.take().unwrap_or_default();
            if let Some(at) = next_discovery {
                if Instant::now() >= at {
                    match self.discover() {
                        Ok(found) => batch.new_partitions.extend(found),
                        Err(e) => {
                            tracing::warn!(error = %e, "kafka partition discovery failed; will retry")
                        }
                    }
                    next_discovery = self.discovery.as_ref().map(|d| Instant::now() + d.every);
                }
            }
            let mut wait = Duration::from_millis(100);
            let mut dry = false;
            while batch.records.len() < limit {
                match self.consumer.poll(wait) {
                    None => {
                        dry = true;
                        break;
                    }
                    Some(Ok(m)) => {
                        let part = match batch
                            .partitions
                            .iter()
                            .position(|(t, p)| *p == m.partition() && t == m.topic())
                        {
                            Some(i) => i,
                            None => {
                                batch.partitions.push((m.topic().to_owned(), m.partition()));
                                batch.partitions.len() - 1
                            }
                        };
                        let headers: Vec<(String, Option<Vec<u8>>)> = m
                            .headers()
                            .map(|h| {
                                h.iter()
                                    .map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec)))
                                    .collect()
                            })
                            .unwrap_or_default();
                        let (topic, partition) = &batch.partitions[part];
                        let timestamp = m.timestamp().to_millis();
                        let rec = KafkaRecord {
                            topic,
                            partition: *partition,
                            offset: m.offset(),
                            timestamp,
                            key: m.key(),
                            value: m.payload(),
                            headers: &headers,
                        };
                        batch.bytes += m.payload().map_or(0, |v| v.len() as u64);
                        let value = self.deserializer.deserialize(&rec).map_err(|error| {
                            Box::new(Refused {
                                error,
                                position: rec.position(),
                                value: m.payload().map(<[u8]>::to_vec).unwrap_or_default(),
                            })
                        });
                        batch.records.push(Fetched {
                            part,
                            offset: m.offset(),
                            timestamp,
                            value,
                        });
                        wait = Duration::ZERO;
                    }
                    Some(Err(KafkaError::PartitionEOF(_))) => {}
                    Some(Err(e @ KafkaError::MessageConsumptionFatal(_))) => {
                        self.handover
                            .report_error(kafka_err("kafka consumer (fatal)", e));
                        return;
                    }
                    Some(Err(e)) => {
                        // librdkafka retries transport errors itself; these are informational.
                        metrics::counter!("rivus_kafka_consumer_errors_total").increment(1);
                        tracing::warn!(error = %e, "kafka consumer error (librdkafka retries)");
                        break;
                    }
                }
            }
            if let Some(e) = self.consumer.context().take_claim_failure() {
                // Group mode: the assigned partitions could not be claimed from the sink's
                // positions table (see `claim.rs`); the job restarts and claims again.
                self.handover.report_error(e);
                return;
            }
            if dry && self.report_positions {
                if let Ok(list) = self.consumer.position() {
                    batch.positions = list
                        .elements()
                        .iter()
                        .filter_map(|e| match e.offset() {
                            Offset::Offset(o) => Some((e.topic().to_owned(), e.partition(), o)),
                            _ => None,
                        })
                        .collect();
                }
            }
            if batch.records.is_empty()
                && batch.new_partitions.is_empty()
                && batch.positions.is_empty()
            {
                continue;
            }
            let records = batch.records.len();
            match self.handover.produce(batch) {
                Ok(()) if records > 0 => limit = (limit * 2).min(self.max_batch),
                Ok(()) => {}
                Err(ProduceError::Wakeup(b)) => pending = Some(b),
                Err(ProduceError::Closed(_)) => return,
            }
        }
    }

    fn discover(&mut self) -> Result<Vec<(String, i32)>, KafkaError> {
        let d = self.discovery.as_mut().expect("discovery configured");
        let all = d
            .subscription
            .partitions(&self.consumer, Duration::from_secs(10))?;
        let mine: Vec<(String, i32)> = all
            .into_iter()
            .filter(|(t, p)| super::owner::owner(t, *p, d.parallelism) == d.subtask)
            .filter(|tp| !d.known.contains(tp))
            .collect();
        if mine.is_empty() {
            return Ok(mine);
        }
        let mut tpl = TopicPartitionList::new();
        for (t, p) in &mine {
            tpl.add_partition_offset(t, *p, Offset::Beginning)?;
        }
        self.consumer.incremental_assign(&tpl)?;
        tracing::info!(partitions = ?mine, "kafka source discovered new partitions");
        d.known.extend(mine.iter().cloned());
        Ok(mine)
    }
}
