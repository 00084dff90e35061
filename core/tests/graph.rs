//! Jobs as graphs with in-memory parts: two sources in a union, a fan-out into two
//! exactly-once sinks, a router, each under failures and restores; a stream ending in no sink
//! refused; a branch added between two runs keeping the others' state; a stalled branch
//! slowing the source with bounded buffers; the guarantee reported per sink.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rivus_sdk::prelude::*;

use rivus_testkit::{
    CollectingSink, SequenceSource, TransactionalSink, TxnStore, VecSource, VecSourceState,
};

fn splits(base: u64, n: usize, per: usize) -> Arc<Vec<Vec<u64>>> {
    Arc::new(
        (0..n)
            .map(|s| (0..per).map(|i| base + (s * 100_000 + i) as u64).collect())
            .collect(),
    )
}

fn config(backend: &MemoryStateBackend, every_ms: u64) -> CheckpointConfig {
    CheckpointConfig::new(Duration::from_millis(every_ms), Arc::new(backend.clone()))
}

fn source(
    data: &Arc<Vec<Vec<u64>>>,
    i: usize,
    par: usize,
    kill: &Option<(usize, Arc<AtomicUsize>)>,
) -> VecSource<u64> {
    let s = VecSource::new(Arc::clone(data), i, par).paced(30, Duration::from_millis(1));
    match kill {
        Some((k, emitted)) => s.fail_after(*k, Arc::clone(emitted)),
        None => s,
    }
}

/// Every record of `want` once in `store`, nothing left prepared.
fn assert_exactly(store: &TxnStore<u64>, want: impl IntoIterator<Item = u64>, what: &str) {
    let mut got = store.committed();
    got.sort_unstable();
    let mut want: Vec<u64> = want.into_iter().collect();
    want.sort_unstable();
    let distinct: BTreeSet<u64> = got.iter().copied().collect();
    assert_eq!(
        (got.len(), distinct.len()),
        (want.len(), want.len()),
        "{what}: {} records, {} distinct, want {}",
        got.len(),
        distinct.len(),
        want.len()
    );
    assert_eq!(got, want, "{what}");
    assert!(
        store.prepared().is_empty(),
        "{what}: a transaction left open"
    );
}

/// Two sources (3 and 2 subtasks) in a union, keyed over 2 sink subtasks.
fn union_job(
    a: &Arc<Vec<Vec<u64>>>,
    b: &Arc<Vec<Vec<u64>>>,
    backend: &MemoryStateBackend,
    store: &TxnStore<u64>,
    kill: Option<usize>,
) -> Result<Job> {
    let kill = kill.map(|k| (k, Arc::new(AtomicUsize::new(0))));
    let p = Pipeline::new("union")
        .batch_size(16)
        .checkpointing(config(backend, 3));
    let left = p.source("left", 3, |i| source(a, i, 3, &kill));
    let right = p.source("right", 2, |i| source(b, i, 2, &None));
    let job = left
        .union([right])
        .key_by(|v| *v % 5, 2)
        .sink("sink", 2, |i| TransactionalSink::new(store.clone(), i))?;
    assert_eq!(job.delivery_guarantee(), DeliveryGuarantee::ExactlyOnce);
    Ok(job)
}

