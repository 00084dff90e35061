//! The S3 checkpoint store against a real S3-compatible server (SeaweedFS from
//! `dev/services up s3`): checkpoints written, retained and restored, a damaged one refused by name,
//! one owner per job through the lease, a lease that ran out taken over and its old holder
//! fenced, and a job resuming from the store after a stop.

use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::{path::Path, ObjectStore, ObjectStoreExt, PutPayload};
use rivus_sdk::checkpoint::{CompletedCheckpoint, Holder, StateBackend};
use rivus_sdk::prelude::*;
use rivus_state_s3::{S3Config, S3StateBackend};
use rivus_testkit::services::{require, s3_credentials, unique_name, Service};
use rivus_testkit::{TransactionalSink, TxnStore, VecSource};

fn config(endpoint: &str, prefix: &str) -> S3Config {
    let (bucket, key, secret) = s3_credentials();
    S3Config::new(&format!("s3://{bucket}/{prefix}"))
        .unwrap()
        .endpoint(endpoint)
        .credentials(key, secret)
}

fn raw_client(endpoint: &str) -> object_store::aws::AmazonS3 {
    let (bucket, key, secret) = s3_credentials();
    object_store::aws::AmazonS3Builder::new()
        .with_endpoint(endpoint)
        .with_allow_http(true)
        .with_region("us-east-1")
        .with_bucket_name(bucket)
        .with_access_key_id(key)
        .with_secret_access_key(secret)
        .build()
        .unwrap()
}

fn checkpoint(job: &str, id: u64) -> CompletedCheckpoint {
    CompletedCheckpoint {
        job: job.into(),
        checkpoint_id: id,
        timestamp_ms: id,
        operators: [(
            "src".to_owned(),
            vec![Some(serde_json::json!({ "at": id }))],
        )]
        .into_iter()
        .collect(),
    }
}

fn holder(worker: &str) -> Holder {
    Holder {
        worker: Some(worker.into()),
        ..Holder::this_process("j", None)
    }
}

#[tokio::test]
async fn checkpoints_are_kept_restored_and_a_damaged_one_refused_by_name() {
    let Some(endpoint) = require(Service::S3) else {
        return;
    };
    let prefix = unique_name("ckpt");
    let backend = S3StateBackend::new(config(&endpoint, &prefix).retain(3)).unwrap();
    assert!(backend.latest("j").await.unwrap().is_none());
    for id in 1..=7 {
        assert!(backend.store(&checkpoint("j", id)).await.unwrap() > 0);
    }
    let raw = raw_client(&endpoint);
    let mut names: Vec<String> = {
        use futures::TryStreamExt;
        raw.list(Some(&Path::from(prefix.as_str())))
            .map_ok(|o| o.location.filename().unwrap().to_owned())
            .try_collect()
            .await
            .unwrap()
    };
    names.sort();
    assert_eq!(
        names,
        [5, 6, 7].map(|i| format!("chk-{i:020}.ckpt")),
        "the newest 3 are kept"
    );
    assert_eq!(backend.latest("j").await.unwrap(), Some(checkpoint("j", 7)));
    assert!(backend.latest("other").await.unwrap().is_none());

    // A torn copy of the newest: refused by name; skipped for the one before it only when
    // asked.
    let newest = Path::from(format!("{prefix}/chk-{:020}.ckpt", 7));
    let good = raw.get(&newest).await.unwrap().bytes().await.unwrap();
    raw.put(&newest, PutPayload::from(good[..good.len() - 5].to_vec()))
        .await
        .unwrap();
    let e = backend.latest("j").await.unwrap_err().to_string();
    assert!(
        e.contains("checkpoint 7") && e.contains(newest.as_ref()),
        "{e}"
    );
    let older = S3StateBackend::new(
        config(&endpoint, &prefix)
            .retain(3)
            .on_damaged(rivus_sdk::checkpoint::OnDamaged::RestoreOlder),
    )
    .unwrap();
    assert_eq!(older.latest("j").await.unwrap(), Some(checkpoint("j", 6)));
    // The job goes on from 6, so checkpoint 7 is written again over the damaged object.
    backend.store(&checkpoint("j", 7)).await.unwrap();
    assert_eq!(backend.latest("j").await.unwrap(), Some(checkpoint("j", 7)));
    // An intact checkpoint of that id is another writer's: refused.
    let e = backend.store(&checkpoint("j", 7)).await.unwrap_err();
    assert!(matches!(e, Error::Owner { .. }), "{e}");
}

