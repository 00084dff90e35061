//! [`JdbcSource`]: a query read as a stream of JSON rows, by keyset pages on tracking columns.
//!
//! - **Bounded**: one query split into ranges of a numeric column (bounds given or read with
//!   MIN/MAX); split `k` is read by subtask `k % parallelism`; ends when every range is read.
//! - **Continuous**: one or more queries (a table each, say), each polled for rows after the
//!   last position on an increasing column (id, or `updated_at` with a tie-breaking id);
//!   query `k` is read by subtask `k % parallelism`; never ends.
//!
//! The last position of every split is checkpointed: a restarted job neither skips nor
//! repeats rows (exactly-once), as long as the tracking columns are unique together and rows
//! appear in their order (see the README on late commits).

pub(crate) mod query;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use rivus_sdk::error_policy::{ErrorHandler, ErrorPolicy};
use rivus_sdk::prelude::*;
use rivus_sdk::schema::SchemaError;
use rivus_sdk::Restored;

use crate::db::Pool;
use crate::dialect::Dialect;
use crate::error::describe;
use crate::sink::Row;
use query::{PageQuery, QueryColumn};

/// Where one split stands.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SplitPosition {
    /// The tracking-column values of the last row emitted.
    pub last: Option<Vec<Value>>,
    /// The split is read to its end (bounded mode).
    pub done: bool,
}

/// The checkpointed state of a source subtask: positions by split id.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct JdbcSourceState {
    /// `q<query>` (continuous) or `r<range>` (bounded) → position.
    pub splits: BTreeMap<String, SplitPosition>,
}

#[derive(Debug, Clone)]
enum Mode {
    Bounded {
        lower: Option<i64>,
        upper: Option<i64>,
        splits: usize,
    },
    Continuous {
        poll: Duration,
    },
}

#[derive(Debug, Clone)]
struct Settings {
    url: String,
    queries: Vec<String>,
    track: Vec<String>,
    mode: Mode,
    fetch: usize,
    policy: ErrorPolicy,
    timeout: Duration,
}

type Decode<T> = dyn Fn(Row) -> Result<T, SchemaError> + Send + Sync;

/// Builds a [`JdbcSource`].
#[derive(Debug)]
pub struct JdbcSourceBuilder {
    s: Settings,
    tls: rivus_sdk::tls::TlsFiles,
}

impl JdbcSourceBuilder {
    /// Reads `query` (any SELECT). Call again to add queries (continuous mode).
    pub fn query(mut self, query: impl Into<String>) -> Self {
        self.s.queries.push(query.into());
        self
    }

    /// Reads a whole table (`SELECT * FROM table`).
    pub fn table(self, table: &str) -> Self {
        let dialect = Dialect::of_url(&self.s.url).unwrap_or(Dialect::Postgres);
        let q = format!("SELECT * FROM {}", dialect.quote(table));
        self.query(q)
    }

    /// The columns rows are ordered and resumed by: one increasing unique column (`id`), or
    /// an increasing column and a unique tie-breaker (`updated_at`, `id`).
    pub fn track_by<S: Into<String>>(mut self, columns: impl IntoIterator<Item = S>) -> Self {
        self.s.track = columns.into_iter().map(Into::into).collect();
        self
    }

    /// Bounded: split the first tracking column (an integer, a date or a timestamp) into
    /// `splits` ranges between `lower` and `upper` (inclusive; Unix seconds for dates and
    /// times; read with MIN/MAX when `None`). With a column that is not unique, add a unique
    /// tie-breaker to [`track_by`](Self::track_by) so a restart resumes exactly.
    pub fn bounded(mut self, lower: Option<i64>, upper: Option<i64>, splits: usize) -> Self {
        self.s.mode = Mode::Bounded {
            lower,
            upper,
            splits,
        };
        self
    }