#[tokio::test]
async fn two_sources_in_a_union_reach_an_exactly_once_sink_once_across_kill_points() {
    let (a, b) = (splits(0, 3, 300), splits(10_000_000, 2, 400));
    let want = || a.iter().chain(b.iter()).flatten().copied();
    for kill in [0usize, 7, 150, 480, 890] {
        let (backend, store) = (MemoryStateBackend::new(), TxnStore::new());
        let job = union_job(&a, &b, &backend, &store, Some(kill)).unwrap();
        let err = job.run().await.unwrap_err();
        assert!(err.to_string().contains("injected failure"), "{err}");
        let job = union_job(&a, &b, &backend, &store, None).unwrap();
        job.run().await.unwrap();
        assert_exactly(&store, want(), &format!("killed after {kill}"));
    }
    // Cancelled once a checkpoint has committed: the rerun restores from a checkpoint.
    let (backend, store) = (MemoryStateBackend::new(), TxnStore::new());
    let job = union_job(&a, &b, &backend, &store, None).unwrap();
    let handle = job.handle();
    let running = tokio::spawn(job.run());
    rivus_testkit::wait::until(
        Duration::from_secs(30),
        || async { store.committed_len() > 0 },
        || "a first commit".to_owned(),
    )
    .await;
    handle.cancel();
    let _ = running.await.unwrap();
    let job = union_job(&a, &b, &backend, &store, None).unwrap();
    let summary = job.run().await.unwrap();
    assert!(summary.restored_from.is_some(), "the rerun restored");
    assert_exactly(&store, want(), "cancelled after a commit");
}

/// One source fanned out into two exactly-once sinks (one behind a key_by), the second
/// failing after `fail_b` records once.
async fn fan_out_job(
    data: &Arc<Vec<Vec<u64>>>,
    backend: &MemoryStateBackend,
    stores: (&TxnStore<u64>, &TxnStore<u64>),
    fail_b: Option<usize>,
) -> Result<JobSummary> {
    let received = Arc::new(AtomicUsize::new(0));
    let p = Pipeline::new("fan-out")
        .batch_size(16)
        .checkpointing(config(backend, 3));
    let [a, b] = p.source("src", 2, |i| source(data, i, 2, &None)).fan_out();
    a.map(|v| v * 10)
        .sink_to("a", 2, |i| TransactionalSink::new(stores.0.clone(), i));
    b.key_by(|v| *v % 3, 3).sink_to("b", 3, |i| {
        let s = TransactionalSink::new(stores.1.clone(), i);
        match fail_b {
            Some(n) => s.fail_after(n, Arc::clone(&received)),
            None => s,
        }
    });
    let job = p.build()?;
    assert_eq!(
        job.sink_guarantees(),
        [
            ("a".to_owned(), DeliveryGuarantee::ExactlyOnce),
            ("b".to_owned(), DeliveryGuarantee::ExactlyOnce)
        ]
    );
    job.run().await
}

#[tokio::test]
async fn a_fan_out_into_two_exactly_once_sinks_commits_the_same_checkpoints() {
    let data = splits(0, 4, 400);
    let input = || data.iter().flatten().copied();
    for fail in [1usize, 200, 900] {
        let backend = MemoryStateBackend::new();
        let (sa, sb) = (TxnStore::new(), TxnStore::new());
        let err = fan_out_job(&data, &backend, (&sa, &sb), Some(fail))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("injected failure"), "{err}");
        // Branch `a` did not fail, yet it commits only what a completed checkpoint covers.
        let checkpoints: BTreeSet<u64> = sa.committed_txns().iter().map(|((_, c), _)| *c).collect();
        let newest = backend.checkpoints().iter().map(|c| c.checkpoint_id).max();
        assert!(
            checkpoints.iter().all(|c| Some(*c) <= newest),
            "a commits no checkpoint that did not complete: {checkpoints:?}, newest {newest:?}"
        );
        fan_out_job(&data, &backend, (&sa, &sb), None)
            .await
            .unwrap();
        assert_exactly(&sa, input().map(|v| v * 10), "branch a");
        assert_exactly(&sb, input(), "branch b");
        // Both branches committed their records under the same checkpoints.
        let ids = |s: &TxnStore<u64>| -> BTreeSet<u64> {
            s.committed_txns().iter().map(|((_, c), _)| *c).collect()
        };
        assert_eq!(ids(&sa), ids(&sb), "the same checkpoints committed in both");
    }
}

