//! How a completed checkpoint is written as bytes, whatever stores them (a file, an object):
//! one header line `RIVUS-CHECKPOINT v1 crc32=<hex> len=<bytes>`, then the checkpoint as JSON.
//! The header lets a reader tell a torn or damaged copy from an intact one.

use super::CompletedCheckpoint;
use crate::error::{Error, Result};

const MAGIC: &str = "RIVUS-CHECKPOINT v1";

/// The stored bytes of `checkpoint`.
pub fn encode(checkpoint: &CompletedCheckpoint) -> Result<Vec<u8>> {
    let id = checkpoint.checkpoint_id;
    let body = serde_json::to_vec(checkpoint).map_err(|e| Error::checkpoint(id, e))?;
    let mut out = format!(
        "{MAGIC} crc32={:08x} len={}\n",
        crc32fast::hash(&body),
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    Ok(out)
}

/// Reads what [`encode`] wrote; says why when the bytes are torn, damaged or not a checkpoint.
pub fn decode(data: &[u8]) -> std::result::Result<CompletedCheckpoint, String> {
    let nl = data
        .iter()
        .position(|&b| b == b'\n')
        .ok_or("no header line")?;
    let header = std::str::from_utf8(&data[..nl]).map_err(|_| "header is not UTF-8")?;
    let rest = header
        .strip_prefix(MAGIC)
        .ok_or_else(|| format!("unknown header `{header}`"))?;
    let mut crc = None;
    let mut len = None;
    for part in rest.split_whitespace() {
        if let Some(v) = part.strip_prefix("crc32=") {
            crc = u32::from_str_radix(v, 16).ok();
        } else if let Some(v) = part.strip_prefix("len=") {
            len = v.parse::<usize>().ok();
        }
    }
    let (crc, len) = crc.zip(len).ok_or("header lacks crc32 or len")?;
    let body = &data[nl + 1..];
    if body.len() != len {
        return Err(format!(
            "torn file: body has {} bytes, header says {len}",
            body.len()
        ));
    }
    let actual = crc32fast::hash(body);
    if actual != crc {
        return Err(format!("checksum mismatch: {actual:08x} != {crc:08x}"));
    }
    serde_json::from_slice(body).map_err(|e| format!("bad JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_tells_damage_from_intact() {
        let cp = CompletedCheckpoint {
            job: "j".into(),
            checkpoint_id: 7,
            timestamp_ms: 1,
            operators: [(
                "src".to_owned(),
                vec![Some(serde_json::json!({"k": 1})), None],
            )]
            .into_iter()
            .collect(),
        };
        let bytes = encode(&cp).unwrap();
        assert_eq!(decode(&bytes).unwrap(), cp);
        assert!(decode(&bytes[..bytes.len() - 1])
            .unwrap_err()
            .contains("torn"));
        let mut flipped = bytes.clone();
        let n = flipped.len();
        flipped[n - 2] ^= 0x20;
        assert!(decode(&flipped).unwrap_err().contains("checksum"));
        assert!(decode(b"hello\n{}").unwrap_err().contains("unknown header"));
    }
}
