//! The recent checkpoints of a job — which, when, how long, how big, completed or aborted and
//! why — kept by the coordinator for status displays (the CLI's `/api/checkpoints`).

use parking_lot::Mutex;
use serde::Serialize;
use std::collections::VecDeque;

/// How many checkpoints a history keeps (the oldest are dropped).
pub const HISTORY_LEN: usize = 100;

/// One checkpoint, as it ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckpointRecord {
    /// The checkpoint id.
    pub id: u64,
    /// When it was triggered, in milliseconds since the Unix epoch.
    pub triggered_ms: u64,
    /// From the trigger to stored (or to the abort), in milliseconds.
    pub duration_ms: u64,
    /// The stored size in bytes (completed checkpoints only).
    pub bytes: Option<u64>,
    /// `completed` or `aborted`.
    pub result: &'static str,
    /// Why it was aborted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The final checkpoint of a graceful stop.
    pub is_final: bool,
}

/// The recent checkpoints, newest last, and how many completed and aborted in all; shared by
/// every attempt of a supervised job.
#[derive(Debug, Default)]
pub struct CheckpointHistory {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    entries: VecDeque<CheckpointRecord>,
    completed: u64,
    aborted: u64,
}

impl CheckpointHistory {
    pub(crate) fn record(&self, r: CheckpointRecord) {
        let mut i = self.inner.lock();
        if r.result == "completed" {
            i.completed += 1;
        } else {
            i.aborted += 1;
        }
        if i.entries.len() == HISTORY_LEN {
            i.entries.pop_front();
        }
        i.entries.push_back(r);
    }

    /// Checkpoints completed and aborted since the history began (not only those kept).
    pub fn totals(&self) -> (u64, u64) {
        let i = self.inner.lock();
        (i.completed, i.aborted)
    }

    /// The checkpoints kept, oldest first.
    pub fn recent(&self) -> Vec<CheckpointRecord> {
        self.inner.lock().entries.iter().cloned().collect()
    }

    /// The newest checkpoint that completed, and the newest that was aborted.
    pub fn last(&self) -> (Option<CheckpointRecord>, Option<CheckpointRecord>) {
        let i = self.inner.lock();
        let find = |result: &str| i.entries.iter().rev().find(|r| r.result == result).cloned();
        (find("completed"), find("aborted"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: u64, result: &'static str) -> CheckpointRecord {
        CheckpointRecord {
            id,
            triggered_ms: id,
            duration_ms: 1,
            bytes: None,
            result,
            reason: None,
            is_final: false,
        }
    }

    #[test]
    fn keeps_the_newest_and_finds_the_last_of_each_result() {
        let h = CheckpointHistory::default();
        for id in 0..(HISTORY_LEN as u64 + 5) {
            h.record(rec(id, if id % 10 == 3 { "aborted" } else { "completed" }));
        }
        let all = h.recent();
        assert_eq!(all.len(), HISTORY_LEN);
        assert_eq!(all[0].id, 5);
        let (done, aborted) = h.last();
        assert_eq!(done.map(|r| r.id), Some(HISTORY_LEN as u64 + 4));
        assert_eq!(aborted.map(|r| r.id), Some(103));
        // The totals count every checkpoint, not only those kept: 11 of 105 ended in 3.
        assert_eq!(h.totals(), (94, 11));
    }
}
