//! [`FilesSinkBuilder`]: the sink's options, checked at `build` with the path of a bad one.

use std::sync::Arc;
use std::time::Duration;

use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::{Error, Result};

use super::{FilesSink, Settings};
use crate::encode::{Column, FileFormat, ParquetCompression, SchemaSource};
use crate::location::{Location, S3Options};
use crate::path::PathTemplate;
use crate::publish::Publish;
use rivus_sdk::SchemaEvolution;

const MIB: u64 = 1 << 20;

/// Builds a [`FilesSink`].
#[derive(Debug)]
pub struct FilesSinkBuilder {
    url: String,
    s3: S3Options,
    format: FileFormat,
    schema: SchemaSource,
    evolution: SchemaEvolution,
    path: String,
    target_file_size: u64,
    rollover: Duration,
    roll_at_checkpoints: bool,
    part_size: usize,
    row_group_bytes: usize,
    max_open_files: usize,
    policy: ErrorPolicy,
    publish: Option<Arc<dyn Publish>>,
}

impl FilesSinkBuilder {
    pub(crate) fn new(url: String) -> Self {
        FilesSinkBuilder {
            url,
            s3: S3Options::default(),
            format: FileFormat::Parquet(ParquetCompression::Zstd),
            schema: SchemaSource::Infer,
            evolution: SchemaEvolution::None,
            path: String::new(),
            target_file_size: 128 * MIB,
            rollover: Duration::from_secs(15 * 60),
            roll_at_checkpoints: false,
            part_size: 8 * MIB as usize,
            row_group_bytes: 16 * MIB as usize,
            max_open_files: 16,
            policy: ErrorPolicy::Fail,
            publish: None,
        }
    }

    rivus_sdk::setters! {
        /// The S3 endpoint, region, keys and addressing.
        s3(o: S3Options) => s3;

        /// The format (default Parquet with zstd).
        format(f: FileFormat) => format;

        /// The columns of Parquet and CSV files (default: inferred from the first records).
        schema(columns: Vec<Column>) => schema = SchemaSource::Declared(columns);

        /// Whether a record's field that is not a column becomes one (default
        /// [`SchemaEvolution::None`]: the record goes to the error policy).
        schema_evolution(e: SchemaEvolution) => evolution;
    }

    /// The columns of the latest Avro schema of `subject` in the registry (fetched when the
    /// sink opens; a schema that is not an Avro record is refused then).
    pub fn schema_from_registry(
        mut self,
        config: rivus_formats::RegistryConfig,
        subject: impl Into<String>,
    ) -> Self {
        self.schema = SchemaSource::Registry {
            config,
            subject: subject.into(),
        };
        self
    }

    rivus_sdk::setters! {
        /// The partition directory template (default none: files at the top), e.g.
        /// `dt={event_time:%Y-%m-%d}/` (see [`PathTemplate`]).
        path(template: impl Into<String>) => path = template.into();

        /// A file is closed once it reaches this size (default 128 MiB).
        target_file_size(bytes: u64) => target_file_size;

        /// A file is closed once open this long (default 15 minutes).
        rollover(d: Duration) => rollover;

        /// Closes every open file at each checkpoint (default false: files close on size and
        /// age only): what a checkpoint holds is committed when it completes, at the price of
        /// a file per open partition and checkpoint.
        roll_at_checkpoints(yes: bool) => roll_at_checkpoints;

        /// Bytes per uploaded part on S3 (default 8 MiB, at least 5 MiB).
        part_size(bytes: usize) => part_size;

        /// A Parquet row group closes at this size in memory (default 16 MiB) and at checkpoints.
        row_group_bytes(bytes: usize) => row_group_bytes;

        /// Files open at once per subtask (default 16); a new partition beyond closes the oldest.
        max_open_files(n: usize) => max_open_files;

        /// Where records that cannot be placed or encoded go (default: fail).
        error_policy(p: ErrorPolicy) => policy;

        /// Keeps a table over the files (Delta Lake's log, say): it decides their columns and
        /// records the files each checkpoint made visible ([`Publish`]).
        table(p: Arc<dyn Publish>) => publish = Some(p);
    }

    /// The size at which files close (`target_file_size`), for a table that writes files of
    /// its own alike.
    pub fn file_size(&self) -> u64 {
        self.target_file_size
    }

    /// Checks the options; errors name the option (`part_size`, `schema[0].name`).
    pub fn build(self) -> Result<FilesSink> {
        let location = Location::parse(&self.url, "url")?;
        let path = PathTemplate::parse(&self.path, "path")?;
        if self.target_file_size == 0 {
            return Err(Error::config("target_file_size", "must be above 0"));
        }
        if self.rollover.is_zero() {
            return Err(Error::config("rollover", "must be above 0"));
        }
        if matches!(location, Location::S3 { .. }) && (self.part_size as u64) < 5 * MIB {
            return Err(Error::config(
                "part_size",
                format!("{} bytes: S3 parts are at least 5 MiB", self.part_size),
            ));
        }
        if self.part_size == 0 || self.row_group_bytes == 0 || self.max_open_files == 0 {
            let field = if self.part_size == 0 {
                "part_size"
            } else if self.row_group_bytes == 0 {
                "row_group_bytes"
            } else {
                "max_open_files"
            };
            return Err(Error::config(field, "must be above 0"));
        }
        if let SchemaSource::Registry { config, subject } = &self.schema {
            if subject.is_empty() {
                return Err(Error::config("schema_subject", "an empty subject"));
            }
            rivus_formats::Registry::new(config, "registry")?;
        }
        if let SchemaSource::Declared(cols) = &self.schema {
            if cols.is_empty() {
                return Err(Error::config("schema", "no column declared"));
            }
            for (i, c) in cols.iter().enumerate() {
                if cols[..i].iter().any(|o| o.name == c.name) {
                    return Err(Error::config(
                        format!("schema[{i}].name"),
                        format!("column `{}` declared twice", c.name),
                    ));
                }
            }
        }
        if self.evolution != SchemaEvolution::None && !self.format.columnar() {
            return Err(Error::config(
                "schema_evolution",
                "JSON lines files have no columns to add: it is for Parquet, CSV and Avro",
            ));
        }
        Ok(FilesSink::from_settings(Settings {
            location,
            s3: self.s3,
            format: self.format,
            schema: self.schema,
            evolution: self.evolution,
            path,
            target_file_size: self.target_file_size,
            rollover: self.rollover,
            roll_at_checkpoints: self.roll_at_checkpoints,
            part_size: self.part_size,
            row_group_bytes: self.row_group_bytes,
            max_open_files: self.max_open_files,
            policy: self.policy,
            publish: self.publish,
        }))
    }
}
