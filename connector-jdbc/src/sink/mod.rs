//! [`JdbcSink`]: records → rows → batched statements through core's BulkProcessor, at-least-once
//! on every database and exactly-once on PostgreSQL and MySQL/MariaDB: with prepared (XA)
//! transactions committed when a checkpoint completes (`prepared.rs`), or, behind a Kafka
//! source in group mode (workers), with the source's positions in a table written in the same
//! transaction as the rows (`positions.rs`).

mod builder;
mod net;
mod open_txn;
mod positions;
mod prepared;
mod rows;
mod tables;
mod writer;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use rivus_sdk::bulk::{BulkProcessor, NoopListener};
use rivus_sdk::error_policy::ErrorHandler;
use rivus_sdk::prelude::*;
use rivus_sdk::schema::SchemaError;
use rivus_sdk::{CompletedCheckpoints, Restored};

use crate::db::Pool;
use crate::statement::WriteMode;

use prepared::Prepared;
use tables::{Planned, Tables};
use writer::{Routed, Writer};

pub use builder::JdbcSinkBuilder;
use builder::Settings;
pub use rows::{Row, RowChange};

type Mapper<T> = dyn Fn(&T) -> Result<RowChange, SchemaError> + Send + Sync;

/// The checkpointed state of one sink subtask: its prepared, not yet committed transactions.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct JdbcSinkState {
    /// Transaction ids (`<prefix>:<subtask>:<checkpoint>`).
    pub prepared: Vec<String>,
}

struct Open {
    pool: Pool,
    processor: BulkProcessor<Routed>,
    tables: Tables,
    writer: Arc<Writer>,
    handler: ErrorHandler,
    delivery: Delivery,
    completed: CompletedCheckpoints,
    checkpointed: bool,
    /// Whether other subtasks write the same tables (a key change is then refused).
    parallel: bool,
}

/// How a subtask keeps its guarantee: one state per delivery mode.
enum Delivery {
    /// At-least-once: each batch commits on its own.
    Plain,
    /// Exactly-once in one process: each checkpoint's rows in a prepared (XA) transaction,
    /// committed when the checkpoint completes (by the committer task, or at the next
    /// notification).
    Prepared {
        prepared: Arc<Prepared>,
        committer: Option<tokio::task::JoinHandle<()>>,
    },
    /// Exactly-once behind a source that offers its positions (Kafka in group mode): they are
    /// kept in a table, written in the rows' transaction at each barrier.
    Positions {
        table: Arc<positions::PositionsTable>,
        link: Arc<rivus_sdk::PositionsInSink>,
    },
}

impl Delivery {
    /// The prepared transactions, in that mode.
    fn prepared(&self) -> Option<&Arc<Prepared>> {
        match self {
            Delivery::Prepared { prepared, .. } => Some(prepared),
            _ => None,
        }
    }

    /// The transactions the writer writes in: prepared ones, or one-phase ones in positions
    /// mode; none at-least-once.
    fn transactions(&self, pool: &Pool, subtask: usize) -> Option<Arc<Prepared>> {
        match self {
            Delivery::Plain => None,
            Delivery::Prepared { prepared, .. } => Some(Arc::clone(prepared)),
            Delivery::Positions { .. } => {
                Some(Arc::new(Prepared::one_phase(pool.clone(), subtask)))
            }
        }
    }

    /// Starts what runs beside the writer: the committer of prepared transactions, or the
    /// source's link to the positions table (last: the source claims partitions from the
    /// table as soon as it is registered). A commit waits at most `deadline` per transaction.
    fn start(&mut self, completed: &CompletedCheckpoints, deadline: Duration) {
        match self {
            Delivery::Plain => {}
            Delivery::Prepared {
                prepared,
                committer,
            } => {
                *committer = Some(Prepared::spawn_committer(
                    Arc::clone(prepared),
                    completed.clone(),
                    deadline,
                ));
            }
            Delivery::Positions { table, link } => {
                link.set_store(Arc::clone(table) as Arc<dyn rivus_sdk::PositionStore>);
            }
        }
    }
}

/// Why a record is not written: what the error policy is handed.
enum Refusal {
    /// The mapper refused the record.
    Schema(SchemaError),
    /// Its fields do not fit the table.
    Row {
        position: String,
        reason: String,
        payload: Vec<u8>,
    },
}

