//! Delivery tags of a lost connection are void. The source acknowledges a checkpoint's
//! deliveries when it completes, by tag; tags number each channel's deliveries from 1, so a
//! tag of the old connection, filed under a checkpoint triggered while the source reconnects
//! and acknowledged on the new channel once that checkpoint completes, would acknowledge the
//! new channel's deliveries of those numbers — taken after the checkpoint's barrier, and lost
//! at the next crash. Through the fault proxy (the connection reset, new connections refused
//! until the barrier passed the source) with a sink (a task of its own) that holds the
//! checkpoint open until the broker handed everything to the new channel; the job is cancelled right after the checkpoint completes, and the
//! next run must receive everything after that checkpoint's barrier.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use common::{channel, declare, publish_with_ids};
use rivus_connector_rabbitmq::RabbitSource;
use rivus_sdk::prelude::*;
use rivus_sdk::schema::{DeserializationSchema, JsonSchema};
use rivus_testkit::fault_proxy::FaultProxy;
use rivus_testkit::services::{require, unique_name, Service};

/// Keeps what it receives; its checkpoint snapshots wait while the gate is closed, so a
/// checkpoint completes only when the test lets it.
#[derive(Clone)]
struct GateSink {
    values: Arc<Mutex<Vec<u64>>>,
    /// The checkpoints whose barrier reached the sink.
    barriers: Arc<Mutex<Vec<u64>>>,
    open: Arc<watch::Sender<bool>>,
}

impl GateSink {
    fn new() -> GateSink {
        GateSink {
            values: Arc::default(),
            barriers: Arc::default(),
            open: Arc::new(watch::channel(true).0),
        }
    }
}

#[async_trait]
impl RichFunction for GateSink {}

#[async_trait]
impl CheckpointedFunction for GateSink {
    type State = ();

    async fn snapshot_state(&mut self, id: u64) -> Result<()> {
        self.barriers.lock().unwrap().push(id);
        let mut open = self.open.subscribe();
        while !*open.borrow_and_update() {
            if open.changed().await.is_err() {
                break;
            }
        }
        Ok(())
    }
}

#[async_trait]
impl CheckpointListener for GateSink {}

#[async_trait]
impl SinkFunction<u64> for GateSink {
    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::AtLeastOnce
    }

    async fn invoke(&mut self, value: u64, _: &SinkContext) -> Result<()> {
        self.values.lock().unwrap().push(value);
        Ok(())
    }
}

/// Waits for `what` for at most 30 s.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "waited 30 s for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn publish(url: &str, queue: &str, ids: std::ops::Range<u64>) {
    let (conn, ch) = channel(url).await;
    assert!(publish_with_ids(&ch, queue, ids.map(|n| n.to_string()))
        .await
        .unwrap());
    let _ = conn.close(200, "done".into()).await;
}

/// A job reading `queue` through `url` into `sink`, a checkpoint every 2 s into `backend`.
fn job(name: &str, url: &str, queue: &str, sink: &GateSink, backend: &MemoryStateBackend) -> Job {
    let (url, queue, sink) = (url.to_owned(), queue.to_owned(), sink.clone());
    Pipeline::new(name)
        .checkpointing(CheckpointConfig::new(
            Duration::from_secs(2),
            Arc::new(backend.clone()),
        ))
        .source("rabbit", 1, move |_| {
            RabbitSource::builder(&url)
                .queues([queue.clone()])
                .prefetch(100)
                .use_correlation_ids(true)
                .build(|m| JsonSchema::<u64>::new().deserialize(m.body, &m.queue))
                .unwrap()
        })
        // A task of its own: a held snapshot must not hold the source (chained, it would).
        .rebalance(1)
        .sink("gate", 1, move |_| sink.clone())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_of_a_lost_connection_never_acknowledge_the_new_channels_deliveries() {
    let Some(url) = require(Service::RabbitMq) else {
        return;
    };
    let (proxy, proxied) = FaultProxy::in_front_of(&url).await.unwrap();
    let queue = unique_name("reconnect-acks");
    {
        let (conn, ch) = channel(&url).await;
        declare(&ch, &queue).await;
        let _ = conn.close(200, "done".into()).await;
    }
    let name = unique_name("reconnect-acks");
    let backend = MemoryStateBackend::new();
    let first = GateSink::new();
    let run = job(&name, &proxied, &queue, &first, &backend);
    let (handle, history) = (run.handle(), run.checkpoint_history());
    let running = tokio::spawn(run.run());

    // 0..10 delivered and acknowledged by a completed checkpoint.
    publish(&url, &queue, 0..10).await;
    until("ten records", || first.values.lock().unwrap().len() == 10).await;
    let barriers = first.barriers.lock().unwrap().len();
    until("a checkpoint after them", || {
        history.totals().0 >= 1 && first.barriers.lock().unwrap().len() > barriers
    })
    .await;
    let completed = history.totals().0;
    // The next checkpoint is held open; 10..15 are delivered after the last barrier.
    first.open.send_replace(false);
    publish(&url, &queue, 10..15).await;
    until("fifteen records", || {
        first.values.lock().unwrap().len() == 15
    })
    .await;
    // The connection is lost, and the barrier passes the source while it cannot reconnect.
    let seen = first.barriers.lock().unwrap().len();
    proxy.set_refuse(true);
    proxy.reset_all();
    until("a barrier while reconnecting", || {
        first.barriers.lock().unwrap().len() > seen
    })
    .await;
    let held = *first.barriers.lock().unwrap().last().unwrap();
    // The new channel delivers 10..15 again (dropped: their ids are known) and 15..35.
    let accepted = proxy.accepted_connections();
    proxy.set_refuse(false);
    publish(&url, &queue, 15..35).await;
    until("the reconnect", || proxy.accepted_connections() > accepted).await;
    // The broker handed them all to the new channel (the held barrier holds the sink).
    let deadline = Instant::now() + Duration::from_secs(30);
    while common::depth(&url, &queue).await != Some(0) {
        assert!(
            Instant::now() < deadline,
            "waited 30 s for the new channel's deliveries"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The held checkpoint completes; the job dies before the next one.
    first.open.send_replace(true);
    until("the held checkpoint", || history.totals().0 > completed).await;
    handle.cancel();
    let _ = running.await;

    // The next run restores that checkpoint: everything after its barrier comes again.
    let second = GateSink::new();
    let run = job(&name, &url, &queue, &second, &backend);
    let handle = run.handle();
    let running = tokio::spawn(run.run());
    let deadline = Instant::now() + Duration::from_secs(30);
    let missing = loop {
        let got: std::collections::BTreeSet<u64> =
            second.values.lock().unwrap().iter().copied().collect();
        let missing: Vec<u64> = (15..35).filter(|i| !got.contains(i)).collect();
        if missing.is_empty() || Instant::now() > deadline {
            break missing;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    handle.stop();
    let summary = running.await.unwrap().unwrap();
    assert_eq!(
        summary.restored_from,
        Some(held),
        "restored the held checkpoint"
    );
    assert!(
        missing.is_empty(),
        "acknowledged by the old connection's tags and never delivered again: {missing:?}"
    );
}
