//! JSON lines (each record as it is, one per line) and CSV (a header row, then the schema's
//! columns per record), through optional compression frames.

use serde_json::Value;

use rivus_sdk::{Error, Result};

use super::compress::{Compression, Frames};
use super::{Rejected, Schema};

/// A line format's encoder.
pub(crate) struct LinesEncoder {
    csv: Option<Schema>,
    header_written: bool,
    frames: Frames,
}

impl LinesEncoder {
    pub(crate) fn json(c: Compression) -> LinesEncoder {
        LinesEncoder {
            csv: None,
            header_written: false,
            frames: Frames::new(c),
        }
    }

    pub(crate) fn csv(c: Compression, schema: Schema) -> LinesEncoder {
        LinesEncoder {
            csv: Some(schema),
            header_written: false,
            frames: Frames::new(c),
        }
    }

    pub(crate) fn write(&mut self, records: &[&Value]) -> Result<Vec<Rejected>> {
        let Some(schema) = &self.csv else {
            // Plain text goes straight into the output; compressed through a buffer.
            let mut scratch = Vec::new();
            let out = match self.frames.plain() {
                Some(out) => out,
                None => &mut scratch,
            };
            for r in records {
                serde_json::to_writer(&mut *out, r)
                    .map_err(|e| Error::connector("files: encoding JSON", e))?;
                out.push(b'\n');
            }
            if !scratch.is_empty() {
                self.frames.write(&scratch)?;
            }
            return Ok(Vec::new());
        };
        let (batch, rejected) = schema.batch(records)?;
        if let Some(batch) = batch {
            let mut w = arrow_csv::WriterBuilder::new()
                .with_header(!self.header_written)
                .build(Vec::new());
            w.write(&batch)
                .map_err(|e| Error::connector("files: encoding CSV", e))?;
            self.header_written = true;
            self.frames.write(&w.into_inner())?;
        }
        Ok(rejected)
    }

    pub(crate) fn take(&mut self) -> Vec<u8> {
        self.frames.take()
    }

    pub(crate) fn buffered(&self) -> usize {
        self.frames.buffered()
    }

    /// Ends the compression frame; a line file needs nothing at its end.
    pub(crate) fn checkpoint(&mut self) -> Result<Vec<u8>> {
        self.frames.end_frame()?;
        Ok(Vec::new())
    }
}
