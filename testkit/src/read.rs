//! Reading a bounded source to its end into memory: the shape of every "read it all back and
//! compare" test.

use std::time::Duration;

use rivus_sdk::{Pipeline, SourceFunction};

use crate::CollectingSink;

/// Runs `parallelism` clones of the bounded `source` into a [`CollectingSink`] and returns
/// every record in the order it reached the (single) sink subtask. Panics, naming
/// the job, when the job fails or does not end within two minutes.
pub async fn read_all<S>(name: &str, source: S, parallelism: usize) -> Vec<S::Out>
where
    S: SourceFunction + Clone + 'static,
    S::Out: Clone + Send + 'static,
{
    let sink = CollectingSink::<S::Out>::new();
    let job = Pipeline::new(name)
        .source("source", parallelism, |_| source.clone())
        .sink("collect", 1, |i| sink.for_subtask(i))
        .unwrap_or_else(|e| panic!("{name}: building the job: {e}"));
    tokio::time::timeout(Duration::from_secs(120), job.run())
        .await
        .unwrap_or_else(|_| panic!("{name}: the bounded read did not end within 120 s"))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    sink.values()
}
