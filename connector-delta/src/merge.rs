//! Applying a change stream by key (`apply_changes`): a MERGE per checkpoint, copy-on-write.
//!
//! The files sink writes each change as a row of a **change file** under `_changes/` (hidden
//! from readers): the row's columns, `_change` (`write` or `delete`) and `_unchanged` (the
//! columns an UPDATE did not carry — unchanged TOASTed values — as a JSON array). When the
//! checkpoint completes, the table reads the writer's change files of that checkpoint, keeps the
//! last change of each key ([`reduce`]), and commits one version (carrying the writer's
//! application transaction, as appends do) that removes every data file holding a changed key
//! and adds it rewritten without those rows, plus a file of the written rows. An unchanged
//! column takes its value from the row it replaces. Deletion vectors would spare the rewrite,
//! but `deltalake` (delta-rs) 1.6 cannot read a table that has them; rewriting files is what
//! its own MERGE does.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use delta_kernel::arrow::array::{Array, AsArray, BooleanArray, RecordBatch};
use delta_kernel::arrow::compute::{
    concat_batches, filter_record_batch, sort_to_indices, take_record_batch,
};
use delta_kernel::arrow::datatypes::{Int64Type, Schema as ArrowSchema};
use delta_kernel::arrow::json::{ArrayWriter, ReaderBuilder};
use delta_kernel::engine::arrow_conversion::TryFromKernel;
use delta_kernel::engine::arrow_data::ArrowEngineData;
use delta_kernel::expressions::{Expression, Predicate, Scalar};
use delta_kernel::schema::{DataType, SchemaRef};
use delta_kernel::{Engine, FileMeta, FilteredEngineData, KernelError, KernelResult, SnapshotRef};
use serde_json::{Map, Value};
use url::Url;

use rivus_connector_files::{Column, ColumnType};
use rivus_sdk::change::Change;

/// The column of a change file saying what the row is: `write` or `delete`.
pub(crate) const CHANGE: &str = "_change";
/// The column of a change file naming the columns a write did not carry (a JSON array).
pub(crate) const UNCHANGED: &str = "_unchanged";
/// The column of a change file naming the old key of a write that moves its row (a key
/// change whose new row lacks values: they are the old key's row's), as a JSON object.
pub(crate) const MOVED_FROM: &str = "_moved_from";

/// The columns of the change files for a table with `columns`: all nullable (a delete holds
/// only its key), and the two of the change.
pub(crate) fn change_columns(columns: Vec<Column>) -> Vec<Column> {
    columns
        .into_iter()
        .map(|c| Column::nullable(c.name, c.ty))
        .chain([
            Column::nullable(CHANGE, ColumnType::String),
            Column::nullable(UNCHANGED, ColumnType::Json),
            Column::nullable(MOVED_FROM, ColumnType::Json),
        ])
        .collect()
}

/// The row of a change file for `record` (a change record in either shape `Change` reads);
/// the error says what is wrong with it.
pub(crate) fn change_row(key: &[String], record: &Value) -> Result<Value, String> {
    let only_key = |r: Map<String, Value>| -> Map<String, Value> {
        key.iter()
            .filter_map(|k| r.get(k).map(|v| (k.clone(), v.clone())))
            .collect()
    };
    let (mut row, change, unchanged, from) = match Change::of(record)? {
        Change::Write {
            row,
            unchanged,
            moved_from,
        } => (row, "write", unchanged, moved_from.map(only_key)),
        Change::Delete(before) => (only_key(before), "delete", Vec::new(), None),
        // The write of the new key that follows moves the row: nothing happens here.
        Change::MovedOut { key: before, .. } => (only_key(before), "moved", Vec::new(), None),
    };
    if let Some(k) = key.iter().find(|k| row.get(*k).is_none_or(Value::is_null)) {
        return Err(format!("the {change} has no value for key column `{k}`"));
    }
    row.insert(CHANGE.into(), Value::from(change));
    if !unchanged.is_empty() {
        row.insert(UNCHANGED.into(), Value::from(unchanged));
    }
    if let Some(from) = from {
        if let Some(k) = key.iter().find(|k| from.get(*k).is_none_or(Value::is_null)) {
            return Err(format!("the key change's old key has no value for `{k}`"));
        }
        row.insert(MOVED_FROM.into(), Value::Object(from));
    }
    Ok(Value::Object(row))
}

