//! The `files` sections of a pipeline file (feature `pipeline-file`): `[sink] type = "files"`
//! and `[source] type = "files"`, read by serde (unknown fields refused), turned into the sink
//! or the source, and checked by a healthcheck that lists the location.

use std::time::Duration;

use serde::Deserialize;

use rivus_pipeline_file::{
    opt_duration, CatalogEntry, Health, SectionContext, SinkPlan, SinkSection, SourcePlan,
    SourceSection,
};
use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::{Error, Result};

use crate::encode::{AvroCodec, Column, ColumnType, Compression, FileFormat, ParquetCompression};
use crate::location::S3Options;
use crate::{FilesSink, FilesSinkBuilder, FilesSource, ReadFormat};
use rivus_sdk::SchemaEvolution;

/// Declares the section struct `$name` of a sink writing files — `files`, and the table sinks
/// built on it — with its own fields, then the file options every such sink shares, said once
/// here: `target_file_size`, `rollover`, `part_size`, `row_group_bytes`, `max_open_files` and
/// `s3`; and `file_sizes()`, the sizes it gave. Its derives and attributes are the caller's.
#[macro_export]
macro_rules! file_section {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $($(#[$field_meta:meta])* pub $field:ident: $ty:ty,)*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $($(#[$field_meta])* pub $field: $ty,)*
            /// Bytes at which a data file is closed (134217728).
            pub target_file_size: Option<u64>,
            /// Age at which a data file is closed (15m).
            #[serde(default, deserialize_with = "rivus_pipeline_file::opt_duration")]
            #[schemars(with = "Option<rivus_pipeline_file::DurationText>")]
            pub rollover: Option<std::time::Duration>,
            /// Bytes per S3 part (8388608, at least 5 MiB).
            pub part_size: Option<usize>,
            /// Bytes at which a Parquet row group is closed (16777216).
            pub row_group_bytes: Option<usize>,
            /// Data files open at once per subtask (16).
            pub max_open_files: Option<usize>,
            /// S3: `{ endpoint, region, access_key, secret_key, virtual_hosted }`.
            #[serde(default)]
            pub s3: $crate::pipeline_file::S3Section,
        }

        impl $name {
            /// The sizes and life of the files this section gave.
            pub fn file_sizes(&self) -> $crate::pipeline_file::FileSizes {
                $crate::pipeline_file::FileSizes {
                    target_file_size: self.target_file_size,
                    rollover: self.rollover,
                    part_size: self.part_size,
                    row_group_bytes: self.row_group_bytes,
                    max_open_files: self.max_open_files,
                }
            }
        }
    };
}

crate::file_section! {
/// `[sink] type = "files"`.
#[derive(Debug, Clone, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FilesSection {
    /// `s3://bucket/prefix` or `file:///dir`.
    pub url: String,
    /// `parquet` (default), `jsonl`, `csv`, `avro`.
    #[serde(default)]
    pub format: FormatOption,
    /// Parquet: `zstd` (default), `snappy`, `gzip`, `none`; Avro: `zstd` (default),
    /// `deflate`, `none`; JSON lines and CSV: `none` (default), `gzip`, `zstd`.
    pub compression: Option<CompressionOption>,
    /// Parquet, Avro and CSV columns: `[{ name, type, nullable }]` (default: inferred).
    pub schema: Option<Vec<ColumnOption>>,
    /// The columns of this subject's latest Avro schema in `registry` instead.
    pub schema_subject: Option<String>,
    /// The schema registry of `schema_subject`: `{ url, username, password, token, ca_file }`.
    pub registry: Option<rivus_formats::RegistryConfig>,
    /// `basic`: a field that is not a column becomes one in the next files; `none` (default):
    /// the record goes to the error policy.
    #[serde(default)]
    pub schema_evolution: SchemaEvolution,
    /// Partition directories, e.g. `dt={event_time:%Y-%m-%d}/`.
    #[serde(default)]
    pub path: String,
}
}

/// `s3 = { ... }`: the store, what is not given taken from `AWS_*` variables.
#[derive(Debug, Clone, Default, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct S3Section {
    /// The endpoint of a self-hosted store (`http://127.0.0.1:8333`); else `AWS_ENDPOINT_URL`,
    /// else AWS.
    pub endpoint: Option<String>,
    /// The region (else `AWS_REGION`, else us-east-1).
    pub region: Option<String>,
    /// The access key id (else `AWS_ACCESS_KEY_ID`).
    pub access_key: Option<String>,
    /// The secret key (else `AWS_SECRET_ACCESS_KEY`); use `${VAR}`.
    pub secret_key: Option<String>,
    /// Virtual-host addressing (false: path style).
    #[serde(default)]
    pub virtual_hosted: bool,
}

