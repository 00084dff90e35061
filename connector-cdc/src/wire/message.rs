//! Backend messages of PostgreSQL's protocol (version 3), framed and parsed: what a client of
//! simple queries and of the replication stream meets. Frontend messages are built with
//! `postgres-protocol`.

use bytes::{Buf, Bytes, BytesMut};

/// One message from the server.
#[derive(Debug)]
pub(crate) enum Backend {
    /// `R`: an authentication request (its code and data).
    Authentication(i32, Bytes),
    /// `T`: the columns of the rows that follow: (name, type oid).
    RowDescription(Vec<(String, u32)>),
    /// `D`: one row, each value as text or NULL.
    DataRow(Vec<Option<Bytes>>),
    /// `C`: a statement ended.
    CommandComplete,
    /// `Z`: ready for the next query.
    ReadyForQuery,
    /// `E`: an error.
    Error(ServerError),
    /// `W`: the replication stream starts.
    CopyBothResponse,
    /// `d`: a piece of the replication stream.
    CopyData(Bytes),
    /// `c`: the stream ended.
    CopyDone,
    /// Anything else (parameter status, notices, backend key data, ...).
    Other,
}

/// An `ErrorResponse`: severity, SQLSTATE code, message and the optional detail and hint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerError {
    /// `ERROR`, `FATAL`, `PANIC`.
    pub severity: String,
    /// The SQLSTATE code (`42P01`, `55000`, ...).
    pub code: String,
    /// The primary message.
    pub message: String,
    /// The detail, if any.
    pub detail: Option<String>,
    /// The hint, if any.
    pub hint: Option<String>,
}

impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} [{}]", self.message, self.code)?;
        if let Some(d) = &self.detail {
            write!(f, "; {d}")?;
        }
        if let Some(h) = &self.hint {
            write!(f, "; hint: {h}")?;
        }
        Ok(())
    }
}

/// Takes one whole message off the front of `buf`, if one is there.
pub(crate) fn take(buf: &mut BytesMut) -> std::io::Result<Option<Backend>> {
    if buf.len() < 5 {
        return Ok(None);
    }
    let len = i32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]);
    if len < 4 {
        return Err(invalid(format!("a message length of {len}")));
    }
    let total = 1 + len as usize;
    if buf.len() < total {
        buf.reserve(total - buf.len());
        return Ok(None);
    }
    let tag = buf[0];
    let mut body = buf.split_to(total).freeze();
    body.advance(5);
    parse(tag, body).map(Some)
}

fn parse(tag: u8, mut body: Bytes) -> std::io::Result<Backend> {
    Ok(match tag {
        b'R' => {
            let code = get_i32(&mut body)?;
            Backend::Authentication(code, body)
        }
        b'T' => {
            let n = get_i16(&mut body)?;
            let mut cols = Vec::with_capacity(n.max(0) as usize);
            for _ in 0..n {
                let name = cstr(&mut body)?;
                need(&body, 18)?;
                body.advance(6); // table oid, column number
                let oid = body.get_u32();
                body.advance(8); // size, modifier, format
                cols.push((name, oid));
            }
            Backend::RowDescription(cols)
        }
        b'D' => {
            let n = get_i16(&mut body)?;
            let mut values = Vec::with_capacity(n.max(0) as usize);
            for _ in 0..n {
                let len = get_i32(&mut body)?;
                if len < 0 {
                    values.push(None);
                } else {
                    need(&body, len as usize)?;
                    values.push(Some(body.split_to(len as usize)));
                }
            }
            Backend::DataRow(values)
        }
        b'C' => Backend::CommandComplete,
        b'Z' => Backend::ReadyForQuery,
        b'E' => Backend::Error(server_error(&mut body)?),
        b'W' => Backend::CopyBothResponse,
        b'd' => Backend::CopyData(body),
        b'c' => Backend::CopyDone,
        _ => Backend::Other,
    })
}

fn server_error(body: &mut Bytes) -> std::io::Result<ServerError> {
    let mut e = ServerError::default();
    loop {
        need(body, 1)?;
        let field = body.get_u8();
        if field == 0 {
            return Ok(e);
        }
        let value = cstr(body)?;
        match field {
            b'V' => e.severity = value,
            b'S' if e.severity.is_empty() => e.severity = value,
            b'C' => e.code = value,
            b'M' => e.message = value,
            b'D' => e.detail = Some(value),
            b'H' => e.hint = Some(value),
            _ => {}
        }
    }
}

pub(crate) fn invalid(what: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("unexpected server message: {what}"),
    )
}

pub(crate) fn need(body: &Bytes, n: usize) -> std::io::Result<()> {
    if body.remaining() < n {
        return Err(invalid(format!(
            "{n} bytes needed, {} left",
            body.remaining()
        )));
    }
    Ok(())
}

pub(crate) fn get_i16(body: &mut Bytes) -> std::io::Result<i16> {
    need(body, 2)?;
    Ok(body.get_i16())
}

pub(crate) fn get_i32(body: &mut Bytes) -> std::io::Result<i32> {
    need(body, 4)?;
    Ok(body.get_i32())
}

pub(crate) fn get_u64(body: &mut Bytes) -> std::io::Result<u64> {
    need(body, 8)?;
    Ok(body.get_u64())
}

/// A NUL-terminated string.
pub(crate) fn cstr(body: &mut Bytes) -> std::io::Result<String> {
    let end = body
        .iter()
        .position(|&b| b == 0)
        .ok_or_else(|| invalid("a string without its end"))?;
    let s = String::from_utf8_lossy(&body[..end]).into_owned();
    body.advance(end + 1);
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![tag];
        v.extend_from_slice(&(body.len() as i32 + 4).to_be_bytes());
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn messages_are_taken_whole_or_not_at_all() {
        let mut row = 2i16.to_be_bytes().to_vec();
        row.extend_from_slice(&3i32.to_be_bytes());
        row.extend_from_slice(b"abc");
        row.extend_from_slice(&(-1i32).to_be_bytes());
        let all = frame(b'D', &row);
        let mut buf = BytesMut::from(&all[..all.len() - 1]);
        assert!(take(&mut buf).unwrap().is_none(), "a partial message waits");
        buf.extend_from_slice(&all[all.len() - 1..]);
        match take(&mut buf).unwrap() {
            Some(Backend::DataRow(v)) => {
                assert_eq!(v, vec![Some(Bytes::from_static(b"abc")), None])
            }
            other => panic!("{other:?}"),
        }
        assert!(buf.is_empty());
    }

    #[test]
    fn errors_carry_code_message_and_detail() {
        let body = b"SERROR\0VERROR\0C42704\0Mreplication slot \"x\" does not exist\0Dmore\0\0";
        let mut buf = BytesMut::from(&frame(b'E', body)[..]);
        let Some(Backend::Error(e)) = take(&mut buf).unwrap() else {
            panic!()
        };
        assert_eq!(e.code, "42704");
        assert_eq!(
            e.to_string(),
            "replication slot \"x\" does not exist [42704]; more"
        );
    }
}