    rivus_sdk::setters! {
        /// Continuous: poll every `interval` for rows after the last position (the default, with
        /// 1 s).
        continuous(interval: Duration) => s.mode = Mode::Continuous { poll: interval };

        /// Rows per page (default 1000): memory stays bounded by one page per subtask.
        fetch_size(n: usize) => s.fetch;

        /// Rows the decoder refuses: fail (default), skip, dead-letter.
        error_policy(p: ErrorPolicy) => s.policy;
    }

    /// Checks the settings; `decode` turns each row (column → JSON value) into a record.
    pub fn build<T: Send + 'static>(
        mut self,
        decode: impl Fn(Row) -> Result<T, SchemaError> + Send + Sync + 'static,
    ) -> Result<JdbcSource<T>> {
        self.s.url = crate::config::url_with_tls(&self.s.url, &self.tls)?;
        let s = &self.s;
        Dialect::of_url(&s.url)?;
        if s.queries.is_empty() {
            return Err(Error::config("query", "set a query or a table"));
        }
        if s.track.is_empty() || s.track.len() > 2 {
            return Err(Error::config(
                "track_by",
                "name one increasing unique column, or an increasing column and a unique tie-breaker",
            ));
        }
        if s.fetch == 0 {
            return Err(Error::config("fetch_size", "must be at least 1"));
        }
        if let Mode::Bounded {
            lower,
            upper,
            splits,
        } = s.mode
        {
            if s.queries.len() != 1 {
                return Err(Error::config(
                    "query",
                    "bounded mode reads one query (split by ranges)",
                ));
            }
            if splits == 0 {
                return Err(Error::config("splits", "must be at least 1"));
            }
            if let (Some(l), Some(u)) = (lower, upper) {
                if l > u {
                    return Err(Error::config(
                        "lower",
                        format!("lower bound {l} is above upper bound {u}"),
                    ));
                }
            }
        }
        if let Mode::Continuous { poll } = s.mode {
            if poll.is_zero() {
                return Err(Error::config("poll_interval", "must be positive"));
            }
        }
        Ok(JdbcSource {
            settings: Arc::new(self.s),
            decode: Arc::new(decode),
            running: None,
            share: Share::whole(),
        })
    }

    /// A source of JSON objects, one per row.
    pub fn build_json(self) -> Result<JdbcSource<Value>> {
        self.build(|row| Ok(Value::Object(row)))
    }
}

/// A SQL query source. Clone it into each subtask.
pub struct JdbcSource<T> {
    settings: Arc<Settings>,
    decode: Arc<Decode<T>>,
    running: Option<Running>,
    share: Share,
}

/// What `open` creates: the connection pool, the error handler and the rows counter.
struct Running {
    pool: Pool,
    handler: ErrorHandler,
    rows: metrics::Counter,
}

impl<T> std::fmt::Debug for JdbcSource<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JdbcSource")
            .field("url", &crate::redact(&self.settings.url))
            .field("queries", &self.settings.queries)
            .field("mode", &self.settings.mode)
            .finish()
    }
}

impl<T> Clone for JdbcSource<T> {
    fn clone(&self) -> Self {
        JdbcSource {
            settings: Arc::clone(&self.settings),
            decode: Arc::clone(&self.decode),
            running: None,
            share: self.share,
        }
    }
}

impl JdbcSource<()> {
    /// Starts a builder reading from the database of `config`: a URL or a whole
    /// [`JdbcConfig`](crate::JdbcConfig) (TLS files, timeout).
    pub fn builder(config: impl Into<crate::JdbcConfig>) -> JdbcSourceBuilder {
        let config = config.into();
        JdbcSourceBuilder {
            s: Settings {
                url: config.url,
                queries: Vec::new(),
                track: Vec::new(),
                mode: Mode::Continuous {
                    poll: Duration::from_secs(1),
                },
                fetch: 1000,
                policy: ErrorPolicy::Fail,
                timeout: config.timeout,
            },
            tls: config.tls,
        }
    }
}

/// One unit of reading.
struct Split {
    id: String,
    page: PageQuery,
    range: Option<(i64, i64)>,
}

