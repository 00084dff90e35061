//! The replication stream's messages: the copy-both envelope (`XLogData`, primary keepalive,
//! the standby status update a client sends back) and, inside `XLogData`, the `pgoutput`
//! plugin's logical messages (protocol version 1: whole transactions, in commit order).

use bytes::{Buf, Bytes};

use crate::lsn::Lsn;
use crate::wire::message_parts::{cstr, get_i16, get_i32, get_u64, invalid, need};

/// Microseconds between the Unix epoch and PostgreSQL's (2000-01-01).
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;

/// One piece of the replication stream.
#[derive(Debug)]
pub(crate) enum StreamMessage {
    /// WAL data: one logical message.
    XLogData {
        /// The server's current end of WAL.
        wal_end: Lsn,
        /// The message.
        data: Bytes,
    },
    /// The server is alive; `reply` asks for a status update now.
    Keepalive {
        /// The server's current end of WAL.
        wal_end: Lsn,
        /// Whether the server wants an answer at once.
        reply: bool,
    },
}

/// Parses one copy-data message of the replication stream.
pub(crate) fn stream_message(mut b: Bytes) -> std::io::Result<StreamMessage> {
    need(&b, 1)?;
    match b.get_u8() {
        b'w' => {
            get_u64(&mut b)?; // where the message starts
            let wal_end = Lsn(get_u64(&mut b)?);
            get_u64(&mut b)?; // send time
            Ok(StreamMessage::XLogData { wal_end, data: b })
        }
        b'k' => {
            let wal_end = Lsn(get_u64(&mut b)?);
            get_u64(&mut b)?;
            need(&b, 1)?;
            Ok(StreamMessage::Keepalive {
                wal_end,
                reply: b.get_u8() == 1,
            })
        }
        t => Err(invalid(format!("replication message `{}`", t as char))),
    }
}

/// A standby status update: `flushed` is what the slot may forget (everything before it is
/// done); written and applied are reported as the same.
pub(crate) fn status_update(flushed: Lsn, now_unix_micros: i64) -> Vec<u8> {
    let mut v = Vec::with_capacity(34);
    v.push(b'r');
    for _ in 0..3 {
        v.extend_from_slice(&flushed.0.to_be_bytes());
    }
    v.extend_from_slice(&(now_unix_micros - PG_EPOCH_MICROS).to_be_bytes());
    v.push(0);
    v
}

/// A column of a relation as the stream describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Column {
    /// Part of the replica identity (the key).
    pub key: bool,
    /// Name.
    pub name: String,
    /// Type oid.
    pub type_oid: u32,
    /// Type modifier (-1: none).
    pub type_mod: i32,
}

/// A table as the stream describes it (sent before its first change and after it changes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Relation {
    /// The table's oid.
    pub oid: u32,
    /// Schema name.
    pub schema: String,
    /// Table name.
    pub name: String,
    /// `d` default (primary key), `n` nothing, `f` full, `i` index.
    pub replica_identity: u8,
    /// Columns in order.
    pub columns: Vec<Column>,
    /// The columns' names, types and key as records carry them (`crate::types`).
    pub types: serde_json::Value,
}

/// The `columns` value of a relation's columns (`column_types`).
fn column_types(columns: &[Column]) -> serde_json::Value {
    crate::types::columns_value(columns.iter().map(|c| {
        let ty = crate::types::type_name(c.type_oid, c.type_mod);
        (c.name.as_str(), ty, c.key)
    }))
}

impl Relation {
    /// The relation with `key` as its key columns (a `REPLICA IDENTITY FULL` table marks every
    /// column as its identity; its key is its own).
    pub(crate) fn with_key(mut self, key: &[String]) -> Relation {
        for c in &mut self.columns {
            c.key = key.contains(&c.name);
        }
        self.types = column_types(&self.columns);
        self
    }
}

/// One value of a row in the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Datum {
    /// NULL.
    Null,
    /// A TOAST-ed value the change did not touch: not in the WAL record.
    Unchanged,
    /// The value as text.
    Text(Bytes),
}

/// A logical message of `pgoutput`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Logical {
    /// A transaction begins; it commits at `final_lsn`.
    Begin {
        /// The commit record's position.
        final_lsn: Lsn,
        /// Commit time, microseconds since the Unix epoch.
        commit_micros: i64,
        /// Transaction id.
        xid: u32,
    },
    /// The transaction committed.
    Commit {
        /// The commit record's position.
        commit_lsn: Lsn,
        /// The position after it: where the next transaction may start.
        end_lsn: Lsn,
    },
    /// A table's description.
    Relation(Relation),
    /// A row was inserted.
    Insert {
        /// Table oid.
        rel: u32,
        /// The row.
        new: Vec<Datum>,
    },
    /// A row was updated; `old` is the key columns (`K`) or the whole old row (`O`,
    /// `REPLICA IDENTITY FULL`) when sent.
    Update {
        /// Table oid.
        rel: u32,
        /// The old key or row, if sent.
        old: Option<(u8, Vec<Datum>)>,
        /// The new row.
        new: Vec<Datum>,
    },
    /// A row was deleted; `old` is its key (`K`) or the whole row (`O`).
    Delete {
        /// Table oid.
        rel: u32,
        /// The old key or row.
        old: (u8, Vec<Datum>),
    },
    /// Tables were truncated.
    Truncate {
        /// Table oids.
        rels: Vec<u32>,
    },
    /// Anything else (origin, type, logical decoding messages).
    Other,
}

