//! The sink's tables: one, or one per record from a template (`replica.{source.table}`). Each
//! is read from the catalog at its first record and its statements planned; at most
//! `max_open_tables` plans are kept (the least recently used is dropped and read again when a
//! record needs it). With schema evolution a missing table is created and a missing column
//! added before the record is converted (`crate::evolve`).

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use rivus_sdk::template::Template;
use rivus_sdk::Result;

use super::builder::Settings;
use super::rows::{self, RowChange};
use super::writer::Writer;
use crate::db::Pool;
use crate::dialect::Dialect;
use crate::evolve::{self, NewColumn, SchemaEvolution, SourceColumns};
use crate::statement::Plan;
use crate::table::{describe, TableSchema};

/// What a record's table is, for [`Tables::plan`].
pub(super) enum Planned {
    /// Write the record with this plan.
    Plan(Arc<Plan>),
    /// Nothing to do: a delete for a table that does not exist yet.
    Nothing,
    /// The record cannot be written there (for the error policy): why.
    Refused(String),
}

struct Entry {
    plan: Arc<Plan>,
    used: u64,
}

pub(super) struct Tables {
    settings: Arc<Settings>,
    template: Template,
    pool: Pool,
    dialect: Dialect,
    open: HashMap<String, Entry>,
    tick: u64,
    /// The plan of every record when the table is fixed and never changes.
    fixed: Option<Arc<Plan>>,
}

impl Tables {
    pub(super) fn new(settings: Arc<Settings>, template: Template, pool: Pool) -> Self {
        let dialect = pool.dialect();
        Tables {
            settings,
            template,
            pool,
            dialect,
            open: HashMap::new(),
            tick: 0,
            fixed: None,
        }
    }

    /// The plan of a fixed table that must exist (no template, no schema evolution), read at
    /// open so that a missing table or a bad key is refused before any record.
    pub(super) async fn open_fixed(&mut self, name: &str) -> Result<()> {
        let schema = self.describe(name).await?;
        let plan = self.build(&schema)?;
        self.fixed = Some(self.keep(name, Arc::new(plan)));
        Ok(())
    }

    /// The plan of every record, when the table is fixed and does not evolve.
    pub(super) fn fixed(&self) -> Option<Arc<Plan>> {
        self.fixed.clone()
    }

    /// The plan of a sink running its own statement (its "columns" are its parameters).
    pub(super) fn open_statement(&mut self, name: &str, params: &[String]) {
        let s = &self.settings;
        let plan = Plan::new(
            self.dialect,
            name,
            rows::statement_columns(params),
            Vec::new(),
            s.mode.clone(),
            s.method,
            s.bulk.max_actions.max(1),
        );
        self.fixed = Some(self.keep(name, Arc::new(plan)));
    }

