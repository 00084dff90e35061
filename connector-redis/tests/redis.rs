//! The Redis sink and Streams source against the real server started by `dev/services`.

use redis::AsyncCommands;
use rivus_connector_redis::{RedisCommand, RedisSink, RedisStreamsSource};
use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::prelude::*;
use rivus_sdk::schema::SchemaError;
use rivus_testkit::services::{require, unique_name, Service};
use rivus_testkit::suite::{SinkSuite, SourceSuite};

mod common;
use common::{ListCtx, StreamsCtx};

async fn con(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_source_passes_the_conformance_suite_exactly_once() {
    let Some(url) = require(Service::Redis) else {
        return;
    };
    let mut suite = SourceSuite::new(StreamsCtx::new(url)).records_per_split(200);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sink_passes_the_conformance_suite() {
    let Some(url) = require(Service::Redis) else {
        return;
    };
    let mut suite = SinkSuite::new(ListCtx::new(url, 1)).records_per_split(200);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
}

/// A command the server refuses (WRONGTYPE) goes to the error policy; the rest of its
/// pipeline is kept. A record the mapper cannot map names the record and the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_commands_and_unmappable_records_go_to_the_error_policy() {
    let Some(url) = require(Service::Redis) else {
        return;
    };
    let (string_key, hash) = (unique_name("str"), unique_name("hash"));
    let mut c = con(&url).await;
    let _: () = c.set(&string_key, "not a hash").await.unwrap();
    let (sk, h) = (string_key.clone(), hash.clone());
    let sink = RedisSink::builder(&url)
        .error_policy(ErrorPolicy::Skip)
        .build(move |n: &u64| {
            if *n == 5 {
                return Err(SchemaError::new(
                    "mapper",
                    format!("record {n}"),
                    "field `user` is missing",
                ));
            }
            // Record 7 writes a hash field into a string key: WRONGTYPE.
            let key = if *n == 7 { sk.clone() } else { h.clone() };
            Ok(vec![RedisCommand::HSet {
                key,
                field: n.to_string(),
                value: b"x".to_vec(),
                ttl_secs: Some(600),
            }])
        })
        .unwrap();
    rivus_testkit::run_sequence_into("wrongtype", 20, 1, |_| sink.clone())
        .await
        .unwrap();
    let fields: Vec<String> = c.hkeys(&hash).await.unwrap();
    let mut got: Vec<u64> = fields.iter().map(|f| f.parse().unwrap()).collect();
    got.sort();
    assert_eq!(
        got,
        (0..20).filter(|n| *n != 5 && *n != 7).collect::<Vec<_>>()
    );
    let ttl: i64 = c.ttl(&hash).await.unwrap();
    assert!(ttl > 0 && ttl <= 600, "HSET with a TTL sets it ({ttl})");

    let strict = RedisSink::builder(&url)
        .build(move |_: &u64| {
            Ok(vec![RedisCommand::HSet {
                key: string_key.clone(),
                field: "f".into(),
                value: vec![],
                ttl_secs: None,
            }])
        })
        .unwrap();
    let err = rivus_testkit::run_sequence_into("strict", 1, 1, |_| strict.clone())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("WRONGTYPE"), "{err}");
}

#[test]
fn bad_configuration_is_refused_with_the_field_path() {
    let err = RedisSink::builder("http://x")
        .build(|_: &u8| Ok(vec![]))
        .unwrap_err();
    assert!(err.to_string().contains("`url`"), "{err}");
    let err = RedisStreamsSource::builder("redis://127.0.0.1/")
        .streams(["s"])
        .build(|_| Ok(()))
        .unwrap_err();
    assert!(err.to_string().contains("`group`"), "{err}");
}

/// Pub/sub: subscribed messages arrive in order; declared at-most-once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pubsub_source_receives_published_messages() {
    let Some(url) = require(Service::Redis) else {
        return;
    };
    common::pubsub_roundtrip(url.as_str().into(), &url).await;
}

/// Entries delivered to a consumer that no longer exists (a subtask of an earlier run with a
/// higher parallelism) and never acknowledged are claimed by the stream's new owner and
/// emitted — not left pending forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_entries_of_a_gone_consumer_are_claimed_and_emitted() {
    use rivus_testkit::{TransactionalSink, TxnStore};
    use std::sync::Arc;
    use std::time::Duration;

    let Some(url) = require(Service::Redis) else {
        return;
    };
    let (stream, group) = (unique_name("stream"), unique_name("group"));
    let mut c = common::con(&url.as_str().into()).await;
    let _: () = c
        .xgroup_create_mkstream(&stream, &group, "0")
        .await
        .unwrap();
    for i in 0..100 {
        let _: String = c
            .xadd(&stream, "*", &[("v", format!("e{i:03}"))])
            .await
            .unwrap();
    }
    // Consumer `rivus-3` read 40 entries and vanished before acknowledging them.
    let opts = redis::streams::StreamReadOptions::default()
        .group(&group, "rivus-3")
        .count(40);
    let r: redis::streams::StreamReadReply =
        c.xread_options(&[&stream], &[">"], &opts).await.unwrap();
    assert_eq!(r.keys[0].ids.len(), 40);

    let source = RedisStreamsSource::builder(&url)
        .streams([stream.clone()])
        .group(&group)
        .build(|e| Ok(String::from_utf8_lossy(e.field("v").unwrap_or_default()).into_owned()))
        .unwrap();
    let store = TxnStore::<String>::new();
    let job = Pipeline::new("claim")
        .checkpointing(CheckpointConfig::new(
            Duration::from_millis(100),
            Arc::new(MemoryStateBackend::new()),
        ))
        .source("redis", 1, |_| source.clone())
        .sink("txn", 1, |i| TransactionalSink::new(store.clone(), i))
        .unwrap();
    let handle = job.handle();
    let running = tokio::spawn(job.run());
    rivus_testkit::wait::until(
        Duration::from_secs(60),
        || async { store.committed().len() >= 100 },
        || format!("only {} of 100 entries arrived", store.committed().len()),
    )
    .await;
    handle.stop();
    running.await.unwrap().unwrap();
    let mut got = store.committed();
    got.sort();
    let expected: Vec<String> = (0..100).map(|i| format!("e{i:03}")).collect();
    assert_eq!(got, expected, "every entry exactly once");
    let pending: redis::streams::StreamPendingReply = c.xpending(&stream, &group).await.unwrap();
    assert_eq!(
        pending.count(),
        0,
        "everything acknowledged after the final checkpoint"
    );
}