/// Parses one `pgoutput` message (protocol version 1).
pub(crate) fn logical(mut b: Bytes) -> std::io::Result<Logical> {
    need(&b, 1)?;
    Ok(match b.get_u8() {
        b'B' => {
            let final_lsn = Lsn(get_u64(&mut b)?);
            let ts = get_u64(&mut b)? as i64;
            let xid = get_i32(&mut b)? as u32;
            Logical::Begin {
                final_lsn,
                commit_micros: ts + PG_EPOCH_MICROS,
                xid,
            }
        }
        b'C' => {
            need(&b, 1)?;
            b.advance(1);
            let commit_lsn = Lsn(get_u64(&mut b)?);
            let end_lsn = Lsn(get_u64(&mut b)?);
            Logical::Commit {
                commit_lsn,
                end_lsn,
            }
        }
        b'R' => {
            let oid = get_i32(&mut b)? as u32;
            let schema = cstr(&mut b)?;
            let name = cstr(&mut b)?;
            need(&b, 1)?;
            let replica_identity = b.get_u8();
            let n = get_i16(&mut b)?;
            let mut columns = Vec::with_capacity(n.max(0) as usize);
            for _ in 0..n {
                need(&b, 1)?;
                let key = b.get_u8() & 1 == 1;
                let name = cstr(&mut b)?;
                let type_oid = get_i32(&mut b)? as u32;
                let type_mod = get_i32(&mut b)?;
                columns.push(Column {
                    key,
                    name,
                    type_oid,
                    type_mod,
                });
            }
            let types = column_types(&columns);
            Logical::Relation(Relation {
                oid,
                schema,
                name,
                replica_identity,
                columns,
                types,
            })
        }
        b'I' => {
            let rel = get_i32(&mut b)? as u32;
            expect(&mut b, b'N')?;
            Logical::Insert {
                rel,
                new: tuple(&mut b)?,
            }
        }
        b'U' => {
            let rel = get_i32(&mut b)? as u32;
            need(&b, 1)?;
            let mut kind = b.get_u8();
            let mut old = None;
            if kind == b'K' || kind == b'O' {
                old = Some((kind, tuple(&mut b)?));
                need(&b, 1)?;
                kind = b.get_u8();
            }
            if kind != b'N' {
                return Err(invalid(format!("update tuple `{}`", kind as char)));
            }
            Logical::Update {
                rel,
                old,
                new: tuple(&mut b)?,
            }
        }
        b'D' => {
            let rel = get_i32(&mut b)? as u32;
            need(&b, 1)?;
            let kind = b.get_u8();
            if kind != b'K' && kind != b'O' {
                return Err(invalid(format!("delete tuple `{}`", kind as char)));
            }
            Logical::Delete {
                rel,
                old: (kind, tuple(&mut b)?),
            }
        }
        b'T' => {
            let n = get_i32(&mut b)?;
            need(&b, 1)?;
            b.advance(1); // options
            let mut rels = Vec::with_capacity(n.max(0) as usize);
            for _ in 0..n {
                rels.push(get_i32(&mut b)? as u32);
            }
            Logical::Truncate { rels }
        }
        _ => Logical::Other,
    })
}

fn expect(b: &mut Bytes, tag: u8) -> std::io::Result<()> {
    need(b, 1)?;
    let got = b.get_u8();
    if got != tag {
        return Err(invalid(format!(
            "`{}` where `{}` belongs",
            got as char, tag as char
        )));
    }
    Ok(())
}

fn tuple(b: &mut Bytes) -> std::io::Result<Vec<Datum>> {
    let n = get_i16(b)?;
    let mut out = Vec::with_capacity(n.max(0) as usize);
    for _ in 0..n {
        need(b, 1)?;
        out.push(match b.get_u8() {
            b'n' => Datum::Null,
            b'u' => Datum::Unchanged,
            b't' | b'b' => {
                let len = get_i32(b)?;
                if len < 0 {
                    return Err(invalid("a negative value length"));
                }
                need(b, len as usize)?;
                Datum::Text(b.split_to(len as usize))
            }
            k => return Err(invalid(format!("value kind `{}`", k as char))),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_and_their_tuples_are_read() {
        // Update of relation 16384 with the old key 7 and a new row (7, NULL, unchanged).
        let mut m = vec![b'U'];
        m.extend_from_slice(&16384i32.to_be_bytes());
        m.push(b'K');
        m.extend_from_slice(&1i16.to_be_bytes());
        m.push(b't');
        m.extend_from_slice(&1i32.to_be_bytes());
        m.push(b'7');
        m.push(b'N');
        m.extend_from_slice(&3i16.to_be_bytes());
        m.push(b't');
        m.extend_from_slice(&1i32.to_be_bytes());
        m.push(b'7');
        m.push(b'n');
        m.push(b'u');
        let got = logical(Bytes::from(m)).unwrap();
        assert_eq!(
            got,
            Logical::Update {
                rel: 16384,
                old: Some((b'K', vec![Datum::Text(Bytes::from_static(b"7"))])),
                new: vec![
                    Datum::Text(Bytes::from_static(b"7")),
                    Datum::Null,
                    Datum::Unchanged
                ],
            }
        );
        assert!(logical(Bytes::from_static(b"I\0\0\0\x01X")).is_err());
    }

    #[test]
    fn status_updates_carry_the_flushed_position_three_times() {
        let v = status_update(Lsn(0x10), PG_EPOCH_MICROS + 5);
        assert_eq!(v.len(), 34);
        assert_eq!(&v[1..9], &0x10u64.to_be_bytes());
        assert_eq!(&v[17..25], &0x10u64.to_be_bytes());
        assert_eq!(&v[25..33], &5i64.to_be_bytes());
    }
}
