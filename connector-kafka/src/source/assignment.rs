//! The partitions Kafka's consumer group gives a source's consumer now, kept by the rebalance
//! callbacks on the consumer thread and read by the emitting loop (group mode).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use rdkafka::consumer::Rebalance;
use rdkafka::TopicPartitionList;

use super::tp_key;

/// The partitions the group gave this consumer now (`topic/partition` keys), kept by the
/// rebalance callbacks and read by the emitting loop. A version counts the rebalances, so the
/// loop copies the set only when it changed, not per batch.
#[derive(Debug, Clone, Default)]
pub(crate) struct Assignment(Arc<(Mutex<BTreeSet<String>>, AtomicU64)>);

impl Assignment {
    /// The partitions held now.
    pub fn current(&self) -> BTreeSet<String> {
        self.0 .0.lock().clone()
    }

    /// Changes with every rebalance that changed the set.
    pub fn version(&self) -> u64 {
        self.0 .1.load(Ordering::Acquire)
    }

    /// Follows a rebalance (cooperative: assignments and revocations are increments).
    pub fn apply(&self, rebalance: &Rebalance<'_>) {
        let keys = |tpl: &TopicPartitionList| -> Vec<String> {
            tpl.elements()
                .iter()
                .map(|e| tp_key(e.topic(), e.partition()))
                .collect()
        };
        match rebalance {
            Rebalance::Assign(tpl) => {
                let added = keys(tpl);
                tracing::info!(partitions = ?added, "kafka source: the group assigned partitions");
                self.0 .0.lock().extend(added);
                self.0 .1.fetch_add(1, Ordering::Release);
            }
            Rebalance::Revoke(tpl) => {
                let gone = keys(tpl);
                tracing::info!(partitions = ?gone, "kafka source: the group revoked partitions");
                let mut held = self.0 .0.lock();
                for k in gone {
                    held.remove(&k);
                }
                self.0 .1.fetch_add(1, Ordering::Release);
            }
            Rebalance::Error(e) => tracing::warn!(error = %e, "kafka source: rebalance error"),
        }
    }
}