#[tokio::test]
async fn a_router_sends_each_record_to_every_route_it_matches() {
    let data = splits(0, 2, 500);
    let (even, threes, rest) = (TxnStore::new(), TxnStore::new(), TxnStore::new());
    let backend = MemoryStateBackend::new();
    let p = Pipeline::new("route")
        .batch_size(8)
        .checkpointing(config(&backend, 5));
    let routes = p.source("src", 2, |i| source(&data, i, 2, &None)).route(
        &["even", "threes", "unmatched"],
        |v: &u64| {
            let mut r = Routes::none();
            if v.is_multiple_of(2) {
                r = r.with(0);
            }
            if v.is_multiple_of(3) {
                r = r.with(1);
            }
            if r.is_empty() && !v.is_multiple_of(5) {
                r = r.with(2);
            }
            r
        },
    );
    let [e, t, u]: [Stream<u64>; 3] = routes.try_into().unwrap();
    e.sink_to("even", 1, |i| TransactionalSink::new(even.clone(), i));
    t.sink_to("threes", 2, |i| TransactionalSink::new(threes.clone(), i));
    u.sink_to("unmatched", 1, |i| TransactionalSink::new(rest.clone(), i));
    p.build().unwrap().run().await.unwrap();
    let all: Vec<u64> = data.iter().flatten().copied().collect();
    assert_exactly(&even, all.iter().copied().filter(|v| v % 2 == 0), "even");
    assert_exactly(
        &threes,
        all.iter().copied().filter(|v| v % 3 == 0),
        "threes",
    );
    assert_exactly(
        &rest,
        all.iter()
            .copied()
            .filter(|v| v % 2 != 0 && v % 3 != 0 && v % 5 != 0),
        "unmatched",
    );
}

#[test]
fn a_stream_ending_in_no_sink_is_refused_naming_it() {
    let p = Pipeline::new("open");
    let [a, _b] = p
        .source("orders", 1, |i| {
            SequenceSource::new(i, 1, Some(10), Arc::default())
        })
        .fan_out();
    a.sink_to("out", 1, |i| CollectingSink::<u64>::new().for_subtask(i));
    let err = p.build().unwrap_err().to_string();
    assert!(
        err.contains("branch 2 of the stream of source `orders` ends in no sink"),
        "{err}"
    );

    let p = Pipeline::new("none");
    p.source("orders", 1, |i| {
        SequenceSource::new(i, 1, Some(10), Arc::default())
    })
    .discard();
    let err = p.build().unwrap_err().to_string();
    assert!(err.contains("the job has no sink"), "{err}");
}

/// `src` → `a`, then (second run) `src` → fan-out → `a` and a new `b`.
async fn growing_job(
    data: &Arc<Vec<Vec<u64>>>,
    backend: &MemoryStateBackend,
    a: &TxnStore<u64>,
    b: Option<&TxnStore<u64>>,
    kill: Option<usize>,
) -> Result<JobSummary> {
    let kill = kill.map(|k| (k, Arc::new(AtomicUsize::new(0))));
    let p = Pipeline::new("growing")
        .batch_size(16)
        .checkpointing(config(backend, 3));
    let s = p.source("src", 2, |i| source(data, i, 2, &kill));
    match b {
        None => s.sink_to("a", 2, |i| TransactionalSink::new(a.clone(), i)),
        Some(b) => {
            let [x, y] = s.fan_out();
            x.sink_to("a", 2, |i| TransactionalSink::new(a.clone(), i));
            y.sink_to("b", 1, |i| TransactionalSink::new(b.clone(), i));
        }
    }
    p.build()?.run().await
}

