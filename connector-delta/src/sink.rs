//! [`DeltaSink`] and its builder: a files sink writing Parquet under the table's root, with
//! the table kept over its files.

use std::sync::Arc;

use rivus_connector_files::{
    FileFormat, FilesSink, FilesSinkBuilder, Location, Orphan, ParquetCompression, S3Options,
};
use rivus_sdk::Result;

use crate::store::table_store;
use crate::table::DeltaTable;

/// The Delta sink: a [`FilesSink`] whose files are a Delta table's.
pub type DeltaSink = FilesSink;

/// The Delta sink's options; errors at [`build`](DeltaSinkBuilder::build) name the option.
pub struct DeltaSinkBuilder {
    url: String,
    s3: S3Options,
    create_table: bool,
    key: Option<Vec<String>>,
    compression: ParquetCompression,
    files: Box<dyn FnOnce(FilesSinkBuilder) -> FilesSinkBuilder + Send>,
}

impl std::fmt::Debug for DeltaSinkBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeltaSinkBuilder")
            .field("url", &self.url)
            .field("s3", &self.s3)
            .field("create_table", &self.create_table)
            .field("key", &self.key)
            .finish()
    }
}

impl DeltaSinkBuilder {
    /// A sink appending to the Delta table at `url` (`s3://bucket/prefix` or `file:///dir`).
    pub fn new(url: impl Into<String>) -> DeltaSinkBuilder {
        DeltaSinkBuilder {
            url: url.into(),
            s3: S3Options::default(),
            create_table: false,
            key: None,
            compression: ParquetCompression::Zstd,
            files: Box::new(|b| b),
        }
    }

    rivus_sdk::setters! {
        /// The S3 store (endpoint, region, keys).
        s3(o: S3Options) => s3;

        /// Creates the table from the declared columns (`schema`) when it does not exist
        /// (default false: a missing table is refused at open).
        create_table(yes: bool) => create_table;

        /// The data files' codec (default zstd).
        compression(c: ParquetCompression) => compression;
    }

    /// Applies the records as changes by the key columns `key` (`apply_changes`): a change
    /// record (Debezium's envelope or the flat shape, see `rivus_sdk::change`) upserts or
    /// deletes its row, one MERGE per checkpoint that rewrites the files holding changed keys
    /// (see the README, "Applying changes"). Needs one sink subtask.
    pub fn apply_changes(mut self, key: Vec<String>) -> Self {
        self.key = Some(key);
        self
    }

    /// The files' own options: the declared columns (`schema`), `target_file_size`,
    /// `rollover`, `part_size`, `row_group_bytes`, `max_open_files`, the error policy. The
    /// format (Parquet), the location and the partition path are the table's.
    pub fn files(
        mut self,
        f: impl FnOnce(FilesSinkBuilder) -> FilesSinkBuilder + Send + 'static,
    ) -> Self {
        self.files = Box::new(f);
        self
    }

    /// What `rivus check` says: the table's version and columns read from its log, or that it
    /// is created at start; a missing table without `create_table` is refused.
    pub async fn report(self) -> Result<String> {
        self.table(0)?.report().await
    }

    /// The data files under the table's root that its newest version does not name (oldest
    /// first): what a failure may leave — see the README, "Orphan files". Lists only.
    pub async fn orphans(self) -> Result<Vec<Orphan>> {
        self.table(0)?.orphans().await
    }

    /// The table at `url`, in the store the options name; a merge writes files of about
    /// `file_size` bytes.
    fn table(&self, file_size: u64) -> Result<DeltaTable> {
        let location = Location::parse(&self.url, "url")?;
        let (root, store) = table_store(&location, &self.s3)?;
        Ok(DeltaTable::new(
            root,
            store,
            self.create_table,
            self.key.clone(),
            usize::try_from(file_size).unwrap_or(usize::MAX),
        ))
    }

    /// The sink; an option out of range is refused with its name.
    pub fn build(mut self) -> Result<DeltaSink> {
        if let Some(key) = &self.key {
            if key.is_empty() {
                return Err(rivus_sdk::Error::config("key", "no key column named"));
            }
            if let Some(i) = (0..key.len()).find(|&i| key[..i].contains(&key[i])) {
                return Err(rivus_sdk::Error::config(
                    format!("key[{i}]"),
                    format!("`{}` named twice", key[i]),
                ));
            }
        }
        let tune = std::mem::replace(&mut self.files, Box::new(|b| b));
        let files = tune(FilesSink::builder(&self.url));
        let table = self.table(files.file_size())?;
        // The table's settings last: the files' own options cannot move them.
        let files = files
            .s3(self.s3)
            .format(FileFormat::Parquet(self.compression))
            .table(Arc::new(table));
        match self.key {
            // Change files live under `_changes/`, which readers skip, and each checkpoint's
            // are merged when it completes.
            Some(_) => files.path("_changes/").roll_at_checkpoints(true),
            None => files.path(""),
        }
        .build()
    }
}
