//! SQL sink throughput next to raw sqlx loops with the same batch size (same run): multi-row
//! INSERT ... VALUES on PostgreSQL, MariaDB and SQLite, UNNEST and COPY on PostgreSQL.
//! Needs `dev/services up postgres mariadb`.
//! `cargo bench -p rivus-connector-jdbc --bench write`.

use std::time::Instant;

use rivus_connector_jdbc::{JdbcSink, PgMethod, RowChange};
use rivus_sdk::bulk::BulkConfig;
use rivus_sdk::prelude::*;
use rivus_testkit::bench::{compare, rounds};
use rivus_testkit::services::{unique_name, Service};
use rivus_testkit::SequenceSource;
use sqlx::{Connection, Executor};

const BATCH: usize = 1000;
const TEXT: &str =
    "a fairly ordinary line of text of about eighty bytes, as a log message would be";

#[derive(Debug, Clone, Copy, PartialEq)]
enum Method {
    Values,
    Unnest,
    Copy,
}

async fn create(url: &str, table: &str) {
    run(
        url,
        &format!("CREATE TABLE {table} (id BIGINT NOT NULL, v VARCHAR(100) NOT NULL)"),
    )
    .await;
}

/// Drops a measured table: rounds of a million rows add up to gigabytes on the dev servers.
async fn drop_table(url: &str, table: &str) {
    run(url, &format!("DROP TABLE {table}")).await;
}

async fn run(url: &str, sql: &str) {
    if url.starts_with("postgres") {
        let mut c = sqlx::PgConnection::connect(url).await.unwrap();
        c.execute(sqlx::raw_sql(sql)).await.unwrap();
    } else if url.starts_with("mysql") {
        let mut c = sqlx::MySqlConnection::connect(url).await.unwrap();
        c.execute(sqlx::raw_sql(sql)).await.unwrap();
    } else {
        let opts: sqlx::sqlite::SqliteConnectOptions = url.parse().unwrap();
        let mut c = sqlx::SqliteConnection::connect_with(
            &opts
                .create_if_missing(true)
                .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal),
        )
        .await
        .unwrap();
        c.execute(sqlx::raw_sql(sql)).await.unwrap();
    }
}

async fn raw(url: &str, n: u64, method: Method) -> f64 {
    let table = unique_name("raw").replace('-', "_");
    create(url, &table).await;
    let chunks: Vec<Vec<u64>> = (0..n)
        .collect::<Vec<_>>()
        .chunks(BATCH)
        .map(<[u64]>::to_vec)
        .collect();
    let t = Instant::now();
    if url.starts_with("postgres") {
        let mut c = sqlx::PgConnection::connect(url).await.unwrap();
        for chunk in &chunks {
            match method {
                Method::Values => {
                    let values: Vec<String> = (0..chunk.len())
                        .map(|i| format!("(${}, ${})", 2 * i + 1, 2 * i + 2))
                        .collect();
                    let sql = format!("INSERT INTO {table} (id, v) VALUES {}", values.join(", "));
                    let mut q = sqlx::query(&sql);
                    for id in chunk {
                        q = q.bind(*id as i64).bind(TEXT);
                    }
                    q.execute(&mut c).await.unwrap();
                }
                Method::Unnest => {
                    let ids: Vec<i64> = chunk.iter().map(|i| *i as i64).collect();
                    let vs: Vec<&str> = chunk.iter().map(|_| TEXT).collect();
                    sqlx::query(&format!(
                        "INSERT INTO {table} (id, v) SELECT * FROM UNNEST($1::int8[], $2::text[])"
                    ))
                    .bind(ids)
                    .bind(vs)
                    .execute(&mut c)
                    .await
                    .unwrap();
                }
                Method::Copy => {
                    let mut data = Vec::with_capacity(chunk.len() * 100);
                    for id in chunk {
                        data.extend_from_slice(format!("{id},\"{TEXT}\"\n").as_bytes());
                    }
                    let mut copy = c
                        .copy_in_raw(&format!("COPY {table} (id, v) FROM STDIN (FORMAT csv)"))
                        .await
                        .unwrap();
                    copy.send(data).await.unwrap();
                    copy.finish().await.unwrap();
                }
            }
        }
    } else {
        macro_rules! values_loop {
            ($c:expr) => {
                for chunk in &chunks {
                    let values: Vec<&str> = chunk.iter().map(|_| "(?, ?)").collect();
                    let sql = format!("INSERT INTO {table} (id, v) VALUES {}", values.join(", "));
                    let mut q = sqlx::query(&sql);
                    for id in chunk {
                        q = q.bind(*id as i64).bind(TEXT);
                    }
                    q.execute(&mut $c).await.unwrap();
                }
            };
        }
        if url.starts_with("mysql") {
            let mut c = sqlx::MySqlConnection::connect(url).await.unwrap();
            values_loop!(c);
        } else {
            let mut c = sqlx::SqliteConnection::connect(url).await.unwrap();
            values_loop!(c);
        }
    }
    let rate = n as f64 / t.elapsed().as_secs_f64();
    drop_table(url, &table).await;
    rate
}

async fn rivus(url: &str, n: u64, method: Method) -> f64 {
    let table = unique_name("rivus").replace('-', "_");
    create(url, &table).await;
    let sink = JdbcSink::builder(url, &table)
        .postgres_method(match method {
            Method::Values => PgMethod::Values,
            Method::Unnest => PgMethod::Unnest,
            Method::Copy => PgMethod::Copy,
        })
        .bulk(BulkConfig {
            max_actions: BATCH,
            max_bytes: 0,
            concurrent_requests: 1,
            ..BulkConfig::default()
        })
        .columns(["id", "v"])
        .build(|id: &u64| Ok(RowChange::WriteValues(vec![(*id).into(), TEXT.into()])))
        .unwrap();
    let job = Pipeline::new("bench-jdbc")
        .source("seq", 1, |i| {
            SequenceSource::new(i, 1, Some(n), Default::default())
        })
        .sink("table", 1, |_| sink.clone())
        .unwrap();
    let t = Instant::now();
    job.run().await.unwrap();
    let rate = n as f64 / t.elapsed().as_secs_f64();
    drop_table(url, &table).await;
    rate
}

fn main() {
    let n: u64 = std::env::var("RIVUS_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sqlite = format!("sqlite:{}", dir.path().join("bench.db").display());
    let targets = [
        ("postgres VALUES", Service::Postgres.url(), Method::Values),
        ("postgres UNNEST", Service::Postgres.url(), Method::Unnest),
        ("postgres COPY", Service::Postgres.url(), Method::Copy),
        ("mariadb VALUES", Service::MySql.url(), Method::Values),
        ("sqlite VALUES", sqlite, Method::Values),
    ];
    // RIVUS_BENCH_FILTER=sqlite runs the targets whose label contains it.
    for (name, url, method) in &targets {
        compare(
            &format!("{name}: {n} rows of ~90 B, batches of {BATCH}, one batch in flight"),
            "rows/s",
            rounds(5),
            |_| rt.block_on(raw(url, n, *method)),
            |_| rt.block_on(rivus(url, n, *method)),
        );
    }
}