/// The last change of a key in a checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Last {
    /// The row as it is now; `unchanged`: columns to take from the table's row of key
    /// `from` (its own key, or the key a key change moved it from).
    Write {
        row: Map<String, Value>,
        unchanged: Vec<String>,
        from: String,
    },
    Delete,
}

/// The last change of each key among change rows `rows` (in the order they happened): a write
/// that did not carry a column takes it from an earlier write of the checkpoint — of its own
/// key, or of the key it moved from, which is then deleted.
pub(crate) fn reduce(
    key: &[String],
    rows: impl IntoIterator<Item = Map<String, Value>>,
) -> KernelResult<BTreeMap<String, Last>> {
    let mut last: BTreeMap<String, Last> = BTreeMap::new();
    for mut row in rows {
        let k = key_of(&row, key)
            .ok_or_else(|| KernelError::generic("a change row without its key"))?;
        let change = row.remove(CHANGE);
        let unchanged: Vec<String> = match row.remove(UNCHANGED) {
            Some(Value::String(text)) => serde_json::from_str(&text).unwrap_or_default(),
            _ => Vec::new(),
        };
        let moved_from = match row.remove(MOVED_FROM) {
            Some(Value::String(text)) => serde_json::from_str::<Map<String, Value>>(&text)
                .ok()
                .and_then(|m| key_of(&m, key)),
            _ => None,
        };
        match change.as_ref().and_then(Value::as_str) {
            Some("delete") => {
                last.insert(k, Last::Delete);
                continue;
            }
            Some("moved") => continue,
            _ => {}
        }
        let source = moved_from.clone().unwrap_or_else(|| k.clone());
        let mut missing = Vec::new();
        let mut from = source.clone();
        match last.get(&source) {
            Some(Last::Write {
                row: before,
                unchanged: before_missing,
                from: before_from,
            }) => {
                for c in unchanged {
                    if let Some(v) = before.get(&c) {
                        row.insert(c, v.clone());
                    } else if before_missing.contains(&c) {
                        missing.push(c);
                    }
                    // Else null before it in this checkpoint.
                }
                from = before_from.clone();
            }
            _ => missing = unchanged,
        }
        if let Some(old) = moved_from.filter(|old| *old != k) {
            last.insert(old, Last::Delete);
        }
        last.insert(
            k,
            Last::Write {
                row,
                unchanged: missing,
                from,
            },
        );
    }
    Ok(last)
}

/// A key's text: its columns' values joined (strings as they are, other values as JSON);
/// `None` when one is missing.
fn key_of(row: &Map<String, Value>, key: &[String]) -> Option<String> {
    let mut out = String::new();
    for (i, k) in key.iter().enumerate() {
        if i > 0 {
            out.push('\u{1f}');
        }
        match row.get(k)? {
            Value::Null => return None,
            Value::String(s) => out.push_str(s),
            v => out.push_str(&v.to_string()),
        }
    }
    Some(out)
}

/// The rows of `batch` as JSON objects (nulls left out).
pub(crate) fn rows_of(batch: &RecordBatch) -> KernelResult<Vec<Map<String, Value>>> {
    let mut w = ArrayWriter::new(Vec::new());
    w.write_batches(&[batch])
        .and_then(|()| w.finish())
        .map_err(|e| KernelError::generic(format!("rows as JSON: {e}")))?;
    let bytes = w.into_inner();
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_slice(&bytes).map_err(|e| KernelError::generic(format!("rows as JSON: {e}")))
}

/// Reads the Parquet file `file` with `schema` (columns it lacks read as null).
pub(crate) fn read(
    engine: &dyn Engine,
    file: &FileMeta,
    schema: &SchemaRef,
) -> KernelResult<Vec<RecordBatch>> {
    let mut out = Vec::new();
    for data in engine.parquet_handler().read_parquet_files(
        std::slice::from_ref(file),
        Arc::clone(schema),
        None,
    )? {
        out.push(
            ArrowEngineData::try_from_engine_data(data?)?
                .record_batch()
                .clone(),
        );
    }
    Ok(out)
}

/// What applying a checkpoint's changes to a version of the table came to.
pub(crate) struct Applied {
    /// The data files to remove (rows of the scan's file list, selected).
    pub(crate) removes: Vec<FilteredEngineData>,
    /// Written rows whose unchanged columns had no earlier value (left null).
    pub(crate) unknown: usize,
    /// Data files whose keys were read, and those rewritten.
    pub(crate) read: usize,
    pub(crate) rewritten: usize,
}

