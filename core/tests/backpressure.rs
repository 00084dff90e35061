//! A stalled sink back-pressures the source: the source stops emitting, and what is buffered
//! between them stays within the configured bound.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rivus_sdk::prelude::*;
use rivus_testkit::{CollectingSink, SequenceSource};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_sink_stops_the_source_with_bounded_buffers() {
    let emitted = Arc::new(AtomicU64::new(0));
    let sink = CollectingSink::<u64>::new();
    let control = sink.control();
    control.stall();
    let (batch, capacity) = (256usize, 4usize);
    let job = Pipeline::new("bp")
        .batch_size(batch)
        .channel_capacity(capacity)
        .source("src", 1, |i| {
            SequenceSource::new(i, 1, None, Arc::clone(&emitted))
        })
        .map(|v| v * 3)
        .rebalance(1)
        .sink("sink", 1, |i| sink.for_subtask(i))
        .unwrap();
    let handle = job.handle();
    let running = tokio::spawn(job.run());

    // Wait until the source is blocked: its count stops moving for a while.
    let last = rivus_testkit::wait::until_still(&emitted, Duration::from_secs(30)).await;
    // Hold the stall for two more seconds: nothing more may be emitted.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let held = emitted.load(Ordering::Relaxed);
    assert_eq!(held, last, "the source emitted while the sink was stalled");
    // Bound: the channel's batches, one batch being built at each end, one in the sink's
    // hands, plus the source's counter granularity (1024).
    let bound = ((capacity + 3) * batch + 1024) as u64;
    assert!(held <= bound, "{held} records buffered, bound {bound}");
    assert!(sink.values().is_empty());

    control.release();
    handle.stop();
    running.await.unwrap().unwrap();
    let values = sink.values();
    assert!(
        values.len() as u64 >= held,
        "everything buffered was delivered"
    );
    assert!(
        values.iter().enumerate().all(|(i, v)| *v == 3 * i as u64),
        "in order, no gaps"
    );
}
