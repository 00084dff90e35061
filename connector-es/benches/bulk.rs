//! Bulk indexing throughput, rivus's sink next to a raw `_bulk` loop in the same run, with the
//! same batch size and concurrency. Needs the node from `dev/services up elasticsearch`.
//!
//! `cargo bench -p rivus-connector-es --bench bulk` (`RIVUS_BENCH_RECORDS` to change N).

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use elasticsearch::http::transport::Transport;
use elasticsearch::indices::{IndicesCreateParts, IndicesDeleteParts};
use elasticsearch::{BulkParts, Elasticsearch};
use futures::StreamExt;
use rivus_connector_es::{BulkItem, DocRequest, EsSink};
use rivus_core::prelude::*;
use rivus_testkit::bench::{compare, rounds};
use rivus_testkit::SequenceSource;
use serde_json::{json, Value};

const BATCH: usize = 1000;
const CONCURRENCY: usize = 2;

fn doc(n: u64) -> Value {
    json!({"v": n, "pad": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"})
}

async fn create(c: &Elasticsearch, index: &str) {
    c.indices()
        .create(IndicesCreateParts::Index(index))
        .body(json!({"settings": {"number_of_shards": 2, "number_of_replicas": 0, "refresh_interval": "30s"}}))
        .send()
        .await
        .unwrap();
}

async fn raw(c: &Elasticsearch, index: &str, n: u64) -> f64 {
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
        })
        .collect::<Vec<_>>();
    // Like the sink, resend items the node rejects with 429 (the dev node's write queue is
    // tiny on purpose); any other item error fails the bench.
    let results: Vec<bool> = futures::stream::iter(bodies)
        .map(|mut body| async move {
            loop {
                let r: Value = c
                    .bulk(BulkParts::None)
                    .body(body.clone())
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                if r["errors"] == json!(false) {
                    return true;
                }
                let items = r["items"].as_array().unwrap();
                let mut again = Vec::new();
                for (line, item) in body.iter().zip(items) {
                    match item["index"]["status"].as_u64() {
                        Some(429) => again.push(line.clone()),
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
        .bulk(rivus_core::bulk::BulkConfig {
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
    let url = std::env::var("RIVUS_ES_URL").unwrap_or_else(|_| "http://127.0.0.1:9200".into());
    let n: u64 = std::env::var("RIVUS_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let c = Elasticsearch::new(Transport::single_node(&url).unwrap());
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let index = |who: &str, round: usize| format!("bench-{who}-{stamp}-{round}");
    let rounds = rounds(5);
    rt.block_on(async {
        for round in 0..rounds {
            create(&c, &index("raw", round)).await;
            create(&c, &index("rivus", round)).await;
        }
    });
    compare(
        &format!("{n} docs of ~110 bytes, bulks of {BATCH}, {CONCURRENCY} in flight"),
        "docs/s",
        rounds,
        |round| rt.block_on(raw(&c, &index("raw", round), n)),
        |round| rt.block_on(rivus(&url, &index("rivus", round), n)),
    );
    // The measured indices go: rounds add up on the dev node's disk.
    let pattern = format!("bench-*-{stamp}-*");
    rt.block_on(
        c.indices()
            .delete(IndicesDeleteParts::Index(&[&pattern]))
            .send(),
    )
    .unwrap()
    .error_for_status_code()
    .unwrap();
}
