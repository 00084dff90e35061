//! JSON Schema and Protobuf through the schema registry (Apicurio, Confluent's API) against
//! Confluent's own Python serializers, through the `rivus` command, both ways: what
//! `JSONSerializer` / `ProtobufSerializer` write is read by a Kafka source in `json-schema` /
//! `protobuf` format, and what a sink writes in those formats is read by `JSONDeserializer` /
//! `ProtobufDeserializer`, field for field. A JSON payload breaking its schema, and a record
//! breaking the sink's schema, become dead letters naming the failing value.
//!
//! Python and Confluent's client come from `dev/python` (`RIVUS_PYTHON`).

#[path = "support/confluent.rs"]
mod confluent;
#[path = "support/topics.rs"]
mod topics;

use confluent::*;
use rivus_testkit::services::unique_name;
use serde_json::{json, Value};
use topics::{read, topic};

/// Orders in the shape of `order.schema.json`.
fn json_orders(n: i64) -> Vec<Value> {
    orders(n)
        .into_iter()
        .map(|o| {
            json!({
                "id": o["id"], "customer": o["customer"], "amount": o["amount"],
                "status": o["status"], "note": o["note"], "tags": o["tags"], "score": o["score"],
            })
        })
        .collect()
}

/// JSON Schema both ways: what Confluent's `JSONSerializer` writes is read by a source in
/// `json-schema` format (a payload breaking the schema becomes a dead letter naming the
/// value); what a sink writes in `json-schema` format is read by its `JSONDeserializer`; a
/// record breaking the sink's schema becomes a dead letter, not a message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_json_schema_serializers_and_rivus_read_each_other() {
    let Some((kafka, registry, py)) = services() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (input, middle, output) = (
        unique_name("jsonschema-in"),
        unique_name("jsonschema-mid"),
        unique_name("jsonschema-out"),
    );
    for t in [&input, &middle, &output] {
        topic(&kafka, t).await;
    }
    let sent = json_orders(30);
    confluent_produce(
        &py,
        "json-produce",
        (&kafka, &registry, &input),
        "order.schema.json",
        dir.path(),
        &sent,
    );
    // A framed payload of the registered schema that breaks it (amount is not text).
    let id = read(&kafka, &input, 1).remove(0)[1..5].to_vec();
    let mut bad = vec![0];
    bad.extend_from_slice(&id);
    bad.extend_from_slice(
        br#"{"id": 99, "customer": "x", "amount": 5, "status": "NEW", "tags": []}"#,
    );
    send_raw(&kafka, &input, &[bad.clone()]).await;

    let table = format!(
        "{{ type = \"json-schema\", {} }}",
        registry_table(&registry)
    );
    kafka_copy(
        dir.path(),
        &kafka,
        (&input, &table),
        (&middle, ""),
        "letters.jsonl",
    );
    assert_eq!(read_json(&kafka, &middle, sent.len()), sent);
    let letters = letters(dir.path(), "letters.jsonl");
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert_eq!(letters[0].payload, bad);
    assert!(
        letters[0].reason.contains("/amount"),
        "{}",
        letters[0].reason
    );

    // Writing: the JSON records (plus one that breaks the schema) → json-schema.
    let mut with_bad = sent.clone();
    with_bad.insert(
        5,
        json!({"id": 1000, "customer": "y", "amount": "1.00", "status": "LOST", "tags": []}),
    );
    let json_in = unique_name("jsonschema-plain");
    topic(&kafka, &json_in).await;
    produce_json(&kafka, &json_in, &with_bad).await;
    let sink_format = format!(
        "{{ type = \"json-schema\", {}, schema_file = \"{}\" }}",
        registry_table(&registry),
        here().join("order.schema.json").display()
    );
    kafka_copy(
        dir.path(),
        &kafka,
        (&json_in, ""),
        (&output, &sink_format),
        "written-letters.jsonl",
    );
    let lines = confluent(
        &py,
        &[
            "json-consume",
            &kafka,
            &registry,
            &output,
            &sent.len().to_string(),
        ],
    );
    let got = consumed_values(&lines);
    assert_eq!(got, sent, "read back by Confluent's JSONDeserializer");
    let letters = std::fs::read_to_string(dir.path().join("written-letters.jsonl")).unwrap();
    assert_eq!(letters.lines().count(), 1, "{letters}");
    assert!(letters.contains("/status"), "{letters}");
}

