//! Sending one bulk: `POST _bulk`, then reading every item's result. Items rejected with 429
//! (`es_rejected_execution_exception`, often inside an HTTP 200 response) are handed back for
//! retry; other item failures go to the failure policy; a failed request is retried whole.

use bytes::BytesMut;
use reqwest::Method;
use rivus_sdk::bulk::{BulkSender, SendOutcome};
use rivus_sdk::error_policy::ErrorHandler;
use rivus_sdk::{async_trait, Error};
use serde_json::Value;

use crate::client::{Body, EsClient};
use crate::failure::{FailureAction, FailureHandler, ItemFailure};
use crate::request::{BulkItem, RequestIndexer};

/// Sends bulks for one sink subtask.
pub struct EsBulkSender {
    pub(crate) client: EsClient,
    pub(crate) handler: ErrorHandler,
    pub(crate) failure_handler: Option<std::sync::Arc<dyn FailureHandler>>,
    pub(crate) docs: metrics::Counter,
    pub(crate) bytes: metrics::Counter,
    pub(crate) labels: Vec<(String, String)>,
}

impl std::fmt::Debug for EsBulkSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EsBulkSender").finish_non_exhaustive()
    }
}

impl EsBulkSender {
    fn count_failure(&self, reason: &str) {
        let mut labels: Vec<metrics::Label> = self
            .labels
            .iter()
            .map(|(k, v)| metrics::Label::new(k.clone(), v.clone()))
            .collect();
        labels.push(metrics::Label::new("reason", reason.to_owned()));
        metrics::counter!("rivus_es_item_failures_total", labels).increment(1);
    }