impl S3Section {
    /// The store's options (what is not given from the `AWS_*` variables).
    pub fn options(&self) -> S3Options {
        S3Options {
            endpoint: self.endpoint.clone(),
            region: self.region.clone(),
            access_key: self.access_key.clone(),
            secret_key: self.secret_key.clone(),
            virtual_hosted: self.virtual_hosted,
            from_env: true,
        }
    }
}

/// `format = ...`.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, rivus_pipeline_file::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum FormatOption {
    /// Apache Parquet.
    #[default]
    Parquet,
    /// JSON lines.
    Jsonl,
    /// CSV with a header row.
    Csv,
    /// Avro object container files.
    Avro,
}

/// `compression = ...`: the codecs of every format; each format takes some of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CompressionOption {
    /// None.
    None,
    /// Snappy (Parquet).
    Snappy,
    /// gzip (Parquet, JSON lines, CSV).
    Gzip,
    /// Zstandard (every format).
    Zstd,
    /// Deflate (Avro).
    Deflate,
}

/// `compression = ...` of a table's Parquet data files (the lakehouse sinks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ParquetCodec {
    /// None.
    None,
    /// Snappy.
    Snappy,
    /// gzip.
    Gzip,
    /// Zstandard.
    Zstd,
}

impl ParquetCodec {
    /// The codec an option names; zstd when it names none.
    pub fn compression(option: Option<ParquetCodec>) -> ParquetCompression {
        match option {
            None | Some(ParquetCodec::Zstd) => ParquetCompression::Zstd,
            Some(ParquetCodec::None) => ParquetCompression::None,
            Some(ParquetCodec::Snappy) => ParquetCompression::Snappy,
            Some(ParquetCodec::Gzip) => ParquetCompression::Gzip,
        }
    }
}

/// One `schema` entry.
#[derive(Debug, Clone, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ColumnOption {
    /// The record's field.
    pub name: String,
    /// `boolean`, `int32`, `int64`, `float32`, `float64`, `string`, `date`, `timestamp`, `json`.
    #[serde(rename = "type")]
    pub ty: ColumnType,
    /// Default true.
    pub nullable: Option<bool>,
}

/// The options of a file's size and life a section gave (the sink's defaults for the rest).
#[derive(Debug, Clone, Default)]
pub struct FileSizes {
    /// `target_file_size`.
    pub target_file_size: Option<u64>,
    /// `rollover`.
    pub rollover: Option<Duration>,
    /// `part_size`.
    pub part_size: Option<usize>,
    /// `row_group_bytes`.
    pub row_group_bytes: Option<usize>,
    /// `max_open_files`.
    pub max_open_files: Option<usize>,
}

impl FileSizes {
    /// `b` with the options given.
    pub fn apply(&self, mut b: FilesSinkBuilder) -> FilesSinkBuilder {
        if let Some(n) = self.target_file_size {
            b = b.target_file_size(n);
        }
        if let Some(d) = self.rollover {
            b = b.rollover(d);
        }
        if let Some(n) = self.part_size {
            b = b.part_size(n);
        }
        if let Some(n) = self.row_group_bytes {
            b = b.row_group_bytes(n);
        }
        if let Some(n) = self.max_open_files {
            b = b.max_open_files(n);
        }
        b
    }
}

/// The files' options of a table sink's section (`delta`, `iceberg`): the declared columns,
/// their evolution and the sizes, checked once and applied to the files sink under the table.
#[derive(Debug, Clone)]
pub struct TableFiles {
    columns: Option<Vec<Column>>,
    evolution: SchemaEvolution,
    sizes: FileSizes,
}

impl TableFiles {
    /// The options; `create_table` with neither declared columns nor `schema_evolution =
    /// "basic"` (which creates the table without columns and adds the records' fields) is
    /// refused by `schema`.
    pub fn new(
        create_table: bool,
        schema: Option<&[ColumnOption]>,
        evolution: SchemaEvolution,
        sizes: FileSizes,
    ) -> Result<TableFiles> {
        if create_table && schema.is_none() && evolution != SchemaEvolution::Basic {
            return Err(Error::config(
                "schema",
                "`create_table = true` creates the table from the columns declared here, or \
                 without columns, adding the records' fields as they come, with \
                 `schema_evolution = \"basic\"`",
            ));
        }
        Ok(TableFiles {
            columns: schema.map(ColumnOption::columns),
            evolution,
            sizes,
        })
    }

