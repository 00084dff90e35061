//! [`SourceSuite`]: the cases every source must pass, against any [`SourceExternal`]. The
//! cases without failures live here; those that fail the job are in `source_failures`.

use std::sync::Arc;
use std::time::Duration;

use rivus_sdk::checkpoint::MemoryStateBackend;
use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::prelude::*;

use super::records::{test_record, verify};
use super::report::{CaseError, Recorder, SuiteReport};
use super::runner::{run_source, RunOutcome, SourceRun, Store};
use super::{failure, MemoryDeadLetters, SourceExternal, SuiteFailure, ARRIVAL_TIMEOUT};
use crate::TxnStore;

/// Runs the source cases against one [`SourceExternal`].
pub struct SourceSuite<C> {
    pub(super) ctx: C,
    pub(super) per_split: usize,
    pub(super) interval: Duration,
    pub(super) arrival_timeout: Duration,
    pub(super) recorder: Recorder,
}

/// Why a rescaling case does not apply.
pub(super) fn no_rescale() -> CaseError {
    CaseError::Skipped(
        "the source does not restore into another parallelism (SourceExternal::rescales)".into(),
    )
}

impl<C: SourceExternal> SourceSuite<C> {
    /// A suite writing `per_split` records per split in each round (default 200).
    pub fn new(ctx: C) -> Self {
        SourceSuite {
            ctx,
            per_split: 200,
            interval: Duration::from_millis(50),
            arrival_timeout: ARRIVAL_TIMEOUT,
            recorder: Recorder::new("SourceSuite"),
        }
    }

    rivus_sdk::setters! {
        /// How long a case waits for the expected records before judging (default 60 s).
        arrival_timeout(d: Duration) => arrival_timeout;

        /// Records written per split and round.
        records_per_split(n: usize) => per_split = n.max(1);
    }