/// Applies `last` (by key columns `key`) to `snapshot`, whose files are under `root`: the
/// rows that stay in the files holding changed keys, and the written rows, go to `emit` in
/// batches of about `file_bytes` (in memory), sorted by key — a file each. Files whose key
/// statistics exclude every changed key (a single key column of integers or text) are not read.
pub(crate) fn apply(
    engine: &dyn Engine,
    snapshot: &SnapshotRef,
    (root, key, file_bytes): (&Url, &[String], usize),
    last: &BTreeMap<String, Last>,
    emit: &mut dyn FnMut(RecordBatch) -> KernelResult<()>,
) -> KernelResult<Applied> {
    let schema = snapshot.schema();
    let arrow = Arc::new(ArrowSchema::try_from_kernel(schema.as_ref())?);
    let key_schema = schema.project(key)?;
    let key_columns = key
        .iter()
        .map(|k| arrow.index_of(k))
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = Output {
        sort: match key {
            [k] => arrow.index_of(k).ok(),
            _ => None,
        },
        arrow: Arc::clone(&arrow),
        limit: file_bytes.max(1),
        pending: Vec::new(),
        bytes: 0,
        emit,
    };
    // Rows a write takes the columns it did not carry from, by key: its own key's, or the
    // key it moved from.
    let wanted: std::collections::HashSet<&str> = last
        .values()
        .filter_map(|l| match l {
            Last::Write {
                unchanged, from, ..
            } if !unchanged.is_empty() => Some(from.as_str()),
            _ => None,
        })
        .collect();
    let mut replaced: HashMap<String, Map<String, Value>> = HashMap::new();
    let (mut removes, mut read_files, mut rewritten) = (Vec::new(), 0, 0);
    let scan = Arc::clone(snapshot)
        .scan_builder()
        .with_predicate(key_range(&schema, key, last))
        .build()?;
    for meta in scan.scan_metadata(engine)? {
        let (data, selected) = meta?.scan_files.into_parts();
        let files = ArrowEngineData::try_from_engine_data(data)?;
        let list = files.record_batch();
        let column = |name: &str| {
            list.column_by_name(name)
                .cloned()
                .ok_or_else(|| KernelError::generic(format!("the scan's files lack `{name}`")))
        };
        let (paths, sizes) = (column("path")?, column("size")?);
        let (paths, sizes) = (paths.as_string::<i32>(), sizes.as_primitive::<Int64Type>());
        // Deletion vectors written by another engine since the job started: rewriting such a
        // file from its Parquet alone would bring its deleted rows back.
        let vectors = list.column_by_name("deletionVector").cloned();
        let has_vector = |i: usize| {
            vectors
                .as_ref()
                .and_then(|v| v.as_struct_opt())
                .is_some_and(|v| {
                    v.is_valid(i)
                        && v.column_by_name("storageType")
                            .is_some_and(|t| t.is_valid(i))
                })
        };
        let mut remove = vec![false; list.num_rows()];
        for (i, gone) in remove.iter_mut().enumerate() {
            if !selected.get(i).copied().unwrap_or(true) || paths.is_null(i) {
                continue;
            }
            let file = FileMeta {
                location: root
                    .join(paths.value(i))
                    .map_err(|e| KernelError::generic(format!("{}: {e}", paths.value(i))))?,
                last_modified: 0,
                size: sizes.value(i).max(0) as u64,
            };
            read_files += 1;
            let touched = read(engine, &file, &key_schema)?
                .iter()
                .map(rows_of)
                .collect::<KernelResult<Vec<_>>>()?
                .iter()
                .flatten()
                .any(|r| key_of(r, key).is_some_and(|k| last.contains_key(&k)));
            if !touched {
                continue;
            }
            if has_vector(i) {
                return Err(KernelError::generic(format!(
                    "the data file {} has a deletion vector (written by another engine), which \
                     this sink cannot apply: a rewrite would bring its deleted rows back; \
                     compact the table without deletion vectors (REORG … APPLY (PURGE)) before \
                     applying changes",
                    paths.value(i)
                )));
            }
            *gone = true;
            rewritten += 1;
            for batch in read(engine, &file, &schema)? {
                // The keys as JSON (the key columns only); a whole row only where a write
                // takes columns from it.
                let keys = rows_of(&batch.project(&key_columns)?)?;
                let mut keep = Vec::with_capacity(keys.len());
                for (i, r) in keys.iter().enumerate() {
                    let k = key_of(r, key);
                    let hit = k.as_ref().and_then(|k| last.get(k));
                    if let Some(k) = k.as_ref().filter(|k| wanted.contains(k.as_str())) {
                        let row = rows_of(&batch.slice(i, 1))?.pop().unwrap_or_default();
                        replaced.insert(k.clone(), row);
                    }
                    keep.push(Some(hit.is_none()));
                }
                out.push(filter_record_batch(&batch, &BooleanArray::from(keep))?)?;
            }
        }
        if remove.iter().any(|r| *r) {
            removes.push(FilteredEngineData::try_new(files, remove)?);
        }
    }
    let mut unknown = 0;
    let mut written = Vec::new();
    for l in last.values() {
        let Last::Write {
            row,
            unchanged,
            from,
        } = l
        else {
            continue;
        };
        let mut row = row.clone();
        if !unchanged.is_empty() {
            match replaced.get(from) {
                Some(before) => {
                    for c in unchanged {
                        if let Some(v) = before.get(c) {
                            row.insert(c.clone(), v.clone());
                        }
                    }
                }
                None => unknown += 1,
            }
        }
        written.push(Value::Object(row));
    }
    if !written.is_empty() {
        let mut decoder = ReaderBuilder::new(Arc::clone(&arrow))
            .with_batch_size(written.len())
            .build_decoder()?;
        decoder.serialize(&written)?;
        if let Some(batch) = decoder.flush()? {
            out.push(batch)?;
        }
    }
    out.flush()?;
    Ok(Applied {
        removes,
        unknown,
        read: read_files,
        rewritten,
    })
}

