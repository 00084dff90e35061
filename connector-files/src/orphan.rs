//! [`Orphan`]: a data file under a table's directory that the table does not name — what a
//! failure may leave behind a table kept over the sink's files (Delta, Iceberg).

use std::time::SystemTime;

/// A data file under a table's directory that the table does not name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphan {
    /// Its key below the table's directory.
    pub key: String,
    /// Its size in bytes.
    pub size: u64,
    /// When the store last modified it.
    pub modified: SystemTime,
}

impl Orphan {
    /// The line `rivus orphans` prints: `<key>  <size> bytes  <modified, UTC>`.
    pub fn line(&self) -> String {
        let ms = self
            .modified
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let at = rivus_sdk::calendar::format(ms, "%Y-%m-%dT%H:%M:%SZ");
        format!("{}  {} bytes  {at}", self.key, self.size)
    }
}
