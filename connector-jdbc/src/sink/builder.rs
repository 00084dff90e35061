//! [`JdbcSinkBuilder`]: the sink's settings, checked before anything connects.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use rivus_sdk::bulk::BulkConfig;
use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::schema::SchemaError;
use rivus_sdk::template::Template;
use rivus_sdk::{DeliveryGuarantee, Error, Result};

use super::{JdbcSink, RowChange};
use crate::config::JdbcConfig;
use crate::dialect::Dialect;
use crate::evolve::SchemaEvolution;
use crate::statement::{PgMethod, WriteMode};
use crate::value::BytesText;

#[derive(Debug, Clone)]
pub(super) struct Settings {
    pub(super) url: String,
    pub(super) table: String,
    pub(super) columns: Option<Vec<String>>,
    pub(super) key: Option<Vec<String>>,
    pub(super) mode: WriteMode,
    pub(super) method: PgMethod,
    pub(super) bulk: BulkConfig,
    pub(super) policy: ErrorPolicy,
    pub(super) exactly_once: bool,
    pub(super) prefix: Option<String>,
    pub(super) ignore_unknown: bool,
    pub(super) timeout: Duration,
    pub(super) statement_timeout: Duration,
    pub(super) positions_table: String,
    /// Set by [`JdbcSinkBuilder::bytes_encoding`]; else UTF-8, or base64 for change records.
    pub(super) bytes_text: Option<BytesText>,
    pub(super) apply_changes: bool,
    pub(super) evolution: SchemaEvolution,
    pub(super) max_open_tables: usize,
}

/// Builds a [`JdbcSink`].
#[derive(Debug)]
pub struct JdbcSinkBuilder {
    s: Settings,
    tls: rivus_sdk::tls::TlsFiles,
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

    rivus_sdk::setters! {
        /// Insert (default), upsert, or your own statement ([`WriteMode::Statement`]; or use
        /// [`JdbcSink::with_statement`]).
        mode(mode: WriteMode) => s.mode;

        /// How PostgreSQL receives batches (default [`PgMethod::Unnest`]).
        postgres_method(method: PgMethod) => s.method;

        /// Batching: rows per batch (`max_actions`, default 1000), bytes, interval (default
        /// 200 ms), batches in flight (default 2; always 1 for SQLite, upserts and exactly-once,
        /// where batches must land in order) and the backoff for retries after lost connections.
        /// In insert mode with more than one batch in flight, batches may commit out of order:
        /// send deletes with upsert mode.
        bulk(bulk: BulkConfig) => s.bulk;

        /// Rows per batch (shortcut for `bulk.max_actions`).
        batch_size(n: usize) => s.bulk.max_actions;

        /// Rows the database refuses (constraints, types) and records that cannot be converted:
        /// fail (default), skip, dead-letter.
        error_policy(p: ErrorPolicy) => s.policy;

        /// The delivery guarantee (default at-least-once: every batch written before a
        /// checkpoint completes). `ExactlyOnce` writes through prepared transactions:
        /// PostgreSQL's `PREPARE TRANSACTION` (needs `max_prepared_transactions` above 0 on the
        /// server) or MySQL/MariaDB XA (needs MariaDB 10.5 or MySQL 5.7.7 or later, checked at
        /// open); refused for SQLite. The sink never writes less than at-least-once:
        /// `AtMostOnce` gives at-least-once.
        guarantee(g: DeliveryGuarantee) => s.exactly_once = g == DeliveryGuarantee::ExactlyOnce;

        /// Prefix of prepared-transaction ids, unique per sink in a database (default
        /// `rivus-<job>-<operator>`, cut and ended with a hash of the whole where MySQL/MariaDB's
        /// 64-byte XA ids need it; letters, digits, `-`, `_`, `.`; a prefix given here must fit
        /// those ids with `:<subtask>:<number>`, about 40 characters, or is refused at open).
        transaction_prefix(prefix: impl Into<String>) => s.prefix = Some(prefix.into());

        /// Exactly-once behind a Kafka source in group mode (workers): the table that keeps the
        /// source's positions, written in the same transaction as the rows (default
        /// `rivus_source_positions`, created if missing; one row per sink and partition).
        positions_table(table: impl Into<String>) => s.positions_table = table.into();

        /// How a text field becomes the bytes of a binary column (`BYTEA`, `BLOB`,
        /// `VARBINARY`; default [`BytesText::Utf8`], the text's own bytes, or
        /// [`BytesText::Base64`] with [`apply_changes`](Self::apply_changes): change records
        /// carry bytes as base64, as Debezium does).
        /// [`BytesText::Base64`] keeps the bytes and fixed fields of the `avro`, `protobuf` and
        /// `json-schema` formats, which arrive as base64 text; text that does not decode is a bad
        /// record (the error policy), named by column.
        bytes_encoding(text: BytesText) => s.bytes_text = Some(text);

        /// Read records as change records ([`rivus_sdk::change::Change`]: flat with `__deleted`,
        /// or Debezium's envelope), as a change-data-capture source emits them: writes are
        /// upserted, deletes delete by key, and a column a change did not carry (PostgreSQL's
        /// unchanged TOASTed values, marked with Debezium's placeholder) keeps its value — the
        /// upsert names only the columns the change has. Values are read with Debezium's
        /// encodings: dates as days since 1970-01-01, times as microseconds since midnight,
        /// timestamps as microseconds since the epoch, bytes as base64. Needs
        /// [`WriteMode::Upsert`]; for [`build_json`](Self::build_json).
        apply_changes(on: bool) => s.apply_changes;

        /// Drop fields that name no column instead of refusing the record.
        ignore_unknown_fields(on: bool) => s.ignore_unknown;

        /// Whether tables follow the records ([`SchemaEvolution::Basic`]: a missing table is
        /// created — with the source's column types and key when the records carry them, a
        /// `postgres-cdc` source's `column_types` — and a missing column added; never a drop).
        /// Default [`SchemaEvolution::None`]. Not with exactly-once on MySQL/MariaDB, whose
        /// DDL cannot join an XA transaction.
        schema_evolution(evolution: SchemaEvolution) => s.evolution;

        /// Tables whose plans are kept at once when the table is a template (default 1 000;
        /// the least recently used is dropped and read again when needed).
        max_open_tables(n: usize) => s.max_open_tables;
    }

