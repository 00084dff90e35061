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

/// The recent checkpoints, newest last; shared by every attempt of a supervised job.
#[derive(Debug, Default)]
pub struct CheckpointHistory {
    entries: Mutex<VecDeque<CheckpointRecord>>,
}

impl CheckpointHistory {
    pub(crate) fn record(&self, r: CheckpointRecord) {
        let mut e = self.entries.lock();
        if e.len() == HISTORY_LEN {
            e.pop_front();
        }
        e.push_back(r);
    }

    /// The checkpoints kept, oldest first.
    pub fn recent(&self) -> Vec<CheckpointRecord> {
        self.entries.lock().iter().cloned().collect()
    }

    /// The newest checkpoint that completed, and the newest that was aborted.
    pub fn last(&self) -> (Option<CheckpointRecord>, Option<CheckpointRecord>) {
        let e = self.entries.lock();
        let find = |result: &str| e.iter().rev().find(|r| r.result == result).cloned();
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
    }
}