    /// The table of `record` (its JSON form, for a template).
    pub(super) fn name<'a>(
        &'a self,
        record: Option<&Value>,
    ) -> std::result::Result<std::borrow::Cow<'a, str>, String> {
        match (self.template.fixed(), record) {
            (Some(t), _) => Ok(std::borrow::Cow::Borrowed(t)),
            (None, Some(r)) => self
                .template
                .render(r)
                .map_err(|e| format!("table `{}`: {e}", self.template)),
            (None, None) => Err("a table template needs JSON records".into()),
        }
    }

    /// The plan for `change` into `table`, the table created or widened first when the
    /// schema evolves; `record` is the record's JSON form (for the source's column types).
    /// Fields with a null value that name no column are taken out of the change then.
    pub(super) async fn plan(
        &mut self,
        table: &str,
        record: Option<&Value>,
        change: &mut RowChange,
        writer: &Writer,
    ) -> Result<Planned> {
        self.tick += 1;
        let plan = match self.open.get_mut(table) {
            Some(e) => {
                e.used = self.tick;
                Arc::clone(&e.plan)
            }
            None => {
                let mut schema = self.describe(table).await?;
                if schema.columns.is_empty() {
                    if self.settings.evolution == SchemaEvolution::None {
                        return Ok(Planned::Refused(format!("table `{table}` does not exist")));
                    }
                    let Some(row) = fields(change) else {
                        return Ok(Planned::Refused(format!("table `{table}` does not exist")));
                    };
                    if matches!(change, RowChange::Delete(_)) {
                        return Ok(Planned::Nothing);
                    }
                    let source = record.and_then(SourceColumns::of);
                    let key = self.settings.key.as_deref();
                    let columns = match evolve::new_table(self.dialect, row, source.as_ref(), key) {
                        Ok(c) => c,
                        Err(e) => {
                            return Ok(Planned::Refused(format!("creating table `{table}`: {e}")))
                        }
                    };
                    schema = self.create(table, &columns).await?;
                }
                match self.build(&schema) {
                    Ok(plan) => self.keep(table, Arc::new(plan)),
                    Err(e) => return Ok(Planned::Refused(e.to_string())),
                }
            }
        };
        if self.settings.evolution == SchemaEvolution::None || self.settings.columns.is_some() {
            return Ok(Planned::Plan(plan));
        }
        self.widen(table, plan, record, change, writer).await
    }

    /// Adds the columns `change` has and `plan` lacks (and drops its null fields naming no
    /// column: a null needs no column, and gives no type).
    async fn widen(
        &mut self,
        table: &str,
        plan: Arc<Plan>,
        record: Option<&Value>,
        change: &mut RowChange,
        writer: &Writer,
    ) -> Result<Planned> {
        let Some(row) = fields_mut(change) else {
            return Ok(Planned::Plan(plan));
        };
        let unknown = |name: &String| {
            !plan.columns.iter().any(|c| &c.name == name) && !plan.computed.contains(name)
        };
        row.retain(|name, v| !(v.is_null() && unknown(name)));
        let missing: Vec<String> = row.keys().filter(|n| unknown(n)).cloned().collect();
        if missing.is_empty() {
            return Ok(Planned::Plan(plan));
        }
        let source = record.and_then(SourceColumns::of);
        let mut schema = None;
        for name in &missing {
            let ty = evolve::column_type(self.dialect, name, source.as_ref(), row.get(name), false);
            let ty = match ty {
                Ok(Some(ty)) => ty,
                Ok(None) => continue,
                Err(e) => return Ok(Planned::Refused(format!("table `{table}`: {e}"))),
            };
            let column = NewColumn {
                name: name.clone(),
                ty,
                key: false,
            };
            schema = Some(self.add_column(table, &column, writer).await?);
        }
        let Some(schema) = schema else {
            return Ok(Planned::Plan(plan));
        };
        match self.build(&schema) {
            Ok(plan) => Ok(Planned::Plan(self.keep(table, Arc::new(plan)))),
            Err(e) => Ok(Planned::Refused(e.to_string())),
        }
    }

    /// Creates `table` (and its schema) on a connection of its own, committed at once:
    /// nobody holds a lock on a table that does not exist, and a table created ahead of its
    /// rows is harmless. Another subtask creating it meanwhile is no error.
    async fn create(&self, table: &str, columns: &[NewColumn]) -> Result<TableSchema> {
        let mut statements = Vec::new();
        statements.extend(evolve::create_schema_sql(self.dialect, table));
        statements.push(evolve::create_table_sql(self.dialect, table, columns));
        let mut conn = self.connection().await?;
        let mut failed = None;
        for sql in &statements {
            if let Err(e) = conn.raw(sql).await {
                failed = Some((sql.clone(), e));
                break;
            }
        }
        drop(conn);
        let schema = self.describe(table).await?;
        match failed {
            Some((sql, e)) if schema.columns.is_empty() => Err(crate::error::sql_error(
                format!("jdbc sink: creating table `{table}` (`{sql}`)"),
                &e,
            )),
            _ => {
                tracing::info!(table, columns = columns.len(), "jdbc sink: table created");
                metrics::counter!("rivus_jdbc_schema_changes_total", "change" => "create_table")
                    .increment(1);
                Ok(schema)
            }
        }
    }

    /// Adds `column` to `table`, and reads the table back. On PostgreSQL with transactions the
    /// change joins the checkpoint's open transaction (its own rows there hold a lock that a
    /// second connection would wait for); elsewhere a connection of its own commits it.
    async fn add_column(
        &self,
        table: &str,
        column: &NewColumn,
        writer: &Writer,
    ) -> Result<TableSchema> {
        let sql = evolve::add_column_sql(self.dialect, table, column);
        let schema = if self.settings.exactly_once && self.dialect == Dialect::Postgres {
            writer.alter_in_open(&sql, table).await?
        } else {
            let mut conn = self.connection().await?;
            let done = conn.raw(&sql).await;
            drop(conn);
            let schema = self.describe(table).await?;
            if let Err(e) = done {
                // Added meanwhile by another subtask (MySQL has no IF NOT EXISTS here)?
                if schema.column(&column.name).is_none() {
                    return Err(crate::error::sql_error(format!("jdbc sink: `{sql}`"), &e));
                }
            }
            schema
        };
        tracing::info!(table, column = %column.name, ty = %column.ty, "jdbc sink: column added");
        metrics::counter!("rivus_jdbc_schema_changes_total", "change" => "add_column").increment(1);
        Ok(schema)
    }

    async fn connection(&self) -> Result<crate::db::Conn> {
        self.pool
            .acquire()
            .await
            .map_err(|e| crate::error::sql_error("jdbc sink: connecting", &e))
    }

    async fn describe(&self, table: &str) -> Result<TableSchema> {
        let mut conn = self.connection().await?;
        describe(&mut conn, self.dialect, table)
            .await
            .map_err(|e| crate::error::sql_error(format!("jdbc sink: reading table `{table}`"), &e))
    }

    /// The statements of `schema` as the settings say (columns, key, mode).
    fn build(&self, schema: &TableSchema) -> Result<Plan> {
        let s = &self.settings;
        let (columns, keys) = rows::resolve_columns(s, schema)?;
        let computed = schema
            .columns
            .iter()
            .filter(|c| c.computed)
            .map(|c| c.name.clone())
            .collect();
        Ok(Plan::new(
            self.dialect,
            &schema.name,
            columns,
            keys,
            s.mode.clone(),
            s.method,
            s.bulk.max_actions.max(1),
        )
        .with_computed(computed))
    }

    /// Keeps `plan` for `table`, dropping the least recently used beyond the limit.
    fn keep(&mut self, table: &str, plan: Arc<Plan>) -> Arc<Plan> {
        if self.open.len() >= self.settings.max_open_tables && !self.open.contains_key(table) {
            let oldest = self
                .open
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.open.remove(&k);
            }
        }
        self.open.insert(
            table.to_owned(),
            Entry {
                plan: Arc::clone(&plan),
                used: self.tick,
            },
        );
        plan
    }
}

fn fields(change: &RowChange) -> Option<&Map<String, Value>> {
    match change {
        RowChange::Write(r)
        | RowChange::Delete(r)
        | RowChange::Update { row: r, .. }
        | RowChange::Move { row: r, .. } => Some(r),
        RowChange::WriteValues(_) | RowChange::Nothing => None,
    }
}

fn fields_mut(change: &mut RowChange) -> Option<&mut Map<String, Value>> {
    match change {
        RowChange::Write(r)
        | RowChange::Delete(r)
        | RowChange::Update { row: r, .. }
        | RowChange::Move { row: r, .. } => Some(r),
        RowChange::WriteValues(_) | RowChange::Nothing => None,
    }
}
