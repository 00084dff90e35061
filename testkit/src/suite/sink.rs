//! [`SinkSuite`]: the cases every sink must pass, against any [`SinkExternal`]. The cases
//! without injected faults in the sink live here; those that fail it are in `sink_failures`.

use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use rivus_sdk::checkpoint::{CheckpointConfig, MemoryStateBackend};
use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::prelude::*;

use super::observed::{Faults, LifecycleLog, ObservedSink};
use super::records::{test_record, verify};
use super::report::{CaseError, Recorder, SuiteReport};
use super::{failure, MemoryDeadLetters, SinkExternal, SuiteFailure};
use crate::{TransactionalSink, TxnStore, VecSource};

/// Splits of input records, each tagged (with its split and index, or with whether it is
/// followed by a bad record).
type Splits<Tag, R> = Arc<Vec<Vec<(Tag, R)>>>;

/// Runs the sink cases against one [`SinkExternal`].
pub struct SinkSuite<C> {
    pub(super) ctx: C,
    pub(super) per_split: usize,
    pub(super) recorder: Recorder,
}

/// How one run of the sink suite's job is set up.
#[derive(Clone, Default)]
pub(super) struct SinkRun {
    pub parallelism: usize,
    /// Rounds of input per split (more data after a failure: the restored source reads on).
    pub rounds: usize,
    /// The source fails once this many records were emitted.
    pub kill: Option<usize>,
    /// The source keeps running after its data (until an injected fault fails the job).
    pub unbounded: bool,
    /// Faults injected around the sink under test.
    pub faults: Faults,
    /// The input fanned out: the sink under test on one branch, an exactly-once in-memory
    /// sink of each record's (split, index) on the other.
    pub beside: Option<TxnStore<(usize, usize)>>,
}

impl SinkRun {
    pub(super) fn new(parallelism: usize, rounds: usize) -> Self {
        SinkRun {
            parallelism,
            rounds,
            ..SinkRun::default()
        }
    }
}

impl<C: SinkExternal> SinkSuite<C> {
    /// A suite writing `per_split` records into each of 4 splits per round (default 300).
    pub fn new(ctx: C) -> Self {
        SinkSuite {
            ctx,
            per_split: 300,
            recorder: Recorder::new("SinkSuite"),
        }
    }

    rivus_sdk::setters! {
        /// Records per split.
        records_per_split(n: usize) => per_split = n.max(1);
    }

    /// The external context.
    pub fn context(&self) -> &C {
        &self.ctx
    }

    /// The rows of the cases run so far.
    pub fn report(&self) -> &SuiteReport {
        &self.recorder.report
    }

    /// Runs every case, each failure case at parallelism 1 and 2, and returns the report (also
    /// printed). A failure does not stop the others; the first one is returned, carrying the
    /// whole report.
    pub async fn run_all(&mut self) -> Result<SuiteReport, SuiteFailure> {
        let _ = self.write_all(1).await;
        let _ = self.write_all(3).await;
        let _ = self.kill_and_restart().await;
        let _ = self.rescale().await;
        let _ = self.in_a_fan_out().await;
        for p in [1, 2] {
            let _ = self.failure_after_checkpoints(p).await;
            let _ = self.failure_in_snapshot(p).await;
            let _ = self.failure_during_restore(p).await;
        }
        let _ = self.bad_records().await;
        self.recorder.finish()
    }

    /// The test strings of `rounds` rounds, per split.
    pub(super) fn expected(&self, rounds: usize) -> Vec<String> {
        (0..4)
            .flat_map(|s| (0..rounds * self.per_split).map(move |i| test_record(s, i)))
            .collect()
    }

    fn input(&self, rounds: usize) -> Splits<(usize, usize), C::Record> {
        Arc::new(
            (0..4)
                .map(|s| {
                    (0..rounds * self.per_split)
                        .map(|i| ((s, i), self.ctx.to_record(&test_record(s, i))))
                        .collect()
                })
                .collect(),
        )
    }

