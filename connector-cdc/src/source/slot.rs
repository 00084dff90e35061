//! What must exist before a change is read — the publication, the slot, the rights to read the
//! tables — checked at start with errors that say what is missing and how to add it, and the
//! slot's creation (with an exported snapshot when the tables are to be read whole).

use rivus_sdk::{Error, Result};

use crate::error::wire_error;
use crate::lsn::Lsn;
use crate::wire::Connection;

/// A string as an SQL literal.
pub(crate) fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// An identifier, quoted.
pub(crate) fn ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

/// The slot as the server knows it.
#[derive(Debug)]
pub(crate) struct Slot {
    /// Everything before this is confirmed done.
    pub(crate) confirmed: Option<Lsn>,
    /// `reserved`, `extended`, `unreserved` or `lost` (WAL removed past
    /// `max_slot_wal_keep_size`).
    pub(crate) wal_status: Option<String>,
    /// The output plugin.
    pub(crate) plugin: String,
    /// The database.
    pub(crate) database: String,
}

/// The tables of `publication` (`schema.table`), refusing a publication that does not exist.
pub(crate) async fn publication_tables(
    c: &mut Connection,
    publication: &str,
    db: &str,
) -> Result<Vec<(String, String)>> {
    let exists = c
        .query(&format!(
            "SELECT 1 AS found FROM pg_publication WHERE pubname = {}",
            literal(publication)
        ))
        .await
        .map_err(|e| wire_error("postgres-cdc: reading publications", e))?;
    if exists.rows.is_empty() {
        return Err(Error::refused_at(
            "postgres-cdc",
            "publication",
            format!(
                "publication `{publication}` does not exist in database `{db}`: create it \
                 (as the tables' owner) with CREATE PUBLICATION {} FOR TABLE ...",
                ident(publication)
            ),
        ));
    }
    let rows = c
        .query(&format!(
            "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = {} \
             ORDER BY 1, 2",
            literal(publication)
        ))
        .await
        .map_err(|e| wire_error("postgres-cdc: reading the publication's tables", e))?;
    Ok((0..rows.rows.len())
        .map(|i| {
            (
                rows.text(i, "schemaname").unwrap_or_default(),
                rows.text(i, "tablename").unwrap_or_default(),
            )
        })
        .collect())
}

/// The slot named `slot`, if it exists.
pub(crate) async fn find(c: &mut Connection, slot: &str) -> Result<Option<Slot>> {
    let rows = c
        .query(&format!(
            "SELECT confirmed_flush_lsn::text AS confirmed, wal_status, plugin, database \
             FROM pg_replication_slots WHERE slot_name = {}",
            literal(slot)
        ))
        .await
        .map_err(|e| wire_error("postgres-cdc: reading replication slots", e))?;
    if rows.rows.is_empty() {
        return Ok(None);
    }
    Ok(Some(Slot {
        confirmed: rows.text(0, "confirmed").and_then(|s| s.parse().ok()),
        wal_status: rows.text(0, "wal_status"),
        plugin: rows.text(0, "plugin").unwrap_or_default(),
        database: rows.text(0, "database").unwrap_or_default(),
    }))
}

/// Refuses a slot the source cannot read: another plugin or database, or WAL lost.
pub(crate) fn check(slot: &Slot, name: &str, db: &str) -> Result<()> {
    let path = "slot";
    if slot.plugin != "pgoutput" {
        return Err(Error::refused_at(
            "postgres-cdc",
            path,
            format!(
                "slot `{name}` uses the `{}` plugin; this source reads `pgoutput`",
                slot.plugin
            ),
        ));
    }
    if slot.database != db {
        return Err(Error::refused_at(
            "postgres-cdc",
            path,
            format!(
                "slot `{name}` belongs to database `{}`, not `{db}`",
                slot.database
            ),
        ));
    }
    if slot.wal_status.as_deref() == Some("lost") {
        return Err(lost(name));
    }
    Ok(())
}

/// The error of a slot that is gone or lost its WAL: the changes since its position cannot be
/// read any more.
pub(crate) fn lost(name: &str) -> Error {
    Error::refused_at(
        "postgres-cdc",
        "slot",
        format!(
            "replication slot `{name}` was dropped or invalidated (its WAL was removed, see \
             max_slot_wal_keep_size): changes since the checkpoint are lost to it; a new \
             snapshot is needed — start the job without its checkpoint (a new slot and a \
             snapshot are made)"
        ),
    )
}

