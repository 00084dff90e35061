//! Contiguous-offset tracking: records may complete out of order, but the position reported as
//! safe to commit only advances over a contiguous prefix of completed records.

use std::collections::VecDeque;

/// Tracks in-flight offsets of one ordered stream (a partition, a queue, a table range).
///
/// Offsets are registered in increasing order as records are read (gaps are allowed, as Kafka's
/// compaction and transaction markers leave them) and completed in any order.
/// [`OffsetTracker::committable`] is the highest offset such that it and every offset registered
/// before it are complete: the position a broker may be told without skipping anything.
/// Memory is proportional to the offsets in flight.
#[derive(Debug, Default, Clone)]
pub struct OffsetTracker {
    window: VecDeque<(u64, bool)>,
    committable: Option<u64>,
}

/// An offset was registered out of order or completed without being registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OffsetError {
    /// `offset` is not above the highest registered offset.
    #[error("offset {offset} registered after {highest}: offsets must increase")]
    NotIncreasing {
        /// The offending offset.
        offset: u64,
        /// The highest offset registered before it.
        highest: u64,
    },
    /// `offset` is not in flight.
    #[error("offset {0} completed but was not in flight")]
    Unknown(u64),
}

impl OffsetTracker {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    /// A tracker resuming after `offset`, which counts as already committed.
    pub fn resume_after(offset: u64) -> Self {
        OffsetTracker {
            window: VecDeque::new(),
            committable: Some(offset),
        }
    }

    /// Records that `offset` was read and is now in flight.
    pub fn register(&mut self, offset: u64) -> Result<(), OffsetError> {
        let highest = self.window.back().map(|(o, _)| *o).or(self.committable);
        if let Some(h) = highest {
            if offset <= h {
                return Err(OffsetError::NotIncreasing { offset, highest: h });
            }
        }
        self.window.push_back((offset, false));
        Ok(())
    }

    /// Records that `offset` completed (acknowledged, written, or handled by the error policy).
    pub fn complete(&mut self, offset: u64) -> Result<(), OffsetError> {
        let idx = self
            .window
            .binary_search_by_key(&offset, |(o, _)| *o)
            .map_err(|_| OffsetError::Unknown(offset))?;
        if self.window[idx].1 {
            return Err(OffsetError::Unknown(offset));
        }
        self.window[idx].1 = true;
        while let Some(&(o, true)) = self.window.front() {
            self.committable = Some(o);
            self.window.pop_front();
        }
        Ok(())
    }

    /// The highest offset whose predecessors (among registered offsets) are all complete.
    pub fn committable(&self) -> Option<u64> {
        self.committable
    }

    /// Number of offsets still in flight.
    pub fn in_flight(&self) -> usize {
        self.window.iter().filter(|(_, done)| !done).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advances_only_over_contiguous_prefix() {
        let mut t = OffsetTracker::new();
        for o in [5, 7, 9, 10] {
            t.register(o).unwrap();
        }
        assert_eq!(t.committable(), None);
        t.complete(9).unwrap();
        t.complete(7).unwrap();
        assert_eq!(t.committable(), None, "5 still in flight");
        t.complete(5).unwrap();
        assert_eq!(t.committable(), Some(9));
        assert_eq!(t.in_flight(), 1);
        t.complete(10).unwrap();
        assert_eq!(t.committable(), Some(10));
    }

    #[test]
    fn rejects_misuse() {
        let mut t = OffsetTracker::resume_after(100);
        assert_eq!(
            t.register(100),
            Err(OffsetError::NotIncreasing {
                offset: 100,
                highest: 100
            })
        );
        t.register(101).unwrap();
        assert_eq!(t.complete(102), Err(OffsetError::Unknown(102)));
        t.complete(101).unwrap();
        assert_eq!(t.complete(101), Err(OffsetError::Unknown(101)));
        assert_eq!(t.committable(), Some(101));
    }
}
