//! Per-partition consumer lag from librdkafka's statistics: the client computes it (high
//! watermark minus position) and hands it over every `statistics.interval.ms` through the
//! consumer's poll — no blocking metadata calls in the poll loop.

use rdkafka::consumer::{BaseConsumer, ConsumerContext};
use rdkafka::ClientContext;
use rivus_sdk::context::MetricsGroup;

/// The consumer of a Kafka source: librdkafka with the lag-reporting context.
pub(crate) type SourceConsumer = BaseConsumer<LagContext>;

/// Publishes `rivus_kafka_consumer_lag{partition="topic/p"}` from each statistics report; in
/// group mode also follows the group's assignment.
pub(crate) struct LagContext {
    pub group: MetricsGroup,
    pub assignment: Option<super::group_assignment::Assignment>,
    /// Group mode with checkpoints: revocations wait for a commit covering the revoked
    /// partitions (see `offsets_link.rs`), at most `drain_limit`.
    pub link: Option<std::sync::Arc<super::offsets_link::OffsetsLink>>,
    pub drain_limit: std::time::Duration,
    /// Group mode: the task's link to a sink that keeps the positions in its database; the
    /// partitions assigned are claimed from there (`claim.rs`).
    pub kept: Option<std::sync::Arc<rivus_sdk::PositionsInSink>>,
    /// A claim that failed: the emitting loop fails the job with it (retryable).
    pub claim_failed: parking_lot::Mutex<Option<rivus_sdk::Error>>,
}

impl LagContext {
    /// The failed claim, if one failed since the last call.
    pub(crate) fn take_claim_failure(&self) -> Option<rivus_sdk::Error> {
        self.claim_failed.lock().take()
    }
}

impl ClientContext for LagContext {
    /// Reads only the offsets it needs from the statistics JSON (see [`lag_of`]), so fields a
    /// librdkafka version adds or drops do not matter.
    fn stats_raw(&self, statistics: &[u8]) {
        let Ok(stats) = serde_json::from_slice::<serde_json::Value>(statistics) else {
            tracing::debug!("kafka source: unreadable statistics");
            return;
        };
        let Some(topics) = stats["topics"].as_object() else {
            return;
        };
        for (topic, t) in topics {
            let Some(partitions) = t["partitions"].as_object() else {
                continue;
            };
            for (partition, p) in partitions {
                // Partition -1 is librdkafka's internal one.
                let Some(partition) = partition.parse::<i32>().ok().filter(|p| *p >= 0) else {
                    continue;
                };
                let Some(lag) = lag_of(p) else { continue };
                self.group
                    .with_label(
                        "partition",
                        super::group_assignment::tp_key(topic, partition),
                    )
                    .gauge("rivus_kafka_consumer_lag")
                    .set(lag as f64);
            }
        }
    }
}

impl ConsumerContext for LagContext {
    /// librdkafka's default rebalance (pre-callback, assign or unassign, incremental under
    /// cooperative-sticky, post-callback), with one step before an assignment when a sink
    /// keeps the positions: the partitions are claimed from its table and start from there.
    /// A failed claim assigns nothing (nothing is read from partitions this worker may not
    /// own) and fails the job through the emitting loop.
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: rdkafka::types::RDKafkaRespErr,
        tpl: &mut rdkafka::TopicPartitionList,
    ) {
        use rdkafka::consumer::{Consumer, Rebalance, RebalanceProtocol};
        use rdkafka::types::RDKafkaRespErr::{
            RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS as ASSIGN,
            RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS as REVOKE,
        };
        if err == ASSIGN {
            if let Some(store) = self.kept.as_ref().and_then(|k| k.store()) {
                if let Err(e) = super::claim::claim_into(store.as_ref(), tpl) {
                    tracing::error!(error = %e, "kafka source: claiming the assigned partitions failed");
                    *self.claim_failed.lock() = Some(e);
                    return;
                }
            }
        }
        let rebalance = match err {
            ASSIGN => Rebalance::Assign(tpl),
            REVOKE => Rebalance::Revoke(tpl),
            e => Rebalance::Error(rdkafka::error::KafkaError::Rebalance(e.into())),
        };
        self.pre_rebalance(consumer, &rebalance);
        let cooperative = matches!(
            consumer.rebalance_protocol(),
            RebalanceProtocol::Cooperative
        );
        let done = match (err, cooperative) {
            (ASSIGN, true) => consumer.incremental_assign(tpl),
            (ASSIGN, false) => consumer.assign(tpl),
            (_, true) => consumer.incremental_unassign(tpl),
            (_, false) => consumer.unassign(),
        };
        if let Err(e) = done {
            tracing::warn!(error = %e, "kafka source: applying a rebalance");
        }
        self.post_rebalance(consumer, &rebalance);
    }

    /// Runs on the consumer thread inside `poll`, before librdkafka gives partitions up: waits
    /// until a commit (a completed checkpoint's, or the sink's transaction) covered the
    /// revoked ones.
    fn pre_rebalance(
        &self,
        _: &rdkafka::consumer::BaseConsumer<Self>,
        rebalance: &rdkafka::consumer::Rebalance<'_>,
    ) {
        if let (Some(link), rdkafka::consumer::Rebalance::Revoke(_)) = (&self.link, rebalance) {
            let gone = super::group_assignment::rebalance_keys(rebalance);
            let started = std::time::Instant::now();
            if link.drain(gone, self.drain_limit) {
                let waited_ms = started.elapsed().as_millis() as u64;
                if link.sink_commits() {
                    tracing::info!(
                        waited_ms,
                        "kafka source: revoked partitions committed by the sink's transaction"
                    );
                } else {
                    tracing::info!(
                        waited_ms,
                        "kafka source: revoked partitions committed by a completed checkpoint"
                    );
                }
            }
        }
    }

    /// Runs on the consumer thread inside `poll`, after librdkafka applied the change.
    fn post_rebalance(
        &self,
        _: &rdkafka::consumer::BaseConsumer<Self>,
        rebalance: &rdkafka::consumer::Rebalance<'_>,
    ) {
        if let Some(a) = &self.assignment {
            a.apply(rebalance);
        }
    }
}

/// The end a consumer can read to (the last stable offset under `read_committed`, else the
/// high watermark) minus the next offset the consumer thread takes from librdkafka (its
/// `app_offset`; before the first record, the fetch position less what is queued locally).
/// librdkafka's own `consumer_lag` counts from the committed offset, which rivus commits only
/// when a checkpoint completes. `None` while the partition is not fetched yet.
fn lag_of(p: &serde_json::Value) -> Option<i64> {
    let get = |k: &str| p[k].as_i64().filter(|v| *v >= 0);
    let end = get("ls_offset").or_else(|| get("hi_offset"))?;
    let position =
        get("app_offset").or_else(|| Some(get("next_offset")? - get("fetchq_cnt").unwrap_or(0)))?;
    Some((end - position).max(0))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn lag_from_the_statistics_fields() {
        let p = json!({"app_offset": 15000, "hi_offset": 20000, "ls_offset": 19990,
                       "next_offset": 20000, "fetchq_cnt": 5001});
        assert_eq!(super::lag_of(&p), Some(4990));
        let before = json!({"app_offset": -1001, "hi_offset": 100, "ls_offset": -1001,
                            "next_offset": 60, "fetchq_cnt": 60});
        assert_eq!(super::lag_of(&before), Some(100));
        let unknown = json!({"app_offset": -1001, "hi_offset": -1001, "ls_offset": -1001});
        assert_eq!(super::lag_of(&unknown), None);
    }
}
