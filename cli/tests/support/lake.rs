//! What the Kafka → table tests (Delta, Iceberg) share: a topic of `n` orders and a pipeline
//! file reading it into a table sink with the orders' columns, and the check that a reader
//! of the table finds every record once.
#![allow(dead_code)] // each includer uses a part

use std::path::{Path, PathBuf};

use super::run::{produce, text};
use super::topics;

/// A topic `name` of `n` orders (written exactly-once), and `dir/to-table.toml` reading it to
/// its end into the sink `sink` (the `[sink]` lines, without `schema`) with the orders'
/// columns, checkpoints every `interval`.
pub(crate) async fn orders_into(
    dir: &Path,
    kafka: &str,
    name: &str,
    n: u64,
    interval: &str,
    sink: &str,
) -> PathBuf {
    topics::topic(kafka, name).await;
    produce(
        dir,
        "to-topic",
        n,
        &format!(
            "type = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopic = \"{name}\"\n\
             exactly_once = true"
        ),
    );
    let file = dir.join("to-table.toml");
    std::fs::write(
        &file,
        format!(
            r#"name = "{name}"
[checkpoint]
interval = "{interval}"
dir = "state"

[source]
type = "kafka"
bootstrap_servers = "{kafka}"
topics = ["{name}"]
start = "earliest"
bounded = true
properties = {{ "isolation.level" = "read_committed" }}

[sink]
{sink}
create_table = true
target_file_size = 65536
row_group_bytes = 16384
schema = [
  {{ name = "id", type = "int64", nullable = false }},
  {{ name = "user", type = "string" }},
  {{ name = "amount", type = "float64" }},
  {{ name = "status", type = "string" }},
  {{ name = "ts", type = "timestamp" }},
]
"#
        ),
    )
    .unwrap();
    file
}

/// Runs `script` (Python, printing the table's `rows distinct min max files`) with `args`:
/// every one of the `n` records once, in files rolled by size.
pub(crate) fn every_record_once(py: &str, script: &str, args: &[&str], n: u64) {
    let read = std::process::Command::new(py)
        .args(["-c", script])
        .args(args)
        .output()
        .unwrap();
    let got = text(&read.stdout);
    assert!(read.status.success(), "{got}{}", text(&read.stderr));
    let f: Vec<u64> = got.split_whitespace().map(|v| v.parse().unwrap()).collect();
    assert_eq!(
        f[..4],
        [n, n, 0, n - 1],
        "every record once (rows, distinct, min, max): {got}"
    );
    assert!(f[4] > 3, "files rolled by size, not one: {got}");
}
