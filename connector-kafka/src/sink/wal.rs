//! The write-ahead log of one transaction: every record the transaction holds, appended in a
//! compact binary form to a file of its own while the records are sent, made durable at
//! pre-commit, and read back only when a restored transaction turns out not to have committed.
//!
//! The checkpoint refers to a log by a [`WalRef`] (path, transaction nonce, record count, byte
//! count, CRC-32), so the checkpoint stays a few hundred bytes whatever the throughput, and the
//! sink's memory holds two write buffers, not the transaction's records.
//!
//! File layout (integers little-endian):
//!
//! ```text
//! header  "RIVUSTXL" | version u8 (1) | tid length u16 | tid | nonce u64
//! record  flags u8 | [topic length u16 | topic]   (flag 1: the topic differs from the last)
//!                  | [key length u32 | key]        (flag 2)
//!                  | [value length u32 | value]    (flag 4)
//!                  | [partition i32]               (flag 8)
//!                  | [timestamp i64]               (flag 16)
//!                  | [header count u16 | (name length u16 | name | value length u32 | value)*]
//!                                                  (flag 32)
//! ```

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use rivus_sdk::{Error, Result};
use tokio::task::JoinHandle;

use crate::record::OutRecord;

const MAGIC: &[u8; 8] = b"RIVUSTXL";
const VERSION: u8 = 1;
/// Records are encoded into a buffer of this size, written out by a blocking thread while the
/// next buffer fills: the log costs two buffers of memory.
const CHUNK: usize = 1 << 20;

const NEW_TOPIC: u8 = 1;
const KEY: u8 = 2;
const VALUE: u8 = 4;
const PARTITION: u8 = 8;
const TIMESTAMP: u8 = 16;
const HEADERS: u8 = 32;

/// Where a pre-committed transaction's records are, as checkpointed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WalRef {
    /// The log file.
    pub path: PathBuf,
    /// Tells this transaction's log from a later one written to the same file.
    pub nonce: u64,
    /// Records in the log.
    pub records: u64,
    /// Length of the file.
    pub bytes: u64,
    /// CRC-32 of the whole file.
    pub crc32: u32,
}

fn io_err(what: &str, path: &Path, e: impl std::fmt::Display) -> Error {
    Error::connector(
        "kafka sink: transaction log",
        format!("{what} {}: {e}", path.display()),
    )
}

/// A write in flight: gives back the file and its (emptied) buffer.
type Writing = JoinHandle<std::io::Result<(File, Vec<u8>)>>;

/// Appends one transaction's records to its log.
pub(crate) struct WalWriter {
    path: PathBuf,
    nonce: u64,
    /// The file, while no write is in flight.
    file: Option<File>,
    writing: Option<Writing>,
    buf: Vec<u8>,
    crc: crc32fast::Hasher,
    records: u64,
    bytes: u64,
    last_topic: String,
}

impl WalWriter {
    /// Starts the log of transaction `nonce` of `tid` at `path`, replacing what was there.
    pub(super) async fn create(path: PathBuf, tid: &str, nonce: u64) -> Result<Self> {
        let p = path.clone();
        let file = tokio::task::spawn_blocking(move || {
            if let Some(dir) = p.parent() {
                std::fs::create_dir_all(dir)?;
            }
            File::create(&p)
        })
        .await
        .map_err(|e| io_err("creating", &path, e))?
        .map_err(|e| io_err("creating", &path, e))?;
        let mut buf = Vec::with_capacity(CHUNK + 4096);
        buf.extend_from_slice(MAGIC);
        buf.push(VERSION);
        put_str16(&mut buf, tid);
        buf.extend_from_slice(&nonce.to_le_bytes());
        Ok(WalWriter {
            path,
            nonce,
            file: Some(file),
            writing: None,
            buf,
            crc: crc32fast::Hasher::new(),
            records: 0,
            bytes: 0,
            last_topic: String::new(),
        })
    }

