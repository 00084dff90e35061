//! Records as rows: the change a record makes, the columns a sink writes, and the conversion
//! of each record's fields into bound values (a wrong type is named by column).

use serde_json::{Map, Value};

use rivus_sdk::{Error, Result};

use crate::change::Change;
use crate::statement::{Plan, WriteMode};
use crate::table::{TableColumn, TableSchema};
use crate::value::{BytesText, Class, SqlValue};

/// A row to write: column name → value.
pub type Row = Map<String, Value>;

/// What a record does to the table.
#[derive(Debug, Clone, PartialEq)]
pub enum RowChange {
    /// Insert the row (or upsert it, in [`WriteMode::Upsert`]).
    Write(Row),
    /// Delete the row with the key found in these fields.
    Delete(Row),
    /// Like `Write` in [`WriteMode::Upsert`], leaving the columns named in `unchanged` as
    /// they are in an existing row: a change that did not carry them (PostgreSQL's unchanged
    /// TOASTed values). The upsert names only the other columns.
    Update {
        /// The columns the change carries.
        row: Row,
        /// Columns to leave as they are (never a key column).
        unchanged: Vec<String>,
    },
    /// Like `Update`, moving the row from the key in `from` (a key change): the row there
    /// takes the new key and the carried columns, keeping the others.
    Move {
        /// The columns the change carries, the new key among them.
        row: Row,
        /// Columns to leave as they are.
        unchanged: Vec<String>,
        /// The old key's fields.
        from: Row,
    },
    /// Nothing to write: the first half of a key change, whose second half moves the row.
    Nothing,
    /// Like `Write`, with the values in the order of the sink's columns (the configured
    /// [`columns`](crate::JdbcSinkBuilder::columns), else the table's): no field names to look up,
    /// the fastest form.
    WriteValues(Vec<Value>),
}

/// The "columns" of a custom statement: its parameters, bound by their JSON type.
pub(super) fn statement_columns(params: &[String]) -> Vec<TableColumn> {
    params
        .iter()
        .map(|p| TableColumn {
            name: p.clone(),
            class: Class::Any,
            cast: None,
            generated: false,
            computed: false,
        })
        .collect()
}

/// The columns written and the key's positions among them.
pub(super) fn resolve_columns(
    s: &super::builder::Settings,
    table: &TableSchema,
) -> Result<(Vec<TableColumn>, Vec<usize>)> {
    if table.columns.is_empty() {
        return Err(Error::config(
            "table",
            format!("table `{}` does not exist", table.name),
        ));
    }
    let key: Vec<String> = s.key.clone().unwrap_or_else(|| table.primary_key.clone());
    for k in &key {
        if table.column(k).is_none() {
            return Err(Error::config(
                "key",
                format!("table `{}` has no column `{k}`", table.name),
            ));
        }
    }
    let mut columns: Vec<TableColumn> = match &s.columns {
        Some(names) => names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                table.column(n).cloned().ok_or_else(|| {
                    Error::config(
                        format!("columns[{i}]"),
                        format!("table `{}` has no column `{n}`", table.name),
                    )
                })
            })
            .collect::<Result<_>>()?,
        None => table
            .columns
            .iter()
            .filter(|c| !c.generated || key.contains(&c.name))
            .cloned()
            .collect(),
    };
    if let Some((i, c)) = columns.iter().enumerate().find(|(_, c)| c.computed) {
        return Err(Error::config(
            format!("columns[{i}]"),
            format!(
                "column `{}` of `{}` is computed by the database (GENERATED ALWAYS AS) and \
                 cannot be written",
                c.name, table.name
            ),
        ));
    }
    // A key the database generates stays out of inserts that do not name it (no upserts or
    // deletes by key then).
    let mut key = key;
    if s.mode == WriteMode::Insert
        && key.iter().any(|k| {
            !columns.iter().any(|c| &c.name == k) && table.column(k).is_some_and(|c| c.generated)
        })
    {
        key.clear();
    }
    for k in &key {
        if !columns.iter().any(|c| &c.name == k) {
            columns.push(table.column(k).cloned().expect("checked above"));
        }
    }
    let bytes_text = s.bytes_text.unwrap_or(if s.apply_changes {
        BytesText::Base64
    } else {
        BytesText::Utf8
    });
    for c in &mut columns {
        if let Class::Bytes(_) = c.class {
            c.class = Class::Bytes(bytes_text);
        }
        if !s.apply_changes {
            c.class = c.class.without_change_encodings();
        }
    }
    let keys: Vec<usize> = key
        .iter()
        .map(|k| {
            columns
                .iter()
                .position(|c| &c.name == k)
                .expect("added above")
        })
        .collect();
    if s.mode == WriteMode::Upsert && keys.is_empty() {
        return Err(Error::config(
            "key",
            format!(
                "upsert needs a key and table `{}` has no primary key: set one",
                table.name
            ),
        ));
    }
    Ok((columns, keys))
}

