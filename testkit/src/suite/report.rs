//! [`SuiteReport`]: one row per case a suite ran — parallelism, outcome (passed, failed, or
//! skipped with the reason), records written and read, duplicates, missing, duration — printed
//! as a table at the end of every `run_all`, on success and on failure.

use std::fmt;
use std::time::{Duration, Instant};

use super::records::Verdict;
use super::SuiteFailure;

/// How one case ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaseOutcome {
    /// The case ran and the connector kept its guarantee.
    Passed,
    /// The case ran and found a fault; the message names the case and the records.
    Failed(String),
    /// The case does not apply to this connector; the reason says why. Never counted as
    /// passed.
    Skipped(String),
}

/// One row of a [`SuiteReport`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseRow {
    /// The case, e.g. `source::failure_after_checkpoints`.
    pub case: String,
    /// Subtasks of the connector under test (the last run's, for cases that rescale).
    pub parallelism: usize,
    /// How it ended.
    pub outcome: CaseOutcome,
    /// Test records written to the source or handed to the sink.
    pub written: usize,
    /// Test records that arrived (committed by the suite's sink, or read back).
    pub read: usize,
    /// Distinct records that arrived more than once.
    pub duplicates: usize,
    /// Records written that never arrived.
    pub missing: usize,
    /// Wall-clock time of the case.
    pub duration: Duration,
}

/// Counts of one case, taken from what was written and what arrived.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub written: usize,
    pub read: usize,
    pub duplicates: usize,
    pub missing: usize,
}

impl Counts {
    pub(crate) fn of(written: usize, read: usize, verdict: &Verdict) -> Self {
        Counts {
            written,
            read,
            duplicates: verdict.duplicated.values().map(Vec::len).sum(),
            missing: verdict.missing.values().map(Vec::len).sum(),
        }
    }
}

/// Every case a suite ran, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SuiteReport {
    /// The suite, e.g. `SourceSuite`.
    pub suite: String,
    /// One row per case and parallelism.
    pub rows: Vec<CaseRow>,
}

impl SuiteReport {
    pub(crate) fn new(suite: &str) -> Self {
        SuiteReport {
            suite: suite.to_owned(),
            rows: Vec::new(),
        }
    }

    pub(crate) fn push(
        &mut self,
        case: &str,
        parallelism: usize,
        outcome: CaseOutcome,
        counts: Counts,
        duration: Duration,
    ) {
        self.rows.push(CaseRow {
            case: case.to_owned(),
            parallelism,
            outcome,
            written: counts.written,
            read: counts.read,
            duplicates: counts.duplicates,
            missing: counts.missing,
            duration,
        });
    }

    /// Rows that passed.
    pub fn passed(&self) -> usize {
        self.count(|o| matches!(o, CaseOutcome::Passed))
    }

    /// Rows that failed.
    pub fn failed(&self) -> usize {
        self.count(|o| matches!(o, CaseOutcome::Failed(_)))
    }

    /// Rows skipped, with their reasons.
    pub fn skipped(&self) -> Vec<(&str, &str)> {
        self.rows
            .iter()
            .filter_map(|r| match &r.outcome {
                CaseOutcome::Skipped(why) => Some((r.case.as_str(), why.as_str())),
                _ => None,
            })
            .collect()
    }

    /// The row of `case` at `parallelism`, if it ran.
    pub fn row(&self, case: &str, parallelism: usize) -> Option<&CaseRow> {
        self.rows
            .iter()
            .find(|r| r.case == case && r.parallelism == parallelism)
    }

    fn count(&self, f: impl Fn(&CaseOutcome) -> bool) -> usize {
        self.rows.iter().filter(|r| f(&r.outcome)).count()
    }
}

