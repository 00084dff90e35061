//! [`SourceSuite`]: the cases every source must pass, against any [`SourceExternal`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use rivus_core::checkpoint::{CheckpointConfig, MemoryStateBackend};
use rivus_core::error_policy::{DeadLetter, DeadLetterQueue, ErrorPolicy};
use rivus_core::prelude::*;

use super::observed::{LifecycleLog, ObservedSource};
use super::records::{test_record, verify};
use super::{failure, SuiteFailure, ARRIVAL_TIMEOUT};
use crate::{TransactionalSink, TxnStore};
use std::sync::atomic::AtomicUsize;

/// How a suite drives one source connector and its external system.
#[async_trait]
pub trait SourceExternal: Send + Sync {
    /// The connector under test.
    type Source: SourceFunction + 'static;

    /// Creates a fresh, empty external resource (a topic, a queue, a key) with `splits` splits.
    async fn prepare(&mut self, splits: usize) -> Result<()>;

    /// Appends `records` to `split`, in order. Each record is a test string; write it as the
    /// payload the source decodes back into the same string.
    async fn write(&mut self, split: usize, records: &[String]) -> Result<()>;

    /// Appends a record the source cannot decode to `split`, or returns `false` when the
    /// connector has no notion of a bad record (the bad-record cases are then skipped).
    async fn write_bad(&mut self, _split: usize) -> Result<bool> {
        Ok(false)
    }

    /// Creates subtask `subtask` of `parallelism` reading the prepared resource without end
    /// (until stopped), sending bad records to `policy`.
    fn create_source(
        &self,
        subtask: usize,
        parallelism: usize,
        policy: ErrorPolicy,
    ) -> Self::Source;

    /// The test string a record of the source carries.
    fn to_test_record(record: &<Self::Source as SourceFunction>::Out) -> String;
}

/// Runs the source cases against one [`SourceExternal`].
pub struct SourceSuite<C> {
    ctx: C,
    per_split: usize,
    interval: Duration,
    arrival_timeout: Duration,
}

/// A dead-letter queue keeping letters in memory.
#[derive(Debug, Default, Clone)]
struct MemoryDlq(Arc<std::sync::Mutex<Vec<DeadLetter>>>);

#[async_trait]
impl DeadLetterQueue for MemoryDlq {
    async fn send(&self, letter: DeadLetter) -> Result<()> {
        self.0.lock().unwrap().push(letter);
        Ok(())
    }
}

struct RunOutcome {
    /// Everything committed into the case's store so far (all runs of the case).
    committed: Vec<String>,
    result: Result<JobSummary>,
    lifecycle: LifecycleLog,
}

fn distinct(v: &[String]) -> usize {
    v.iter().collect::<std::collections::HashSet<_>>().len()
}

impl<C: SourceExternal> SourceSuite<C> {
    /// A suite writing `per_split` records per split in each round (default 200).
    pub fn new(ctx: C) -> Self {
        SourceSuite {
            ctx,
            per_split: 200,
            interval: Duration::from_millis(50),
            arrival_timeout: ARRIVAL_TIMEOUT,
        }
    }

    /// How long a case waits for the expected records before judging (default 60 s).
    pub fn arrival_timeout(mut self, d: Duration) -> Self {
        self.arrival_timeout = d;
        self
    }

    /// Records written per split and round.
    pub fn records_per_split(mut self, n: usize) -> Self {
        self.per_split = n.max(1);
        self
    }

    /// The external context (to inspect it after a run).
    pub fn context(&self) -> &C {
        &self.ctx
    }

    /// Runs every case; the first failure is returned with its explanation.
    pub async fn run_all(&mut self) -> Result<(), SuiteFailure> {
        self.single_split().await?;
        self.parallel_splits().await?;
        self.stop_and_restore().await?;
        self.rescale().await?;
        self.idle_reader().await?;
        self.failure_and_restart().await?;
        self.bad_records().await?;
        Ok(())
    }

    async fn write_round(
        &mut self,
        case: &str,
        splits: usize,
        round: usize,
    ) -> Result<Vec<String>, SuiteFailure> {
        let mut all = Vec::new();
        for s in 0..splits {
            let recs: Vec<String> = (round * self.per_split..(round + 1) * self.per_split)
                .map(|i| test_record(s, i))
                .collect();
            self.ctx
                .write(s, &recs)
                .await
                .map_err(|e| failure(case, format!("writing test data to split {s}: {e}")))?;
            all.extend(recs);
        }
        Ok(all)
    }