/// `row` as values in the plan's column order, or what is wrong with it (with the record,
/// rebuilt, for the dead letter).
pub(super) fn to_change(
    plan: &Plan,
    ignore_unknown: bool,
    change: RowChange,
) -> std::result::Result<Change, (String, Row)> {
    let (delete, mut row, unchanged, from) = match change {
        RowChange::Write(r) => (false, r, Vec::new(), None),
        RowChange::Delete(r) => (true, r, Vec::new(), None),
        RowChange::Update { row, unchanged } => (false, row, unchanged, None),
        RowChange::Move {
            row,
            unchanged,
            from,
        } => (false, row, unchanged, Some(from)),
        RowChange::WriteValues(values) => return positional(plan, values),
        RowChange::Nothing => return Err(("a change that writes nothing".into(), Row::new())),
    };
    let moved_from = from
        .map(|from| old_key(plan, &from))
        .transpose()
        .map_err(|reason| (reason, row.clone()))?;
    // Columns left as they are: their positions, in column order.
    let mut kept = Vec::new();
    if !unchanged.is_empty() {
        if plan.mode != WriteMode::Upsert {
            return Err((
                "a change that leaves columns unchanged needs mode = \"upsert\"".into(),
                row,
            ));
        }
        for (i, c) in plan.columns.iter().enumerate() {
            if unchanged.contains(&c.name) {
                if plan.keys.contains(&i) {
                    let reason = format!("key column `{}` is marked unchanged", c.name);
                    return Err((reason, row));
                }
                kept.push(i);
            }
        }
    }
    if delete && plan.keys.is_empty() {
        return Err((
            "deletes need a key; the table has no primary key".into(),
            row,
        ));
    }
    let mut values = Vec::with_capacity(plan.columns.len());
    // Fields are taken out of the row as they are converted: what is left names no column.
    let restore = |values: Vec<SqlValue>, mut row: Row| {
        for (c, v) in plan.columns.iter().zip(values) {
            row.insert(c.name.clone(), v.to_json());
        }
        row
    };
    for (i, c) in plan.columns.iter().enumerate() {
        if kept.binary_search(&i).is_ok() {
            values.push(SqlValue::null(c.class));
            continue;
        }
        let v = match row.remove(&c.name) {
            Some(v) => match SqlValue::convert_owned(v, c.class) {
                Ok(v) => v,
                Err((e, v)) => {
                    let reason = format!("column `{}`: {e}", c.name);
                    let mut row = restore(values, row);
                    row.insert(c.name.clone(), v);
                    return Err((reason, row));
                }
            },
            None if delete && plan.keys.contains(&i) => {
                let reason = format!("key field `{}` is missing", c.name);
                return Err((reason, restore(values, row)));
            }
            None => SqlValue::null(c.class),
        };
        values.push(v);
    }
    if !ignore_unknown {
        // Computed columns are the database's to fill: a change source's row carries them.
        if let Some(f) = row.keys().find(|f| !plan.computed.contains(f)) {
            let reason = format!("field `{f}` names no column of the table");
            return Err((reason, restore(values, row)));
        }
    }
    Ok(Change {
        delete,
        values,
        kept,
        moved_from,
    })
}

/// The values of a moved row's old key, in the plan's key order.
fn old_key(plan: &Plan, from: &Row) -> std::result::Result<Vec<SqlValue>, String> {
    if plan.mode != WriteMode::Upsert || plan.keys.is_empty() {
        return Err("a key change needs mode = \"upsert\" on a key".into());
    }
    plan.keys
        .iter()
        .map(|&k| {
            let c = &plan.columns[k];
            match from.get(&c.name) {
                None | Some(Value::Null) => Err(format!(
                    "the key change's old key (`{}`) has no `{}`",
                    rivus_sdk::change::MOVED_FROM,
                    c.name
                )),
                Some(v) => SqlValue::convert_owned(v.clone(), c.class).map_err(|(e, _)| {
                    format!(
                        "the key change's old key (`{}`), column `{}`: {e}",
                        rivus_sdk::change::MOVED_FROM,
                        c.name
                    )
                }),
            }
        })
        .collect()
}

/// Positional values (`RowChange::WriteValues`) in the plan's column order.
fn positional(plan: &Plan, values: Vec<Value>) -> std::result::Result<Change, (String, Row)> {
    let as_row = |values: Vec<Value>| -> Row {
        plan.columns
            .iter()
            .map(|c| c.name.clone())
            .chain((plan.columns.len()..).map(|i| format!("#{i}")))
            .zip(values)
            .collect()
    };
    if values.len() != plan.columns.len() {
        let reason = format!(
            "{} values for {} columns ({})",
            values.len(),
            plan.columns.len(),
            plan.columns
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        return Err((reason, as_row(values)));
    }
    // Checked first, then converted in place: the vector's allocation is reused (a `Value`
    // and a `SqlValue` have the same size), one allocation less per record.
    let bad = values
        .iter()
        .zip(&plan.columns)
        .find_map(|(v, c)| SqlValue::check(v, c.class).err().map(|e| (c, e)));
    if let Some((c, e)) = bad {
        return Err((format!("column `{}`: {e}", c.name), as_row(values)));
    }
    let out: Vec<SqlValue> = values
        .into_iter()
        .enumerate()
        .map(|(i, v)| SqlValue::convert_checked(v, plan.columns[i].class))
        .collect();
    Ok(Change {
        delete: false,
        values: out,
        kept: Vec::new(),
        moved_from: None,
    })
}
