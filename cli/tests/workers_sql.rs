//! Exactly-once Kafka → SQL across workers: three `rivus run --worker` processes read one
//! 12-partition topic in group mode into a PostgreSQL or MariaDB table with
//! `exactly_once = true`; the source's positions commit in the sink's transactions (a
//! positions table). One worker is SIGKILLed mid-stream and a fourth joins later: its
//! partitions resume from the table on the others, and every id is in the table exactly once
//! (the table has no key: a record written twice would be a second row).

#[path = "support/http.rs"]
mod http;
#[path = "support/workers.rs"]
mod support;

use std::process::Child;
use std::time::{Duration, Instant};

use rivus_testkit::services::{require, unique_name, Service};
use support::*;

/// Rows and distinct ids in `table`, and the positions rows of the job's sink.
async fn counts(url: &str, table: &str, positions: &str, job: &str) -> Option<(i64, i64, i64)> {
    use sqlx::Connection;
    let rows = format!("SELECT COUNT(*), COUNT(DISTINCT id) FROM {table}");
    let kept = format!("SELECT COUNT(*) FROM {positions} WHERE sink LIKE '{job}/%'");
    if url.starts_with("postgres") {
        let mut db = sqlx::PgConnection::connect(url).await.ok()?;
        let (r, d): (i64, i64) = sqlx::query_as(&rows).fetch_one(&mut db).await.ok()?;
        let (k,): (i64,) = sqlx::query_as(&kept).fetch_one(&mut db).await.ok()?;
        Some((r, d, k))
    } else {
        let mut db = sqlx::MySqlConnection::connect(url).await.ok()?;
        let (r, d): (i64, i64) = sqlx::query_as(&rows).fetch_one(&mut db).await.ok()?;
        let (k,): (i64,) = sqlx::query_as(&kept).fetch_one(&mut db).await.ok()?;
        Some((r, d, k))
    }
}

/// The ids in `table` more than once, with their partition and count.
async fn twice(url: &str, table: &str) -> Vec<(i64, i32, i64)> {
    use sqlx::Connection;
    let sql = format!(
        "SELECT id, p, COUNT(*) FROM {table} GROUP BY id, p HAVING COUNT(*) > 1 ORDER BY id \
         LIMIT 20"
    );
    if url.starts_with("postgres") {
        let mut db = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::query_as(&sql).fetch_all(&mut db).await.unwrap()
    } else {
        let mut db = sqlx::MySqlConnection::connect(url).await.unwrap();
        sqlx::query_as(&sql).fetch_all(&mut db).await.unwrap()
    }
}

