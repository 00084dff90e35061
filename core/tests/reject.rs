//! `Stream::reject_to`: an operator's rejected records go to the error policy from its own
//! task, the rest go on. Under failures and restores the exactly-once sink holds every
//! accepted record once and the dead-letter queue every rejected one (at least once, its
//! content whole); with `ErrorPolicy::Fail` the job fails naming the record's position.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rivus_sdk::error_policy::{DeadLetter, DeadLetterQueue, ErrorHandler, ErrorPolicy};
use rivus_sdk::prelude::*;
use rivus_sdk::Rejected;
use rivus_testkit::{TransactionalSink, TxnStore, VecSource};

#[derive(Debug, Default)]
struct Letters(Mutex<Vec<DeadLetter>>);

#[async_trait]
impl DeadLetterQueue for Letters {
    async fn send(&self, letter: DeadLetter) -> Result<()> {
        self.0.lock().push(letter);
        Ok(())
    }
}

/// Multiples of 7 are rejected.
fn check(v: u64) -> std::result::Result<u64, Rejected> {
    if v.is_multiple_of(7) {
        Err(Rejected {
            position: format!("check, record {v}"),
            reason: "a multiple of seven".into(),
            payload: v.to_string().into_bytes(),
        })
    } else {
        Ok(v)
    }
}

/// The job: two sources of 2 000 numbers each, multiples of 7 rejected, the rest into an
/// exactly-once sink; failing once `kill` records were emitted, when given.
fn job(
    data: &Arc<Vec<Vec<u64>>>,
    backend: &MemoryStateBackend,
    store: &TxnStore<u64>,
    letters: &Arc<Letters>,
    kill: Option<usize>,
) -> Job {
    let policy = ErrorPolicy::DeadLetter(Arc::clone(letters) as Arc<dyn DeadLetterQueue>);
    let p = Pipeline::new("reject")
        .batch_size(16)
        .checkpointing(CheckpointConfig::new(
            Duration::from_millis(5),
            Arc::new(backend.clone()),
        ));
    let emitted = Arc::new(AtomicUsize::new(0));
    let data = Arc::clone(data);
    p.source("src", 2, move |i| {
        let s = VecSource::new(Arc::clone(&data), i, 2).paced(30, Duration::from_millis(1));
        match kill {
            Some(k) => s.fail_after(k, Arc::clone(&emitted)),
            None => s,
        }
    })
    .map(check)
    .reject_to(ErrorHandler::new(policy, "check").connector("test"))
    .sink_to("out", 2, |i| TransactionalSink::new(store.clone(), i));
    p.build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_records_reach_the_dead_letter_queue_and_the_rest_the_sink_across_restores() {
    let data: Arc<Vec<Vec<u64>>> = Arc::new(
        (0..2)
            .map(|s| (0..2_000).map(|i| s * 100_000 + i).collect())
            .collect(),
    );
    let all: Vec<u64> = data.iter().flatten().copied().collect();
    for kill in [0usize, 500, 2_900] {
        let (backend, store) = (MemoryStateBackend::new(), TxnStore::new());
        let letters = Arc::new(Letters::default());
        let err = job(&data, &backend, &store, &letters, Some(kill))
            .run()
            .await
            .unwrap_err();
        assert!(err.to_string().contains("injected failure"), "{err}");
        job(&data, &backend, &store, &letters, None)
            .run()
            .await
            .unwrap();

        let mut got = store.committed();
        got.sort_unstable();
        let want: Vec<u64> = all.iter().copied().filter(|v| v % 7 != 0).collect();
        assert_eq!(got, want, "killed after {kill}: every accepted record once");
        let letters = letters.0.lock();
        let mut rejected: Vec<u64> = letters
            .iter()
            .map(|l| l.payload_text().unwrap().parse().unwrap())
            .collect();
        rejected.sort_unstable();
        rejected.dedup();
        let want: Vec<u64> = all.iter().copied().filter(|v| v % 7 == 0).collect();
        assert_eq!(
            rejected, want,
            "killed after {kill}: every rejected record, whole"
        );
        assert!(letters
            .iter()
            .all(|l| l.reason == "a multiple of seven" && l.connector == "test"));
    }
}

#[tokio::test]
async fn with_the_fail_policy_a_rejected_record_fails_the_job_naming_it() {
    let data: Arc<Vec<Vec<u64>>> = Arc::new(vec![(1..100).collect()]);
    let store = TxnStore::new();
    let p = Pipeline::new("reject-fail");
    p.source("src", 1, move |i| VecSource::new(Arc::clone(&data), i, 1))
        .map(check)
        .reject_to(ErrorHandler::new(ErrorPolicy::Fail, "check"))
        .sink_to("out", 1, |i| TransactionalSink::new(store.clone(), i));
    let err = p.build().unwrap().run().await.unwrap_err().to_string();
    assert!(
        err.contains("check, record 7") && err.contains("a multiple of seven"),
        "{err}"
    );
}