/// Orders in the proto3 JSON mapping of `order.proto` (every field present, int64 as numbers).
fn proto_orders(n: i64) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let status = ["NEW", "PAID", "SHIPPED"][(i % 3) as usize];
            json!({
                "id": i * 1_000_000_007,
                "customer": format!("customer-{}", i % 7),
                "score": i as f64 / 4.0,
                "status": status,
                "tags": (0..i % 3).map(|t| format!("t{t}")).collect::<Vec<_>>(),
                "placed": format!("2024-03-{:02}T10:{:02}:{:02}.{:03}Z", 1 + i % 28, i % 60, (i * 7) % 60, 1 + i % 999),
                "blob": base64_of(&[i as u8, 0, 255]),
                "line": {"sku": format!("s{i}"), "qty": i},
                "attrs": {"a": i},
            })
        })
        .collect()
}

/// Protobuf both ways: what Confluent's `ProtobufSerializer` writes (message classes generated
/// from `order.proto`) is read by a source in `protobuf` format, and what a sink writes in
/// `protobuf` format is read by its `ProtobufDeserializer`, field for field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_protobuf_serializers_and_rivus_read_each_other() {
    let Some((kafka, registry, py)) = services() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (input, middle, json_in, output) = (
        unique_name("proto-in"),
        unique_name("proto-mid"),
        unique_name("proto-json"),
        unique_name("proto-out"),
    );
    for t in [&input, &middle, &json_in, &output] {
        topic(&kafka, t).await;
    }
    let sent = proto_orders(30);
    let got = protobuf_read_by_rivus(
        &py,
        (&kafka, &registry),
        (&input, &middle),
        "order.proto",
        dir.path(),
        &sent,
    );
    for (i, (a, b)) in sent.iter().zip(&got).enumerate() {
        assert_eq!(a, b, "record {i} read from Confluent's ProtobufSerializer");
    }

    produce_json(&kafka, &json_in, &sent).await;
    let proto = here().join("order.proto");
    let sink_format = format!(
        "{{ type = \"protobuf\", {}, schema_file = \"{}\", message = \"shop.Order\" }}",
        registry_table(&registry),
        proto.display()
    );
    kafka_copy(
        dir.path(),
        &kafka,
        (&json_in, ""),
        (&output, &sink_format),
        "letters.jsonl",
    );
    let lines = confluent(
        &py,
        &[
            "proto-consume",
            &kafka,
            &registry,
            &output,
            &sent.len().to_string(),
            proto.to_str().unwrap(),
        ],
    );
    let got = consumed_values(&lines);
    for (i, (a, b)) in sent.iter().zip(&got).enumerate() {
        assert_eq!(a, b, "record {i} read by Confluent's ProtobufDeserializer");
    }
    assert_eq!(got.len(), sent.len());
}

/// A `.proto` file importing another: Confluent's `ProtobufSerializer` registers the import
/// (`address.proto`) under its own subject and the message's schema with a reference to it; a
/// source in `protobuf` format fetches the reference and reads every record field for field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_protobuf_imports_are_read_through_schema_references() {
    let Some((kafka, registry, py)) = services() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (unique_name("proto-refs-in"), unique_name("proto-refs-out"));
    for t in [&input, &output] {
        topic(&kafka, t).await;
    }
    let sent: Vec<Value> = (0..12)
        .map(|i| {
            json!({
                "id": i,
                "home": {"city": format!("city-{i}"), "zip": format!("{:05}", i * 37)},
                "since": format!("2025-01-{:02}T08:00:00Z", 1 + i),
            })
        })
        .collect();
    let got = protobuf_read_by_rivus(
        &py,
        (&kafka, &registry),
        (&input, &output),
        "customer.proto",
        dir.path(),
        &sent,
    );
    assert_eq!(got, sent, "read through the reference to address.proto");
}

/// Has Confluent's `ProtobufSerializer` produce `records` to `input` (the schema in `schema`),
/// copies `input` to `output` with a job reading `protobuf`, and returns what `output` holds.
fn protobuf_read_by_rivus(
    py: &str,
    (kafka, registry): (&str, &str),
    (input, output): (&str, &str),
    schema: &str,
    dir: &std::path::Path,
    records: &[Value],
) -> Vec<Value> {
    confluent_produce(
        py,
        "proto-produce",
        (kafka, registry, input),
        schema,
        dir,
        records,
    );
    let source_format = format!("{{ type = \"protobuf\", {} }}", registry_table(registry));
    kafka_copy(
        dir,
        kafka,
        (input, &source_format),
        (output, ""),
        "letters.jsonl",
    );
    read_json(kafka, output, records.len())
}
