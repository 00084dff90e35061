//! The sinks a pipeline file can name — stdout here, each connector's from its own
//! `pipeline_file` section — wrapped in [`Counted`].

use std::sync::Arc;

use serde_json::Value;

use rivus_core::error_policy::ErrorPolicy;
use rivus_core::prelude::*;
use rivus_core::runtime::Stream;

use crate::config::{PipelineConfig, SinkConfig};
use crate::counted::{Counted, Counts, StdoutSink};

/// What every sink of a pipeline file is wrapped with.
struct Wrap<'a> {
    config: &'a PipelineConfig,
    counts: &'a Arc<Counts>,
    policy: &'a ErrorPolicy,
    check_errors: bool,
}

impl Wrap<'_> {
    /// Ends `stream` in `sink`, one [`Counted`] per subtask.
    fn end<S: SinkFunction<Value> + Clone + 'static>(
        &self,
        stream: Stream<Value>,
        sink: S,
    ) -> Result<Job> {
        let counts = Arc::clone(self.counts);
        let policy = self.policy.clone();
        let check_errors = self.check_errors;
        stream.sink("sink", self.config.parallelism, move |_| Counted {
            inner: sink.clone(),
            counts: Arc::clone(&counts),
            policy: policy.clone(),
            check_errors,
            handler: None,
        })
    }
}

/// Ends `stream` in the sink of `config`. With `dry`, no setup script runs.
pub async fn attach(
    stream: Stream<Value>,
    config: &PipelineConfig,
    counts: &Arc<Counts>,
    policy: &ErrorPolicy,
    check_errors: bool,
    dry: bool,
) -> Result<Job> {
    let w = Wrap {
        config,
        counts,
        policy,
        check_errors,
    };
    let p = policy.clone();
    match &config.sink {
        SinkConfig::Stdout(_) => w.end(stream, StdoutSink),
        SinkConfig::Jdbc(s) => {
            let sink = s.sink(p)?;
            if !dry {
                s.setup().await?;
            }
            w.end(stream, sink)
        }
        SinkConfig::Kafka(s) => w.end(stream, s.sink(p)?),
        SinkConfig::Elasticsearch(s) => w.end(stream, s.sink(p)?),
        SinkConfig::Rabbitmq(s) => w.end(stream, s.sink(p)?),
        SinkConfig::Redis(s) => w.end(stream, s.sink(p)?),
    }
}
