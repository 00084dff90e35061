//! Which splits a subtask owns: the one rule every connector with a fixed list of splits
//! (queues, streams, SQL ranges, transactional ids, file lines) uses.
//!
//! Split `k` belongs to subtask `k % parallelism`. The rule is stable as long as the list and
//! the parallelism are, and after a change of parallelism every split still has exactly one
//! owner, so state keyed by split (not by subtask) can be handed to whoever owns it now.

/// Subtask `subtask` of `parallelism`, as seen by split ownership.
///
/// ```
/// use rivus_sdk::Share;
/// let share = Share::new(1, 3);
/// assert!(share.owns(4));
/// let mine: Vec<_> = share.pick(["a", "b", "c", "d", "e"]).collect();
/// assert_eq!(mine, ["b", "e"]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Share {
    subtask: usize,
    parallelism: usize,
}

impl Share {
    /// Subtask `subtask` of `parallelism` (a parallelism of 0 counts as 1).
    pub fn new(subtask: usize, parallelism: usize) -> Self {
        Share {
            subtask,
            parallelism: parallelism.max(1),
        }
    }

    /// The whole: one subtask owning everything.
    pub fn whole() -> Self {
        Share::new(0, 1)
    }

    /// This subtask's index.
    pub fn subtask(&self) -> usize {
        self.subtask
    }

    /// How many subtasks share the splits.
    pub fn parallelism(&self) -> usize {
        self.parallelism
    }

    /// The subtask that owns split `k`.
    pub fn owner(&self, k: usize) -> usize {
        k % self.parallelism
    }

    /// Whether this subtask owns split `k`.
    pub fn owns(&self, k: usize) -> bool {
        self.owner(k) == self.subtask
    }

    /// The items of `splits` (split `k` is the `k`-th item) that this subtask owns.
    pub fn pick<I: IntoIterator>(&self, splits: I) -> impl Iterator<Item = I::Item> {
        let share = *self;
        splits
            .into_iter()
            .enumerate()
            .filter(move |(k, _)| share.owns(*k))
            .map(|(_, item)| item)
    }

    /// The `n`-th split this subtask owns (`n` = 0, 1, …), for numbered splits without end.
    pub fn nth(&self, n: usize) -> usize {
        n * self.parallelism + self.subtask
    }

    /// Whether this subtask owns the split named `name`, for splits known by name rather than
    /// by place in a list (files under a prefix, which grows): by a hash of the name that is
    /// the same in every build and process (CRC-32), modulo the parallelism.
    pub fn owns_name(&self, name: &str) -> bool {
        self.owns(crc32fast::hash(name.as_bytes()) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_has_exactly_one_owner_and_keeps_it() {
        for p in 1..5 {
            for name in ["a.parquet", "dt=2024-03-01/part-1.jsonl", ""] {
                let owners = (0..p).filter(|&i| Share::new(i, p).owns_name(name)).count();
                assert_eq!(owners, 1, "{name} at {p}");
            }
        }
        // Stable: the same owner in every process (a hash that does not change between builds).
        assert!(Share::new(crc32fast::hash(b"x") as usize % 3, 3).owns_name("x"));
    }

    #[test]
    fn every_split_has_exactly_one_owner() {
        for p in 1..6 {
            for k in 0..50 {
                let owners = (0..p).filter(|&s| Share::new(s, p).owns(k)).count();
                assert_eq!(owners, 1, "split {k} of parallelism {p}");
            }
        }
        assert_eq!(Share::new(0, 0), Share::whole());
        let share = Share::new(2, 3);
        assert_eq!(
            (0..4).map(|n| share.nth(n)).collect::<Vec<_>>(),
            [2, 5, 8, 11]
        );
        assert!((0..4).all(|n| share.owns(share.nth(n))));
    }
}