impl Refusal {
    async fn handle(self, handler: &ErrorHandler) -> Result<()> {
        match self {
            Refusal::Schema(e) => handler.handle(&e.position, &e, &[]).await,
            Refusal::Row {
                position,
                reason,
                payload,
            } => handler.handle(position, reason, &payload).await,
        }
    }
}

/// A SQL table sink. Clone it into each subtask.
pub struct JdbcSink<T> {
    settings: Arc<Settings>,
    mapper: Arc<Mapper<T>>,
    /// The record as JSON, for a table template and the source's column types
    /// ([`JdbcSinkBuilder::build_json`]).
    as_json: Option<fn(&T) -> &Value>,
    open: Option<Open>,
    restored: Option<Restored<Vec<String>>>,
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
            as_json: self.as_json,
            open: None,
            restored: None,
        }
    }
}

impl<T: Send + 'static> JdbcSink<T> {
    fn opened(&self) -> Result<&Open> {
        self.open.as_ref().ok_or(Error::Closed("jdbc sink"))
    }

    /// The record as a change into its table, or why it cannot be written (for the error
    /// policy); `None` when there is nothing to write.
    async fn route(&mut self, value: T) -> Result<std::result::Result<Option<Routed>, Refusal>> {
        let mut change = match (self.mapper)(&value) {
            Ok(c) => c,
            Err(e) => return Ok(Err(Refusal::Schema(e))),
        };
        let json = self.as_json.map(|f| f(&value));
        let open = self.open.as_mut().ok_or(Error::Closed("jdbc sink"))?;
        let moves = matches!(change, RowChange::Nothing | RowChange::Move { .. });
        if moves && !open.parallel && matches!(change, RowChange::Nothing) {
            return Ok(Ok(None));
        }
        let refused = |reason: String, table: &str| {
            let record = json.cloned().unwrap_or(Value::Null);
            Refusal::Row {
                position: format!("table {table}, record {}", crate::value::short(&record)),
                reason,
                payload: serde_json::to_vec(&record).unwrap_or_default(),
            }
        };
        if moves && open.parallel {
            // The old and the new key belong to different subtasks, each holding its rows
            // in its own open transaction: no one statement can move the row, and the row
            // taken apart would lose the values the change did not carry.
            let reason = "a key change whose new row lacks unchanged values (TOAST) moves the \
                          row from its old key, which only one sink subtask can do: run this \
                          sink with parallelism 1"
                .to_owned();
            return Ok(Err(refused(reason, &self.settings.table)));
        }
        // One table read at open (no template, no evolution): no name to render or look up.
        let (table, plan) = match open.tables.fixed() {
            Some(plan) => (
                std::borrow::Cow::Borrowed(self.settings.table.as_str()),
                plan,
            ),
            None => {
                let table = match open.tables.name(json) {
                    Ok(t) => t.into_owned(),
                    Err(reason) => return Ok(Err(refused(reason, &self.settings.table))),
                };
                let planned = open
                    .tables
                    .plan(&table, json, &mut change, &open.writer)
                    .await?;
                match planned {
                    Planned::Plan(p) => (std::borrow::Cow::Owned(table), p),
                    Planned::Nothing => return Ok(Ok(None)),
                    Planned::Refused(reason) => return Ok(Err(refused(reason, &table))),
                }
            }
        };
        Ok(
            match rows::to_change(&plan, self.settings.ignore_unknown, change) {
                Ok(change) => Ok(Some(Routed { plan, change })),
                Err((reason, row)) => Err(Refusal::Row {
                    position: format!(
                        "table {table}, record {}",
                        crate::value::short(&Value::Object(row.clone()))
                    ),
                    reason,
                    payload: serde_json::to_vec(&row).unwrap_or_default(),
                }),
            },
        )
    }

    /// The record as a change, or `None` when it went to the error policy or does nothing.
    async fn convert(&mut self, value: T) -> Result<Option<Routed>> {
        match self.route(value).await? {
            Ok(c) => Ok(c),
            Err(refusal) => refusal.handle(&self.opened()?.handler).await.map(|()| None),
        }
    }
}

