//! A server frozen under a running job (its processes SIGSTOPped: what a long GC pause, a
//! paused VM or a partition does — the connections stay up, nothing answers): for every
//! connector's sink the job is reported STALLED on `/api/status` with the call it waits in,
//! and a second SIGINT ends the process within a few seconds while the server is still frozen.
//!
//! Each test freezes a different server, so they may run side by side; no other test binary
//! runs at the same time.

#[path = "support/frozen.rs"]
mod frozen;
#[path = "support/http.rs"]
mod http;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use frozen::{server_pids, Frozen};
use http::{free_port, request};
use rivus_testkit::services::{unique_name, Service};
use serde_json::Value;

/// After the second SIGINT the process must be gone within this.
const GONE_WITHIN: Duration = Duration::from_secs(8);

/// `/api/status` until `ready` holds, at most `limit`.
fn wait_status(port: u16, limit: Duration, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + limit;
    let mut last = Value::Null;
    while Instant::now() < deadline {
        if let Some((200, body)) = request(port, "GET", "/api/status", None) {
            let v: Value = serde_json::from_str(&body).unwrap();
            if ready(&v) {
                return v;
            }
            last = v;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{what} within {limit:?}; last status: {last:#}");
}

fn sigint(child: &Child) {
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
}

/// Runs a paced generator into `sink` (a `[sink]` table's body), freezes `service`, and checks
/// the stall report and the hard stop.
fn stalls_and_stops(service: &str, sink: &str) {
    let dir = tempfile::tempdir().unwrap();
    let name = unique_name(&format!("frozen-{service}"));
    let file = dir.path().join("job.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"{name}\"\nstall_threshold = \"1s\"\n\
             [checkpoint]\ninterval = \"500ms\"\ndir = \"{}\"\n\
             [errors]\npolicy = \"skip\"\n\
             [source]\ntype = \"generator\"\nrate = 200\n\
             [sink]\n{sink}\n",
            dir.path().join("state").display()
        ),
    )
    .unwrap();
    let port = free_port();
    let log = dir.path().join("job.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["run", file.to_str().unwrap()])
        .args(["--http", &format!("127.0.0.1:{port}")])
        .env("RUST_LOG", "warn,rivus_sdk=info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    let running = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_status(
            port,
            Duration::from_secs(60),
            "records written and a checkpoint",
            |s| {
                s["records"]["written"].as_u64().unwrap_or(0) > 0
                    && s["checkpoints"]["completed"].as_u64().unwrap_or(0) > 0
            },
        )
    }));
    if running.is_err() {
        let _ = child.kill();
        panic!("{service}: the job never ran; its log:\n{}", log_text());
    }

    let frozen = Frozen::new(server_pids(service));
    let stalled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_status(port, Duration::from_secs(30), "reported stalled", |s| {
            s["state"] == "stalled"
        })
    }));
    let stalled = match stalled {
        Ok(s) => s,
        Err(_) => {
            let _ = child.kill();
            drop(frozen);
            panic!(
                "{service}: never reported stalled; its log:\n{}",
                log_text()
            );
        }
    };
    let stall = &stalled["stall"];
    let message = stall["message"].as_str().unwrap_or_default().to_owned();
    assert!(
        message.starts_with("no progress for "),
        "{service}: {stall:#}"
    );
    assert!(
        stall["call"].as_str().is_some_and(|c| !c.is_empty()),
        "{service}: the call it waits in is named: {stall:#}"
    );

    // First SIGINT: a graceful stop, which cannot finish while the server is frozen; the
    // second: stop at once.
    sigint(&child);
    std::thread::sleep(Duration::from_secs(1));
    sigint(&child);
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > GONE_WITHIN {
            let _ = child.kill();
            let _ = child.wait();
            drop(frozen);
            panic!(
                "{service}: still running {GONE_WITHIN:?} after the second SIGINT; its log:\n{}",
                log_text()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(frozen);
    let text = log_text();
    assert!(
        text.contains("STALLED"),
        "{service}: the log says STALLED:\n{text}"
    );
    assert!(
        !status.success(),
        "{service}: a hard stop is not a success ({status})"
    );
}

#[test]
fn kafka_sink_frozen_broker_stalled_then_stopped() {
    stalls_and_stops(
        "kafka",
        &format!(
            "type = \"kafka\"\nbootstrap_servers = \"{}\"\ntopic = \"{}\"\nexactly_once = true",
            Service::Kafka.url(),
            unique_name("frozen")
        ),
    );
}

#[test]
fn rabbitmq_sink_frozen_broker_stalled_then_stopped() {
    stalls_and_stops(
        "rabbitmq",
        &format!(
            "type = \"rabbitmq\"\nuri = \"{}\"\nexchange = \"amq.topic\"\nrouting_key = \"frozen\"",
            Service::RabbitMq.url()
        ),
    );
}

#[test]
fn redis_sink_frozen_server_stalled_then_stopped() {
    stalls_and_stops(
        "redis",
        &format!(
            "type = \"redis\"\nurl = \"{}\"\ncommand = \"set\"\nkey = \"frozen:{{id}}\"\nttl_secs = 60",
            Service::Redis.url()
        ),
    );
}

#[test]
fn elasticsearch_sink_frozen_cluster_stalled_then_stopped() {
    stalls_and_stops(
        "elasticsearch",
        &format!(
            "type = \"elasticsearch\"\nurl = \"{}\"\nindex = \"{}\"\nid_field = \"id\"",
            Service::Elasticsearch.url(),
            unique_name("frozen")
        ),
    );
}

fn jdbc_sink(url: &str) -> String {
    let table = unique_name("frozen").replace('-', "_");
    format!(
        "type = \"jdbc\"\nurl = \"{url}\"\ntable = \"{table}\"\nexactly_once = true\n\
         columns = [\"id\"]\nignore_unknown_fields = true\nstatement_timeout = \"3s\"\n\
         setup = \"CREATE TABLE IF NOT EXISTS {table} (id BIGINT PRIMARY KEY)\""
    )
}

#[test]
fn postgres_sink_frozen_server_stalled_then_stopped() {
    stalls_and_stops("postgres", &jdbc_sink(&Service::Postgres.url()));
}

#[test]
fn mariadb_sink_frozen_server_stalled_then_stopped() {
    stalls_and_stops("mariadb", &jdbc_sink(&Service::MySql.url()));
}
