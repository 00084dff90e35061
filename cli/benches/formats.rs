//! The schema formats against JSON, side by side in one run:
//! - **Kafka → Kafka through `rivus run`**: the same bounded job (a 2-partition topic of the
//!   generator's records, parallelism 1) in `json` and in `avro`, `protobuf` and `json-schema`
//!   (the registry's wire format, in and out), rounds rotating the order; records/s (wall time
//!   of the whole run, start-up included) and CPU per record (user + system of the process);
//! - **encode and decode in-process**: `rivus-formats`' codec of each format (JSON record ↔
//!   wire format, the schema from the registry) and `apache-avro` alone (its own values, no
//!   JSON, no header), records/s; and how many registry requests each codec sent (one per
//!   distinct schema).
//!
//! `cargo bench -p rivus-cli --bench formats` after `dev/services up kafka schema-registry`
//! (`RIVUS_FORMATS_RECORDS`, default 300 000; `RIVUS_FORMATS_ROUNDS`, default 3).

#[path = "support/jobs.rs"]
mod jobs;
#[path = "../tests/support/topics.rs"]
mod topics;

use jobs::{env_usize, median, run};

use std::path::Path;
use std::time::Instant;

use rivus_formats::{Codec, Format, Role};
use rivus_testkit::services::{unique_name, Service};
use serde_json::{json, Value};

const SCHEMA: &str = r#"{"type": "record", "name": "Order", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"}, {"name": "user", "type": "string"},
    {"name": "amount", "type": "double"}, {"name": "status", "type": "string"},
    {"name": "ts", "type": "long"}]}"#;

const PROTO: &str = "syntax = \"proto3\";\npackage bench;\nmessage Order {\n  int64 id = 1;\n  \
    string user = 2;\n  double amount = 3;\n  string status = 4;\n  int64 ts = 5;\n}\n";

const JSON_SCHEMA: &str = r#"{"title": "bench.Order", "type": "object", "properties": {
    "id": {"type": "integer"}, "user": {"type": "string"}, "amount": {"type": "number"},
    "status": {"enum": ["new", "paid", "shipped"]}, "ts": {"type": "integer"}},
    "required": ["id", "user", "amount", "status", "ts"], "additionalProperties": false}"#;

/// The formats compared, JSON (the baseline) first.
const FORMATS: [&str; 4] = ["json", "avro", "protobuf", "json-schema"];

/// A format's schema: (file name, text).
fn schema_of(format: &str) -> (&'static str, &'static str) {
    match format {
        "avro" => ("order.avsc", SCHEMA),
        "protobuf" => ("order.proto", PROTO),
        _ => ("order.schema.json", JSON_SCHEMA),
    }
}

fn format_table(format: &str, registry: &str, dir: &Path) -> String {
    match format {
        "json" => "\"json\"".to_owned(),
        f => format!(
            "{{ type = \"{f}\", registry = {{ url = \"{registry}\" }}, schema_file = \"{}\" }}",
            dir.join(schema_of(f).0).display()
        ),
    }
}

fn pipeline_runs(dir: &Path, kafka: &str, registry: &str, n: usize, rounds: usize) {
    for f in &FORMATS[1..] {
        let (file, text) = schema_of(f);
        std::fs::write(dir.join(file), text).unwrap();
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut input = std::collections::BTreeMap::new();
    for f in FORMATS {
        let t = unique_name(&format!("bench-{f}"));
        rt.block_on(topics::topic(kafka, &t));
        run(
            dir,
            &format!("fill-{f}"),
            &format!(
                "[source]\ntype = \"generator\"\ncount = {n}\n\
                 [sink]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopic = \"{t}\"\n\
                 format = {}\n",
                format_table(f, registry, dir)
            ),
        );
        input.insert(f, t);
    }
    let mut results: std::collections::BTreeMap<&str, Vec<(f64, f64)>> = Default::default();
    for round in 0..rounds {
        let mut order = FORMATS;
        order.rotate_left(round % FORMATS.len());
        for f in order {
            let out = unique_name(&format!("bench-{f}-out"));
            rt.block_on(topics::topic(kafka, &out));
            let fmt = format_table(f, registry, dir);
            let r = run(
                dir,
                &format!("copy-{f}"),
                &format!(
                    "[source]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopics = [\"{}\"]\n\
                     start = \"earliest\"\nbounded = true\nformat = {fmt}\n\
                     [sink]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopic = \"{out}\"\n\
                     format = {fmt}\n",
                    input[f]
                ),
            );
            println!(
                "round {round} {f:<11}: {:>8.0} records/s, {:.2} µs CPU per record",
                n as f64 / r.0,
                r.1 * 1e6 / n as f64
            );
            results.entry(f).or_default().push(r);
        }
    }
    let rate = |f: &str| median(results[f].iter().map(|r| n as f64 / r.0).collect());
    let cpu = |f: &str| median(results[f].iter().map(|r| r.1 * 1e6 / n as f64).collect());
    println!("\n| Kafka → Kafka, {n} records | records/s (median) | CPU µs/record |");
    println!("|---|---|---|");
    for f in FORMATS {
        println!("| {f} | {:.0} | {:.2} |", rate(f), cpu(f));
    }
    for f in &FORMATS[1..] {
        println!(
            "{f} / json: {:.2}× the throughput, {:.2}× the CPU per record",
            rate(f) / rate("json"),
            cpu(f) / cpu("json")
        );
    }
}

/// Encodes and decodes `records` with `format`'s codec: (encode/s, decode/s, registry
/// requests).
fn codec_rates(registry: &str, format: &str, records: &[Value]) -> (f64, f64, u64) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let spec: Format = serde_json::from_value(json!({
        "type": format, "registry": {"url": registry}, "schema": schema_of(format).1
    }))
    .unwrap();
    let codec = Codec::new(&spec, "bench.format").unwrap();
    let topic = unique_name(&format!("bench-codec-{format}"));
    rt.block_on(codec.open_writer(&topic, Role::Value)).unwrap();
    let n = records.len() as f64;
    let t = Instant::now();
    let mut payloads = Vec::with_capacity(records.len());
    for r in records {
        let mut out = Vec::with_capacity(64);
        codec.encode(r, &mut out).unwrap();
        payloads.push(out);
    }
    let encode = n / t.elapsed().as_secs_f64();
    let t = Instant::now();
    for (p, r) in payloads.iter().zip(records) {
        let v = codec.decode_blocking(p, &"bench").unwrap();
        debug_assert_eq!(&v, r);
    }
    let decode = n / t.elapsed().as_secs_f64();
    (encode, decode, codec.registry_requests())
}

