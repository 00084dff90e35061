//! A file's bytes to records: JSON lines (one object per line), CSV (a header row; column
//! types inferred by Arrow from the file), Parquet and Avro object container files (every
//! column). gzip and zstd by the file's
//! extension (`.gz`, `.zst`); concatenated frames read as one stream. Records come in chunks,
//! so a large file is not held as records all at once.

use std::io::Read;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

use rivus_sdk::{Error, Result};

/// What a file holds, by the source's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadFormat {
    /// JSON lines.
    JsonLines,
    /// CSV with a header row.
    Csv,
    /// Apache Parquet.
    Parquet,
    /// Avro object container files.
    Avro,
}

impl ReadFormat {
    /// Whether a key names a file of this format (`.jsonl`, `.json`, `.csv`, `.parquet`,
    /// compressed line files with `.gz` or `.zst` after).
    pub fn matches(&self, key: &str) -> bool {
        let base = key
            .strip_suffix(".gz")
            .or_else(|| key.strip_suffix(".zst"))
            .unwrap_or(key);
        match self {
            ReadFormat::JsonLines => base.ends_with(".jsonl") || base.ends_with(".json"),
            ReadFormat::Csv => base.ends_with(".csv"),
            ReadFormat::Parquet => key.ends_with(".parquet"),
            ReadFormat::Avro => key.ends_with(".avro"),
        }
    }
}

/// A line that is not a record: its number (1-based) and text, and why.
#[derive(Debug)]
pub(crate) struct BadLine {
    pub(crate) line: u64,
    pub(crate) text: String,
    pub(crate) reason: String,
}

/// One item of a file: a record or a line that is not one.
pub(crate) type Item = std::result::Result<Value, BadLine>;

fn bad(key: &str, e: impl std::fmt::Display) -> Error {
    Error::connector("files", format!("reading {key}: {e}"))
}

fn decompress(key: &str, bytes: Bytes) -> Result<Bytes> {
    let mut out = Vec::new();
    if key.ends_with(".gz") {
        flate2::read::MultiGzDecoder::new(&bytes[..])
            .read_to_end(&mut out)
            .map_err(|e| bad(key, e))?;
    } else if key.ends_with(".zst") {
        zstd::stream::read::Decoder::new(&bytes[..])
            .and_then(|mut d| d.read_to_end(&mut out))
            .map_err(|e| bad(key, e))?;
    } else {
        return Ok(bytes);
    }
    Ok(Bytes::from(out))
}

/// Rows of Arrow batches as JSON objects.
fn rows(batches: &[arrow_array::RecordBatch]) -> std::result::Result<Vec<Value>, String> {
    let mut w = arrow_json::LineDelimitedWriter::new(Vec::new());
    let refs: Vec<&arrow_array::RecordBatch> = batches.iter().collect();
    w.write_batches(&refs).map_err(|e| e.to_string())?;
    w.finish().map_err(|e| e.to_string())?;
    let text = w.into_inner();
    text.split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).map_err(|e| e.to_string()))
        .collect()
}

/// The records of file `key` (its bytes), in chunks of about `chunk` records.
pub(crate) fn records(
    format: ReadFormat,
    key: &str,
    bytes: Bytes,
    chunk: usize,
) -> Result<Box<dyn Iterator<Item = Result<Vec<Item>>> + Send>> {
    let key = key.to_owned();
    match format {
        ReadFormat::JsonLines => {
            let text = decompress(&key, bytes)?;
            let mut at = 0usize;
            let mut line = 0u64;
            Ok(Box::new(std::iter::from_fn(move || {
                let mut out = Vec::new();
                while out.len() < chunk && at < text.len() {
                    let end = text[at..]
                        .iter()
                        .position(|b| *b == b'\n')
                        .map_or(text.len(), |p| at + p);
                    let raw = &text[at..end];
                    at = end + 1;
                    line += 1;
                    if raw.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    out.push(serde_json::from_slice::<Value>(raw).map_err(|e| BadLine {
                        line,
                        text: String::from_utf8_lossy(raw).into_owned(),
                        reason: format!("not JSON: {e}"),
                    }));
                }
                (!out.is_empty()).then_some(Ok(out))
            })))
        }
        ReadFormat::Csv => {
            let text = decompress(&key, bytes)?;
            let (schema, _) = arrow_csv::reader::Format::default()
                .with_header(true)
                .infer_schema(&text[..], Some(1000))
                .map_err(|e| bad(&key, e))?;
            let reader = arrow_csv::ReaderBuilder::new(Arc::new(schema))
                .with_header(true)
                .with_batch_size(chunk)
                .build(std::io::Cursor::new(text))
                .map_err(|e| bad(&key, e))?;
            Ok(arrow_rows(reader, key))
        }
        ReadFormat::Avro => {
            let reader =
                apache_avro::Reader::new(std::io::Cursor::new(bytes)).map_err(|e| bad(&key, e))?;
            let mut reader = reader.peekable();
            Ok(Box::new(std::iter::from_fn(move || {
                reader.peek()?;
                let mut out = Vec::new();
                for v in reader.by_ref().take(chunk) {
                    let v = match v {
                        Ok(v) => v,
                        Err(e) => return Some(Err(bad(&key, e))),
                    };
                    match serde_json::Value::try_from(v) {
                        Ok(j) => out.push(Ok(j)),
                        Err(e) => return Some(Err(bad(&key, e))),
                    }
                }
                Some(Ok(out))
            })))
        }
        ReadFormat::Parquet => {
            let reader =
                parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
                    .and_then(|b| b.with_batch_size(chunk).build())
                    .map_err(|e| bad(&key, e))?;
            Ok(arrow_rows(reader, key))
        }
    }
}

/// The rows of Arrow record batches (CSV, Parquet), a chunk per batch; errors name `key`.
fn arrow_rows<E: std::fmt::Display>(
    batches: impl Iterator<Item = std::result::Result<arrow_array::RecordBatch, E>> + Send + 'static,
    key: String,
) -> Box<dyn Iterator<Item = Result<Vec<Item>>> + Send> {
    Box::new(batches.map(move |b| {
        let b = b.map_err(|e| bad(&key, e))?;
        rows(&[b])
            .map(|r| r.into_iter().map(Ok).collect())
            .map_err(|e| bad(&key, e))
    }))
}
