//! Network faults and a server restart between the Redis sink and Redis, through the
//! testkit's fault proxy: a blackhole mid-stream, connection resets every two seconds, 200 ms
//! latency, the server restarted. The job keeps running or restarts itself and ends with every
//! record a member of the set (SADD is idempotent, so at-least-once is effectively
//! exactly-once). Alone in this file: it restarts the server.

use std::time::Duration;

use redis::AsyncCommands;
use rivus_connector_redis::{RedisCommand, RedisSink};
use rivus_testkit::fault_proxy::FaultProxy;
use rivus_testkit::faults::{sink_under_fault, Fault};
use rivus_testkit::services::{require, unique_name, Service};

/// The set's members, retried while the server is away.
async fn members(url: &str, key: &str) -> Vec<u64> {
    loop {
        let got = async {
            let client = redis::Client::open(url).ok()?;
            let mut con = client.get_multiplexed_async_connection().await.ok()?;
            con.smembers::<_, Vec<u64>>(key).await.ok()
        };
        if let Ok(Some(m)) = tokio::time::timeout(Duration::from_secs(5), got).await {
            return m;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sink_rides_out_network_faults_and_a_server_restart() {
    let Some(url) = require(Service::Redis) else {
        return;
    };
    let (proxy, proxied) = FaultProxy::in_front_of(&url).await.unwrap();
    for fault in Fault::table(Fault::blackhole_from_env(), "redis") {
        let key = unique_name("faults");
        let sink = {
            let (proxied, key) = (proxied.clone(), key.clone());
            move || {
                let key = key.clone();
                RedisSink::builder(&proxied)
                    .bulk(rivus_sdk::bulk::BulkConfig {
                        max_actions: 200,
                        backoff: rivus_testkit::restart::outage_backoff(),
                        ..RedisSink::default_bulk()
                    })
                    .build(move |n: &u64| {
                        Ok(vec![RedisCommand::SAdd {
                            key: key.clone(),
                            member: n.to_string().into_bytes(),
                        }])
                    })
                    .unwrap()
            }
        };
        let run = sink_under_fault("faults-redis", &proxy, fault.clone(), 2_000, sink, || {
            let (url, key) = (url.clone(), key.clone());
            async move { members(&url, &key).await.len() as u64 }
        })
        .await;
        proxy.clear();
        let mut got = members(&url, &key).await;
        got.sort_unstable();
        let want: Vec<u64> = (0..run.emitted).collect();
        assert!(
            got == want,
            "redis under {}: {} members, want 0..{}",
            run.fault,
            got.len(),
            run.emitted
        );
        eprintln!("{}", run.report("redis sink (at-least-once, idempotent)"));
    }
}
