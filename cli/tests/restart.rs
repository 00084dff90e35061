//! A job heals itself: Kafka → PostgreSQL exactly-once while PostgreSQL is restarted twice.
//! The job fails each time (its prepared transaction's connection is gone), restarts by itself
//! from its newest completed checkpoint, and ends with every record in the table exactly once.
//! Alone in its file: no other test runs while PostgreSQL is down.

#[path = "support/http.rs"]
mod http;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rivus_testkit::services::{require, unique_name, Service};

#[path = "support/run.rs"]
mod run;
use run::Succeeds;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let file = dir.join(name);
    std::fs::write(&file, text).unwrap();
    file.to_str().unwrap().to_owned()
}

async fn rows(pg: &mut sqlx::PgConnection, table: &str) -> i64 {
    sqlx::query_scalar::<_, i64>(&format!("SELECT COUNT(*) FROM {table}"))
        .fetch_one(pg)
        .await
        .unwrap_or(0)
}

/// The Prometheus text served on `port`.
fn scrape(port: u16) -> String {
    http::metrics(port).expect("the job serves its metrics")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_to_postgres_restarts_itself_across_two_database_restarts() {
    use sqlx::Connection;
    let (Some(kafka), Some(pg_url)) = (require(Service::Kafka), require(Service::Postgres)) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let topic = unique_name("heal");
    let table = unique_name("heal").replace('-', "_");
    // RIVUS_HEAL_RECORDS: the 2,000,000 for a full run.
    let n: u64 = std::env::var("RIVUS_HEAL_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400_000);

    let produce = write(
        dir.path(),
        "produce.toml",
        &format!(
            "name = \"produce\"\n[source]\ntype = \"generator\"\ncount = {n}\n\
             [sink]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopic = \"{topic}\"\n"
        ),
    );
    Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["run", &produce])
        .current_dir(dir.path())
        .succeeds();

    // No key in the table: a record written twice would be a second row.
    let job = write(
        dir.path(),
        "heal.toml",
        &format!(
            "name = \"heal\"\n[checkpoint]\ninterval = \"300ms\"\ndir = \"state\"\n\
             [restart]\nstrategy = \"exponential-delay\"\ninitial_delay = \"200ms\"\n\
             max_delay = \"2s\"\n\
             [source]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopics = [\"{topic}\"]\n\
             start = \"earliest\"\nbounded = true\n\
             [sink]\ntype = \"jdbc\"\nurl = \"{pg_url}\"\ntable = \"{table}\"\n\
             exactly_once = true\n\
             setup = \"CREATE TABLE IF NOT EXISTS {table} (id BIGINT, \\\"user\\\" TEXT, \
             amount NUMERIC, status TEXT, ts BIGINT)\"\n"
        ),
    );
    let mut pg = sqlx::PgConnection::connect(&pg_url).await.unwrap();
    let started = Instant::now();
    let port = http::free_port();
    let metrics_addr = format!("127.0.0.1:{port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["run", &job, "--status-interval", "1s"])
        .args(["--metrics-addr", &metrics_addr])
        .current_dir(dir.path())
        .env("RUST_LOG", "warn,rivus::status=info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut recoveries = Vec::new();
    for bounce in 1..=2 {
        // Wait for progress since the last restart, then restart PostgreSQL under the job.
        let before = rows(&mut pg, &table).await;
        let deadline = Instant::now() + Duration::from_secs(120);
        while rows(&mut pg, &table).await < before + 20_000 {
            assert!(Instant::now() < deadline, "bounce {bounce}: no progress");
            assert!(
                child.try_wait().unwrap().is_none(),
                "bounce {bounce}: the job ended before PostgreSQL was restarted \
                 (make the input larger)"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        drop(pg);
        rivus_testkit::restart::bounce("postgres", Duration::from_secs(1)).await;
        let back = Instant::now();
        pg = sqlx::PgConnection::connect(&pg_url).await.unwrap();
        let at = rows(&mut pg, &table).await;
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if rows(&mut pg, &table).await > at || child.try_wait().unwrap().is_some() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "bounce {bounce}: no rows after the restart"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        recoveries.push(back.elapsed());
        if bounce == 1 {
            // Mid-stream, after the first restart: it is counted in the metrics.
            assert!(child.try_wait().unwrap().is_none(), "still running");
            let text = scrape(port);
            let restarts: f64 = text
                .lines()
                .find(|l| l.starts_with("rivus_job_restarts_total{job=\"heal\"}"))
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0);
            assert!(restarts >= 1.0, "rivus_job_restarts_total: {text}");
        }
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the job healed: {stdout}\n{stderr}");
    eprintln!(
        "healed across two PostgreSQL restarts in {:.1}s; first rows after each restart came \
         {recoveries:?} after PostgreSQL was back",
        started.elapsed().as_secs_f64()
    );
    let restarts = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("restarts"))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|r| r.parse::<u32>().ok())
        .unwrap_or(0);
    assert!(restarts >= 2, "the summary shows the restarts: {stdout}");
    assert!(
        stderr.contains("restarting from the newest completed checkpoint"),
        "{stderr}"
    );
    let summary: (i64, i64, i64, i64) = sqlx::query_as(&format!(
        "SELECT COUNT(*), COUNT(DISTINCT id), MIN(id), MAX(id) FROM {table}"
    ))
    .fetch_one(&mut pg)
    .await
    .unwrap();
    let n = n as i64;
    assert_eq!(summary, (n, n, 0, n - 1), "every record exactly once");
    let prepared: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM pg_prepared_xacts")
        .fetch_one(&mut pg)
        .await
        .unwrap();
    assert_eq!(prepared, 0, "no prepared transaction left");
}
