//! Avro object container files written by the sink on S3, read by an independent reader:
//! fastavro (from `dev/python`, with Confluent's client) — every record, with dates and
//! timestamps as Avro's logical types.

mod common;

use common::*;
use rivus_connector_files::{AvroCodec, FileFormat};
use serde_json::Value;

const READ: &str = r##"
import json, sys, fastavro
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        r = fastavro.reader(f)
        print("#codec " + r.codec)
        for rec in r:
            print(json.dumps(rec, default=str, sort_keys=True))
"##;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avro_files_on_s3_read_by_fastavro_equal_what_was_written() {
    let Some(b) = Bucket::new("avro-s3") else {
        return;
    };
    let Some(py) = rivus_testkit::services::python_with("fastavro") else {
        return;
    };
    let n = 10_000;
    let sink = sink_into(&b, |s| {
        s.format(FileFormat::Avro(AvroCodec::Deflate))
            .target_file_size(16 * 1024)
    });
    write_all(&b.prefix, n, sink).await;
    let dir = tempfile::tempdir().unwrap();
    let files = b.download(dir.path()).await;
    assert!(files.len() > 1, "rolled on size: {files:?}");
    let out = std::process::Command::new(&py)
        .args(["-c", READ])
        .args(&files)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "fastavro: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text
        .lines()
        .filter(|l| l.starts_with("#codec"))
        .all(|l| l == "#codec deflate"));
    let mut rows: Vec<Value> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    rows.sort_by_key(|r| r["id"].as_u64());
    assert_eq!(rows.len() as u64, n);
    for (i, r) in rows.iter().enumerate() {
        let w = record(i as u64);
        assert_eq!(r["id"], w["id"]);
        assert_eq!(r["name"], w["name"]);
        assert_eq!(r["day"], w["day"], "a date");
        assert_eq!(r["tags"], Value::String(w["tags"].to_string()));
    }
    // fastavro gives a timestamp-micros as a datetime in UTC.
    assert_eq!(rows[1]["at"], "2024-03-01 10:00:00.001000+00:00");
}
