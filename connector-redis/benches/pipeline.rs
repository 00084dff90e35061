//! Redis sink throughput next to raw redis-rs pipelines of the same size (same run) and
//! `redis-benchmark -P` as the ceiling. Needs `dev/services up redis`.
//! `cargo bench -p rivus-connector-redis --bench pipeline`.

use std::process::Command;
use std::time::Instant;

use rivus_connector_redis::{RedisCommand, RedisSink};
use rivus_sdk::prelude::*;
use rivus_testkit::bench::{compare, rounds};
use rivus_testkit::services::unique_name;
use rivus_testkit::SequenceSource;

const PIPELINE: usize = 1000;

async fn raw(url: &str, n: u64) -> f64 {
    let mut con = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let prefix = unique_name("raw");
    let t = Instant::now();
    let mut i = 0;
    while i < n {
        let mut pipe = redis::pipe();
        for k in i..(i + PIPELINE as u64).min(n) {
            pipe.cmd("SET")
                .arg(format!("{prefix}:{k}"))
                .arg(b"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx")
                .ignore();
        }
        let _: () = pipe.query_async(&mut con).await.unwrap();
        i += PIPELINE as u64;
    }
    let rate = n as f64 / t.elapsed().as_secs_f64();
    remove(url, &prefix).await;
    rate
}

/// Removes the keys a round wrote: rounds of 500 000 keys add up in the dev server's
/// append-only file.
async fn remove(url: &str, prefix: &str) {
    let mut con = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let mut cursor = 0u64;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}:*"))
            .arg("COUNT")
            .arg(10_000)
            .query_async(&mut con)
            .await
            .unwrap();
        if !keys.is_empty() {
            let _: () = redis::cmd("UNLINK")
                .arg(&keys)
                .query_async(&mut con)
                .await
                .unwrap();
        }
        if next == 0 {
            return;
        }
        cursor = next;
    }
}

async fn rivus(url: &str, n: u64) -> f64 {
    let prefix = unique_name("rivus");
    let keys = prefix.clone();
    let sink = RedisSink::builder(url)
        .bulk(rivus_sdk::bulk::BulkConfig {
            max_actions: PIPELINE,
            concurrent_requests: 1,
            ..RedisSink::default_bulk()
        })
        .build(move |k: &u64| {
            Ok(vec![RedisCommand::Set {
                key: format!("{prefix}:{k}"),
                value: b"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx".to_vec(),
                ttl_secs: None,
            }])
        })
        .unwrap();
    let job = Pipeline::new("bench-redis")
        .source("seq", 1, |i| {
            SequenceSource::new(i, 1, Some(n), Default::default())
        })
        .sink("redis", 1, |_| sink.clone())
        .unwrap();
    let t = Instant::now();
    job.run().await.unwrap();
    let rate = n as f64 / t.elapsed().as_secs_f64();
    remove(url, &keys).await;
    rate
}

fn ceiling(n: u64) -> Option<f64> {
    let out = Command::new("redis-benchmark")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            "6379",
            "-t",
            "set",
            "-P",
            &PIPELINE.to_string(),
            "-n",
            &n.to_string(),
            "-d",
            "32",
            "-q",
            "-c",
            "1",
        ])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    // "SET: 1234567.89 requests per second, ..." (the line may carry \r progress before it)
    let line = text.rsplit('\r').next()?.trim().to_owned();
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    let url = std::env::var("RIVUS_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let n: u64 = std::env::var("RIVUS_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    compare(
        &format!("{n} SETs of 32 bytes, pipelines of {PIPELINE}, one pipeline in flight"),
        "cmd/s",
        rounds(5),
        |_| rt.block_on(raw(&url, n)),
        |_| rt.block_on(rivus(&url, n)),
    );
    if let Some(c) = ceiling(n) {
        println!("redis-benchmark -P {PIPELINE} (1 client), the ceiling: {c:.0} cmd/s");
    }
}
