//! The `rivus` binary, driven as a user would: the quickstart, broken files, `check`, and
//! Ctrl-C followed by a resume.

#[path = "support/http.rs"]
mod http;

#[path = "support/run.rs"]
mod run;
use run::{rivus, text};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rivus_testkit::services::{require, Service};
use sqlx::{Connection, Row};

async fn sqlite_strings(db: &Path, sql: &str) -> Vec<String> {
    let mut c = sqlx::SqliteConnection::connect(&format!("sqlite:{}", db.display()))
        .await
        .unwrap();
    sqlx::query(sql)
        .fetch_all(&mut c)
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<String, _>(0))
        .collect()
}

/// Rows of `orders` in the database file `db`; `None` while the file or the table is missing.
async fn sqlite_rows(db: &Path) -> Option<i64> {
    if !db.exists() {
        return None;
    }
    let mut c = sqlx::SqliteConnection::connect(&format!("sqlite:{}", db.display()))
        .await
        .ok()?;
    sqlx::query_scalar("SELECT COUNT(*) FROM orders")
        .fetch_one(&mut c)
        .await
        .ok()
}

#[tokio::test]
async fn the_quickstart_writes_the_filtered_orders_into_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/quickstart.toml");
    let out = rivus(dir.path(), &["run", config.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    // Orders below 10.0 are filtered out: amount = (n * 7919 % 100000) / 100.
    let kept = (0..100_000u64)
        .filter(|n| (n * 7919 % 100_000) as f64 / 100.0 >= 10.0)
        .count();
    assert!(stdout.contains("read        100000 records"), "{stdout}");
    assert!(
        stdout.contains(&format!("written     {kept} records")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("table `orders` now holds {kept} rows")),
        "{stdout}"
    );
    let db = dir.path().join("target/quickstart/quickstart.db");
    let rows = sqlite_strings(
        &db,
        "SELECT COUNT(*) || ',' || MIN(amount) || ',' || COUNT(DISTINCT origin) || ',' || \
         SUM(customer LIKE 'user-%') FROM orders",
    )
    .await;
    assert_eq!(rows, [format!("{kept},10.0,1,{kept}")]);
    // A second run resumes from the final checkpoint and writes nothing again.
    let again = rivus(dir.path(), &["run", config.to_str().unwrap()]);
    let stdout = text(&again.stdout);
    assert!(again.status.success());
    assert!(stdout.contains("read        0 records"), "{stdout}");
    assert!(stdout.contains("resumed     from checkpoint"), "{stdout}");
}

const GOOD: &str = r#"
name = "t"
[source]
type = "generator"
count = 10
[sink]
type = "stdout"
"#;

#[test]
fn broken_files_are_refused_with_the_path_of_the_bad_field() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str)] = &[
        (
            "name = \"t\"\n[source]\ntype = \"generator\"\ncoutn = 3\n[sink]\ntype = \"stdout\"\n",
            "source.coutn: unknown field `coutn`",
        ),
        (
            "name = \"t\"\n[source]\ntype = \"jdbc\"\nurl = \"sqlite:x.db\"\n[sink]\ntype = \"stdout\"\n",
            "source: missing field `track_by`",
        ),
        (
            "name = \"t\"\nparallelism = \"two\"\n[source]\ntype = \"generator\"\n[sink]\ntype = \"stdout\"\n",
            "parallelism: invalid type",
        ),
        (
            "name = \"t\"\n[checkpoint]\ninterval = \"soon\"\ndir = \"s\"\n[source]\ntype = \"generator\"\n[sink]\ntype = \"stdout\"\n",
            "checkpoint.interval: `soon` is not a duration",
        ),
        (
            "name = \"t\"\n[source]\ntype = \"mongo\"\n[sink]\ntype = \"stdout\"\n",
            "source.type: unknown variant `mongo`, expected one of `dead-letters`, `files`, `generator`, `jdbc`, `kafka`",
        ),
        (
            "name = \"t\"\n[source]\ntype = \"kafka\"\nbootstrap_servers = \"h:1\"\ntopics = [\"a\"]\nformat = \"avro\"\n[sink]\ntype = \"stdout\"\n",
            "source.format: unknown format \"avro\": expected \"json\", \"text\", \"bytes\", or a table",
        ),
        (
            "name = \"t\"\n[source]\ntype = \"generator\"\n[sink]\ntype = \"jdbc\"\nurl = \"${RIVUS_TEST_NOT_SET}\"\ntable = \"t\"\n",
            "line 6: environment variable RIVUS_TEST_NOT_SET is not set",
        ),
        (
            "name = \"t\"\n[source]\ntype = \"generator\"\n[sink]\ntype = \"jdbc\"\nurl = \"oracle://u:hunter2@h/db\"\ntable = \"t\"\n",
            "sink.url",
        ),
        (
            "name = \"t\"\n[source]\ntype = \"generator\"\n[[transform]]\ntype = \"filter\"\nfield = \"a\"\nop = \"~\"\nvalue = 1\n[sink]\ntype = \"stdout\"\n",
            "transform[0].op: unknown variant `~`",
        ),
        (
            "name = \"t\"\n[source]\ntype = \"generator\"\n[[transform]]\ntype = \"filter\"\nfield = \"a\"\nop = \">\"\n[sink]\ntype = \"stdout\"\n",
            "transform[0].value: this comparison needs a value",
        ),
        (
            "name = \"t\"\n[errors]\npolicy = \"dead-letter\"\n[source]\ntype = \"generator\"\n[sink]\ntype = \"stdout\"\n",
            "errors.dead_letter: the dead-letter policy needs a file",
        ),
        (
            "name = \"t\"\n[source]\ntype = \"generator\"\n[sink]\ntype = \"redis\"\nurl = \"rediss://u:hunter2@127.0.0.1:6380/\"\ncommand = \"set\"\nkey = \"k\"\ntls = { ca_file = \"/no/such/ca.pem\" }\n",
            "`sink.tls.ca_file`: cannot read /no/such/ca.pem",
        ),
        (
            "name = \"t\"\n[source]\ntype = \"generator\"\n[sink]\ntype = \"rabbitmq\"\nuri = \"amqps://127.0.0.1:5671/%2f\"\nrouting_key = \"q\"\ntls = { cafile = \"ca.pem\" }\n",
            "sink.tls.cafile: unknown field `cafile`, expected one of `ca_file`",
        ),
        (
            "name = \"t\"\n[source]\ntype = \"kafka\"\nbootstrap_servers = \"127.0.0.1:9092\"\ntopics = []\n[sink]\ntype = \"stdout\"\n",
            "source.topics",
        ),
        (
            "name = \"t\"\n[source]\ntype = \"kafka\"\nbootstrap_servers = \"127.0.0.1:9095\"\ntopics = [\"a\"]\nproperties = { \"security.protocol\" = \"SASL_SSLX\", \"sasl.password\" = \"hunter2\" }\n[sink]\ntype = \"stdout\"\n",
            "source.properties.security.protocol",
        ),
        (
            "name = \"t\"\n[source]\ntype = \"generator\"\n[sink]\ntype = \"kafka\"\nbootstrap_servers = \"h:9095\"\ntopic = \"a\"\nsasl = { mechanism = \"SCRAM-SHA-1\", username = \"u\", password = \"hunter2\" }\n",
            "sink.sasl.mechanism",
        ),
        (
            "name = \"t\"\n[source]\ntype = \"generator\"\n[sink]\ntype = \"kafka\"\nbootstrap_servers = \"h:9095\"\ntopic = \"a\"\ntls = { ca_file = \"/no/such/ca.pem\" }\n",
            "sink.tls.ca_file",
        ),
        (
            "name = \"t\"\n[source]\ntype = \"generator\"\n[sink]\ntype = \"jdbc\"\nurl = \"sqlite:x.db\"\ntable = \"t\"\ntls = { ca_file = \"/etc/hostname\" }\n",
            "`sink.tls`: SQLite is a local file",
        ),
        (
            "name = \"t\"\n[source]\ntype = \"generator\"\n[sink]\ntype = \"elasticsearch\"\nurl = \"ftp://127.0.0.1:9200\"\nindex = \"i\"\n",
            "`sink.url`: scheme must be http or https",
        ),
        (
            "name = \"t\"\n[source]\ntype = \"redis-streams\"\nurl = \"redis://127.0.0.1:6379/\"\nstreams = []\ngroup = \"g\"\n[sink]\ntype = \"stdout\"\n",
            "`source.streams`: at least one stream",
        ),
    ];
    let cases = [
        cases,
        &[
            (
                "name = \"t\"\n[restart]\nstrategy = \"fixed-delay\"\nmax_attempts = 2\ndelya = \"1s\"\n[source]\ntype = \"generator\"\n[sink]\ntype = \"stdout\"\n",
                "restart.delya: unknown field `delya`",
            ),
            (
                "name = \"t\"\n[errors]\npolicy = \"dead-letter\"\ndestination = { type = \"kafka\", bootstrap_servers = \"h:1\", topik = \"x\" }\n[source]\ntype = \"generator\"\n[sink]\ntype = \"stdout\"\n",
                "errors.destination.topik: unknown field `topik`",
            ),
            (
                "name = \"t\"\n[checkpoint]\ninterval = \"1s\"\n[source]\ntype = \"generator\"\n[sink]\ntype = \"stdout\"\n",
                "`checkpoint.dir`: missing: give `dir` (a local directory) or `store`",
            ),
            (
                "name = \"t\"\n[checkpoint]\ninterval = \"1s\"\ndir = \"s\"\nstore = \"s3://b/p\"\n[source]\ntype = \"generator\"\n[sink]\ntype = \"stdout\"\n",
                "`checkpoint.store`: give either `dir` or `store`, not both",
            ),
            (
                "name = \"t\"\n[checkpoint]\ninterval = \"1s\"\nstore = \"/var/lib/x\"\n[source]\ntype = \"generator\"\n[sink]\ntype = \"stdout\"\n",
                "`checkpoint.store`: `/var/lib/x` is not an s3:// URL",
            ),
            (
                "name = \"t\"\n[checkpoint]\ninterval = \"1s\"\nstore = \"s3://b/p\"\nlease = \"1s\"\n[source]\ntype = \"generator\"\n[sink]\ntype = \"stdout\"\n",
                "`checkpoint.lease`: must be at least 3s",
            ),
        ][..],
    ]
    .concat();
    for (i, (config, expected)) in cases.iter().enumerate() {
        let file = dir.path().join(format!("case{i}.toml"));
        std::fs::write(&file, config).unwrap();
        let out = rivus(dir.path(), &["validate", file.to_str().unwrap()]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "case {i}: {stderr}");
        assert!(
            stderr.contains(expected),
            "case {i}: expected `{expected}` in: {stderr}"
        );
        // The path is the field's in the file, never the connector's own prefix.
        for stale in ["kafka", "jdbc", "redis", "rabbitmq", "elasticsearch"] {
            for role in ["source", "sink"] {
                let prefix = format!("{role}.{stale}.");
                assert!(
                    !stderr.contains(&prefix),
                    "case {i}: `{prefix}` in: {stderr}"
                );
            }
        }
        assert!(
            !stderr.contains("hunter2"),
            "case {i}: a secret was printed: {stderr}"
        );
    }
    let file = dir.path().join("good.toml");
    std::fs::write(&file, GOOD).unwrap();
    let out = rivus(dir.path(), &["validate", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(": ok\n  source (generator)\n  sink (stdout) <- source"),
        "{stdout}"
    );
}

