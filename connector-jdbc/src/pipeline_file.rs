//! The `jdbc` sections of a pipeline file (feature `pipeline-file`): `[source] type = "jdbc"`
//! and `[sink] type = "jdbc"`, read by serde (unknown fields refused), turned into the
//! connector with JSON records, and checked by a healthcheck that connects (and counts the
//! table's rows where there is a table to count).

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use rivus_pipeline_file::{
    opt_duration, renamed, CatalogEntry, Health, SectionContext, SinkPlan, SinkSection, SourcePlan,
    SourceSection,
};
use rivus_sdk::bulk::BulkConfig;
use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::options::{Batch, BatchDefaults, Retry};
use rivus_sdk::secrets::redact_url;
use rivus_sdk::tls::TlsFiles;
use rivus_sdk::{DeliveryGuarantee, Error, Result, SchemaEvolution};

use crate::config::url_with_tls;
use crate::{run_script, table_report, JdbcConfig, JdbcSink, JdbcSource, WriteMode};

/// `[source] type = "jdbc"`: a table or a query, read by keyset pages on `track_by`.
#[derive(Debug, Clone, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JdbcSourceSection {
    /// `postgres://`, `mysql://` or `sqlite:` URL.
    pub url: String,
    /// The table to read (or `query`).
    pub table: Option<String>,
    /// The query to read (or `table`).
    pub query: Option<String>,
    /// The columns that order the rows and mark the position.
    pub track_by: Vec<String>,
    /// `continuous` (default) or `bounded`.
    #[serde(default)]
    pub mode: JdbcSourceMode,
    /// How often a continuous source polls for new rows (1 s).
    #[serde(default, deserialize_with = "opt_duration")]
    #[schemars(with = "Option<rivus_pipeline_file::DurationText>")]
    pub poll_interval: Option<Duration>,
    /// Ranges a bounded read is split into (default: the parallelism).
    pub splits: Option<usize>,
    /// Rows per page.
    pub fetch_size: Option<usize>,
    /// TLS: `{ ca_file, client_cert, client_key }` (PEM files), added to the URL as the
    /// driver's parameters; with any file set and no `sslmode` / `ssl-mode` in the URL, the
    /// server's certificate and name are verified.
    #[serde(default)]
    pub tls: TlsFiles,
}

/// Continuous polling or bounded ranges.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, rivus_pipeline_file::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum JdbcSourceMode {
    /// Poll for new rows, never end.
    #[default]
    Continuous,
    /// Read the rows there are, split into ranges, then end.
    Bounded,
}

/// `[sink] type = "jdbc"`: a table, inserted into or upserted.
#[derive(Debug, Clone, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JdbcSinkSection {
    /// `postgres://`, `mysql://` or `sqlite:` URL.
    pub url: String,
    /// The table written to: a name (`schema.table` qualified), or a template over the record
    /// choosing one per record (`replica.{source.table}`, `orders_{at:%Y%m}`).
    pub table: String,
    /// `none` (default) or `basic`: create a missing table and add a missing column (with
    /// the source's types when the records carry them, else from the JSON values).
    #[serde(default)]
    pub schema_evolution: SchemaEvolution,
    /// Tables kept open at once with a table template (1 000).
    pub max_open_tables: Option<usize>,
    /// `insert` (default) or `upsert`.
    #[serde(default)]
    pub mode: JdbcWriteMode,
    /// The key columns of an upsert (default: the table's primary key).
    pub key: Option<Vec<String>>,
    /// The columns written (default: every column the records have).
    pub columns: Option<Vec<String>>,
    /// Prepared transactions (PostgreSQL) or XA (MySQL/MariaDB), committed per checkpoint.
    #[serde(default)]
    pub exactly_once: bool,
    /// The old name of `batch.max_records`, read for one more release.
    #[schemars(extend("deprecated" = true))]
    pub batch_size: Option<usize>,
    /// When a batch is written: `max_records` rows, `max_bytes`, `timeout` after the oldest,
    /// `in_flight` batches at once (one writing while the next fills).
    #[serde(default)]
    pub batch: Batch<JdbcBatch>,
    /// How a batch that failed in a way worth retrying (a lost connection, a deadlock, a
    /// timeout) is retried.
    #[serde(default)]
    pub retry: Retry,
    /// Longest wait for one write, prepare or commit (60 s); then retried on a new connection.
    #[serde(default, deserialize_with = "opt_duration")]
    #[schemars(with = "Option<rivus_pipeline_file::DurationText>")]
    pub statement_timeout: Option<Duration>,
    /// Exactly-once behind a Kafka source in group mode (workers): the table that keeps the
    /// source's positions (`rivus_source_positions`).
    pub positions_table: Option<String>,
    /// SQL run once before the job starts (e.g. `CREATE TABLE IF NOT EXISTS ...`).
    pub setup: Option<String>,
    /// Fields without a column are dropped instead of refused.
    #[serde(default)]
    pub ignore_unknown_fields: bool,
    /// Records are change records (`__deleted`, or Debezium's envelope): upserted or deleted by
    /// key (needs `mode = "upsert"`).
    #[serde(default)]
    pub apply_changes: bool,
    /// How text becomes the bytes of a binary column: `utf8` (default), `base64` (what the
    /// schema formats give for bytes fields, and the default with `apply_changes`: change
    /// records carry bytes as base64) or `hex`.
    #[serde(default)]
    pub bytes_encoding: Option<JdbcBytesEncoding>,
    /// TLS, as for the source.
    #[serde(default)]
    pub tls: TlsFiles,
}