impl fmt::Display for SuiteReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self
            .rows
            .iter()
            .map(|r| r.case.len())
            .max()
            .unwrap_or(4)
            .max(4);
        writeln!(
            f,
            "{}: {} passed, {} failed, {} skipped",
            self.suite,
            self.passed(),
            self.failed(),
            self.skipped().len()
        )?;
        writeln!(
            f,
            "  {:width$}  par  outcome  written     read  dup  missing  duration",
            "case"
        )?;
        for r in &self.rows {
            let outcome = match &r.outcome {
                CaseOutcome::Passed => "ok",
                CaseOutcome::Failed(_) => "FAILED",
                CaseOutcome::Skipped(_) => "skipped",
            };
            writeln!(
                f,
                "  {:width$}  {:>3}  {:7}  {:>7}  {:>7}  {:>3}  {:>7}  {:>7.2}s",
                r.case,
                r.parallelism,
                outcome,
                r.written,
                r.read,
                r.duplicates,
                r.missing,
                r.duration.as_secs_f64()
            )?;
            match &r.outcome {
                CaseOutcome::Failed(why) => writeln!(f, "  {:width$}       {why}", "")?,
                CaseOutcome::Skipped(why) => writeln!(f, "  {:width$}       skipped: {why}", "")?,
                CaseOutcome::Passed => {}
            }
        }
        Ok(())
    }
}

/// Why a case did not pass: it failed, or it does not apply (with the reason).
#[derive(Debug)]
pub(crate) enum CaseError {
    Failed(SuiteFailure),
    Skipped(String),
}

impl From<SuiteFailure> for CaseError {
    fn from(f: SuiteFailure) -> Self {
        CaseError::Failed(f)
    }
}

/// The report of one suite as its cases run: each case begins, sets its counts when it judges,
/// and ends with its outcome.
#[derive(Debug)]
pub(crate) struct Recorder {
    pub report: SuiteReport,
    counts: Counts,
    started: Instant,
    first_failure: Option<SuiteFailure>,
}

impl Recorder {
    pub(super) fn new(suite: &str) -> Self {
        Recorder {
            report: SuiteReport::new(suite),
            counts: Counts::default(),
            started: Instant::now(),
            first_failure: None,
        }
    }

    /// A case starts.
    pub(super) fn begin(&mut self) {
        self.counts = Counts::default();
        self.started = Instant::now();
    }

    /// The counts of the case's last judgement.
    pub(super) fn counts(&mut self, written: usize, arrived: &[String], verdict: &Verdict) {
        self.counts = Counts::of(written, arrived.len(), verdict);
    }

    /// The case ended: its row is added; a skip is not a failure.
    pub(super) fn end(
        &mut self,
        case: &str,
        parallelism: usize,
        result: Result<(), CaseError>,
    ) -> Result<(), SuiteFailure> {
        let (outcome, out) = match result {
            Ok(()) => (CaseOutcome::Passed, Ok(())),
            Err(CaseError::Skipped(why)) => (CaseOutcome::Skipped(why), Ok(())),
            Err(CaseError::Failed(mut f)) => {
                f.message = format!("[parallelism {parallelism}] {}", f.message);
                if self.first_failure.is_none() {
                    self.first_failure = Some(f.clone());
                }
                (CaseOutcome::Failed(f.message.clone()), Err(f))
            }
        };
        let elapsed = self.started.elapsed();
        self.report
            .push(case, parallelism, outcome, self.counts, elapsed);
        out
    }

    /// After `run_all`: the report, printed; or the first failure, carrying the report.
    pub(super) fn finish(&mut self) -> Result<SuiteReport, SuiteFailure> {
        let fresh = SuiteReport::new(&self.report.suite);
        let report = std::mem::replace(&mut self.report, fresh);
        eprintln!("{report}");
        match self.first_failure.take() {
            None => Ok(report),
            Some(mut f) => {
                f.report = Some(report);
                Err(f)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_shows_every_outcome_with_its_reason() {
        let mut r = SuiteReport::new("SourceSuite");
        let c = Counts {
            written: 400,
            read: 398,
            duplicates: 0,
            missing: 2,
        };
        r.push("source::a", 1, CaseOutcome::Passed, c, Duration::ZERO);
        r.push(
            "source::b",
            2,
            CaseOutcome::Failed("missing records".into()),
            c,
            Duration::ZERO,
        );
        r.push(
            "source::c",
            1,
            CaseOutcome::Skipped("no bad record".into()),
            Counts::default(),
            Duration::ZERO,
        );
        let t = r.to_string();
        assert!(
            t.starts_with("SourceSuite: 1 passed, 1 failed, 1 skipped"),
            "{t}"
        );
        assert!(t.contains("FAILED"), "{t}");
        assert!(t.contains("skipped: no bad record"), "{t}");
        assert!(t.contains("    400      398"), "{t}");
        assert_eq!(r.skipped(), vec![("source::c", "no bad record")]);
        assert_eq!(r.row("source::b", 2).map(|r| r.missing), Some(2));
    }
}
