//! The `iceberg` section of a pipeline file (feature `pipeline-file`): `[sink] type =
//! "iceberg"`, read by serde (unknown fields refused), turned into the sink, and checked by a
//! healthcheck that loads the table from its catalog. The files' options mean what they mean
//! for `type = "files"`.

use serde::Deserialize;

use rivus_connector_files::pipeline_file::{ColumnOption, ParquetCodec, TableFiles};
use rivus_connector_files::SchemaEvolution;
use rivus_pipeline_file::{CatalogEntry, Health, SectionContext, SinkPlan, SinkSection};
use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::secrets::redact_url;
use rivus_sdk::{Error, Result};

use crate::{CatalogOptions, IcebergSink, IcebergSinkBuilder};

rivus_connector_files::file_section! {
/// `[sink] type = "iceberg"`.
#[derive(Debug, Clone, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IcebergSection {
    /// The catalog: `{ uri, warehouse, name }`.
    pub catalog: CatalogSection,
    /// The table: `namespace.table`.
    pub table: String,
    /// Create the table (and its namespace) from `schema` when it does not exist (default
    /// false).
    #[serde(default)]
    pub create_table: bool,
    /// The columns of a table created now: `[{ name, type, nullable }]`; without them (and
    /// with `schema_evolution = "basic"`) a table is created without columns and takes the
    /// records' fields as they come. An existing table's columns are its own.
    pub schema: Option<Vec<ColumnOption>>,
    /// The partition spec of a table created now: `["day(ts)", "bucket(16, id)", "user"]`
    /// (Spark's `PARTITIONED BY`). An existing table's spec is its own.
    #[serde(default)]
    pub partition_by: Vec<String>,
    /// `basic`: a record's field that is not a column is added to the table (optional,
    /// typed from its values) before any file holding it is committed; `none` (default): the
    /// record goes to the error policy.
    #[serde(default)]
    pub schema_evolution: SchemaEvolution,
    /// Changes applied by key: not yet (the Iceberg library cannot commit delete files);
    /// only `false` is accepted.
    #[serde(default)]
    pub apply_changes: bool,
    /// The data files' codec: `zstd` (default), `snappy`, `gzip`, `none`.
    pub compression: Option<ParquetCodec>,
}
}

/// `catalog = { ... }`: a REST catalog or the SQL catalog, by the URI's scheme.
#[derive(Clone, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CatalogSection {
    /// A REST catalog's base URL (`http(s)://…`), or the database holding the SQL catalog's
    /// tables: `postgres://…`, `mysql://…`, `sqlite:…`.
    pub uri: String,
    /// Where new tables go: `s3://bucket/prefix` or `file:///dir` (a REST catalog takes it
    /// as its `warehouse`).
    pub warehouse: String,
    /// The SQL catalog's name (`rivus`).
    pub name: Option<String>,
    /// A REST catalog's properties: `token`, `credential`, `scope`, `oauth2-server-uri`,
    /// `header.<name>` (values never shown).
    #[serde(default)]
    pub properties: std::collections::BTreeMap<String, String>,
}

