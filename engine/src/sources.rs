//! Starts a stream at a source component of the file, whatever connector's section it is.

use serde_json::Value;

use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::prelude::*;

use crate::config::graph::SourceNode;
use crate::config::PipelineConfig;

/// Starts a stream of `pipeline` at `source`, its operator named as the component; also
/// returns how many records it will emit when that is known (a bounded generator). Without
/// `dry`, the section's `prepare` hook runs first.
pub(crate) async fn attach(
    pipeline: &Pipeline,
    config: &PipelineConfig,
    source: &SourceNode,
    policy: &ErrorPolicy,
    dry: bool,
) -> Result<(Stream<Value>, Option<u64>)> {
    let section = &source.section;
    let ctx = config.context(policy.clone(), dry);
    let plan = section.build(&ctx)?;
    if !dry {
        section.prepare(&ctx).await?;
    }
    let total = plan.total();
    Ok((
        plan.attach(pipeline.clone(), &source.name, config.parallelism),
        total,
    ))
}
