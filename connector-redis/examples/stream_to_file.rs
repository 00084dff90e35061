//! Copies a Redis stream into files exactly-once: Streams source → the example file sink
//! (truncate-on-restore), checkpointing into a directory. Stop it with SIGTERM; run it again
//! after a crash and it resumes. Used by the SIGKILL test.
//!
//! ```text
//! cargo run -p rivus-connector-redis --example stream_to_file -- <redis-url> <stream> <group> <state-dir> <out-dir>
//! ```

use std::sync::Arc;
use std::time::Duration;

use rivus_connector_redis::RedisStreamsSource;
use rivus_example_file_connector::FileSink;
use rivus_sdk::prelude::*;
use rivus_sdk::schema::SchemaError;

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 5 {
        eprintln!("usage: stream_to_file <redis-url> <stream> <group> <state-dir> <out-dir>");
        std::process::exit(2);
    }
    let source = RedisStreamsSource::builder(&args[0])
        .streams([args[1].clone()])
        .group(&args[2])
        .build(|e| {
            let v = e
                .field("v")
                .ok_or_else(|| SchemaError::new("redis", e.id, "no field `v`"))?;
            Ok(String::from_utf8_lossy(v).into_owned())
        })?;
    let out = args[4].clone();
    let job = Pipeline::new("stream-to-file")
        .checkpointing(CheckpointConfig::new(
            Duration::from_millis(100),
            Arc::new(FsStateBackend::new(&args[3], 3)?),
        ))
        .source("redis", 1, |_| source.clone())
        .sink("file", 1, |i| FileSink::new(&out, i))?;
    job.handle().stop_on_signals();
    job.run().await?;
    Ok(())
}