fn codec_runs(registry: &str, n: usize) {
    let records: Vec<Value> = (0..n as u64)
        .map(|i| {
            let status = ["new", "paid", "shipped"][(i % 3) as usize];
            json!({"id": i, "user": format!("user-{}", i % 50), "amount": (i % 10_000) as f64 / 100.0, "status": status, "ts": 1_700_000_000_000u64 + i})
        })
        .collect();
    let rates: Vec<(&str, (f64, f64, u64))> = FORMATS[1..]
        .iter()
        .map(|f| (*f, codec_rates(registry, f, &records)))
        .collect();
    let (encode, decode, _) = rates[0].1;

    // apache-avro alone: its own values, no JSON and no wire-format header.
    let schema = apache_avro::Schema::parse_str(SCHEMA).unwrap();
    let values: Vec<apache_avro::types::Value> = records
        .iter()
        .map(|r| {
            use apache_avro::types::Value as A;
            A::Record(vec![
                ("id".into(), A::Long(r["id"].as_i64().unwrap())),
                ("user".into(), A::String(r["user"].as_str().unwrap().into())),
                ("amount".into(), A::Double(r["amount"].as_f64().unwrap())),
                (
                    "status".into(),
                    A::String(r["status"].as_str().unwrap().into()),
                ),
                ("ts".into(), A::Long(r["ts"].as_i64().unwrap())),
            ])
        })
        .collect();
    let writer = apache_avro::writer::datum::GenericDatumWriter::builder(&schema)
        .build()
        .unwrap();
    let t = Instant::now();
    let mut raw = Vec::with_capacity(n);
    for v in values {
        raw.push(writer.write_value_to_vec(v).unwrap());
    }
    let raw_encode = n as f64 / t.elapsed().as_secs_f64();
    let reader = apache_avro::reader::datum::GenericDatumReader::builder(&schema)
        .build()
        .unwrap();
    let t = Instant::now();
    for p in &raw {
        reader.read_value(&mut &p[..]).unwrap();
    }
    let raw_decode = n as f64 / t.elapsed().as_secs_f64();
    println!(
        "\n| in-process, {n} records | encode records/s | decode records/s | registry requests |"
    );
    println!("|---|---|---|---|");
    for (f, (e, d, requests)) in &rates {
        println!(
            "| rivus-formats `{f}` (JSON record ↔ wire format) | {e:.0} | {d:.0} | {requests} |"
        );
    }
    println!(
        "| apache-avro alone (its values ↔ Avro body) | {raw_encode:.0} | {raw_decode:.0} | — |"
    );
    println!(
        "rivus avro / apache-avro: encode {:.2}×, decode {:.2}×",
        encode / raw_encode,
        decode / raw_decode,
    );
}

fn main() {
    let kafka = Service::Kafka.url();
    let registry = Service::SchemaRegistry.url();
    let n = env_usize("RIVUS_FORMATS_RECORDS", 300_000);
    let rounds = env_usize("RIVUS_FORMATS_ROUNDS", 3);
    let dir = tempfile::tempdir().unwrap();
    codec_runs(&registry, n);
    pipeline_runs(dir.path(), &kafka, &registry, n, rounds);
}
