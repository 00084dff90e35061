//! Starts a pipeline at the file's `[source]`, whatever connector's section it is.

use serde_json::Value;

use rivus_core::error_policy::ErrorPolicy;
use rivus_core::prelude::*;
use rivus_core::runtime::Stream;

use crate::config::PipelineConfig;

/// Starts `pipeline` at the source of `config`; also returns how many records it will emit
/// when that is known (a bounded generator). Without `dry`, the section's `prepare` hook runs
/// first.
pub(crate) async fn attach(
    pipeline: Pipeline,
    config: &PipelineConfig,
    policy: &ErrorPolicy,
    dry: bool,
) -> Result<(Stream<Value>, Option<u64>)> {
    let source = &config.source;
    let ctx = config.context(policy.clone(), dry);
    let plan = source.build(&ctx)?;
    if !dry {
        source.prepare(&ctx).await?;
    }
    let total = plan.total();
    Ok((plan.attach(pipeline, "source", config.parallelism), total))
}
