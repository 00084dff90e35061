//! Where the snapshot is, kept in the checkpoint: per table, the key ranges read so far and the
//! WAL position (watermark) of the snapshot each range was read in. A snapshot interrupted by
//! a failure resumes after the last key a checkpoint holds, inside a newer snapshot; the stream
//! then leaves out a change older than the watermark of the range holding its key (the range's
//! rows already show it) and emits the rest — no row or change lost or doubled (`filter.rs`
//! places a key in the ranges).
//!
//! A table read by several subtasks is cut into parts (keys after one bound up to the next);
//! each part has ranges of its own, and once every part is read they are joined into one
//! table's ranges for the stream.

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

/// One table's snapshot, or one part of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableProgress {
    /// The part's number in the snapshot's plan (the parts of a table are numbered in key
    /// order); the subtask `part % readers` reads it.
    #[serde(default)]
    pub part: usize,
    /// `schema.table`.
    pub table: String,
    /// The key columns the table is read in the order of.
    pub key: Vec<String>,
    /// The ranges read, in key order.
    pub ranges: Vec<Range>,
    /// The part's keys are after this one (`None`: from the table's first).
    #[serde(default)]
    pub from: Option<Vec<String>>,
    /// The part's keys are up to this one, included (`None`: to the table's last).
    #[serde(default)]
    pub to: Option<Vec<String>>,
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

    /// Where reading goes on: after the last key read, or after the part's start.
    pub fn resume_after(&self) -> Option<&Vec<String>> {
        self.last_key().or(self.from.as_ref())
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
    /// The tables' ranges from their parts, every one of them read: a part's ranges follow
    /// the part before it, the end of all but a table's last part being that part's bound.
    pub fn join(mut parts: Vec<TableProgress>) -> SnapshotProgress {
        parts.sort_by_key(|p| p.part);
        let mut tables: Vec<TableProgress> = Vec::new();
        for p in parts {
            let ranges = p.ranges.into_iter().map(|mut r| {
                if r.upto == Upto::End {
                    if let Some(to) = &p.to {
                        r.upto = Upto::Key(to.clone());
                    }
                }
                r
            });
            match tables.last_mut().filter(|t| t.table == p.table) {
                Some(t) => t.ranges.extend(ranges),
                None => tables.push(TableProgress {
                    part: tables.len(),
                    table: p.table,
                    key: p.key,
                    ranges: ranges.collect(),
                    from: None,
                    to: None,
                }),
            }
        }
        SnapshotProgress { tables }
    }

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
            part: 0,
            from: None,
            to: None,
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

    #[test]
    fn parts_join_into_one_table_in_key_order() {
        let key = |k: &str| Some(vec![k.to_owned()]);
        let mut first = table(vec![(Upto::Key(vec!["5".into()]), 100), (Upto::End, 200)]);
        first.to = key("10");
        let mut second = table(vec![(Upto::End, 100)]);
        (second.part, second.from, second.to) = (1, key("10"), key("20"));
        let mut third = table(vec![(Upto::Nothing, 100), (Upto::End, 300)]);
        (third.part, third.from) = (2, key("20"));
        let mut other = table(vec![(Upto::End, 100)]);
        (other.part, other.table) = (3, "public.u".into());
        assert_eq!(second.resume_after(), Some(&vec!["10".to_owned()]));
        let joined = SnapshotProgress::join(vec![third, other, second, first]);
        assert_eq!(joined.tables.len(), 2);
        let t = joined.table("public.t").expect("joined");
        let ends: Vec<(Upto, u64)> = t
            .ranges
            .iter()
            .map(|r| (r.upto.clone(), r.watermark.0))
            .collect();
        assert_eq!(
            ends,
            vec![
                (Upto::Key(vec!["5".into()]), 100),
                (Upto::Key(vec!["10".into()]), 200),
                (Upto::Key(vec!["20".into()]), 100),
                (Upto::Nothing, 100),
                (Upto::End, 300),
            ]
        );
        assert!(t.done());
        assert_eq!(joined.newest(), Lsn(300));
    }
}