    pub(super) fn guarantee(&self) -> DeliveryGuarantee {
        self.ctx
            .create_sink(0, 1, ErrorPolicy::Fail)
            .delivery_guarantee()
    }

    /// Runs VecSource(4 splits) → key_by(split) → sink, checkpointing every 20 ms into
    /// `backend` (and restoring from it).
    pub(super) async fn run(
        &self,
        backend: &MemoryStateBackend,
        spec: SinkRun,
        lifecycle: &LifecycleLog,
    ) -> Result<JobSummary> {
        let data = self.input(spec.rounds);
        let emitted = Arc::new(AtomicUsize::new(0));
        let ctx = &self.ctx;
        let p = spec.parallelism;
        let pipeline =
            Pipeline::new("sink-suite")
                .batch_size(32)
                .checkpointing(CheckpointConfig::new(
                    Duration::from_millis(20),
                    Arc::new(backend.clone()),
                ));
        let keyed = pipeline
            .source("input", 2, |i| {
                let mut s = VecSource::new(Arc::clone(&data), i, 2);
                s = if spec.unbounded {
                    // Slow enough that checkpoints complete while data flows, however fast
                    // the sink; the job ends only through the injected fault.
                    s.paced(10, Duration::from_millis(10)).unbounded()
                } else {
                    s.paced(50, Duration::from_millis(2))
                };
                match spec.kill {
                    Some(k) => s.fail_after(k, Arc::clone(&emitted)),
                    None => s,
                }
            })
            .key_by(|((s, _), _): &((usize, usize), C::Record)| *s, p);
        let under_test = match &spec.beside {
            None => keyed,
            Some(store) => {
                let [under_test, beside] = keyed.fan_out();
                beside
                    .map(|(tag, _)| tag)
                    .sink_to("beside", p, |i| TransactionalSink::new(store.clone(), i));
                under_test
            }
        };
        under_test.map(|(_, r)| r).sink_to("sink", p, |i| {
            ObservedSink::new(
                ctx.create_sink(i, p, ErrorPolicy::Fail),
                i,
                lifecycle.clone(),
            )
            .with_faults(spec.faults.clone())
        });
        let job = pipeline.build()?;
        let handle = job.handle();
        let run = tokio::time::timeout(super::ARRIVAL_TIMEOUT, job.run());
        match run.await {
            Ok(r) => r,
            Err(_) => {
                handle.cancel();
                Err(Error::connector(
                    "sink suite",
                    format!(
                        "the job did not end within {:?} (an injected fault that never fired: \
                         did checkpoints complete?)",
                        super::ARRIVAL_TIMEOUT
                    ),
                ))
            }
        }
    }

    /// Reads back the destination and judges it against `rounds` rounds of input.
    pub(super) async fn judge(
        &mut self,
        case: &str,
        lifecycle: &LifecycleLog,
        rounds: usize,
    ) -> Result<(), SuiteFailure> {
        lifecycle
            .check()
            .map_err(|e| failure(case, format!("lifecycle: {e}")))?;
        let mut back = self
            .ctx
            .read_back()
            .await
            .map_err(|e| failure(case, format!("reading back: {e}")))?;
        if !self.ctx.preserves_order() {
            back.sort();
        }
        let expected = self.expected(rounds);
        let verdict = verify(&expected, &back);
        self.recorder.counts(expected.len(), &back, &verdict);
        verdict
            .check(self.guarantee())
            .map_err(|e| failure(case, e))
    }

    /// Everything written arrives, with `parallelism` sink subtasks.
    pub async fn write_all(&mut self, parallelism: usize) -> Result<(), SuiteFailure> {
        let case = "sink::write_all";
        self.recorder.begin();
        let r = self.write_all_case(case, parallelism).await;
        self.recorder.end(case, parallelism, r)
    }