/// The running workers, SIGKILLed when dropped: a failed assertion leaves no process behind.
struct Workers(Vec<(&'static str, Child)>);

impl Drop for Workers {
    fn drop(&mut self) {
        for (_, w) in &mut self.0 {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

/// One database at a time: three workers each are enough for two cores.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn exactly_once_across_workers(kafka: &str, url: &str, db: &str) {
    let _one = ONE_AT_A_TIME.lock().await;
    let input = unique_name(&format!("eo-{db}"));
    create_topic(kafka, &input).await;
    let table = unique_name(&format!("eo_{db}")).replace('-', "_");
    let positions = unique_name("positions").replace('-', "_");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"{input}\"\n[checkpoint]\ninterval = \"500ms\"\ndir = \"state\"\n\
             [source]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopics = [\"{input}\"]\n\
             properties = {{ \"session.timeout.ms\" = \"6000\", \"heartbeat.interval.ms\" = \"1000\" }}\n\
             [sink]\ntype = \"jdbc\"\nurl = \"{url}\"\ntable = \"{table}\"\nexactly_once = true\n\
             positions_table = \"{positions}\"\n\
             setup = \"CREATE TABLE IF NOT EXISTS {table} (id BIGINT, p INT, pad TEXT)\"\n"
        ),
    )
    .unwrap();
    let n: u64 = 90_000;
    let ports: Vec<(&str, u16)> = ["w1", "w2", "w3", "w4"]
        .into_iter()
        .map(|id| (id, http::free_port()))
        .collect();
    // Each worker's log goes to a file (a pipe nobody reads would block it once full).
    let log_of = |id: &str| dir.path().join(format!("{id}.log"));
    let logs = || -> String {
        ["w1", "w2", "w3", "w4"]
            .iter()
            .map(|id| {
                let text = std::fs::read_to_string(log_of(id)).unwrap_or_default();
                format!("--- {id}:\n{text}")
            })
            .collect()
    };
    let spawn = |id: &str| {
        let port = ports.iter().find(|(w, _)| *w == id).unwrap().1;
        worker_command(dir.path(), &file, id)
            .args(["--http", &format!("127.0.0.1:{port}")])
            .stderr(std::fs::File::create(log_of(id)).unwrap())
            .spawn()
            .unwrap()
    };
    let mut workers = Workers(
        ["w1", "w2", "w3"]
            .into_iter()
            .map(|id| (id, spawn(id)))
            .collect(),
    );
    let (produced, feed) = paced_feed(kafka, &input, n);

    // Mid-stream, once rows flow (so that w2 has written some since its last checkpoint):
    // kill w2 (its open transaction dies with its connections); later w4 joins.
    let deadline = Instant::now() + Duration::from_secs(60);
    while counts(url, &table, &positions, &input)
        .await
        .is_none_or(|(rows, _, _)| rows < 20_000)
    {
        assert!(
            Instant::now() < deadline,
            "{db}: 20 000 rows did not arrive within 60 s; the workers' logs:\n{}",
            logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    workers.0[1].1.kill().unwrap();
    let killed = Instant::now();
    workers.0.remove(1).1.wait().unwrap();
    wait_produced(&produced, 70_000).await;
    workers.0.push(("w4", spawn("w4")));
    feed.await.unwrap();

    let deadline = Instant::now() + Duration::from_secs(120);
    let (rows, distinct, kept) = loop {
        let got = counts(url, &table, &positions, &input).await;
        if let Some((rows, distinct, kept)) = got {
            if distinct as u64 == n {
                break (rows, distinct, kept);
            }
        }
        assert!(
            Instant::now() < deadline,
            "{db}: not every id arrived within 120 s: {got:?}; the workers' logs:\n{}",
            logs()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    eprintln!(
        "kafka → {db} exactly-once workers: {n} records, {rows} rows, every id {:.1} s after \
         the kill",
        killed.elapsed().as_secs_f64()
    );
    assert_eq!(
        rows,
        distinct,
        "{db}: an id written twice: {:?}; the workers' logs:\n{}",
        twice(url, &table).await,
        logs()
    );
    assert_eq!(kept, 12, "{db}: one positions row per partition");
    for (id, _) in &workers.0 {
        let port = ports.iter().find(|(w, _)| w == id).unwrap().1;
        let deadline = Instant::now() + Duration::from_secs(60);
        while !http::metrics(port).is_some_and(|m| m.contains("rivus_kafka_consumer_lag{")) {
            assert!(
                Instant::now() < deadline,
                "{db}: {id} got no partition; the workers' logs:\n{}",
                logs()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    for (_, w) in &workers.0 {
        interrupt(w);
    }
    for (id, w) in std::mem::take(&mut workers.0) {
        let out = w.wait_with_output().unwrap();
        let err = std::fs::read_to_string(log_of(id)).unwrap_or_default();
        assert!(out.status.success(), "{db}: {id}: {err}");
        assert!(
            err.contains("claimed the assigned partitions from the sink's positions table"),
            "{db}: {id} never claimed partitions from the table: {err}"
        );
    }
    // After the graceful stop nothing more was written.
    let (rows_after, _, _) = counts(url, &table, &positions, &input).await.unwrap();
    assert_eq!(rows_after, rows, "{db}: rows after the stop");
}

#[tokio::test]
async fn kafka_to_postgres_exactly_once_across_workers_one_killed() {
    let (Some(kafka), Some(pg)) = (require(Service::Kafka), require(Service::Postgres)) else {
        return;
    };
    exactly_once_across_workers(&kafka, &pg, "postgres").await;
}

#[tokio::test]
async fn kafka_to_mariadb_exactly_once_across_workers_one_killed() {
    let (Some(kafka), Some(my)) = (require(Service::Kafka), require(Service::MySql)) else {
        return;
    };
    exactly_once_across_workers(&kafka, &my, "mariadb").await;
}
