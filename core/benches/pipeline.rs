//! Runtime throughput: in-memory source → map → null sink on 100-byte records, chained in one
//! task and across a task boundary, and fanned out to two null sinks (chained, and with one
//! branch behind a task boundary), next to a plain loop doing the same work.
//!
//! Run with `cargo bench -p rivus-sdk --bench pipeline` (set `RIVUS_BENCH_RECORDS` to change
//! the record count).

use std::hint::black_box;
use std::time::Instant;

use rivus_sdk::prelude::*;
use rivus_testkit::CountingSink;

#[derive(Clone, Copy)]
struct Record([u8; 100]);

struct Gen {
    n: u64,
}

#[async_trait]
impl RichFunction for Gen {}

#[async_trait]
impl SourceFunction for Gen {
    type Out = Record;
    type State = u64;

    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::ExactlyOnce
    }

    async fn run(&mut self, ctx: &mut SourceContext<Record, u64>) -> Result<()> {
        let mut r = Record([7u8; 100]);
        for i in *ctx.state()..self.n {
            r.0[..8].copy_from_slice(&i.to_le_bytes());
            *ctx.state_mut() = i + 1;
            ctx.collect(r).await?;
        }
        Ok(())
    }
}

fn map(mut r: Record) -> Record {
    r.0[99] = r.0[0].wrapping_add(1);
    r
}

async fn run(n: u64, boundary: bool) -> (f64, u64) {
    let count = CountingSink::new();
    let stream = Pipeline::new("bench")
        .source("gen", 1, |_| Gen { n })
        .map(map);
    let stream = if boundary {
        stream.rebalance(1)
    } else {
        stream
    };
    let job = stream.sink("null", 1, |_| count.clone()).unwrap();
    let t = Instant::now();
    job.run().await.unwrap();
    let secs = t.elapsed().as_secs_f64();
    (n as f64 / secs, count.count())
}

/// Source → map → fan-out into two null sinks, the second behind a task boundary when
/// `boundary`: records per second per output.
async fn fan_out(n: u64, boundary: bool) -> (f64, [u64; 2]) {
    let (a, b) = (CountingSink::new(), CountingSink::new());
    let p = Pipeline::new("bench-fan-out");
    let [x, y] = p.source("gen", 1, |_| Gen { n }).map(map).fan_out();
    x.sink_to("a", 1, |_| a.clone());
    let y = if boundary { y.rebalance(1) } else { y };
    y.sink_to("b", 1, |_| b.clone());
    let job = p.build().unwrap();
    let t = Instant::now();
    job.run().await.unwrap();
    let secs = t.elapsed().as_secs_f64();
    (n as f64 / secs, [a.count(), b.count()])
}

fn raw_loop(n: u64) -> f64 {
    let t = Instant::now();
    let mut batch = Vec::with_capacity(1024);
    let mut x = 0u8;
    let mut r = Record([7u8; 100]);
    for i in 0..n {
        r.0[..8].copy_from_slice(&i.to_le_bytes());
        batch.push(map(black_box(r)));
        if batch.len() == 1024 {
            for v in batch.drain(..) {
                x ^= v.0[0];
            }
        }
    }
    black_box(x);
    n as f64 / t.elapsed().as_secs_f64()
}

fn main() {
    let n: u64 = std::env::var("RIVUS_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let raw = raw_loop(n);
    let (chained, c1) = rt.block_on(run(n, false));
    let (boundary, c2) = rt.block_on(run(n, true));
    assert_eq!((c1, c2), (n, n), "every record reached the sink");
    let (fanned, f1) = rt.block_on(fan_out(n, false));
    let (fanned_boundary, f2) = rt.block_on(fan_out(n, true));
    assert_eq!(
        (f1, f2),
        ([n, n], [n, n]),
        "every record reached both sinks"
    );
    println!("records: {n} x 100 bytes");
    println!(
        "plain loop (no runtime)      {:>8.2} M records/s",
        raw / 1e6
    );
    println!(
        "chained source->map->sink    {:>8.2} M records/s  ({:.2} of plain loop)",
        chained / 1e6,
        chained / raw
    );
    println!(
        "across a task boundary       {:>8.2} M records/s  ({:.2} of plain loop)",
        boundary / 1e6,
        boundary / raw
    );
    println!(
        "fan-out to two sinks         {:>8.2} M records/s per output  ({:.2} of chained)",
        fanned / 1e6,
        fanned / chained
    );
    println!(
        "fan-out, one branch behind   {:>8.2} M records/s per output  ({:.2} of the boundary)",
        fanned_boundary / 1e6,
        fanned_boundary / boundary
    );
}
