//! Ends a pipeline in the file's `[sink]`, whatever connector's section it is, each subtask's
//! sink wrapped in [`Counted`].

use std::sync::Arc;

use serde_json::Value;

use rivus_core::error_policy::ErrorPolicy;
use rivus_core::prelude::*;
use rivus_core::runtime::Stream;

use crate::config::PipelineConfig;
use crate::counted::{Counted, Counts};

/// Ends `stream` in the sink of `config`. Without `dry`, the section's `prepare` hook (the
/// SQL sink's `setup`) runs first.
pub(crate) async fn attach(
    stream: Stream<Value>,
    config: &PipelineConfig,
    counts: &Arc<Counts>,
    policy: &ErrorPolicy,
    check_errors: bool,
    dry: bool,
) -> Result<Job> {
    let sink = &config.sink;
    let ctx = config.context(policy.clone(), dry);
    let plan = sink.build(&ctx)?;
    if !dry {
        sink.prepare(&ctx).await?;
    }
    let counts = Arc::clone(counts);
    let policy = policy.clone();
    stream.sink("sink", config.parallelism, move |i| Counted {
        inner: plan.make(i),
        counts: Arc::clone(&counts),
        policy: policy.clone(),
        check_errors,
        handler: None,
    })
}
