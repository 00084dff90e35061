//! Graphs against a real PostgreSQL:
//! - a router sending records by a condition into two tables (both exactly-once): their union
//!   is the input, each holds only its matches, each record once;
//! - a branch whose server freezes: a generator fanned out to two tables, one straight, one
//!   through a proxy that lets nothing pass for 30 s (connections stay open, as with a frozen
//!   server). While it is frozen the other branch stops too (back-pressure reaches the source
//!   they share), the job's memory stays where it was, and the status API names the frozen
//!   branch's sink as the busy one; after the thaw both tables hold every record once.

#[path = "support/http.rs"]
mod http;
#[path = "support/run.rs"]
mod run;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rivus_testkit::fault_proxy::FaultProxy;
use rivus_testkit::services::{require, unique_name, Service};
use serde_json::Value;
use sqlx::{Connection, Row};

/// The generator's amount of record `n` (`cli/src/sections/generator.rs`).
fn amount(n: u64) -> f64 {
    (n.wrapping_mul(7919) % 100_000) as f64 / 100.0
}

/// A `jdbc` sink writing `table` exactly-once, reading `input`.
fn sink(name: &str, input: &str, url: &str, table: &str) -> String {
    format!(
        "[sinks.{name}]\ntype = \"jdbc\"\ninputs = [\"{input}\"]\nurl = \"{url}\"\n\
         table = \"{table}\"\nexactly_once = true\n\
         setup = \"CREATE TABLE IF NOT EXISTS {table} (id BIGINT NOT NULL, \\\"user\\\" TEXT, \
         amount DOUBLE PRECISION, status TEXT, ts BIGINT)\"\n"
    )
}

/// The ids in `table`, sorted, repeats kept.
async fn ids(pg: &str, table: &str) -> Vec<u64> {
    let mut c = sqlx::PgConnection::connect(pg).await.unwrap();
    let rows = sqlx::query(&format!("SELECT id FROM {table} ORDER BY id"))
        .fetch_all(&mut c)
        .await
        .unwrap();
    rows.iter().map(|r| r.get::<i64, _>(0) as u64).collect()
}

async fn drop_tables(pg: &str, tables: &[&str]) {
    let mut c = sqlx::PgConnection::connect(pg).await.unwrap();
    for t in tables {
        sqlx::query(&format!("DROP TABLE IF EXISTS {t}"))
            .execute(&mut c)
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_splits_records_between_two_postgres_tables_by_a_condition() {
    let Some(pg) = require(Service::Postgres) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let u = unique_name("routed").replace('-', "_");
    let (big, small) = (format!("{u}_big"), format!("{u}_small"));
    let n = 20_000u64;
    let file = dir.path().join("route.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"{u}\"\nparallelism = 2\n[checkpoint]\ninterval = \"300ms\"\ndir = \"state\"\n\
             [sources.orders]\ntype = \"generator\"\ncount = {n}\n\
             [transforms.by_amount]\ntype = \"route\"\ninputs = [\"orders\"]\n\
             route.big = {{ field = \"amount\", op = \">=\", value = 500 }}\n{}{}",
            sink("big", "by_amount.big", &pg, &big),
            sink("small", "by_amount._unmatched", &pg, &small),
        ),
    )
    .unwrap();
    run::rivus_succeeds(dir.path(), &["run", file.to_str().unwrap()]);
    let (got_big, got_small) = (ids(&pg, &big).await, ids(&pg, &small).await);
    let want =
        |is_big: bool| -> Vec<u64> { (0..n).filter(|i| (amount(*i) >= 500.0) == is_big).collect() };
    assert_eq!(got_big.len(), want(true).len(), "{big}: rows");
    assert!(got_big == want(true), "{big}: exactly the records >= 500");
    assert_eq!(got_small.len(), want(false).len(), "{small}: rows");
    assert!(got_small == want(false), "{small}: exactly the rest");
    drop_tables(&pg, &[&big, &small]).await;
}

/// Kilobytes of resident memory of process `pid`.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn status(port: u16) -> Option<Value> {
    match http::request(port, "GET", "/api/status", None)? {
        (200, body) => serde_json::from_str(&body).ok(),
        _ => None,
    }
}

/// `flows.NAME.records` of a status.
fn records(v: &Value, name: &str) -> u64 {
    v["flows"][name]["records"].as_u64().unwrap_or(0)
}