    /// The files sink's options under the table, with the job's error `policy`.
    pub fn apply(
        self,
        policy: ErrorPolicy,
    ) -> impl FnOnce(FilesSinkBuilder) -> FilesSinkBuilder + Send + 'static {
        move |mut b| {
            if let Some(cols) = self.columns {
                b = b.schema(cols);
            }
            self.sizes
                .apply(b)
                .schema_evolution(self.evolution)
                .error_policy(policy)
        }
    }
}

impl ColumnOption {
    /// The columns `options` declare.
    pub fn columns(options: &[ColumnOption]) -> Vec<Column> {
        options
            .iter()
            .map(|c| Column {
                name: c.name.clone(),
                ty: c.ty,
                nullable: c.nullable.unwrap_or(true),
                field_id: None,
            })
            .collect()
    }
}

impl FilesSection {
    fn builder(&self, policy: ErrorPolicy) -> Result<FilesSinkBuilder> {
        use CompressionOption as C;
        let refused = |format: &str, takes: &str| {
            Error::config(
                "compression",
                format!(
                    "`{:?}` is not a {format} codec: {takes}",
                    self.compression.unwrap_or(C::None)
                )
                .to_lowercase(),
            )
        };
        let format = match (self.format, self.compression) {
            (FormatOption::Parquet, c) => FileFormat::Parquet(match c {
                None | Some(C::Zstd) => ParquetCompression::Zstd,
                Some(C::None) => ParquetCompression::None,
                Some(C::Snappy) => ParquetCompression::Snappy,
                Some(C::Gzip) => ParquetCompression::Gzip,
                Some(C::Deflate) => return Err(refused("parquet", "none, snappy, gzip or zstd")),
            }),
            (FormatOption::Avro, c) => FileFormat::Avro(match c {
                None | Some(C::Zstd) => AvroCodec::Zstandard,
                Some(C::None) => AvroCodec::Null,
                Some(C::Deflate) => AvroCodec::Deflate,
                Some(C::Snappy | C::Gzip) => return Err(refused("avro", "none, deflate or zstd")),
            }),
            (f, c) => {
                let c = match c {
                    None | Some(C::None) => Compression::None,
                    Some(C::Gzip) => Compression::Gzip,
                    Some(C::Zstd) => Compression::Zstd,
                    Some(C::Snappy | C::Deflate) => {
                        return Err(refused("line file", "none, gzip or zstd"))
                    }
                };
                if f == FormatOption::Csv {
                    FileFormat::Csv(c)
                } else {
                    FileFormat::JsonLines(c)
                }
            }
        };
        let mut b = FilesSink::builder(&self.url)
            .format(format)
            .path(self.path.clone())
            .schema_evolution(self.schema_evolution)
            .error_policy(policy)
            .s3(self.s3.options());
        if let Some(cols) = &self.schema {
            b = b.schema(ColumnOption::columns(cols));
        }
        match (&self.schema_subject, &self.registry, &self.schema) {
            (Some(_), _, Some(_)) => {
                return Err(Error::config(
                    "schema_subject",
                    "either `schema` or `schema_subject`, not both",
                ))
            }
            (Some(subject), Some(registry), None) => {
                b = b.schema_from_registry(registry.clone(), subject.clone());
            }
            (Some(_), None, None) => {
                return Err(Error::config(
                    "registry",
                    "`schema_subject` needs `registry = { url = \"...\" }`",
                ))
            }
            (None, Some(_), _) => {
                return Err(Error::config(
                    "schema_subject",
                    "`registry` is for `schema_subject`: name the subject",
                ))
            }
            (None, None, _) => {}
        }
        Ok(self.file_sizes().apply(b))
    }

    /// The sink.
    pub fn sink(&self, policy: ErrorPolicy) -> Result<FilesSink> {
        self.builder(policy)?.build()
    }
}

#[async_trait::async_trait]
impl SinkSection for FilesSection {
    const TYPE: &'static str = "files";
    const CATALOG: CatalogEntry = CatalogEntry {
        summary: "Parquet, Avro, JSON lines or CSV files on S3-compatible stores or local \
                  disks, partitioned by a path template",
        guarantee: "exactly-once (multipart uploads completed when a checkpoint completes)",
    };

    fn build(&self, ctx: &SectionContext) -> Result<SinkPlan> {
        let (section, policy) = (self.clone(), ctx.policy.clone());
        SinkPlan::checked(move || section.sink(policy.clone()))
    }

