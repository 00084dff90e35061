//! Change-data-capture jobs run by the `rivus` command in tests: the job process (killed,
//! stopped, waited on) and the clean-up of slots, publications and tables.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::{Connection, PgConnection};

/// The number in the environment variable `var`, else `default` (a test's table size).
pub(crate) fn env_count(var: &str, default: i64) -> i64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Rows in `table` (0 before it exists).
pub(crate) async fn count(db: &mut PgConnection, table: &str) -> i64 {
    sqlx::query_scalar::<_, i64>(&format!("SELECT count(*) FROM {table}"))
        .fetch_one(db)
        .await
        .unwrap_or(0)
}

/// Waits (at most 120 s) until `table` holds `rows` rows while `job` runs; the test fails
/// naming `what` otherwise, or when the job ends first.
pub(crate) async fn wait_rows(
    job: &mut Job,
    db: &mut PgConnection,
    table: &str,
    rows: i64,
    what: &str,
) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while count(db, table).await < rows {
        assert!(job.child().try_wait().unwrap().is_none(), "the job ended");
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Cleans up after a test, passed or failed: the slot (a slot keeps WAL forever), the
/// publication and the tables.
pub(crate) struct Cleanup {
    pub pg: String,
    pub name: String,
    pub tables: Vec<String>,
}

impl Cleanup {
    /// A fresh table name from `prefix` (also the slot's and publication's), and its
    /// cleanup: the table, and a `{name}_copy` replica with `replica`.
    pub(crate) fn table(pg: &str, prefix: &str, replica: bool) -> (String, Cleanup) {
        let name = rivus_testkit::services::unique_name(prefix).replace('-', "_");
        let mut tables = vec![name.clone()];
        if replica {
            tables.push(format!("{name}_copy"));
        }
        let cleanup = Cleanup {
            pg: pg.to_owned(),
            name: name.clone(),
            tables,
        };
        (name, cleanup)
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let (pg, name, tables) = (self.pg.clone(), self.name.clone(), self.tables.clone());
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let tables: Vec<&str> = tables.iter().map(String::as_str).collect();
            rt.block_on(clean(&pg, &name, &tables));
        })
        .join();
    }
}

/// Drops the slot (once released), the publication and the tables.
pub(crate) async fn clean(pg: &str, name: &str, tables: &[&str]) {
    let mut c = PgConnection::connect(pg).await.unwrap();
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
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = sqlx::query(&format!("DROP PUBLICATION IF EXISTS {name}"))
        .execute(&mut c)
        .await;
    for t in tables {
        let _ = sqlx::query(&format!("DROP TABLE IF EXISTS {t}"))
            .execute(&mut c)
            .await;
    }
}

/// A running `rivus`, killed if the test ends without stopping it.
pub(crate) struct Job(pub Option<Child>);

impl Job {
    pub(crate) fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("running")
    }

    /// SIGKILL, and wait for the end.
    pub(crate) fn kill(&mut self) {
        let mut c = self.0.take().expect("running");
        c.kill().unwrap();
        c.wait().unwrap();
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `rivus run file` in `dir`, its output in `dir/<label>.log`.
pub(crate) fn rivus(dir: &Path, file: &Path, label: &str, env: &[(&str, &str)]) -> Job {
    let log = std::fs::File::create(dir.join(format!("{label}.log"))).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rivus"));
    cmd.args(["run", file.to_str().unwrap()])
        .current_dir(dir)
        .stdout(Stdio::from(log.try_clone().unwrap()))
        .stderr(Stdio::from(log));
    cmd.env(
        "RUST_LOG",
        "warn,rivus_connector_cdc=info,rivus_connector_delta=info",
    );
    for (k, v) in env {
        cmd.env(k, v);
    }
    Job(Some(cmd.spawn().unwrap()))
}

/// The last `n` lines of the log of the run `label` in `dir`, for a failure's message.
pub(crate) fn log_tail(dir: &Path, label: &str, n: usize) -> String {
    let log = std::fs::read_to_string(dir.join(format!("{label}.log"))).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Asks a job to stop (SIGTERM) and waits for its end (a stop within a minute).
pub(crate) fn stop(mut job: Job, dir: &Path, label: &str) {
    let mut child = job.0.take().expect("running");
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let log = std::fs::read_to_string(dir.join(format!("{label}.log"))).unwrap_or_default();
            assert!(status.success(), "{label} ended with {status}: {log}");
            return;
        }
        assert!(Instant::now() < deadline, "{label} did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until `ready()` holds, failing with `what()` after `secs`; the job must stay up.
pub(crate) async fn wait(
    job: &mut Job,
    secs: u64,
    ready: impl Fn() -> bool,
    what: impl Fn() -> String,
) {
    let child = job.child();
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ready() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the job ended ({status}) while waiting: {}", what());
        }
        assert!(Instant::now() < deadline, "{}", what());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A job file: `postgres-cdc` over publication `publication` through slot `slot` (flat rows),
/// then `transforms` and `sink` (TOML lines), a checkpoint every 300 ms.
pub(crate) fn job_file(
    dir: &Path,
    cdc: &str,
    (publication, slot): (&str, &str),
    parallelism: usize,
    transforms: &str,
    sink: &str,
) -> PathBuf {
    let file = dir.join(format!("{slot}.toml"));
    std::fs::write(
        &file,
        format!(
            "name = \"{slot}\"\nparallelism = {parallelism}\n\
             [checkpoint]\ninterval = \"300ms\"\ndir = \"state-{slot}\"\n\
             [source]\ntype = \"postgres-cdc\"\nurl = \"{cdc}\"\npublication = \"{publication}\"\n\
             slot = \"{slot}\"\nenvelope = \"flat\"\n{transforms}\n[sink]\n{sink}\n"
        ),
    )
    .unwrap();
    file
}

/// Runs `sql` (statements separated by `;`) on PostgreSQL at `url`.
pub(crate) async fn exec(url: &str, sql: &str) {
    use sqlx::Executor;
    let mut c = PgConnection::connect(url).await.unwrap();
    c.execute(sqlx::raw_sql(sql)).await.unwrap();
}

/// Rows of `a` not in `b` and of `b` not in `a`, every column compared (`EXCEPT` both ways).
pub(crate) async fn differences(
    db: &mut PgConnection,
    a: &str,
    b: &str,
    columns: &str,
) -> (i64, i64) {
    let differ = |x: &str, y: &str| {
        format!(
            "SELECT count(*) FROM (SELECT {columns} FROM {x} EXCEPT SELECT {columns} FROM {y}) d"
        )
    };
    let missing: i64 = sqlx::query_scalar(&differ(a, b))
        .fetch_one(&mut *db)
        .await
        .unwrap_or(-1);
    let extra: i64 = sqlx::query_scalar(&differ(b, a))
        .fetch_one(&mut *db)
        .await
        .unwrap_or(-1);
    (missing, extra)
}

/// The newest completed checkpoint's id under `dir` (0 before any).
pub(crate) fn newest_checkpoint(dir: &Path) -> u64 {
    fn walk(dir: &Path, best: &mut u64) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = e.path();
            if path.is_dir() {
                walk(&path, best);
            } else if let Some(id) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix("chk-")?.strip_suffix(".ckpt")?.parse().ok())
            {
                *best = (*best).max(id);
            }
        }
    }
    let mut best = 0;
    walk(dir, &mut best);
    best
}

