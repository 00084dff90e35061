//! [`JdbcSink`]: records → rows → batched statements through core's BulkProcessor, at-least-once
//! on every database and exactly-once on PostgreSQL with prepared transactions.

mod prepared;
mod writer;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use rivus_core::bulk::{BulkConfig, BulkProcessor, NoopListener};
use rivus_core::error_policy::{ErrorHandler, ErrorPolicy};
use rivus_core::prelude::*;
use rivus_core::schema::SchemaError;
use rivus_core::{CompletedCheckpoints, Restored};

use crate::db::{describe, Pool};
use crate::dialect::Dialect;
use crate::statement::{PgMethod, Plan, WriteMode};
use crate::table::{describe as describe_table, TableColumn};
use crate::value::SqlValue;

use prepared::Prepared;
pub(crate) use writer::Change;
use writer::Writer;

/// A row to write: column name → value.
pub type Row = Map<String, Value>;

/// What a record does to the table.
#[derive(Debug, Clone, PartialEq)]
pub enum RowChange {
    /// Insert the row (or upsert it, in [`WriteMode::Upsert`]).
    Write(Row),
    /// Delete the row with the key found in these fields.
    Delete(Row),
    /// Like `Write`, with the values in the order of the sink's columns (the configured
    /// [`columns`](JdbcSinkBuilder::columns), else the table's): no field names to look up,
    /// the fastest form.
    WriteValues(Vec<Value>),
}

type Mapper<T> = dyn Fn(&T) -> Result<RowChange, SchemaError> + Send + Sync;

/// The checkpointed state of one sink subtask: its prepared, not yet committed transactions.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct JdbcSinkState {
    /// Transaction ids (`<prefix>:<subtask>:<checkpoint>`).
    pub prepared: Vec<String>,
}

#[derive(Debug, Clone)]
struct Settings {
    url: String,
    table: String,
    columns: Option<Vec<String>>,
    key: Option<Vec<String>>,
    mode: WriteMode,
    method: PgMethod,
    bulk: BulkConfig,
    policy: ErrorPolicy,
    exactly_once: bool,
    prefix: Option<String>,
    ignore_unknown: bool,
    timeout: Duration,
}

/// Builds a [`JdbcSink`].
#[derive(Debug)]
pub struct JdbcSinkBuilder {
    s: Settings,
}

impl JdbcSinkBuilder {
    /// Columns to write (default: every column the database does not fill itself, plus the
    /// key). A field of a record naming no such column is an error unless
    /// [`ignore_unknown_fields`](Self::ignore_unknown_fields) is set; a missing field is NULL.
    pub fn columns<S: Into<String>>(mut self, columns: impl IntoIterator<Item = S>) -> Self {
        self.s.columns = Some(columns.into_iter().map(Into::into).collect());
        self
    }

    /// The key for upserts and deletes (default: the table's primary key).
    pub fn key<S: Into<String>>(mut self, key: impl IntoIterator<Item = S>) -> Self {
        self.s.key = Some(key.into_iter().map(Into::into).collect());
        self
    }

    /// Insert (default), upsert, or your own statement ([`WriteMode::Statement`]; or use
    /// [`JdbcSink::with_statement`]).
    pub fn mode(mut self, mode: WriteMode) -> Self {
        self.s.mode = mode;
        self
    }

    /// How PostgreSQL receives batches (default [`PgMethod::Unnest`]).
    pub fn postgres_method(mut self, method: PgMethod) -> Self {
        self.s.method = method;
        self
    }

    /// Batching: rows per batch (`max_actions`, default 1000), bytes, interval (default
    /// 200 ms), batches in flight (default 2; always 1 for SQLite, upserts and exactly-once,
    /// where batches must land in order) and the backoff for retries after lost connections.
    /// In insert mode with more than one batch in flight, batches may commit out of order:
    /// send deletes with upsert mode.
    pub fn bulk(mut self, bulk: BulkConfig) -> Self {
        self.s.bulk = bulk;
        self
    }

    /// Rows per batch (shortcut for `bulk.max_actions`).
    pub fn batch_size(mut self, n: usize) -> Self {
        self.s.bulk.max_actions = n;
        self
    }

    /// Rows the database refuses (constraints, types) and records that cannot be converted:
    /// fail (default), skip, dead-letter.
    pub fn error_policy(mut self, p: ErrorPolicy) -> Self {
        self.s.policy = p;
        self
    }

