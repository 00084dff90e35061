//! Custom handling of bulk items the cluster refuses for good — the role of Flink's
//! `ActionRequestFailureHandler`: look at the failure, re-add requests (the same document to
//! another index, a fixed-up version...), then let the failure policy see it, drop it, or fail
//! the job.
//!
//! Items rejected with 429 never come here: they are always retried with backoff.

use serde_json::Value;

use crate::request::RequestIndexer;

/// One bulk item the cluster refused (not a 429).
#[derive(Debug, Clone, Copy)]
pub struct ItemFailure<'a> {
    /// The item's HTTP status (400 mapping error, 409 version conflict, 404 missing index...).
    pub status: u16,
    /// Elasticsearch's error type (`mapper_parsing_exception`,
    /// `version_conflict_engine_exception`...).
    pub error_type: &'a str,
    /// Elasticsearch's reason text.
    pub reason: &'a str,
    /// `index/id` of the request.
    pub position: &'a str,
    /// The request as sent: the action line and, except for deletes, the source line (NDJSON).
    pub request: &'a [u8],
}

impl ItemFailure<'_> {
    fn lines(&self) -> impl Iterator<Item = &[u8]> {
        self.request
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
    }

    /// The action: `index`, `create`, `update` or `delete`.
    pub fn action(&self) -> Option<String> {
        let first: Value = serde_json::from_slice(self.lines().next()?).ok()?;
        first.as_object()?.keys().next().cloned()
    }

    /// The document (the source line) of an index or create request; for an update, the
    /// update body (`{"doc": ..., "upsert": ...}`).
    pub fn document(&self) -> Option<Value> {
        serde_json::from_slice(self.lines().nth(1)?).ok()
    }
}

/// What becomes of the refused item, once the handler has re-added what it wanted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailureAction {
    /// Hand it to the failure policy (fail, skip and count, dead letter).
    Policy,
    /// It is taken care of (the re-added requests replace it): counted, not reported.
    Handled,
    /// Fail the job with this message (the job recovers from its last checkpoint).
    Fail(String),
}

/// Decides about refused items. Requests added to `indexer` are sent with the bulk's retry
/// (with backoff) and count as pending, so a checkpoint waits for them too. A closure
/// `Fn(&ItemFailure, &mut RequestIndexer) -> FailureAction` is a handler.
pub trait FailureHandler: Send + Sync + 'static {
    /// Called once per refused item.
    fn on_failure(&self, failure: &ItemFailure<'_>, indexer: &mut RequestIndexer) -> FailureAction;
}

impl<F> FailureHandler for F
where
    F: Fn(&ItemFailure<'_>, &mut RequestIndexer) -> FailureAction + Send + Sync + 'static,
{
    fn on_failure(&self, failure: &ItemFailure<'_>, indexer: &mut RequestIndexer) -> FailureAction {
        self(failure, indexer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_is_readable() {
        let req = b"{\"index\":{\"_index\":\"orders\",\"_id\":\"7\"}}\n{\"v\":\"x\"}\n";
        let f = ItemFailure {
            status: 400,
            error_type: "mapper_parsing_exception",
            reason: "failed to parse field [v]",
            position: "orders/7",
            request: req,
        };
        assert_eq!(f.action().as_deref(), Some("index"));
        assert_eq!(f.document(), Some(serde_json::json!({"v": "x"})));
        let del = ItemFailure {
            request: b"{\"delete\":{\"_index\":\"orders\",\"_id\":\"7\"}}\n",
            ..f
        };
        assert_eq!(del.action().as_deref(), Some("delete"));
        assert_eq!(del.document(), None);
    }
}