    /// Appends a record sent to `topic`.
    pub(super) async fn append(&mut self, topic: &str, r: &OutRecord) -> Result<()> {
        encode(&mut self.buf, &mut self.last_topic, topic, r);
        self.records += 1;
        if self.buf.len() >= CHUNK {
            self.spill().await?;
        }
        Ok(())
    }

    /// Waits for the write in flight, then hands the buffer to a blocking thread.
    async fn spill(&mut self) -> Result<()> {
        let (file, spare) = self.settle().await?;
        let mut full = std::mem::replace(&mut self.buf, spare);
        self.crc.update(&full);
        let offset = self.bytes;
        self.bytes += full.len() as u64;
        self.writing = Some(tokio::task::spawn_blocking(move || {
            let mut file = file;
            file.write_all(&full)?;
            start_writeback(&file, offset, full.len() as u64);
            full.clear();
            Ok((file, full))
        }));
        Ok(())
    }

    /// The file and a spare buffer, once no write is in flight.
    async fn settle(&mut self) -> Result<(File, Vec<u8>)> {
        match self.writing.take() {
            Some(w) => w
                .await
                .map_err(|e| io_err("writing", &self.path, e))?
                .map_err(|e| io_err("writing", &self.path, e)),
            None => Ok((
                self.file
                    .take()
                    .expect("file held when no write is in flight"),
                Vec::with_capacity(CHUNK + 4096),
            )),
        }
    }

    /// Writes what is buffered and, if `durable`, makes the log durable (file and directory
    /// synced). A transaction committed at once, which no checkpoint refers to, needs no
    /// durable log.
    pub(super) async fn seal(mut self, durable: bool) -> Result<WalRef> {
        self.spill().await?;
        let (file, _) = self.settle().await?;
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            if !durable {
                return Ok(());
            }
            file.sync_data()?;
            if let Some(dir) = path.parent() {
                File::open(dir)?.sync_all()?;
            }
            Ok(())
        })
        .await
        .map_err(|e| io_err("syncing", &self.path, e))?
        .map_err(|e| io_err("syncing", &self.path, e))?;
        Ok(WalRef {
            path: self.path,
            nonce: self.nonce,
            records: self.records,
            bytes: self.bytes,
            crc32: self.crc.finalize(),
        })
    }
}

