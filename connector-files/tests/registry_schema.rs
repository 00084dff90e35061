//! Parquet columns from a subject's Avro schema in the schema registry (the dev registry,
//! Apicurio's Confluent-compatible API): decimals as exact text, timestamps, dates and nested
//! values as the Avro format maps them — read back by pyarrow with those types; a subject
//! holding no Avro record is refused when the sink opens, naming the option.

mod common;

use std::time::Duration;

use common::*;
use rivus_connector_files::{FileFormat, FilesSink, ParquetCompression};
use rivus_formats::registry::SchemaType;
use rivus_formats::{Registry, RegistryConfig};
use rivus_sdk::prelude::*;
use rivus_testkit::services::{require, unique_name, Service};
use rivus_testkit::VecSource;
use serde_json::{json, Value};
use std::sync::Arc;

const ORDER: &str = r#"{"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}], "default": null},
    {"name": "lines", "type": {"type": "array", "items": "string"}}
]}"#;

fn config(url: &str) -> RegistryConfig {
    RegistryConfig {
        url: url.to_owned(),
        ..Default::default()
    }
}

async fn run(b: &Bucket, url: &str, subject: &str, records: Vec<Value>) -> Result<JobSummary> {
    let (dest, opts, url, subject) = (b.url(), b.options(), url.to_owned(), subject.to_owned());
    let splits = Arc::new(vec![records]);
    Pipeline::new(b.prefix.as_str())
        .checkpointing(CheckpointConfig::new(
            Duration::from_millis(100),
            Arc::new(MemoryStateBackend::new()),
        ))
        .source("in", 1, move |i| VecSource::new(splits.clone(), i, 1))
        .sink("files", 1, move |_| {
            FilesSink::builder(&dest)
                .s3(opts.clone())
                .format(FileFormat::Parquet(ParquetCompression::Snappy))
                .schema_from_registry(config(&url), subject.clone())
                .build()
                .unwrap()
        })?
        .run()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parquet_columns_come_from_the_registry_avro_schema() {
    let (Some(url), Some(b), Some(py)) = (
        require(Service::SchemaRegistry),
        Bucket::new("files-registry"),
        python(),
    ) else {
        return;
    };
    let registry = Registry::new(&config(&url), "registry").unwrap();
    let subject = format!("{}-value", unique_name("files-orders"));
    registry
        .register(&subject, SchemaType::Avro, ORDER)
        .await
        .unwrap();
    let records: Vec<Value> = (0..100)
        .map(|i| {
            json!({
                "id": i,
                "amount": format!("{i}.25"),
                "placed": format!("2024-03-01T10:00:{:02}.000001Z", i % 60),
                "day": if i % 2 == 0 { json!("2024-03-01") } else { Value::Null },
                "lines": ["a", format!("b{i}")],
            })
        })
        .collect();
    run(&b, &url, &subject, records).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let files = b.download(dir.path()).await;
    let (schemas, mut rows) = pyarrow_read(&py, "parquet", &files);
    assert_eq!(
        schemas[0],
        json!({"id": "int64", "amount": "string", "placed": "timestamp[us, tz=+00:00]",
               "day": "date32[day]", "lines": "string"})
    );
    rows.sort_by_key(|r| r["id"].as_u64());
    assert_eq!(rows.len(), 100);
    assert_eq!(rows[7]["amount"], "7.25");
    assert_eq!(rows[7]["day"], Value::Null);
    assert_eq!(rows[8]["day"], "2024-03-01");
    assert_eq!(rows[8]["lines"], "[\"a\",\"b8\"]");

    // A subject holding a JSON Schema is refused when the sink opens.
    let json_subject = format!("{}-value", unique_name("files-json"));
    registry
        .register(
            &json_subject,
            SchemaType::Json,
            r#"{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}"#,
        )
        .await
        .unwrap();
    let b2 = Bucket::new("files-registry").unwrap();
    let e = run(&b2, &url, &json_subject, vec![json!({"id": 1})])
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("(at `schema_subject`)") && text.contains("Json"),
        "{text}"
    );
}