fn sql_err(what: &str) -> impl Fn(sqlx::Error) -> Error + '_ {
    move |e| crate::error::sql_error(format!("jdbc source: {what}"), &e)
}

impl<T: Send + 'static> JdbcSource<T> {
    fn running(&self) -> Result<&Running> {
        self.running.as_ref().ok_or(Error::Closed("jdbc source"))
    }

    fn pool(&self) -> Result<&Pool> {
        Ok(&self.running()?.pool)
    }

    async fn page_query(&self, query: &str) -> Result<PageQuery> {
        let pool = self.pool()?;
        let mut conn = pool.acquire().await.map_err(sql_err("connecting"))?;
        let probe = format!("SELECT * FROM ({query}) q");
        let columns: Vec<QueryColumn> = conn
            .describe_columns(&probe)
            .await
            .map_err(|e| Error::config("query", describe(&e)))?
            .into_iter()
            .map(|(name, type_name)| QueryColumn { name, type_name })
            .collect();
        for t in &self.settings.track {
            if !columns.iter().any(|c| &c.name == t) {
                return Err(Error::config(
                    "track_by",
                    format!("the query returns no column `{t}`"),
                ));
            }
        }
        Ok(PageQuery {
            dialect: pool.dialect(),
            query: query.to_owned(),
            columns,
            track: self.settings.track.clone(),
            fetch: self.settings.fetch,
        })
    }

    /// This subtask's splits.
    async fn splits(&self) -> Result<Vec<Split>> {
        let share = self.share;
        let s = &self.settings;
        match s.mode {
            Mode::Continuous { .. } => {
                let mut out = Vec::new();
                for (k, q) in s.queries.iter().enumerate() {
                    if share.owns(k) {
                        out.push(Split {
                            id: format!("q{k}"),
                            page: self.page_query(q).await?,
                            range: None,
                        });
                    }
                }
                Ok(out)
            }
            Mode::Bounded {
                lower,
                upper,
                splits,
            } => {
                let page = self.page_query(&s.queries[0]).await?;
                let (lo, hi) = match (lower, upper) {
                    (Some(l), Some(u)) => (l, u),
                    _ => {
                        let mut conn = self
                            .pool()?
                            .acquire()
                            .await
                            .map_err(sql_err("connecting"))?;
                        let text = conn
                            .fetch_text(&page.bounds(), &[])
                            .await
                            .map_err(sql_err("reading bounds"))?;
                        let parsed = text.first().and_then(|t| {
                            let (a, b) = t.split_once(',')?;
                            Some((a.trim().parse::<i64>().ok()?, b.trim().parse::<i64>().ok()?))
                        });
                        match parsed {
                            Some((a, b)) => (lower.unwrap_or(a), upper.unwrap_or(b)),
                            // An empty table (MIN is NULL) or a non-integer column.
                            None if text.is_empty() || text[0].is_empty() => return Ok(Vec::new()),
                            None => {
                                return Err(Error::config(
                                    "track_by",
                                    format!(
                                    "bounded mode splits an integer, date or time column; got bounds {text:?}"
                                ),
                                ))
                            }
                        }
                    }
                };
                let span = (hi as i128 - lo as i128 + 1).max(1);
                let n = (splits as i128).min(span);
                let mut out = Vec::new();
                for k in 0..n {
                    let start = lo as i128 + span * k / n;
                    let end = lo as i128 + span * (k + 1) / n;
                    if share.owns(k as usize) {
                        out.push(Split {
                            id: format!("r{k}"),
                            page: page.clone(),
                            range: Some((start as i64, end.min(i64::MAX as i128) as i64)),
                        });
                    }
                }
                Ok(out)
            }
        }
    }

    async fn fetch(&self, split: &Split, last: Option<Vec<Value>>) -> Result<Vec<String>> {
        let (sql, binds) = split.page.page(split.range, last.as_deref());
        let mut conn = self
            .pool()?
            .acquire()
            .await
            .map_err(sql_err("connecting"))?;
        conn.fetch_text(&sql, &binds)
            .await
            .map_err(sql_err("reading"))
    }
}

