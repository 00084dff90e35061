//! VRL in pipeline files against the real broker: `examples/kafka-vrl.toml` reads orders from
//! a topic, reshapes them with a `remap` (types converted, a timestamp, a hash), drops new
//! orders with a VRL `filter` and routes gold orders to their own topic with a VRL `route`.
//! Every output record is the remapped input, in the topic its route names; orders whose
//! amount is not a number reach the dead-letter file with VRL's message and the component.
//! `rivus validate` refuses a program with a type error, naming the line and column.

#[path = "support/run.rs"]
mod run;
#[path = "support/topics.rs"]
mod topics;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::ClientConfig;
use rivus_sdk::error_policy::DeadLetter;
use rivus_testkit::services::{require, unique_name, Service};
use serde_json::{json, Value};

/// The generator's record `n` (`cli/src/sections/generator.rs`).
fn order(n: u64) -> Value {
    let status = ["new", "paid", "shipped"][(n % 3) as usize];
    json!({
        "id": n,
        "user": format!("user-{}", n % 100),
        "amount": ((n.wrapping_mul(7919)) % 100_000) as f64 / 100.0,
        "status": status,
        "ts": 1_700_000_000_000u64 + n * 1000,
    })
}

/// `examples/kafka-vrl.toml` with its topics, group, state and name made unique.
fn example(dir: &Path, input: &str, gold: &str, standard: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/kafka-vrl.toml");
    let text = std::fs::read_to_string(path)
        .unwrap()
        .replace("name = \"kafka-vrl\"", &format!("name = \"{input}\""))
        .replace("topics = [\"orders\"]", &format!("topics = [\"{input}\"]"))
        .replace("rivus-orders-vrl", input)
        .replace("\"orders-gold\"", &format!("\"{gold}\""))
        .replace("\"orders-standard\"", &format!("\"{standard}\""));
    let file = dir.join("kafka-vrl.toml");
    std::fs::write(&file, text).unwrap();
    file.to_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vrl_example_remaps_filters_and_routes_orders_and_dead_letters_failures() {
    let Some(kafka) = require(Service::Kafka) else {
        return;
    };
    let (input, gold, standard) = (
        unique_name("vrl-in"),
        unique_name("vrl-gold"),
        unique_name("vrl-standard"),
    );
    for t in [&input, &gold, &standard] {
        topics::topic(&kafka, t).await;
    }
    let n = 3_000u64;
    let bad: Vec<Value> = (0..3)
        .map(|i| json!({"id": 1_000_000 + i, "user": "x", "amount": "lots", "status": "paid", "ts": 1}))
        .collect();
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &kafka)
        .create()
        .unwrap();
    for v in (0..n).map(order).chain(bad.iter().cloned()) {
        producer
            .send(
                FutureRecord::<(), _>::to(&input).payload(&v.to_string()),
                Duration::from_secs(30),
            )
            .await
            .unwrap();
    }

    let dir = tempfile::tempdir().unwrap();
    let file = example(dir.path(), &input, &gold, &standard);
    run::rivus_succeeds(dir.path(), &["run", &file]);

    // What the program makes of each order that is not new, by its topic.
    let mut want: BTreeMap<&str, BTreeMap<u64, Value>> = BTreeMap::new();
    for i in (0..n).filter(|i| i % 3 != 0) {
        let o = order(i);
        let cents = (o["amount"].as_f64().unwrap() * 100.0).round() as i64;
        let tier = if cents >= 50_000 { "gold" } else { "standard" };
        want.entry(tier).or_default().insert(
            i,
            json!({
                "id": i, "amount_cents": cents, "status": o["status"], "tier": tier,
                "user": o["user"].as_str().unwrap().to_uppercase(),
            }),
        );
    }
    for (tier, topic) in [("gold", &gold), ("standard", &standard)] {
        let want = &want[tier];
        let got: BTreeMap<u64, Value> = topics::read(&kafka, topic, want.len())
            .iter()
            .map(|p| {
                let v: Value = serde_json::from_slice(p).unwrap();
                (v["id"].as_u64().unwrap(), v)
            })
            .collect();
        assert_eq!(got.len(), want.len(), "{tier}: one record per order");
        for (id, v) in &got {
            let w = want
                .get(id)
                .unwrap_or_else(|| panic!("{tier}: order {id} does not belong"));
            for field in ["amount_cents", "status", "tier", "user"] {
                assert_eq!(v[field], w[field], "{tier}: order {id}: `{field}`: {v}");
            }
            assert!(v.get("amount").is_none() && v.get("ts").is_none(), "{v}");
            let r = v["ref"].as_str().unwrap();
            assert!(
                r.len() == 12 && r.chars().all(|c| c.is_ascii_hexdigit()),
                "{v}"
            );
        }
        // Timestamps: `ts` 1 700 000 000 000 ms is 2023-11-14T22:13:20Z, each order a second on.
        for (id, at) in [
            (1, "2023-11-14T22:13:21+00:00"),
            (100, "2023-11-14T22:15:00+00:00"),
        ] {
            if let Some(v) = got.get(&id) {
                assert_eq!(v["at"], at, "order {id}");
            }
        }
    }

    // The failures: each order kept whole, with VRL's message and the component.
    let letters: Vec<DeadLetter> = std::fs::read_to_string(
        dir.path()
            .join("target/examples/kafka-vrl.dead-letters.jsonl"),
    )
    .unwrap()
    .lines()
    .map(|l| DeadLetter::from_json(l.as_bytes()).unwrap())
    .collect();
    assert_eq!(letters.len(), bad.len(), "{letters:?}");
    for l in &letters {
        assert!(
            l.reason.contains("transforms.enrich") && l.reason.contains("to_float"),
            "{l:?}"
        );
        // Handed over by the transform's own task, not by a sink.
        assert_eq!(l.connector, "transform", "{l:?}");
        assert!(
            l.position
                .starts_with("transform transforms.enrich, record "),
            "{l:?}"
        );
        let payload: Value = serde_json::from_slice(&l.payload).unwrap();
        assert!(bad.contains(&payload), "the order kept whole: {payload}");
    }
}