/// How text becomes the bytes of a binary column.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, rivus_pipeline_file::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum JdbcBytesEncoding {
    /// The text's UTF-8 bytes.
    #[default]
    Utf8,
    /// Standard base64.
    Base64,
    /// Hexadecimal digits (optionally after `\\x` or `0x`).
    Hex,
}

impl From<JdbcBytesEncoding> for crate::BytesText {
    fn from(e: JdbcBytesEncoding) -> Self {
        match e {
            JdbcBytesEncoding::Utf8 => crate::BytesText::Utf8,
            JdbcBytesEncoding::Base64 => crate::BytesText::Base64,
            JdbcBytesEncoding::Hex => crate::BytesText::Hex,
        }
    }
}

/// Insert or upsert.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, rivus_pipeline_file::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum JdbcWriteMode {
    /// `INSERT` (a duplicate key is a refused row).
    #[default]
    Insert,
    /// Insert or update by key.
    Upsert,
}

/// Connects; counts `table`'s rows when given.
async fn healthcheck(url: &str, tls: &TlsFiles, table: Option<&str>) -> Health {
    let outcome = async {
        let url = url_with_tls(url, tls).map_err(|e| e.to_string())?;
        match table {
            Some(t) => table_report(&url, t, 1)
                .await
                .map(|(n, _)| format!("table `{t}` has {n} rows")),
            None => run_script(&url, "SELECT 1")
                .await
                .map(|_| "connected".to_owned()),
        }
        .map_err(|e| e.to_string())
    }
    .await;
    Health::new("jdbc", redact_url(url), outcome)
}

impl JdbcSourceSection {
    /// The source, JSON records, bad rows to `policy`; a bounded read is split into
    /// `splits` (default `parallelism`) ranges.
    pub fn source(&self, policy: ErrorPolicy, parallelism: usize) -> Result<JdbcSource<Value>> {
        let mut b = JdbcSource::builder(JdbcConfig::new(&self.url).tls(self.tls.clone()))
            .track_by(self.track_by.clone());
        b = match (&self.table, &self.query) {
            (Some(_), Some(_)) => {
                return Err(Error::config("query", "set a table or a query, not both"))
            }
            (Some(t), None) => b.table(t),
            (None, Some(q)) => b.query(q),
            (None, None) => return Err(Error::config("table", "set a table or a query")),
        };
        b = match self.mode {
            JdbcSourceMode::Bounded => b.bounded(None, None, self.splits.unwrap_or(parallelism)),
            JdbcSourceMode::Continuous => {
                b.continuous(self.poll_interval.unwrap_or(Duration::from_secs(1)))
            }
        };
        if let Some(n) = self.fetch_size {
            b = b.fetch_size(n);
        }
        b.error_policy(policy).build_json()
    }

    /// Connects; counts the table's rows when the source reads a table.
    pub async fn healthcheck(&self) -> Health {
        healthcheck(&self.url, &self.tls, self.table.as_deref()).await
    }
}

/// The SQL sink's batching defaults: [`JdbcSink::default_bulk`]'s.
#[derive(Debug, Clone, Copy)]
pub struct JdbcBatch;

impl BatchDefaults for JdbcBatch {
    const NAME: &'static str = "Sql";
    fn defaults() -> BulkConfig {
        JdbcSink::default_bulk()
    }
}