/// The range of the changed keys, for the scan to skip the files whose statistics lie outside
/// it: a single key column of integers or text; `None` (every file) otherwise.
fn key_range(
    schema: &SchemaRef,
    key: &[String],
    last: &BTreeMap<String, Last>,
) -> Option<Arc<Predicate>> {
    let [k] = key else { return None };
    let ty = schema.field(k)?.data_type().clone();
    let scalars: Vec<Scalar> = if ty == DataType::LONG {
        let v: Vec<i64> = last.keys().filter_map(|t| t.parse().ok()).collect();
        [v.iter().min()?, v.iter().max()?]
            .map(|n| Scalar::Long(*n))
            .to_vec()
    } else if ty == DataType::INTEGER {
        let v: Vec<i32> = last.keys().filter_map(|t| t.parse().ok()).collect();
        [v.iter().min()?, v.iter().max()?]
            .map(|n| Scalar::Integer(*n))
            .to_vec()
    } else if ty == DataType::STRING {
        // The map is ordered by text: its first and last keys.
        [last.keys().next()?, last.keys().next_back()?]
            .map(|t| Scalar::String(t.clone()))
            .to_vec()
    } else {
        return None;
    };
    let column = Expression::column([k.as_str()]);
    Some(Arc::new(Predicate::and(
        column.clone().ge(Expression::literal(scalars[0].clone())),
        column.le(Expression::literal(scalars[1].clone())),
    )))
}

/// The rows a merge writes, gathered into files of about `limit` bytes (in memory), each
/// sorted by the key column when there is one (so that files hold narrow key ranges).
struct Output<'a> {
    arrow: Arc<ArrowSchema>,
    sort: Option<usize>,
    limit: usize,
    pending: Vec<RecordBatch>,
    bytes: usize,
    emit: &'a mut dyn FnMut(RecordBatch) -> KernelResult<()>,
}