fn busy(v: &Value, name: &str) -> f64 {
    v["flows"][name]["busy"].as_f64().unwrap_or(-1.0)
}

/// Polls the status until `ready` holds (at most `secs`), failing with `what` and the job's
/// output when the job ended first.
fn wait_for(
    job: &mut Child,
    port: u16,
    secs: u64,
    what: &str,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = status(port) {
            if ready(&v) {
                return v;
            }
            assert!(Instant::now() < deadline, "{what}: {v:#}");
        }
        if let Some(code) = job.try_wait().unwrap() {
            panic!("{what}: the job ended first ({code})");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_branch_holds_back_the_other_keeps_memory_bounded_and_loses_nothing() {
    let Some(pg) = require(Service::Postgres) else {
        return;
    };
    let (proxy, frozen_url) = FaultProxy::in_front_of(&pg).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let u = unique_name("frozen").replace('-', "_");
    let (fast, slow) = (format!("{u}_fast"), format!("{u}_slow"));
    let n = 120_000u64;
    let port = http::free_port();
    let file = dir.path().join("frozen.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"{u}\"\n[checkpoint]\ninterval = \"500ms\"\ndir = \"state\"\n\
             [sources.orders]\ntype = \"generator\"\ncount = {n}\nrate = 10000\n{}{}",
            sink("fast", "orders", &pg, &fast),
            sink("slow", "orders", &frozen_url, &slow),
        ),
    )
    .unwrap();
    let mut job = Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["run", file.to_str().unwrap(), "--http"])
        .arg(format!("127.0.0.1:{port}"))
        .current_dir(dir.path())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = job.id();
    wait_for(&mut job, port, 60, "both branches write", |v| {
        records(v, "fast") > 10_000 && records(v, "slow") > 10_000
    });

    proxy.set_blackhole(true);
    let frozen_at = Instant::now();
    // Whatever was on its way when the server froze settles within a few seconds.
    std::thread::sleep(Duration::from_secs(5));
    let (early, rss_early) = (status(port).expect("status"), rss_kib(pid));
    while frozen_at.elapsed() < Duration::from_secs(28) {
        std::thread::sleep(Duration::from_millis(500));
    }
    let (late, rss_late) = (status(port).expect("status"), rss_kib(pid));
    proxy.set_blackhole(false);

    // The other branch was held back with the frozen one: from 5 s into the freeze to 28 s,
    // at 10 000 records/s, it would have taken 230 000 more.
    let (fast_early, fast_late) = (records(&early, "fast"), records(&late, "fast"));
    assert!(
        fast_late - fast_early <= 5_000,
        "the unfrozen branch kept going: {fast_early} → {fast_late} records"
    );
    assert!(
        records(&late, "orders") - records(&early, "orders") <= 5_000,
        "the source kept reading: {late:#}"
    );
    // Memory stayed where it was.
    assert!(
        rss_late <= rss_early + 16 * 1024,
        "memory grew while frozen: {rss_early} KiB → {rss_late} KiB"
    );
    // The status names the frozen branch.
    assert!(
        busy(&late, "slow") >= 0.9 && busy(&late, "fast") <= 0.2,
        "the frozen sink is the busy one: slow {}, fast {}",
        busy(&late, "slow"),
        busy(&late, "fast")
    );
    eprintln!(
        "frozen 28 s: fast {fast_early} → {fast_late}, RSS {rss_early} → {rss_late} KiB, \
         busy slow {} fast {}",
        busy(&late, "slow"),
        busy(&late, "fast")
    );

    let out = {
        let deadline = Instant::now() + Duration::from_secs(120);
        while job.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "the job finishes after the thaw");
            std::thread::sleep(Duration::from_millis(200));
        }
        job.wait_with_output().unwrap()
    };
    assert!(
        out.status.success(),
        "{}{}",
        run::text(&out.stdout),
        run::text(&out.stderr)
    );
    let all: Vec<u64> = (0..n).collect();
    for table in [&fast, &slow] {
        let got = ids(&pg, table).await;
        assert_eq!(got.len() as u64, n, "{table}: rows");
        assert!(got == all, "{table}: every record once");
    }
    drop_tables(&pg, &[&fast, &slow]).await;
}
