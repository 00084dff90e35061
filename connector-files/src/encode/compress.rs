//! Compression of line formats, in independent frames (gzip members, zstd frames): a frame
//! ends at every checkpoint, and readers read the concatenation as one stream.

use std::io::Write;

use rivus_sdk::{Error, Result};

/// How a line format is compressed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Compression {
    /// Plain text (default).
    #[default]
    None,
    /// gzip (`.gz`).
    Gzip,
    /// Zstandard (`.zst`).
    Zstd,
}

impl Compression {
    pub(crate) fn suffix(&self) -> &'static str {
        match self {
            Compression::None => "",
            Compression::Gzip => ".gz",
            Compression::Zstd => ".zst",
        }
    }
}

/// Bytes in, (compressed) bytes out.
pub(crate) enum Frames {
    Plain(Vec<u8>),
    Gzip(Option<flate2::write::GzEncoder<Vec<u8>>>, Vec<u8>),
    Zstd(
        Option<zstd::stream::write::Encoder<'static, Vec<u8>>>,
        Vec<u8>,
    ),
}

fn bad(e: std::io::Error) -> Error {
    Error::connector("files: compressing", e)
}

impl Frames {
    pub(crate) fn new(c: Compression) -> Frames {
        match c {
            Compression::None => Frames::Plain(Vec::new()),
            Compression::Gzip => Frames::Gzip(None, Vec::new()),
            Compression::Zstd => Frames::Zstd(None, Vec::new()),
        }
    }

    /// The output itself when nothing is compressed (bytes written there are ready).
    pub(crate) fn plain(&mut self) -> Option<&mut Vec<u8>> {
        match self {
            Frames::Plain(out) => Some(out),
            _ => None,
        }
    }

    pub(crate) fn write(&mut self, bytes: &[u8]) -> Result<()> {
        match self {
            Frames::Plain(out) => out.extend_from_slice(bytes),
            Frames::Gzip(enc, _) => enc
                .get_or_insert_with(|| {
                    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default())
                })
                .write_all(bytes)
                .map_err(bad)?,
            Frames::Zstd(enc, _) => {
                if enc.is_none() {
                    *enc = Some(zstd::stream::write::Encoder::new(Vec::new(), 3).map_err(bad)?);
                }
                enc.as_mut()
                    .expect("set above")
                    .write_all(bytes)
                    .map_err(bad)?
            }
        }
        Ok(())
    }

    /// Compressed bytes ready.
    pub(crate) fn take(&mut self) -> Vec<u8> {
        match self {
            Frames::Plain(out) => std::mem::take(out),
            Frames::Gzip(enc, done) => {
                let mut out = std::mem::take(done);
                if let Some(e) = enc {
                    out.append(e.get_mut());
                }
                out
            }
            Frames::Zstd(enc, done) => {
                let mut out = std::mem::take(done);
                if let Some(e) = enc {
                    out.append(e.get_mut());
                }
                out
            }
        }
    }

    pub(crate) fn buffered(&self) -> usize {
        match self {
            Frames::Plain(out) => out.len(),
            Frames::Gzip(enc, done) => done.len() + enc.as_ref().map_or(0, |e| e.get_ref().len()),
            Frames::Zstd(enc, done) => done.len() + enc.as_ref().map_or(0, |e| e.get_ref().len()),
        }
    }

    /// Ends the open frame: every byte written is in the output.
    pub(crate) fn end_frame(&mut self) -> Result<()> {
        match self {
            Frames::Plain(_) => {}
            Frames::Gzip(enc, done) => {
                if let Some(e) = enc.take() {
                    done.append(&mut e.finish().map_err(bad)?);
                }
            }
            Frames::Zstd(enc, done) => {
                if let Some(e) = enc.take() {
                    done.append(&mut e.finish().map_err(bad)?);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn frames_read_back_as_one_stream() {
        for c in [Compression::Gzip, Compression::Zstd] {
            let mut f = Frames::new(c);
            let mut out = Vec::new();
            f.write(b"first\n").unwrap();
            f.end_frame().unwrap();
            out.extend(f.take());
            f.write(b"second\n").unwrap();
            out.extend(f.take());
            f.end_frame().unwrap();
            out.extend(f.take());
            let mut text = String::new();
            match c {
                Compression::Gzip => {
                    flate2::read::MultiGzDecoder::new(&out[..])
                        .read_to_string(&mut text)
                        .unwrap();
                }
                _ => {
                    zstd::stream::read::Decoder::new(&out[..])
                        .unwrap()
                        .read_to_string(&mut text)
                        .unwrap();
                }
            };
            assert_eq!(text, "first\nsecond\n", "{c:?}");
        }
    }
}
