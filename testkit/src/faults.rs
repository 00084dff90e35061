//! Network and server faults under a running job: a paced, checkpointed sequence job writes
//! into a connector's sink ([`sink_under_fault`]), or a job reads through a connector's source
//! while the test keeps writing to the server ([`source_under_fault`]), via a [`FaultProxy`]
//! in front of the real server, under a [`Supervisor`]; a [`Fault`] is
//! applied mid-stream; the run measures how long the job took to make progress again and
//! hands the caller what it must find at the destination.
//!
//! Put these tests alone in their own test file when they restart a server
//! ([`Fault::ServerRestart`]): cargo runs test binaries one after another.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rivus_sdk::checkpoint::{CheckpointConfig, MemoryStateBackend};
use rivus_sdk::prelude::*;

use crate::fault_proxy::FaultProxy;

/// A fault applied once the job has made progress.
#[derive(Debug, Clone)]
pub enum Fault {
    /// Nothing passes the proxy for this long (connections stay open).
    Blackhole(Duration),
    /// Every connection through the proxy is reset this many times, this far apart.
    Resets {
        /// Time between two resets.
        every: Duration,
        /// Resets in all.
        times: u32,
    },
    /// Every chunk through the proxy is delayed (each way) for a while.
    Latency {
        /// The delay (jitter: a tenth of it).
        delay: Duration,
        /// How long the latency stays on.
        lasting: Duration,
    },
    /// The server is stopped and started again (`dev/services` name), down for a second.
    ServerRestart(&'static str),
}

impl Fault {
    /// The faults of the fault table: a blackhole of `blackhole`, resets every 2 s (3 times),
    /// 200 ms latency for 5 s, and a restart of `service`.
    pub fn table(blackhole: Duration, service: &'static str) -> Vec<Fault> {
        vec![
            Fault::Blackhole(blackhole),
            Fault::Resets {
                every: Duration::from_secs(2),
                times: 3,
            },
            Fault::Latency {
                delay: Duration::from_millis(200),
                lasting: Duration::from_secs(5),
            },
            Fault::ServerRestart(service),
        ]
    }

    /// A short name for reports: `blackhole 30s`, `resets 3x2s`, `latency 200ms`, `restart`.
    pub fn name(&self) -> String {
        match self {
            Fault::Blackhole(d) => format!("blackhole {}s", d.as_secs()),
            Fault::Resets { every, times } => format!("resets {times}x{}s", every.as_secs()),
            Fault::Latency { delay, .. } => format!("latency {}ms", delay.as_millis()),
            Fault::ServerRestart(_) => "server restart".into(),
        }
    }

