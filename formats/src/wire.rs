//! Confluent's wire format: a zero byte, the schema id (4 bytes, big-endian), then the
//! payload (for Protobuf, the message-index path comes first).

/// The first byte of every framed payload.
pub const MAGIC: u8 = 0;

/// Why a payload is not in the wire format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Fewer bytes than the header.
    #[error("{0} bytes: too short for the wire format (a zero byte and a 4-byte schema id)")]
    Short(usize),
    /// Another first byte than the magic byte.
    #[error("the first byte is {0:#04x}, not the wire format's magic byte 0x00 (is this topic written with a schema registry?)")]
    Magic(u8),
}

/// `(schema id, payload)` of a framed record.
pub fn split(data: &[u8]) -> Result<(u32, &[u8]), FrameError> {
    if data.len() < 5 {
        return Err(FrameError::Short(data.len()));
    }
    if data[0] != MAGIC {
        return Err(FrameError::Magic(data[0]));
    }
    let id = u32::from_be_bytes([data[1], data[2], data[3], data[4]]);
    Ok((id, &data[5..]))
}

/// Appends the header for schema `id` to `out`.
pub fn header(id: u32, out: &mut Vec<u8>) {
    out.push(MAGIC);
    out.extend_from_slice(&id.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_bad_frames_say_why() {
        let mut out = Vec::new();
        header(258, &mut out);
        out.extend_from_slice(b"xy");
        assert_eq!(out, [0, 0, 0, 1, 2, b'x', b'y']);
        assert_eq!(split(&out), Ok((258, &b"xy"[..])));
        assert_eq!(split(&[0, 0, 1]), Err(FrameError::Short(3)));
        assert_eq!(split(b"{\"a\":1}"), Err(FrameError::Magic(b'{')));
        assert!(FrameError::Magic(b'{').to_string().contains("0x7b"));
    }
}
