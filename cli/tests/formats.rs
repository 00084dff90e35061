//! Payload formats through the `rivus` command: Kafka → Kafka with `format = "bytes"` copies
//! every payload byte for byte (binary, malformed JSON, 200 KB, empty), and with
//! `format = "text"` copies every UTF-8 payload while the one that is not UTF-8 becomes a dead
//! letter holding its exact bytes.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::ClientConfig;
use rivus_sdk::error_policy::DeadLetter;
use rivus_testkit::services::{require, unique_name, Service};

#[path = "support/topics.rs"]
mod topics;
use topics::{read, topic};

#[path = "support/run.rs"]
mod run;
use run::Succeeds;

/// Payloads no JSON pipeline would carry unchanged, then ordinary ones.
fn payloads() -> Vec<Vec<u8>> {
    let mut p = vec![
        vec![0xff, 0xfe, 0x00, 0x41],
        b"{\"n\": 1".to_vec(),
        "[".repeat(200_000).into_bytes(),
        b"{ \"b\" : 2,\n\"a\":1 }".to_vec(),
        "caf\u{e9} \u{1F600} plain text".as_bytes().to_vec(),
        br#"{"n": "\ud800"}"#.to_vec(),
        Vec::new(),
    ];
    p.extend((0..100).map(|i| format!("line {i}: {}", "x".repeat(i * 10)).into_bytes()));
    p
}

/// Runs `rivus run` on a Kafka → Kafka file with `format` on both sides; a dead-letter file
/// `letters.jsonl` in `dir` takes what the source refuses.
fn run(dir: &Path, kafka: &str, from: &str, to: &str, format: &str) {
    let file = dir.join(format!("{format}.toml"));
    std::fs::write(
        &file,
        format!(
            "name = \"{}\"\n[errors]\npolicy = \"dead-letter\"\ndead_letter = \"letters.jsonl\"\n\
             [source]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopics = [\"{from}\"]\n\
             start = \"earliest\"\nbounded = true\nformat = \"{format}\"\n\
             [sink]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopic = \"{to}\"\n\
             format = \"{format}\"\nproperties = {{ \"message.max.bytes\" = \"1000000\" }}\n",
            unique_name("formats")
        ),
    )
    .unwrap();
    Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["run", file.to_str().unwrap()])
        .current_dir(dir)
        .succeeds();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_payloads_pass_through_as_bytes_and_as_text() {
    let Some(kafka) = require(Service::Kafka) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (input, as_bytes, as_text) = (
        unique_name("fmt-in"),
        unique_name("fmt-bytes"),
        unique_name("fmt-text"),
    );
    for t in [&input, &as_bytes, &as_text] {
        topic(&kafka, t).await;
    }
    let sent = payloads();
    let p: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &kafka)
        .set("message.max.bytes", "1000000")
        .create()
        .unwrap();
    for payload in &sent {
        p.send(
            FutureRecord::<(), [u8]>::to(&input).payload(payload),
            Duration::from_secs(30),
        )
        .await
        .unwrap();
    }

    run(dir.path(), &kafka, &input, &as_bytes, "bytes");
    let copied = read(&kafka, &as_bytes, sent.len());
    assert_eq!(copied.len(), sent.len());
    for (i, (a, b)) in sent.iter().zip(&copied).enumerate() {
        assert!(
            a == b,
            "payload {i} changed: {} → {} bytes",
            a.len(),
            b.len()
        );
    }
    let letters = std::fs::read_to_string(dir.path().join("letters.jsonl")).unwrap_or_default();
    assert!(letters.is_empty(), "bytes refuses nothing: {letters}");

    run(dir.path(), &kafka, &input, &as_text, "text");
    let text: Vec<Vec<u8>> = sent
        .iter()
        .filter(|p| std::str::from_utf8(p).is_ok())
        .cloned()
        .collect();
    assert_eq!(text.len(), sent.len() - 1, "one payload is not UTF-8");
    assert_eq!(read(&kafka, &as_text, text.len()), text);
    let letters: Vec<DeadLetter> = std::fs::read_to_string(dir.path().join("letters.jsonl"))
        .unwrap()
        .lines()
        .map(|l| DeadLetter::from_json(l.as_bytes()).unwrap())
        .collect();
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert_eq!(letters[0].payload, sent[0], "the letter keeps the bytes");
    assert!(letters[0].reason.contains("UTF-8"), "{}", letters[0].reason);
    assert_eq!(letters[0].position, format!("{input}/0@0"));
}
