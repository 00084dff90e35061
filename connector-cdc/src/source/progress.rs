//! Where the snapshot is, kept in the checkpoint: per table, the key ranges read so far and the
//! WAL position (watermark) of the snapshot each range was read in. A snapshot interrupted by
//! a failure resumes after the last key a checkpoint holds, inside a newer snapshot; the stream
//! then leaves out a change older than the watermark of the range holding its key (the range's
//! rows already show it) and emits the rest — no row or change lost or doubled (`filter.rs`
//! places a key in the ranges).

use serde::{Deserialize, Serialize};

use crate::lsn::Lsn;

/// How far a range of a table's keys goes (its start is the end of the range before it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Upto {
    /// No row yet.
    Nothing,
    /// Up to this key (the text of each key column), included.
    Key(Vec<String>),
    /// To the end of the table.
    End,
}

/// Keys read inside one snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Range {
    /// Where the range ends.
    pub upto: Upto,
    /// The snapshot's position: changes committed before it are in the rows read.
    pub watermark: Lsn,
}

/// One table's snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableProgress {
    /// `schema.table`.
    pub table: String,
    /// The key columns the table is read in the order of.
    pub key: Vec<String>,
    /// The ranges read, in key order.
    pub ranges: Vec<Range>,
}

impl TableProgress {
    /// Whether every row was read.
    pub fn done(&self) -> bool {
        self.ranges.last().is_some_and(|r| r.upto == Upto::End)
    }

    /// The last key read, if any row was.
    pub fn last_key(&self) -> Option<&Vec<String>> {
        self.ranges.iter().rev().find_map(|r| match &r.upto {
            Upto::Key(k) => Some(k),
            _ => None,
        })
    }

    /// The newest watermark of the table's ranges: changes from it on are all emitted.
    pub fn newest(&self) -> Lsn {
        self.ranges
            .iter()
            .map(|r| r.watermark)
            .max()
            .unwrap_or_default()
    }
}

/// The snapshot of every table, in the order they are read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotProgress {
    /// Tables in reading order (all of them, from the start).
    pub tables: Vec<TableProgress>,
}

impl SnapshotProgress {
    /// The progress of `table`.
    pub fn table(&self, table: &str) -> Option<&TableProgress> {
        self.tables.iter().find(|t| t.table == table)
    }

    /// The newest watermark of all: once the stream is past it, nothing is left out.
    pub fn newest(&self) -> Lsn {
        self.tables
            .iter()
            .map(TableProgress::newest)
            .max()
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(ranges: Vec<(Upto, u64)>) -> TableProgress {
        TableProgress {
            table: "public.t".into(),
            key: vec!["id".into()],
            ranges: ranges
                .into_iter()
                .map(|(upto, w)| Range {
                    upto,
                    watermark: Lsn(w),
                })
                .collect(),
        }
    }

    #[test]
    fn ranges_say_what_was_read_and_when() {
        let t = table(vec![
            (Upto::Key(vec!["10".into()]), 100),
            (Upto::Nothing, 150),
            (Upto::End, 200),
        ]);
        assert!(t.done());
        assert_eq!(t.last_key(), Some(&vec!["10".to_owned()]));
        assert_eq!(t.newest(), Lsn(200));
        let unfinished = table(vec![(Upto::Key(vec!["10".into()]), 100)]);
        assert!(!unfinished.done());
        assert_eq!(unfinished.newest(), Lsn(100));
    }
}
