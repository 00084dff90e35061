//! Checkpoints taken while the Streams source emits one read batch (500 entries) cover only
//! the entries before them. The job fails after some such checkpoints completed and restarts
//! from the last one; every entry arrives exactly once. (Whether the failure falls right after
//! an over-eager acknowledgement depends on timing; the unit test
//! `a_completed_checkpoint_acknowledges_only_what_its_state_covers` pins that rule exactly.)

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use rivus_connector_redis::RedisStreamsSource;
use rivus_sdk::checkpoint::MemoryStateBackend;
use rivus_sdk::prelude::*;
use rivus_sdk::schema::SchemaError;
use rivus_testkit::services::{require, unique_name, Service};
use rivus_testkit::{TransactionalSink, TxnStore};

mod common;
use common::add;

const N: u64 = 4000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_inside_a_read_batch_acknowledge_only_what_they_cover() {
    let Some(url) = require(Service::Redis) else {
        return;
    };
    let (stream, group) = (unique_name("midbatch"), unique_name("group"));
    add(&url, &stream, 0..N as u32).await;

    let source = RedisStreamsSource::builder(&url)
        .streams([stream.clone()])
        .group(&group)
        .count(500)
        .build(|e| {
            let v = e
                .field("v")
                .ok_or_else(|| SchemaError::new("redis", e.id, "no field `v`"))?;
            String::from_utf8_lossy(v)
                .trim_start_matches('e')
                .parse::<u64>()
                .map_err(|err| SchemaError::new("redis", e.id, err.to_string()))
        })
        .unwrap();
    let backend = MemoryStateBackend::new();
    let store = TxnStore::<u64>::new();
    // Small batches into a paced sink (about 10 records a millisecond): a 500-entry read takes
    // the source ~50 ms to emit, and a checkpoint (every 130 ms) is taken in the middle of
    // one, seen by the source only when the whole read is emitted. The failure comes after
    // that read, before the next checkpoint: the restore starts from the mid-read one.
    let job = |fail_after: Option<usize>| {
        let received = Arc::new(AtomicUsize::new(0));
        let (source, store) = (source.clone(), store.clone());
        Pipeline::new("midbatch")
            .batch_size(10)
            .checkpointing(CheckpointConfig::new(
                Duration::from_millis(130),
                Arc::new(backend.clone()),
            ))
            .source("redis", 1, move |_| source.clone())
            .sink("txn", 1, move |i| {
                let sink = TransactionalSink::new(store.clone(), i).pace(Duration::from_millis(1));
                match fail_after {
                    Some(n) => sink.fail_after(n, Arc::clone(&received)),
                    None => sink,
                }
            })
            .unwrap()
    };
    let failed = job(Some(2000)).run().await;
    assert!(failed.is_err(), "the injected failure failed the first run");
    let committed_before = store.committed().len();
    assert!(
        committed_before > 0 && committed_before < N as usize,
        "checkpoints completed before the failure: {committed_before} of {N} committed"
    );

    let second = job(None);
    let handle = second.handle();
    let running = tokio::spawn(second.run());
    // Waits (at most 60 s) for every entry, then says what went missing, not only how many.
    let all = async {
        while store.committed().len() < N as usize {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(60), all).await;
    handle.stop();
    running.await.unwrap().unwrap();
    let mut got = store.committed();
    got.sort_unstable();
    let dups = got.windows(2).filter(|w| w[0] == w[1]).count();
    got.dedup();
    let missing: Vec<u64> = (0..N).filter(|i| got.binary_search(i).is_err()).collect();
    assert!(
        missing.is_empty() && dups == 0,
        "{} missing (first {:?}), {dups} duplicated",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
}