/// Starts writing `len` bytes at `offset` back to the disk without waiting, so that the sync at
/// pre-commit finds little left to do (Linux `sync_file_range`; elsewhere the sync does it all).
#[cfg(target_os = "linux")]
fn start_writeback(file: &File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    // SAFETY: the descriptor is open for the duration of the call; the call only schedules
    // write-back of the file's pages and reads no memory of ours. A failure (old kernel, odd
    // file system) only leaves the work to the sync at pre-commit.
    unsafe {
        libc::sync_file_range(
            file.as_raw_fd(),
            offset as libc::off64_t,
            len as libc::off64_t,
            libc::SYNC_FILE_RANGE_WRITE,
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn start_writeback(_: &File, _: u64, _: u64) {}

/// Empties a log whose transaction committed (its space back; the next transaction of the
/// slot writes it anew).
pub(crate) async fn discard(path: &Path) {
    let p = path.to_owned();
    let r = tokio::task::spawn_blocking(move || {
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .and_then(|f| f.set_len(0))
    })
    .await;
    if let Ok(Err(e)) | Err(e) = r.map_err(std::io::Error::other) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(path = %path.display(), error = %e, "kafka sink: could not empty a committed transaction's log");
        }
    }
}

fn put_str16(buf: &mut Vec<u8>, s: &str) {
    let b = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
    buf.extend_from_slice(&(b.len() as u16).to_le_bytes());
    buf.extend_from_slice(b);
}

fn put_bytes32(buf: &mut Vec<u8>, b: &[u8]) {
    buf.extend_from_slice(&(b.len() as u32).to_le_bytes());
    buf.extend_from_slice(b);
}

fn encode(buf: &mut Vec<u8>, last_topic: &mut String, topic: &str, r: &OutRecord) {
    let mut flags = 0;
    if topic != last_topic {
        flags |= NEW_TOPIC;
    }
    if r.key.is_some() {
        flags |= KEY;
    }
    if r.value.is_some() {
        flags |= VALUE;
    }
    if r.partition.is_some() {
        flags |= PARTITION;
    }
    if r.timestamp.is_some() {
        flags |= TIMESTAMP;
    }
    if !r.headers.is_empty() {
        flags |= HEADERS;
    }
    buf.push(flags);
    if flags & NEW_TOPIC != 0 {
        put_str16(buf, topic);
        last_topic.clear();
        last_topic.push_str(topic);
    }
    if let Some(k) = &r.key {
        put_bytes32(buf, k);
    }
    if let Some(v) = &r.value {
        put_bytes32(buf, v);
    }
    if let Some(p) = r.partition {
        buf.extend_from_slice(&p.to_le_bytes());
    }
    if let Some(t) = r.timestamp {
        buf.extend_from_slice(&t.to_le_bytes());
    }
    if !r.headers.is_empty() {
        let n = r.headers.len().min(u16::MAX as usize);
        buf.extend_from_slice(&(n as u16).to_le_bytes());
        for (k, v) in &r.headers[..n] {
            put_str16(buf, k);
            put_bytes32(buf, v);
        }
    }
}

/// Reads a log back, record by record, checking it against its [`WalRef`].
///
/// Reading is blocking file I/O on the rare recovery path; it runs on a blocking thread in
/// chunks, so a large log is never in memory whole.
pub(crate) struct WalReader {
    wal: WalRef,
    file: Option<File>,
    buf: Vec<u8>,
    pos: usize,
    crc: crc32fast::Hasher,
    read: u64,
    eof: bool,
    records: u64,
    topic: String,
}

impl WalReader {
    /// Opens the log of `wal` and checks that it is the log of transaction `wal.nonce` of
    /// `tid`.
    pub(super) async fn open(wal: &WalRef, tid: &str) -> Result<Self> {
        let p = wal.path.clone();
        let file = tokio::task::spawn_blocking(move || File::open(p))
            .await
            .map_err(|e| io_err("opening", &wal.path, e))?
            .map_err(|e| {
                io_err(
                    "opening",
                    &wal.path,
                    format!("{e} (the log of a transaction that never committed; was the state directory moved to another machine or cleaned?)"),
                )
            })?;
        let mut r = WalReader {
            wal: wal.clone(),
            file: Some(file),
            buf: Vec::new(),
            pos: 0,
            crc: crc32fast::Hasher::new(),
            read: 0,
            eof: false,
            records: 0,
            topic: String::new(),
        };
        let bad = |what: String| io_err("reading", &wal.path, what);
        let magic = r.take(9).await?;
        if &magic[..8] != MAGIC || magic[8] != VERSION {
            return Err(bad("not a rivus transaction log (version 1)".into()));
        }
        let found_tid = r.str16().await?;
        let nonce = u64::from_le_bytes(r.take(8).await?.try_into().expect("8 bytes"));
        if found_tid != tid || nonce != wal.nonce {
            return Err(bad(format!(
                "holds transaction {nonce:016x} of {found_tid}, not {:016x} of {tid}",
                wal.nonce
            )));
        }
        Ok(r)
    }

    /// Makes `n` bytes available at `pos`, reading more of the file if needed.
    async fn fill(&mut self, n: usize) -> Result<bool> {
        while self.buf.len() - self.pos < n {
            if self.eof {
                return Ok(false);
            }
            self.buf.drain(..self.pos);
            self.pos = 0;
            let mut file = self.file.take().expect("file");
            let mut chunk = vec![0u8; CHUNK.max(n)];
            let (file, chunk, got) = tokio::task::spawn_blocking(move || {
                let got = file.read(&mut chunk);
                (file, chunk, got)
            })
            .await
            .map_err(|e| io_err("reading", &self.wal.path, e))?;
            self.file = Some(file);
            let got = got.map_err(|e| io_err("reading", &self.wal.path, e))?;
            if got == 0 {
                self.eof = true;
            }
            self.crc.update(&chunk[..got]);
            self.read += got as u64;
            self.buf.extend_from_slice(&chunk[..got]);
        }
        Ok(true)
    }

    async fn take(&mut self, n: usize) -> Result<Vec<u8>> {
        if !self.fill(n).await? {
            return Err(self.truncated());
        }
        let out = self.buf[self.pos..self.pos + n].to_vec();
        self.pos += n;
        Ok(out)
    }

    async fn u16(&mut self) -> Result<usize> {
        let b = self.take(2).await?;
        Ok(u16::from_le_bytes([b[0], b[1]]) as usize)
    }

    async fn u32(&mut self) -> Result<usize> {
        let b = self.take(4).await?;
        Ok(u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
    }

    async fn str16(&mut self) -> Result<String> {
        let n = self.u16().await?;
        String::from_utf8(self.take(n).await?).map_err(|_| {
            io_err(
                "reading",
                &self.wal.path,
                "a topic or header name is not UTF-8",
            )
        })
    }

    async fn bytes32(&mut self) -> Result<Vec<u8>> {
        let n = self.u32().await?;
        self.take(n).await
    }

    fn truncated(&self) -> Error {
        io_err(
            "reading",
            &self.wal.path,
            format!(
                "the log ends after {} of {} records ({} bytes; the checkpoint says {})",
                self.records, self.wal.records, self.read, self.wal.bytes
            ),
        )
    }

    /// The next record and its topic; `None` after the last, once the whole log has been
    /// checked against its count, length and checksum.
    pub(super) async fn next(&mut self) -> Result<Option<(String, OutRecord)>> {
        if self.records == self.wal.records {
            // Past the last record: nothing may follow, and the checksum must match.
            while self.fill(1).await? {
                self.pos = self.buf.len();
            }
            let crc = self.crc.clone().finalize();
            if self.read != self.wal.bytes || crc != self.wal.crc32 {
                return Err(io_err(
                    "reading",
                    &self.wal.path,
                    format!(
                        "{} bytes with CRC-32 {crc:08x}, the checkpoint says {} bytes with {:08x}",
                        self.read, self.wal.bytes, self.wal.crc32
                    ),
                ));
            }
            return Ok(None);
        }
        let flags = self.take(1).await?[0];
        if flags & NEW_TOPIC != 0 {
            self.topic = self.str16().await?;
        }
        let mut r = OutRecord {
            topic: Some(self.topic.clone()),
            ..Default::default()
        };
        if flags & KEY != 0 {
            r.key = Some(self.bytes32().await?);
        }
        if flags & VALUE != 0 {
            r.value = Some(self.bytes32().await?);
        }
        if flags & PARTITION != 0 {
            let b = self.take(4).await?;
            r.partition = Some(i32::from_le_bytes(b.try_into().expect("4 bytes")));
        }
        if flags & TIMESTAMP != 0 {
            let b = self.take(8).await?;
            r.timestamp = Some(i64::from_le_bytes(b.try_into().expect("8 bytes")));
        }
        if flags & HEADERS != 0 {
            let n = self.u16().await?;
            for _ in 0..n {
                let k = self.str16().await?;
                let v = self.bytes32().await?;
                r.headers.push((k, v));
            }
        }
        self.records += 1;
        Ok(Some((self.topic.clone(), r)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(i: u32) -> OutRecord {
        OutRecord {
            topic: None,
            key: (!i.is_multiple_of(3)).then(|| vec![0, 255, i as u8]),
            value: (!i.is_multiple_of(5)).then(|| vec![b'x'; (i as usize * 37) % 3000]),
            headers: if i.is_multiple_of(4) {
                vec![("h".into(), vec![1, 2]), ("trace".into(), vec![])]
            } else {
                vec![]
            },
            partition: i.is_multiple_of(2).then_some(i as i32 % 7),
            timestamp: (!i.is_multiple_of(7)).then_some(1_700_000_000_000 + i as i64),
        }
    }

    async fn write(dir: &Path, n: u32) -> WalRef {
        let mut w = WalWriter::create(dir.join("sub/t-0-1.wal"), "t-0-1", 42)
            .await
            .unwrap();
        for i in 0..n {
            let topic = if i % 10 < 7 { "orders" } else { "audit" };
            w.append(topic, &rec(i)).await.unwrap();
        }
        let wal = w.seal(true).await.unwrap();
        assert_eq!(wal.records, n as u64);
        wal
    }

    async fn read_all(wal: &WalRef, tid: &str) -> Result<Vec<(String, OutRecord)>> {
        let mut r = WalReader::open(wal, tid).await?;
        let mut out = Vec::new();
        while let Some(x) = r.next().await? {
            out.push(x);
        }
        Ok(out)
    }

    #[tokio::test]
    async fn a_log_reads_back_every_record_across_chunks() {
        let dir = tempfile::tempdir().unwrap();
        // About 1.5 k bytes a record on average: 3000 records span several 1 MiB chunks.
        let wal = write(dir.path(), 3000).await;
        assert!(wal.bytes > 2 * CHUNK as u64, "{} bytes", wal.bytes);
        assert_eq!(std::fs::metadata(&wal.path).unwrap().len(), wal.bytes);
        let back = read_all(&wal, "t-0-1").await.unwrap();
        assert_eq!(back.len(), 3000);
        for (i, (topic, r)) in back.into_iter().enumerate() {
            let want_topic = if i % 10 < 7 { "orders" } else { "audit" };
            assert_eq!(topic, want_topic);
            let mut want = rec(i as u32);
            want.topic = Some(want_topic.into());
            assert_eq!(r, want, "record {i}");
        }
    }

    #[tokio::test]
    async fn a_damaged_or_foreign_log_is_refused_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let wal = write(dir.path(), 50).await;
        let e = read_all(&wal, "t-0-2").await.unwrap_err().to_string();
        assert!(e.contains("t-0-1.wal") && e.contains("not"), "{e}");
        let other = WalRef {
            nonce: 7,
            ..wal.clone()
        };
        assert!(read_all(&other, "t-0-1").await.is_err());

        // A flipped byte in a value: the checksum tells.
        let mut data = std::fs::read(&wal.path).unwrap();
        let at = data.len() - 20;
        data[at] ^= 0x55;
        std::fs::write(&wal.path, &data).unwrap();
        let e = read_all(&wal, "t-0-1").await.unwrap_err().to_string();
        assert!(e.contains("CRC-32"), "{e}");

        // A torn log: the count tells.
        data.truncate(data.len() / 2);
        std::fs::write(&wal.path, &data).unwrap();
        let e = read_all(&wal, "t-0-1").await.unwrap_err().to_string();
        assert!(e.contains("ends after"), "{e}");

        // Gone: the error says what the file was for.
        std::fs::remove_file(&wal.path).unwrap();
        let e = read_all(&wal, "t-0-1").await.unwrap_err().to_string();
        assert!(e.contains("never committed"), "{e}");
    }

    #[tokio::test]
    async fn an_empty_transaction_has_a_header_only_log_and_discard_empties_a_log() {
        let dir = tempfile::tempdir().unwrap();
        let wal = write(dir.path(), 0).await;
        assert_eq!(wal.records, 0);
        assert!(read_all(&wal, "t-0-1").await.unwrap().is_empty());
        discard(&wal.path).await;
        assert_eq!(std::fs::metadata(&wal.path).unwrap().len(), 0);
        discard(&dir.path().join("missing.wal")).await;
    }
}
