//! The broker stops and starts again mid-stream (alone in this file: no other test runs while
//! it is down). Queue → queue through a rivus job: the source reconnects and drops the
//! redeliveries by correlation id, the sink reconnects and publishes its unconfirmed messages
//! again; every message arrives.

mod common;

use common::{channel, declare, depth, publish_with_ids};

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use lapin::options::BasicGetOptions;
use rivus_connector_rabbitmq::{OutMessage, RabbitSink, RabbitSource};
use rivus_sdk::prelude::*;
use rivus_sdk::schema::{DeserializationSchema, StringSchema};
use rivus_testkit::services::{require, unique_name, Service};

async fn publish(url: &str, queue: &str, range: std::ops::Range<u32>) {
    let (conn, ch) = channel(url).await;
    let taken = publish_with_ids(&ch, queue, range.map(|i| format!("m{i:06}")))
        .await
        .unwrap();
    assert!(taken, "the broker refused a message");
    let _ = conn.close(200, "done".into()).await;
}

/// Waits (at most 120 s) until `queue` holds `n` messages; panics saying whether the job was
/// still running (stuck) or had ended, and how.
async fn wait_for(url: &str, queue: &str, n: u64, job: &mut JoinHandle<Result<JobSummary>>) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let have = depth(url, queue).await.unwrap_or(0);
        if have >= n {
            return;
        }
        if job.is_finished() {
            panic!(
                "{have} of {n} messages in {queue}: the job ended: {:?}",
                job.await
            );
        }
        assert!(
            Instant::now() < deadline,
            "{have} of {n} messages in {queue} after 120 s; the job is still running"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Takes everything now in `queue` (acknowledged on delivery) into `seen`, counting copies in
/// `total`.
async fn drain(url: &str, queue: &str, seen: &mut HashSet<String>, total: &mut usize) {
    let (conn, ch) = channel(url).await;
    while let Some(m) = ch
        .basic_get(queue.into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap()
    {
        *total += 1;
        seen.insert(String::from_utf8(m.delivery.data.clone()).unwrap());
    }
    let _ = conn.close(200, "done".into()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_restart_mid_stream_loses_nothing() {
    let Some(url) = require(Service::RabbitMq) else {
        return;
    };
    let (input, output) = (unique_name("in"), unique_name("out"));
    {
        let (conn, ch) = channel(&url).await;
        declare(&ch, &input).await;
        declare(&ch, &output).await;
        let _ = conn.close(200, "done".into()).await;
    }
    publish(&url, &input, 0..5000).await;
    let source = RabbitSource::builder(&url)
        .queues([input.clone()])
        .prefetch(200)
        .use_correlation_ids(true)
        .build(|m| StringSchema.deserialize(m.body, &m.queue))
        .unwrap();
    let out = output.clone();
    let sink = RabbitSink::builder(&url)
        .routing_key(&out)
        .confirm_window(100)
        .build(|v: &String| {
            Ok(OutMessage {
                body: v.clone().into_bytes(),
                correlation_id: Some(v.clone()),
                ..OutMessage::default()
            })
        })
        .unwrap();
    let job = Pipeline::new("rabbit-restart")
        .checkpointing(
            CheckpointConfig::new(
                Duration::from_millis(200),
                Arc::new(MemoryStateBackend::new()),
            )
            .with_timeout(Duration::from_secs(300)),
        )
        .source("in", 1, |_| source.clone())
        .sink("out", 1, |_| sink.clone())
        .unwrap();
    let handle = job.handle();
    let mut running = tokio::spawn(job.run());

    wait_for(&url, &output, 1000, &mut running).await;
    rivus_testkit::restart::bounce("rabbitmq", Duration::from_secs(2)).await;
    publish(&url, &input, 5000..10000).await;
    // Read the output queue while the job runs, until every message arrived at least once
    // (the sink is at-least-once): its depth counts copies, so it cannot tell when to stop.
    let (mut seen, mut total) = (HashSet::new(), 0);
    let deadline = Instant::now() + Duration::from_secs(120);
    while seen.len() < 10_000 {
        assert!(
            !running.is_finished(),
            "the job ended with {} of 10000 messages out: {:?}",
            seen.len(),
            (&mut running).await
        );
        assert!(
            Instant::now() < deadline,
            "{} of 10000 messages out after 120 s; the job is still running",
            seen.len()
        );
        drain(&url, &output, &mut seen, &mut total).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        !running.is_finished(),
        "the job kept running through the restart"
    );
    handle.stop();
    running.await.unwrap().unwrap();
    drain(&url, &output, &mut seen, &mut total).await;
    assert_eq!(
        seen.len(),
        10_000,
        "every message arrived ({total} with duplicates)"
    );
    assert_eq!(
        depth(&url, &input).await,
        Some(0),
        "the input queue is drained and acknowledged"
    );
}
