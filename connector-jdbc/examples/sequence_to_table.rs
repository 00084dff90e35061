//! Writes the numbers `0..n` into a PostgreSQL or MariaDB table exactly-once (prepared / XA
//! transactions committed per checkpoint), checkpointing into a directory. Stop it with SIGTERM; run it
//! again after a crash and it resumes. Used by the SIGKILL test.
//!
//! ```text
//! cargo run -p rivus-connector-jdbc --example sequence_to_table -- <database-url> <table> <n> <state-dir>
//! ```
//!
//! The table needs a column `id BIGINT`.

use std::sync::Arc;
use std::time::Duration;

use rivus_connector_jdbc::{JdbcSink, RowChange};
use rivus_sdk::prelude::*;
use rivus_testkit::SequenceSource;

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 4 {
        eprintln!("usage: sequence_to_table <database-url> <table> <n> <state-dir>");
        std::process::exit(2);
    }
    let n: u64 = args[2]
        .parse()
        .map_err(|_| Error::config("n", "expected a number"))?;
    let sink = JdbcSink::builder(&args[0], &args[1])
        .guarantee(DeliveryGuarantee::ExactlyOnce)
        .transaction_prefix(&args[1])
        .batch_size(500)
        .build(|v: &u64| {
            let mut row = rivus_connector_jdbc::Row::new();
            row.insert("id".into(), (*v).into());
            Ok(RowChange::Write(row))
        })?;
    let job = Pipeline::new("sequence-to-table")
        .checkpointing(CheckpointConfig::new(
            Duration::from_millis(100),
            Arc::new(FsStateBackend::new(&args[3], 3)?),
        ))
        .source("seq", 2, |i| {
            SequenceSource::new(i, 2, Some(n), Arc::default())
        })
        .rebalance(2)
        .sink("table", 2, |_| sink.clone())?;
    job.handle().stop_on_signals();
    job.run().await?;
    Ok(())
}