#[test]
fn check_reports_reachability_without_printing_secrets() {
    let Some(pg) = require(Service::Postgres) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"t\"\n[source]\ntype = \"generator\"\n[sink]\ntype = \"jdbc\"\n\
             url = \"{pg}\"\ntable = \"t\"\nsetup = \"CREATE TABLE IF NOT EXISTS t (id INT)\"\n"
        ),
    )
    .unwrap();
    let out = rivus(dir.path(), &["check", file.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("source generator (built in): ok"),
        "{stdout}"
    );
    assert!(
        stdout.contains("sink jdbc (") && stdout.contains("): ok, connected"),
        "{stdout}"
    );

    std::fs::write(
        &file,
        "name = \"t\"\n[source]\ntype = \"generator\"\n[sink]\ntype = \"jdbc\"\n\
         url = \"postgres://rivus:hunter2@127.0.0.1:1/rivus\"\ntable = \"t\"\n",
    )
    .unwrap();
    let out = rivus(dir.path(), &["check", file.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("sink jdbc (postgres://rivus:<redacted>@127.0.0.1:1/rivus): FAILED"),
        "{stdout}"
    );
    assert!(!stdout.contains("hunter2") && !text(&out.stderr).contains("hunter2"));
}

#[tokio::test]
async fn ctrl_c_stops_gracefully_and_the_rerun_resumes_without_loss() {
    let dir = tempfile::tempdir().unwrap();
    let n = 60_000u64;
    let file = orders_into_sqlite(dir.path(), "resume", n, 10_000);
    let db = dir.path().join("out.db");
    let spawn = || start(dir.path(), &file);
    let count = || async {
        sqlite_strings(&db, "SELECT CAST(COUNT(*) AS TEXT) FROM orders").await[0]
            .parse::<u64>()
            .unwrap()
    };
    let child = spawn();
    let deadline = Instant::now() + Duration::from_secs(60);
    // The sink makes the file before its table: rows are counted once both exist.
    while sqlite_rows(&db).await.unwrap_or(0) < 5_000 {
        assert!(Instant::now() < deadline, "rows arrive");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    run::interrupt(child);
    let first = count().await;
    assert!(first < n, "stopped mid-stream ({first} of {n})");
    let out = spawn().wait_with_output().unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("resumed     from checkpoint"), "{stdout}");
    let rows = sqlite_strings(
        &db,
        "SELECT COUNT(*) || ',' || COUNT(DISTINCT id) || ',' || MIN(id) || ',' || MAX(id) FROM orders",
    )
    .await;
    assert_eq!(rows, [format!("{n},{n},0,{}", n - 1)]);
}

/// The same file started twice by mistake: the second process is refused at start, naming the
/// first, and writes nothing; the first runs to the end with every record once.
#[tokio::test]
async fn a_second_process_of_the_same_job_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let n = 20_000u64;
    let file = orders_into_sqlite(dir.path(), "twice", n, 5_000);
    let db = dir.path().join("out.db");
    let first = start(dir.path(), &file);
    let deadline = Instant::now() + Duration::from_secs(60);
    // The file exists as soon as the sink connects, the table once its `setup` ran.
    while sqlite_rows(&db).await.unwrap_or(0) == 0 {
        assert!(Instant::now() < deadline, "rows arrive");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let second = rivus(dir.path(), &["run", file.to_str().unwrap()]);
    let err = text(&second.stderr);
    assert!(
        !second.status.success(),
        "the second process must not run: {err}"
    );
    assert!(err.contains("checkpoint store `fs:"), "{err}");
    assert!(err.contains("held by job `twice`"), "{err}");
    assert!(err.contains(&format!("pid {}", first.id())), "{err}");
    let out = first.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows = sqlite_strings(
        &db,
        "SELECT COUNT(*) || ',' || COUNT(DISTINCT id) FROM orders",
    )
    .await;
    assert_eq!(rows, [format!("{n},{n}")]);
}

/// Worker mode where the source has no group protocol: refused at start, naming the source.
#[test]
fn a_source_without_a_group_protocol_refuses_worker_mode() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.toml");
    std::fs::write(
        &file,
        "name = \"w\"\n[checkpoint]\ninterval = \"1s\"\ndir = \"state\"\n\
         [source]\ntype = \"generator\"\ncount = 10\n[sink]\ntype = \"stdout\"\n",
    )
    .unwrap();
    let out = rivus(
        dir.path(),
        &["run", file.to_str().unwrap(), "--worker", "w1"],
    );
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("invalid configuration at `source`:"), "{err}");
    assert!(
        err.contains("worker `w1`: the generator has no group protocol"),
        "{err}"
    );
    assert!(
        text(&out.stdout).lines().all(|l| !l.starts_with('{')),
        "nothing written"
    );
}

