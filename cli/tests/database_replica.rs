//! A whole database in one job: `examples/postgres-database-replica.toml` run by the `rivus`
//! command against the real PostgreSQL — two tables of one publication streamed into a
//! replica schema the sink fills table by table (each created from the source's column types
//! and key), a column added to each source table while the job runs, a third table created
//! and added to the publication while the job streams (its rows read, then its changes
//! streamed), a writer inserting, updating and deleting throughout, and the job SIGKILLed
//! once while the snapshot is read and once while the stream runs. Afterwards every replica
//! table equals its source (`EXCEPT` both ways, every column).

#[path = "support/cdc.rs"]
mod cdc;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rivus_testkit::services::{require, Service};
use sqlx::{Connection, PgConnection};

use cdc::{count, rivus, stop, wait_rows, Cleanup};

/// Rows of the orders table at the start (`RIVUS_CDC_ROWS`).
fn rows() -> i64 {
    cdc::env_count("RIVUS_CDC_ROWS", 20_000)
}

async fn exec(c: &mut PgConnection, sql: &str) {
    sqlx::query(sql)
        .execute(&mut *c)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// Inserts, updates and deletes on both tables, a transaction every few milliseconds; at
/// round `widen_at / 2` a table `…_later` of 3 000 rows joins the publication, and later
/// rounds change it too; at round `widen_at` each first table gains a column `email`, which
/// later rounds fill.
fn writer(
    pg: String,
    name: String,
    widen_at: u64,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut c = PgConnection::connect(&pg).await.unwrap();
        let (orders, customers) = (format!("{name}_orders"), format!("{name}_customers"));
        let later = format!("{name}_later");
        for r in 0.. {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            if r == widen_at / 2 {
                for sql in [
                    format!("CREATE TABLE {later} (id INT PRIMARY KEY, v BIGINT, tag TEXT)"),
                    format!(
                        "INSERT INTO {later} SELECT i, i, 't' || i FROM generate_series(1, 3000) i"
                    ),
                    format!("GRANT SELECT ON {later} TO rivus_cdc"),
                    format!("ALTER PUBLICATION {name} ADD TABLE {later}"),
                ] {
                    exec(&mut c, &sql).await;
                }
            }
            if r == widen_at {
                exec(
                    &mut c,
                    &format!("ALTER TABLE {orders} ADD COLUMN email TEXT"),
                )
                .await;
                exec(
                    &mut c,
                    &format!("ALTER TABLE {customers} ADD COLUMN email TEXT"),
                )
                .await;
            }
            let widened = r >= widen_at;
            let mut tx = c.begin().await.unwrap();
            let insert = if widened {
                format!(
                    "INSERT INTO {orders} (id, customer, amount, email) \
                     VALUES ({}, {}, {r}.25, 'o{r}@x')",
                    1_000_000 + r,
                    r % 500
                )
            } else {
                format!(
                    "INSERT INTO {orders} (id, customer, amount) VALUES ({}, {}, {r}.25)",
                    1_000_000 + r,
                    r % 500
                )
            };
            let customer = if widened {
                format!(
                    "UPDATE {customers} SET name = 'c{r}', email = 'c{r}@x' WHERE id = {}",
                    r % 500
                )
            } else {
                format!(
                    "UPDATE {customers} SET name = 'c{r}' WHERE id = {}",
                    r % 500
                )
            };
            for sql in [
                insert,
                format!(
                    "UPDATE {orders} SET amount = amount + 1 WHERE id = {}",
                    1 + (r * 7919) % 5_000
                ),
                format!("DELETE FROM {orders} WHERE id = {}", 5_001 + r),
                customer,
            ]
            .into_iter()
            .chain((r > widen_at / 2).then(|| {
                format!(
                    "UPDATE {later} SET v = v + 1, tag = 'u{r}' WHERE id = {}",
                    1 + (r * 31) % 3000
                )
            }))
            .chain(
                (r > widen_at / 2 && r % 5 == 0)
                    .then(|| format!("DELETE FROM {later} WHERE id = {}", 1 + (r * 17) % 3000)),
            ) {
                sqlx::query(&sql).execute(&mut *tx).await.unwrap();
            }
            tx.commit().await.unwrap();
            done.store(r + 1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
}

/// Rows of `a` that `b` lacks (every column compared).
async fn missing(c: &mut PgConnection, a: &str, b: &str) -> i64 {
    sqlx::query_scalar(&format!(
        "SELECT count(*) FROM (SELECT * FROM {a} EXCEPT SELECT * FROM {b}) d"
    ))
    .fetch_one(&mut *c)
    .await
    .unwrap_or(-1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_replicated_by_one_job_follows_added_columns_through_kill_nine() {
    // The job reads `RIVUS_PG_CDC_URL` itself; required here so that a missing server fails.
    let (Some(pg), Some(_cdc)) = (require(Service::Postgres), require(Service::PostgresCdc)) else {
        return;
    };
    let n = rows();
    let (name, mut cleanup) = Cleanup::table(&pg, "dbrep", false);
    let (orders, customers) = (format!("{name}_orders"), format!("{name}_customers"));
    let schema = format!("{name}_replica");
    let later = format!("{name}_later");
    cleanup.tables = vec![
        orders.clone(),
        customers.clone(),
        later.clone(),
        format!("{schema}.{orders}"),
        format!("{schema}.{customers}"),
        format!("{schema}.{later}"),
    ];
    let mut db = PgConnection::connect(&pg).await.unwrap();
    for sql in [
        format!(
            "CREATE TABLE {orders} (id BIGINT PRIMARY KEY, customer INT, \
             amount NUMERIC(10,2), at TIMESTAMPTZ NOT NULL DEFAULT now(), note VARCHAR(20))"
        ),
        format!(
            "INSERT INTO {orders} (id, customer, amount, note) SELECT i, i % 500, i / 100.0, \
             'n' || i FROM generate_series(1, {n}) i"
        ),
        format!("CREATE TABLE {customers} (id INT PRIMARY KEY, name TEXT)"),
        format!("INSERT INTO {customers} SELECT i, 'c' || i FROM generate_series(0, 499) i"),
        format!("GRANT SELECT ON {orders}, {customers} TO rivus_cdc"),
        format!("CREATE PUBLICATION {name} FOR TABLE {orders}, {customers}"),
    ] {
        exec(&mut db, &sql).await;
    }
    let example =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/postgres-database-replica.toml");
    let text = std::fs::read_to_string(example)
        .unwrap()
        .replace(
            "name = \"postgres-database-replica\"",
            &format!("name = \"{name}\""),
        )
        .replace("interval = \"1s\"", "interval = \"300ms\"")
        .replace("target/examples/postgres-database-replica", "state")
        .replace("\"shop\"", &format!("\"{name}\""))
        .replace("\"rivus_shop_replica\"", &format!("\"{name}\""))
        .replace(
            "\"replica.{source.table}\"",
            &format!("\"{schema}.{{source.table}}\""),
        );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("job.toml");
    std::fs::write(&file, text).unwrap();

    let (done, halt) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let writing = writer(
        pg.clone(),
        name.clone(),
        400,
        Arc::clone(&halt),
        Arc::clone(&done),
    );
    let replica_orders = format!("{schema}.{orders}");
    let replica_customers = format!("{schema}.{customers}");
    let replica_later = format!("{schema}.{later}");

    // Killed while the snapshot is read.
    let mut job = rivus(dir.path(), &file, "run1", &[]);
    wait_rows(
        &mut job,
        &mut db,
        &replica_orders,
        n / 3,
        "the replica did not fill",
    )
    .await;
    job.kill();
    // Killed while the stream runs, after the columns were added.
    let mut job = rivus(dir.path(), &file, "run2", &[]);
    let deadline = Instant::now() + Duration::from_secs(180);
    let has_email = format!(
        "SELECT count(*) FROM information_schema.columns WHERE table_schema = '{schema}' \
         AND column_name = 'email'"
    );
    loop {
        let widened: i64 = sqlx::query_scalar(&has_email)
            .fetch_one(&mut db)
            .await
            .unwrap();
        if widened == 2
            && done.load(Ordering::SeqCst) > 500
            && count(&mut db, &replica_later).await > 0
        {
            break;
        }
        assert!(job.child().try_wait().unwrap().is_none(), "the job ended");
        assert!(
            Instant::now() < deadline,
            "the replica did not gain the columns"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    job.kill();
    let job = rivus(dir.path(), &file, "run3", &[]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    halt.store(true, Ordering::SeqCst);
    writing.await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let gaps = [
            missing(&mut db, &orders, &replica_orders).await,
            missing(&mut db, &replica_orders, &orders).await,
            missing(&mut db, &customers, &replica_customers).await,
            missing(&mut db, &replica_customers, &customers).await,
            missing(&mut db, &later, &replica_later).await,
            missing(&mut db, &replica_later, &later).await,
        ];
        if gaps == [0; 6] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the replica differs (missing/extra of orders, customers, later): {gaps:?}; the \
             killed run's log ends:\n{}\nthe last run's log ends:\n{}",
            cdc::log_tail(dir.path(), "run2", 60),
            cdc::log_tail(dir.path(), "run3", 40)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The replica has the source's types and key, not types guessed from JSON.
    let types: Vec<(String, String)> = sqlx::query_as(&format!(
        "SELECT attname::text, format_type(atttypid, atttypmod) FROM pg_attribute \
         WHERE attrelid = '{replica_orders}'::regclass AND attnum > 0 AND NOT attisdropped \
         ORDER BY attnum"
    ))
    .fetch_all(&mut db)
    .await
    .unwrap();
    let expected = [
        ("id", "bigint"),
        ("customer", "integer"),
        ("amount", "numeric(10,2)"),
        ("at", "timestamp with time zone"),
        ("note", "character varying(20)"),
        ("email", "text"),
    ];
    let types: Vec<(&str, &str)> = types
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    assert_eq!(types, expected);
    let key: Vec<String> = sqlx::query_scalar(&format!(
        "SELECT a.attname::text FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid \
         AND a.attnum = ANY(i.indkey) WHERE i.indrelid = '{replica_orders}'::regclass \
         AND i.indisprimary"
    ))
    .fetch_all(&mut db)
    .await
    .unwrap();
    assert_eq!(key, ["id"]);
    stop(job, dir.path(), "run3");
    exec(&mut db, &format!("DROP SCHEMA IF EXISTS {schema} CASCADE")).await;
}
