//! The source's run over partitions it assigns itself (not group mode): plan where each
//! owned partition starts (and, bounded, stops), assign them and start the consumer thread,
//! then emit what the thread hands over until every bounded partition reached its stop.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rdkafka::consumer::Consumer;
use rdkafka::{Offset, TopicPartitionList};
use rivus_sdk::prelude::*;

use super::fetcher::{Discovery, FetchBatch, Fetcher};
use super::group_assignment::tp_key;
use super::offsets::{self, Plan, StopOffsets};
use super::subscription::Subscription;
use super::{KafkaSource, KafkaSourceState};
use crate::kafka_err;

/// What is left to read: the partitions still short of their stop offsets.
struct Progress {
    bounded: bool,
    /// `topic/partition` → the offset to stop before (bounded only).
    stop_at: BTreeMap<String, i64>,
    unfinished: BTreeSet<String>,
}

impl Progress {
    /// The progress of a run starting at `positions`.
    fn new(positions: &KafkaSourceState, plan: &Plan, bounded: bool) -> Self {
        let stop_at: BTreeMap<String, i64> = plan
            .stop
            .iter()
            .map(|((t, p), o)| (tp_key(t, *p), *o))
            .collect();
        let unfinished = positions
            .iter()
            .filter(|(k, o)| !bounded || stop_at.get(*k).is_some_and(|s| **o < *s))
            .map(|(k, _)| k.clone())
            .collect();
        Progress {
            bounded,
            stop_at,
            unfinished,
        }
    }

    /// A bounded run whose every partition reached its stop offset.
    fn done(&self) -> bool {
        self.bounded && self.unfinished.is_empty()
    }

    /// `key` reached its stop offset.
    fn finish(&mut self, key: &str) {
        self.unfinished.remove(key);
        self.stop_at.remove(key);
    }
}

impl<T: Send + 'static> KafkaSource<T> {
    /// `run` outside group mode.
    pub(super) async fn run_assigned(
        &mut self,
        ctx: &mut SourceContext<T, KafkaSourceState>,
    ) -> Result<()> {
        let plan = self.plan_offsets(ctx.state().clone()).await?;
        *ctx.state_mut() = plan
            .positions
            .iter()
            .map(|((t, p), o)| (tp_key(t, *p), *o))
            .collect();
        let bounded = !matches!(self.settings.stop, StopOffsets::Never);
        let mut progress = Progress::new(ctx.state(), &plan, bounded);
        tracing::info!(
            subtask = self.subtask,
            partitions = plan.positions.len(),
            bounded,
            "kafka source assigned"
        );
        if progress.done() {
            return Ok(());
        }
        self.assign_and_fetch(&plan, bounded)?;
        let handover = Arc::clone(&self.running()?.handover);
        while let Some(batch) = self.next_batch(ctx, &handover).await? {
            self.emit(ctx, batch, &mut progress).await?;
            if progress.done() {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Which partitions are this subtask's, and where each starts and (if bounded) stops —
    /// asked of the brokers on a blocking thread.
    async fn plan_offsets(&self, restored: KafkaSourceState) -> Result<Plan> {
        let settings = Arc::clone(&self.settings);
        let consumer = Arc::clone(&self.running()?.consumer);
        let (subtask, parallelism) = (self.subtask, self.parallelism);
        tokio::task::spawn_blocking(move || {
            offsets::plan(
                &settings.subscription,
                &settings.start,
                &settings.stop,
                &consumer,
                restored,
                subtask,
                parallelism,
            )
        })
        .await
        .map_err(|e| Error::connector("kafka source: planning offsets", e.to_string()))?
    }

    /// Assigns the planned partitions at their offsets and starts the consumer thread
    /// (discovering new partitions when unbounded and asked to).
    fn assign_and_fetch(&mut self, plan: &Plan, bounded: bool) -> Result<()> {
        let settings = Arc::clone(&self.settings);
        let (subtask, parallelism) = (self.subtask, self.parallelism);
        let mut tpl = TopicPartitionList::new();
        for ((t, p), o) in &plan.positions {
            tpl.add_partition_offset(t, *p, Offset::Offset(*o))
                .map_err(|e| kafka_err("kafka source: assign", e))?;
        }
        let r = self.running()?;
        r.consumer
            .assign(&tpl)
            .map_err(|e| kafka_err("kafka source: assign", e))?;
        let fetcher = Fetcher {
            consumer: Arc::clone(&r.consumer),
            handover: Arc::clone(&r.handover),
            deserializer: Arc::clone(&self.deserializer),
            running: Arc::clone(&r.alive),
            max_batch: settings.max_batch,
            discovery: match (&settings.subscription, settings.discovery, bounded) {
                (Subscription::Partitions(_), _, _) | (_, None, _) | (_, _, true) => None,
                (sub, Some(every), false) => Some(Discovery {
                    every,
                    subscription: sub.clone(),
                    subtask,
                    parallelism,
                    known: plan.positions.keys().cloned().collect(),
                }),
            },
            report_positions: bounded,
        };
        let thread = fetcher
            .spawn(format!("kafka-consumer-{subtask}"))
            .map_err(|e| Error::connector("kafka source: starting the consumer thread", e))?;
        if let Some(r) = self.running.as_mut() {
            r.thread = Some(thread);
        }
        Ok(())
    }

    /// Emits one batch, each record's offset in the state with it; refused records go to
    /// the error policy; a bounded partition stops at its stop offset.
    async fn emit(
        &self,
        ctx: &mut SourceContext<T, KafkaSourceState>,
        batch: FetchBatch<T>,
        progress: &mut Progress,
    ) -> Result<()> {
        for (t, p) in batch.new_partitions {
            ctx.state_mut().entry(tp_key(&t, p)).or_insert(0);
        }
        let r = self.running()?;
        let n = batch.records.len() as u64;
        // Per partition of the batch, once: its state key and whether it still runs.
        let keys: Vec<String> = batch
            .partitions
            .iter()
            .map(|(t, p)| tp_key(t, *p))
            .collect();
        let mut stops: Vec<Option<i64>> = keys
            .iter()
            .map(|k| progress.stop_at.get(k).copied())
            .collect();
        let mut live: Vec<bool> = keys
            .iter()
            .map(|k| !progress.bounded || progress.unfinished.contains(k))
            .collect();
        for f in batch.records {
            if !live[f.part] {
                continue;
            }
            let key = &keys[f.part];
            let (part, offset) = (f.part, f.offset);
            r.emit(ctx, key, f).await?;
            if stops[part].is_some_and(|s| offset + 1 >= s) {
                live[part] = false;
                stops[part] = None;
                progress.finish(key);
            }
        }
        r.records.increment(n);
        r.bytes.increment(batch.bytes);
        // Read to the end although the last offsets carried no record (transaction
        // markers): the consumer's position has passed the stop offset.
        for (t, p, position) in batch.positions {
            let key = tp_key(&t, p);
            if progress.stop_at.get(&key).is_some_and(|s| position >= *s) {
                let slot = ctx.state_mut().entry(key.clone()).or_insert(0);
                *slot = (*slot).max(position);
                progress.finish(&key);
            }
        }
        Ok(())
    }
}