/// Errors a connector raises while the job runs — not when the file is read — name the field
/// in the file too: the section's path is added once, where the section is placed.
#[test]
fn errors_raised_while_running_name_the_field_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    // The files source refuses a file over `max_file_bytes` when it meets it.
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("a.jsonl"), "{\"n\": 1}\n{\"n\": 2}\n").unwrap();
    let files = format!(
        "name = \"f\"\n[source]\ntype = \"files\"\nurl = \"file://{}\"\nformat = \"jsonl\"\n\
         max_file_bytes = 4\n[sink]\ntype = \"stdout\"\n",
        data.display()
    );
    // The search sink reads its client certificate when it opens: not a PEM file.
    let search = "name = \"s\"\n[source]\ntype = \"generator\"\ncount = 1\n[sink]\n\
         type = \"elasticsearch\"\nurl = \"https://127.0.0.1:1\"\nindex = \"i\"\n\
         tls = { client_cert = \"/etc/hostname\", client_key = \"/etc/hostname\" }\n"
        .to_owned();
    for (i, (config, expected)) in [
        (files, "(at `source.max_file_bytes`): a.jsonl has 18 bytes"),
        (search, "invalid configuration at `sink.tls.client_cert`"),
    ]
    .iter()
    .enumerate()
    {
        let file = dir.path().join(format!("run{i}.toml"));
        std::fs::write(&file, config).unwrap();
        let validated = rivus(dir.path(), &["validate", file.to_str().unwrap()]);
        assert!(
            validated.status.success(),
            "case {i}: the file itself is valid: {}",
            text(&validated.stderr)
        );
        let out = rivus(dir.path(), &["run", file.to_str().unwrap()]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "case {i}: {err}");
        assert!(err.contains(expected), "case {i}: `{expected}` in: {err}");
    }
}