impl std::fmt::Debug for CatalogSection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogSection")
            .field("uri", &redact_url(&self.uri))
            .field("warehouse", &self.warehouse)
            .field("name", &self.name)
            .field("properties", &self.properties.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl CatalogSection {
    /// The catalog's options.
    pub fn options(&self) -> CatalogOptions {
        let mut o = CatalogOptions::new(&self.uri, &self.warehouse);
        if let Some(name) = &self.name {
            o.name.clone_from(name);
        }
        o.properties.clone_from(&self.properties);
        o
    }
}

impl IcebergSection {
    fn builder(&self, policy: ErrorPolicy) -> Result<IcebergSinkBuilder> {
        if self.apply_changes {
            return Err(Error::config(
                "apply_changes",
                "not supported for Iceberg yet: the Iceberg library (iceberg 0.10) cannot \
                 commit the delete files that upserts and deletes need; append the changes \
                 (`apply_changes = false`) or write them to a Delta table",
            ));
        }
        let files = TableFiles::new(
            self.create_table,
            self.schema.as_deref(),
            self.schema_evolution,
            self.file_sizes(),
        )?;
        Ok(IcebergSinkBuilder::new(self.catalog.options(), &self.table)
            .s3(self.s3.options())
            .create_table(self.create_table)
            .partition_by(self.partition_by.clone())
            .compression(ParquetCodec::compression(self.compression))
            .files(files.apply(policy)))
    }

    /// The sink.
    pub fn sink(&self, policy: ErrorPolicy) -> Result<IcebergSink> {
        self.builder(policy)?.build()
    }
}

#[async_trait::async_trait]
impl SinkSection for IcebergSection {
    const TYPE: &'static str = "iceberg";
    const CATALOG: CatalogEntry = CatalogEntry {
        summary: "appends to an Apache Iceberg table of a REST catalog or a SQL catalog \
                  (PostgreSQL, MySQL, SQLite), data files on S3-compatible stores or local disks",
        guarantee: "exactly-once (each checkpoint's files appended in one snapshot that \
                    records the writer's checkpoint in the table's properties; a restore \
                    skips what it finds)",
    };

    fn build(&self, ctx: &SectionContext) -> Result<SinkPlan> {
        let (section, policy) = (self.clone(), ctx.policy.clone());
        SinkPlan::checked(move || section.sink(policy.clone()))
    }

    async fn check(&self, _ctx: &SectionContext) -> Health {
        // Every option checked as the plan checks them, then the table loaded.
        let outcome = match self
            .sink(ErrorPolicy::Fail)
            .and_then(|_| self.builder(ErrorPolicy::Fail))
        {
            Ok(b) => b.report().await.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        Health::new(Self::TYPE, self.table.clone(), outcome)
    }

    async fn orphans(&self, _ctx: &SectionContext) -> Option<Result<Vec<String>>> {
        let listed = match self.builder(ErrorPolicy::Fail) {
            Ok(b) => b.orphans().await,
            Err(e) => Err(e),
        };
        Some(listed.map(|files| files.iter().map(|o| o.line()).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(extra: &str) -> Result<IcebergSection> {
        let text = format!(
            "catalog = {{ uri = \"postgres://u:hunter2@h/db\", warehouse = \"s3://lake/wh\" }}\n\
             table = \"lake.orders\"\n{extra}"
        );
        toml::from_str(&text).map_err(|e| Error::config("sink", e.to_string()))
    }

    #[test]
    fn options_are_refused_by_name_and_the_uri_never_shown() {
        let s = section("").unwrap();
        assert!(s.sink(ErrorPolicy::Fail).is_ok());
        assert!(!format!("{s:?}").contains("hunter2"));
        let e = section("apply_changes = true")
            .unwrap()
            .sink(ErrorPolicy::Fail);
        assert!(e.unwrap_err().to_string().contains("apply_changes"));
        let e = section("create_table = true")
            .unwrap()
            .sink(ErrorPolicy::Fail);
        assert!(e.unwrap_err().to_string().contains("schema"));
        let s = section("create_table = true\nschema_evolution = \"basic\"").unwrap();
        assert!(
            s.sink(ErrorPolicy::Fail).is_ok(),
            "created from the records"
        );
        let e = section("").map(|mut s| {
            s.table = "orders".into();
            s.sink(ErrorPolicy::Fail)
        });
        assert!(e.unwrap().unwrap_err().to_string().contains("table"));
        assert!(section("url = \"x\"").is_err(), "unknown fields refused");
        let e = section("partition_by = [\"day(ts)\"]")
            .unwrap()
            .sink(ErrorPolicy::Fail);
        assert!(e.unwrap_err().to_string().contains("create_table"));
        let e = section("create_table = true\nschema = []\npartition_by = [\"week(ts)\"]")
            .unwrap()
            .sink(ErrorPolicy::Fail);
        assert!(e.unwrap_err().to_string().contains("partition_by[0]"));
    }
}