#[async_trait]
impl<T: Send + 'static> RichFunction for JdbcSink<T> {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        let s = Arc::clone(&self.settings);
        // Behind a source that offers its positions (Kafka in group mode), they are kept in
        // the database with the rows: exactly-once also across workers.
        let keep_positions = s.exactly_once && ctx.source_positions_offered();
        if s.exactly_once && !keep_positions {
            refuse_workers(ctx)?;
        }
        // Exactly-once on MySQL/MariaDB parks a session per prepared, uncommitted checkpoint.
        let parked = if s.exactly_once { 2 } else { 0 };
        let connections = s.bulk.concurrent_requests as u32 + 2 + parked;
        let pool = Pool::connect(&s.url, connections, s.timeout).await?;
        let dialect = pool.dialect();
        let mut conn = pool
            .acquire()
            .await
            .map_err(|e| crate::error::sql_error("jdbc sink: connecting", &e))?;
        let mut delivery = match (s.exactly_once, keep_positions) {
            (false, _) => Delivery::Plain,
            (true, false) => Delivery::Prepared {
                prepared: Prepared::start(
                    &pool,
                    &mut conn,
                    s.prefix.clone(),
                    ctx,
                    self.restored.take().unwrap_or_else(|| {
                        Restored::fresh(ctx.task_name(), ctx.subtask_index(), ctx.parallelism())
                    }),
                )
                .await?,
                committer: None,
            },
            (true, true) => {
                if dialect == crate::dialect::Dialect::Sqlite {
                    return Err(Error::config(
                        "exactly_once",
                        "SQLite cannot keep a source's positions for several workers; use \
                         PostgreSQL or MySQL/MariaDB",
                    ));
                }
                let name = s
                    .prefix
                    .clone()
                    .unwrap_or_else(|| format!("{}/{}", ctx.job_name(), ctx.task_name()));
                let owner = positions::owner_token(ctx.worker(), ctx.subtask_index());
                let table = positions::PositionsTable::open(
                    pool.clone(),
                    &mut conn,
                    &s.positions_table,
                    name,
                    owner,
                    s.statement_timeout,
                )
                .await?;
                let link = ctx
                    .task_shared()
                    .get_or_insert_with(rivus_sdk::PositionsInSink::default);
                tracing::info!(sink = %ctx.display_name(), table = %s.positions_table,
                    "jdbc sink: the source's positions commit in this sink's transactions");
                Delivery::Positions {
                    table: Arc::new(table),
                    link,
                }
            }
        };
        drop(conn);
        let handler = ErrorHandler::new(s.policy.clone(), ctx.display_name()).connector("jdbc");
        let metrics = ctx.metrics().with_label("table", s.table.clone());
        let writer = Arc::new(Writer {
            pool: pool.clone(),
            dialect,
            label: s.table.clone(),
            handler: handler.clone(),
            txn: delivery
                .transactions(&pool, ctx.subtask_index())
                .map(|p| (p, tokio::sync::Mutex::new(None))),
            kept: parking_lot::Mutex::new(Vec::new()),
            rows: metrics.counter("rivus_jdbc_rows_total"),
            refused: metrics.counter("rivus_jdbc_rows_refused_total"),
            deadline: s.statement_timeout,
        });
        let template = rivus_sdk::template::Template::parse(&s.table)
            .map_err(|e| Error::config("table", e))?;
        let fixed = template.fixed().map(str::to_owned);
        let mut tables = Tables::new(Arc::clone(&s), template, pool.clone());
        match (&s.mode, fixed) {
            (WriteMode::Statement { params, .. }, Some(name)) => {
                tables.open_statement(&name, params)
            }
            (_, Some(name)) if s.evolution == crate::evolve::SchemaEvolution::None => {
                tables.open_fixed(&name).await?
            }
            _ => {}
        }
        let processor = BulkProcessor::with_parts(
            ctx.display_name(),
            s.bulk.clone(),
            Arc::clone(&writer) as Arc<_>,
            Arc::new(NoopListener),
            Arc::new(Routed::size),
        )?;
        let completed = ctx.completed_checkpoints();
        delivery.start(&completed, s.statement_timeout);
        self.open = Some(Open {
            pool,
            processor,
            tables,
            writer,
            handler,
            delivery,
            completed,
            checkpointed: false,
            parallel: ctx.parallelism() > 1,
        });
        Ok(())
    }

    async fn close(&mut self) -> Result<()> {
        let Some(open) = self.open.take() else {
            return Ok(());
        };
        if let Delivery::Prepared {
            committer: Some(c), ..
        } = &open.delivery
        {
            c.abort();
        }
        let mut result = Ok(());
        if let (Some(p), Some(id)) = (open.delivery.prepared(), open.completed.latest()) {
            result = p.commit_within(id, self.settings.statement_timeout).await;
        }
        if let Err(e) = open.processor.close().await {
            tracing::debug!(error = %e, "jdbc sink: closing with rows failed");
        }
        // Rows written since the last prepare belong to no checkpoint: roll them back (and
        // free the connection, or closing the pool would wait for it forever).
        open.writer.abandon_open().await;
        if let Some(p) = open.delivery.prepared() {
            p.release_parked().await;
        }
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

/// Prepared transactions are resolved from one process's checkpoints: a worker that never
/// came back would leave the rows of its completed checkpoints prepared but uncommitted, while
/// its source's offsets already moved on.
fn refuse_workers(ctx: &RuntimeContext) -> Result<()> {
    match ctx.worker() {
        None => Ok(()),
        Some(w) => Err(Error::config(
            "exactly_once",
            format!(
                "worker `{w}`: exactly-once across workers needs a Kafka source in group mode \
                 chained into this sink (same parallelism, no key_by or rebalance between), \
                 whose positions are then kept in the sink's database; with another source use \
                 at-least-once with mode = \"upsert\" on the table's key, or run exactly-once \
                 as one process"
            ),
        )),
    }
}

#[async_trait]
impl<T: Send + 'static> CheckpointedFunction for JdbcSink<T> {
    type State = JdbcSinkState;

    async fn initialize_state(&mut self, restored: Restored<JdbcSinkState>) -> Result<()> {
        self.restored = Some(restored.map(|s| s.prepared));
        Ok(())
    }

    async fn snapshot_state(&mut self, checkpoint_id: u64) -> Result<JdbcSinkState> {
        let open = self.open.as_mut().ok_or(Error::Closed("jdbc sink"))?;
        open.checkpointed = true;
        open.processor.flush().await?;
        match &open.delivery {
            Delivery::Plain => Ok(JdbcSinkState::default()),
            Delivery::Positions { table, link } => {
                if link.is_broken() {
                    open.writer.abandon_open().await;
                    return Err(Error::connector(
                        "jdbc sink: positions",
                        "a revoked partition moved to another worker before a transaction \
                         covered it; this transaction rolls back and the job resumes from the \
                         positions table",
                    ));
                }
                let at = link.take_barrier(checkpoint_id).unwrap_or_default();
                open.writer.commit_positions(table, &at).await?;
                link.committed(checkpoint_id);
                Ok(JdbcSinkState::default())
            }
            Delivery::Prepared { prepared, .. } => {
                prepared.check()?;
                let prepared = match open.writer.prepare(checkpoint_id).await? {
                    Some((gid, parked)) => prepared.add(checkpoint_id, gid, parked).await,
                    None => prepared.state().await,
                };
                Ok(JdbcSinkState { prepared })
            }
        }
    }
}

#[async_trait]
impl<T: Send + 'static> CheckpointListener for JdbcSink<T> {
    async fn notify_checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<()> {
        let deadline = self.settings.statement_timeout;
        match self.opened()?.delivery.prepared() {
            Some(p) => p.commit_within(checkpoint_id, deadline).await,
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

    /// Exactly-once: behind a source that offers its positions (Kafka in group mode), they
    /// are written with the rows (`positions.rs`).
    fn commits_source_positions(&self) -> bool {
        self.settings.exactly_once
    }

    async fn invoke(&mut self, value: T, _: &SinkContext) -> Result<()> {
        if let Some(p) = self.opened()?.delivery.prepared() {
            p.check()?;
        }
        match self.convert(value).await? {
            Some(c) => self.opened()?.processor.add(c).await,
            None => Ok(()),
        }
    }

    async fn invoke_batch(&mut self, values: Vec<T>, _: &mut SinkContext) -> Result<()> {
        if let Some(p) = self.opened()?.delivery.prepared() {
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
