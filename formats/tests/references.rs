//! Schemas that reference other schemas, against the real registry: a `.proto` file importing
//! another, an Avro record using a named type registered on its own, a JSON Schema whose
//! `$ref` names another subject's schema. A writer with the referencing schema's id and a
//! reader that meets the id in a payload both fetch the referenced schemas, so records round
//! trip field for field and a record that breaks a referenced schema's rules is refused.

use rivus_formats::{Codec, Format, Role};
use rivus_testkit::services::{require, unique_name, Service};
use serde_json::{json, Value};

/// Registers `schema` under `subject` with `references` (`[{name, subject, version}]`): its id.
async fn register(
    registry: &str,
    subject: &str,
    schema_type: &str,
    schema: &str,
    references: Value,
) -> u32 {
    let body = json!({"schema": schema, "schemaType": schema_type, "references": references});
    let resp = reqwest::Client::new()
        .post(format!("{registry}/subjects/{subject}/versions"))
        .header("content-type", "application/vnd.schemaregistry.v1+json")
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let answer: Value = resp.json().await.unwrap();
    assert!(status.is_success(), "registering {subject}: {answer}");
    answer["id"].as_u64().unwrap() as u32
}

/// Registers the referenced schema, then the one that references it under `name`; writes
/// `good` with the latter's id and reads it back with a codec that knows no schema; `bad`
/// breaks a rule of the referenced schema and is refused by the writer.
async fn round_trip(format: &str, schema_type: &str, (name, referenced): (&str, &str), main: &str) {
    let Some(registry) = require(Service::SchemaRegistry) else {
        return;
    };
    let base = unique_name(&format!("refs-{format}"));
    let dep = format!("{base}-dep");
    register(&registry, &dep, schema_type, referenced, json!([])).await;
    let refs = json!([{"name": name, "subject": dep, "version": 1}]);
    let id = register(&registry, &format!("{base}-value"), schema_type, main, refs).await;

    let spec = |extra: Value| -> Format {
        let mut f = json!({"type": format, "registry": {"url": registry}});
        f.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::from_value(f).unwrap()
    };
    let writer = Codec::new(&spec(json!({"schema_id": id})), "sink.format").unwrap();
    writer.open_writer(&base, Role::Value).await.unwrap();
    let good = json!({"id": 7, "home": {"city": "Lyon"}});
    let mut payload = Vec::new();
    writer.encode(&good, &mut payload).unwrap();
    assert_eq!(
        &payload[1..5],
        &id.to_be_bytes(),
        "the referencing schema's id"
    );

    let reader = Codec::new(&spec(json!({})), "source.format").unwrap();
    let read = reader.decode(&payload, &"record 0").await.unwrap();
    assert_eq!(read, good, "{format}: read back through the reference");
    assert_eq!(
        reader.registry_requests(),
        2,
        "the schema and its reference"
    );

    let bad = json!({"id": 8, "home": {"city": 5}});
    let e = writer
        .encode(&bad, &mut Vec::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("city") || e.contains('5'), "{format}: {e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_avro_record_uses_a_named_type_registered_as_a_reference() {
    round_trip(
        "avro",
        "AVRO",
        (
            "shop.Address",
            r#"{"type":"record","name":"Address","namespace":"shop",
                "fields":[{"name":"city","type":"string"}]}"#,
        ),
        r#"{"type":"record","name":"Customer","namespace":"shop",
            "fields":[{"name":"id","type":"long"},{"name":"home","type":"shop.Address"}]}"#,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proto_file_imports_one_registered_as_a_reference() {
    round_trip(
        "protobuf",
        "PROTOBUF",
        (
            "shop/address.proto",
            "syntax = \"proto3\";\npackage shop;\nmessage Address { string city = 1; }\n",
        ),
        "syntax = \"proto3\";\npackage shop;\nimport \"shop/address.proto\";\n\
         message Customer { int64 id = 1; Address home = 2; }\n",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_schema_refers_to_one_registered_as_a_reference() {
    round_trip(
        "json-schema",
        "JSON",
        (
            "address.json",
            r#"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#,
        ),
        r#"{"type":"object","properties":{"id":{"type":"integer"},"home":{"$ref":"address.json"}},
            "required":["id","home"]}"#,
    )
    .await;
}
