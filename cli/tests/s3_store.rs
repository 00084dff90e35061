//! `[checkpoint] store = "s3://…"` driven as a user would: the job checkpoints into the
//! object store (SeaweedFS from `dev/services up s3`), a second process of it is refused while
//! the first runs, `rivus check` reaches the store, and after SIGKILL the rerun — as on another
//! machine, with no local state — resumes from the store with every record once.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rivus_testkit::services::{require, s3_credentials, unique_name, Service};
use sqlx::{Connection, Row};

fn rivus(dir: &Path, endpoint: &str, args: &[&str]) -> Command {
    let (_, key, secret) = s3_credentials();
    let mut c = Command::new(env!("CARGO_BIN_EXE_rivus"));
    c.args(args)
        .current_dir(dir)
        .env("AWS_ENDPOINT_URL", endpoint)
        .env("AWS_ACCESS_KEY_ID", key)
        .env("AWS_SECRET_ACCESS_KEY", secret)
        .env("AWS_REGION", "us-east-1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

async fn rows(db: &Path) -> String {
    let mut c = sqlx::SqliteConnection::connect(&format!("sqlite:{}", db.display()))
        .await
        .unwrap();
    sqlx::query("SELECT COUNT(*) || ',' || COUNT(DISTINCT id) FROM orders")
        .fetch_one(&mut c)
        .await
        .map(|r| r.get::<String, _>(0))
        .unwrap_or_else(|_| "0,0".into())
}

#[tokio::test]
async fn a_job_checkpoints_into_s3_and_resumes_from_it_after_a_kill() {
    let Some(endpoint) = require(Service::S3) else {
        return;
    };
    let (bucket, _, _) = s3_credentials();
    let n = 30_000u64;
    let store = format!("s3://{bucket}/{}", unique_name("cli"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.toml");
    // The table has no key: a record written twice would be a second row. The SQLite sink
    // commits with each checkpoint (exactly-once), so the rerun must start at the last one.
    std::fs::write(
        &file,
        format!(
            "name = \"s3-orders\"\n[checkpoint]\ninterval = \"200ms\"\nstore = \"{store}\"\nlease = \"5s\"\n\
             [source]\ntype = \"generator\"\ncount = {n}\nrate = 5000\n\
             [sink]\ntype = \"jdbc\"\nurl = \"sqlite:out.db\"\ntable = \"orders\"\n\
             setup = \"CREATE TABLE IF NOT EXISTS orders (id INTEGER, user TEXT, amount REAL, status TEXT, ts INTEGER)\"\n"
        ),
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let db = dir.path().join("out.db");

    let out = rivus(dir.path(), &endpoint, &["check", f])
        .output()
        .unwrap();
    let report = text(&out.stdout);
    assert!(report.contains(&store), "{report}{}", text(&out.stderr));
    assert!(report.contains("no checkpoint of this job yet"), "{report}");

    let mut first = rivus(dir.path(), &endpoint, &["run", f]).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !db.exists() || rows(&db).await.starts_with("0,") {
        assert!(Instant::now() < deadline, "rows arrive");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let second = rivus(dir.path(), &endpoint, &["run", f]).output().unwrap();
    let err = text(&second.stderr);
    assert!(
        !second.status.success(),
        "a second owner must not run: {err}"
    );
    assert!(
        err.contains(&format!("checkpoint store `{store}`")),
        "{err}"
    );
    assert!(
        err.contains(&format!("held by job `s3-orders` (pid {}", first.id())),
        "{err}"
    );

    first.kill().unwrap();
    first.wait().unwrap();
    let part = rows(&db).await;
    let done: u64 = part.split(',').next().unwrap().parse().unwrap();
    assert!(done < n, "killed mid-stream ({part})");

    // Rerun, as a process on another machine would: its lease check waits out the dead
    // holder's lease (5 s), then resumes from the newest checkpoint in the store.
    let t0 = Instant::now();
    let out = loop {
        let out = rivus(dir.path(), &endpoint, &["run", f]).output().unwrap();
        if out.status.success() || !text(&out.stderr).contains("held by") {
            break out;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{}",
            text(&out.stderr)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("resumed     from checkpoint"), "{stdout}");
    assert_eq!(rows(&db).await, format!("{n},{n}"));
}