#[tokio::test]
async fn one_owner_at_a_time_and_a_lease_that_ran_out_is_taken_over_and_fenced() {
    let Some(endpoint) = require(Service::S3) else {
        return;
    };
    let prefix = unique_name("lease");
    let lease = Duration::from_secs(3);
    // Two processes of one job, on two machines: two backends on one prefix.
    let a = S3StateBackend::new(config(&endpoint, &prefix).lease(lease)).unwrap();
    let b = S3StateBackend::new(config(&endpoint, &prefix).lease(lease)).unwrap();

    let held = a.lock(&holder("a")).await.unwrap();
    let e = b.lock(&holder("b")).await.unwrap_err();
    let text = e.to_string();
    assert!(
        matches!(e, Error::Owner { .. }) && !e.is_retryable(),
        "{e:?}"
    );
    assert!(text.contains("held by job `j` worker `a`"), "{text}");
    assert!(
        text.contains(&format!("pid {}", std::process::id())),
        "{text}"
    );
    // While renewed, the lease outlives its length: still refused after two of them.
    tokio::time::sleep(lease * 2).await;
    b.lock(&holder("b")).await.unwrap_err();
    a.store(&checkpoint("j", 1)).await.unwrap();

    // A graceful end gives the store back at once.
    held.release().await;
    let held_b = b.lock(&holder("b")).await.unwrap();
    b.store(&checkpoint("j", 2)).await.unwrap();

    // b dies without letting go (its renewal stops): a waits out the lease, then takes over.
    drop(held_b);
    let e = a.lock(&holder("a")).await.unwrap_err();
    assert!(e.to_string().contains("worker `b`"), "{e}");
    let t0 = Instant::now();
    let _held_a = loop {
        match a.lock(&holder("a")).await {
            Ok(h) => break h,
            Err(e) => {
                assert!(t0.elapsed() < lease * 3, "not taken over: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    assert!(
        t0.elapsed() < lease + Duration::from_secs(1),
        "{:?}",
        t0.elapsed()
    );
    // b, a zombie now, can no longer write a checkpoint; a can.
    let e = b.store(&checkpoint("j", 3)).await.unwrap_err();
    assert!(matches!(e, Error::Owner { .. }), "{e}");
    assert!(e.to_string().contains("not writing checkpoint 3"), "{e}");
    a.store(&checkpoint("j", 3)).await.unwrap();
    assert_eq!(a.latest("j").await.unwrap(), Some(checkpoint("j", 3)));
}

#[tokio::test]
async fn a_job_resumes_from_the_object_store_exactly_once() {
    let Some(endpoint) = require(Service::S3) else {
        return;
    };
    let prefix = unique_name("job");
    let data: Arc<Vec<Vec<u64>>> = Arc::new(
        (0..2)
            .map(|s| (0..20_000).map(|i| (s * 1_000_000 + i) as u64).collect())
            .collect(),
    );
    let store = TxnStore::new();
    let run = |stop_early: bool| {
        // A fresh backend each time: as a worker restarted on another machine.
        let backend = S3StateBackend::new(config(&endpoint, &prefix)).unwrap();
        let job = Pipeline::new("s3-job")
            .batch_size(16)
            .checkpointing(CheckpointConfig::new(
                Duration::from_millis(50),
                Arc::new(backend),
            ))
            .source("src", 2, |i| {
                VecSource::new(Arc::clone(&data), i, 2).paced(100, Duration::from_millis(1))
            })
            .sink("sink", 2, |i| TransactionalSink::new(store.clone(), i))
            .unwrap();
        let handle = job.handle();
        let store = store.clone();
        async move {
            if stop_early {
                let watcher = tokio::spawn(async move {
                    while store.committed().len() < 4_000 {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    handle.stop();
                });
                let summary = job.run().await;
                watcher.abort();
                summary
            } else {
                job.run().await
            }
        }
    };
    let first = run(true).await.unwrap();
    assert!(first.checkpoints_completed > 0);
    let part = store.committed().len();
    assert!(part < 40_000, "stopped mid-stream ({part})");
    let second = run(false).await.unwrap();
    assert_eq!(second.restored_from, first.last_checkpoint);
    let mut got = store.committed();
    got.sort();
    let mut want: Vec<u64> = data.iter().flatten().copied().collect();
    want.sort();
    assert_eq!(got, want, "every record exactly once across the restart");
}

/// A running job whose lease another process takes over (here: the lease object overwritten
/// with another holder, as after a stall past the lease) stops checkpointing and ends with
/// `Error::Owner`, instead of running on beside the new owner.
#[tokio::test]
async fn a_job_that_lost_its_lease_ends() {
    let Some(endpoint) = require(Service::S3) else {
        return;
    };
    let prefix = unique_name("fenced");
    let backend =
        S3StateBackend::new(config(&endpoint, &prefix).lease(Duration::from_secs(3))).unwrap();
    let data: Arc<Vec<Vec<u64>>> = Arc::new(vec![(0..1_000_000).collect()]);
    let store = TxnStore::new();
    let job = Pipeline::new("fenced")
        .checkpointing(CheckpointConfig::new(
            Duration::from_millis(100),
            Arc::new(backend),
        ))
        .source("src", 1, |i| {
            VecSource::new(Arc::clone(&data), i, 1).paced(50, Duration::from_millis(1))
        })
        .sink("sink", 1, |i| TransactionalSink::new(store.clone(), i))
        .unwrap();
    let running = tokio::spawn(job.run());
    let raw = raw_client(&endpoint);
    let lease = Path::from(format!("{prefix}/_owner.json"));
    let deadline = Instant::now() + Duration::from_secs(30);
    while store.committed().is_empty() {
        assert!(
            !running.is_finished(),
            "the job ended early: {:?}",
            running.await
        );
        assert!(Instant::now() < deadline, "the job checkpoints");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let other = serde_json::json!({
        "holder": holder("other"),
        "expires_ms": u64::MAX / 2,
    });
    raw.put(&lease, PutPayload::from(other.to_string().into_bytes()))
        .await
        .unwrap();
    let taken = Instant::now();
    let err = tokio::time::timeout(Duration::from_secs(20), running)
        .await
        .expect("the job ends once its lease is gone")
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, Error::Owner { .. }), "{err:?}");
    assert!(err.to_string().contains("lost its lease"), "{err}");
    assert!(
        taken.elapsed() < Duration::from_secs(5),
        "{:?}",
        taken.elapsed()
    );
    // The other holder's lease stays.
    let now = raw.get(&lease).await.unwrap().bytes().await.unwrap();
    assert!(String::from_utf8_lossy(&now).contains("other"));
}