#[test]
fn metrics_are_served_while_the_job_runs() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.toml");
    std::fs::write(
        &file,
        "name = \"metrics\"\n[source]\ntype = \"generator\"\ncount = 40000\nrate = 4000\n\
         [sink]\ntype = \"stdout\"\n",
    )
    .unwrap();
    let port = http::free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args([
            "run",
            file.to_str().unwrap(),
            "--metrics-addr",
            &format!("127.0.0.1:{port}"),
            "--log-format",
            "json",
        ])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        assert!(Instant::now() < deadline, "metrics served");
        // An HTTP/1 answer with status 200 (`http::metrics` checks both).
        if let Some(body) = http::metrics(port).filter(|b| b.contains("# TYPE rivus_")) {
            break body;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(body.contains("# TYPE rivus_"), "{body}");
}

#[tokio::test]
async fn bad_records_go_to_the_dead_letter_file_and_are_counted_by_kind() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("in.db");
    let mut c = sqlx::SqliteConnection::connect(&format!("sqlite:{}?mode=rwc", db.display()))
        .await
        .unwrap();
    sqlx::raw_sql(
        "CREATE TABLE events (id INTEGER PRIMARY KEY, payload TEXT);
         INSERT INTO events VALUES (1, '{\"qty\": 1}'), (2, '{oops'), (3, '{\"qty\": -5}'),
                                   (4, '{\"qty\": 4}'), (5, 'not json');
         CREATE TABLE out (id INTEGER PRIMARY KEY, payload TEXT CHECK (json_extract(payload, '$.qty') > 0));",
    )
    .execute(&mut c)
    .await
    .unwrap();
    let file = dir.path().join("p.toml");
    std::fs::write(
        &file,
        "name = \"dlq\"\n[errors]\npolicy = \"dead-letter\"\ndead_letter = \"letters.jsonl\"\n\
         [source]\ntype = \"jdbc\"\nurl = \"sqlite:in.db\"\ntable = \"events\"\ntrack_by = [\"id\"]\nmode = \"bounded\"\n\
         [[transform]]\ntype = \"parse-json\"\nfield = \"payload\"\n\
         [sink]\ntype = \"jdbc\"\nurl = \"sqlite:in.db\"\ntable = \"out\"\n",
    )
    .unwrap();
    let out = rivus(dir.path(), &["run", file.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("errors      3 (sink 1, transform 2)"),
        "{stdout}"
    );
    assert!(stdout.contains("table `out` now holds 2 rows"), "{stdout}");
    let letters = std::fs::read_to_string(dir.path().join("letters.jsonl")).unwrap();
    assert_eq!(letters.lines().count(), 3, "{letters}");
    assert!(letters.contains("field `payload` is not JSON"), "{letters}");
    assert!(letters.contains("CHECK constraint failed"), "{letters}");
}

