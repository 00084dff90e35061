//! The sources a pipeline file can name: the built-in ones here, each connector's from its own
//! `pipeline_file` section.

use serde_json::Value;

use rivus_core::error_policy::ErrorPolicy;
use rivus_core::prelude::*;
use rivus_core::runtime::Stream;

use crate::config::{PipelineConfig, SourceConfig};
use crate::generator::{Generator, GeneratorTask};
use crate::replay::DeadLetterReplay;

/// Starts `pipeline` at the source of `config`; also returns how many records it will emit
/// when that is known (a bounded generator).
pub fn attach(
    pipeline: Pipeline,
    config: &PipelineConfig,
    policy: &ErrorPolicy,
) -> Result<(Stream<Value>, Option<u64>)> {
    let p = config.parallelism;
    let policy = policy.clone();
    Ok(match &config.source {
        SourceConfig::DeadLetters(s) => {
            let replay = DeadLetterReplay::new(s.path.clone(), s.connector.clone(), policy);
            (each(pipeline, p, replay), None)
        }
        SourceConfig::Generator(s) => {
            let gen = Generator {
                count: s.count,
                rate: s.rate,
                users: s.users,
            };
            (each(pipeline, p, GeneratorTask::new(gen)), s.count)
        }
        SourceConfig::Jdbc(s) => (each(pipeline, p, s.source(policy, p)?), None),
        SourceConfig::Kafka(s) => {
            let mut s = s.clone();
            // The group is the job's name unless the file names one; workers share the
            // partitions through it.
            s.group_id.get_or_insert_with(|| config.name.clone());
            s.group_mode |= config.worker.is_some();
            (each(pipeline, p, s.source(policy)?), None)
        }
        SourceConfig::Rabbitmq(s) => (each(pipeline, p, s.source(policy)?), None),
        SourceConfig::RedisStreams(s) => (each(pipeline, p, s.source(policy)?), None),
    })
}

/// `parallelism` subtasks of `source`, each a clone.
fn each<S>(pipeline: Pipeline, parallelism: usize, source: S) -> Stream<Value>
where
    S: SourceFunction<Out = Value> + Clone + 'static,
{
    pipeline.source("source", parallelism, move |_| source.clone())
}
