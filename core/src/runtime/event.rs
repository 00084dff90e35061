//! What flows between tasks: batches of records (with an optional timestamp column),
//! watermarks, checkpoint barriers, and the end of input — an explicit [`Event::End`], since a
//! channel that closes without it closed because its upstream failed or was cancelled.

use crate::context::NO_TIMESTAMP;

/// A batch of records; `timestamps`, when present, has one entry per value.
#[derive(Debug)]
pub(crate) struct Batch<T> {
    pub values: Vec<T>,
    pub timestamps: Option<Vec<i64>>,
}

impl<T> Batch<T> {
    pub(super) fn with_capacity(n: usize) -> Self {
        Batch {
            values: Vec::with_capacity(n),
            timestamps: None,
        }
    }

    #[inline]
    pub(super) fn push(&mut self, value: T, ts: Option<i64>) {
        match (ts, &mut self.timestamps) {
            (None, None) => {}
            (ts, Some(col)) => col.push(ts.unwrap_or(NO_TIMESTAMP)),
            (Some(t), col @ None) => {
                let mut c = vec![NO_TIMESTAMP; self.values.len()];
                c.push(t);
                *col = Some(c);
            }
        }
        self.values.push(value);
    }

    #[inline]
    pub(super) fn len(&self) -> usize {
        self.values.len()
    }

    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Takes the contents, leaving an empty batch with room for `capacity` records.
    pub(super) fn take(&mut self, capacity: usize) -> Batch<T> {
        std::mem::replace(self, Batch::with_capacity(capacity))
    }

    /// Iterates values with their timestamps.
    pub(super) fn into_iter(self) -> impl Iterator<Item = (T, Option<i64>)> {
        let ts = self.timestamps;
        self.values.into_iter().enumerate().map(move |(i, v)| {
            let t = ts.as_ref().map(|c| c[i]).filter(|&t| t != NO_TIMESTAMP);
            (v, t)
        })
    }
}

/// One message on a channel between two tasks.
#[derive(Debug)]
pub(crate) enum Event<T> {
    Records(Batch<T>),
    Watermark(i64),
    Barrier(u64),
    /// The upstream subtask finished its input. A channel that closes without it closed
    /// because the upstream failed or was cancelled: that is not the end of the input.
    End,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_column_appears_lazily() {
        let mut b = Batch::with_capacity(4);
        b.push("a", None);
        assert!(b.timestamps.is_none());
        b.push("b", Some(5));
        b.push("c", None);
        let got: Vec<_> = b.into_iter().collect();
        assert_eq!(got, vec![("a", None), ("b", Some(5)), ("c", None)]);
    }
}
