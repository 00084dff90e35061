//! Committing a completed checkpoint's offsets to the consumer group.
//!
//! In the default mode the source commits them between records, when the checkpoint's
//! completion reaches its task. In group mode (unless an exactly-once sink commits them, see
//! `offsets_link.rs`) a task of its own commits them as soon as the checkpoint completes, and
//! tells the link which assignment the commit covered: a revocation waits on the consumer
//! thread for that, while the source's task may be waiting for the very consumer thread.

use std::collections::BTreeSet;
use std::sync::Arc;

use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use rivus_sdk::CompletedCheckpoints;

use super::group_assignment::{parse_tp, Assignment};
use super::lag::SourceConsumer;
use super::offsets_link::OffsetsLink;
use super::KafkaSourceState;

/// The counters of the group commits.
#[derive(Clone)]
pub(crate) struct CommitCounters {
    pub ok: metrics::Counter,
    pub failed: metrics::Counter,
}

/// Commits `state`'s offsets to the group, only those of partitions in `held` when given (a
/// partition that moved is the new owner's to commit). Returns whether it committed.
pub(crate) async fn commit(
    consumer: &Arc<SourceConsumer>,
    held: Option<BTreeSet<String>>,
    state: &KafkaSourceState,
    counters: &CommitCounters,
) -> bool {
    let mut tpl = TopicPartitionList::new();
    for (k, off) in state {
        if held.as_ref().is_some_and(|h| !h.contains(k)) {
            continue;
        }
        if let Some((t, p)) = parse_tp(k) {
            let _ = tpl.add_partition_offset(&t, p, Offset::Offset(*off));
        }
    }
    if tpl.count() == 0 {
        return true;
    }
    let consumer = Arc::clone(consumer);
    let result = tokio::task::spawn_blocking(move || consumer.commit(&tpl, CommitMode::Sync)).await;
    match result {
        Ok(Ok(())) => {
            counters.ok.increment(1);
            true
        }
        Ok(Err(e)) => {
            counters.failed.increment(1);
            tracing::warn!(error = %e, "kafka offset commit failed (progress is still checkpointed)");
            false
        }
        Err(e) => {
            tracing::warn!(error = %e, "kafka offset commit task failed");
            false
        }
    }
}

/// Group mode: the task that commits each completed checkpoint's positions (recorded at its
/// barrier in the link) and then reports the assignment version they covered.
pub(crate) struct Committer {
    task: tokio::task::JoinHandle<()>,
    /// The newest completed checkpoint the task has handled.
    handled: tokio::sync::watch::Receiver<u64>,
}

impl Committer {
    pub(super) fn spawn(
        consumer: Arc<SourceConsumer>,
        assignment: Assignment,
        link: Arc<OffsetsLink>,
        mut completed: CompletedCheckpoints,
        counters: CommitCounters,
    ) -> Self {
        let (tx, handled) = tokio::sync::watch::channel(0);
        let task = tokio::spawn(async move {
            while let Some(id) = completed.changed().await {
                // With an exactly-once sink its transactions commit the offsets.
                if !link.sink_commits() {
                    if let Some(at) = link.take_completed(id) {
                        if commit(
                            &consumer,
                            Some(assignment.current()),
                            &at.positions,
                            &counters,
                        )
                        .await
                        {
                            link.committed(at.seen);
                        }
                    }
                }
                tx.send_replace(id);
            }
        });
        Committer { task, handled }
    }

    /// Waits (at most `limit`) until the task handled checkpoint `id` (the final one, before
    /// the source closes).
    pub(super) async fn handled(&mut self, id: u64, limit: std::time::Duration) {
        let _ = tokio::time::timeout(limit, self.handled.wait_for(|h| *h >= id)).await;
    }

    pub(super) fn stop(self) {
        self.task.abort();
    }
}
