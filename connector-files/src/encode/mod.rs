//! Records to file bytes, per format: JSON lines and CSV (optionally gzip or zstd compressed),
//! Parquet and Avro object container files. An encoder hands out its bytes as they are ready; at a checkpoint it closes
//! what is open (a compressed frame, a Parquet row group) and says which bytes would end the
//! file there (a Parquet footer), so that a restore can finish the file as the checkpoint
//! holds it.

mod avro;
mod avro_columns;
mod compress;
mod lines;
mod parquet;
mod schema;

use serde_json::Value;

use rivus_sdk::Result;

pub use avro::AvroCodec;
pub use compress::Compression;
pub use parquet::ParquetCompression;
pub use schema::{Column, ColumnType, SchemaSource};

pub(crate) use avro_columns::columns as avro_columns;
pub(crate) use schema::Schema;

/// A file format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileFormat {
    /// One JSON document per line, as the records are.
    JsonLines(Compression),
    /// Comma-separated values with a header row, columns from the schema.
    Csv(Compression),
    /// Apache Parquet, columns from the schema.
    Parquet(ParquetCompression),
    /// Avro object container files, columns from the schema.
    Avro(AvroCodec),
}

impl FileFormat {
    /// The file name's extension.
    pub fn extension(&self) -> String {
        match self {
            FileFormat::JsonLines(c) => format!("jsonl{}", c.suffix()),
            FileFormat::Csv(c) => format!("csv{}", c.suffix()),
            FileFormat::Parquet(_) => "parquet".to_owned(),
            FileFormat::Avro(_) => "avro".to_owned(),
        }
    }

    /// Whether records become columns (a schema is needed).
    pub fn columnar(&self) -> bool {
        !matches!(self, FileFormat::JsonLines(_))
    }
}

/// A record the format cannot hold, with the reason.
#[derive(Debug)]
pub(crate) struct Rejected {
    pub(crate) index: usize,
    pub(crate) reason: String,
}

/// One file's encoder.
pub(crate) enum Encoder {
    Lines(Box<lines::LinesEncoder>),
    Parquet(Box<parquet::ParquetEncoder>),
    Avro(Box<avro::AvroEncoder>),
}

impl Encoder {
    /// An encoder for a new file.
    pub(crate) fn new(
        format: &FileFormat,
        schema: Option<&Schema>,
        row_group_bytes: usize,
        name: &str,
    ) -> Result<Encoder> {
        Ok(match format {
            FileFormat::JsonLines(c) => Encoder::Lines(Box::new(lines::LinesEncoder::json(*c))),
            FileFormat::Csv(c) => Encoder::Lines(Box::new(lines::LinesEncoder::csv(
                *c,
                schema.expect("a columnar format has a schema").clone(),
            ))),
            FileFormat::Parquet(c) => Encoder::Parquet(Box::new(parquet::ParquetEncoder::new(
                schema.expect("a columnar format has a schema"),
                *c,
                row_group_bytes,
            )?)),
            FileFormat::Avro(c) => Encoder::Avro(Box::new(avro::AvroEncoder::new(
                schema.expect("a columnar format has a schema"),
                *c,
                4096,
                name,
            )?)),
        })
    }

    /// Encodes `records` (those it cannot hold are returned, the rest written).
    pub(crate) fn write(&mut self, records: &[&Value]) -> Result<Vec<Rejected>> {
        match self {
            Encoder::Lines(e) => e.write(records),
            Encoder::Parquet(e) => e.write(records),
            Encoder::Avro(e) => e.write(records),
        }
    }

    /// Takes the bytes ready so far.
    pub(crate) fn take(&mut self) -> Vec<u8> {
        match self {
            Encoder::Lines(e) => e.take(),
            Encoder::Parquet(e) => e.take(),
            Encoder::Avro(e) => e.take(),
        }
    }

    /// Bytes encoded and not taken yet.
    pub(crate) fn buffered(&self) -> usize {
        match self {
            Encoder::Lines(e) => e.buffered(),
            Encoder::Parquet(e) => e.buffered(),
            Encoder::Avro(e) => e.buffered(),
        }
    }

    /// Closes what is open, so that every byte so far is ready; returns the bytes that would
    /// end the file here.
    pub(crate) fn checkpoint(&mut self) -> Result<Vec<u8>> {
        match self {
            Encoder::Lines(e) => e.checkpoint(),
            Encoder::Parquet(e) => e.checkpoint(),
            Encoder::Avro(e) => e.checkpoint(),
        }
    }

    /// Ends the file: its last bytes are ready.
    pub(crate) fn finish(&mut self) -> Result<()> {
        match self {
            Encoder::Lines(e) => e.checkpoint().map(drop),
            Encoder::Parquet(e) => e.finish(),
            Encoder::Avro(e) => e.checkpoint().map(drop),
        }
    }
}
