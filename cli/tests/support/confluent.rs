//! What the schema-registry format tests share: Confluent's Python client (`dev/python`,
//! `confluent.py`), order records in each format's JSON mapping, and `rivus run` jobs.
#![allow(dead_code)] // each includer uses a part

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::ClientConfig;
use rivus_testkit::services::unique_name;
use serde_json::{json, Value};

use super::topics::read;

/// Kafka, the schema registry and the Python with Confluent's client, or `None` (each
/// missing one fails the test unless skipping was asked for).
pub(crate) fn services() -> Option<(String, String, String)> {
    use rivus_testkit::services::{require, Service};
    let (Some(kafka), Some(registry), Some(py)) = (
        require(Service::Kafka),
        require(Service::SchemaRegistry),
        python(),
    ) else {
        return None;
    };
    Some((kafka, registry, py))
}

/// Writes `records` as JSON lines into `dir`, and has `confluent.py` produce them to `topic`
/// with Confluent's serializer of `mode` (`produce` for Avro, `json-produce`,
/// `proto-produce`) and the schema in `schema` (a file under [`here`]).
pub(crate) fn confluent_produce(
    py: &str,
    mode: &str,
    (kafka, registry, topic): (&str, &str, &str),
    schema: &str,
    dir: &Path,
    records: &[Value],
) {
    let lines = dir.join(format!("{}.jsonl", unique_name("records")));
    write_lines(&lines, records);
    let schema = here().join(schema);
    confluent(
        py,
        &[
            mode,
            kafka,
            registry,
            topic,
            schema.to_str().unwrap(),
            lines.to_str().unwrap(),
        ],
    );
}

/// Writes `records` as JSON lines into `dir`, and has `confluent.py` encode them with
/// Confluent's Avro serializer and the schema in `schema` (a file under [`here`]), registered
/// under `subject`: the payloads, one per line.
pub(crate) fn confluent_encode(
    py: &str,
    registry: &str,
    subject: &str,
    schema: &str,
    dir: &Path,
    records: &[Value],
) -> String {
    let lines = dir.join(format!("{}.jsonl", unique_name("records")));
    write_lines(&lines, records);
    let schema = here().join(schema);
    confluent(
        py,
        &[
            "encode",
            "-",
            registry,
            subject,
            schema.to_str().unwrap(),
            lines.to_str().unwrap(),
        ],
    )
}

/// Sends each of `payloads` to `topic` as it is (no key).
pub(crate) async fn send_raw(kafka: &str, topic: &str, payloads: &[Vec<u8>]) {
    let p: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", kafka)
        .create()
        .unwrap();
    for b in payloads {
        p.send(
            FutureRecord::<(), [u8]>::to(topic).payload(b),
            Duration::from_secs(30),
        )
        .await
        .unwrap();
    }
}

/// The dead letters in the file `name` of `dir`.
pub(crate) fn letters(dir: &Path, name: &str) -> Vec<rivus_sdk::error_policy::DeadLetter> {
    std::fs::read_to_string(dir.join(name))
        .unwrap()
        .lines()
        .map(|l| rivus_sdk::error_policy::DeadLetter::from_json(l.as_bytes()).unwrap())
        .collect()
}

pub(crate) fn here() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/confluent")
}

/// The Python with Confluent's client (`dev/python`), or a failure saying how to get it.
pub(crate) fn python() -> Option<String> {
    rivus_testkit::services::python_with("confluent_kafka.schema_registry.avro")
}

/// Runs the Python helper; its stdout. It is killed after two minutes (a hung client fails
/// the test instead of hanging it).
pub(crate) fn confluent(py: &str, args: &[&str]) -> String {
    confluent_with_input(py, args, "")
}

