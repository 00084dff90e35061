//! What the CDC tests share: a table of their own with a publication and rights for the
//! replication user, DML as the tables' owner, the table's rows and a replica built from the
//! captured changes, compared.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rivus_connector_cdc::{Envelope, PostgresCdcSource, PostgresCdcSourceBuilder};
use rivus_sdk::prelude::*;
use rivus_testkit::services::{require, unique_name, Service};
use rivus_testkit::{TransactionalSink, TxnStore};
use serde_json::Value;
use sqlx::{Connection, PgConnection};

/// A table `name` (id int primary key, body text, amount numeric(10,2), at timestamptz)
/// published as `name`, readable by the replication user; dropped with its slot by `clean`.
pub(crate) struct Fixture {
    pub owner_url: String,
    pub cdc_url: String,
    pub name: String,
    pub owner: PgConnection,
    cleaned: bool,
}

impl Drop for Fixture {
    /// A test that failed before `clean` leaves no slot behind (a slot keeps WAL forever).
    fn drop(&mut self) {
        if self.cleaned {
            return;
        }
        let (url, name) = (self.owner_url.clone(), self.name.clone());
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(drop_all(&url, &name));
        })
        .join();
    }
}

/// Drops the slot `name` (waiting for it to be released), the publication and the table.
async fn drop_all(url: &str, name: &str) {
    let Ok(mut c) = PgConnection::connect(url).await else {
        return;
    };
    for _ in 0..100 {
        let r = sqlx::query(&format!(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
             WHERE slot_name = '{name}'"
        ))
        .execute(&mut c)
        .await;
        if r.is_ok() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let _ = sqlx::raw_sql(&format!(
        "DROP PUBLICATION IF EXISTS {name}; DROP TABLE IF EXISTS {name} CASCADE"
    ))
    .execute(&mut c)
    .await;
}

impl Fixture {
    /// `None` when PostgreSQL is not reachable and skipping was asked for.
    pub(crate) async fn new(prefix: &str, rows: i64) -> Option<Fixture> {
        let owner_url = require(Service::Postgres)?;
        let cdc_url = require(Service::PostgresCdc)?;
        let name = unique_name(prefix).replace('-', "_");
        let mut owner = PgConnection::connect(&owner_url).await.unwrap();
        for sql in [
            format!(
                "CREATE TABLE {name} (id INT PRIMARY KEY, body TEXT, amount NUMERIC(10,2), \
                 at TIMESTAMPTZ NOT NULL DEFAULT now())"
            ),
            format!(
                "INSERT INTO {name} (id, body, amount) SELECT i, 'row ' || i, i / 100.0 \
                 FROM generate_series(1, {rows}) i"
            ),
            format!("GRANT SELECT ON {name} TO rivus_cdc"),
            format!("CREATE PUBLICATION {name} FOR TABLE {name}"),
        ] {
            sqlx::query(&sql).execute(&mut owner).await.unwrap();
        }
        Some(Fixture {
            owner_url,
            cdc_url,
            name,
            owner,
            cleaned: false,
        })
    }

    /// A new connection of the tables' owner (after a server restart).
    pub(crate) async fn reconnect(&mut self) {
        self.owner = PgConnection::connect(&self.owner_url).await.unwrap();
    }

    pub(crate) async fn exec(&mut self, sql: &str) {
        sqlx::raw_sql(sql).execute(&mut self.owner).await.unwrap();
    }

    /// The table's rows by id, as the flat records carry them (without `at`).
    pub(crate) async fn rows(&mut self) -> BTreeMap<i64, (String, String)> {
        let rows: Vec<(i32, Option<String>, Option<String>)> = sqlx::query_as(&format!(
            "SELECT id, body, amount::text FROM {} ORDER BY id",
            self.name
        ))
        .fetch_all(&mut self.owner)
        .await
        .unwrap();
        rows.into_iter()
            .map(|(id, b, a)| {
                (
                    i64::from(id),
                    (b.unwrap_or_default(), a.unwrap_or_default()),
                )
            })
            .collect()
    }

    /// The slot's confirmed position, as text.
    pub(crate) async fn confirmed(&mut self) -> Option<String> {
        sqlx::query_scalar(&format!(
            "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = '{}'",
            self.name
        ))
        .fetch_optional(&mut self.owner)
        .await
        .unwrap()
        .flatten()
    }

    /// Drops the slot (waiting for it to be released), the publication and the table.
    pub(crate) async fn clean(mut self) {
        drop_all(&self.owner_url, &self.name).await;
        self.cleaned = true;
    }
}

/// Waits (at most `secs`) until the rows rebuilt from `store`'s committed changes equal `f`'s
/// table as it is now, saying `what` did not happen otherwise; the table's rows.
pub(crate) async fn until_replica_equals(
    f: &mut Fixture,
    store: &TxnStore<Value>,
    secs: u64,
    what: &str,
) -> BTreeMap<i64, (String, String)> {
    let want = f.rows().await;
    rivus_testkit::wait::until(
        Duration::from_secs(secs),
        || async { replay(&store.committed()) == want },
        || {
            let got = replay(&store.committed());
            format!(
                "{what}: the replica has {} rows, the table {}",
                got.len(),
                want.len()
            )
        },
    )
    .await;
    want
}

/// The rows that flat change records leave when applied in order: upserts by id, deletes.
pub(crate) fn replay(records: &[Value]) -> BTreeMap<i64, (String, String)> {
    let mut rows = BTreeMap::new();
    for r in records {
        let id = r["id"].as_i64().expect("an id");
        if r["__deleted"] == Value::Bool(true) {
            rows.remove(&id);
        } else {
            let body = r["body"].as_str().unwrap_or_default().to_owned();
            let amount = r["amount"].as_str().unwrap_or_default().to_owned();
            rows.insert(id, (body, amount));
        }
    }
    rows
}

/// The source of `f` (flat records, chunks of 97 rows, a status every 500 ms), as `tune` makes
/// it.
pub(crate) fn source(
    f: &Fixture,
    tune: impl FnOnce(PostgresCdcSourceBuilder) -> PostgresCdcSourceBuilder,
) -> PostgresCdcSource {
    tune(
        PostgresCdcSource::builder(&f.cdc_url, &f.name, &f.name)
            .envelope(Envelope::Flat)
            .chunk_rows(97)
            .status_interval(Duration::from_millis(500)),
    )
    .build()
    .unwrap()
}

/// `source` into an exactly-once sink committing into `store`, checkpoints every
/// `interval` into `backend`; the sink waits `pace` per batch.
pub(crate) fn job(
    name: &str,
    source: PostgresCdcSource,
    backend: &MemoryStateBackend,
    store: &TxnStore<Value>,
    interval: Duration,
    pace: Duration,
) -> Job {
    job_with(name, source, (1, 1), backend, store, interval, pace)
}

/// Like `job`, with `readers` source subtasks and the changes keyed by id to two sink
/// subtasks (each key's changes reach one sink in order).
pub(crate) fn job_wide(
    name: &str,
    source: PostgresCdcSource,
    readers: usize,
    backend: &MemoryStateBackend,
    store: &TxnStore<Value>,
    interval: Duration,
    pace: Duration,
) -> Job {
    job_with(name, source, (readers, 2), backend, store, interval, pace)
}

/// `source` with `subtasks.0` subtasks into `subtasks.1` exactly-once sinks (keyed by id
/// when more than one).
fn job_with(
    name: &str,
    source: PostgresCdcSource,
    subtasks: (usize, usize),
    backend: &MemoryStateBackend,
    store: &TxnStore<Value>,
    interval: Duration,
    pace: Duration,
) -> Job {
    let store = store.clone();
    let (readers, sinks) = subtasks;
    let stream = Pipeline::new(name)
        .checkpointing(CheckpointConfig::new(interval, Arc::new(backend.clone())))
        .batch_size(100)
        .source("cdc", readers, move |_| source.clone());
    let stream = if sinks > 1 {
        stream.key_by(|v: &Value| v["id"].as_i64(), sinks)
    } else {
        stream
    };
    stream
        .sink("txn", sinks, move |i| {
            TransactionalSink::new(store.clone(), i).pace(pace)
        })
        .unwrap()
}

/// Inserts, updates and deletes on `table`, `rounds` transactions of three statements each;
/// every value written is unique (`w{round}`), so a change that arrived twice is seen.
pub(crate) async fn write(url: String, table: String, from: i64, rounds: i64) {
    let mut c = PgConnection::connect(&url).await.unwrap();
    for r in from..from + rounds {
        let mut tx = c.begin().await.unwrap();
        for sql in [
            format!(
                "INSERT INTO {table} (id, body, amount) VALUES ({}, 'w{r}', {r}.5)",
                100_000 + r
            ),
            format!(
                "UPDATE {table} SET body = 'w{r}u', amount = amount + 1 WHERE id = {}",
                1 + (r * 7) % 300
            ),
            format!("DELETE FROM {table} WHERE id = {}", 301 + r),
        ] {
            sqlx::query(&sql).execute(&mut *tx).await.unwrap();
        }
        tx.commit().await.unwrap();
    }
}

/// Every committed change once: no two committed records are equal (every value written is
/// unique).
pub(crate) fn assert_no_duplicates(records: &[Value]) {
    let mut seen = std::collections::HashSet::new();
    for r in records {
        assert!(seen.insert(r.to_string()), "arrived twice: {r}");
    }
}

/// An LSN's text as a number.
pub(crate) fn lsn(s: &str) -> u64 {
    let (a, b) = s.split_once('/').unwrap();
    (u64::from_str_radix(a, 16).unwrap() << 32) | u64::from_str_radix(b, 16).unwrap()
}
