//! Group mode: the source subscribes through Kafka's consumer-group protocol
//! (cooperative-sticky assignment) instead of assigning partitions by hand, so that several
//! processes of one job — workers, on one machine or many — share a topic's partitions, and
//! partitions move as workers join and leave.
//!
//! What moves with a partition is the group's committed offset: a completed checkpoint
//! commits the offsets it covers (from a task of its own, `group_commit.rs`), and a worker
//! that gains a partition starts from that commit. A revocation (a worker joins or leaves)
//! waits until a completed checkpoint covered the revoked partitions and its commit went
//! through, so a graceful rebalance repeats nothing. Records a worker emitted after its last
//! completed checkpoint for a partition it loses without a rebalance (it was killed, or
//! missed its session timeout) are read again by the new owner: at-least-once across workers.
//!
//! With an exactly-once Kafka sink chained into the task, the sink commits the offsets instead,
//! inside the transaction of the records read before them (KIP-447, `offsets_link.rs`), and a
//! revocation waits for that transaction: exactly-once across workers.

use std::sync::Arc;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rivus_sdk::{Error, Result, RuntimeContext};

use super::group_assignment::tp_key;
use super::offsets::{StartOffsets, StopOffsets};
use super::subscription::Subscription;
use crate::kafka_err;

/// Checks that a source's settings fit group mode; `Err` names the field.
pub(crate) fn validate(
    subscription: &Subscription,
    start: &StartOffsets,
    stop: &StopOffsets,
) -> Result<()> {
    if matches!(subscription, Subscription::Partitions(_)) {
        return Err(Error::config(
            "partitions",
            "group mode reads topics or a pattern; the group assigns the partitions",
        ));
    }
    if !matches!(stop, StopOffsets::Never) {
        return Err(Error::config(
            "stop",
            "a bounded source cannot run in group mode (its partitions may move)",
        ));
    }
    if matches!(
        start,
        StartOffsets::Timestamp(_) | StartOffsets::Specific(_)
    ) {
        return Err(Error::config(
            "start",
            "group mode starts from the group's committed offsets (then earliest or latest)",
        ));
    }
    Ok(())
}

/// In worker mode a source must be in group mode: refused otherwise, naming the setting.
pub(crate) fn check_worker_mode(ctx: &RuntimeContext, group_mode: bool) -> Result<()> {
    match (ctx.worker(), group_mode) {
        (Some(w), false) => Err(Error::config(
            "group_mode",
            format!(
                "worker `{w}`: a source that assigns its partitions by hand cannot share them \
                 with other workers; turn group mode on"
            ),
        )),
        _ => Ok(()),
    }
}

/// The consumer settings of group mode, where the user set none: cooperative-sticky
/// assignment, the reset for partitions without a commit, and a client id naming the job,
/// worker and subtask (visible in the group's member list).
pub(crate) fn configure(config: &mut ClientConfig, start: &StartOffsets, ctx: &RuntimeContext) {
    crate::config::set_unless_given(
        config,
        &[
            ("partition.assignment.strategy", "cooperative-sticky"),
            ("auto.offset.reset", offset_reset(start)),
        ],
    );
    if config.get("client.id").is_none() {
        let worker = ctx.worker().unwrap_or("main");
        config.set(
            "client.id",
            format!("{}-{worker}-{}", ctx.job_name(), ctx.subtask_index()),
        );
    }
}

/// `auto.offset.reset` for partitions the group has no committed offset of.
pub(crate) fn offset_reset(start: &StartOffsets) -> &'static str {
    match start {
        StartOffsets::Latest
        | StartOffsets::Committed {
            reset_to_earliest: false,
        } => "latest",
        _ => "earliest",
    }
}

/// Subscribes `consumer` to the topics or pattern.
pub(crate) fn subscribe<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    subscription: &Subscription,
) -> Result<()> {
    let topics: Vec<String> = match subscription {
        Subscription::Topics(t) => t.clone(),
        // librdkafka reads a subscription starting with `^` as a regular expression; the
        // pattern matches whole names, as in the default mode.
        Subscription::Pattern(p) => vec![format!("^({p})$")],
        Subscription::Partitions(_) => {
            return validate(subscription, &StartOffsets::Earliest, &StopOffsets::Never)
        }
    };
    let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
    consumer
        .subscribe(&refs)
        .map_err(|e| kafka_err("kafka source: subscribe", e))
}

