//! Statement text for one table: multi-row INSERT / upsert within the bind-parameter limit,
//! PostgreSQL's UNNEST and COPY forms, and multi-row DELETE by key.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::dialect::Dialect;
use crate::table::TableColumn;

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

/// The statements of one sink, built once and cached by row count.
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
    cache: Mutex<HashMap<(bool, usize), Arc<str>>>,
}

impl Plan {
    pub fn new(
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
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn column_list(&self) -> String {
        let names: Vec<String> = self
            .columns
            .iter()
            .map(|c| self.dialect.quote(&c.name))
            .collect();
        names.join(", ")
    }

    fn upsert(&self) -> String {
        if self.mode != WriteMode::Upsert {
            return String::new();
        }
        let keys: Vec<String> = self
            .keys
            .iter()
            .map(|&k| self.columns[k].name.clone())
            .collect();
        let updates: Vec<String> = (0..self.columns.len())
            .filter(|i| !self.keys.contains(i))
            .map(|i| self.columns[i].name.clone())
            .collect();
        self.dialect.upsert_clause(&keys, &updates)
    }

    fn cached(&self, delete: bool, rows: usize, build: impl FnOnce() -> String) -> Arc<str> {
        let mut cache = self.cache.lock();
        Arc::clone(
            cache
                .entry((delete, rows))
                .or_insert_with(|| Arc::from(build())),
        )
    }

    /// INSERT (or upsert) of `rows` rows with placeholders, row by row.
    pub fn write_sql(&self, rows: usize) -> Arc<str> {
        self.cached(false, rows, || {
            let n = self.columns.len();
            let mut values = Vec::with_capacity(rows);
            for r in 0..rows {
                let row: Vec<String> = self
                    .columns
                    .iter()
                    .enumerate()
                    .map(|(i, c)| self.dialect.placeholder(r * n + i + 1, c.cast.as_deref()))
                    .collect();
                values.push(format!("({})", row.join(", ")));
            }
            format!(
                "INSERT INTO {} ({}) VALUES {}{}",
                self.table,
                self.column_list(),
                values.join(", "),
                self.upsert()
            )
        })
    }

    /// PostgreSQL: INSERT (or upsert) of any number of rows from one array per column.
    pub fn unnest_sql(&self) -> Arc<str> {
        self.cached(false, 0, || {
            let arrays: Vec<String> = self
                .columns
                .iter()
                .enumerate()
                .map(|(i, c)| format!("${}::{}[]", i + 1, c.cast.as_deref().unwrap_or("text")))
                .collect();
            format!(
                "INSERT INTO {} ({}) SELECT * FROM UNNEST({}){}",
                self.table,
                self.column_list(),
                arrays.join(", "),
                self.upsert()
            )
        })
    }

    /// PostgreSQL: COPY in CSV.
    pub fn copy_sql(&self) -> String {
        format!(
            "COPY {} ({}) FROM STDIN (FORMAT csv)",
            self.table,
            self.column_list()
        )
    }

    /// DELETE of `rows` rows by key; the parameters are each row's key values in key order.
    pub fn delete_sql(&self, rows: usize) -> Arc<str> {
        self.cached(true, rows, || {
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
    pub fn max_delete_rows(&self) -> usize {
        (self.dialect.max_params() / self.keys.len().max(1)).min(self.max_rows.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Class;

    fn col(name: &str, cast: Option<&str>) -> TableColumn {
        TableColumn {
            name: name.into(),
            class: Class::Int,
            cast: cast.map(str::to_owned),
            generated: false,
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
            &*plan.write_sql(2),
            "INSERT INTO \"t\" (\"id\", \"v\") VALUES ($1::int8, $2::text), ($3::int8, $4::text) \
             ON CONFLICT (\"id\") DO UPDATE SET \"v\" = excluded.\"v\""
        );
        assert_eq!(
            &*plan.unnest_sql(),
            "INSERT INTO \"t\" (\"id\", \"v\") SELECT * FROM UNNEST($1::int8[], $2::text[]) \
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
        let sql = plan.write_sql(2);
        assert!(sql.starts_with("INSERT INTO \"t\" (\"c0\", "), "{sql}");
        assert_eq!(sql.matches('?').count(), 200);
    }
}
