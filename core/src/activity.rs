//! What each task is doing right now: the lifecycle call it is in (`invoke`,
//! `snapshot_state`, `notify_checkpoint_complete`, ...) and, inside it, the client call a
//! connector named with [`waiting`] — so that a job that makes no progress can say where it
//! waits (see [`Stall`](crate::runtime::Stall)), and a process stopped at once can say what it
//! left behind.
//!
//! A connector marks a call that may wait on its server:
//!
//! ```
//! # async fn commit() {}
//! # async fn demo() {
//! let _waiting = rivus_sdk::activity::waiting("kafka: commit_transaction");
//! commit().await;
//! # }
//! ```
//!
//! Outside a running task (a unit test, a blocking thread) the guard does nothing. The cost
//! is one uncontended lock per call, so mark calls (a request, a flush), not records.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

tokio::task_local! {
    static CURRENT: Arc<TaskActivity>;
}

/// One entry of a task's call stack.
#[derive(Debug, Clone)]
struct Call {
    label: Cow<'static, str>,
    since: Instant,
    /// Waiting for input or for downstream: the task is not the one holding things up.
    idle: bool,
}

/// The calls one task is in, outermost first.
#[derive(Debug)]
pub(crate) struct TaskActivity {
    task: String,
    subtask: usize,
    stack: Mutex<Vec<Call>>,
}

/// A call some task has been in for a while.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskWait {
    /// The stage (task) name.
    pub task: String,
    /// Its subtask.
    pub subtask: usize,
    /// The calls, outermost first, joined with ` › ` (`notify_checkpoint_complete › kafka:
    /// commit_transaction`).
    pub call: String,
    /// Since the outermost of them began.
    pub waiting: Duration,
}

impl std::fmt::Display for TaskWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` (subtask {}) in {} for {:.0}s",
            self.task,
            self.subtask,
            self.call,
            self.waiting.as_secs_f64()
        )
    }
}

impl TaskActivity {
    fn current(&self, now: Instant) -> Option<TaskWait> {
        let stack = self.stack.lock();
        let busy: Vec<&Call> = stack.iter().filter(|c| !c.idle).collect();
        let first = busy.first()?;
        Some(TaskWait {
            task: self.task.clone(),
            subtask: self.subtask,
            call: busy
                .iter()
                .map(|c| c.label.as_ref())
                .collect::<Vec<_>>()
                .join(" › "),
            waiting: now.saturating_duration_since(first.since),
        })
    }
}

/// Every task of the running attempt, each with its calls.
#[derive(Debug, Default)]
pub struct Activities {
    tasks: Mutex<Vec<Arc<TaskActivity>>>,
}

impl Activities {
    /// Forgets the tasks of an earlier attempt.
    pub(crate) fn reset(&self) {
        self.tasks.lock().clear();
    }

    /// A new task's activity.
    pub(crate) fn register(&self, task: &str, subtask: usize) -> Arc<TaskActivity> {
        let a = Arc::new(TaskActivity {
            task: task.to_owned(),
            subtask,
            stack: Mutex::new(Vec::new()),
        });
        self.tasks.lock().push(Arc::clone(&a));
        a
    }

    /// The tasks in a call now (not waiting for input or downstream), the longest first.
    pub fn waits(&self) -> Vec<TaskWait> {
        let now = Instant::now();
        let mut waits: Vec<TaskWait> = self
            .tasks
            .lock()
            .iter()
            .filter_map(|t| t.current(now))
            .collect();
        waits.sort_by_key(|w| std::cmp::Reverse(w.waiting));
        waits
    }

    /// The task holding things up: the one in the same call the longest.
    pub fn longest(&self) -> Option<TaskWait> {
        self.waits().into_iter().next()
    }
}

/// Runs `fut` (a task) with `activity` as its [`waiting`] target.
pub(crate) async fn scope<F: std::future::Future>(
    activity: Arc<TaskActivity>,
    fut: F,
) -> F::Output {
    CURRENT.scope(activity, fut).await
}

/// Marks the running task as in `label` until the guard is dropped. Nested marks show as
/// `outer › inner`.
pub fn waiting(label: impl Into<Cow<'static, str>>) -> Waiting {
    push(label.into(), false)
}

/// Awaits `fut` for at most `limit`, marked as `label` ([`waiting`]): `None` when the time
/// ran out (`fut` is dropped). The one way connectors bound a call to their server; each turns
/// `None` into its own retryable error naming `label` and `limit`.
pub async fn bounded<F: std::future::Future>(
    limit: Duration,
    label: impl Into<Cow<'static, str>>,
    fut: F,
) -> Option<F::Output> {
    let _waiting = waiting(label);
    tokio::time::timeout(limit, fut).await.ok()
}

/// Marks the running task as waiting for input or for downstream: shown, but never blamed
/// for a stall.
pub(crate) fn idle(label: &'static str) -> Waiting {
    push(Cow::Borrowed(label), true)
}

fn push(label: Cow<'static, str>, idle: bool) -> Waiting {
    let target = CURRENT.try_with(Arc::clone).ok();
    let depth = target.as_ref().map(|t| {
        let mut stack = t.stack.lock();
        stack.push(Call {
            label,
            since: Instant::now(),
            idle,
        });
        stack.len() - 1
    });
    Waiting { target, depth }
}

/// Drops the mark made by [`waiting`].
#[must_use = "the mark lasts as long as this guard"]
#[derive(Debug)]
pub struct Waiting {
    target: Option<Arc<TaskActivity>>,
    depth: Option<usize>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let (Some(t), Some(depth)) = (&self.target, self.depth) {
            t.stack.lock().truncate(depth);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn nested_marks_show_outermost_first_and_idle_ones_are_not_blamed() {
        let all = Activities::default();
        let sink = all.register("sink", 1);
        let source = all.register("source", 0);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let in_sink = scope(sink, async move {
            let _outer = waiting("notify_checkpoint_complete");
            let _inner = waiting("kafka: commit_transaction");
            let _ = rx.await;
        });
        let in_source = scope(source, async {
            let _idle = idle("waiting for downstream");
            tokio::task::yield_now().await;
            let waits = all.waits();
            assert_eq!(waits.len(), 1, "{waits:?}");
            assert_eq!(waits[0].task, "sink");
            assert_eq!(waits[0].subtask, 1);
            assert_eq!(
                waits[0].call,
                "notify_checkpoint_complete › kafka: commit_transaction"
            );
            tx.send(()).unwrap();
        });
        tokio::join!(in_sink, in_source);
        assert!(all.waits().is_empty(), "guards dropped: {:?}", all.waits());
    }

    #[tokio::test(start_paused = true)]
    async fn bounded_gives_up_at_its_limit() {
        let slow = bounded(
            Duration::from_secs(5),
            "x",
            tokio::time::sleep(Duration::from_secs(60)),
        );
        assert!(slow.await.is_none());
        let quick = bounded(Duration::from_secs(5), "x", async { 7 });
        assert_eq!(quick.await, Some(7));
    }

    #[test]
    fn outside_a_task_a_mark_does_nothing() {
        let _w = waiting("x");
    }
}
