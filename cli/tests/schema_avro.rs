//! Formats with schemas through the schema registry (Apicurio, Confluent's API) against
//! Confluent's own Python serializers, through the `rivus` command — Avro:
//! - records written by `AvroSerializer` are read by a Kafka source in `avro` format and come
//!   out as JSON equal, field for field, to what was serialized (decimal, timestamp, date,
//!   uuid, enum, union, array, map, bytes); payloads that are not Avro in the wire format (a
//!   JSON payload, an unknown schema id, a truncated record) become dead letters with their
//!   bytes;
//! - records a Kafka sink writes in `avro` format (value and key) are read back by
//!   `AvroDeserializer` equal to the JSON records that went in;
//! - a writer's schema changing mid-stream to a compatible version is read on by the same job
//!   (no restart), into one reader schema; an incompatible schema is refused at start, naming
//!   the subject;
//! - bodies and values in Avro through RabbitMQ into Redis, and the Avro example into typed
//!   PostgreSQL columns.
//! - Avro fields of a Redis stream are read.
//!
//! JSON Schema and Protobuf: `schema_protobuf_json.rs`.
//!
//! Python and Confluent's client come from `dev/python` (`RIVUS_PYTHON`).

#[path = "support/confluent.rs"]
mod confluent;
#[path = "support/rabbit.rs"]
mod rabbit;
#[path = "support/topics.rs"]
mod topics;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use confluent::*;
use rivus_testkit::services::{require, unique_name, Service};
use serde_json::{json, Value};
use topics::{read, topic};

