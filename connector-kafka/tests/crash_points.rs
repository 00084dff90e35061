//! The exactly-once sink killed with SIGKILL at each step of a transaction's life (through
//! its transaction hook, in the `kafka-copy` process), then run again: a `read_committed`
//! reader sees every input record exactly once, and the restart took the path the crash point
//! calls for — a transaction whose checkpoint was stored but which never committed is written
//! again from its log; one that committed is not.

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output};

use rivus_testkit::services::unique_name as unique;
use rivus_testkit::services::{require, Service};

mod common;
use common::{assert_exactly_once, create_topic, produce, producer};

/// With a crash point, `kafka-copy` copies at most 20 000 records more than its transactions
/// have reached (then a record a millisecond), so the crash, at a checkpoint's step, comes
/// long before the end of the input even when a cold broker's first transaction is slow (a
/// run that ends without reaching it fails the test, naming the exit).
const RECORDS: usize = 120_000;

/// Runs `kafka-copy` at parallelism 1 from `from` to `to` with its state in `dir`.
fn copy(bootstrap: &str, from: &str, to: &str, dir: &str, crash: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kafka-copy"));
    cmd.args([bootstrap, from, to, dir, to, "1"]);
    match crash {
        Some(c) => cmd.env("KAFKA_COPY_CRASH", c),
        None => cmd.env_remove("KAFKA_COPY_CRASH"),
    };
    cmd.output().expect("kafka-copy runs")
}

fn lines_with(out: &Output, prefix: &str) -> Vec<u64> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix(prefix)?.trim().parse().ok())
        .collect()
}

/// Fills a topic, copies it with a crash at `crash`, copies again to the end; returns the
/// checkpoint the crash hit and the checkpoints the second run recovered.
async fn crash_and_rerun(bootstrap: &str, crash: &str) -> (u64, Vec<u64>) {
    let step = crash.split(':').next().unwrap();
    let (from, to) = (
        unique(&format!("crash-{step}-from")),
        unique(&format!("crash-{step}-to")),
    );
    create_topic(bootstrap, &from, 2).await;
    create_topic(bootstrap, &to, 2).await;
    let p = producer(bootstrap);
    for part in 0..2 {
        let values: Vec<Vec<u8>> = (0..RECORDS / 2)
            .map(|i| format!("r{part}-{i:06}").into_bytes())
            .collect();
        produce(&p, &from, part, &values).await;
    }
    let dir = std::env::temp_dir().join(unique("rivus-crash-points"));
    let dir = dir.to_str().unwrap().to_owned();
    let (b, f, t, d, c) = (
        bootstrap.to_owned(),
        from.clone(),
        to.clone(),
        dir.clone(),
        crash.to_owned(),
    );
    let (crashed, rerun) = tokio::task::spawn_blocking(move || {
        let crashed = copy(&b, &f, &t, &d, Some(&c));
        let rerun = copy(&b, &f, &t, &d, None);
        (crashed, rerun)
    })
    .await
    .unwrap();
    assert_eq!(
        crashed.status.signal(),
        Some(9),
        "the first run was killed at {crash}: {:?}\n{}",
        crashed.status,
        String::from_utf8_lossy(&crashed.stderr)
    );
    let hit = lines_with(&crashed, &format!("crash at {step} "));
    assert_eq!(hit.len(), 1, "one crash line: {crashed:?}");
    assert!(
        rerun.status.success(),
        "the second run completes: {}",
        String::from_utf8_lossy(&rerun.stderr)
    );
    assert_exactly_once(
        bootstrap,
        &to,
        RECORDS,
        &format!("after a crash at {crash}"),
    )
    .await;
    // The checkpoints hold references to logs, never records.
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        if e.file_name().to_string_lossy().ends_with(".ckpt") {
            let body = std::fs::read_to_string(e.path()).unwrap();
            assert!(
                !body.contains("r0-0") && !body.contains("r1-0") && body.len() < 16 * 1024,
                "a checkpoint of {} bytes holds records: {}",
                body.len(),
                &body[..body.len().min(300)]
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    (hit[0], lines_with(&rerun, "recovered "))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_before_pre_commit_loses_and_duplicates_nothing() {
    let Some(bootstrap) = require(Service::Kafka) else {
        return;
    };
    // The transaction is open with records sent: the restart aborts it, and the source
    // reads those records again from the last checkpoint.
    let (hit, recovered) = crash_and_rerun(&bootstrap, "pre-commit:2").await;
    assert!(
        !recovered.contains(&hit),
        "checkpoint {hit} never completed, yet its transaction was recovered"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_checkpoint_is_stored_recovers_the_transaction_from_its_log() {
    let Some(bootstrap) = require(Service::Kafka) else {
        return;
    };
    // Checkpoint stored, transaction not committed: only its log still has the records.
    let (hit, recovered) = crash_and_rerun(&bootstrap, "commit:2").await;
    assert!(
        recovered.contains(&hit),
        "checkpoint {hit}'s transaction is written again from its log (recovered: {recovered:?})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_during_commit_keeps_what_the_broker_committed_once() {
    let Some(bootstrap) = require(Service::Kafka) else {
        return;
    };
    // The broker committed, the sink had not recorded it: its marker says so, and the restart
    // must not write it again.
    let (hit, recovered) = crash_and_rerun(&bootstrap, "committed:2").await;
    assert!(
        !recovered.contains(&hit),
        "checkpoint {hit} committed before the crash, yet it was written again"
    );
}