/// `n` order records in rivus's JSON mapping of `order.avsc`.
pub(crate) fn orders(n: i64) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let status = ["NEW", "PAID", "SHIPPED"][(i % 3) as usize];
            json!({
                "id": i,
                "customer": format!("customer-{}", i % 7),
                "amount": format!("{}.{:02}", i * 3, i % 100),
                "placed": format!("2024-03-{:02}T10:{:02}:{:02}.{:03}Z", 1 + i % 28, i % 60, (i * 7) % 60, i % 1000),
                "day": format!("2024-02-{:02}", 1 + i % 29),
                "ref": format!("67e55044-10b1-426f-9247-{:012x}", i),
                "status": status,
                "note": if i % 2 == 0 { Value::Null } else { json!(format!("note {i}")) },
                "tags": (0..i % 3).map(|t| format!("t{t}")).collect::<Vec<_>>(),
                "attrs": {"qty": i, "weight": i * 10},
                "blob": base64_of(&[i as u8, 0, 255]),
                "score": i as f64 / 4.0,
            })
        })
        .collect()
}

pub(crate) fn base64_of(b: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(b)
}

pub(crate) fn write_lines(path: &Path, records: &[Value]) {
    let text: String = records.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(path, text).unwrap();
}

pub(crate) fn run(dir: &Path, name: &str, pipeline: &str) -> Output {
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, pipeline).unwrap();
    Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["run", file.to_str().unwrap()])
        .current_dir(dir)
        .output()
        .unwrap()
}

pub(crate) fn registry_table(registry: &str) -> String {
    format!("registry = {{ url = \"{registry}\" }}")
}

/// A job process, killed if a failed assertion leaves it running.
pub(crate) struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits until `topic` holds `n` records; their JSON values.
pub(crate) fn read_json(kafka: &str, topic: &str, n: usize) -> Vec<Value> {
    read(kafka, topic, n)
        .iter()
        .map(|p| serde_json::from_slice(p).unwrap())
        .collect()
}

/// Runs the Python helper with `input` on its stdin; its stdout (killed after two minutes).
pub(crate) fn confluent_with_input(py: &str, args: &[&str], input: &str) -> String {
    use std::io::Write;
    let mut child = Command::new(py)
        .arg(here().join("confluent.py"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let pid = child.id();
    let (done, wait) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        // Disconnected: the helper ended in time; only a timeout kills it.
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
            wait.recv_timeout(Duration::from_secs(120))
        {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    });
    let out = child.wait_with_output().unwrap();
    drop(done);
    watchdog.join().unwrap();
    assert!(
        out.status.success(),
        "confluent.py {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

pub(crate) fn b64(data: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .unwrap()
}

/// Writes `records` as JSON payloads to `topic`.
pub(crate) async fn produce_json(kafka: &str, topic: &str, records: &[Value]) {
    let p: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", kafka)
        .create()
        .unwrap();
    for r in records {
        let payload = r.to_string();
        p.send(
            FutureRecord::<(), str>::to(topic).payload(&payload),
            Duration::from_secs(30),
        )
        .await
        .unwrap();
    }
}

/// Runs a bounded Kafka → Kafka job from `from` (read in `source_format`) to `to` (written in
/// `sink_format`; formats as pipeline-file values, `""` for the default), dead letters to
/// `letters` in `dir`; fails unless it ends with success.
pub(crate) fn kafka_copy(
    dir: &Path,
    kafka: &str,
    (from, source_format): (&str, &str),
    (to, sink_format): (&str, &str),
    letters: &str,
) {
    let fmt = |f: &str| {
        if f.is_empty() {
            String::new()
        } else {
            format!("format = {f}\n")
        }
    };
    let name = unique_name("copy");
    let out = run(
        dir,
        &name,
        &format!(
            "name = \"{name}\"\n[errors]\npolicy = \"dead-letter\"\ndead_letter = \"{letters}\"\n\
             [source]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopics = [\"{from}\"]\n\
             start = \"earliest\"\nbounded = true\n{}\
             [sink]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopic = \"{to}\"\n{}",
            fmt(source_format),
            fmt(sink_format)
        ),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The values `confluent.py` prints in a `*-consume` mode.
pub(crate) fn consumed_values(lines: &str) -> Vec<Value> {
    lines
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["value"].clone())
        .collect()
}
