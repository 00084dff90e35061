//! A batch reduced to its effect: whether its keys are distinct, and one change per key
//! ([`net_changes`]) — what lets an upsert batch run as one DELETE and one upsert per shape.

use crate::change::Change;

/// Whether no two changes of `items` have the same key.
pub(super) fn distinct_keys(items: &[Change], keys: &[usize]) -> bool {
    let mut seen = std::collections::HashSet::with_capacity(items.len());
    items.iter().all(|c| {
        let mut key = Vec::with_capacity(16 * keys.len());
        for &k in keys {
            c.values[k].key_bytes(&mut key);
        }
        seen.insert(key)
    })
}

/// What a batch of upserts and deletes does, one change per key: the deletes to run first
/// (a key deleted, or deleted and written again), then the writes grouped by shape (each key's
/// writes merged: a later write that keeps a column takes it from the earlier one). Changes
/// of different keys commute, so this is the batch's effect with the fewest statements — and
/// PostgreSQL refuses one statement that upserts a key twice.
pub(super) fn net_changes(items: &[Change], keys: &[usize]) -> (Vec<Change>, Vec<Vec<Change>>) {
    /// A key's net change.
    enum Net {
        Write(Change),
        Delete(Change),
        Replace(Change, Change),
    }
    fn merged(earlier: &Change, later: &Change) -> Change {
        let mut out = later.clone();
        out.kept.retain(|&i| {
            let earlier_has = earlier.kept.binary_search(&i).is_err();
            if earlier_has {
                out.values[i] = earlier.values[i].clone();
            }
            !earlier_has
        });
        out
    }
    let mut index: std::collections::HashMap<Vec<u8>, usize> =
        std::collections::HashMap::with_capacity(items.len());
    let mut nets: Vec<Net> = Vec::with_capacity(items.len());
    let mut key = Vec::new();
    for c in items {
        key.clear();
        for &k in keys {
            c.values[k].key_bytes(&mut key);
        }
        let Some(&at) = index.get(&key) else {
            index.insert(key.clone(), nets.len());
            nets.push(if c.delete {
                Net::Delete(c.clone())
            } else {
                Net::Write(c.clone())
            });
            continue;
        };
        let net = &mut nets[at];
        *net = match (std::mem::replace(net, Net::Delete(c.clone())), c.delete) {
            (_, true) => Net::Delete(c.clone()),
            (Net::Write(w), false) => Net::Write(merged(&w, c)),
            (Net::Delete(d), false) => Net::Replace(d, c.clone()),
            (Net::Replace(d, w), false) => Net::Replace(d, merged(&w, c)),
        };
    }
    let mut deletes = Vec::new();
    let mut shapes: Vec<Vec<Change>> = Vec::new();
    let mut shape_of: std::collections::HashMap<Vec<usize>, usize> =
        std::collections::HashMap::new();
    let mut add = |w: Change| {
        let at = *shape_of.entry(w.kept.clone()).or_insert_with(|| {
            shapes.push(Vec::new());
            shapes.len() - 1
        });
        shapes[at].push(w);
    };
    for net in nets {
        match net {
            Net::Write(w) => add(w),
            Net::Delete(d) => deletes.push(d),
            Net::Replace(d, w) => {
                deletes.push(d);
                add(w);
            }
        }
    }
    (deletes, shapes)
}

#[cfg(test)]
mod tests {
    use super::{net_changes, Change};
    use crate::value::SqlValue;

    fn write(id: i64, body: Option<&str>, n: i64) -> Change {
        let kept = if body.is_none() { vec![1] } else { vec![] };
        Change {
            delete: false,
            values: vec![
                SqlValue::Int(Some(id)),
                SqlValue::Text(body.map(str::to_owned)),
                SqlValue::Int(Some(n)),
            ],
            kept,
            moved_from: None,
        }
    }

    fn delete(id: i64) -> Change {
        Change {
            delete: true,
            values: vec![
                SqlValue::Int(Some(id)),
                SqlValue::Text(None),
                SqlValue::Int(None),
            ],
            kept: vec![],
            moved_from: None,
        }
    }

    fn ids(v: &[Change]) -> Vec<(i64, Vec<usize>, SqlValue, SqlValue)> {
        v.iter()
            .map(|c| {
                let SqlValue::Int(Some(id)) = c.values[0] else {
                    panic!()
                };
                (id, c.kept.clone(), c.values[1].clone(), c.values[2].clone())
            })
            .collect()
    }

    #[test]
    fn a_batch_nets_to_one_change_per_key_and_never_loses_a_kept_column() {
        let items = vec![
            write(1, Some("big"), 1),
            write(1, None, 2), // keeps body: merged with the write before it
            write(2, None, 1), // keeps body: nothing earlier in the batch, stays partial
            delete(3),
            write(3, Some("again"), 1), // deleted then written: both run
            write(4, Some("x"), 1),
            delete(4), // written then deleted: a delete
            write(2, None, 5),
        ];
        let (deletes, shapes) = net_changes(&items, &[0]);
        let deleted: Vec<i64> = ids(&deletes).into_iter().map(|t| t.0).collect();
        assert_eq!(deleted, vec![3, 4]);
        assert_eq!(shapes.len(), 2, "full rows and rows that keep `body`");
        let text = |s: &str| SqlValue::Text(Some(s.into()));
        assert_eq!(
            ids(&shapes[0]),
            vec![
                (1, vec![], text("big"), SqlValue::Int(Some(2))),
                (3, vec![], text("again"), SqlValue::Int(Some(1))),
            ]
        );
        assert_eq!(
            ids(&shapes[1]),
            vec![(2, vec![1], SqlValue::Text(None), SqlValue::Int(Some(5)))]
        );
    }
}
