//! `[sink] type = "stdout"`: each record printed as a JSON line.

use serde::Deserialize;
use serde_json::Value;

use rivus_pipeline_file::{CatalogEntry, Health, SectionContext, SinkPlan, SinkSection};
use rivus_sdk::prelude::*;

/// `[sink] type = "stdout"`: no settings.
#[derive(Debug, Clone, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StdoutSection {}

#[async_trait]
impl SinkSection for StdoutSection {
    const TYPE: &'static str = "stdout";
    const CATALOG: CatalogEntry = CatalogEntry {
        summary: "each record printed as a JSON line",
        guarantee: "at-least-once",
    };

    fn build(&self, _ctx: &SectionContext) -> Result<SinkPlan> {
        Ok(SinkPlan::cloned(StdoutSink))
    }

    async fn check(&self, _ctx: &SectionContext) -> Health {
        Health::new("stdout", "standard output", Ok("nothing to reach".into()))
    }
}

/// Prints each record as a JSON line on stdout.
#[derive(Debug, Clone, Default)]
pub(crate) struct StdoutSink;

#[async_trait]
impl RichFunction for StdoutSink {}

#[async_trait]
impl CheckpointedFunction for StdoutSink {
    type State = ();

    async fn snapshot_state(&mut self, _: u64) -> Result<()> {
        use std::io::Write;
        std::io::stdout()
            .flush()
            .map_err(|e| Error::io("flushing stdout", e))
    }
}

#[async_trait]
impl CheckpointListener for StdoutSink {}

#[async_trait]
impl SinkFunction<Value> for StdoutSink {
    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::AtLeastOnce
    }

    async fn invoke(&mut self, value: Value, _: &SinkContext) -> Result<()> {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let value = rivus_sdk::metadata::without(&value);
        writeln!(out, "{value}").map_err(|e| Error::io("writing to stdout", e))
    }
}
