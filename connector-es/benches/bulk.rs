//! Bulk indexing throughput, rivus's sink next to a raw `_bulk` loop (plain `reqwest`) in the
//! same run, with the same batch size and concurrency, on each search server that answers:
//! Elasticsearch 7.17, OpenSearch 2.19 and 3.x (`dev/services up elasticsearch opensearch2
//! opensearch3`).
//!
//! `cargo bench -p rivus-connector-es --bench bulk` (`RIVUS_BENCH_RECORDS` to change N,
//! `RIVUS_BENCH_SERVERS=opensearch3` to pick servers).

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures::StreamExt;
use rivus_connector_es::{BulkItem, DocRequest, EsSink};
use rivus_sdk::prelude::*;
use rivus_testkit::bench::{compare, rounds};
use rivus_testkit::SequenceSource;
use serde_json::{json, Value};

const BATCH: usize = 1000;
const CONCURRENCY: usize = 2;

fn doc(n: u64) -> Value {
    json!({"v": n, "pad": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"})
}

async fn create(c: &reqwest::Client, url: &str, index: &str) {
    let body = json!({"settings": {"number_of_shards": 2, "number_of_replicas": 0, "refresh_interval": "30s"}});
    let r = c
        .put(format!("{url}/{index}"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "creating {index}: {}", r.status());
}

async fn raw(c: &reqwest::Client, url: &str, index: &str, n: u64) -> f64 {
    let t = Instant::now();
    let bodies = (0..n)
        .collect::<Vec<_>>()
        .chunks(BATCH)
        .map(|chunk| {
            chunk
                .iter()
                .map(|i| {
                    BulkItem::encode(&DocRequest::Index {
                        index: index.into(),
                        id: Some(i.to_string()),
                        routing: None,
                        doc: doc(*i),
                    })
                    .lines
                })
                .collect::<Vec<Bytes>>()
                .concat()
        })
        .collect::<Vec<_>>();
    // Like the sink, resend items the node rejects with 429 (the dev node's write queue is
    // tiny on purpose); any other item error fails the bench.
    let results: Vec<bool> = futures::stream::iter(bodies)
        .map(|mut body| async move {
            loop {
                let answer = c
                    .post(format!("{url}/_bulk"))
                    .header("content-type", "application/x-ndjson")
                    .body(body.clone())
                    .send()
                    .await
                    .unwrap()
                    .bytes()
                    .await
                    .unwrap();
                let r: Value = serde_json::from_slice(&answer).unwrap();
                if r["errors"] == json!(false) {
                    return true;
                }
                let items = r["items"].as_array().unwrap();
                let mut again = Vec::new();
                let mut lines = body.split(|b| *b == b'\n');
                for item in items {
                    let (action, doc) = (lines.next().unwrap(), lines.next().unwrap());
                    match item["index"]["status"].as_u64() {
                        Some(429) => {
                            for part in [action, doc] {
                                again.extend_from_slice(part);
                                again.push(b'\n');
                            }
                        }
                        Some(s) if s >= 300 => return false,
                        _ => {}
                    }
                }
                body = again;
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    assert!(results.iter().all(|ok| *ok), "raw bulks had item errors");
    n as f64 / t.elapsed().as_secs_f64()
}

async fn rivus(url: &str, index: &str, n: u64) -> f64 {
    let ix = index.to_owned();
    let sink = EsSink::builder(url)
        .bulk(rivus_sdk::bulk::BulkConfig {
            max_actions: BATCH,
            max_bytes: 0,
            flush_interval: None,
            concurrent_requests: CONCURRENCY,
            ..EsSink::default_bulk()
        })
        .build(move |i: &u64, idx| {
            idx.index(&ix, Some(i.to_string()), doc(*i));
            Ok(())
        })
        .unwrap();
    let job = Pipeline::new("bench-es")
        .source("seq", 1, |i| {
            SequenceSource::new(i, 1, Some(n), Arc::new(AtomicU64::new(0)))
        })
        .sink("es", 1, |_| sink.clone())
        .unwrap();
    let t = Instant::now();
    job.run().await.unwrap();
    n as f64 / t.elapsed().as_secs_f64()
}

fn main() {
    let n: u64 = std::env::var("RIVUS_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let picked = std::env::var("RIVUS_BENCH_SERVERS").ok();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let c = reqwest::Client::new();
    let servers = [
        ("elasticsearch", "RIVUS_ES_URL", "http://127.0.0.1:9200"),
        (
            "opensearch2",
            "RIVUS_OPENSEARCH2_URL",
            "http://127.0.0.1:9202",
        ),
        (
            "opensearch3",
            "RIVUS_OPENSEARCH3_URL",
            "http://127.0.0.1:9203",
        ),
    ];
    let mut ran = 0;
    for (name, var, default) in servers {
        if picked
            .as_deref()
            .is_some_and(|p| !p.split(',').any(|s| s == name))
        {
            continue;
        }
        let url = std::env::var(var).unwrap_or_else(|_| default.into());
        let version = rt.block_on(async {
            let body = c.get(&url).send().await.ok()?.bytes().await.ok()?;
            let v: Value = serde_json::from_slice(&body).ok()?;
            v["version"]["number"].as_str().map(str::to_owned)
        });
        let Some(version) = version else {
            eprintln!("{name}: no answer at {url}, not measured");
            continue;
        };
        ran += 1;
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let index = |who: &str, round: usize| format!("bench-{who}-{stamp}-{round}");
        let rounds = rounds(5);
        rt.block_on(async {
            for round in 0..rounds {
                create(&c, &url, &index("raw", round)).await;
                create(&c, &url, &index("rivus", round)).await;
            }
        });
        compare(
            &format!(
                "{name} {version}: {n} docs of ~110 bytes, bulks of {BATCH}, {CONCURRENCY} in flight"
            ),
            "docs/s",
            rounds,
            |round| rt.block_on(raw(&c, &url, &index("raw", round), n)),
            |round| rt.block_on(rivus(&url, &index("rivus", round), n)),
        );
        // The measured indices go: rounds add up on the dev node's disk.
        let r = rt
            .block_on(c.delete(format!("{url}/bench-*-{stamp}-*")).send())
            .unwrap();
        assert!(
            r.status().is_success(),
            "deleting the bench indices: {}",
            r.status()
        );
    }
    assert!(
        ran > 0,
        "no search server answered: start them with dev/services up"
    );
}