    /// Exactly-once with PostgreSQL prepared transactions (needs `max_prepared_transactions`
    /// above 0 on the server). Refused for MySQL/MariaDB and SQLite.
    pub fn exactly_once(mut self, on: bool) -> Self {
        self.s.exactly_once = on;
        self
    }

    /// Prefix of prepared-transaction ids, unique per sink in a database (default
    /// `rivus-<job>-<operator>`; letters, digits, `-`, `_`, `.`).
    pub fn transaction_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.s.prefix = Some(prefix.into());
        self
    }

    /// Drop fields that name no column instead of refusing the record.
    pub fn ignore_unknown_fields(mut self, on: bool) -> Self {
        self.s.ignore_unknown = on;
        self
    }

    /// Connect and acquire timeout (default 10 s).
    pub fn timeout(mut self, d: Duration) -> Self {
        self.s.timeout = d;
        self
    }

    fn validate(&self) -> Result<Dialect> {
        let s = &self.s;
        let dialect = Dialect::of_url(&s.url, "sink.jdbc.url")?;
        if s.table.trim().is_empty() {
            return Err(Error::config("sink.jdbc.table", "must not be empty"));
        }
        s.bulk.validate("sink.jdbc.bulk")?;
        if s.exactly_once && dialect != Dialect::Postgres {
            return Err(Error::config(
                "sink.jdbc.exactly_once",
                "exactly-once needs PostgreSQL prepared transactions; MySQL/MariaDB and SQLite \
                 sinks are at-least-once (use upsert mode to make rewrites harmless)",
            ));
        }
        if let WriteMode::Statement { sql, params } = &s.mode {
            if sql.trim().is_empty() {
                return Err(Error::config("sink.jdbc.statement", "must not be empty"));
            }
            if params.iter().any(|p| p.trim().is_empty()) {
                return Err(Error::config(
                    "sink.jdbc.params",
                    "field names must not be empty",
                ));
            }
        }
        if s.method == PgMethod::Copy && s.mode != WriteMode::Insert {
            return Err(Error::config(
                "sink.jdbc.postgres_method",
                "COPY only appends: use it with insert mode",
            ));
        }
        if let Some(p) = &s.prefix {
            if p.is_empty()
                || !p
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            {
                return Err(Error::config(
                    "sink.jdbc.transaction_prefix",
                    "use letters, digits, `-`, `_` and `.` only",
                ));
            }
        }
        if s.timeout.is_zero() {
            return Err(Error::config("sink.jdbc.timeout", "must be positive"));
        }
        Ok(dialect)
    }

    /// Checks the settings; `mapper` turns each record into a [`RowChange`] (a missing or
    /// mistyped field is a `SchemaError` naming the record and the field).
    pub fn build<T: Send + 'static>(
        mut self,
        mapper: impl Fn(&T) -> Result<RowChange, SchemaError> + Send + Sync + 'static,
    ) -> Result<JdbcSink<T>> {
        let dialect = self.validate()?;
        // SQLite has one writer; a transaction spans a checkpoint; upserts must land in order
        // (two batches in flight may commit in either order, and an older value would win).
        if dialect == Dialect::Sqlite || self.s.exactly_once || self.s.mode == WriteMode::Upsert {
            self.s.bulk.concurrent_requests = 1;
        }
        Ok(JdbcSink {
            settings: Arc::new(self.s),
            mapper: Arc::new(mapper),
            open: None,
            restored: BTreeSet::new(),
        })
    }

    /// A sink of JSON objects: each object is a row written (or upserted).
    pub fn build_json(self) -> Result<JdbcSink<Value>> {
        self.build(|v: &Value| match v {
            Value::Object(row) => Ok(RowChange::Write(row.clone())),
            other => Err(SchemaError::new(
                "json",
                "record",
                format!(
                    "expected a JSON object (one row), got {}",
                    crate::value::short(other)
                ),
            )),
        })
    }
}

struct Open {
    pool: Pool,
    processor: BulkProcessor<Change>,
    writer: Arc<Writer>,
    handler: ErrorHandler,
    prepared: Option<Arc<Prepared>>,
    committer: Option<tokio::task::JoinHandle<()>>,
    completed: CompletedCheckpoints,
    checkpointed: bool,
}

/// A SQL table sink. Clone it into each subtask.
pub struct JdbcSink<T> {
    settings: Arc<Settings>,
    mapper: Arc<Mapper<T>>,
    open: Option<Open>,
    restored: BTreeSet<String>,
}

