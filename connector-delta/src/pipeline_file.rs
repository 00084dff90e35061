//! The `delta` section of a pipeline file (feature `pipeline-file`): `[sink] type = "delta"`,
//! read by serde (unknown fields refused), turned into the sink, and checked by a healthcheck
//! that reads the table's log. The files' options mean what they mean for `type = "files"`.

use serde::Deserialize;

use rivus_connector_files::pipeline_file::{ColumnOption, ParquetCodec, TableFiles};
use rivus_connector_files::SchemaEvolution;
use rivus_pipeline_file::{CatalogEntry, Health, SectionContext, SinkPlan, SinkSection};
use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::{Error, Result};

use crate::{DeltaSink, DeltaSinkBuilder};

rivus_connector_files::file_section! {
/// `[sink] type = "delta"`.
#[derive(Debug, Clone, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeltaSection {
    /// The table's root: `s3://bucket/prefix` or `file:///dir`.
    pub url: String,
    /// Create the table from `schema` when it does not exist (default false).
    #[serde(default)]
    pub create_table: bool,
    /// The columns of a table created now: `[{ name, type, nullable }]`; without them (and
    /// with `schema_evolution = "basic"`) a table is created without columns and takes the
    /// records' fields as they come. An existing table's columns are its own.
    pub schema: Option<Vec<ColumnOption>>,
    /// `basic`: a record's field that is not a column is added to the table (nullable, typed
    /// from its values) before any file holding it is committed; `none` (default): the record
    /// goes to the error policy.
    #[serde(default)]
    pub schema_evolution: SchemaEvolution,
    /// Apply the records as changes (Debezium envelopes or the flat shape): upserts and
    /// deletes by `key`, one MERGE per checkpoint (default false).
    #[serde(default)]
    pub apply_changes: bool,
    /// The key columns changes are applied by (with `apply_changes`).
    pub key: Option<Vec<String>>,
    /// The data files' codec: `zstd` (default), `snappy`, `gzip`, `none`.
    pub compression: Option<ParquetCodec>,
}
}

impl DeltaSection {
    fn builder(&self, policy: ErrorPolicy) -> Result<DeltaSinkBuilder> {
        let files = TableFiles::new(
            self.create_table,
            self.schema.as_deref(),
            self.schema_evolution,
            self.file_sizes(),
        )?;
        let key = match (self.apply_changes, &self.key) {
            (true, Some(k)) => Some(k.clone()),
            (true, None) => {
                return Err(Error::config(
                    "key",
                    "`apply_changes = true` applies changes by key: name its columns",
                ))
            }
            (false, Some(_)) => {
                return Err(Error::config("key", "`key` is for `apply_changes = true`"))
            }
            (false, None) => None,
        };
        let mut b = DeltaSinkBuilder::new(&self.url);
        if let Some(key) = key {
            b = b.apply_changes(key);
        }
        Ok(b.s3(self.s3.options())
            .create_table(self.create_table)
            .compression(ParquetCodec::compression(self.compression))
            .files(files.apply(policy)))
    }

    /// The sink.
    pub fn sink(&self, policy: ErrorPolicy) -> Result<DeltaSink> {
        self.builder(policy)?.build()
    }
}

#[async_trait::async_trait]
impl SinkSection for DeltaSection {
    const TYPE: &'static str = "delta";
    const CATALOG: CatalogEntry = CatalogEntry {
        summary: "appends to a Delta Lake table on S3-compatible stores or local disks \
                  (Parquet data files, Delta's own log)",
        guarantee: "exactly-once (each checkpoint's files added in one commit whose \
                    application transaction id makes a repeat a no-op)",
    };

    fn build(&self, ctx: &SectionContext) -> Result<SinkPlan> {
        let (section, policy) = (self.clone(), ctx.policy.clone());
        SinkPlan::checked(move || section.sink(policy.clone()))
    }

    async fn check(&self, _ctx: &SectionContext) -> Health {
        // Every option checked as the plan checks them, then the table read.
        let outcome = match self
            .sink(ErrorPolicy::Fail)
            .and_then(|_| self.builder(ErrorPolicy::Fail))
        {
            Ok(b) => b.report().await.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        Health::new(Self::TYPE, self.url.clone(), outcome)
    }

    async fn orphans(&self, _ctx: &SectionContext) -> Option<Result<Vec<String>>> {
        let listed = match self.builder(ErrorPolicy::Fail) {
            Ok(b) => b.orphans().await,
            Err(e) => Err(e),
        };
        Some(listed.map(|files| files.into_iter().map(|o| o.line()).collect()))
    }
}
