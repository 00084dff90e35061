//! Numbers → PostgreSQL (prepared transactions) and → MariaDB (XA) exactly-once in a separate
//! process, killed with SIGKILL several times mid-stream and restarted: the table holds every
//! number exactly once and no prepared transaction is left.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rivus_testkit::process::{example_binary, kill_after_progress};
use rivus_testkit::services::unique_name;

/// Over 60 s (84 s here): several SIGKILLs, each after the process made progress, and a
/// restart from the checkpoint after each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_dash_nine_numbers_to_postgres_exactly_once() {
    let Some(db) = common::postgres() else { return };
    killed_and_restarted(&db, 1_500_000).await;
}

/// Over 60 s (82 s here): as for PostgreSQL, with XA.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_dash_nine_numbers_to_mariadb_exactly_once() {
    let Some(db) = common::mariadb() else { return };
    killed_and_restarted(&db, 600_000).await;
}

async fn killed_and_restarted(db: &common::Db, n: u64) {
    let example = example_binary("rivus-connector-jdbc", "sequence_to_table");
    let table = unique_name("kill").replace('-', "_");
    // No key: a duplicate would be a second row, not an error.
    db.exec(&format!("CREATE TABLE {table} (id BIGINT NOT NULL)"))
        .await;
    let state = std::env::temp_dir().join(unique_name("jdbc-kill"));
    let spawn = || -> Child {
        Command::new(&example)
            .args([
                db.url.as_str(),
                table.as_str(),
                &n.to_string(),
                state.to_str().unwrap(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    // Each run is killed once it has committed a further tenth of the numbers.
    let mid_stream =
        kill_after_progress(&spawn, 3, n as usize / 10, n as usize, || db.count(&table)).await;
    assert!(
        mid_stream >= 2,
        "killed mid-stream ({mid_stream} of 3 kills)"
    );
    let mut child = spawn();
    let deadline = Instant::now() + Duration::from_secs(180);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "the last run ends by itself");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(status.success(), "the last run succeeded");
    let summary = db
        .strings(&format!(
            "SELECT concat_ws(',', count(*), count(DISTINCT id), min(id), max(id)) FROM {table}"
        ))
        .await;
    assert_eq!(summary, [format!("{n},{n},0,{}", n - 1)]);
    let left: Vec<String> = if db.is("mariadb") {
        let ours = format!("{table}:");
        let all = db.xa_ids().await;
        all.into_iter().filter(|x| x.starts_with(&ours)).collect()
    } else {
        db.strings(&format!(
            "SELECT gid FROM pg_prepared_xacts WHERE gid LIKE '{table}:%'"
        ))
        .await
    };
    assert!(left.is_empty(), "prepared transactions left: {left:?}");
}