/// A table `name` with `n` rows, published as `name`, readable by the CDC user.
pub(crate) async fn table(pg: &str, name: &str, n: i64) {
    let mut c = PgConnection::connect(pg).await.unwrap();
    for sql in [
        format!(
            "CREATE TABLE {name} (id INT PRIMARY KEY, body TEXT, amount NUMERIC(10,2), \
             at TIMESTAMPTZ NOT NULL DEFAULT now())"
        ),
        format!(
            "INSERT INTO {name} (id, body, amount) SELECT i, 'row ' || i, i / 100.0 \
             FROM generate_series(1, {n}) i"
        ),
        format!("GRANT SELECT ON {name} TO rivus_cdc"),
        format!("CREATE PUBLICATION {name} FOR TABLE {name}"),
    ] {
        sqlx::query(&sql).execute(&mut c).await.unwrap();
    }
}

/// The table as JSON rows by id (`id`, `body`, `amount` as text, as the records carry them).
pub(crate) async fn table_rows(pg: &str, name: &str) -> BTreeMap<String, (String, String)> {
    let mut c = PgConnection::connect(pg).await.unwrap();
    let rows: Vec<(i32, Option<String>, Option<String>)> = sqlx::query_as(&format!(
        "SELECT id, body, amount::text FROM {name} ORDER BY id"
    ))
    .fetch_all(&mut c)
    .await
    .unwrap();
    rows.into_iter()
        .map(|(id, b, a)| {
            (
                id.to_string(),
                (b.unwrap_or_default(), a.unwrap_or_default()),
            )
        })
        .collect()
}

/// Inserts, updates and deletes on `name`, a transaction every few milliseconds, until `rounds`
/// are done or `stop` is set; `done` counts them.
pub(crate) fn writer(
    pg: String,
    name: String,
    rounds: u64,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut c = PgConnection::connect(&pg).await.unwrap();
        for r in 0..rounds {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            let mut tx = c.begin().await.unwrap();
            for sql in [
                format!(
                    "INSERT INTO {name} (id, body, amount) VALUES ({}, 'w{r}', {r}.5)",
                    1_000_000 + r
                ),
                format!(
                    "UPDATE {name} SET body = 'w{r}u', amount = amount + 1 WHERE id = {}",
                    1 + (r * 7919) % 5_000
                ),
                format!("DELETE FROM {name} WHERE id = {}", 5_001 + r),
            ] {
                sqlx::query(&sql).execute(&mut *tx).await.unwrap();
            }
            tx.commit().await.unwrap();
            done.store(r + 1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
}

/// `examples/{example}.toml` written into `dir` as a job of its own: named `name`, a checkpoint
/// every 300 ms under `state/`, and each of the example's `resources` (its publication, slot,
/// topic or index: `"orders_cdc"`, ...) named `name` too.
pub(crate) fn example_job(
    dir: &Path,
    example: &str,
    name: &str,
    resources: &[&str],
) -> std::path::PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../examples/{example}.toml"));
    let mut text = std::fs::read_to_string(path)
        .unwrap()
        .replace(
            &format!("name = \"{example}\""),
            &format!("name = \"{name}\""),
        )
        .replace("interval = \"1s\"", "interval = \"300ms\"")
        .replace(&format!("target/examples/{example}"), "state");
    for r in resources {
        text = text.replace(&format!("\"{r}\""), &format!("\"{name}\""));
    }
    let file = dir.join("job.toml");
    std::fs::write(&file, text).unwrap();
    file
}
