//! Ends a stream in a sink component of the file, whatever connector's section it is, each
//! subtask's sink wrapped in [`Counted`].

use std::sync::Arc;

use serde_json::Value;

use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::prelude::*;

use crate::config::{PipelineConfig, SinkNode};
use crate::counted::{Counted, Counts};

/// Ends `stream` in `sink`, its operator named as the component. Without `dry`, the section's
/// `prepare` hook (the SQL sink's `setup`) runs first.
pub(crate) async fn attach(
    stream: Stream<Value>,
    config: &PipelineConfig,
    sink: &SinkNode,
    counts: &Arc<Counts>,
    policy: &ErrorPolicy,
    dry: bool,
) -> Result<()> {
    let section = &sink.section;
    let ctx = config.context(policy.clone(), dry);
    let plan = section.build(&ctx)?;
    if !dry {
        section.prepare(&ctx).await?;
    }
    let flow = counts.output(&sink.name);
    let counts = Arc::clone(counts);
    stream.sink_to(&sink.name, config.parallelism, move |i| Counted {
        inner: plan.make(i),
        counts: Arc::clone(&counts),
        flow: Arc::clone(&flow),
    });
    Ok(())
}
