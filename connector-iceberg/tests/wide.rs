//! Sixteen sink subtasks committing to one table at every checkpoint (each second), on the SQL
//! and the REST catalog: no commit gives up after the catalog's retries, the job never
//! restarts, and every record is in the table once.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use rivus_sdk::prelude::*;
use rivus_testkit::SequenceSource;

/// `n` records at `per_second` into sixteen subtasks of `lake`'s table, a checkpoint a second.
async fn sixteen_writers(lake: &Lake, py: &str) {
    let table = lake.table("wide");
    // A sink instance per subtask, as a pipeline file makes them: they share the group
    // commits of the table.
    // Small files: each writer has files to commit at every checkpoint.
    let sink = sink_into(lake, &table, |f| {
        f.target_file_size(16 * 1024).row_group_bytes(4 * 1024)
    });
    let name = rivus_testkit::services::unique_name("iceberg-wide");
    let (n, per_second) = (48_000u64, 6_000);
    let summary = Pipeline::new(name.as_str())
        .checkpointing(CheckpointConfig::new(
            Duration::from_secs(1),
            Arc::new(MemoryStateBackend::new()),
        ))
        .batch_size(100)
        .source("seq", 1, move |i| {
            SequenceSource::new(i, 1, Some(n), Arc::default()).paced(per_second)
        })
        .map(record)
        .sink("iceberg", 16, move |_| sink())
        .unwrap()
        .run()
        .await
        .unwrap();
    assert_eq!(summary.restarts, 0, "{:?}", summary.last_failure);
    assert!(summary.checkpoints_completed >= 5, "{summary:?}");
    let read = lake.read(py, &table);
    let mut ids = read.ids();
    ids.sort_unstable();
    assert_eq!(ids, (0..n).collect::<Vec<_>>(), "every record once");
    // Group commits: a checkpoint's sixteen writers in a few snapshots, not sixteen (the SQL
    // catalog keeps every snapshot; Nessie the current one only).
    if lake.kind == "sql" {
        let (snapshots, writers) = (
            read.summaries.len() as u64,
            read.summaries
                .iter()
                .map(|s| s["rivus.writers"].as_str().unwrap().split(',').count() as u64)
                .sum::<u64>(),
        );
        eprintln!(
            "{writers} writers' commits in {snapshots} snapshots over {} checkpoints",
            summary.checkpoints_completed
        );
        // One snapshot a writer without them; here 7 to 13 snapshots for 32 to 48 commits
        // (the first writer after a checkpoint often commits alone, the rest together).
        assert!(
            snapshots * 2 <= writers,
            "{writers} writers' commits in {snapshots} snapshots"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_writers_commit_each_second_through_the_sql_catalog() {
    let (Some(lake), Some(py)) = (Lake::new("iceberg-wide"), python()) else {
        return;
    };
    sixteen_writers(&lake, &py).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_writers_commit_each_second_through_the_rest_catalog() {
    let (Some(lake), Some(py)) = (Lake::rest("iceberg-wide"), python()) else {
        return;
    };
    sixteen_writers(&lake, &py).await;
}
