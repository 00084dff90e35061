//! Checkpoints end to end with in-memory parts: exactly-once across many kill points, barrier
//! alignment under key_by, abort on timeout, graceful stop, restore with rescaling, and a
//! corrupt checkpoint file skipped, checkpoints while a chain is always busy.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::Arc;
use std::time::Duration;

use rivus_sdk::checkpoint::CompletedCheckpoint;
use rivus_sdk::prelude::*;
use rivus_testkit::{
    CollectingSink, SequenceSource, TransactionalSink, TxnStore, VecSource, VecSourceState,
};

fn splits(n: usize, per: usize) -> Arc<Vec<Vec<u64>>> {
    Arc::new(
        (0..n)
            .map(|s| (0..per).map(|i| (s * 1_000_000 + i) as u64).collect())
            .collect(),
    )
}

fn config(backend: &MemoryStateBackend, every_ms: u64) -> CheckpointConfig {
    CheckpointConfig::new(Duration::from_millis(every_ms), Arc::new(backend.clone()))
}

/// Runs the exactly-once job once; `kill_after` injects a failure after that many records.
async fn run_once(
    data: &Arc<Vec<Vec<u64>>>,
    backend: &MemoryStateBackend,
    store: &TxnStore<u64>,
    source_par: usize,
    sink_par: usize,
    kill_after: Option<usize>,
) -> Result<JobSummary> {
    let emitted = Arc::new(AtomicUsize::new(0));
    let job = Pipeline::new("eo")
        .batch_size(16)
        .checkpointing(config(backend, 2))
        .source("src", source_par, |i| {
            let s =
                VecSource::new(Arc::clone(data), i, source_par).paced(40, Duration::from_millis(1));
            match kill_after {
                Some(k) => s.fail_after(k, Arc::clone(&emitted)),
                None => s,
            }
        })
        .map(|v| v + 1)
        .key_by(|v| *v % 7, sink_par)
        .sink("sink", sink_par, |i| {
            TransactionalSink::new(store.clone(), i)
        })?;
    assert_eq!(job.delivery_guarantee(), DeliveryGuarantee::ExactlyOnce);
    job.run().await
}

/// Compares two sorted lists, reporting counts and a few differences rather than both lists.
fn assert_same(got: &[u64], want: &[u64]) {
    if got == want {
        return;
    }
    let mut dups = got.to_vec();
    dups.dedup();
    let duplicated = got.len() - dups.len();
    let missing: Vec<u64> = want
        .iter()
        .filter(|v| got.binary_search(v).is_err())
        .take(5)
        .copied()
        .collect();
    panic!(
        "got {} records, want {}: {duplicated} duplicated, first missing {missing:?}",
        got.len(),
        want.len()
    );
}

fn assert_exactly_input(data: &Arc<Vec<Vec<u64>>>, store: &TxnStore<u64>) {
    let committed = store.committed();
    let mut got = committed.clone();
    got.sort();
    let mut want: Vec<u64> = data.iter().flatten().map(|v| v + 1).collect();
    want.sort();
    assert_same(&got, &want);
    // Order within a split is kept (each split's records share one key stream per sink).
    for split in 0..data.len() {
        let lo = (split * 1_000_000) as u64;
        let seq: Vec<u64> = committed
            .iter()
            .copied()
            .filter(|v| *v > lo && *v <= lo + 999_999 && (*v % 7 == 3))
            .collect();
        assert!(
            seq.windows(2).all(|w| w[0] < w[1]),
            "order kept within split {split}"
        );
    }
    assert!(
        store.prepared().is_empty(),
        "no transaction left open: {:?}",
        store.prepared()
    );
}

#[tokio::test]
async fn exactly_once_across_many_kill_points() {
    let data = splits(4, 400);
    let mut restores = 0;
    for kill in [0usize, 1, 13, 150, 401, 777, 1200, 1599] {
        let backend = MemoryStateBackend::new();
        let store = TxnStore::new();
        let err = run_once(&data, &backend, &store, 2, 3, Some(kill))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("injected failure"), "{err}");
        let summary = run_once(&data, &backend, &store, 2, 3, None).await.unwrap();
        restores += summary.restored_from.is_some() as usize;
        assert_exactly_input(&data, &store);
    }
    assert!(
        restores >= 4,
        "most kill points restore from a checkpoint ({restores})"
    );
}

#[tokio::test]
async fn exactly_once_across_repeated_kills_in_one_history() {
    let data = splits(3, 500);
    let backend = MemoryStateBackend::new();
    let store = TxnStore::new();
    for kill in [100usize, 250, 40, 600, 5] {
        let _ = run_once(&data, &backend, &store, 3, 2, Some(kill))
            .await
            .unwrap_err();
    }
    run_once(&data, &backend, &store, 3, 2, None).await.unwrap();
    assert_exactly_input(&data, &store);
}

