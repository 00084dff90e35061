//! [`KafkaSinkBuilder`]: where a Kafka sink writes, with which guarantee, and how its
//! transactions are named and kept — checked once by `build` and shared by the subtasks as one
//! `Settings`.

use std::sync::Arc;
use std::time::Duration;

use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::prelude::*;

use super::txn::{TxnSettings, TxnStep};
use super::KafkaSink;
use crate::config::KafkaConfig;
use crate::record::KafkaSerializer;

/// What a [`KafkaSinkBuilder`] sets, shared by the subtasks of what it builds.
#[derive(Debug)]
pub(super) struct Settings {
    pub(super) props: KafkaConfig,
    pub(super) topic: Option<String>,
    pub(super) delivery: DeliveryGuarantee,
    pub(super) policy: ErrorPolicy,
    pub(super) flush_timeout: Duration,
    pub(super) txn: TxnSettings,
}

/// Builds a [`KafkaSink`].
pub struct KafkaSinkBuilder {
    pub(super) s: Settings,
}

impl std::fmt::Debug for KafkaSinkBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSinkBuilder")
            .field("props", &self.s.props)
            .field("topic", &self.s.topic)
            .field("delivery", &self.s.delivery)
            .field("transactions", &self.s.txn)
            .finish()
    }
}

impl KafkaSinkBuilder {
    rivus_sdk::setters! {
        /// The topic of records that do not name one.
        topic(topic: impl Into<String>) => s.topic = Some(topic.into());

        /// The delivery guarantee (default at-least-once):
        /// - `AtMostOnce`: send and forget; a failure may lose records.
        /// - `AtLeastOnce`: every record sent before a checkpoint is acknowledged by the broker
        ///   before that checkpoint completes; after a failure, records since the last checkpoint
        ///   are sent again.
        /// - `ExactlyOnce`: one transaction per checkpoint, committed when the checkpoint
        ///   completes; readers with `isolation.level=read_committed` see every record once.
        guarantee(g: DeliveryGuarantee) => s.delivery;

        /// What to do with records that cannot be serialized or that the client refuses
        /// (too large, unknown topic) (default: fail).
        error_policy(policy: ErrorPolicy) => s.policy;

        /// Longest wait for outstanding deliveries at a checkpoint, at either guarantee (default
        /// 60 s); past it the checkpoint fails with the count of records still unacknowledged.
        flush_timeout(d: Duration) => s.flush_timeout;

        /// Exactly-once: prefix of the transactional ids `<prefix>-<subtask>-<slot>` (default
        /// `<job>-<sink name>`). Must be stable across restarts and unique per sink.
        transactional_id_prefix(prefix: impl Into<String>) => s.txn.prefix = Some(prefix.into());

        /// Exactly-once: transactional producers per subtask (default 3; at least 2).
        transaction_pool(n: usize) => s.txn.pool;

        /// Exactly-once: the compacted topic recording committed transactions (default
        /// `rivus-txn-markers.<transactional id prefix>`). Give each sink its own.
        marker_topic(topic: impl Into<String>) => s.txn.marker_topic = Some(topic.into());

        /// Exactly-once: `transaction.timeout.ms` (default 15 minutes, the broker's usual maximum;
        /// with the group's offsets in the transaction, twice the checkpoint interval plus 10 s:
        /// a worker killed mid-transaction holds `read_committed` readers of its output
        /// partitions back until it runs out, or until the worker comes back).
        transaction_timeout(d: Duration) => s.txn.timeout = Some(d);

        /// Exactly-once: the directory of the transactions' write-ahead logs (default: the state
        /// backend's local directory + `kafka-txn-log`, e.g. `<checkpoint
        /// dir>/local/kafka-txn-log`; without one, the system's temporary directory). Each log
        /// holds one checkpoint interval's records of one subtask; it must survive a crash of the
        /// process, on the machine that restarts the job.
        transaction_log_dir(dir: impl Into<std::path::PathBuf>) => s.txn.log_dir = Some(dir.into());

        /// Exactly-once: calls `hook` at each [`TxnStep`] of every transaction, on the sink's
        /// task (for tests that stop the process at a chosen point, and for tracing).
        transaction_hook(hook: impl Fn(TxnStep) + Send + Sync + 'static)
            => s.txn.hook = Some(std::sync::Arc::new(hook));
    }

    crate::config::connection_setters!(
        "Any librdkafka producer property (`linger.ms`, `compression.codec`, `acks`, ...)."
    );

    /// Checks the settings and returns the sink (clone it into each subtask).
    pub fn build<T: Send + 'static>(
        self,
        serializer: impl KafkaSerializer<T>,
    ) -> Result<KafkaSink<T>> {
        let mut s = self.s;
        s.props.validate()?;
        if let Some(v) = s.props.get("transaction.timeout.ms") {
            let ms: u64 = v.parse().map_err(|_| {
                Error::config(
                    "properties.transaction.timeout.ms",
                    format!("`{v}`: a number of milliseconds"),
                )
            })?;
            s.txn.timeout.get_or_insert(Duration::from_millis(ms));
        }
        if s.topic.as_deref().is_some_and(|t| t.trim().is_empty()) {
            return Err(Error::config("topic", "must not be empty"));
        }
        if s.props.get("transactional.id").is_some() {
            return Err(Error::config(
                "transactional.id",
                "transactions are managed by the sink (delivery = exactly-once), not set by hand",
            ));
        }
        if s.delivery != DeliveryGuarantee::AtMostOnce
            && s.props.get("acks").is_some_and(|a| a != "all" && a != "-1")
        {
            return Err(Error::config(
                "acks",
                "must be `all` for at-least-once or exactly-once",
            ));
        }
        if s.delivery == DeliveryGuarantee::ExactlyOnce {
            if s.txn.pool < 2 {
                return Err(Error::config(
                    "transaction_pool",
                    "at least 2 (one commits while the next fills)",
                ));
            }
            if s.txn
                .marker_topic
                .as_deref()
                .is_some_and(|t| t.trim().is_empty())
            {
                return Err(Error::config("marker_topic", "must not be empty"));
            }
        }
        Ok(KafkaSink {
            settings: Arc::new(s),
            serializer: Arc::new(serializer),
            restored: None,
            running: None,
        })
    }
}

impl KafkaSink<()> {
    /// Starts a builder for a sink writing to the brokers of `config`: bootstrap servers
    /// (`"host:9092"`) or a whole [`KafkaConfig`] (TLS, SASL, librdkafka properties).
    pub fn builder(config: impl Into<KafkaConfig>) -> KafkaSinkBuilder {
        let props = config.into();
        KafkaSinkBuilder {
            s: Settings {
                props,
                topic: None,
                delivery: DeliveryGuarantee::AtLeastOnce,
                policy: ErrorPolicy::Fail,
                flush_timeout: Duration::from_secs(60),
                txn: TxnSettings {
                    prefix: None,
                    pool: 3,
                    marker_topic: None,
                    timeout: None,
                    log_dir: None,
                    hook: None,
                },
            },
        }
    }
}
