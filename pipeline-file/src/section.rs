//! The three section traits: [`SourceSection`], [`SinkSection`], [`DestinationSection`].
//!
//! Each is implemented on the serde type of a section's options (`#[serde(deny_unknown_fields)]`
//! so that a misspelt key is refused at start), deriving [`JsonSchema`] so that its options
//! are described once. The `rivus` command deserializes the section
//! chosen by `type = TYPE`, then calls [`build`](SourceSection::build) to make the job,
//! [`check`](SourceSection::check) for `rivus check`, and the hooks around a run.

use std::sync::Arc;

use async_trait::async_trait;
use serde::de::DeserializeOwned;

use super::{CatalogEntry, Health, JsonSchema, SectionContext, SinkPlan, SourcePlan};
use rivus_sdk::error::Result;
use rivus_sdk::error_policy::DeadLetterQueue;

/// Metric names a section's connector records that the dashboard shows, by what they mean.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SectionMetrics {
    /// A gauge of records not yet read (labels `partition`, `subtask`): the Kafka source's
    /// `rivus_kafka_consumer_lag`.
    pub lag: Option<&'static str>,
}

/// `[source] type = TYPE`.
#[async_trait]
pub trait SourceSection: DeserializeOwned + JsonSchema + Send + Sync + 'static {
    /// The `type` that names this section in the file (`kafka`, `redis-streams`).
    const TYPE: &'static str;
    /// Its entry in `rivus connectors`.
    const CATALOG: CatalogEntry;

    /// The source, bad records to `ctx.policy`. Bad settings are refused here, each error
    /// naming its field relative to the section (`topics`, `tls.ca_file`): the caller adds
    /// the section's own path once, to these errors and to those the source raises when it
    /// runs. With `ctx.dry`, nothing is contacted.
    fn build(&self, ctx: &SectionContext) -> Result<SourcePlan>;

    /// Reaches the endpoint (authentication included), reading nothing: `rivus check`.
    async fn check(&self, ctx: &SectionContext) -> Health;

    /// Runs once before the job starts (not for `rivus validate`).
    async fn prepare(&self, _ctx: &SectionContext) -> Result<()> {
        Ok(())
    }

    /// Lines added to the summary after a successful run.
    async fn report(&self, _ctx: &SectionContext) -> Option<String> {
        None
    }

    /// The metrics the dashboard reads from this source.
    fn metrics(&self) -> SectionMetrics {
        SectionMetrics::default()
    }
}

/// `[sink] type = TYPE`.
#[async_trait]
pub trait SinkSection: DeserializeOwned + JsonSchema + Send + Sync + 'static {
    /// The `type` that names this section in the file (`jdbc`, `elasticsearch`).
    const TYPE: &'static str;
    /// Its entry in `rivus connectors`.
    const CATALOG: CatalogEntry;

    /// The sink, bad records to `ctx.policy`. Bad settings are refused here, each error naming
    /// its field relative to the section (as for [`SourceSection::build`]). With `ctx.dry`,
    /// nothing is contacted.
    fn build(&self, ctx: &SectionContext) -> Result<SinkPlan>;

    /// Reaches the endpoint (authentication included), writing nothing: `rivus check`.
    async fn check(&self, ctx: &SectionContext) -> Health;

    /// Runs once before the job starts (not for `rivus validate`): the SQL sink's `setup`
    /// statement.
    async fn prepare(&self, _ctx: &SectionContext) -> Result<()> {
        Ok(())
    }

    /// Lines added to the summary after a successful run: the SQL sink's table.
    async fn report(&self, _ctx: &SectionContext) -> Option<String> {
        None
    }

    /// `rivus orphans`: what a failure left in the destination that nothing refers to (a
    /// table's data files its log does not name), one line each; `None` for a sink that leaves
    /// nothing of the kind. Lists only: never deletes.
    async fn orphans(&self, _ctx: &SectionContext) -> Option<Result<Vec<String>>> {
        None
    }

    /// The metrics the dashboard reads from this sink.
    fn metrics(&self) -> SectionMetrics {
        SectionMetrics::default()
    }
}

/// `[errors.destination] type = TYPE`: where dead letters go instead of a file.
#[async_trait]
pub trait DestinationSection: DeserializeOwned + JsonSchema + Send + Sync + 'static {
    /// The `type` that names this section in the file.
    const TYPE: &'static str;
    /// Its entry in `rivus connectors`.
    const CATALOG: CatalogEntry;

    /// The queue (connecting at the first letter, so that building contacts nothing); errors
    /// name fields relative to the section.
    fn build(&self, ctx: &SectionContext) -> Result<Arc<dyn DeadLetterQueue>>;

    /// Reaches the endpoint, writing nothing: `rivus check`.
    async fn check(&self, ctx: &SectionContext) -> Health;
}