    /// `POST _bulk` with `items`: the response's JSON, or what to do with the whole bulk (a
    /// failed request, 429 or a server error: retry; another status: fail).
    async fn request(
        &self,
        items: Vec<BulkItem>,
    ) -> Result<(Vec<BulkItem>, Value), SendOutcome<BulkItem>> {
        let size: usize = items.iter().map(BulkItem::size).sum();
        let mut body = BytesMut::with_capacity(size);
        for i in &items {
            body.extend_from_slice(&i.lines);
        }
        let response = match self
            .client
            .send(Method::POST, "/_bulk", &[], Body::NdJson(body.freeze()))
            .await
        {
            Ok(r) => r,
            Err(e) => {
                return Err(SendOutcome::Retry {
                    items,
                    reason: format!("bulk request failed: {e}"),
                });
            }
        };
        let status = response.status();
        if status.as_u16() == 429 || status.is_server_error() {
            return Err(SendOutcome::Retry {
                items,
                reason: format!("bulk request answered {status}"),
            });
        }
        if !status.is_success() {
            let text = response.text().await.unwrap_or_default();
            let text: String = text.chars().take(500).collect();
            let message = format!("HTTP {status}: {text}");
            return Err(SendOutcome::Failed(crate::error::status_err(
                "elasticsearch bulk",
                status.as_u16(),
                message,
            )));
        }
        let parsed = match response.bytes().await {
            Ok(b) => serde_json::from_slice::<Value>(&b).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match parsed {
            Ok(v) => {
                self.bytes.increment(size as u64);
                Ok((items, v))
            }
            Err(e) => Err(SendOutcome::Retry {
                items,
                reason: format!("unreadable bulk response: {e}"),
            }),
        }
    }

    /// An item refused for good: the failure handler (which may re-add requests to `retry`,
    /// counted in `readded`) decides, else the error policy takes it. `Err` fails the bulk.
    async fn refused(
        &self,
        item: BulkItem,
        code: u64,
        err: &Value,
        retry: &mut Vec<BulkItem>,
        readded: &mut usize,
    ) -> Result<(), Error> {
        let kind = err["type"].as_str().unwrap_or("unknown").to_owned();
        let text = err["reason"].as_str().unwrap_or("");
        let reason = format!("{code} {kind}: {text}");
        self.count_failure(&kind);
        let action = match &self.failure_handler {
            None => FailureAction::Policy,
            Some(h) => {
                let mut indexer = RequestIndexer::default();
                let failure = ItemFailure {
                    status: code as u16,
                    error_type: &kind,
                    reason: text,
                    position: &item.position,
                    request: &item.lines,
                };
                let action = h.on_failure(&failure, &mut indexer);
                *readded += indexer.items.len();
                retry.extend(indexer.items);
                action
            }
        };
        match action {
            FailureAction::Policy => {
                self.handler
                    .handle(&item.position, &reason, &item.lines)
                    .await
            }
            FailureAction::Handled => {
                self.count_failure("handled");
                Ok(())
            }
            FailureAction::Fail(message) => Err(Error::connector(
                format!("elasticsearch item {}", item.position),
                format!("{reason}: {message}"),
            )),
        }
    }
}

#[async_trait]
impl BulkSender<BulkItem> for EsBulkSender {
    /// Sends `items` in order; a move (a key change, see the `moves` module) is resolved once the requests
    /// before it took effect, so the bulk goes out in runs that end before each move. What a
    /// run leaves to retry comes back with everything after it, in order.
    async fn send(&self, mut items: Vec<BulkItem>) -> SendOutcome<BulkItem> {
        loop {
            let Some(at) = items.iter().position(|i| i.moved.is_some()) else {
                return self.send_run(items).await;
            };
            let mut rest = items.split_off(at);
            if !items.is_empty() {
                match self.send_run(items).await {
                    SendOutcome::Done => {}
                    SendOutcome::Retry { mut items, reason } => {
                        items.append(&mut rest);
                        return SendOutcome::Retry { items, reason };
                    }
                    failed => return failed,
                }
            }
            let m = rest[0].moved.clone().expect("a move at `at`");
            match crate::moves::resolve(&self.client, &m).await {
                Ok(resolved) => {
                    items = resolved;
                    items.extend(rest.drain(1..));
                }
                Err(reason) => {
                    return SendOutcome::Retry {
                        items: rest,
                        reason,
                    }
                }
            }
        }
    }
}

impl EsBulkSender {
    /// Sends `items`, none of them a move, as one bulk.
    async fn send_run(&self, items: Vec<BulkItem>) -> SendOutcome<BulkItem> {
        let (items, v) = match self.request(items).await {
            Ok(answered) => answered,
            Err(outcome) => return outcome,
        };
        if v["errors"] == Value::Bool(false) {
            self.docs.increment(items.len() as u64);
            return SendOutcome::Done;
        }
        let results = v["items"].as_array().cloned().unwrap_or_default();
        if results.len() != items.len() {
            return SendOutcome::Failed(Error::connector(
                "elasticsearch bulk",
                format!(
                    "{} items sent, {} results received",
                    items.len(),
                    results.len()
                ),
            ));
        }
        let mut retry = Vec::new();
        let mut readded = 0usize;
        let mut ok = 0u64;
        for (item, result) in items.into_iter().zip(results) {
            let r = result
                .as_object()
                .and_then(|o| o.values().next())
                .cloned()
                .unwrap_or(Value::Null);
            let code = r["status"].as_u64().unwrap_or(0);
            match r.get("error") {
                // Includes deletes of missing documents (404 without an error).
                None => ok += 1,
                Some(_) if code == 429 => retry.push(item),
                Some(err) => {
                    if let Err(e) = self
                        .refused(item, code, err, &mut retry, &mut readded)
                        .await
                    {
                        return SendOutcome::Failed(e);
                    }
                }
            }
        }
        self.docs.increment(ok);
        if retry.is_empty() {
            return SendOutcome::Done;
        }
        let rejected = retry.len() - readded;
        if rejected > 0 {
            self.count_failure("es_rejected_execution_exception");
        }
        SendOutcome::Retry {
            items: retry,
            reason: format!(
                "{rejected} items rejected with 429 (es_rejected_execution_exception), \
                 {readded} re-added by the failure handler"
            ),
        }
    }
}
