//! The Redis server stops and starts again mid-stream (alone in this file: no other test runs
//! while it is down). The sink retries through the outage on the reconnected connection;
//! everything acknowledged before the stop is still there (append-only file) and nothing
//! emitted is lost.

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_restart_mid_stream_loses_nothing() {
    let Some(url) = require(Service::Redis) else {
        return;
    };
    let key = unique_name("restart");
    let k = key.clone();
    let sink = RedisSink::builder(&url)
        .bulk(rivus_sdk::bulk::BulkConfig {
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
    let report = rivus_testkit::restart::sink_restart_mid_stream("redis", sink, 20_000, || async {
        members(&url, &key).await as u64
    })
    .await;
    // The append-only file kept every acknowledged member.
    assert!(
        report.after_restart >= report.before_stop,
        "acknowledged members survived the restart ({} of {})",
        report.after_restart,
        report.before_stop
    );
}