#[tokio::test]
async fn a_branch_added_between_two_runs_keeps_the_state_of_the_others() {
    let data = splits(0, 2, 600);
    let backend = MemoryStateBackend::new();
    let (a, b) = (TxnStore::new(), TxnStore::new());
    growing_job(&data, &backend, &a, None, Some(700))
        .await
        .unwrap_err();
    let summary = growing_job(&data, &backend, &a, Some(&b), None)
        .await
        .unwrap();
    let restored = summary.restored_from.expect("the second run restored");
    // The records the restored checkpoint covers: what the source had read by then.
    let cp = backend
        .checkpoints()
        .into_iter()
        .find(|c| c.checkpoint_id == restored)
        .unwrap();
    let covered: usize = cp.operators["src"]
        .iter()
        .flatten()
        .map(|s| {
            let st: VecSourceState = serde_json::from_value(s.clone()).unwrap();
            st.positions.values().sum::<usize>()
        })
        .sum();
    assert!(covered > 0, "the first run got past a checkpoint");
    // The source resumed where the checkpoint left it: `a` holds every record once, and the
    // new branch only what was read after the restore.
    assert_exactly(&a, data.iter().flatten().copied(), "branch a");
    assert_eq!(
        b.committed_len(),
        1200 - covered,
        "the new branch starts at the restore"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_branch_slows_the_source_and_buffers_stay_bounded() {
    let emitted = Arc::new(AtomicU64::new(0));
    let (fast, slow) = (CollectingSink::<u64>::new(), CollectingSink::<u64>::new());
    let control = slow.control();
    control.stall();
    let (batch, capacity) = (128usize, 4usize);
    let p = Pipeline::new("stall")
        .batch_size(batch)
        .channel_capacity(capacity);
    let [a, b] = p
        .source("src", 1, |i| {
            SequenceSource::new(i, 1, None, Arc::clone(&emitted))
        })
        .fan_out();
    a.sink_to("fast", 1, |i| fast.for_subtask(i));
    b.rebalance(1).sink_to("slow", 1, |i| slow.for_subtask(i));
    let job = p.build().unwrap();
    assert_eq!(
        job.sink_guarantees()
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>(),
        ["fast", "slow"]
    );
    let handle = job.handle();
    let running = tokio::spawn(job.run());
    let last = rivus_testkit::wait::until_still(&emitted, Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let held = emitted.load(Ordering::Relaxed);
    assert_eq!(held, last, "the source emitted while a branch was stalled");
    let bound = ((capacity + 3) * batch + 1024) as u64;
    assert!(held <= bound, "{held} records buffered, bound {bound}");
    let fast_got = fast.values().len() as u64;
    assert!(
        fast_got <= bound,
        "the fast branch waited for the slow one ({fast_got} records, bound {bound})"
    );
    control.release();
    handle.stop();
    running.await.unwrap().unwrap();
    let (f, s) = (fast.values(), slow.values());
    assert_eq!(f.len(), s.len(), "both branches got every record");
    assert!(f.iter().enumerate().all(|(i, v)| *v == i as u64));
}

#[tokio::test]
async fn each_sink_reports_its_own_guarantee() {
    let backend = MemoryStateBackend::new();
    let store = TxnStore::<u64>::new();
    let collected = CollectingSink::<u64>::new();
    let p = Pipeline::new("mixed").checkpointing(config(&backend, 5));
    let [a, b] = p
        .source("src", 1, |i| {
            SequenceSource::new(i, 1, Some(100), Arc::default())
        })
        .fan_out();
    a.sink_to("exact", 1, |i| TransactionalSink::new(store.clone(), i));
    b.sink_to("plain", 1, |i| collected.for_subtask(i));
    let job = p.build().unwrap();
    assert_eq!(
        job.sink_guarantees(),
        [
            ("exact".to_owned(), DeliveryGuarantee::ExactlyOnce),
            ("plain".to_owned(), DeliveryGuarantee::AtLeastOnce)
        ]
    );
    assert_eq!(job.delivery_guarantee(), DeliveryGuarantee::AtLeastOnce);
    job.run().await.unwrap();
    assert_eq!(store.committed_len(), 100);
    assert_eq!(collected.values().len(), 100);
}
