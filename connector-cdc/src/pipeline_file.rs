//! The `postgres-cdc` section of a pipeline file (feature `pipeline-file`):
//! `[source] type = "postgres-cdc"`, read by serde (unknown fields refused), turned into the
//! source, and checked by a healthcheck that reports the publication, the slot and its lag.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use rivus_pipeline_file::{
    opt_duration, CatalogEntry, Health, SectionContext, SectionMetrics, SourcePlan, SourceSection,
};
use rivus_sdk::secrets::redact_url;
use rivus_sdk::tls::TlsFiles;
use rivus_sdk::Result;

use crate::{Envelope, PostgresCdcSource, SnapshotMode};

/// `[source] type = "postgres-cdc"`.
#[derive(Debug, Clone, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PostgresCdcSection {
    /// `postgres://user:password@host:port/db` of a user with REPLICATION.
    pub url: String,
    /// The publication whose tables are read (created by the tables' owner).
    pub publication: String,
    /// The replication slot (default `rivus_<job>`, lower-case).
    pub slot: Option<String>,
    /// The tables to read, `schema.table` (default: the publication's).
    pub tables: Option<Vec<String>>,
    /// Key columns of tables without a primary key, for the snapshot's chunks.
    #[serde(default)]
    pub key_columns: BTreeMap<String, Vec<String>>,
    /// `initial` (default), `never`, `when-needed`.
    #[serde(default)]
    pub snapshot: SnapshotOption,
    /// Rows per snapshot query (10 000).
    pub chunk_rows: Option<usize>,
    /// `debezium` (default) or `flat`.
    #[serde(default)]
    pub envelope: EnvelopeOption,
    /// Each Debezium envelope carries its table's columns, types and key (`columns`), for a
    /// sink that creates the tables (the SQL sink's `schema_evolution`).
    #[serde(default)]
    pub column_types: bool,
    /// How often the position is reported to the server when idle (10 s).
    #[serde(default, deserialize_with = "opt_duration")]
    #[schemars(with = "Option<rivus_pipeline_file::DurationText>")]
    pub status_interval: Option<Duration>,
    /// SQL run at every status interval (e.g. `UPDATE rivus_heartbeat SET ts = now()`).
    pub heartbeat_query: Option<String>,
    /// TLS: `{ ca_file, client_cert, client_key }` (PEM), added to the URL as `sslrootcert`,
    /// `sslcert`, `sslkey` with `sslmode=verify-full`.
    #[serde(default)]
    pub tls: TlsFiles,
}

/// `snapshot = ...`.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, rivus_pipeline_file::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum SnapshotOption {
    /// Read the tables when the slot is created.
    #[default]
    Initial,
    /// Never read the tables whole.
    Never,
    /// Read them when there is no slot yet.
    WhenNeeded,
}

/// `envelope = ...`.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, rivus_pipeline_file::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum EnvelopeOption {
    /// Debezium's envelope.
    #[default]
    Debezium,
    /// The row with `__op` and `__deleted`.
    Flat,
}

impl PostgresCdcSection {
    /// The URL with the `tls` files as parameters.
    fn url(&self) -> Result<String> {
        if self.tls.is_empty() {
            return Ok(self.url.clone());
        }
        self.tls.validate_files()?;
        let mut url = self.url.clone();
        let mut add = |k: &str, v: &std::path::Path| {
            url.push(if url.contains('?') { '&' } else { '?' });
            url.push_str(&format!("{k}={}", v.display()));
        };
        if !self.url.contains("sslmode=") {
            add("sslmode", std::path::Path::new("verify-full"));
        }
        if let Some(ca) = &self.tls.ca_file {
            add("sslrootcert", ca);
        }
        if let (Some(c), Some(k)) = (&self.tls.client_cert, &self.tls.client_key) {
            add("sslcert", c);
            add("sslkey", k);
        }
        Ok(url)
    }

    fn slot(&self, job: &str) -> String {
        self.slot.clone().unwrap_or_else(|| {
            let name: String = format!("rivus_{job}")
                .to_lowercase()
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .take(63)
                .collect();
            name
        })
    }

    /// The source of job `job` (the slot's default name).
    pub fn source(&self, job: &str) -> Result<PostgresCdcSource> {
        let mut b = PostgresCdcSource::builder(self.url()?, self.slot(job), &self.publication)
            .snapshot(match self.snapshot {
                SnapshotOption::Initial => SnapshotMode::Initial,
                SnapshotOption::Never => SnapshotMode::Never,
                SnapshotOption::WhenNeeded => SnapshotMode::WhenNeeded,
            })
            .envelope(match self.envelope {
                EnvelopeOption::Debezium => Envelope::Debezium,
                EnvelopeOption::Flat => Envelope::Flat,
            })
            .column_types(self.column_types);
        if let Some(t) = &self.tables {
            b = b.tables(t.clone());
        }
        for (table, cols) in &self.key_columns {
            b = b.key_columns(table.clone(), cols.clone());
        }
        if let Some(n) = self.chunk_rows {
            b = b.chunk_rows(n);
        }
        if let Some(d) = self.status_interval {
            b = b.status_interval(d);
        }
        if let Some(q) = &self.heartbeat_query {
            b = b.heartbeat_query(q.clone());
        }
        b.build()
    }
}

#[async_trait::async_trait]
impl SourceSection for PostgresCdcSection {
    const TYPE: &'static str = "postgres-cdc";
    const CATALOG: CatalogEntry = CatalogEntry {
        summary: "every insert, update and delete of PostgreSQL tables (logical replication, \
                  pgoutput), after a consistent snapshot",
        guarantee: "exactly-once (commit LSN and index in checkpoints; the slot confirmed on \
                    completed checkpoints)",
    };

    fn build(&self, ctx: &SectionContext) -> Result<SourcePlan> {
        Ok(SourcePlan::cloned(self.source(&ctx.job)?))
    }

    async fn check(&self, ctx: &SectionContext) -> Health {
        let outcome = match self.source(&ctx.job) {
            Ok(s) => s.report().await.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        Health::new(Self::TYPE, redact_url(&self.url), outcome)
    }

    fn metrics(&self) -> SectionMetrics {
        SectionMetrics {
            lag: Some("rivus_postgres_cdc_lag_bytes"),
        }
    }
}
