//! [`EsSink`]: the emitter adds requests per record; the bulk processor sends them; every
//! checkpoint waits until nothing is pending.

use std::sync::Arc;

use rivus_sdk::bulk::{BulkConfig, BulkProcessor, NoopListener};
use rivus_sdk::error_policy::{ErrorHandler, ErrorPolicy};
use rivus_sdk::prelude::*;
use rivus_sdk::schema::SchemaError;

use crate::client::EsClient;
use crate::config::EsConfig;
use crate::failure::FailureHandler;
use crate::request::{BulkItem, RequestIndexer};
use crate::sender::EsBulkSender;

type Emitter<T> = dyn Fn(&T, &mut RequestIndexer) -> Result<(), SchemaError> + Send + Sync;

/// What an [`EsSinkBuilder`] sets, shared by the subtasks of the built sink.
struct Settings {
    config: EsConfig,
    bulk: BulkConfig,
    policy: ErrorPolicy,
    flush_on_checkpoint: bool,
    /// What `guarantee` asked for.
    guarantee: DeliveryGuarantee,
    failure_handler: Option<Arc<dyn FailureHandler>>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("config", &self.config)
            .field("bulk", &self.bulk)
            .field("policy", &self.policy)
            .field("flush_on_checkpoint", &self.flush_on_checkpoint)
            .field("failure_handler", &self.failure_handler.is_some())
            .finish()
    }
}

/// Builds an [`EsSink`].
#[derive(Debug)]
pub struct EsSinkBuilder {
    s: Settings,
}

impl EsSinkBuilder {
    rivus_sdk::setters! {
        /// When bulks are sent, how many are in flight and how failures are retried (default
        /// [`EsSink::default_bulk`]: 1000 actions (`bulk.flush.max.actions`), 5 MiB, every 1 s,
        /// one bulk in flight, exponential backoff with 8 retries). With one bulk in flight, the
        /// writes of a document apply in the order of the records, retries included; with more,
        /// two versions of one document in different bulks may land in either order (use
        /// external versions or idempotent ids).
        bulk(bulk: BulkConfig) => s.bulk;

        /// Requests per bulk (shortcut for `bulk.max_actions`).
        batch_size(n: usize) => s.bulk.max_actions;

        /// What happens to items the cluster refuses for good (mapping errors, conflicts) and to
        /// records the emitter cannot turn into requests: fail (default), skip, dead-letter.
        error_policy(p: ErrorPolicy) => s.policy;

        /// Custom code for items refused for good, run before the failure policy: it may re-add
        /// requests (sent with the bulk's retry, awaited by checkpoints) and decide whether the
        /// policy sees the item, it is handled, or the job fails. See [`FailureHandler`].
        failure_handler(h: impl FailureHandler) => s.failure_handler = Some(Arc::new(h));
    }

    /// The delivery guarantee (default at-least-once: every pending request is waited for
    /// at each checkpoint; with deterministic ids replays overwrite, which makes the result
    /// effectively exactly-once). `AtMostOnce` does not wait at checkpoints. `ExactlyOnce` is
    /// refused at `build`: a bulk request cannot be part of a transaction.
    pub fn guarantee(mut self, g: DeliveryGuarantee) -> Self {
        self.s.guarantee = g;
        self.s.flush_on_checkpoint = g != DeliveryGuarantee::AtMostOnce;
        self
    }

    /// Checks the settings; the sink calls `emitter` for each record (clone the sink into each
    /// subtask).
    pub fn build<T: Send + 'static>(
        self,
        emitter: impl Fn(&T, &mut RequestIndexer) -> Result<(), SchemaError> + Send + Sync + 'static,
    ) -> Result<EsSink<T>> {
        let s = self.s;
        s.config.validate()?;
        if s.guarantee == DeliveryGuarantee::ExactlyOnce {
            return Err(Error::config(
                "guarantee",
                "exactly-once is not offered (a bulk request is no transaction): use \
                 at-least-once with deterministic document ids, so that replays overwrite",
            ));
        }
        s.bulk.validate()?;
        Ok(EsSink {
            settings: Arc::new(s),
            emitter: Arc::new(emitter),
            running: None,
            indexer: RequestIndexer::default(),
        })
    }
}

/// An Elasticsearch sink.
pub struct EsSink<T> {
    settings: Arc<Settings>,
    emitter: Arc<Emitter<T>>,
    running: Option<Running>,
    /// Reused for each record's requests.
    indexer: RequestIndexer,
}

/// What `open` creates and `close` ends.
struct Running {
    processor: BulkProcessor<BulkItem>,
    handler: ErrorHandler,
    /// Subtasks of the sink: a move needs them all to be one.
    parallelism: usize,
}

impl<T> std::fmt::Debug for EsSink<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EsSink")
            .field("config", &self.settings.config)
            .field("bulk", &self.settings.bulk)
            .field("flush_on_checkpoint", &self.settings.flush_on_checkpoint)
            .finish()
    }
}

impl<T> Clone for EsSink<T> {
    fn clone(&self) -> Self {
        EsSink {
            settings: Arc::clone(&self.settings),
            emitter: Arc::clone(&self.emitter),
            running: None,
            indexer: RequestIndexer::default(),
        }
    }
}

