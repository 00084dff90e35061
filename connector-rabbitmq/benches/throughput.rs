//! RabbitMQ throughput, rivus next to raw lapin in the same run with the same confirm window
//! and prefetch: publishing (sequence → sink vs a raw publish loop with a window of confirms)
//! and consuming (source → null sink vs a raw consumer with multiple-acks). Needs
//! `dev/services up rabbitmq`. `cargo bench -p rivus-connector-rabbitmq --bench throughput`.

use std::collections::VecDeque;
use std::time::Instant;

use futures::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Connection, ConnectionProperties};
use rivus_connector_rabbitmq::{OutMessage, RabbitSink, RabbitSource};
use rivus_sdk::prelude::*;
use rivus_testkit::bench::{compare, rounds, runs_raw, runs_rivus, selected};
use rivus_testkit::services::unique_name;
use rivus_testkit::{CountingSink, SequenceSource};

const WINDOW: usize = 1000;
fn prefetch() -> u16 {
    std::env::var("RIVUS_BENCH_PREFETCH")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

async fn declare(url: &str, q: &str) {
    let conn = Connection::connect(url, ConnectionProperties::default())
        .await
        .unwrap();
    let ch = conn.create_channel().await.unwrap();
    ch.queue_declare(
        q.into(),
        QueueDeclareOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap();
    conn.close(200, "".into()).await.unwrap();
}

async fn raw_publish(url: &str, q: &str, n: u64, body: &[u8]) -> f64 {
    let conn = Connection::connect(url, ConnectionProperties::default())
        .await
        .unwrap();
    let ch = conn.create_channel().await.unwrap();
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    let t = Instant::now();
    let mut window = VecDeque::new();
    for _ in 0..n {
        if window.len() >= WINDOW {
            let c: lapin::PublisherConfirm = window.pop_front().unwrap();
            assert!(c.await.unwrap().is_ack());
        }
        let props = BasicProperties::default().with_delivery_mode(2);
        window.push_back(
            ch.basic_publish(
                "".into(),
                q.into(),
                BasicPublishOptions::default(),
                body,
                props,
            )
            .await
            .unwrap(),
        );
    }
    for c in window {
        assert!(c.await.unwrap().is_ack());
    }
    let r = n as f64 / t.elapsed().as_secs_f64();
    conn.close(200, "".into()).await.unwrap();
    r
}

async fn rivus_publish(url: &str, q: &str, n: u64, body: Vec<u8>) -> f64 {
    let sink = RabbitSink::builder(url)
        .routing_key(q)
        .confirm_window(WINDOW)
        .mandatory(false)
        .build(move |_: &u64| {
            Ok(OutMessage {
                body: body.clone(),
                ..Default::default()
            })
        })
        .unwrap();
    let job = Pipeline::new("bench-publish")
        .source("seq", 1, |i| {
            SequenceSource::new(i, 1, Some(n), Default::default())
        })
        .sink("rabbit", 1, |_| sink.clone())
        .unwrap();
    let t = Instant::now();
    job.run().await.unwrap();
    n as f64 / t.elapsed().as_secs_f64()
}

async fn raw_consume(url: &str, q: &str, n: u64) -> f64 {
    let conn = Connection::connect(url, ConnectionProperties::default())
        .await
        .unwrap();
    let ch = conn.create_channel().await.unwrap();
    ch.basic_qos(prefetch(), BasicQosOptions::default())
        .await
        .unwrap();
    let mut c = ch
        .basic_consume(
            q.into(),
            "raw".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let t = Instant::now();
    for i in 1..=n {
        let d = c.next().await.unwrap().unwrap();
        if i % (prefetch() as u64 / 2).max(1) == 0 || i == n {
            ch.basic_ack(d.delivery_tag, BasicAckOptions { multiple: true })
                .await
                .unwrap();
        }
    }
    let r = n as f64 / t.elapsed().as_secs_f64();
    conn.close(200, "".into()).await.unwrap();
    r
}

async fn rivus_consume(url: &str, q: &str, n: u64) -> f64 {
    let source = RabbitSource::builder(url)
        .queues([q])
        .prefetch(prefetch())
        .build(|m| Ok(m.body.len()))
        .unwrap();
    let count = CountingSink::new();
    let job = Pipeline::new("bench-consume")
        .checkpointing(CheckpointConfig::new(
            std::time::Duration::from_millis(50),
            std::sync::Arc::new(MemoryStateBackend::new()),
        ))
        .source("rabbit", 1, |_| source.clone())
        .sink("null", 1, |_| count.clone())
        .unwrap();
    let handle = job.handle();
    let t = Instant::now();
    let running = tokio::spawn(job.run());
    while count.count() < n {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let r = n as f64 / t.elapsed().as_secs_f64();
    handle.stop();
    running.await.unwrap().unwrap();
    r
}

fn main() {
    let url = std::env::var("RIVUS_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".into());
    let n: u64 = std::env::var("RIVUS_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let rounds = rounds(3);
    for size in [100usize, 1024] {
        let body = vec![b'x'; size];
        let queues: Vec<(String, String)> = (0..rounds)
            .map(|_| (unique_name("bench-raw"), unique_name("bench-rivus")))
            .collect();
        rt.block_on(async {
            for (a, b) in &queues {
                declare(&url, a).await;
                declare(&url, b).await;
            }
        });
        let publish = format!("publish {n} messages of {size} B, confirm window {WINDOW}");
        let consume = format!(
            "consume {n} messages of {size} B, prefetch {}, checkpoints every 50 ms",
            prefetch()
        );
        compare(
            &publish,
            "msg/s",
            rounds,
            |r| rt.block_on(raw_publish(&url, &queues[r].0, n, &body)),
            |r| rt.block_on(rivus_publish(&url, &queues[r].1, n, body.clone())),
        );
        if selected(&consume) {
            // Queues the publish comparison did not fill (filtered out, or one side only)
            // are filled here: the consume comparison needs the messages.
            let published = selected(&publish);
            for (a, b) in &queues {
                if !(published && runs_raw()) {
                    rt.block_on(raw_publish(&url, a, n, &body));
                }
                if !(published && runs_rivus()) {
                    rt.block_on(raw_publish(&url, b, n, &body));
                }
            }
        }
        compare(
            &consume,
            "msg/s",
            rounds,
            |r| rt.block_on(raw_consume(&url, &queues[r].0, n)),
            |r| rt.block_on(rivus_consume(&url, &queues[r].1, n)),
        );
    }
}