    /// The blackhole length for fault tests: `RIVUS_FAULT_BLACKHOLE_SECS` (the fault table's
    /// runs use 30), else 5 s so that `dev/test` stays short.
    pub fn blackhole_from_env() -> Duration {
        Duration::from_secs(
            std::env::var("RIVUS_FAULT_BLACKHOLE_SECS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(5),
        )
    }

    async fn apply(&self, proxy: &FaultProxy) {
        match self {
            Fault::Blackhole(d) => {
                proxy.set_blackhole(true);
                tokio::time::sleep(*d).await;
                proxy.set_blackhole(false);
            }
            Fault::Resets { every, times } => {
                for _ in 0..*times {
                    proxy.reset_all();
                    tokio::time::sleep(*every).await;
                }
            }
            Fault::Latency { delay, lasting } => {
                proxy.set_latency(*delay, *delay / 10);
                tokio::time::sleep(*lasting).await;
                proxy.clear();
            }
            Fault::ServerRestart(service) => {
                crate::restart::bounce(service, Duration::from_secs(1)).await;
            }
        }
    }
}

/// What one fault run found.
#[derive(Debug, Clone)]
pub struct FaultRun {
    /// The fault's name.
    pub fault: String,
    /// From the end of the fault to the next record at the destination.
    pub recovered_after: Duration,
    /// Restarts the supervisor made.
    pub restarts: u32,
    /// Records the source emitted: every value of `0..emitted`, each once (replays after a
    /// restart not counted).
    pub emitted: u64,
}

impl FaultRun {
    /// One line for the fault table.
    pub fn report(&self, connector: &str) -> String {
        format!(
            "FAULT {connector} | {} | ok: nothing lost | recovered after {:.1}s | {} restart(s) | {} records",
            self.fault,
            self.recovered_after.as_secs_f64(),
            self.restarts,
            self.emitted
        )
    }
}

/// The restart strategy of fault runs: 200 ms growing to 2 s, at most 60 in a row.
fn strategy() -> RestartStrategy {
    RestartStrategy::ExponentialDelay {
        initial: Duration::from_millis(200),
        max: Duration::from_secs(2),
        multiplier: 2.0,
        jitter: 0.1,
        reset_after: Duration::from_secs(60),
        max_attempts: Some(60),
    }
}

fn checkpoints(backend: &MemoryStateBackend) -> CheckpointConfig {
    CheckpointConfig::new(Duration::from_millis(500), Arc::new(backend.clone()))
        .with_timeout(Duration::from_secs(300))
}

/// Polls `delivered()` until it passes `n`; panics when the job ended or after the deadline.
async fn wait_past<D, DF, R>(
    delivered: &D,
    running: &tokio::task::JoinHandle<R>,
    n: u64,
    deadline: Instant,
    what: &str,
) -> u64
where
    D: Fn() -> DF,
    DF: Future<Output = u64>,
{
    loop {
        let got = delivered().await;
        if got > n {
            return got;
        }
        assert!(
            !running.is_finished(),
            "{what}: the job ended (at {got} delivered)"
        );
        assert!(
            Instant::now() < deadline,
            "{what}: stuck at {got} delivered"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits for 200 records at the destination, applies `fault`, and returns the time from its
/// end to the next record.
async fn through_fault<D, DF, R>(
    proxy: &FaultProxy,
    fault: &Fault,
    delivered: &D,
    running: &tokio::task::JoinHandle<R>,
    deadline: Instant,
) -> Duration
where
    D: Fn() -> DF,
    DF: Future<Output = u64>,
{
    wait_past(delivered, running, 200, deadline, "before the fault").await;
    fault.apply(proxy).await;
    let ended = Instant::now();
    let at_end = delivered().await;
    wait_past(delivered, running, at_end, deadline, "after the fault").await;
    ended.elapsed()
}

/// Stops the job gracefully; panics when it failed or took more than two minutes.
async fn stop(
    handle: &JobHandle,
    running: tokio::task::JoinHandle<Result<JobSummary>>,
    name: &str,
    fault: &Fault,
) -> JobSummary {
    handle.stop();
    tokio::time::timeout(Duration::from_secs(120), running)
        .await
        .expect("the job stops within two minutes")
        .expect("the job task")
        .unwrap_or_else(|e| panic!("{name} under {}: the job failed: {e}", fault.name()))
}

/// Runs a sequence job (`rate` records per second, checkpoints every 500 ms, restarts after
/// 200 ms growing to 2 s) into the sink `sink()` — which reaches its server through `proxy` —,
/// applies `fault` once `delivered()` (a count at the destination) passed 200, waits for the
/// destination to grow again and for a restarted job to emit again everything the failed
/// attempt had emitted, runs two more seconds and stops gracefully. Panics when the job fails
/// or stalls; the caller then checks the destination against `0..emitted`.
pub async fn sink_under_fault<S, MS, D, DF>(
    name: &str,
    proxy: &FaultProxy,
    fault: Fault,
    rate: u64,
    sink: MS,
    delivered: D,
) -> FaultRun
where
    S: SinkFunction<u64> + 'static,
    MS: Fn() -> S + Clone + Send + 'static,
    D: Fn() -> DF,
    DF: Future<Output = u64>,
{
    let backend = MemoryStateBackend::new();
    let emitted = Arc::new(AtomicU64::new(0));
    let current = Arc::new(AtomicU64::new(0));
    let build = {
        let (name, emitted, current) =
            (name.to_owned(), Arc::clone(&emitted), Arc::clone(&current));
        move || {
            let sink = sink.clone();
            let job = Pipeline::new(name.as_str())
                .checkpointing(checkpoints(&backend))
                .restart_strategy(strategy())
                .source("seq", 1, |i| {
                    crate::SequenceSource::new(i, 1, None, Arc::default())
                        .paced(rate)
                        .track_next(Arc::clone(&emitted))
                        .track_current(Arc::clone(&current))
                })
                .sink("sink", 1, move |_| sink());
            async move { job }
        }
    };
    let supervisor = Supervisor::new(build).await.expect("the job builds");
    let handle = supervisor.handle();
    let completed = supervisor.completed_checkpoints();
    let running = tokio::spawn(supervisor.run());
    let deadline = Instant::now() + Duration::from_secs(120);
    let recovered_after = through_fault(proxy, &fault, &delivered, &running, deadline).await;
    // The destination grows while a failing attempt still flushes what it had; a restarted
    // job then replays from its checkpoint what the failed attempt emitted after it (an
    // exactly-once sink rolled that back). Stopped before it caught up, the job would rightly
    // end short of `emitted`: wait for two checkpoints completed after the fault (a healthy
    // attempt) and for the running attempt to have emitted everything.
    let after = completed.latest().unwrap_or(0) + 2;
    while completed.latest().unwrap_or(0) < after
        || current.load(Ordering::SeqCst) < emitted.load(Ordering::SeqCst)
    {
        assert!(
            !running.is_finished(),
            "{name} under {}: the job ended",
            fault.name()
        );
        assert!(
            Instant::now() < deadline,
            "{name} under {}: the restarted job did not catch up (at {} of {})",
            fault.name(),
            current.load(Ordering::SeqCst),
            emitted.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let summary = stop(&handle, running, name, &fault).await;
    FaultRun {
        fault: fault.name(),
        recovered_after,
        restarts: summary.restarts,
        emitted: emitted.load(Ordering::SeqCst),
    }
}

/// What a source fault run found: the run, and what the job received.
#[derive(Debug, Clone)]
pub struct SourceFaultRun {
    /// Fault, recovery time, restarts, and `emitted`: the records written to the server
    /// (`0..emitted`).
    pub run: FaultRun,
    /// Records received more than once (at-least-once sources, restarts).
    pub duplicates: usize,
}

/// Runs a job reading through `source()` — which reaches its server through `proxy` — into a
/// collecting sink (checkpoints every 500 ms, restarts after 200 ms growing to 2 s), while
/// `produce(from, to)` writes the records `from..to` to the server directly, 100 every 50 ms.
/// Applies `fault` once 200 arrived, waits for the next record after it, produces two more
/// seconds, then waits until every record produced arrived and stops the job gracefully.
/// Panics when the job fails, stalls, or loses a record.
pub async fn source_under_fault<S, MS, P, PF>(
    name: &str,
    proxy: &FaultProxy,
    fault: Fault,
    source: MS,
    produce: P,
) -> SourceFaultRun
where
    S: SourceFunction<Out = u64> + 'static,
    MS: Fn() -> S + Clone + Send + 'static,
    P: Fn(u64, u64) -> PF + Send + Sync + 'static,
    PF: Future<Output = ()> + Send,
{
    let backend = MemoryStateBackend::new();
    let collected = crate::CollectingSink::<u64>::new();
    let build = {
        let (name, collected) = (name.to_owned(), collected.clone());
        move || {
            let (source, collected) = (source.clone(), collected.clone());
            let job = Pipeline::new(name.as_str())
                .checkpointing(checkpoints(&backend))
                .restart_strategy(strategy())
                .source("src", 1, move |_| source())
                .sink("collect", 1, move |_| collected.clone());
            async move { job }
        }
    };
    let produced = Arc::new(AtomicU64::new(0));
    let producing = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let producer = {
        let (produced, producing) = (Arc::clone(&produced), Arc::clone(&producing));
        tokio::spawn(async move {
            while producing.load(Ordering::SeqCst) {
                let from = produced.load(Ordering::SeqCst);
                produce(from, from + 100).await;
                produced.store(from + 100, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let supervisor = Supervisor::new(build).await.expect("the job builds");
    let handle = supervisor.handle();
    let running = tokio::spawn(supervisor.run());
    let distinct = || {
        let c = collected.clone();
        async move {
            let mut v = c.values();
            v.sort_unstable();
            v.dedup();
            v.len() as u64
        }
    };
    let deadline = Instant::now() + Duration::from_secs(180);
    let recovered_after = through_fault(proxy, &fault, &distinct, &running, deadline).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    producing.store(false, Ordering::SeqCst);
    producer.await.expect("the producer");
    let n = produced.load(Ordering::SeqCst);
    wait_past(&distinct, &running, n - 1, deadline, "catching up").await;
    let summary = stop(&handle, running, name, &fault).await;
    let mut values = collected.values();
    let total = values.len();
    values.sort_unstable();
    values.dedup();
    assert!(
        values == (0..n).collect::<Vec<_>>(),
        "{name} under {}: {} distinct of {n} records received",
        fault.name(),
        values.len()
    );
    SourceFaultRun {
        run: FaultRun {
            fault: fault.name(),
            recovered_after,
            restarts: summary.restarts,
            emitted: n,
        },
        duplicates: total - values.len(),
    }
}
