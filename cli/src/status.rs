//! What a person sees while a job runs: a live status line on a terminal (rates, totals,
//! errors, last checkpoint, a progress bar with ETA when the size is known), plain periodic
//! log lines otherwise; and the summary at the end.

use std::io::{IsTerminal, Write};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rivus_sdk::{CompletedCheckpoints, JobSummary, RestartStatus, Stall};

use rivus_engine::Counts;

fn rate(n: u64, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64().max(1e-9)
}

fn bar(done: u64, total: u64, width: usize) -> String {
    let filled = ((done as f64 / total.max(1) as f64) * width as f64).round() as usize;
    let filled = filled.min(width);
    format!("[{}{}]", "#".repeat(filled), ".".repeat(width - filled))
}

/// Runs until aborted, reporting every `every` (default 500 ms on a terminal, 10 s otherwise).
pub(crate) async fn report(
    name: String,
    counts: Arc<Counts>,
    total: Option<u64>,
    checkpoints: CompletedCheckpoints,
    restarts: tokio::sync::watch::Receiver<RestartStatus>,
    stalls: tokio::sync::watch::Receiver<Option<Stall>>,
    every: Option<Duration>,
) {
    let terminal = std::io::stderr().is_terminal();
    let every = every.unwrap_or(if terminal {
        Duration::from_millis(500)
    } else {
        Duration::from_secs(10)
    });
    let started = Instant::now();
    let (mut last_in, mut last_out, mut last_at) = (0u64, 0u64, Instant::now());
    let mut last_checkpoint: Option<(u64, Instant)> = None;
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        tick.tick().await;
        let (read, written, errors) = (
            counts.read.load(Ordering::Relaxed),
            counts.written.load(Ordering::Relaxed),
            counts.errors.load(Ordering::Relaxed),
        );
        let now = Instant::now();
        let span = now - last_at;
        let (in_rate, out_rate) = (rate(read - last_in, span), rate(written - last_out, span));
        (last_in, last_out, last_at) = (read, written, now);
        if let Some(id) = checkpoints.latest() {
            if last_checkpoint.map(|(l, _)| l) != Some(id) {
                last_checkpoint = Some((id, now));
            }
        }
        let checkpoint = match last_checkpoint {
            Some((id, at)) => format!("checkpoint #{id} {}s ago", (now - at).as_secs()),
            None => "no checkpoint yet".to_owned(),
        };
        let progress = match total {
            Some(t) if t > 0 => {
                let overall = rate(read, now - started);
                let eta = if overall > 0.0 {
                    format!("ETA {:.0}s", t.saturating_sub(read) as f64 / overall)
                } else {
                    "ETA ?".to_owned()
                };
                format!(
                    " {} {:>3.0}% {eta}",
                    bar(read, t, 20),
                    100.0 * read as f64 / t as f64
                )
            }
            _ => String::new(),
        };
        let restarted = {
            let r = restarts.borrow();
            match (&r.last_failure, r.restarting) {
                (_, true) => format!(" RESTARTING (restart {})", r.restarts),
                (Some(_), false) => format!(" restarts {}", r.restarts),
                (None, _) => String::new(),
            }
        };
        let stalled = match stalls.borrow().as_ref() {
            Some(s) => format!(" STALLED ({s})"),
            None => String::new(),
        };
        let line = format!(
            "{name}: in {read} ({in_rate:.0}/s) out {written} ({out_rate:.0}/s) errors {errors} \
             {checkpoint}{restarted}{stalled}{progress}"
        );
        if terminal {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K{line}");
            let _ = err.flush();
        } else {
            tracing::info!(target: "rivus::status", "{line}");
        }
    }
}

/// Clears the status line (on a terminal).
pub(crate) fn clear() {
    if std::io::stderr().is_terminal() {
        let _ = write!(std::io::stderr(), "\r\x1b[2K");
    }
}

/// The end-of-run summary.
pub(crate) fn summary(name: &str, s: &JobSummary, counts: &Counts, guarantee: &str) -> String {
    let secs = s.duration.as_secs_f64();
    let errors = counts.errors.load(Ordering::Relaxed);
    let kinds: Vec<String> = counts
        .by_kind
        .lock()
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    let errors = if kinds.is_empty() {
        errors.to_string()
    } else {
        format!("{errors} ({})", kinds.join(", "))
    };
    let mut out = format!(
        "{name}: finished in {secs:.1}s\n  read        {} records ({:.0}/s)\n  written     {} records ({:.0}/s)\n  errors      {errors}\n",
        s.records_read,
        rate(s.records_read, s.duration),
        counts.written.load(Ordering::Relaxed),
        rate(counts.written.load(Ordering::Relaxed), s.duration),
    );
    if let Some(id) = s.restored_from {
        out.push_str(&format!("  resumed     from checkpoint #{id}\n"));
    }
    if s.restarts > 0 {
        out.push_str(&format!(
            "  restarts    {} (last failure: {})\n",
            s.restarts,
            s.last_failure.as_deref().unwrap_or("?")
        ));
    }
    out.push_str(&format!(
        "  checkpoints {} completed, {} aborted{}\n  guarantee   {guarantee}\n",
        s.checkpoints_completed,
        s.checkpoints_aborted,
        s.last_checkpoint
            .map(|id| format!(" (last #{id})"))
            .unwrap_or_default()
    ));
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn bars() {
        assert_eq!(super::bar(5, 10, 10), "[#####.....]");
        assert_eq!(super::bar(20, 10, 4), "[####]");
    }
}