    async fn write_all_case(&mut self, case: &str, p: usize) -> Result<(), CaseError> {
        self.prepare(case).await?;
        let lifecycle = LifecycleLog::default();
        self.run(&MemoryStateBackend::new(), SinkRun::new(p, 1), &lifecycle)
            .await
            .map_err(|e| failure(case, format!("the job failed: {e}")))?;
        self.judge(case, &lifecycle, 1).await?;
        Ok(())
    }

    pub(super) async fn prepare(&mut self, case: &str) -> Result<(), SuiteFailure> {
        self.ctx
            .prepare()
            .await
            .map_err(|e| failure(case, format!("preparing the destination: {e}")))
    }

    /// The job is killed between writes and their checkpoint commit, several times, then runs
    /// to the end: nothing lost; for exactly-once, nothing duplicated.
    pub async fn kill_and_restart(&mut self) -> Result<(), SuiteFailure> {
        let case = "sink::kill_and_restart";
        let total = 4 * self.per_split;
        self.recorder.begin();
        // Each run restores from the previous one's last checkpoint; killing every run after a
        // fifth of the input leaves each one enough records to reach its kill point.
        let r = self
            .killed_then_finished(case, &[(2, total / 6), (2, total / 5), (2, total / 4)], 2)
            .await;
        self.recorder.end(case, 2, r)
    }

    /// Killed with 2 subtasks, restored into 3 (killed again), then into 1.
    pub async fn rescale(&mut self) -> Result<(), SuiteFailure> {
        let case = "sink::rescale";
        let total = 4 * self.per_split;
        self.recorder.begin();
        let r = self
            .killed_then_finished(case, &[(2, total / 4), (3, total / 4)], 1)
            .await;
        self.recorder.end(case, 1, r)
    }

    /// The sink on one branch of a fan-out, an exactly-once in-memory sink on the other, the
    /// job killed twice and finished: the sink keeps its guarantee, and the other branch holds
    /// every record once — the checkpoint is the whole job's.
    pub async fn in_a_fan_out(&mut self) -> Result<(), SuiteFailure> {
        let case = "sink::in_a_fan_out";
        let total = 4 * self.per_split;
        self.recorder.begin();
        let beside = TxnStore::new();
        let r = self
            .killed_then_finished_with(
                case,
                &[(2, total / 5), (2, total / 4)],
                2,
                Some(beside.clone()),
            )
            .await
            .and_then(|()| {
                let mut got = beside.committed();
                got.sort_unstable();
                let want: Vec<(usize, usize)> = (0..4)
                    .flat_map(|s| (0..self.per_split).map(move |i| (s, i)))
                    .collect();
                if got != want || !beside.prepared().is_empty() {
                    return Err(failure(
                        case,
                        format!(
                            "the other branch holds {} records ({} wanted, {} transactions \
                             left open): the checkpoint did not cover both branches",
                            got.len(),
                            want.len(),
                            beside.prepared().len()
                        ),
                    )
                    .into());
                }
                Ok(())
            });
        self.recorder.end(case, 2, r)
    }

    /// Runs killed after `kill` records with `parallelism` subtasks, each restoring from the
    /// last, then a run to the end with `final_parallelism`; judges what arrived.
    async fn killed_then_finished(
        &mut self,
        case: &str,
        killed: &[(usize, usize)],
        final_parallelism: usize,
    ) -> Result<(), CaseError> {
        self.killed_then_finished_with(case, killed, final_parallelism, None)
            .await
    }

