//! What a new slot waits for. Its consistent point comes only once every transaction holding a
//! transaction id when it was asked for has ended — prepared ones too, and a prepared
//! transaction left behind by a crashed writer never ends by itself. While a slot's creation
//! waits, the transactions it waits for are named in a warning, with the statement that ends
//! each, so that a start that seems hung says why.

use std::future::Future;
use std::time::Duration;

use crate::wire::Connection;

use super::Settings;

/// The first warning comes after this long; then one each `EVERY`.
const FIRST: Duration = Duration::from_secs(5);
const EVERY: Duration = Duration::from_secs(30);

/// Runs `creating` (the creation of `slot`), warning meanwhile of the transactions it waits for.
pub(crate) async fn naming_blockers<F: Future>(s: &Settings, slot: &str, creating: F) -> F::Output {
    tokio::pin!(creating);
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + FIRST, EVERY);
    let started = std::time::Instant::now();
    loop {
        tokio::select! {
            out = &mut creating => return out,
            _ = tick.tick() => match blockers(s).await {
                Ok(list) if !list.is_empty() => tracing::warn!(
                    slot,
                    waited_s = started.elapsed().as_secs(),
                    "postgres-cdc: creating the replication slot waits for these transactions \
                     to end: {}",
                    list.join("; ")
                ),
                Ok(_) => {}
                Err(e) => tracing::debug!(slot, error = %e, "postgres-cdc: listing what the slot waits for"),
            }
        }
    }
}

/// The transactions with an id, other than this session's, that began before the wait: prepared
/// ones by their global id (with `ROLLBACK PREPARED` or `COMMIT PREPARED` to end them) and open
/// ones by backend pid.
async fn blockers(s: &Settings) -> rivus_sdk::Result<Vec<String>> {
    let mut c = Connection::connect(&s.params, false, s.timeout)
        .await
        .map_err(|e| crate::error::wire_error("postgres-cdc: connecting", e))?;
    let since = format!("'{} seconds'", FIRST.as_secs());
    let sql = format!(
        "SELECT 'prepared transaction ' || quote_literal(gid) || ' of ' || owner || ' in ' || \
         database || ', prepared ' || prepared::text || ' (end it with COMMIT PREPARED or \
         ROLLBACK PREPARED ' || quote_literal(gid) || ')' AS what FROM pg_prepared_xacts \
         UNION ALL \
         SELECT 'transaction of backend ' || pid || ' (' || coalesce(usename::text, '?') || \
         coalesce(', ' || nullif(application_name, ''), '') || ', ' || state || ' since ' || \
         xact_start::text || ')' FROM pg_stat_activity WHERE backend_xid IS NOT NULL \
         AND pid <> pg_backend_pid() AND xact_start < now() - {since}::interval"
    );
    let rows = c
        .query(&sql)
        .await
        .map_err(|e| crate::error::wire_error("postgres-cdc: listing open transactions", e))?;
    c.close().await;
    Ok((0..rows.rows.len())
        .filter_map(|i| rows.text(i, "what"))
        .collect())
}