    /// Runs the source into a transactional sink writing to `store` until `until` records are
    /// committed there (then stops it gracefully), until it fails, or until the sink's injected
    /// failure after `fail_sink_after` records.
    async fn run(
        &self,
        backend: &MemoryStateBackend,
        store: &TxnStore<String>,
        parallelism: usize,
        policy: ErrorPolicy,
        until: usize,
        fail_sink_after: Option<usize>,
    ) -> RunOutcome {
        let lifecycle = LifecycleLog::default();
        let received = Arc::new(AtomicUsize::new(0));
        let ctx = &self.ctx;
        let job = Pipeline::new("source-suite")
            .batch_size(64)
            .checkpointing(CheckpointConfig::new(
                self.interval,
                Arc::new(backend.clone()),
            ))
            .source("source", parallelism, |i| {
                ObservedSource::new(
                    ctx.create_source(i, parallelism, policy.clone()),
                    i,
                    lifecycle.clone(),
                )
            })
            .map(|r| C::to_test_record(&r))
            .sink("collect", 1, |i| {
                let sink = TransactionalSink::new(store.clone(), i);
                match fail_sink_after {
                    Some(n) => sink.fail_after(n, Arc::clone(&received)),
                    None => sink,
                }
            });
        let job = match job {
            Ok(j) => j,
            Err(e) => {
                return RunOutcome {
                    committed: store.committed(),
                    result: Err(e),
                    lifecycle,
                }
            }
        };
        let handle = job.handle();
        let mut running = tokio::spawn(job.run());
        let deadline = Instant::now() + self.arrival_timeout;
        let joined = |r: std::result::Result<Result<JobSummary>, tokio::task::JoinError>| {
            r.unwrap_or_else(|e| Err(Error::connector("job panicked", e.to_string())))
        };
        let result = loop {
            tokio::select! {
                r = &mut running => break joined(r),
                _ = tokio::time::sleep(Duration::from_millis(20)) => {
                    if distinct(&store.committed()) >= until || Instant::now() > deadline {
                        handle.stop();
                        break joined(running.await);
                    }
                }
            }
        };
        RunOutcome {
            committed: store.committed(),
            result,
            lifecycle,
        }
    }

    fn guarantee(&self) -> DeliveryGuarantee {
        self.ctx
            .create_source(0, 1, ErrorPolicy::Fail)
            .delivery_guarantee()
    }

    /// Without failures, the job's record counts equal what was written: sources emitted each
    /// record once (at least once for at-least-once sources) and the sink received them all.
    fn judge_counts(
        &self,
        case: &str,
        expected: usize,
        out: &RunOutcome,
    ) -> Result<(), SuiteFailure> {
        let Ok(s) = &out.result else { return Ok(()) };
        let exact = self.guarantee() == DeliveryGuarantee::ExactlyOnce;
        if (exact && s.records_read != expected as u64) || s.records_read < expected as u64 {
            return Err(failure(
                case,
                format!(
                    "counts: the source emitted {} records, {expected} were written to it",
                    s.records_read
                ),
            ));
        }
        if s.records_written != s.records_read {
            return Err(failure(
                case,
                format!(
                    "counts: {} records emitted but {} reached the sink",
                    s.records_read, s.records_written
                ),
            ));
        }
        Ok(())
    }

    fn judge(&self, case: &str, expected: &[String], out: &RunOutcome) -> Result<(), SuiteFailure> {
        if let Err(e) = &out.result {
            return Err(failure(case, format!("the job failed: {e}")));
        }
        out.lifecycle
            .check()
            .map_err(|e| failure(case, format!("lifecycle: {e}")))?;
        verify(expected, &out.committed)
            .check(self.guarantee())
            .map_err(|e| failure(case, e))
    }

    /// One split, parallelism 1: every record arrives, in order.
    pub async fn single_split(&mut self) -> Result<(), SuiteFailure> {
        self.read_splits("source::single_split", 1).await
    }

    /// Four splits read by four subtasks: every record arrives, order kept within each split.
    pub async fn parallel_splits(&mut self) -> Result<(), SuiteFailure> {
        self.read_splits("source::parallel_splits", 4).await
    }

    /// `splits` splits read by as many subtasks from a fresh start: records and counts judged.
    async fn read_splits(&mut self, case: &str, splits: usize) -> Result<(), SuiteFailure> {
        self.ctx
            .prepare(splits)
            .await
            .map_err(|e| failure(case, e))?;
        let expected = self.write_round(case, splits, 0).await?;
        let store = TxnStore::new();
        let backend = MemoryStateBackend::new();
        let out = self
            .run(
                &backend,
                &store,
                splits,
                ErrorPolicy::Fail,
                expected.len(),
                None,
            )
            .await;
        self.judge(case, &expected, &out)?;
        self.judge_counts(case, expected.len(), &out)
    }

    /// Stop with a final checkpoint, write more, restore: only the new records arrive
    /// (exactly-once) or at least all of them (at-least-once).
    pub async fn stop_and_restore(&mut self) -> Result<(), SuiteFailure> {
        let case = "source::stop_and_restore";
        self.ctx.prepare(2).await.map_err(|e| failure(case, e))?;
        let (backend, store) = (MemoryStateBackend::new(), TxnStore::new());
        let first = self.write_round(case, 2, 0).await?;
        let out = self
            .run(&backend, &store, 2, ErrorPolicy::Fail, first.len(), None)
            .await;
        self.judge(case, &first, &out)?;
        let second = self.write_round(case, 2, 1).await?;
        let all = [first, second].concat();
        let out = self
            .run(&backend, &store, 2, ErrorPolicy::Fail, all.len(), None)
            .await;
        if out.result.as_ref().is_ok_and(|s| s.restored_from.is_none()) {
            return Err(failure(
                case,
                "the second run did not restore from the first run's checkpoint",
            ));
        }
        self.judge(case, &all, &out)
    }

