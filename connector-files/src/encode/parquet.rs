//! Parquet: records become Arrow batches (the schema's columns), written by the `parquet`
//! crate's `ArrowWriter` into memory and handed out as they are ready. A row group closes at
//! `row_group_bytes` and at every checkpoint; the checkpoint also gets the footer that would
//! end the file after the row groups so far (built from the writer's own metadata of them), so
//! that a restore can finish the file as the checkpoint holds it. The file's size does not
//! depend on the checkpoint interval — only its row groups do.

use std::io::Write;
use std::sync::{Arc, Mutex};

use parquet::arrow::{ArrowSchemaConverter, ArrowWriter};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::{FileMetaData, ParquetMetaData, ParquetMetaDataWriter};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use serde_json::Value;

use rivus_sdk::{Error, Result};

use super::{Rejected, Schema};

/// Parquet's column compression.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ParquetCompression {
    /// None.
    None,
    /// Snappy.
    Snappy,
    /// gzip.
    Gzip,
    /// Zstandard, level 3 (default).
    #[default]
    Zstd,
}

impl ParquetCompression {
    fn codec(&self) -> Compression {
        match self {
            ParquetCompression::None => Compression::UNCOMPRESSED,
            ParquetCompression::Snappy => Compression::SNAPPY,
            ParquetCompression::Gzip => Compression::GZIP(Default::default()),
            ParquetCompression::Zstd => Compression::ZSTD(ZstdLevel::try_new(3).expect("valid")),
        }
    }
}

/// Where the writer's bytes collect until taken.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("not poisoned").extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

pub(crate) struct ParquetEncoder {
    /// In a mutex only to be `Sync` (the writer's parts are not): used through `&mut self`.
    writer: Option<Mutex<ArrowWriter<Shared>>>,
    out: Shared,
    schema: Schema,
    /// The Parquet schema, for the footers of checkpoints.
    descr: Arc<parquet::schema::types::SchemaDescriptor>,
    row_group_bytes: usize,
    rows: i64,
}

fn bad(e: impl std::fmt::Display) -> Error {
    Error::connector("files: encoding Parquet", e.to_string())
}

impl ParquetEncoder {
    pub(crate) fn new(
        schema: &Schema,
        c: ParquetCompression,
        row_group_bytes: usize,
    ) -> Result<ParquetEncoder> {
        let props = WriterProperties::builder()
            .set_compression(c.codec())
            // Statistics per column chunk, no page index: the footer is all a reader needs,
            // and a checkpoint's footer can be made from the row groups' metadata alone.
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_offset_index_disabled(true)
            .set_max_row_group_row_count(None)
            .build();
        let out = Shared::default();
        let writer =
            ArrowWriter::try_new(out.clone(), schema.arrow.clone(), Some(props)).map_err(bad)?;
        let descr = ArrowSchemaConverter::new()
            .convert(&schema.arrow)
            .map_err(bad)?;
        Ok(ParquetEncoder {
            writer: Some(Mutex::new(writer)),
            out,
            schema: schema.clone(),
            descr: Arc::new(descr),
            row_group_bytes,
            rows: 0,
        })
    }

    fn writer(&mut self) -> &mut ArrowWriter<Shared> {
        self.writer
            .as_mut()
            .expect("not finished")
            .get_mut()
            .expect("not poisoned")
    }

    pub(crate) fn write(&mut self, records: &[&Value]) -> Result<Vec<Rejected>> {
        let (batch, rejected) = self.schema.batch(records)?;
        if let Some(batch) = batch {
            self.rows += batch.num_rows() as i64;
            self.writer().write(&batch).map_err(bad)?;
            if self.writer().in_progress_size() >= self.row_group_bytes {
                self.writer().flush().map_err(bad)?;
            }
        }
        Ok(rejected)
    }

    pub(crate) fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut *self.out.0.lock().expect("not poisoned"))
    }

    /// Bytes encoded and not taken (the open row group is not counted: its size on disk is
    /// known only once compressed).
    pub(crate) fn buffered(&self) -> usize {
        self.out.0.lock().expect("not poisoned").len()
    }

    /// Closes the row group; the footer for the row groups so far.
    pub(crate) fn checkpoint(&mut self) -> Result<Vec<u8>> {
        self.writer().flush().map_err(bad)?;
        // The writer buffers its output: every byte the footer points at must be out.
        self.writer().sync().map_err(bad)?;
        let groups = self.writer().flushed_row_groups().to_vec();
        let meta = ParquetMetaData::new(
            FileMetaData::new(
                1,
                self.rows,
                Some(format!(
                    "rivus-connector-files {}",
                    env!("CARGO_PKG_VERSION")
                )),
                None,
                Arc::clone(&self.descr),
                None,
            ),
            groups,
        );
        let mut footer = Vec::new();
        // No page index locations to carry: the writer makes neither offset nor column
        // indexes (chunk statistics only, offset index disabled above).
        ParquetMetaDataWriter::new(&mut footer, &meta)
            .finish()
            .map_err(bad)?;
        Ok(footer)
    }

    pub(crate) fn finish(&mut self) -> Result<()> {
        if let Some(w) = self.writer.take() {
            w.into_inner().expect("not poisoned").close().map_err(bad)?;
        }
        Ok(())
    }
}