impl EsSink<()> {
    /// The sink's batching when [`EsSinkBuilder::bulk`] is not called: 1000 actions, 5 MiB,
    /// every 1 s, one bulk in flight, core's default backoff (Flink's defaults).
    pub fn default_bulk() -> BulkConfig {
        BulkConfig {
            concurrent_requests: 1,
            ..BulkConfig::default()
        }
    }

    /// Starts a builder for a sink writing to the node of `config`: a URL, or a whole
    /// [`EsConfig`] (authentication, TLS, timeout).
    pub fn builder(config: impl Into<EsConfig>) -> EsSinkBuilder {
        EsSinkBuilder {
            s: Settings {
                config: config.into(),
                bulk: EsSink::default_bulk(),
                policy: ErrorPolicy::Fail,
                flush_on_checkpoint: true,
                guarantee: DeliveryGuarantee::AtLeastOnce,
                failure_handler: None,
            },
        }
    }
}

impl<T: Send + 'static> EsSink<T> {
    fn running(&self) -> Result<&Running> {
        self.running
            .as_ref()
            .ok_or(Error::Closed("elasticsearch sink (not open)"))
    }
}

#[async_trait]
impl<T: Send + 'static> RichFunction for EsSink<T> {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        let s = &self.settings;
        let client = EsClient::connect(&s.config).await?;
        let handler =
            ErrorHandler::new(s.policy.clone(), ctx.display_name()).connector("elasticsearch");
        let m = ctx.metrics();
        let sender = EsBulkSender {
            client,
            handler: handler.clone(),
            failure_handler: s.failure_handler.clone(),
            docs: m.counter("rivus_es_docs_total"),
            bytes: m.counter("rivus_es_bytes_total"),
            labels: vec![("task".into(), ctx.display_name())],
        };
        let processor = BulkProcessor::with_parts(
            ctx.display_name(),
            s.bulk.clone(),
            Arc::new(sender),
            Arc::new(NoopListener),
            Arc::new(BulkItem::size),
        )?;
        self.running = Some(Running {
            processor,
            handler,
            parallelism: ctx.parallelism(),
        });
        Ok(())
    }

    async fn close(&mut self) -> Result<()> {
        match self.running.take() {
            // After a failure the job restarts from its checkpoint: nothing pending must be
            // kept, and an error here would only hide the first one.
            Some(r) => {
                if let Err(e) = r.processor.close().await {
                    tracing::debug!(error = %e, "elasticsearch sink: closing with requests failed");
                }
                Ok(())
            }
            None => Ok(()),
        }
    }
}

#[async_trait]
impl<T: Send + 'static> CheckpointedFunction for EsSink<T> {
    type State = ();

    async fn snapshot_state(&mut self, _: u64) -> Result<()> {
        if self.settings.flush_on_checkpoint {
            self.running()?.processor.flush().await?;
        }
        Ok(())
    }
}

#[async_trait]
impl<T: Send + 'static> CheckpointListener for EsSink<T> {}

#[async_trait]
impl<T: Send + 'static> SinkFunction<T> for EsSink<T> {
    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        if self.settings.flush_on_checkpoint {
            DeliveryGuarantee::AtLeastOnce
        } else {
            DeliveryGuarantee::AtMostOnce
        }
    }

    async fn invoke(&mut self, value: T, _: &SinkContext) -> Result<()> {
        self.indexer.items.clear();
        if let Err(e) = (self.emitter)(&value, &mut self.indexer) {
            return self.running()?.handler.handle(&e.position, &e, &[]).await;
        }
        let items = std::mem::take(&mut self.indexer.items);
        let running = self.running()?;
        for item in items {
            match &item.moved {
                // The old id's changes may wait in another subtask's bulk: the document read
                // for the move could miss them.
                Some(m) if running.parallelism > 1 => {
                    let reason = "a key change whose new row lacks unchanged values (TOAST) \
                                  moves the document from its old id, which only one sink \
                                  subtask can do: run this sink with parallelism 1";
                    let record = serde_json::json!({
                        "index": m.index, "from": m.from, "to": m.to, "doc": m.doc
                    });
                    let payload = serde_json::to_vec(&record).unwrap_or_default();
                    running
                        .handler
                        .handle(&item.position, &reason, &payload)
                        .await?;
                }
                _ => running.processor.add(item).await?,
            }
        }
        Ok(())
    }

    async fn finish(&mut self) -> Result<()> {
        self.running()?.processor.flush().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guarantee_is_what_was_asked_and_exactly_once_is_refused_by_name() {
        let emit = |_: &u32, _: &mut RequestIndexer| Ok(());
        let url = "http://127.0.0.1:9200";
        let sink = EsSink::builder(url)
            .guarantee(DeliveryGuarantee::AtMostOnce)
            .build(emit)
            .unwrap();
        assert_eq!(sink.delivery_guarantee(), DeliveryGuarantee::AtMostOnce);
        let sink = EsSink::builder(url).build(emit).unwrap();
        assert_eq!(sink.delivery_guarantee(), DeliveryGuarantee::AtLeastOnce);
        let e = EsSink::builder(url)
            .guarantee(DeliveryGuarantee::ExactlyOnce)
            .build(emit)
            .unwrap_err()
            .to_string();
        assert!(e.contains("at `guarantee`"), "{e}");
    }
}
