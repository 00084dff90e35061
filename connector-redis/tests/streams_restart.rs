//! The Redis server stops and starts again while the Streams source reads (alone in this
//! file: no other test runs while it is down). The source reconnects, recovers what a read cut
//! short left in its pending list, and every entry arrives exactly once.

use std::sync::Arc;
use std::time::Duration;

use rivus_connector_redis::RedisStreamsSource;
use rivus_sdk::prelude::*;
use rivus_sdk::schema::SchemaError;
use rivus_testkit::services::{require, unique_name, Service};
use rivus_testkit::{TransactionalSink, TxnStore};

mod common;
use common::add;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_source_reconnects_after_a_server_restart_exactly_once() {
    let Some(url) = require(Service::Redis) else {
        return;
    };
    let (stream, group) = (unique_name("stream"), unique_name("group"));
    add(&url, &stream, 0..5000).await;
    let source = RedisStreamsSource::builder(&url)
        .streams([stream.clone()])
        .group(&group)
        .count(100)
        .build(|e| {
            let v = e
                .field("v")
                .ok_or_else(|| SchemaError::new("redis", e.id, "no field `v`"))?;
            Ok(String::from_utf8_lossy(v).into_owned())
        })
        .unwrap();
    let store = TxnStore::<String>::new();
    let job = Pipeline::new("streams-restart")
        .checkpointing(
            CheckpointConfig::new(
                Duration::from_millis(200),
                Arc::new(MemoryStateBackend::new()),
            )
            .with_timeout(Duration::from_secs(300)),
        )
        .source("redis", 1, |_| source.clone())
        .sink("txn", 1, |i| {
            TransactionalSink::new(store.clone(), i).pace(Duration::from_millis(2))
        })
        .unwrap();
    let handle = job.handle();
    let running = tokio::spawn(job.run());
    let wait_for = |n: usize| {
        let store = store.clone();
        async move {
            rivus_testkit::wait::until(
                Duration::from_secs(120),
                || async { store.committed().len() >= n },
                || format!("fewer than {n} entries committed"),
            )
            .await
        }
    };
    wait_for(1000).await;
    rivus_testkit::restart::bounce("redis", Duration::from_secs(2)).await;
    add(&url, &stream, 5000..10_000).await;
    wait_for(10_000).await;
    assert!(
        !running.is_finished(),
        "the job kept running through the restart"
    );
    handle.stop();
    running.await.unwrap().unwrap();
    let mut got = store.committed();
    let total = got.len();
    got.sort();
    got.dedup();
    assert_eq!(total - got.len(), 0, "duplicated entries");
    let expected: Vec<String> = (0..10_000).map(|i| format!("e{i:06}")).collect();
    assert!(
        got == expected,
        "every entry arrived ({} of 10000)",
        got.len()
    );
}