impl<T> std::fmt::Debug for JdbcSink<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JdbcSink")
            .field("url", &crate::redact(&self.settings.url))
            .field("table", &self.settings.table)
            .field("mode", &self.settings.mode)
            .field("exactly_once", &self.settings.exactly_once)
            .finish()
    }
}

impl<T> Clone for JdbcSink<T> {
    fn clone(&self) -> Self {
        JdbcSink {
            settings: Arc::clone(&self.settings),
            mapper: Arc::clone(&self.mapper),
            open: None,
            restored: BTreeSet::new(),
        }
    }
}

impl JdbcSink<()> {
    /// Starts a builder for a sink running `sql` once per record with the fields `params`
    /// bound in order (see [`WriteMode::Statement`]); refused rows go to the error policy as
    /// with tables.
    pub fn with_statement<S: Into<String>>(
        url: impl Into<String>,
        sql: impl Into<String>,
        params: impl IntoIterator<Item = S>,
    ) -> JdbcSinkBuilder {
        JdbcSink::builder(url, "statement").mode(WriteMode::Statement {
            sql: sql.into(),
            params: params.into_iter().map(Into::into).collect(),
        })
    }

    /// Starts a builder for a sink writing to `table` at `url` (`postgres://`, `mysql://`,
    /// `mariadb://`, `sqlite:path`).
    pub fn builder(url: impl Into<String>, table: impl Into<String>) -> JdbcSinkBuilder {
        JdbcSinkBuilder {
            s: Settings {
                url: url.into(),
                table: table.into(),
                columns: None,
                key: None,
                mode: WriteMode::Insert,
                method: PgMethod::Unnest,
                bulk: BulkConfig {
                    max_actions: 1000,
                    max_bytes: 4 << 20,
                    flush_interval: Some(Duration::from_millis(200)),
                    concurrent_requests: 2,
                    ..BulkConfig::default()
                },
                policy: ErrorPolicy::Fail,
                exactly_once: false,
                prefix: None,
                ignore_unknown: false,
                timeout: Duration::from_secs(10),
            },
        }
    }
}

/// The columns written and the key's positions among them.
fn resolve_columns(
    s: &Settings,
    table: &crate::table::TableSchema,
) -> Result<(Vec<TableColumn>, Vec<usize>)> {
    if table.columns.is_empty() {
        return Err(Error::config(
            "sink.jdbc.table",
            format!("table `{}` does not exist", s.table),
        ));
    }
    let key: Vec<String> = s.key.clone().unwrap_or_else(|| table.primary_key.clone());
    for k in &key {
        if table.column(k).is_none() {
            return Err(Error::config(
                "sink.jdbc.key",
                format!("table `{}` has no column `{k}`", s.table),
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
                        format!("sink.jdbc.columns[{i}]"),
                        format!("table `{}` has no column `{n}`", s.table),
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
            "sink.jdbc.key",
            format!(
                "upsert needs a key and table `{}` has no primary key: set one",
                s.table
            ),
        ));
    }
    Ok((columns, keys))
}

impl<T: Send + 'static> JdbcSink<T> {
    fn opened(&self) -> Result<&Open> {
        self.open.as_ref().ok_or(Error::Closed("jdbc sink"))
    }

    /// `row` as values in the plan's column order, or what is wrong with it (with the record,
    /// rebuilt, for the dead letter).
    fn to_change(&self, change: RowChange) -> std::result::Result<Change, (String, Row)> {
        let open = self.open.as_ref().expect("called after open");
        let plan = &open.writer.plan;
        let (delete, mut row) = match change {
            RowChange::Write(r) => (false, r),
            RowChange::Delete(r) => (true, r),
            RowChange::WriteValues(values) => return self.positional(values),
        };
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
        if !self.settings.ignore_unknown {
            if let Some(f) = row.keys().next() {
                let reason = format!("field `{f}` names no column of the table");
                return Err((reason, restore(values, row)));
            }
        }
        Ok(Change { delete, values })
    }

    /// The record as a change, or `None` when it went to the error policy.
    async fn convert(&self, value: T) -> Result<Option<Change>> {
        let open = self.opened()?;
        let change = match (self.mapper)(&value) {
            Ok(c) => c,
            Err(e) => {
                open.handler.handle(&e.position, &e, &[]).await?;
                return Ok(None);
            }
        };
        match self.to_change(change) {
            Ok(c) => Ok(Some(c)),
            Err((reason, row)) => {
                let position = format!(
                    "table {}, record {}",
                    self.settings.table,
                    crate::value::short(&Value::Object(row.clone()))
                );
                let payload = serde_json::to_vec(&row).unwrap_or_default();
                open.handler.handle(position, reason, &payload).await?;
                Ok(None)
            }
        }
    }

    fn positional(&self, values: Vec<Value>) -> std::result::Result<Change, (String, Row)> {
        let plan = &self.open.as_ref().expect("called after open").writer.plan;
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
        let mut out = Vec::with_capacity(values.len());
        let mut values = values.into_iter();
        for c in &plan.columns {
            let v = values.next().expect("lengths checked");
            match SqlValue::convert_owned(v, c.class) {
                Ok(v) => out.push(v),
                Err((e, v)) => {
                    let reason = format!("column `{}`: {e}", c.name);
                    let mut done: Vec<Value> = out.iter().map(SqlValue::to_json).collect();
                    done.push(v);
                    done.extend(values);
                    return Err((reason, as_row(done)));
                }
            }
        }
        Ok(Change {
            delete: false,
            values: out,
        })
    }

    async fn add(&mut self, value: T) -> Result<()> {
        match self.convert(value).await? {
            Some(c) => self.opened()?.processor.add(c).await,
            None => Ok(()),
        }
    }
}