#[tokio::test]
async fn restore_with_more_and_fewer_subtasks() {
    let data = splits(6, 300);
    let backend = MemoryStateBackend::new();
    let store = TxnStore::new();
    let _ = run_once(&data, &backend, &store, 2, 2, Some(500))
        .await
        .unwrap_err();
    let _ = run_once(&data, &backend, &store, 4, 3, Some(700))
        .await
        .unwrap_err();
    let _ = run_once(&data, &backend, &store, 1, 1, Some(300))
        .await
        .unwrap_err();
    let summary = run_once(&data, &backend, &store, 3, 4, None).await.unwrap();
    assert!(summary.restored_from.is_some());
    assert_exactly_input(&data, &store);
}

/// With parallelism 4 and key_by, every completed checkpoint is a consistent cut: the records
/// the sources had emitted at the checkpoint equal the records the sinks committed for it.
#[tokio::test]
async fn barrier_alignment_gives_consistent_cuts() {
    let data = splits(4, 2000);
    let backend = MemoryStateBackend::new();
    let store = TxnStore::new();
    let job = Pipeline::new("align")
        .batch_size(32)
        .checkpointing(config(&backend, 1))
        .source("src", 4, |i| {
            VecSource::new(Arc::clone(&data), i, 4).paced(100, Duration::from_millis(1))
        })
        .key_by(|v| *v, 4)
        .sink("sink", 4, |i| TransactionalSink::new(store.clone(), i))
        .unwrap();
    job.run().await.unwrap();
    let checkpoints = backend.checkpoints();
    assert!(
        checkpoints.len() >= 5,
        "several checkpoints mid-stream: {}",
        checkpoints.len()
    );
    let per_txn: BTreeMap<(usize, u64), usize> = store.committed_txns().into_iter().collect();
    for cp in &checkpoints {
        let emitted: usize = source_positions(cp).values().sum();
        let committed: usize = per_txn
            .iter()
            .filter(|((_, c), _)| *c <= cp.checkpoint_id)
            .map(|(_, n)| n)
            .sum();
        assert_eq!(
            emitted, committed,
            "checkpoint {} is a consistent cut",
            cp.checkpoint_id
        );
    }
    assert_eq!(store.committed().len(), 8000);
}

fn source_positions(cp: &CompletedCheckpoint) -> BTreeMap<usize, usize> {
    let mut out = BTreeMap::new();
    for s in cp.operators["src"].iter().flatten() {
        let st: VecSourceState = serde_json::from_value(s.clone()).unwrap();
        out.extend(st.positions);
    }
    out
}

#[tokio::test]
async fn checkpoint_times_out_while_sink_is_stalled_then_recovers() {
    let backend = MemoryStateBackend::new();
    let sink = CollectingSink::<u64>::new();
    let control = sink.control();
    let emitted = Arc::new(AtomicU64::new(0));
    let job = Pipeline::new("timeout")
        .checkpointing(config(&backend, 20).with_timeout(Duration::from_millis(150)))
        .source("src", 1, |i| {
            SequenceSource::new(i, 1, None, Arc::clone(&emitted))
        })
        .rebalance(1)
        .sink("sink", 1, |i| sink.for_subtask(i))
        .unwrap();
    let handle = job.handle();
    control.stall();
    let running = tokio::spawn(job.run());
    // While stalled no checkpoint can complete, so after several timeouts at least one abort is
    // certain; the wait only needs to exceed the 150 ms timeout.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(
        backend.checkpoints().is_empty(),
        "nothing completes while stalled"
    );
    control.release();
    handle.stop();
    let summary = running.await.unwrap().unwrap();
    assert!(summary.checkpoints_aborted >= 1, "{summary:?}");
    assert!(summary.checkpoints_completed >= 1, "{summary:?}");
    let log = sink.log();
    assert!(
        log.iter().any(|e| e.starts_with("abort[0]")),
        "abort notified: {log:?}"
    );
    // The sequence arrived without gaps up to the stop.
    let values = sink.values();
    assert!(values.iter().enumerate().all(|(i, v)| *v == i as u64));
}

