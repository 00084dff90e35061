//! The changes of one row message: an update split into a delete and a write when it changed
//! the row's key (naming each other when the write lacks values), and the refusal of a
//! TRUNCATE.

use rivus_sdk::change::{MOVED_FROM, MOVED_TO};
use rivus_sdk::Error;

use crate::event::Op;
use crate::lsn::Lsn;
use crate::pgoutput::{Datum, Relation};

/// One change of a message, as `stream::emit` takes it.
pub(super) struct Step {
    pub(super) op: Op,
    pub(super) before: Option<Vec<Datum>>,
    pub(super) after: Option<Vec<Datum>>,
    /// A key change's marker: the field (`__moved_to` on its delete, `__moved_from` on its
    /// write) and the row whose key it names.
    pub(super) marker: Option<(&'static str, Vec<Datum>)>,
}

impl Step {
    pub(super) fn new(op: Op, before: Option<Vec<Datum>>, after: Option<Vec<Datum>>) -> Step {
        Step {
            op,
            before,
            after,
            marker: None,
        }
    }
}

/// The changes of an update. The old key comes alone (`K`) only when the update changed it;
/// the whole old row (`O`, `REPLICA IDENTITY FULL`) comes with every update, and a key change
/// is told by comparing the key columns. A key change is a delete of the old key and a write
/// of the new row (as Debezium gives it: a sink keyed by it must not keep the old row). When
/// the new row still lacks values (unchanged TOASTed columns, which only the old key's row
/// holds), the two name each other (`__moved_to`, `__moved_from`) and a sink applying them
/// moves the row, never writing the new key without those values.
pub(super) fn update(rel: &Relation, old: Option<(u8, Vec<Datum>)>, new: Vec<Datum>) -> Vec<Step> {
    let new = with_old_values(new, old.as_ref());
    let moved = match &old {
        Some((b'K', _)) => true,
        Some((b'O', o)) => rel
            .columns
            .iter()
            .zip(o.iter().zip(&new))
            .any(|(c, (a, b))| c.key && a != b),
        _ => false,
    };
    let old = match old {
        Some((_, old)) if moved => old,
        old => return vec![Step::new(Op::Update, old.map(|o| o.1), Some(new))],
    };
    if !new.iter().any(|d| matches!(d, Datum::Unchanged)) {
        return vec![
            Step::new(Op::Delete, Some(old), None),
            Step::new(Op::Create, None, Some(new)),
        ];
    }
    vec![
        Step {
            marker: Some((MOVED_TO, new.clone())),
            ..Step::new(Op::Delete, Some(old.clone()), None)
        },
        Step {
            marker: Some((MOVED_FROM, old)),
            ..Step::new(Op::Create, None, Some(new))
        },
    ]
}

/// The error of a `TRUNCATE` of followed tables: the replica would keep rows the source no
/// longer has, so the job stops there, naming the tables and the position.
pub(super) fn truncated(tables: &[String], commit: Option<Lsn>) -> Error {
    let at = commit.map_or_else(String::new, |l| {
        format!(" in the transaction committed at {l}")
    });
    Error::refused(
        "postgres-cdc",
        format!(
            "TRUNCATE of {}{at}: a truncate is not a row change the sinks can apply, and \
             leaving it out would keep the rows in every destination; empty the destination \
             tables, then start the job again from a new slot (or take the tables out of the \
             publication before truncating them)",
            tables.join(", ")
        ),
    )
}

/// `new` with each unchanged (TOASTed, untouched) value taken from the old row, when the
/// update carries the whole old row (`REPLICA IDENTITY FULL`: kind `O`).
fn with_old_values(mut new: Vec<Datum>, old: Option<&(u8, Vec<Datum>)>) -> Vec<Datum> {
    if let Some((b'O', old)) = old {
        for (n, o) in new.iter_mut().zip(old) {
            if matches!(n, Datum::Unchanged) && !matches!(o, Datum::Unchanged) {
                *n = o.clone();
            }
        }
    }
    new
}