#[async_trait]
impl<T: Send + 'static> RichFunction for JdbcSink<T> {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        let s = Arc::clone(&self.settings);
        let connections = s.bulk.concurrent_requests as u32 + 2;
        let pool = Pool::connect(&s.url, connections, s.timeout, "sink.jdbc").await?;
        let dialect = pool.dialect();
        let mut conn = pool
            .acquire()
            .await
            .map_err(|e| Error::connector("jdbc sink: connecting", describe(&e)))?;
        let table = if matches!(s.mode, WriteMode::Statement { .. }) {
            crate::table::TableSchema {
                name: s.table.clone(),
                columns: Vec::new(),
                primary_key: Vec::new(),
            }
        } else {
            describe_table(&mut conn, dialect, &s.table)
                .await
                .map_err(|e| {
                    Error::connector(
                        format!("jdbc sink: reading table `{}`", s.table),
                        describe(&e),
                    )
                })?
        };
        let (columns, keys) = match &s.mode {
            WriteMode::Statement { params, .. } => (
                params
                    .iter()
                    .map(|p| TableColumn {
                        name: p.clone(),
                        class: crate::value::Class::Any,
                        cast: None,
                        generated: false,
                    })
                    .collect(),
                Vec::new(),
            ),
            _ => resolve_columns(&s, &table)?,
        };
        let prepared = if s.exactly_once {
            let max: Vec<String> = conn
                .fetch_text("SELECT current_setting('max_prepared_transactions')", &[])
                .await
                .map_err(|e| Error::connector("jdbc sink", describe(&e)))?;
            if max.first().map(String::as_str) == Some("0") {
                return Err(Error::config(
                    "sink.jdbc.exactly_once",
                    "the server has max_prepared_transactions = 0; raise it (postgresql.conf) \
                     or use at-least-once with upserts",
                ));
            }
            let prefix = s.prefix.clone().unwrap_or_else(|| {
                format!("rivus-{}-{}", ctx.job_name(), ctx.task_name())
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                            c
                        } else {
                            '_'
                        }
                    })
                    .collect()
            });
            let prepared = Arc::new(Prepared::new(pool.clone(), prefix, ctx.subtask_index()));
            let (committed, rolled_back) =
                prepared.recover(&self.restored, ctx.parallelism()).await?;
            if committed + rolled_back > 0 {
                tracing::info!(sink = %ctx.display_name(), committed, rolled_back,
                    "recovered prepared transactions");
            }
            Some(prepared)
        } else {
            None
        };
        drop(conn);
        let handler = ErrorHandler::new(s.policy.clone(), ctx.display_name());
        let metrics = ctx.metrics().with_label("table", s.table.clone());
        let writer = Arc::new(Writer {
            pool: pool.clone(),
            plan: Arc::new(Plan::new(
                dialect,
                &s.table,
                columns,
                keys,
                s.mode.clone(),
                s.method,
                s.bulk.max_actions.max(1),
            )),
            handler: handler.clone(),
            txn: s.exactly_once.then(|| tokio::sync::Mutex::new(None)),
            rows: metrics.counter("rivus_jdbc_rows_total"),
            refused: metrics.counter("rivus_jdbc_rows_refused_total"),
        });
        let processor = BulkProcessor::with_parts(
            ctx.display_name(),
            s.bulk.clone(),
            Arc::clone(&writer) as Arc<_>,
            Arc::new(NoopListener),
            Arc::new(Change::size),
        )?;
        let completed = ctx.completed_checkpoints();
        let committer = prepared.as_ref().map(|p| {
            let p = Arc::clone(p);
            let mut watch = completed.clone();
            tokio::spawn(async move {
                while let Some(id) = watch.changed().await {
                    if let Err(e) = p.commit_up_to(id).await {
                        tracing::error!(error = %e, "jdbc sink: commit failed");
                        p.fail(&e);
                        return;
                    }
                }
            })
        });
        self.open = Some(Open {
            pool,
            processor,
            writer,
            handler,
            prepared,
            committer,
            completed,
            checkpointed: false,
        });
        Ok(())
    }

    async fn close(&mut self) -> Result<()> {
        let Some(open) = self.open.take() else {
            return Ok(());
        };
        if let Some(c) = &open.committer {
            c.abort();
        }
        let mut result = Ok(());
        if let (Some(p), Some(id)) = (&open.prepared, open.completed.latest()) {
            result = p.commit_up_to(id).await;
        }
        if let Err(e) = open.processor.close().await {
            tracing::debug!(error = %e, "jdbc sink: closing with rows failed");
        }
        // Rows written since the last prepare belong to no checkpoint: roll them back (and
        // free the connection, or closing the pool would wait for it forever).
        open.writer.abandon_open().await;
        // Closing waits for checked-out connections; a send still running when the job was
        // torn down may hold one: do not wait for it forever.
        if tokio::time::timeout(Duration::from_secs(5), open.pool.close())
            .await
            .is_err()
        {
            tracing::warn!("jdbc sink: a connection was still in use at close; left to drop");
        }
        result
    }
}