impl<T: Send + 'static> super::KafkaSource<T> {
    /// The emitting loop of group mode: subscribes, then emits what the consumer thread
    /// fetches for the partitions the group gives this consumer now. The restored positions
    /// are not used: a partition starts from the group's committed offset, wherever it ran
    /// before.
    pub(super) async fn run_group(
        &mut self,
        ctx: &mut rivus_sdk::SourceContext<T, super::KafkaSourceState>,
    ) -> Result<()> {
        let settings = Arc::clone(&self.settings);
        let r = self.running()?;
        let consumer = Arc::clone(&r.consumer);
        let assignment = r
            .assignment
            .clone()
            .ok_or(Error::Closed("kafka source (group mode)"))?;
        ctx.state_mut().clear();
        subscribe(&consumer, &settings.subscription)?;
        let fetcher = super::fetcher::Fetcher {
            consumer,
            handover: Arc::clone(&r.handover),
            deserializer: Arc::clone(&self.deserializer),
            running: Arc::clone(&r.alive),
            max_batch: settings.max_batch,
            discovery: None,
            report_positions: false,
        };
        let thread = fetcher
            .spawn(format!("kafka-consumer-{}", self.subtask))
            .map_err(|e| Error::connector("kafka source: starting the consumer thread", e))?;
        if let Some(r) = self.running.as_mut() {
            r.thread = Some(thread);
        }
        tracing::info!(
            subtask = self.subtask,
            "kafka source subscribed in group mode"
        );

        let handover = Arc::clone(&self.running()?.handover);
        // Whoever commits the offsets learns the positions at every barrier, and which
        // assignment the loop had applied by then.
        let link = r_link(self)?;
        if let Some(link) = &link {
            let link = Arc::clone(link);
            ctx.on_barrier(move |id, positions| link.record_barrier(id, positions));
        }
        let mut view = View::default();
        loop {
            if let Some(l) = &link {
                l.loop_idle(true);
            }
            let next = self.next_batch(ctx, &handover).await;
            if let Some(l) = &link {
                l.loop_idle(false);
            }
            let Some(batch) = next? else {
                return Ok(());
            };
            let keys: Vec<String> = batch
                .partitions
                .iter()
                .map(|(t, p)| tp_key(t, *p))
                .collect();
            let r = self.running()?;
            let n = batch.records.len() as u64;
            view.refresh(&assignment, link.as_deref(), ctx.state_mut());
            let mut live: Vec<bool> = keys.iter().map(|k| view.emitting.contains(k)).collect();
            for f in batch.records {
                // Checked per record (an atomic load): from the moment a revocation is seen,
                // the revoked partitions' records are the new owner's to read.
                if view.refresh(&assignment, link.as_deref(), ctx.state_mut()) {
                    live = keys.iter().map(|k| view.emitting.contains(k)).collect();
                }
                if !live[f.part] {
                    continue;
                }
                r.emit(ctx, &keys[f.part], f).await?;
            }
            r.records.increment(n);
            r.bytes.increment(batch.bytes);
        }
    }
}

/// The link (group mode).
fn r_link<T: Send + 'static>(
    src: &super::KafkaSource<T>,
) -> Result<Option<Arc<super::offsets_link::OffsetsLink>>> {
    Ok(src.running()?.link.clone())
}

/// The emitting loop's copy of the assignment, refreshed when its version changes.
#[derive(Default)]
struct View {
    version: Option<u64>,
    emitting: std::collections::BTreeSet<String>,
}

impl View {
    /// Copies the assignment if it changed (true then): the positions of partitions no longer
    /// held leave the state (a draining one stays until its transaction committed).
    fn refresh(
        &mut self,
        assignment: &super::group_assignment::Assignment,
        link: Option<&super::offsets_link::OffsetsLink>,
        state: &mut super::KafkaSourceState,
    ) -> bool {
        let version = assignment.version();
        if self.version == Some(version) {
            return false;
        }
        // Read the version first: a rebalance in between is seen at the next record.
        self.version = Some(version);
        let held = assignment.current();
        self.emitting = assignment.emitting();
        state.retain(|k, _| held.contains(k));
        if let Some(l) = link {
            l.loop_applies(version);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_mode_refuses_what_the_group_cannot_give_naming_the_field() {
        let topics = Subscription::Topics(vec!["t".into()]);
        let committed = StartOffsets::Committed {
            reset_to_earliest: true,
        };
        assert!(validate(&topics, &committed, &StopOffsets::Never).is_ok());
        let e = validate(
            &Subscription::Partitions(vec![("t".into(), 0)]),
            &committed,
            &StopOffsets::Never,
        )
        .unwrap_err();
        assert!(e.to_string().contains("`partitions`"), "{e}");
        let e = validate(&topics, &committed, &StopOffsets::LatestAtStart).unwrap_err();
        assert!(e.to_string().contains("`stop`"), "{e}");
        let e = validate(&topics, &StartOffsets::Timestamp(1), &StopOffsets::Never).unwrap_err();
        assert!(e.to_string().contains("`start`"), "{e}");
        assert_eq!(offset_reset(&committed), "earliest");
        assert_eq!(offset_reset(&StartOffsets::Latest), "latest");
        assert_eq!(
            offset_reset(&StartOffsets::Committed {
                reset_to_earliest: false
            }),
            "latest"
        );
    }
}