#[test]
fn validate_refuses_a_vrl_type_error_naming_the_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(
        &file,
        "name = \"bad\"\n[sources.orders]\ntype = \"generator\"\n\
         [transforms.enrich]\ntype = \"remap\"\ninputs = [\"orders\"]\n\
         source = '''\n.n = 1\n.shout = upcase(.n)\n'''\n\
         [sinks.out]\ntype = \"stdout\"\ninputs = [\"enrich\"]\n",
    )
    .unwrap();
    let out = run::rivus(dir.path(), &["validate", file.to_str().unwrap()]);
    let said = format!("{}{}", run::text(&out.stdout), run::text(&out.stderr));
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("transforms.enrich.source:2:"), "{said}");
    assert!(said.contains("error[E110]"), "{said}");
    assert!(said.contains("upcase"), "{said}");
}

#[test]
fn rivus_test_runs_the_examples_tests_and_names_the_field_that_differs() {
    let dir = tempfile::tempdir().unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/kafka-vrl.toml");
    let env = [("RIVUS_KAFKA_BOOTSTRAP", "127.0.0.1:1")];
    let test = |file: &Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_rivus"))
            .args(["test", file.to_str().unwrap()])
            .envs(env)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let out = test(&example);
    let said = run::text(&out.stdout);
    assert!(out.status.success(), "{said}{}", run::text(&out.stderr));
    assert!(said.contains("3 passed, 0 failed"), "{said}");

    // One expectation changed: that test fails, naming the output, record and field.
    let changed = std::fs::read_to_string(&example)
        .unwrap()
        .replace("amount_cents = 61250", "amount_cents = 61251");
    let file = dir.path().join("changed.toml");
    std::fs::write(&file, changed).unwrap();
    let out = test(&file);
    let said = run::text(&out.stdout);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains(
            "test a paid order over 500 is gold, in whole cents, with its time ... FAILED"
        ),
        "{said}"
    );
    assert!(
        said.contains(
            "outputs `by_tier.gold` record 0: field `amount_cents`: expected 61251, got 61250"
        ),
        "{said}"
    );
    assert!(said.contains("2 passed, 1 failed"), "{said}");
}

/// The pipeline-file guide's VRL examples (the `remap`, `filter` and `route` block) compile.
#[test]
fn the_readme_vrl_examples_compile() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/pipelines.md"))
            .unwrap();
    let start = readme
        .find("[transforms.clean]")
        .expect("the guide's VRL block");
    let block = &readme[start..start + readme[start..].find("```").unwrap()];
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("readme.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"readme\"\n[sources.orders]\ntype = \"generator\"\n\
             [sources.changes]\ntype = \"generator\"\n{block}\n\
             [sinks.out]\ntype = \"stdout\"\ninputs = [\"live\", \"by_table.orders\", \
             \"by_table.customers\", \"by_table._unmatched\"]\n"
        ),
    )
    .unwrap();
    run::rivus_succeeds(dir.path(), &["validate", file.to_str().unwrap()]);
}