    /// [`killed_then_finished`](Self::killed_then_finished), the input fanned out beside the
    /// sink into `beside` when given.
    async fn killed_then_finished_with(
        &mut self,
        case: &str,
        killed: &[(usize, usize)],
        final_parallelism: usize,
        beside: Option<TxnStore<(usize, usize)>>,
    ) -> Result<(), CaseError> {
        self.prepare(case).await?;
        let backend = MemoryStateBackend::new();
        for &(parallelism, kill) in killed {
            let lifecycle = LifecycleLog::default();
            let mut spec = SinkRun::new(parallelism, 1);
            spec.kill = Some(kill);
            spec.beside = beside.clone();
            if self.run(&backend, spec, &lifecycle).await.is_ok() {
                return Err(failure(case, "the injected failure did not fail the job").into());
            }
            lifecycle
                .check()
                .map_err(|e| failure(case, format!("lifecycle after a failure: {e}")))?;
        }
        let lifecycle = LifecycleLog::default();
        let mut last = SinkRun::new(final_parallelism, 1);
        last.beside = beside;
        self.run(&backend, last, &lifecycle).await.map_err(|e| {
            failure(
                case,
                format!("the final run ({final_parallelism} subtasks) failed: {e}"),
            )
        })?;
        self.judge(case, &lifecycle, 1).await?;
        Ok(())
    }

    /// A record the destination rejects: `fail` stops the job; `skip` keeps every other record;
    /// a dead-letter queue receives it with its content and keeps every other record.
    pub async fn bad_records(&mut self) -> Result<(), SuiteFailure> {
        let case = "sink::bad_records";
        self.recorder.begin();
        let r = match self.ctx.bad_record() {
            Some(bad) => self.bad_records_case(case, bad).await,
            None => Err(CaseError::Skipped(
                "the connector supplies no record its destination rejects \
                 (SinkExternal::bad_record returned None)"
                    .into(),
            )),
        };
        self.recorder.end(case, 1, r)
    }

    async fn bad_records_case(&mut self, case: &str, bad: C::Record) -> Result<(), CaseError> {
        let dlq = MemoryDeadLetters::new();
        let policies = [
            ("fail", ErrorPolicy::Fail),
            ("skip", ErrorPolicy::Skip),
            (
                "dead-letter",
                ErrorPolicy::DeadLetter(Arc::new(dlq.clone())),
            ),
        ];
        for (name, policy) in policies {
            self.prepare(case).await?;
            let lifecycle = LifecycleLog::default();
            let ctx = &self.ctx;
            // The bad record follows the first record of split 0.
            let data: Splits<bool, C::Record> = Arc::new(
                self.input(1)
                    .iter()
                    .map(|split| {
                        split
                            .iter()
                            .enumerate()
                            .map(|(i, ((s, _), r))| (*s == 0 && i == 0, r.clone()))
                            .collect()
                    })
                    .collect(),
            );
            let bad = bad.clone();
            let result = Pipeline::new("sink-suite-bad")
                .checkpointing(CheckpointConfig::new(
                    Duration::from_millis(20),
                    Arc::new(MemoryStateBackend::new()),
                ))
                .source("input", 1, |i| VecSource::new(Arc::clone(&data), i, 1))
                .flat_map(
                    move |(first, r): (bool, C::Record)| {
                        if first {
                            vec![r, bad.clone()]
                        } else {
                            vec![r]
                        }
                    },
                )
                .sink("sink", 1, |i| {
                    ObservedSink::new(ctx.create_sink(i, 1, policy.clone()), i, lifecycle.clone())
                })
                .map_err(|e| failure(case, e))?
                .run()
                .await;
            match (name, result) {
                ("fail", Ok(_)) => {
                    return Err(
                        failure(case, "policy `fail`: the bad record did not fail the job").into(),
                    )
                }
                ("fail", Err(_)) => lifecycle.check().map_err(|e| failure(case, e))?,
                (_, Err(e)) => {
                    return Err(
                        failure(case, format!("policy `{name}`: the job failed: {e}")).into(),
                    )
                }
                (_, Ok(_)) => self.judge(case, &lifecycle, 1).await?,
            }
        }
        let letters = dlq.letters();
        match letters.as_slice() {
            [one] if !one.payload.is_empty() => Ok(()),
            [one] => Err(failure(
                case,
                format!("policy `dead-letter`: the letter lost the record's content: {one:?}"),
            )
            .into()),
            more => Err(failure(
                case,
                format!("policy `dead-letter`: {} letters, expected 1", more.len()),
            )
            .into()),
        }
    }
}