#[test]
fn without_a_terminal_the_status_is_logged_periodically() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.toml");
    std::fs::write(
        &file,
        "name = \"status\"\n[checkpoint]\ninterval = \"100ms\"\ndir = \"state\"\n\
         [source]\ntype = \"generator\"\ncount = 6000\nrate = 6000\n[sink]\ntype = \"stdout\"\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["run", file.to_str().unwrap(), "--status-interval", "200ms"])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("status: in "))
        .collect();
    assert!(lines.len() >= 2, "periodic status lines: {stderr}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("checkpoint #") && l.contains("% ETA")),
        "{stderr}"
    );
    assert!(
        !stderr.contains('\r'),
        "no terminal control characters in logs"
    );
}

#[test]
fn connectors_lists_every_connector_with_its_guarantee() {
    let dir = tempfile::tempdir().unwrap();
    let out = rivus(dir.path(), &["connectors"]);
    assert!(out.status.success());
    let stdout = text(&out.stdout);
    for (role, name) in [
        ("source", "dead-letters"),
        ("source", "generator"),
        ("source", "jdbc"),
        ("source", "kafka"),
        ("source", "postgres-cdc"),
        ("source", "rabbitmq"),
        ("source", "redis-streams"),
        ("sink", "stdout"),
        ("sink", "jdbc"),
        ("sink", "kafka"),
        ("sink", "elasticsearch"),
        ("sink", "rabbitmq"),
        ("sink", "redis"),
    ] {
        let line = stdout
            .lines()
            .find(|l| {
                let mut words = l.split_whitespace();
                words.next() == Some(role) && words.next() == Some(name)
            })
            .unwrap_or_else(|| panic!("{role} {name} listed: {stdout}"));
        assert!(
            line.contains("once"),
            "a guarantee for {role} {name}: {line}"
        );
    }
    assert!(stdout.contains("parse-json (field)"), "{stdout}");
}