    /// The external context (to inspect it after a run).
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
        let _ = self.single_split().await;
        let _ = self.parallel_splits().await;
        let _ = self.rescale().await;
        let _ = self.idle_reader().await;
        let _ = self.failure_and_restart().await;
        for p in [1, 2] {
            let _ = self.stop_and_restore(p).await;
            let _ = self.restart_without_checkpoint(p).await;
            let _ = self.failure_after_checkpoints(p).await;
            let _ = self.failure_in_snapshot(p).await;
            let _ = self.failure_during_restore(p).await;
        }
        let _ = self.failure_and_rescale(2, 1).await;
        let _ = self.failure_and_rescale(1, 2).await;
        let _ = self.bad_records().await;
        self.recorder.finish()
    }

    pub(super) async fn prepare(&mut self, case: &str, splits: usize) -> Result<(), SuiteFailure> {
        self.ctx
            .prepare(splits)
            .await
            .map_err(|e| failure(case, format!("preparing {splits} splits: {e}")))
    }

    pub(super) async fn write_round(
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

    /// A run that stops once `until` distinct records are committed (or the arrival timeout).
    pub(super) fn spec(&self, parallelism: usize, until: usize) -> SourceRun {
        let mut s = SourceRun::new(parallelism, Some(until), self.arrival_timeout);
        s.interval = self.interval;
        s
    }

    pub(super) async fn run(
        &self,
        backend: &MemoryStateBackend,
        store: &Store<C>,
        spec: SourceRun,
    ) -> RunOutcome {
        run_source(&self.ctx, backend, store, spec).await
    }

    pub(super) fn guarantee(&self) -> DeliveryGuarantee {
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

    /// Judges the last run of a case against the declared guarantee.
    pub(super) fn judge(
        &mut self,
        case: &str,
        expected: &[String],
        out: &RunOutcome,
    ) -> Result<(), SuiteFailure> {
        self.judge_as(case, expected, out, self.guarantee())
    }

    /// Judges the last run of a case against `guarantee` (stricter than the declared one where
    /// the case allows no replay).
    pub(super) fn judge_as(
        &mut self,
        case: &str,
        expected: &[String],
        out: &RunOutcome,
        guarantee: DeliveryGuarantee,
    ) -> Result<(), SuiteFailure> {
        let mut arrived = out.committed.clone();
        if !self.ctx.preserves_order() {
            arrived.sort();
        }
        let verdict = verify(expected, &arrived);
        self.recorder.counts(expected.len(), &arrived, &verdict);
        if let Err(e) = &out.result {
            return Err(failure(case, format!("the job failed: {e}")));
        }
        out.lifecycle
            .check()
            .map_err(|e| failure(case, format!("lifecycle: {e}")))?;
        verdict.check(guarantee).map_err(|e| failure(case, e))
    }

    /// One split, parallelism 1: every record arrives, in order.
    pub async fn single_split(&mut self) -> Result<(), SuiteFailure> {
        self.recorder.begin();
        let r = self.read_splits("source::single_split", 1).await;
        self.recorder.end("source::single_split", 1, r)
    }

    /// Four splits read by four subtasks: every record arrives, order kept within each split.
    pub async fn parallel_splits(&mut self) -> Result<(), SuiteFailure> {
        self.recorder.begin();
        let r = self.read_splits("source::parallel_splits", 4).await;
        self.recorder.end("source::parallel_splits", 4, r)
    }

    /// `splits` splits read by as many subtasks from a fresh start: records and counts judged.
    async fn read_splits(&mut self, case: &str, splits: usize) -> Result<(), CaseError> {
        self.prepare(case, splits).await?;
        let expected = self.write_round(case, splits, 0).await?;
        let store = TxnStore::new();
        let backend = MemoryStateBackend::new();
        let out = self
            .run(&backend, &store, self.spec(splits, expected.len()))
            .await;
        self.judge(case, &expected, &out)?;
        self.judge_counts(case, expected.len(), &out)?;
        Ok(())
    }

    /// Stop with a final checkpoint, write more, restore: only the new records arrive. After a
    /// graceful stop the final checkpoint completed and covers everything read, so this holds
    /// for at-least-once sources too: a source that replays here never committed its
    /// positions (or acknowledged its messages) when that checkpoint completed.
    pub async fn stop_and_restore(&mut self, parallelism: usize) -> Result<(), SuiteFailure> {
        let case = "source::stop_and_restore";
        self.recorder.begin();
        let r = self.stop_and_restore_case(case, parallelism).await;
        self.recorder.end(case, parallelism, r)
    }

    async fn stop_and_restore_case(&mut self, case: &str, p: usize) -> Result<(), CaseError> {
        self.prepare(case, 2).await?;
        let (backend, store) = (MemoryStateBackend::new(), TxnStore::new());
        let first = self.write_round(case, 2, 0).await?;
        let out = self.run(&backend, &store, self.spec(p, first.len())).await;
        self.judge(case, &first, &out)?;
        if backend.checkpoints().is_empty() {
            return Err(failure(case, "the first run completed no checkpoint").into());
        }
        let second = self.write_round(case, 2, 1).await?;
        let all = [first, second].concat();
        let out = self.run(&backend, &store, self.spec(p, all.len())).await;
        if out.result.as_ref().is_ok_and(|s| s.restored_from.is_none()) {
            return Err(failure(
                case,
                "the second run did not restore from the first run's checkpoint",
            )
            .into());
        }
        let declared = self.guarantee();
        let strict = if declared.no_loss() {
            DeliveryGuarantee::ExactlyOnce
        } else {
            declared
        };
        self.judge_as(case, &all, &out, strict).map_err(|f| {
            let message = f.message.replace(
                &format!("(guarantee declared: {strict})"),
                &format!("(guarantee declared: {declared}; held to {strict} here)"),
            );
            failure(
                case,
                format!(
                    "{message} — after a graceful stop whose final checkpoint completed, a \
                     restart must read only what came after it: did the source commit its \
                     positions (acknowledge) when that checkpoint completed?"
                ),
            )
        })?;
        Ok(())
    }

    /// Stop with a final checkpoint, write more, then start *without* the checkpoint (a new
    /// deployment, a lost state directory): a source that commits its positions to the
    /// external system resumes after them, so only the new records arrive.
    pub async fn restart_without_checkpoint(
        &mut self,
        parallelism: usize,
    ) -> Result<(), SuiteFailure> {
        let case = "source::restart_without_checkpoint";
        self.recorder.begin();
        let r = if self.ctx.commits_positions() {
            self.restart_without_checkpoint_case(case, parallelism)
                .await
        } else {
            Err(CaseError::Skipped(
                "the source does not declare that it commits its positions to the external \
                 system (SourceExternal::commits_positions)"
                    .into(),
            ))
        };
        self.recorder.end(case, parallelism, r)
    }

    async fn restart_without_checkpoint_case(
        &mut self,
        case: &str,
        p: usize,
    ) -> Result<(), CaseError> {
        self.prepare(case, 2).await?;
        let first = self.write_round(case, 2, 0).await?;
        let out = self
            .run(
                &MemoryStateBackend::new(),
                &TxnStore::new(),
                self.spec(p, first.len()),
            )
            .await;
        self.judge(case, &first, &out)?;
        let second = self.write_round(case, 2, 1).await?;
        let store = TxnStore::new();
        let out = self
            .run(
                &MemoryStateBackend::new(),
                &store,
                self.spec(p, second.len()),
            )
            .await;
        let again: Vec<&String> = out.committed.iter().filter(|r| first.contains(r)).collect();
        if !again.is_empty() {
            self.recorder.counts(
                second.len(),
                &out.committed,
                &verify(&second, &out.committed),
            );
            return Err(failure(
                case,
                format!(
                    "a start without the checkpoint read {} records again that a completed \
                     checkpoint had covered (first: {:?}): the source did not commit its \
                     positions to the external system when that checkpoint completed",
                    again.len(),
                    again.iter().take(5).collect::<Vec<_>>()
                ),
            )
            .into());
        }
        self.judge(case, &second, &out)?;
        Ok(())
    }

    /// Restore into more subtasks, then fewer: nothing missing, nothing duplicated (EO).
    pub async fn rescale(&mut self) -> Result<(), SuiteFailure> {
        let case = "source::rescale";
        self.recorder.begin();
        let r = if self.ctx.rescales() {
            self.rescale_case(case).await
        } else {
            Err(no_rescale())
        };
        self.recorder.end(case, 1, r)
    }

    async fn rescale_case(&mut self, case: &str) -> Result<(), CaseError> {
        self.prepare(case, 4).await?;
        let (backend, store) = (MemoryStateBackend::new(), TxnStore::new());
        let mut expected = Vec::new();
        for (round, p) in [2usize, 4, 1].into_iter().enumerate() {
            expected.extend(self.write_round(case, 4, round).await?);
            let out = self
                .run(&backend, &store, self.spec(p, expected.len()))
                .await;
            self.judge(&format!("{case} (into {p} subtasks)"), &expected, &out)?;
        }
        Ok(())
    }

    /// More subtasks than splits: the idle subtask neither blocks records nor checkpoints.
    pub async fn idle_reader(&mut self) -> Result<(), SuiteFailure> {
        let case = "source::idle_reader";
        self.recorder.begin();
        let r = self.idle_reader_case(case).await;
        self.recorder.end(case, 4, r)
    }

    async fn idle_reader_case(&mut self, case: &str) -> Result<(), CaseError> {
        self.prepare(case, 2).await?;
        let expected = self.write_round(case, 2, 0).await?;
        let (backend, store) = (MemoryStateBackend::new(), TxnStore::new());
        let out = self
            .run(&backend, &store, self.spec(4, expected.len()))
            .await;
        self.judge(case, &expected, &out)?;
        if backend.checkpoints().is_empty() {
            return Err(failure(case, "no checkpoint completed with an idle subtask").into());
        }
        Ok(())
    }

    /// A record the source cannot decode: `fail` stops the job naming the record; `skip`
    /// drops it and delivers the rest; a dead-letter queue receives it, content kept.
    pub async fn bad_records(&mut self) -> Result<(), SuiteFailure> {
        let case = "source::bad_records";
        self.recorder.begin();
        let r = self.bad_records_case(case).await;
        self.recorder.end(case, 1, r)
    }

    async fn bad_records_case(&mut self, case: &str) -> Result<(), CaseError> {
        for policy_name in ["fail", "skip", "dead-letter"] {
            self.prepare(case, 1).await?;
            let good = self.write_round(case, 1, 0).await?;
            let wrote = self
                .ctx
                .write_bad(0)
                .await
                .map_err(|e| failure(case, format!("writing a bad record: {e}")))?;
            if !wrote {
                return Err(CaseError::Skipped(
                    "the connector has no notion of a record it cannot decode \
                     (SourceExternal::write_bad returned false)"
                        .into(),
                ));
            }
            let more: Vec<String> = (self.per_split..self.per_split + 10)
                .map(|i| test_record(0, i))
                .collect();
            self.ctx
                .write(0, &more)
                .await
                .map_err(|e| failure(case, e))?;
            let expected = [good, more].concat();
            let dlq = MemoryDeadLetters::new();
            let mut spec = self.spec(1, expected.len());
            spec.policy = match policy_name {
                "fail" => ErrorPolicy::Fail,
                "skip" => ErrorPolicy::Skip,
                _ => ErrorPolicy::DeadLetter(Arc::new(dlq.clone())),
            };
            let out = self
                .run(&MemoryStateBackend::new(), &TxnStore::new(), spec)
                .await;
            match (policy_name, &out.result) {
                ("fail", Ok(_)) => {
                    return Err(
                        failure(case, "policy `fail`: a bad record did not fail the job").into(),
                    )
                }
                ("fail", Err(e)) if !e.to_string().contains("record") => {
                    return Err(failure(
                        case,
                        format!("policy `fail`: the error does not name the record: {e}"),
                    )
                    .into())
                }
                ("fail", Err(_)) => {}
                _ => {
                    self.judge(&format!("{case} ({policy_name})"), &expected, &out)?;
                    let letters = dlq.letters();
                    if policy_name == "dead-letter" {
                        if letters.len() != 1 {
                            return Err(failure(
                                case,
                                format!(
                                    "policy `dead-letter`: {} letters, expected 1",
                                    letters.len()
                                ),
                            )
                            .into());
                        }
                        if letters[0].payload.is_empty() || letters[0].position.is_empty() {
                            return Err(failure(
                                case,
                                format!(
                                    "policy `dead-letter`: the letter lost the record's content \
                                     or position: {:?}",
                                    letters[0]
                                ),
                            )
                            .into());
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