    /// Restore into more subtasks, then fewer: nothing missing, nothing duplicated (EO).
    pub async fn rescale(&mut self) -> Result<(), SuiteFailure> {
        let case = "source::rescale";
        self.ctx.prepare(4).await.map_err(|e| failure(case, e))?;
        let (backend, store) = (MemoryStateBackend::new(), TxnStore::new());
        let mut expected = Vec::new();
        for (round, p) in [2usize, 4, 1].into_iter().enumerate() {
            expected.extend(self.write_round(case, 4, round).await?);
            let out = self
                .run(&backend, &store, p, ErrorPolicy::Fail, expected.len(), None)
                .await;
            self.judge(&format!("{case} (into {p} subtasks)"), &expected, &out)?;
        }
        Ok(())
    }

    /// More subtasks than splits: the idle subtask neither blocks records nor checkpoints.
    pub async fn idle_reader(&mut self) -> Result<(), SuiteFailure> {
        let case = "source::idle_reader";
        self.ctx.prepare(2).await.map_err(|e| failure(case, e))?;
        let expected = self.write_round(case, 2, 0).await?;
        let (backend, store) = (MemoryStateBackend::new(), TxnStore::new());
        let out = self
            .run(&backend, &store, 4, ErrorPolicy::Fail, expected.len(), None)
            .await;
        self.judge(case, &expected, &out)?;
        if backend.checkpoints().is_empty() {
            return Err(failure(
                case,
                "no checkpoint completed with an idle subtask",
            ));
        }
        Ok(())
    }

    /// The job fails mid-stream (the sink throws between a write and its commit) and restarts
    /// from its last checkpoint: the records read but not committed are read again.
    pub async fn failure_and_restart(&mut self) -> Result<(), SuiteFailure> {
        let case = "source::failure_and_restart";
        self.ctx.prepare(2).await.map_err(|e| failure(case, e))?;
        let (backend, store) = (MemoryStateBackend::new(), TxnStore::new());
        let expected = self.write_round(case, 2, 0).await?;
        let crashed = self
            .run(
                &backend,
                &store,
                2,
                ErrorPolicy::Fail,
                usize::MAX,
                Some(expected.len() * 2 / 3),
            )
            .await;
        if crashed.result.is_ok() {
            return Err(failure(
                case,
                "the injected sink failure did not fail the job",
            ));
        }
        crashed
            .lifecycle
            .check()
            .map_err(|e| failure(case, format!("lifecycle after a failure: {e}")))?;
        let out = self
            .run(&backend, &store, 2, ErrorPolicy::Fail, expected.len(), None)
            .await;
        self.judge(case, &expected, &out)
    }

    /// A record the source cannot decode: `fail` stops the job naming the record; `skip`
    /// drops it and delivers the rest; a dead-letter queue receives it.
    pub async fn bad_records(&mut self) -> Result<(), SuiteFailure> {
        let case = "source::bad_records";
        for policy_name in ["fail", "skip", "dead-letter"] {
            self.ctx.prepare(1).await.map_err(|e| failure(case, e))?;
            let good = self.write_round(case, 1, 0).await?;
            if !self.ctx.write_bad(0).await.map_err(|e| failure(case, e))? {
                return Ok(());
            }
            let more: Vec<String> = (self.per_split..self.per_split + 10)
                .map(|i| test_record(0, i))
                .collect();
            self.ctx
                .write(0, &more)
                .await
                .map_err(|e| failure(case, e))?;
            let expected = [good, more].concat();
            let dlq = MemoryDlq::default();
            let policy = match policy_name {
                "fail" => ErrorPolicy::Fail,
                "skip" => ErrorPolicy::Skip,
                _ => ErrorPolicy::DeadLetter(Arc::new(dlq.clone())),
            };
            let store = TxnStore::new();
            let out = self
                .run(
                    &MemoryStateBackend::new(),
                    &store,
                    1,
                    policy,
                    expected.len(),
                    None,
                )
                .await;
            match (policy_name, &out.result) {
                ("fail", Ok(_)) => {
                    return Err(failure(
                        case,
                        "policy `fail`: a bad record did not fail the job",
                    ))
                }
                ("fail", Err(e)) if !e.to_string().contains("record") => {
                    return Err(failure(
                        case,
                        format!("policy `fail`: the error does not name the record: {e}"),
                    ))
                }
                ("fail", Err(_)) => {}
                _ => {
                    self.judge(&format!("{case} ({policy_name})"), &expected, &out)?;
                    if policy_name == "dead-letter" && dlq.0.lock().unwrap().len() != 1 {
                        return Err(failure(
                            case,
                            format!(
                                "policy `dead-letter`: {} letters, expected 1",
                                dlq.0.lock().unwrap().len()
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}