#[async_trait]
impl<T: Send + 'static> RichFunction for JdbcSource<T> {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        ctx.refuse_worker_mode("the SQL source (fixed key ranges)")?;
        self.share = ctx.share();
        let s = &self.settings;
        self.running = Some(Running {
            pool: Pool::connect(&s.url, 2, s.timeout).await?,
            handler: ErrorHandler::new(s.policy.clone(), ctx.display_name()).connector("jdbc"),
            rows: ctx.metrics().counter("rivus_jdbc_source_rows_total"),
        });
        Ok(())
    }

    async fn close(&mut self) -> Result<()> {
        if let Some(r) = self.running.take() {
            r.pool.close().await;
        }
        Ok(())
    }
}

#[async_trait]
impl<T: Send + 'static> SourceFunction for JdbcSource<T> {
    type Out = T;
    type State = JdbcSourceState;

    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::ExactlyOnce
    }

    /// Positions are keyed by split, so any parallelism can take over any split: every
    /// subtask keeps the positions of the splits it now owns (split `k` → subtask
    /// `k % parallelism`), whichever old subtask stored them.
    fn restore_state(&mut self, restored: Restored<JdbcSourceState>) -> Result<JdbcSourceState> {
        let share = restored.share();
        let mut state = JdbcSourceState::default();
        for s in restored.previous.into_iter().flatten() {
            for (id, position) in s.splits {
                let k: Option<usize> = id.get(1..).and_then(|k| k.parse().ok());
                if k.is_some_and(|k| share.owns(k)) {
                    state.splits.insert(id, position);
                }
            }
        }
        Ok(state)
    }

    async fn run(&mut self, ctx: &mut SourceContext<T, JdbcSourceState>) -> Result<()> {
        let splits = match ctx.wait_for(self.splits()).await? {
            Some(s) => s?,
            None => return Ok(()),
        };
        let (handler, rows) = {
            let r = self.running()?;
            (r.handler.clone(), r.rows.clone())
        };
        let track = self.settings.track.clone();
        loop {
            let mut read_any = false;
            let mut open_splits = 0;
            for split in &splits {
                let position = ctx
                    .state()
                    .splits
                    .get(&split.id)
                    .cloned()
                    .unwrap_or_default();
                if position.done {
                    continue;
                }
                open_splits += 1;
                let page = match ctx.wait_for(self.fetch(split, position.last)).await? {
                    Some(p) => p?,
                    None => return Ok(()),
                };
                let full = page.len() >= self.settings.fetch;
                for text in page {
                    let row: Row = serde_json::from_str(&text).map_err(|e| {
                        Error::connector("jdbc source: reading a row", format!("{e}: {text}"))
                    })?;
                    let last: Vec<Value> = track
                        .iter()
                        .map(|c| row.get(c).cloned().unwrap_or(Value::Null))
                        .collect();
                    let position = format!("{} {}", split.id, Value::Array(last.clone()));
                    ctx.state_mut()
                        .splits
                        .entry(split.id.clone())
                        .or_default()
                        .last = Some(last);
                    rows.increment(1);
                    match (self.decode)(row) {
                        Ok(v) => ctx.collect(v).await?,
                        Err(e) => {
                            handler.handle(position, &e, text.as_bytes()).await?;
                        }
                    }
                }
                read_any |= full;
                if !full && split.range.is_some() {
                    ctx.state_mut()
                        .splits
                        .entry(split.id.clone())
                        .or_default()
                        .done = true;
                }
                if ctx.is_stopping() {
                    return Ok(());
                }
            }
            let idle = match self.settings.mode {
                Mode::Bounded { .. } if open_splits == 0 => return Ok(()),
                Mode::Continuous { poll } if !read_any => Some(poll),
                _ => None,
            };
            if let Some(poll) = idle {
                if ctx.wait_for(tokio::time::sleep(poll)).await?.is_none() {
                    return Ok(());
                }
            }
        }
    }
}
