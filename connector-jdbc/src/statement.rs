//! Statement text for one table: multi-row INSERT / upsert within the bind-parameter limit,
//! PostgreSQL's UNNEST and COPY forms, and multi-row DELETE by key. A write that leaves some
//! columns as they are (a change without its unchanged TOASTed values) gets statements that
//! name only the other columns: its *shape*, the positions it keeps, is part of the cache key.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::dialect::Dialect;
use crate::table::TableColumn;
use crate::value::Class;

/// How rows are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteMode {
    /// Plain INSERT (append-only tables).
    Insert,
    /// INSERT that updates the row when the key exists (`ON CONFLICT ... DO UPDATE` on
    /// PostgreSQL and SQLite, `ON DUPLICATE KEY UPDATE` on MySQL/MariaDB). Writing the same
    /// record twice leaves the same row: this is what makes at-least-once effectively
    /// exactly-once.
    Upsert,
    /// Your own statement, run once per record with the record's fields `params` bound in
    /// order (`$1, $2` on PostgreSQL, `?` elsewhere). Values are bound by their JSON type
    /// (integer, float, boolean, text; objects and arrays as JSON text): on PostgreSQL cast
    /// where the column wants another type (`$3::timestamptz`).
    Statement {
        /// The SQL.
        sql: String,
        /// Record fields bound to its parameters, in order.
        params: Vec<String>,
    },
}

/// How a batch of new rows is sent to PostgreSQL (other databases use multi-row VALUES).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PgMethod {
    /// `INSERT ... VALUES (...), (...)`, as many rows per statement as the parameter limit allows.
    Values,
    /// `INSERT ... SELECT * FROM UNNEST($1::type[], ...)`: one array per column (default).
    Unnest,
    /// `COPY ... FROM STDIN (FORMAT csv)`: fastest for large batches; insert mode only.
    Copy,
}

/// The statements of one sink, built once and cached by row count and shape.
#[derive(Debug)]
pub(crate) struct Plan {
    pub dialect: Dialect,
    pub table: String,
    pub columns: Vec<TableColumn>,
    /// Indices into `columns` of the key (upsert conflict target and delete condition).
    pub keys: Vec<usize>,
    pub mode: WriteMode,
    pub method: PgMethod,
    pub max_rows: usize,
    /// The table's computed columns (`GENERATED ALWAYS AS`): a record's fields of these names
    /// are left out, never refused.
    pub computed: Vec<String>,
    cache: Mutex<HashMap<StatementKey, Arc<str>>>,
}

/// A cached statement: a delete or a write, its row count (0: UNNEST, any), and the shape of
/// the write (the positions of the columns it keeps).
type StatementKey = (bool, usize, Vec<usize>);