impl JdbcSinkSection {
    /// The sink, JSON records, refused rows to `policy`.
    pub fn sink(&self, policy: ErrorPolicy) -> Result<JdbcSink<Value>> {
        let mut config = JdbcConfig::new(&self.url).tls(self.tls.clone());
        if let Some(t) = self.statement_timeout {
            config = config.statement_timeout(t);
        }
        let mut b = JdbcSink::builder(config, &self.table)
            .mode(match self.mode {
                JdbcWriteMode::Insert => WriteMode::Insert,
                JdbcWriteMode::Upsert => WriteMode::Upsert,
            })
            .guarantee(if self.exactly_once {
                DeliveryGuarantee::ExactlyOnce
            } else {
                DeliveryGuarantee::AtLeastOnce
            })
            .ignore_unknown_fields(self.ignore_unknown_fields)
            .apply_changes(self.apply_changes)
            .schema_evolution(self.schema_evolution)
            .error_policy(policy);
        if let Some(n) = self.max_open_tables {
            b = b.max_open_tables(n);
        }
        if let Some(e) = self.bytes_encoding {
            b = b.bytes_encoding(e.into());
        }
        if let Some(k) = &self.key {
            b = b.key(k.clone());
        }
        if let Some(c) = &self.columns {
            b = b.columns(c.clone());
        }
        let mut batch = self.batch.clone();
        let given = batch.max_records_given();
        renamed(
            self.batch_size,
            "batch_size",
            &mut batch.max_records,
            "batch.max_records",
            given,
        )?;
        b = b.bulk(batch.bulk(&self.retry));
        if let Some(t) = &self.positions_table {
            b = b.positions_table(t.clone());
        }
        b.build_json()
    }

    /// Runs the `setup` script, if any (before the job starts).
    pub async fn setup(&self) -> Result<()> {
        match &self.setup {
            Some(sql) => run_script(&url_with_tls(&self.url, &self.tls)?, sql).await,
            None => Ok(()),
        }
    }

    /// The table's row count and its first `limit` rows (for the report after a run).
    pub async fn table_report(&self, limit: usize) -> Result<(u64, Vec<Value>)> {
        table_report(&url_with_tls(&self.url, &self.tls)?, &self.table, limit).await
    }

    /// One table written by every record (no template).
    fn fixed_table(&self) -> Option<&str> {
        (!self.table.contains('{')).then_some(self.table.as_str())
    }

    /// Connects; counts the table's rows unless the setup script or the sink may still create
    /// it, or the table is chosen per record.
    pub async fn healthcheck(&self) -> Health {
        let evolves = self.schema_evolution != SchemaEvolution::None;
        let table = self
            .fixed_table()
            .filter(|_| self.setup.is_none() && !evolves);
        healthcheck(&self.url, &self.tls, table).await
    }
}

#[async_trait::async_trait]
impl SourceSection for JdbcSourceSection {
    const TYPE: &'static str = "jdbc";
    const CATALOG: CatalogEntry = CatalogEntry {
        summary: "a SQL table or query, read in keyset pages (PostgreSQL, MySQL/MariaDB, SQLite)",
        guarantee: "exactly-once (keyset position per split checkpointed)",
    };

    /// A bounded read is split into as many ranges as the stage has subtasks unless `splits`
    /// says otherwise.
    fn build(&self, ctx: &SectionContext) -> Result<SourcePlan> {
        let source = self.source(ctx.policy.clone(), ctx.parallelism)?;
        Ok(SourcePlan::cloned(source))
    }

    async fn check(&self, _ctx: &SectionContext) -> Health {
        self.healthcheck().await
    }
}

#[async_trait::async_trait]
impl SinkSection for JdbcSinkSection {
    const TYPE: &'static str = "jdbc";
    const CATALOG: CatalogEntry = CatalogEntry {
        summary:
            "a SQL table: batched INSERT, upsert or DELETE (PostgreSQL, MySQL/MariaDB, SQLite)",
        guarantee:
            "at-least-once; exactly-once on PostgreSQL and MySQL/MariaDB (exactly_once = true)",
    };

    fn build(&self, ctx: &SectionContext) -> Result<SinkPlan> {
        Ok(SinkPlan::cloned(self.sink(ctx.policy.clone())?))
    }

    async fn check(&self, _ctx: &SectionContext) -> Health {
        self.healthcheck().await
    }

    /// The `setup` statement, once before the job.
    async fn prepare(&self, _ctx: &SectionContext) -> Result<()> {
        self.setup().await
    }

    /// How many rows the table holds now, and the first three.
    async fn report(&self, _ctx: &SectionContext) -> Option<String> {
        let table = self.fixed_table()?;
        Some(match self.table_report(3).await {
            Ok((n, rows)) => {
                let mut text = format!("  table `{table}` now holds {n} rows; the first:\n");
                for r in rows {
                    text.push_str(&format!("    {r}\n"));
                }
                text
            }
            Err(e) => format!("  (could not read table `{table}` back: {e})\n"),
        })
    }
}