#[tokio::test]
async fn graceful_stop_takes_a_final_checkpoint_and_resumes_from_it() {
    let backend = MemoryStateBackend::new();
    let store = TxnStore::new();
    let emitted = Arc::new(AtomicU64::new(0));
    let build = || {
        Pipeline::new("stop")
            .checkpointing(config(&backend, 50))
            .source("src", 2, |i| {
                SequenceSource::new(i, 2, Some(200_000), Arc::clone(&emitted))
            })
            .sink("sink", 2, |i| TransactionalSink::new(store.clone(), i))
            .unwrap()
    };
    let job = build();
    let handle = job.handle();
    let running = tokio::spawn(job.run());
    while emitted.load(std::sync::atomic::Ordering::Relaxed) < 10_000 {
        tokio::task::yield_now().await;
    }
    handle.stop();
    let first = running.await.unwrap().unwrap();
    let after_stop = store.committed().len();
    assert!(
        after_stop >= 10_000,
        "everything emitted before the stop is committed"
    );
    assert!(store.prepared().is_empty());
    let second = build().run().await.unwrap();
    assert_eq!(second.restored_from, first.last_checkpoint);
    let mut all = store.committed();
    all.sort();
    assert_same(&all, &(0..200_000).collect::<Vec<u64>>());
}

/// A damaged newest checkpoint stops the restore, naming it (an older one would replay what
/// the transactional sink committed since); `OnDamaged::RestoreOlder` restores the one before
/// it, and the replay shows as duplicates — why it is not the default.
#[tokio::test]
async fn corrupt_newest_checkpoint_is_refused_unless_an_older_one_is_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let refusing = FsStateBackend::new(dir.path(), 5).unwrap();
    let fs = refusing
        .clone()
        .on_damaged(rivus_sdk::checkpoint::OnDamaged::RestoreOlder);
    let store = TxnStore::new();
    let data = splits(2, 3000);
    let emitted = Arc::new(AtomicUsize::new(0));
    let run = |kill: Option<usize>| {
        let fs = fs.clone();
        let store = store.clone();
        let data = Arc::clone(&data);
        let emitted = Arc::clone(&emitted);
        async move {
            Pipeline::new("fs")
                .batch_size(8)
                .checkpointing(CheckpointConfig::new(
                    Duration::from_millis(2),
                    Arc::new(fs),
                ))
                .source("src", 2, |i| {
                    let s =
                        VecSource::new(Arc::clone(&data), i, 2).paced(50, Duration::from_millis(1));
                    match kill {
                        Some(k) => s.fail_after(k, Arc::clone(&emitted)),
                        None => s,
                    }
                })
                .sink("sink", 2, |i| TransactionalSink::new(store.clone(), i))
                .unwrap()
                .run()
                .await
        }
    };
    run(Some(4000)).await.unwrap_err();
    let mut files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ckpt"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 2,
        "need two checkpoints, got {}",
        files.len()
    );
    let newest = files.last().unwrap();
    let mut bytes = std::fs::read(newest).unwrap();
    let n = bytes.len();
    bytes[n - 3] ^= 0x5a; // flip a byte of the JSON body
    std::fs::write(newest, &bytes).unwrap();
    let second_newest = FsStateBackend::read_file(&files[files.len() - 2]).unwrap();
    assert!(FsStateBackend::read_file(newest)
        .unwrap_err()
        .contains("checksum"));

    let newest_id: u64 = newest.file_stem().unwrap().to_str().unwrap()["chk-".len()..]
        .parse()
        .unwrap();
    let e = rivus_sdk::checkpoint::StateBackend::latest(&refusing, "fs")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("checkpoint {newest_id}"))
            && e.contains(&newest.display().to_string())
            && e.contains("on_damaged"),
        "{e}"
    );
    let committed_before = store.committed().len();
    let summary = run(None).await.unwrap();
    assert_eq!(summary.restored_from, Some(second_newest.checkpoint_id));
    assert!(store.committed().len() > committed_before);
    // The lost checkpoint's transactions were already committed, so restoring from an older
    // one replays them: nothing is lost, duplicates are expected.
    let mut got = store.committed();
    got.sort();
    got.dedup();
    let mut want: Vec<u64> = data.iter().flatten().copied().collect();
    want.sort();
    assert_same(&got, &want);
}

