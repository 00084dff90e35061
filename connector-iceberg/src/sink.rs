//! [`IcebergSink`] and its builder: a files sink writing Parquet into the table's data
//! directory, with the table kept over its files.

use std::sync::Arc;

use rivus_connector_files::{
    FileFormat, FilesSink, FilesSinkBuilder, Orphan, ParquetCompression, S3Options,
};
use rivus_sdk::{Error, Result};

use crate::catalog::{table_ident, CatalogOptions};
use crate::partition::PartitionBy;
use crate::table::IcebergTable;

/// The Iceberg sink: a [`FilesSink`] whose files are an Iceberg table's.
pub type IcebergSink = FilesSink;

/// The Iceberg sink's options; errors at [`build`](IcebergSinkBuilder::build) name the option.
pub struct IcebergSinkBuilder {
    catalog: CatalogOptions,
    table: String,
    s3: S3Options,
    create_table: bool,
    partition_by: Vec<String>,
    compression: ParquetCompression,
    files: Box<dyn FnOnce(FilesSinkBuilder) -> FilesSinkBuilder + Send>,
}

impl std::fmt::Debug for IcebergSinkBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IcebergSinkBuilder")
            .field("catalog", &self.catalog)
            .field("table", &self.table)
            .field("s3", &self.s3)
            .field("create_table", &self.create_table)
            .field("partition_by", &self.partition_by)
            .finish()
    }
}

impl IcebergSinkBuilder {
    /// A sink appending to the table `table` (`namespace.name`) of `catalog`.
    pub fn new(catalog: CatalogOptions, table: impl Into<String>) -> IcebergSinkBuilder {
        IcebergSinkBuilder {
            catalog,
            table: table.into(),
            s3: S3Options::default(),
            create_table: false,
            partition_by: Vec::new(),
            compression: ParquetCompression::Zstd,
            files: Box::new(|b| b),
        }
    }

    rivus_sdk::setters! {
        /// The S3 store of the table's files (endpoint, region, keys).
        s3(o: S3Options) => s3;

        /// Creates the table (and its namespace) from the declared columns (`schema`) when
        /// it does not exist (default false: a missing table is refused at open). Without
        /// declared columns the table starts with none, and takes the records' fields as
        /// they come with `schema_evolution = basic` (else they go to the error policy).
        create_table(yes: bool) => create_table;

        /// The partition spec of a table created now, as Spark's `PARTITIONED BY` writes it:
        /// `day(ts)`, `hour(ts)`, `month(ts)`, `year(ts)`, `bucket(16, id)`,
        /// `truncate(4, name)`, `identity(c)` or `c` (default none: unpartitioned). An
        /// existing table's spec is its own.
        partition_by(fields: Vec<String>) => partition_by;

        /// The data files' codec (default zstd).
        compression(c: ParquetCompression) => compression;
    }

    /// The files' own options: the declared columns (`schema`), `schema_evolution`,
    /// `target_file_size`, `rollover`, `part_size`, `row_group_bytes`, `max_open_files`, the
    /// error policy. The format (Parquet) and the location are the table's.
    pub fn files(
        mut self,
        f: impl FnOnce(FilesSinkBuilder) -> FilesSinkBuilder + Send + 'static,
    ) -> Self {
        self.files = Box::new(f);
        self
    }

    /// What `rivus check` says: the table's location, snapshots and columns read from the
    /// catalog, or that it is created at start; a missing table without `create_table` is
    /// refused.
    pub async fn report(self) -> Result<String> {
        self.table()?.report().await
    }

    /// The files under the table's data directory that no snapshot names (oldest first):
    /// what a failure may leave — see the README, "Orphan files". Lists only.
    pub async fn orphans(self) -> Result<Vec<Orphan>> {
        self.table()?.orphans().await
    }

    fn table(&self) -> Result<IcebergTable> {
        self.catalog.check()?;
        let by = PartitionBy::parse(&self.partition_by)?;
        if !self.create_table && !by.is_empty() {
            return Err(Error::config(
                "partition_by",
                "the spec of a table created now (`create_table = true`); an existing table's \
                 spec is its own",
            ));
        }
        Ok(IcebergTable::new(
            self.catalog.clone(),
            self.s3.clone(),
            table_ident(&self.table)?,
            self.create_table.then_some(by),
        ))
    }

    /// The sink; an option out of range is refused with its name.
    pub fn build(mut self) -> Result<IcebergSink> {
        let table = self.table()?;
        let tune = std::mem::replace(&mut self.files, Box::new(|b| b));
        // The warehouse stands for the location until the table names its own at open.
        let files = tune(FilesSink::builder(&self.catalog.warehouse));
        // The table's settings last: the files' own options cannot move them.
        files
            .s3(self.s3)
            .format(FileFormat::Parquet(self.compression))
            .table(Arc::new(table))
            .path("")
            .build()
    }
}