#[path = "support/run.rs"]
mod run;
use run::Succeeds;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_avro_serializer_records_are_read_by_rivus_field_for_field() {
    let Some((kafka, registry, py)) = services() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (unique_name("avro-in"), unique_name("avro-out"));
    topic(&kafka, &input).await;
    topic(&kafka, &output).await;
    let sent = orders(60);
    confluent_produce(
        &py,
        "produce",
        (&kafka, &registry, &input),
        "order.avsc",
        dir.path(),
        &sent,
    );
    // Three payloads that are not Avro records of a known schema.
    let bad: Vec<Vec<u8>> = vec![
        br#"{"id": 1}"#.to_vec(),
        vec![0, 0x7f, 0xff, 0xff, 0xf0, 2, 4],
        {
            // A real frame of the registered schema, cut short.
            let first = read(&kafka, &input, 1).remove(0);
            first[..8].to_vec()
        },
    ];
    send_raw(&kafka, &input, &bad).await;

    let avro = format!("{{ type = \"avro\", {} }}", registry_table(&registry));
    kafka_copy(
        dir.path(),
        &kafka,
        (&input, &avro),
        (&output, ""),
        "letters.jsonl",
    );
    let got: Vec<Value> = read(&kafka, &output, sent.len())
        .iter()
        .map(|p| serde_json::from_slice(p).unwrap())
        .collect();
    for (i, (a, b)) in sent.iter().zip(&got).enumerate() {
        assert_eq!(a, b, "record {i} differs");
    }
    let letters = letters(dir.path(), "letters.jsonl");
    assert_eq!(letters.len(), 3, "{letters:?}");
    for (l, b) in letters.iter().zip(&bad) {
        assert_eq!(&l.payload, b, "a letter keeps the payload");
    }
    assert!(
        letters[0].reason.contains("magic byte"),
        "{}",
        letters[0].reason
    );
    assert!(
        letters[1].reason.contains("unknown to the registry"),
        "{}",
        letters[1].reason
    );
    assert!(
        letters[2].reason.contains("schema id"),
        "{}",
        letters[2].reason
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rivus_avro_is_read_by_confluent_deserializer_field_for_field() {
    let Some((kafka, registry, py)) = services() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (unique_name("avro-json"), unique_name("avro-written"));
    topic(&kafka, &input).await;
    topic(&kafka, &output).await;
    let sent = orders(60);
    produce_json(&kafka, &input, &sent).await;
    let schema = here().join("order.avsc");
    let out = run(
        dir.path(),
        "write",
        &format!(
            "name = \"{}\"\n\
             [source]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopics = [\"{input}\"]\n\
             start = \"earliest\"\nbounded = true\n\
             [sink]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopic = \"{output}\"\n\
             exactly_once = true\nkey_field = \"id\"\n\
             key_format = {{ type = \"avro\", {reg}, schema = '\"long\"' }}\n\
             format = {{ type = \"avro\", {reg}, schema_file = \"{}\" }}\n",
            unique_name("avro-write"),
            schema.display(),
            reg = registry_table(&registry)
        ),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = confluent(
        &py,
        &[
            "consume",
            &kafka,
            &registry,
            &output,
            &sent.len().to_string(),
        ],
    );
    let got: Vec<Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(got.len(), sent.len());
    for (i, (a, b)) in sent.iter().zip(&got).enumerate() {
        assert_eq!(a, &b["value"], "record {i} differs");
        assert_eq!(a["id"], b["key"], "record {i}'s key");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_writer_moving_to_a_compatible_schema_mid_stream_is_read_on_and_an_incompatible_one_is_refused(
) {
    let Some((kafka, registry, py)) = services() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (unique_name("avro-evolve"), unique_name("avro-evolved"));
    topic(&kafka, &input).await;
    topic(&kafka, &output).await;
    let v2 = here().join("order_v2.avsc");
    let file = dir.path().join("evolve.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"{}\"\n[checkpoint]\ninterval = \"500ms\"\ndir = \"state\"\n\
             [source]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopics = [\"{input}\"]\n\
             start = \"earliest\"\n\
             format = {{ type = \"avro\", {}, reader_schema_file = \"{}\" }}\n\
             [sink]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopic = \"{output}\"\n",
            unique_name("avro-evolve"),
            registry_table(&registry),
            v2.display()
        ),
    )
    .unwrap();
    let log = dir.path().join("job.log");
    let mut job = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_rivus"))
            .args(["run", file.to_str().unwrap()])
            .current_dir(dir.path())
            .env("RUST_LOG", "info")
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );

    // Version 1 while the job runs, then version 2 (a field with a default added).
    let first = orders(30);
    confluent_produce(
        &py,
        "produce",
        (&kafka, &registry, &input),
        "order.avsc",
        dir.path(),
        &first,
    );
    read_json(&kafka, &output, 30);
    let second: Vec<Value> = orders(60)[30..]
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r["channel"] = json!("shop");
            r
        })
        .collect();
    confluent_produce(
        &py,
        "produce",
        (&kafka, &registry, &input),
        "order_v2.avsc",
        dir.path(),
        &second,
    );
    let got = read_json(&kafka, &output, 60);
    Command::new("kill")
        .args(["-INT", &job.0.id().to_string()])
        .status()
        .unwrap();
    let status = job.0.wait().unwrap();
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(status.success(), "{log_text}");
    assert!(
        !log_text.contains("restarting"),
        "the job restarted: {log_text}"
    );
    for (i, (sent, got)) in first.iter().zip(&got[..30]).enumerate() {
        let mut want = sent.clone();
        want["channel"] = json!("web");
        assert_eq!(&want, got, "version-1 record {i}, read into version 2");
    }
    assert_eq!(&second[..], &got[30..], "version-2 records");

    // A job writing an incompatible schema to the subject (BACKWARD) is refused at start.
    let bad = here().join("order_incompatible.avsc");
    let out = run(
        dir.path(),
        "incompatible",
        &format!(
            "name = \"{}\"\n[source]\ntype = \"generator\"\ncount = 1\n\
             [sink]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopic = \"{input}\"\n\
             format = {{ type = \"avro\", {}, schema_file = \"{}\" }}\n",
            unique_name("avro-incompatible"),
            registry_table(&registry),
            bad.display()
        ),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "a setup error: {err}");
    assert!(
        err.contains(&format!("{input}-value")),
        "names the subject: {err}"
    );
}

/// RabbitMQ bodies and Redis values in Avro: Confluent's serializer writes the bodies of one
/// queue; a job reads them (avro) and publishes them to a second queue (avro); a second job
/// reads that queue and pushes the records to a Redis list (avro, an explicit subject);
/// Confluent's deserializer reads the list back equal to what was written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_avro_bodies_go_through_rabbitmq_into_redis_values() {
    let (Some(amqp), Some(redis_url), Some(registry), Some(py)) = (
        require(Service::RabbitMq),
        require(Service::Redis),
        require(Service::SchemaRegistry),
        python(),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (first, second, list) = (
        unique_name("avro-q1"),
        unique_name("avro-q2"),
        unique_name("avro-list"),
    );
    let sent = orders(25);
    let schema = here().join("order.avsc");
    let payloads = confluent_encode(&py, &registry, &first, "order.avsc", dir.path(), &sent);
    // Both queues declared durable, the first one filled.
    let ch = rabbit::durable_queues(&amqp, &[&first, &second]).await;
    for p in payloads.lines() {
        ch.basic_publish(
            "".into(),
            first.as_str().into(),
            Default::default(),
            &b64(p),
            Default::default(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    }
    let avro = |extra: &str| {
        format!(
            "{{ type = \"avro\", {}{extra} }}",
            registry_table(&registry)
        )
    };
    let start = |name: &str, body: String| {
        let file = dir.path().join(format!("{name}.toml"));
        std::fs::write(
            &file,
            format!(
                "name = \"{}\"\n[checkpoint]\ninterval = \"500ms\"\ndir = \"state-{name}\"\n{body}",
                unique_name(name)
            ),
        )
        .unwrap();
        KillOnDrop(
            Command::new(env!("CARGO_BIN_EXE_rivus"))
                .args(["run", file.to_str().unwrap()])
                .current_dir(dir.path())
                .stdout(std::process::Stdio::null())
                .stderr(std::fs::File::create(dir.path().join(format!("{name}.log"))).unwrap())
                .spawn()
                .unwrap(),
        )
    };
    let relay = start(
        "relay",
        format!(
            "[source]\ntype = \"rabbitmq\"\nuri = \"{amqp}\"\nqueues = [\"{first}\"]\nformat = {}\n\
             [sink]\ntype = \"rabbitmq\"\nuri = \"{amqp}\"\nrouting_key = \"{second}\"\nformat = {}\n",
            avro(""),
            avro(&format!(", schema_file = \"{}\"", schema.display()))
        ),
    );
    let into_redis = start(
        "into-redis",
        format!(
            "[source]\ntype = \"rabbitmq\"\nuri = \"{amqp}\"\nqueues = [\"{second}\"]\nformat = {}\n\
             [sink]\ntype = \"redis\"\nurl = \"{redis_url}\"\ncommand = \"rpush\"\nkey = \"{list}\"\n\
             format = {}\n",
            avro(""),
            avro(&format!(", subject = \"{list}-value\", schema_file = \"{}\"", schema.display()))
        ),
    );
    let client = redis::Client::open(redis_url.as_str()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let values: Vec<Vec<u8>> = loop {
        let v: Vec<Vec<u8>> = redis::cmd("LRANGE")
            .arg(&list)
            .arg(0)
            .arg(-1)
            .query_async(&mut c)
            .await
            .unwrap();
        if v.len() >= sent.len() {
            break v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} of {} values arrived: {}",
            v.len(),
            sent.len(),
            std::fs::read_to_string(dir.path().join("relay.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    drop((relay, into_redis));
    assert!(
        values.iter().all(|v| v.first() == Some(&0)),
        "every value is in the wire format"
    );
    let input: String = values
        .iter()
        .map(|v| format!("{}\n", base64_of(v)))
        .collect();
    let decoded = confluent_with_input(&py, &["decode", "-", &registry, &list], &input);
    let got: Vec<Value> = decoded
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        got, sent,
        "Redis values read back by Confluent's deserializer"
    );
}

/// A row of the example's table: id, customer, amount, placed, day, ref, note, tags, blob,
/// score.
type Row = (
    i64,
    String,
    String,
    String,
    String,
    String,
    Option<String>,
    String,
    Vec<u8>,
    f64,
);

/// `examples/avro-kafka-to-postgres.toml` on Avro records written by Confluent's serializer:
/// every order lands in PostgreSQL with its types (NUMERIC, TIMESTAMPTZ, DATE, UUID, JSONB,
/// BYTEA).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_avro_example_fills_typed_postgres_columns() {
    let (Some(kafka), Some(registry), Some(pg), Some(py)) = (
        require(Service::Kafka),
        require(Service::SchemaRegistry),
        require(Service::Postgres),
        python(),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let unique = unique_name("avro-example").replace('-', "_");
    topic(&kafka, &unique).await;
    let sent = orders(40);
    confluent_produce(
        &py,
        "produce",
        (&kafka, &registry, &unique),
        "../../../examples/order.avsc",
        dir.path(),
        &sent,
    );
    let example =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/avro-kafka-to-postgres.toml");
    let text = std::fs::read_to_string(example)
        .unwrap()
        .replace("\"orders-avro\"", &format!("\"{unique}\""))
        .replace("orders_avro", &unique)
        .replace(
            "name = \"avro-kafka-to-postgres\"",
            &format!("name = \"{unique}\""),
        );
    let file = dir.path().join("example.toml");
    std::fs::write(&file, text).unwrap();
    Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["run", file.to_str().unwrap()])
        .current_dir(dir.path())
        .env("RIVUS_KAFKA_BOOTSTRAP", &kafka)
        .env("RIVUS_SCHEMA_REGISTRY_URL", &registry)
        .env("RIVUS_PG_URL", &pg)
        .succeeds();

    use sqlx::Connection;
    let mut db = sqlx::PgConnection::connect(&pg).await.unwrap();
    let types: Vec<(String, String)> = sqlx::query_as(
        "SELECT column_name::text, data_type::text FROM information_schema.columns \
         WHERE table_name = $1 ORDER BY ordinal_position",
    )
    .bind(&unique)
    .fetch_all(&mut db)
    .await
    .unwrap();
    assert!(
        types.contains(&("placed".into(), "timestamp with time zone".into())),
        "{types:?}"
    );
    let rows: Vec<Row> = sqlx::query_as(&format!(
        "SELECT id, customer, amount::text, \
             to_char(placed AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), day::text, \
             ref::text, note, tags::text, blob, score FROM {unique} ORDER BY id"
    ))
    .fetch_all(&mut db)
    .await
    .unwrap();
    assert_eq!(rows.len(), sent.len());
    for (row, want) in rows.iter().zip(&sent) {
        let (id, customer, amount, placed, day, uuid, note, tags, blob, score) = row;
        assert_eq!(json!(id), want["id"]);
        assert_eq!(json!(customer), want["customer"]);
        assert_eq!(json!(amount), want["amount"], "NUMERIC keeps the decimal");
        assert_eq!(
            json!(placed),
            want["placed"],
            "TIMESTAMPTZ keeps the instant"
        );
        assert_eq!(json!(day), want["day"]);
        assert_eq!(json!(uuid), want["ref"]);
        assert_eq!(json!(note), want["note"]);
        assert_eq!(serde_json::from_str::<Value>(tags).unwrap(), want["tags"]);
        assert_eq!(
            json!(base64_of(blob)),
            want["blob"],
            "BYTEA keeps the bytes"
        );
        assert_eq!(blob.len(), 3);
        assert_eq!(json!(score), want["score"]);
    }
}

/// A Redis stream whose entries hold Avro payloads (encoded by Confluent's serializer) in one
/// field: a `redis-streams` source in `avro` format reads them into the records that went in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_avro_fields_of_a_redis_stream_are_read() {
    let (Some(kafka), Some(redis_url), Some(registry), Some(py)) = (
        require(Service::Kafka),
        require(Service::Redis),
        require(Service::SchemaRegistry),
        python(),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (stream, output) = (unique_name("avro-stream"), unique_name("avro-from-stream"));
    topic(&kafka, &output).await;
    let sent = orders(20);
    let payloads = confluent_encode(&py, &registry, &stream, "order.avsc", dir.path(), &sent);
    let client = redis::Client::open(redis_url.as_str()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    for p in payloads.lines() {
        let _: String = redis::cmd("XADD")
            .arg(&stream)
            .arg("*")
            .arg("payload")
            .arg(b64(p))
            .query_async(&mut c)
            .await
            .unwrap();
    }
    let file = dir.path().join("stream.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"{}\"\n[checkpoint]\ninterval = \"500ms\"\ndir = \"state\"\n\
             [source]\ntype = \"redis-streams\"\nurl = \"{redis_url}\"\nstreams = [\"{stream}\"]\n\
             group = \"g\"\njson_field = \"payload\"\nformat = {{ type = \"avro\", {} }}\n\
             [sink]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopic = \"{output}\"\n",
            unique_name("avro-stream"),
            registry_table(&registry)
        ),
    )
    .unwrap();
    let job = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_rivus"))
            .args(["run", file.to_str().unwrap()])
            .current_dir(dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let got = read_json(&kafka, &output, sent.len());
    drop(job);
    assert_eq!(got, sent);
}