/// One job, one owner: while a job runs on a checkpoint directory, a second run of it there is
/// refused at start, naming the holder, and writes nothing; once the first has ended, the
/// directory may be taken again.
#[tokio::test]
async fn a_second_owner_of_a_checkpoint_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FsStateBackend::new(dir.path(), 3).unwrap();
    let data = splits(1, 200_000);
    let pipeline = |store: TxnStore<u64>| {
        Pipeline::new("owned")
            .checkpointing(CheckpointConfig::new(
                Duration::from_millis(20),
                Arc::new(fs.clone()),
            ))
            .source("src", 1, |i| {
                VecSource::new(Arc::clone(&data), i, 1).paced(50, Duration::from_millis(1))
            })
            .sink("sink", 1, move |i| TransactionalSink::new(store.clone(), i))
            .unwrap()
    };
    let first_store = TxnStore::new();
    let first = pipeline(first_store.clone());
    let stop = first.handle();
    let running = tokio::spawn(first.run());
    // The first job holds the directory once it has taken a checkpoint.
    while !std::fs::read_dir(dir.path())
        .unwrap()
        .any(|e| e.unwrap().file_name().to_string_lossy().ends_with(".ckpt"))
    {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let second_store = TxnStore::new();
    let err = pipeline(second_store.clone()).run().await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Owner { .. }), "{err:?}");
    assert!(!err.is_retryable());
    assert!(text.contains("job `owned`"), "{text}");
    assert!(
        text.contains(&format!("pid {}", std::process::id())),
        "{text}"
    );
    assert!(second_store.committed().is_empty());

    stop.stop();
    let summary = running.await.unwrap().unwrap();
    assert!(summary.checkpoints_completed > 0);
    // Released: the next run takes the directory and resumes from the first's checkpoint.
    let again = pipeline(second_store.clone());
    let stop = again.handle();
    stop.stop();
    let summary = again.run().await.unwrap();
    assert!(summary.restored_from.is_some(), "{summary:?}");
}

/// A job with a 30 s interval, stopped once `committed_before_stop` records are committed
/// (or, when 0, once 10 000 were emitted): the first checkpoints' trigger times after the
/// start, and whether each was the final one.
async fn first_checkpoints(
    delay: Option<Duration>,
    committed_before_stop: usize,
) -> Vec<(u64, bool)> {
    let backend = MemoryStateBackend::new();
    let store = TxnStore::new();
    let data = splits(2, 1_000_000);
    let emitted = Arc::new(AtomicUsize::new(0));
    let job = Pipeline::new("first")
        .checkpointing(config(&backend, 30_000).with_first_checkpoint_delay(delay))
        .source("src", 2, |i| {
            VecSource::new(Arc::clone(&data), i, 2)
                .paced(40, Duration::from_millis(1))
                .fail_after(usize::MAX, Arc::clone(&emitted))
        })
        .sink("sink", 2, |i| TransactionalSink::new(store.clone(), i))
        .unwrap();
    let history = job.checkpoint_history();
    let handle = job.handle();
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let running = tokio::spawn(job.run());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let done = if committed_before_stop > 0 {
            store.committed().len() >= committed_before_stop
        } else {
            emitted.load(std::sync::atomic::Ordering::Relaxed) >= 10_000
        };
        if done {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "nothing committed in 20 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    handle.stop();
    running.await.unwrap().unwrap();
    history
        .recent()
        .iter()
        .map(|r| (r.triggered_ms.saturating_sub(started), r.is_final))
        .collect()
}

#[tokio::test]
async fn the_first_checkpoint_follows_the_first_record_not_the_interval() {
    // Default: a tenth of the 30 s interval after the first record.
    let early = first_checkpoints(Some(Duration::from_secs(3)), 1).await;
    assert!(
        !early[0].1,
        "the first checkpoint is not the final one: {early:?}"
    );
    assert!(
        (2_900..10_000).contains(&early[0].0),
        "triggered 3 s after the first record, not 30 s after the start: {early:?}"
    );
    // Without it, nothing is checkpointed before the stop's final checkpoint.
    let waits = first_checkpoints(None, 0).await;
    assert_eq!(waits.len(), 1, "{waits:?}");
    assert!(waits[0].1, "only the final checkpoint: {waits:?}");
}

/// A source whose input is always ready, chained to a slow operator, never waits: the
/// checkpoint coordinator, woken on the same worker thread by the source's acknowledgement,
/// must still get to run. Before sources yielded every thousand records, a 2-second run
/// completed its first checkpoint and then none until the end of the input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_complete_while_a_busy_chain_never_waits() {
    let backend = MemoryStateBackend::new();
    let store = TxnStore::new();
    let data = splits(1, 20_000);
    let job = Pipeline::new("busy")
        .checkpointing(config(&backend, 50))
        .source("src", 1, |i| VecSource::new(Arc::clone(&data), i, 1))
        .map(|v| {
            // Blocks the worker thread, as a CPU-heavy transform does.
            std::thread::sleep(Duration::from_micros(100));
            v + 1
        })
        .sink("sink", 1, |i| TransactionalSink::new(store.clone(), i))
        .unwrap();
    let summary = job.run().await.unwrap();
    // At least 2 s of input at a 50 ms interval: 40 checkpoints if nothing else is slow.
    assert!(
        summary.checkpoints_completed >= 10,
        "checkpoints completed during a busy run: {summary:?}"
    );
    assert_exactly_input(&data, &store);
}