/// Kafka's metadata in VRL and in the sink's options: a program reads each record's topic and
/// offset and changes its key and headers, a filter drops records by a header, and the sink
/// writes each record to a topic named after its source topic with the key and headers the
/// program left — and never the metadata itself. A key that is not text comes back as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_metadata_is_read_and_set_in_vrl_and_names_the_sinks_topic_key_and_headers() {
    use rdkafka::message::{Header, OwnedHeaders};
    let Some(kafka) = require(Service::Kafka) else {
        return;
    };
    let (a, b) = (unique_name("meta-a"), unique_name("meta-b"));
    for t in [
        a.clone(),
        b.clone(),
        format!("{a}-copy"),
        format!("{b}-copy"),
    ] {
        topics::topic(&kafka, &t).await;
    }
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &kafka)
        .create()
        .unwrap();
    let n = 200u64;
    let skipped = |i: u64| i % 10 == 3;
    for topic in [&a, &b] {
        for i in 0..n {
            let mut headers = OwnedHeaders::new().insert(Header {
                key: "src",
                value: Some("test"),
            });
            if skipped(i) {
                headers = headers.insert(Header {
                    key: "skip",
                    value: Some("1"),
                });
            }
            let key = format!("k-{i}");
            let value = json!({"id": i}).to_string();
            producer
                .send(
                    FutureRecord::to(topic)
                        .key(&key)
                        .payload(&value)
                        .headers(headers),
                    Duration::from_secs(30),
                )
                .await
                .unwrap();
        }
    }
    // A key that is not UTF-8 text, last in `a`.
    let binary_key = [0xff_u8, 0x00, 0x01];
    producer
        .send(
            FutureRecord::to(&a)
                .key(&binary_key[..])
                .payload(&json!({"id": n}).to_string()),
            Duration::from_secs(30),
        )
        .await
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("meta.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"{a}\"\n\
             [sources.in]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\n\
             topics = [\"{a}\", \"{b}\"]\nstart = \"earliest\"\nbounded = true\n\
             [transforms.tag]\ntype = \"remap\"\ninputs = [\"in\"]\nsource = '''\n\
             .from = %kafka.topic\n.offset = %kafka.offset\n\
             if is_string(%kafka.key) {{ %kafka.key = upcase(string!(%kafka.key)) }}\n\
             %kafka.headers.seen = \"yes\"\n'''\n\
             [transforms.keep]\ntype = \"filter\"\ninputs = [\"tag\"]\n\
             condition = '%kafka.headers.skip != \"1\"'\n\
             [sinks.copy]\ntype = \"kafka\"\ninputs = [\"keep\"]\nbootstrap_servers = \"{kafka}\"\n\
             topic = \"{{%kafka.topic}}-copy\"\nkey_field = \"%kafka.key\"\n\
             headers_field = \"%kafka.headers\"\n"
        ),
    )
    .unwrap();
    run::rivus_succeeds(dir.path(), &["run", file.to_str().unwrap()]);

    for (topic, extra) in [(&a, 1), (&b, 0)] {
        let kept: Vec<u64> = (0..n).filter(|i| !skipped(*i)).collect();
        let got = topics::read_messages(&kafka, &format!("{topic}-copy"), kept.len() + extra);
        assert_eq!(got.len(), kept.len() + extra);
        for (m, i) in got.iter().zip(&kept) {
            let v: Value = serde_json::from_slice(&m.payload).unwrap();
            assert_eq!(
                v,
                json!({"id": i, "from": topic, "offset": i}),
                "{topic}: the value, without metadata"
            );
            assert_eq!(
                m.key.as_deref(),
                Some(format!("K-{i}").as_bytes()),
                "{topic}: {v}"
            );
            let mut headers = m.headers.clone();
            headers.sort();
            assert_eq!(
                headers,
                [
                    ("seen".to_owned(), b"yes".to_vec()),
                    ("src".to_owned(), b"test".to_vec())
                ],
                "{topic}: {v}"
            );
        }
        if extra == 1 {
            let last = got.last().unwrap();
            assert_eq!(last.key.as_deref(), Some(&binary_key[..]));
            let v: Value = serde_json::from_slice(&last.payload).unwrap();
            assert_eq!(v, json!({"id": n, "from": topic, "offset": n}));
        }
    }
}
