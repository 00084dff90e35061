//! The control plane between the checkpoint coordinator and the tasks: commands to tasks (a
//! mailbox whose pending mail a source can check with one atomic load) and reports back.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;

use super::output::Snapshot;

/// A command from the coordinator (or job handle) to a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Command {
    /// Sources: snapshot and emit barrier `id`.
    Trigger(u64),
    /// Checkpoint `id` is stored.
    Complete(u64),
    /// Checkpoint `id` will not complete.
    Abort(u64),
    /// Sources: stop reading and return from `run` (graceful stop).
    Stop,
    /// Sources: flush buffered records (bounds latency for slow sources).
    Tick,
    /// Finished sources: the final checkpoint is done, close the outputs.
    Shutdown,
}

/// A task's report to the coordinator.
#[derive(Debug)]
pub(crate) enum Report {
    /// Task `task` processed barrier `id`; `states` are its operators' snapshots, by name with
    /// the subtask index.
    Ack {
        id: u64,
        task: usize,
        subtask: usize,
        states: Snapshot,
    },
    /// Source task `task`'s `run` returned; it now only serves checkpoints until shutdown.
    SourceFinished { task: usize },
    /// A source subtask emitted its first record of this run.
    FirstRecord,
}

/// The sending half of a task's mailbox.
#[derive(Debug, Clone)]
pub(crate) struct MailboxSender {
    tx: mpsc::UnboundedSender<Command>,
    flag: Arc<AtomicBool>,
}

impl MailboxSender {
    /// Delivers `cmd`; a task that already ended is ignored.
    pub(crate) fn send(&self, cmd: Command) {
        if self.tx.send(cmd).is_ok() {
            self.flag.store(true, Ordering::Release);
        }
    }
}

/// The receiving half of a task's mailbox.
#[derive(Debug)]
pub(crate) struct Mailbox {
    rx: mpsc::UnboundedReceiver<Command>,
    flag: Arc<AtomicBool>,
}

impl Mailbox {
    pub(crate) fn new() -> (MailboxSender, Mailbox) {
        let (tx, rx) = mpsc::unbounded_channel();
        let flag = Arc::new(AtomicBool::new(false));
        (
            MailboxSender {
                tx,
                flag: Arc::clone(&flag),
            },
            Mailbox { rx, flag },
        )
    }

    /// True when mail may be waiting (one atomic load: cheap enough for every record).
    #[inline]
    pub(crate) fn has_mail(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    /// Takes the next command without waiting.
    pub(crate) fn try_recv(&mut self) -> Option<Command> {
        self.flag.store(false, Ordering::Release);
        match self.rx.try_recv() {
            Ok(c) => {
                // More may be queued behind it.
                self.flag.store(true, Ordering::Release);
                Some(c)
            }
            Err(_) => None,
        }
    }

    /// Waits for the next command; `None` once every sender is gone.
    pub(crate) async fn recv(&mut self) -> Option<Command> {
        self.rx.recv().await
    }
}