#[async_trait]
impl<T: Send + 'static> CheckpointedFunction for JdbcSink<T> {
    type State = JdbcSinkState;

    async fn initialize_state(&mut self, restored: Restored<JdbcSinkState>) -> Result<()> {
        self.restored = restored
            .previous
            .into_iter()
            .flatten()
            .flat_map(|s| s.prepared)
            .collect();
        Ok(())
    }

    async fn snapshot_state(&mut self, checkpoint_id: u64) -> Result<JdbcSinkState> {
        let open = self.open.as_mut().ok_or(Error::Closed("jdbc sink"))?;
        open.checkpointed = true;
        open.processor.flush().await?;
        let Some(prepared) = &open.prepared else {
            return Ok(JdbcSinkState::default());
        };
        prepared.check()?;
        let gid = prepared.gid(checkpoint_id);
        if open.writer.prepare(&gid).await? {
            prepared.add(checkpoint_id, gid);
        }
        Ok(JdbcSinkState {
            prepared: prepared.snapshot(),
        })
    }
}

#[async_trait]
impl<T: Send + 'static> CheckpointListener for JdbcSink<T> {
    async fn notify_checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<()> {
        match &self.opened()?.prepared {
            Some(p) => p.commit_up_to(checkpoint_id).await,
            None => Ok(()),
        }
    }
}

#[async_trait]
impl<T: Send + 'static> SinkFunction<T> for JdbcSink<T> {
    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        if self.settings.exactly_once {
            DeliveryGuarantee::ExactlyOnce
        } else {
            DeliveryGuarantee::AtLeastOnce
        }
    }

    async fn invoke(&mut self, value: T, _: &SinkContext) -> Result<()> {
        if let Some(p) = &self.opened()?.prepared {
            p.check()?;
        }
        self.add(value).await
    }

    async fn invoke_batch(&mut self, values: Vec<T>, _: &mut SinkContext) -> Result<()> {
        if let Some(p) = &self.opened()?.prepared {
            p.check()?;
        }
        let mut changes = Vec::with_capacity(values.len());
        for v in values {
            if let Some(c) = self.convert(v).await? {
                changes.push(c);
            }
        }
        self.opened()?.processor.add_all(changes).await
    }

    /// Flushes; with transactions and no checkpoint ever taken (a job without checkpoints),
    /// commits what is open.
    async fn finish(&mut self) -> Result<()> {
        let open = self.opened()?;
        open.processor.flush().await?;
        if !open.checkpointed {
            open.writer.commit_open().await?;
        }
        Ok(())
    }
}
