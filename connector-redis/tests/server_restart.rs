//! The Redis server stops and starts again mid-stream (alone in this file: no other test runs
//! while it is down). The sink retries through the outage on the reconnected connection;
//! everything acknowledged before the stop is still there (append-only file) and nothing
//! emitted is lost.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use rivus_connector_redis::{RedisCommand, RedisSink};
use rivus_testkit::services::{require, unique_name, Service};

async fn members(url: &str, key: &str) -> usize {
    let Ok(client) = redis::Client::open(url) else {
        return 0;
    };
    let Ok(mut con) = client.get_multiplexed_async_connection().await else {
        return 0;
    };
    con.scard(key).await.unwrap_or(0)
}

/// Waits until `key` has `n` members, or the job ended (then its error is shown).
async fn wait_for(
    url: &str,
    key: &str,
    n: usize,
    job: &mut tokio::task::JoinHandle<rivus_core::Result<rivus_core::JobSummary>>,
) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while members(url, key).await < n {
        if job.is_finished() {
            panic!("the job ended: {:?}", job.await);
        }
        assert!(Instant::now() < deadline, "fewer than {n} members arrived");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_restart_mid_stream_loses_nothing() {
    let Some(url) = require(Service::Redis) else {
        return;
    };
    let key = unique_name("restart");
    let k = key.clone();
    let sink = RedisSink::builder(&url)
        .bulk(rivus_core::bulk::BulkConfig {
            max_actions: 500,
            backoff: rivus_testkit::restart::outage_backoff(),
            ..RedisSink::default_bulk()
        })
        .build(move |n: &u64| {
            Ok(vec![RedisCommand::SAdd {
                key: k.clone(),
                member: n.to_string().into_bytes(),
            }])
        })
        .unwrap();
    let emitted = Arc::new(AtomicU64::new(0));
    let job = rivus_testkit::restart::sequence_job("redis-restart", Arc::clone(&emitted), |_| {
        sink.clone()
    })
    .unwrap();
    let handle = job.handle();
    let mut running = tokio::spawn(job.run());

    wait_for(&url, &key, 20_000, &mut running).await;
    rivus_testkit::restart::bounce("redis", Duration::from_secs(2)).await;
    let after = members(&url, &key).await;
    assert!(
        after >= 20_000,
        "acknowledged members survived the restart ({after})"
    );
    wait_for(&url, &key, after + 20_000, &mut running).await;

    assert!(
        !running.is_finished(),
        "the job kept running through the restart"
    );
    handle.stop();
    let summary = running.await.unwrap().unwrap();
    let n = summary.records_read;
    assert_eq!(emitted.load(Ordering::Relaxed), n);
    // Members are the sequence numbers: every emitted record is a member, once.
    assert_eq!(
        members(&url, &key).await as u64,
        n,
        "all {n} emitted records arrived"
    );
}