impl Plan {
    pub(crate) fn new(
        dialect: Dialect,
        table: &str,
        columns: Vec<TableColumn>,
        keys: Vec<usize>,
        mode: WriteMode,
        method: PgMethod,
        max_rows: usize,
    ) -> Self {
        let per_statement = dialect.max_params() / columns.len().max(1);
        Plan {
            dialect,
            table: dialect.quote(table),
            max_rows: max_rows.min(per_statement).max(1),
            columns,
            keys,
            mode,
            method,
            computed: Vec::new(),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The same plan, leaving fields named after `computed` columns out of records.
    pub(crate) fn with_computed(mut self, computed: Vec<String>) -> Self {
        self.computed = computed;
        self
    }

    /// The positions of the columns a write of shape `kept` names.
    pub(crate) fn written<'a>(&'a self, kept: &'a [usize]) -> impl Iterator<Item = usize> + 'a {
        (0..self.columns.len()).filter(move |i| kept.binary_search(i).is_err())
    }

    fn column_list(&self, kept: &[usize]) -> String {
        let names: Vec<String> = self
            .written(kept)
            .map(|i| self.dialect.quote(&self.columns[i].name))
            .collect();
        names.join(", ")
    }

    fn upsert(&self, kept: &[usize]) -> String {
        if self.mode != WriteMode::Upsert {
            return String::new();
        }
        let keys: Vec<String> = self
            .keys
            .iter()
            .map(|&k| self.columns[k].name.clone())
            .collect();
        let updates: Vec<String> = self
            .written(kept)
            .filter(|i| !self.keys.contains(i))
            .map(|i| self.columns[i].name.clone())
            .collect();
        self.dialect.upsert_clause(&keys, &updates)
    }

    fn cached(
        &self,
        delete: bool,
        rows: usize,
        kept: &[usize],
        build: impl FnOnce() -> String,
    ) -> Arc<str> {
        let mut cache = self.cache.lock();
        Arc::clone(
            cache
                .entry((delete, rows, kept.to_vec()))
                .or_insert_with(|| Arc::from(build())),
        )
    }

    /// INSERT (or upsert) of `rows` rows of shape `kept` with placeholders, row by row.
    pub(crate) fn write_sql(&self, rows: usize, kept: &[usize]) -> Arc<str> {
        self.cached(false, rows, kept, || {
            let written: Vec<usize> = self.written(kept).collect();
            let n = written.len();
            let mut values = Vec::with_capacity(rows);
            for r in 0..rows {
                let row: Vec<String> = written
                    .iter()
                    .enumerate()
                    .map(|(j, &i)| {
                        self.dialect
                            .placeholder(r * n + j + 1, self.columns[i].cast.as_deref())
                    })
                    .collect();
                values.push(format!("({})", row.join(", ")));
            }
            format!(
                "INSERT INTO {} ({}) VALUES {}{}",
                self.table,
                self.column_list(kept),
                values.join(", "),
                self.upsert(kept)
            )
        })
    }

    /// PostgreSQL: INSERT (or upsert) of any number of rows of shape `kept` from one array
    /// per column. Each array has the type its values are bound as (`int8[]`, `float8[]`,
    /// `bool[]`, `bytea[]`, `text[]`) and each column is cast to its own type in the select,
    /// so that any column type works, arrays and domains included (`_text[]` does not exist).
    pub(crate) fn unnest_sql(&self, kept: &[usize]) -> Arc<str> {
        self.cached(false, 0, kept, || {
            let written: Vec<usize> = self.written(kept).collect();
            let arrays: Vec<String> = written
                .iter()
                .enumerate()
                .map(|(j, &i)| format!("${}::{}[]", j + 1, bound_type(self.columns[i].class)))
                .collect();
            let selected: Vec<String> = written
                .iter()
                .enumerate()
                .map(|(j, &i)| match &self.columns[i].cast {
                    Some(cast) => format!("u.c{j}::{cast}"),
                    None => format!("u.c{j}"),
                })
                .collect();
            let aliases: Vec<String> = (0..written.len()).map(|j| format!("c{j}")).collect();
            format!(
                "INSERT INTO {} ({}) SELECT {} FROM UNNEST({}) AS u({}){}",
                self.table,
                self.column_list(kept),
                selected.join(", "),
                arrays.join(", "),
                aliases.join(", "),
                self.upsert(kept)
            )
        })
    }

    /// UPDATE moving one row from its old key: the columns of shape `kept` set (the new key
    /// among them; the kept ones stay), then the old key's values in the condition.
    pub(crate) fn move_sql(&self, kept: &[usize]) -> String {
        let written: Vec<usize> = self.written(kept).collect();
        let n = written.len();
        let set: Vec<String> = written
            .iter()
            .enumerate()
            .map(|(j, &i)| {
                let c = &self.columns[i];
                let p = self.dialect.placeholder(j + 1, c.cast.as_deref());
                format!("{} = {p}", self.dialect.quote(&c.name))
            })
            .collect();
        let condition: Vec<String> = self
            .keys
            .iter()
            .enumerate()
            .map(|(j, &k)| {
                let c = &self.columns[k];
                let p = self.dialect.placeholder(n + j + 1, c.cast.as_deref());
                format!("{} = {p}", self.dialect.quote(&c.name))
            })
            .collect();
        format!(
            "UPDATE {} SET {} WHERE {}",
            self.table,
            set.join(", "),
            condition.join(" AND ")
        )
    }

    /// PostgreSQL: COPY in CSV.
    pub(crate) fn copy_sql(&self) -> String {
        format!(
            "COPY {} ({}) FROM STDIN (FORMAT csv)",
            self.table,
            self.column_list(&[])
        )
    }

    /// DELETE of `rows` rows by key; the parameters are each row's key values in key order.
    pub(crate) fn delete_sql(&self, rows: usize) -> Arc<str> {
        self.cached(true, rows, &[], || {
            let k = self.keys.len();
            let conditions: Vec<String> = (0..rows)
                .map(|r| {
                    let parts: Vec<String> = self
                        .keys
                        .iter()
                        .enumerate()
                        .map(|(j, &c)| {
                            let col = &self.columns[c];
                            format!(
                                "{} = {}",
                                self.dialect.quote(&col.name),
                                self.dialect.placeholder(r * k + j + 1, col.cast.as_deref())
                            )
                        })
                        .collect();
                    format!("({})", parts.join(" AND "))
                })
                .collect();
            format!(
                "DELETE FROM {} WHERE {}",
                self.table,
                conditions.join(" OR ")
            )
        })
    }

    /// Rows per DELETE statement.
    pub(crate) fn max_delete_rows(&self) -> usize {
        (self.dialect.max_params() / self.keys.len().max(1)).min(self.max_rows.max(1))
    }
}

/// The PostgreSQL type values of `class` are bound as in UNNEST's arrays.
fn bound_type(class: Class) -> &'static str {
    match class {
        Class::Int => "int8",
        Class::Float => "float8",
        Class::Bool => "bool",
        Class::Bytes(_) => "bytea",
        _ => "text",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, cast: Option<&str>) -> TableColumn {
        TableColumn {
            name: name.into(),
            class: Class::Int,
            cast: cast.map(str::to_owned),
            generated: false,
            computed: false,
        }
    }

    #[test]
    fn postgres_statements() {
        let plan = Plan::new(
            Dialect::Postgres,
            "t",
            vec![col("id", Some("int8")), col("v", Some("text"))],
            vec![0],
            WriteMode::Upsert,
            PgMethod::Unnest,
            1000,
        );
        assert_eq!(
            &*plan.write_sql(2, &[]),
            "INSERT INTO \"t\" (\"id\", \"v\") VALUES ($1::int8, $2::text), ($3::int8, $4::text) \
             ON CONFLICT (\"id\") DO UPDATE SET \"v\" = excluded.\"v\""
        );
        assert_eq!(
            &*plan.unnest_sql(&[]),
            "INSERT INTO \"t\" (\"id\", \"v\") SELECT u.c0::int8, u.c1::text \
             FROM UNNEST($1::int8[], $2::int8[]) AS u(c0, c1) \
             ON CONFLICT (\"id\") DO UPDATE SET \"v\" = excluded.\"v\""
        );
        assert_eq!(
            &*plan.delete_sql(2),
            "DELETE FROM \"t\" WHERE (\"id\" = $1::int8) OR (\"id\" = $2::int8)"
        );
    }

    #[test]
    fn rows_per_statement_respect_the_parameter_limit() {
        let columns: Vec<TableColumn> = (0..100).map(|i| col(&format!("c{i}"), None)).collect();
        let plan = Plan::new(
            Dialect::Sqlite,
            "t",
            columns,
            vec![],
            WriteMode::Insert,
            PgMethod::Values,
            10_000,
        );
        assert_eq!(plan.max_rows, 327);
        let sql = plan.write_sql(2, &[]);
        assert!(sql.starts_with("INSERT INTO \"t\" (\"c0\", "), "{sql}");
        assert_eq!(sql.matches('?').count(), 200);
    }

    #[test]
    fn a_write_that_keeps_columns_names_only_the_others() {
        let mut array = col("tags", Some("\"pg_catalog\".\"_text\""));
        array.class = Class::Array(crate::value::Element::Plain);
        let plan = Plan::new(
            Dialect::Postgres,
            "t",
            vec![col("id", Some("int8")), col("body", Some("text")), array],
            vec![0],
            WriteMode::Upsert,
            PgMethod::Unnest,
            1000,
        );
        assert_eq!(
            &*plan.unnest_sql(&[1]),
            "INSERT INTO \"t\" (\"id\", \"tags\") SELECT u.c0::int8, \
             u.c1::\"pg_catalog\".\"_text\" FROM UNNEST($1::int8[], $2::text[]) AS u(c0, c1) \
             ON CONFLICT (\"id\") DO UPDATE SET \"tags\" = excluded.\"tags\""
        );
        assert_eq!(
            &*plan.write_sql(1, &[1]),
            "INSERT INTO \"t\" (\"id\", \"tags\") VALUES ($1::int8, $2::\"pg_catalog\".\"_text\") \
             ON CONFLICT (\"id\") DO UPDATE SET \"tags\" = excluded.\"tags\""
        );
        let my = Plan::new(
            Dialect::MySql,
            "t",
            vec![col("id", None), col("body", None), col("n", None)],
            vec![0],
            WriteMode::Upsert,
            PgMethod::Values,
            1000,
        );
        let sql = my.write_sql(2, &[1]);
        assert!(sql.contains("(`id`, `n`) VALUES (?, ?), (?, ?)"), "{sql}");
        assert!(!sql.contains("body"), "{sql}");
    }
}
