//! [`SequenceSource`]: an endless (or bounded) generator of sequence numbers, for benchmarks,
//! back-pressure and stop tests. Its position is checkpointed, so a restored job continues the
//! sequence without gaps or repeats.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rivus_sdk::prelude::*;

/// Subtask `i` of `p` emits `i, i + p, i + 2p, ...` below `limit` (or forever). The state is
/// the next value. `emitted` counts records emitted by all subtasks together.
#[derive(Debug, Clone)]
pub struct SequenceSource {
    subtask: u64,
    parallelism: u64,
    limit: Option<u64>,
    emitted: Arc<AtomicU64>,
    rate: Option<u64>,
    next: Option<Arc<AtomicU64>>,
    current: Option<Arc<AtomicU64>>,
}

impl SequenceSource {
    /// Subtask `subtask` of `parallelism`, emitting values below `limit` (`None`: forever, until
    /// stopped).
    pub fn new(
        subtask: usize,
        parallelism: usize,
        limit: Option<u64>,
        emitted: Arc<AtomicU64>,
    ) -> Self {
        SequenceSource {
            subtask: subtask as u64,
            parallelism: parallelism as u64,
            limit,
            emitted,
            rate: None,
            next: None,
            current: None,
        }
    }

    rivus_sdk::setters! {
        /// Keeps in `next` the highest next value of this subtask (across restarts: replayed
        /// values do not count twice). With parallelism 1, everything below it was emitted.
        track_next(next: Arc<AtomicU64>) => next = Some(next);

        /// Keeps in `current` the next value of this subtask's running attempt (a restored one
        /// starts at its checkpoint's): below [`track_next`](Self::track_next)'s value while a
        /// restarted job replays what the failed attempt had emitted past its last checkpoint.
        track_current(current: Arc<AtomicU64>) => current = Some(current);

        /// Emits at most `per_second` records per second (per subtask), serving checkpoints and
        /// stop requests while it waits.
        paced(per_second: u64) => rate = Some(per_second.max(1));
    }
}

#[async_trait]
impl RichFunction for SequenceSource {}

#[async_trait]
impl SourceFunction for SequenceSource {
    type Out = u64;
    /// The next value to emit, or `None` before the first one.
    type State = Option<u64>;

    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::ExactlyOnce
    }

    async fn run(&mut self, ctx: &mut SourceContext<u64, Option<u64>>) -> Result<()> {
        let mut next = ctx.state().unwrap_or(self.subtask);
        if let Some(current) = &self.current {
            current.store(next, Ordering::SeqCst);
        }
        let limit = self.limit.unwrap_or(u64::MAX);
        let mut count = 0u64;
        let started = std::time::Instant::now();
        let mut sent = 0u64;
        while next < limit && !ctx.is_stopping() {
            if let Some(rate) = self.rate {
                // Ahead of the rate: wait (in 100 records' steps) while serving checkpoints.
                let due = std::time::Duration::from_secs_f64(sent as f64 / rate as f64);
                if let Some(ahead) = due.checked_sub(started.elapsed()) {
                    ctx.wait_for(tokio::time::sleep(ahead)).await?;
                    continue;
                }
                sent += 1;
            }
            let v = next;
            next += self.parallelism;
            *ctx.state_mut() = Some(next);
            ctx.collect(v).await?;
            if let Some(high) = &self.next {
                high.fetch_max(next, Ordering::Relaxed);
            }
            if let Some(current) = &self.current {
                current.store(next, Ordering::SeqCst);
            }
            count += 1;
            if count == 1024 {
                self.emitted.fetch_add(count, Ordering::Relaxed);
                count = 0;
            }
        }
        self.emitted.fetch_add(count, Ordering::Relaxed);
        Ok(())
    }
}

/// Runs a job that writes `0..n` (from `parallelism` [`SequenceSource`] subtasks) into the sink
/// made by `sink(subtask)` (with the same parallelism, so it is chained) — the usual way a sink
/// test feeds its sink.
pub async fn run_sequence_into<S, F>(
    job: &str,
    n: u64,
    parallelism: usize,
    sink: F,
) -> Result<JobSummary>
where
    S: SinkFunction<u64> + 'static,
    F: Fn(usize) -> S,
{
    Pipeline::new(job)
        .source("seq", parallelism, |i| {
            SequenceSource::new(i, parallelism, Some(n), Arc::default())
        })
        .sink("sink", parallelism, sink)?
        .run()
        .await
}

/// Runs a job that writes `records` (one source subtask, in order) into the sink made by
/// `sink(0)`, without checkpoints.
pub async fn run_records_into<T, S, F>(job: &str, records: Vec<T>, sink: F) -> Result<JobSummary>
where
    T: Clone + Send + Sync + 'static,
    S: SinkFunction<T> + 'static,
    F: Fn(usize) -> S,
{
    let splits = Arc::new(vec![records]);
    Pipeline::new(job)
        .source("records", 1, |i| {
            crate::VecSource::new(Arc::clone(&splits), i, 1)
        })
        .sink("sink", 1, sink)?
        .run()
        .await
}