/// A name for one attempt's temporary snapshot slot, `<slot>_snapshot_<pid>_<n>` (the slot's
/// name shortened to fit 63 characters): distinct for each attempt, so that a restart never
/// meets the temporary slot of a killed attempt, which the server drops only once it notices
/// that attempt's connection is gone.
pub(crate) fn temporary_name(slot: &str) -> String {
    static ATTEMPTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = ATTEMPTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let suffix = format!("_snapshot_{}_{n}", std::process::id());
    let keep = 63usize.saturating_sub(suffix.len());
    let head: String = slot.chars().take(keep).collect();
    format!("{head}{suffix}")
}

/// Creates `slot` (pgoutput); with `export`, the snapshot of its consistent point is exported
/// and stays valid while `c` runs nothing else: (consistent point, snapshot name). While the
/// server waits for open transactions to end, a warning names them (see [`super::waiting`]).
pub(crate) async fn create(
    c: &mut Connection,
    s: &super::Settings,
    slot: &str,
    export: bool,
    temporary: bool,
) -> Result<(Lsn, Option<String>)> {
    let sql = format!(
        "CREATE_REPLICATION_SLOT {}{} LOGICAL pgoutput {}",
        ident(slot),
        if temporary { " TEMPORARY" } else { "" },
        if export {
            "EXPORT_SNAPSHOT"
        } else {
            "NOEXPORT_SNAPSHOT"
        }
    );
    let rows = super::waiting::naming_blockers(s, slot, c.query(&sql))
        .await
        .map_err(|e| {
            wire_error(
                format!("postgres-cdc: creating replication slot `{slot}`"),
                e,
            )
        })?;
    let lsn = rows
        .text(0, "consistent_point")
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| Error::connector("postgres-cdc", "the new slot has no consistent point"))?;
    Ok((lsn, rows.text(0, "snapshot_name")))
}

/// Moves the slot's confirmed position to `to` (when it is behind), through SQL: for a slot no
/// stream holds. Waits up to 10 s for the stream that just ended to release it.
pub(crate) async fn advance(s: &super::Settings, to: Lsn) -> Result<()> {
    let mut c = Connection::connect(&s.params, false, s.timeout)
        .await
        .map_err(|e| wire_error("postgres-cdc: connecting to confirm the last checkpoint", e))?;
    let sql = format!(
        "SELECT pg_replication_slot_advance({}, {}::pg_lsn) FROM pg_replication_slots \
         WHERE slot_name = {0} AND confirmed_flush_lsn < {1}::pg_lsn",
        literal(&s.slot),
        literal(&to.to_string())
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let outcome = loop {
        match c.query(&sql).await {
            // 55006: the slot is still held by the stream that just ended.
            Err(e) if e.code() == Some("55006") && std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            other => break other,
        }
    };
    c.close().await;
    outcome.map(drop).map_err(|e| {
        wire_error(
            format!("postgres-cdc: confirming {to} on slot `{}`", s.slot),
            e,
        )
    })
}

/// The publication's tables and the slot's state, for `rivus check`.
pub(crate) async fn report(s: &super::Settings) -> Result<String> {
    let mut c = Connection::connect(&s.params, false, s.timeout)
        .await
        .map_err(|e| wire_error("postgres-cdc: connecting", e))?;
    let tables = publication_tables(&mut c, &s.publication, &s.params.dbname).await?;
    let rows = c
        .query(&format!(
            "SELECT confirmed_flush_lsn::text AS confirmed, wal_status, active::text AS active, \
             pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint::text AS lag \
             FROM pg_replication_slots WHERE slot_name = {}",
            literal(&s.slot)
        ))
        .await
        .map_err(|e| wire_error("postgres-cdc: reading the slot", e))?;
    c.close().await;
    let slot = if rows.rows.is_empty() {
        format!("slot `{}` not created yet (made at the first run)", s.slot)
    } else {
        format!(
            "slot `{}` at {}, {} bytes of WAL kept, wal_status {}{}",
            s.slot,
            rows.text(0, "confirmed").unwrap_or_default(),
            rows.text(0, "lag").unwrap_or_default(),
            rows.text(0, "wal_status").unwrap_or_default(),
            if rows.text(0, "active").as_deref() == Some("true") {
                ", in use"
            } else {
                ""
            }
        )
    };
    Ok(format!(
        "publication `{}` ({} table(s)); {slot}",
        s.publication,
        tables.len()
    ))
}

#[cfg(test)]
mod temporary_name_tests {
    use super::temporary_name;

    #[test]
    fn each_attempt_has_its_own_name_within_63_characters() {
        let (a, b) = (temporary_name("orders"), temporary_name("orders"));
        assert_ne!(a, b);
        assert!(a.starts_with("orders_snapshot_"), "{a}");
        let long = "s".repeat(80);
        let name = temporary_name(&long);
        assert!(name.len() <= 63, "{name}: {} characters", name.len());
        assert!(name.contains("_snapshot_"), "{name}");
    }
}