    fn validate(&self) -> Result<Dialect> {
        let s = &self.s;
        let dialect = Dialect::of_url(&s.url)?;
        if s.table.trim().is_empty() {
            return Err(Error::config("table", "must not be empty"));
        }
        let template = Template::parse(&s.table).map_err(|e| Error::config("table", e))?;
        if template.fixed().is_none() && matches!(s.mode, WriteMode::Statement { .. }) {
            return Err(Error::config(
                "table",
                "a sink running its own statement has no table to choose per record",
            ));
        }
        if s.max_open_tables == 0 {
            return Err(Error::config("max_open_tables", "must be at least 1"));
        }
        if s.evolution == SchemaEvolution::Basic {
            if matches!(s.mode, WriteMode::Statement { .. }) {
                return Err(Error::config(
                    "schema_evolution",
                    "a sink running its own statement has no table to evolve",
                ));
            }
            if s.exactly_once && dialect == Dialect::MySql {
                return Err(Error::config(
                    "schema_evolution",
                    "MySQL/MariaDB commit DDL at once and cannot run it inside an XA \
                     transaction (an added column would wait for the checkpoint's own \
                     transaction): use exactly_once = false with mode = \"upsert\" (rewrites \
                     are harmless), or create the tables ahead",
                ));
            }
        }
        s.bulk.validate()?;
        if s.exactly_once && dialect == Dialect::Sqlite {
            return Err(Error::config(
                "exactly_once",
                "exactly-once needs prepared transactions (PostgreSQL, or XA on MySQL/MariaDB); \
                 SQLite sinks are at-least-once (use upsert mode to make rewrites harmless)",
            ));
        }
        if let WriteMode::Statement { sql, params } = &s.mode {
            if sql.trim().is_empty() {
                return Err(Error::config("statement", "must not be empty"));
            }
            if params.iter().any(|p| p.trim().is_empty()) {
                return Err(Error::config("params", "field names must not be empty"));
            }
        }
        if s.method == PgMethod::Copy && s.mode != WriteMode::Insert {
            return Err(Error::config(
                "postgres_method",
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
                    "transaction_prefix",
                    "use letters, digits, `-`, `_` and `.` only",
                ));
            }
        }
        if s.timeout.is_zero() {
            return Err(Error::config("timeout", "must be positive"));
        }
        if s.statement_timeout.is_zero() {
            return Err(Error::config("statement_timeout", "must be positive"));
        }
        Ok(dialect)
    }

    /// Checks the settings; `mapper` turns each record into a [`RowChange`] (a missing or
    /// mistyped field is a `SchemaError` naming the record and the field).
    pub fn build<T: Send + 'static>(
        self,
        mapper: impl Fn(&T) -> Result<RowChange, SchemaError> + Send + Sync + 'static,
    ) -> Result<JdbcSink<T>> {
        let fixed = Template::parse(&self.s.table).map(|t| t.fixed().is_some());
        if fixed == Ok(false) {
            return Err(Error::config(
                "table",
                "a table template reads the records' fields: use build_json",
            ));
        }
        self.build_any(mapper)
    }

    fn build_any<T: Send + 'static>(
        mut self,
        mapper: impl Fn(&T) -> Result<RowChange, SchemaError> + Send + Sync + 'static,
    ) -> Result<JdbcSink<T>> {
        self.s.url = crate::config::url_with_tls(&self.s.url, &self.tls)?;
        let dialect = self.validate()?;
        // SQLite has one writer; a transaction spans a checkpoint; upserts must land in order
        // (two batches in flight may commit in either order, and an older value would win).
        if dialect == Dialect::Sqlite || self.s.exactly_once || self.s.mode == WriteMode::Upsert {
            self.s.bulk.concurrent_requests = 1;
        }
        Ok(JdbcSink {
            settings: Arc::new(self.s),
            mapper: Arc::new(mapper),
            as_json: None,
            open: None,
            restored: None,
        })
    }

    /// A sink of JSON objects: each object is a row written (or upserted). The table may be
    /// a template over the record (`replica.{source.table}`: [`Template`]).
    pub fn build_json(self) -> Result<JdbcSink<Value>> {
        let mut sink = self.build_json_rows()?;
        sink.as_json = Some(|v: &Value| v);
        Ok(sink)
    }

    fn build_json_rows(self) -> Result<JdbcSink<Value>> {
        if self.s.apply_changes {
            if self.s.mode != WriteMode::Upsert {
                return Err(Error::config(
                    "apply_changes",
                    "applying changes needs mode = \"upsert\" (a change rewrites its row)",
                ));
            }
            return self.build_any(|v: &Value| {
                use rivus_sdk::change::Change;
                match Change::of(&rivus_sdk::metadata::without(v)) {
                    Ok(Change::Write {
                        row,
                        unchanged,
                        moved_from: Some(from),
                    }) => Ok(RowChange::Move {
                        row,
                        unchanged,
                        from,
                    }),
                    Ok(Change::Write { row, unchanged, .. }) if unchanged.is_empty() => {
                        Ok(RowChange::Write(row))
                    }
                    Ok(Change::Write { row, unchanged, .. }) => {
                        Ok(RowChange::Update { row, unchanged })
                    }
                    Ok(Change::Delete(row)) => Ok(RowChange::Delete(row)),
                    // The write that follows moves the row.
                    Ok(Change::MovedOut { .. }) => Ok(RowChange::Nothing),
                    Err(e) => Err(SchemaError::new("json", "record", e)),
                }
            });
        }
        self.build_any(|v: &Value| match v {
            Value::Object(row) => {
                let mut row = row.clone();
                row.remove(rivus_sdk::metadata::KEY);
                Ok(RowChange::Write(row))
            }
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

impl JdbcSink<()> {
    /// The sink's batching when [`JdbcSinkBuilder::bulk`] is not called: 1000 rows, 4 MiB,
    /// every 200 ms, two batches in flight (one writing while the next fills), core's default
    /// backoff.
    pub fn default_bulk() -> BulkConfig {
        BulkConfig {
            max_actions: 1000,
            max_bytes: 4 << 20,
            flush_interval: Some(Duration::from_millis(200)),
            concurrent_requests: 2,
            ..BulkConfig::default()
        }
    }

    /// Starts a builder for a sink running `sql` once per record with the fields `params`
    /// bound in order (see [`WriteMode::Statement`]); refused rows go to the error policy as
    /// with tables.
    pub fn with_statement<S: Into<String>>(
        config: impl Into<JdbcConfig>,
        sql: impl Into<String>,
        params: impl IntoIterator<Item = S>,
    ) -> JdbcSinkBuilder {
        JdbcSink::builder(config, "statement").mode(WriteMode::Statement {
            sql: sql.into(),
            params: params.into_iter().map(Into::into).collect(),
        })
    }

    /// Starts a builder for a sink writing to `table` of the database of `config`: a URL
    /// (`postgres://`, `mysql://`, `mariadb://`, `sqlite:path`) or a whole [`JdbcConfig`]
    /// (TLS files, timeout).
    pub fn builder(config: impl Into<JdbcConfig>, table: impl Into<String>) -> JdbcSinkBuilder {
        let config = config.into();
        JdbcSinkBuilder {
            s: Settings {
                url: config.url,
                table: table.into(),
                columns: None,
                key: None,
                mode: WriteMode::Insert,
                method: PgMethod::Unnest,
                bulk: JdbcSink::default_bulk(),
                policy: ErrorPolicy::Fail,
                exactly_once: false,
                prefix: None,
                ignore_unknown: false,
                timeout: config.timeout,
                statement_timeout: config.statement_timeout,
                positions_table: "rivus_source_positions".to_owned(),
                bytes_text: None,
                apply_changes: false,
                evolution: SchemaEvolution::None,
                max_open_tables: 1000,
            },
            tls: config.tls,
        }
    }
}
