//! [`KafkaSourceBuilder`]: what a Kafka source reads, from where it starts and where it stops,
//! checked once by `build` and shared by the subtasks as one `Settings`.

use std::sync::Arc;
use std::time::Duration;

use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::prelude::*;

use super::offsets::{StartOffsets, StopOffsets};
use super::subscription::Subscription;
use super::{group, KafkaSource};
use crate::config::KafkaConfig;
use crate::record::KafkaDeserializer;

/// What a [`KafkaSourceBuilder`] sets, shared by the subtasks of what it builds.
#[derive(Debug)]
pub(super) struct Settings {
    pub(super) props: KafkaConfig,
    pub(super) subscription: Subscription,
    pub(super) start: StartOffsets,
    pub(super) stop: StopOffsets,
    pub(super) discovery: Option<Duration>,
    pub(super) policy: ErrorPolicy,
    pub(super) max_batch: usize,
    pub(super) group_mode: bool,
}

/// Builds a [`KafkaSource`]; validated by [`build`](KafkaSourceBuilder::build).
pub struct KafkaSourceBuilder {
    pub(super) s: Settings,
}

impl std::fmt::Debug for KafkaSourceBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSourceBuilder")
            .field("props", &self.s.props)
            .field("subscription", &self.s.subscription)
            .field("start", &self.s.start)
            .field("stop", &self.s.stop)
            .finish()
    }
}

impl KafkaSourceBuilder {
    /// Reads these topics.
    pub fn topics<I: IntoIterator<Item = S>, S: Into<String>>(mut self, topics: I) -> Self {
        self.s.subscription = Subscription::Topics(topics.into_iter().map(Into::into).collect());
        self
    }

    rivus_sdk::setters! {
        /// Reads every topic whose whole name matches the regular expression `pattern`.
        topic_pattern(pattern: impl Into<String>)
            => s.subscription = Subscription::Pattern(pattern.into());
    }

    /// Reads exactly these partitions.
    pub fn partitions<I: IntoIterator<Item = (S, i32)>, S: Into<String>>(
        mut self,
        parts: I,
    ) -> Self {
        self.s.subscription =
            Subscription::Partitions(parts.into_iter().map(|(t, p)| (t.into(), p)).collect());
        self
    }

    /// The consumer group, used for committed start offsets and to commit progress (for
    /// monitoring and consumers outside rivus). Without it nothing is committed.
    pub fn group_id(mut self, group: impl Into<String>) -> Self {
        self.s.props.set("group.id", group);
        self
    }

    rivus_sdk::setters! {
        /// Where partitions without checkpointed state start (default: committed offsets, else
        /// earliest).
        start(start: StartOffsets) => s.start;

        /// Makes the source bounded.
        stop(stop: StopOffsets) => s.stop;

        /// Subscribes through the consumer-group protocol (cooperative-sticky) instead of
        /// assigning partitions by hand: several processes of the job — workers
        /// ([`Pipeline::worker`]) — share the topics' partitions, which move as workers join and
        /// leave. Each partition starts from the group's committed offset (completed checkpoints
        /// commit), so the guarantee across workers is at-least-once. Reads topics or a pattern,
        /// unbounded, starting from committed offsets (then earliest, or latest with
        /// [`StartOffsets::Latest`]). Worker mode needs it.
        group_mode(on: bool) => s.group_mode;

        /// Looks for new partitions this often (`None`: never; default 5 minutes).
        partition_discovery(every: Option<Duration>) => s.discovery;

        /// What to do with records the deserializer rejects (default: fail).
        error_policy(policy: ErrorPolicy) => s.policy;
    }

    crate::config::connection_setters!("Any librdkafka consumer property.");

    /// Checks the settings and returns a factory of subtask instances.
    pub fn build<T: Send + 'static>(
        self,
        deserializer: impl KafkaDeserializer<T>,
    ) -> Result<KafkaSource<T>> {
        let s = self.s;
        s.props.validate()?;
        match &s.subscription {
            Subscription::Topics(t) if t.is_empty() => {
                return Err(Error::config(
                    "topics",
                    "set topics, a topic pattern or partitions",
                ));
            }
            Subscription::Pattern(p) => {
                regex::Regex::new(p).map_err(|e| Error::config("topic_pattern", e))?;
            }
            _ => {}
        }
        if matches!(s.start, StartOffsets::Committed { .. }) && s.props.get("group.id").is_none() {
            return Err(Error::config(
                "group_id",
                "committed start offsets need a group id",
            ));
        }
        if s.group_mode {
            group::validate(&s.subscription, &s.start, &s.stop)?;
        }
        if s.discovery == Some(Duration::ZERO) {
            return Err(Error::config(
                "partition_discovery",
                "must be positive (or off)",
            ));
        }
        Ok(KafkaSource {
            settings: Arc::new(s),
            deserializer: Arc::new(deserializer),
            subtask: 0,
            parallelism: 1,
            running: None,
        })
    }
}