    async fn check(&self, _ctx: &SectionContext) -> Health {
        let outcome = match self.sink(ErrorPolicy::Fail) {
            Ok(s) => s.report().await.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        Health::new(Self::TYPE, self.url.clone(), outcome)
    }
}

/// `[source] type = "files"`.
#[derive(Debug, Clone, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FilesSourceSection {
    /// `s3://bucket/prefix` or `file:///dir`.
    pub url: String,
    /// `parquet` (default), `jsonl`, `csv`, `avro` (gzip and zstd line files by their
    /// `.gz`/`.zst` extension).
    #[serde(default)]
    pub format: FormatOption,
    /// List again at this interval for new files (default: list once, then end).
    #[serde(default, deserialize_with = "opt_duration")]
    #[schemars(with = "Option<rivus_pipeline_file::DurationText>")]
    pub discover: Option<Duration>,
    /// A larger file is refused (268435456).
    pub max_file_bytes: Option<u64>,
    /// S3: `{ endpoint, region, access_key, secret_key, virtual_hosted }`.
    #[serde(default)]
    pub s3: S3Section,
}

impl FilesSourceSection {
    /// The source.
    pub fn source(&self, policy: ErrorPolicy) -> Result<FilesSource> {
        let format = match self.format {
            FormatOption::Parquet => ReadFormat::Parquet,
            FormatOption::Jsonl => ReadFormat::JsonLines,
            FormatOption::Csv => ReadFormat::Csv,
            FormatOption::Avro => ReadFormat::Avro,
        };
        let mut b = FilesSource::builder(&self.url, format)
            .error_policy(policy)
            .s3(self.s3.options());
        if let Some(d) = self.discover {
            b = b.discover(d);
        }
        if let Some(n) = self.max_file_bytes {
            b = b.max_file_bytes(n);
        }
        b.build()
    }
}

#[async_trait::async_trait]
impl SourceSection for FilesSourceSection {
    const TYPE: &'static str = "files";
    const CATALOG: CatalogEntry = CatalogEntry {
        summary: "the records of Parquet, Avro, JSON lines or CSV files on S3-compatible \
                  stores or local disks, listed once or continuously",
        guarantee: "exactly-once (files done and records of the file being read in checkpoints)",
    };

    fn build(&self, ctx: &SectionContext) -> Result<SourcePlan> {
        Ok(SourcePlan::cloned(self.source(ctx.policy.clone())?))
    }

    async fn check(&self, _ctx: &SectionContext) -> Health {
        let outcome = match self.source(ErrorPolicy::Fail) {
            Ok(s) => s.report().await.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        Health::new(Self::TYPE, self.url.clone(), outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(extra: &str) -> std::result::Result<FilesSection, String> {
        toml::from_str(&format!("url = \"file:///tmp/x\"\n{extra}")).map_err(|e| e.to_string())
    }

    #[test]
    fn each_format_takes_its_own_codecs_and_column_types_are_read_by_name() {
        let sink = |extra: &str| section(extra).unwrap().builder(ErrorPolicy::Fail);
        for ok in [
            "compression = \"snappy\"",
            "format = \"avro\"\ncompression = \"deflate\"",
            "format = \"jsonl\"\ncompression = \"gzip\"",
            "format = \"csv\"\ncompression = \"zstd\"",
        ] {
            assert!(sink(ok).is_ok(), "{ok}");
        }
        for (bad, takes) in [
            ("compression = \"deflate\"", "none, snappy, gzip or zstd"),
            (
                "format = \"avro\"\ncompression = \"gzip\"",
                "none, deflate or zstd",
            ),
            (
                "format = \"jsonl\"\ncompression = \"snappy\"",
                "none, gzip or zstd",
            ),
        ] {
            let Err(e) = sink(bad) else {
                panic!("{bad}: accepted")
            };
            let e = e.to_string();
            assert!(
                e.contains("at `compression`") && e.contains(takes),
                "{bad}: {e}"
            );
        }
        // Not a codec of any format: refused when the file is read.
        assert!(section("compression = \"lz4\"")
            .unwrap_err()
            .contains("lz4"));
        let s = section("schema = [{ name = \"id\", type = \"long\" }, { name = \"at\", type = \"timestamp\" }]")
            .unwrap();
        let types: Vec<ColumnType> = s.schema.unwrap().iter().map(|c| c.ty).collect();
        assert_eq!(types, [ColumnType::Int64, ColumnType::Timestamp]);
        let e = section("schema = [{ name = \"id\", type = \"integer\" }]").unwrap_err();
        assert!(e.contains("integer") && e.contains("int64"), "{e}");
    }
}