/// `rivus schema` describes what the command accepts: every example file is valid against it,
/// and files the command refuses (a misspelt key, a wrong type, an unknown connector or
/// choice, a bad duration, a format table without its registry) are invalid against it too.
#[test]
fn the_schema_accepts_every_example_and_refuses_what_the_command_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let out = rivus(dir.path(), &["schema"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let schema: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("a valid JSON Schema");
    let as_json = |toml_text: &str| -> serde_json::Value {
        let v: toml::Value = toml::from_str(toml_text).unwrap();
        serde_json::to_value(v).unwrap()
    };
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut seen = 0;
    for entry in std::fs::read_dir(&examples).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let file = as_json(&std::fs::read_to_string(&path).unwrap());
        let errors: Vec<String> = validator
            .iter_errors(&file)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
        seen += 1;
    }
    assert!(seen >= 10, "{seen} examples");
    let base = "name = \"t\"\n[source]\ntype = \"generator\"\n";
    for (bad, why) in [
        (
            format!("{base}coutn = 3\n[sink]\ntype = \"stdout\"\n"),
            "a misspelt key",
        ),
        (
            "name = \"t\"\nparallelism = \"two\"\n[source]\ntype = \"generator\"\n[sink]\ntype = \"stdout\"\n".to_owned(),
            "a wrong type",
        ),
        (
            "name = \"t\"\n[source]\ntype = \"mongo\"\n[sink]\ntype = \"stdout\"\n".to_owned(),
            "an unknown connector",
        ),
        (
            format!("{base}[sink]\ntype = \"jdbc\"\nurl = \"sqlite:x\"\ntable = \"t\"\nmode = \"merge\"\n"),
            "an unknown choice",
        ),
        (
            format!("[checkpoint]\ninterval = \"soon\"\ndir = \"s\"\n{base}[sink]\ntype = \"stdout\"\n"),
            "a bad duration",
        ),
        (
            "name = \"t\"\n[source]\ntype = \"kafka\"\nbootstrap_servers = \"h:1\"\ntopics = [\"a\"]\nformat = { type = \"avro\" }\n[sink]\ntype = \"stdout\"\n".to_owned(),
            "a format table without its registry",
        ),
        (
            format!("{base}[sink]\ntype = \"stdout\"\n[restart]\nstrategy = \"fixed-delay\"\n"),
            "a restart strategy without its required setting",
        ),
        (
            "name = \"t\"\n[sources.a]\ntype = \"generator\"\n[sinks.b]\ntype = \"stdout\"\ninptus = [\"a\"]\n".to_owned(),
            "a named sink with a misspelt key",
        ),
        (
            "name = \"t\"\n[sources.a]\ntype = \"generator\"\n[transforms.r]\ntype = \"route\"\ninputs = [\"a\"]\nroute.x = { field = \"f\", op = \"=>\", value = 1 }\n[sinks.b]\ntype = \"stdout\"\ninputs = [\"r.x\"]\n".to_owned(),
            "a route with an unknown comparison",
        ),
    ] {
        // The TOML above puts `[checkpoint]` before `name`: keep `name` at the top level.
        let bad = if bad.starts_with('[') {
            format!("name = \"t\"\n{}", bad.replacen("name = \"t\"\n", "", 1))
        } else {
            bad
        };
        assert!(
            !validator.is_valid(&as_json(&bad)),
            "the schema accepts {why}:\n{bad}"
        );
        let file = dir.path().join("bad.toml");
        std::fs::write(&file, &bad).unwrap();
        let out = rivus(dir.path(), &["validate", file.to_str().unwrap()]);
        assert!(!out.status.success(), "the command accepts {why}:\n{bad}");
    }
}

/// The job file `p.toml` in `dir`: `n` generated orders at `rate` per second into the table
/// `orders` of `out.db` (SQLite), checkpointed every 200 ms. The table has no key: a record
/// written twice would be a second row.
fn orders_into_sqlite(dir: &Path, name: &str, n: u64, rate: u64) -> PathBuf {
    let file = dir.join("p.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"{name}\"\n[checkpoint]\ninterval = \"200ms\"\ndir = \"state\"\n\
             [source]\ntype = \"generator\"\ncount = {n}\nrate = {rate}\n\
             [sink]\ntype = \"jdbc\"\nurl = \"sqlite:out.db\"\ntable = \"orders\"\n\
             setup = \"CREATE TABLE IF NOT EXISTS orders (id INTEGER, user TEXT, amount REAL, status TEXT, ts INTEGER)\"\n"
        ),
    )
    .unwrap();
    file
}

/// `rivus run file` started in `dir`, its output piped.
fn start(dir: &Path, file: &Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["run", file.to_str().unwrap()])
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}
