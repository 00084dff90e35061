//! Copies a queue into files exactly-once: RabbitMQ source with correlation ids → the example
//! file sink (truncate-on-restore), checkpointing into a directory. Stop it with SIGTERM; run it
//! again after a crash and it resumes. Used by the SIGKILL test.
//!
//! ```text
//! cargo run -p rivus-connector-rabbitmq --example rabbit_to_file -- <amqp-uri> <queue> <state-dir> <out-dir>
//! ```

use std::sync::Arc;
use std::time::Duration;

use rivus_connector_rabbitmq::RabbitSource;
use rivus_example_file_connector::FileSink;
use rivus_sdk::prelude::*;
use rivus_sdk::schema::{DeserializationSchema, StringSchema};

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 4 {
        eprintln!("usage: rabbit_to_file <amqp-uri> <queue> <state-dir> <out-dir>");
        std::process::exit(2);
    }
    let source = RabbitSource::builder(&args[0])
        .queues([args[1].clone()])
        .use_correlation_ids(true)
        .prefetch(2000)
        .build(|m| StringSchema.deserialize(m.body, &format!("{}#{}", m.queue, m.delivery_tag)))?;
    let out = args[3].clone();
    let job = Pipeline::new("rabbit-to-file")
        .checkpointing(CheckpointConfig::new(
            Duration::from_millis(100),
            Arc::new(FsStateBackend::new(&args[2], 3)?),
        ))
        .source("rabbit", 1, |_| source.clone())
        .sink("file", 1, |i| FileSink::new(&out, i))?;
    job.handle().stop_on_signals();
    job.run().await?;
    Ok(())
}