impl Output<'_> {
    fn push(&mut self, batch: RecordBatch) -> KernelResult<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.bytes += batch.get_array_memory_size();
        self.pending.push(batch);
        if self.bytes >= self.limit {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> KernelResult<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut batch = concat_batches(&self.arrow, &self.pending)?;
        let bytes = std::mem::take(&mut self.bytes).max(1);
        self.pending.clear();
        if let Some(i) = self.sort {
            let order = sort_to_indices(batch.column(i), None, None)?;
            batch = take_record_batch(&batch, &order)?;
        }
        // A batch larger than a file (a checkpoint's many written rows) goes out in slices.
        let rows = batch.num_rows();
        let per_file = (rows * self.limit / bytes).clamp(1, rows.max(1));
        let mut at = 0;
        while at < rows {
            let len = per_file.min(rows - at);
            (self.emit)(batch.slice(at, len))?;
            at += len;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key() -> Vec<String> {
        vec!["id".into()]
    }

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    fn envelope(op: &str, before: Value, after: Value) -> Value {
        json!({"op": op, "before": before, "after": after, "source": {"table": "t"}})
    }

    #[test]
    fn change_records_become_rows_of_the_change_files() {
        let w = change_row(
            &key(),
            &envelope(
                "u",
                Value::Null,
                json!({"id": 1, "doc": "__debezium_unavailable_value", "n": 2}),
            ),
        )
        .unwrap();
        assert_eq!(
            w,
            json!({"id": 1, "n": 2, "_change": "write", "_unchanged": ["doc"]})
        );
        let d = change_row(
            &key(),
            &envelope("d", json!({"id": 1, "n": 2}), Value::Null),
        )
        .unwrap();
        assert_eq!(d, json!({"id": 1, "_change": "delete"}));
        let e = change_row(&key(), &envelope("c", Value::Null, json!({"n": 2}))).unwrap_err();
        assert!(e.contains("`id`"), "{e}");
    }

    #[test]
    fn the_last_change_of_each_key_wins_and_unchanged_columns_come_from_earlier_writes() {
        let rows = [
            json!({"id": 1, "doc": "a", "n": 1, "_change": "write"}),
            json!({"id": 1, "n": 2, "_change": "write", "_unchanged": "[\"doc\"]"}),
            json!({"id": 2, "n": 1, "_change": "write"}),
            json!({"id": 2, "_change": "delete"}),
            json!({"id": 3, "n": 3, "_change": "write", "_unchanged": "[\"doc\"]"}),
        ]
        .map(obj);
        let last = reduce(&key(), rows).unwrap();
        assert_eq!(
            last["1"],
            Last::Write {
                row: obj(json!({"id": 1, "doc": "a", "n": 2})),
                unchanged: vec![],
                from: "1".into(),
            }
        );
        assert_eq!(last["2"], Last::Delete);
        assert_eq!(
            last["3"],
            Last::Write {
                row: obj(json!({"id": 3, "n": 3})),
                unchanged: vec!["doc".into()],
                from: "3".into(),
            }
        );
    }

    #[test]
    fn a_key_change_takes_the_old_keys_values_and_deletes_it() {
        let out = json!({"op": "d", "before": {"id": 1}, "after": null, "source": {},
                         "__moved_to": {"id": 9}});
        assert_eq!(
            change_row(&key(), &out).unwrap(),
            json!({"id": 1, "_change": "moved"})
        );
        let into = json!({"op": "c", "before": null, "source": {},
                          "after": {"id": 9, "doc": "__debezium_unavailable_value", "n": 5},
                          "__moved_from": {"id": 1}});
        assert_eq!(
            change_row(&key(), &into).unwrap(),
            json!({"id": 9, "n": 5, "_change": "write", "_unchanged": ["doc"],
                   "_moved_from": {"id": 1}})
        );
        // Key 1 written in the checkpoint, then moved to 9 and on to 12; key 2 moved to 5
        // with its value only in the table.
        let rows = [
            json!({"id": 1, "doc": "a", "n": 1, "_change": "write"}),
            json!({"id": 1, "_change": "moved"}),
            json!({"id": 9, "n": 5, "_change": "write", "_unchanged": "[\"doc\"]",
                   "_moved_from": "{\"id\":1}"}),
            json!({"id": 9, "_change": "moved"}),
            json!({"id": 12, "n": 6, "_change": "write", "_unchanged": "[\"doc\"]",
                   "_moved_from": "{\"id\":9}"}),
            json!({"id": 2, "_change": "moved"}),
            json!({"id": 5, "n": 7, "_change": "write", "_unchanged": "[\"doc\"]",
                   "_moved_from": "{\"id\":2}"}),
        ]
        .map(obj);
        let last = reduce(&key(), rows).unwrap();
        assert_eq!(last["1"], Last::Delete);
        assert_eq!(last["9"], Last::Delete);
        assert_eq!(
            last["12"],
            Last::Write {
                row: obj(json!({"id": 12, "n": 6, "doc": "a"})),
                unchanged: vec![],
                from: "1".into(),
            }
        );
        assert_eq!(last["2"], Last::Delete);
        assert_eq!(
            last["5"],
            Last::Write {
                row: obj(json!({"id": 5, "n": 7})),
                unchanged: vec!["doc".into()],
                from: "2".into(),
            }
        );
    }

    #[test]
    fn keys_join_their_columns() {
        let k = vec!["a".to_owned(), "b".to_owned()];
        assert_eq!(
            key_of(&obj(json!({"a": 1, "b": "x"})), &k).as_deref(),
            Some("1\u{1f}x")
        );
        assert_eq!(key_of(&obj(json!({"a": 1})), &k), None);
    }
}
