//! Bad records keep their content: malformed payloads (invalid UTF-8, truncated JSON, a
//! 200 KB nesting bomb, NaN, a byte-order mark, a control character, a lone surrogate, an
//! empty message) mixed into good records, read from Kafka, RabbitMQ and a Redis stream into
//! PostgreSQL, plus one record PostgreSQL refuses. Every good record becomes a row and every
//! bad one a dead letter — in a file, a Kafka topic, a RabbitMQ queue or a Redis stream — with
//! its exact bytes (text, or base64 when not UTF-8), and a Redis entry's fields. Then the
//! file's letters are replayed through the `dead-letters` source once the table is fixed.

#[path = "support/rabbit.rs"]
mod rabbit;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rivus_sdk::error_policy::DeadLetter;
use rivus_testkit::services::{require, unique_name, Service};

const GOOD: u64 = 200;

/// The malformed payloads, each rejected by the JSON decoding of the source.
fn bad_payloads() -> Vec<Vec<u8>> {
    vec![
        vec![0xff, 0xfe, 0x00, 0x41],
        b"{\"n\": 1".to_vec(),
        "[".repeat(200_000).into_bytes(),
        b"{\"n\": NaN}".to_vec(),
        "\u{feff}{\"n\": 5}".as_bytes().to_vec(),
        b"{\"n\": \"a\x01b\"}".to_vec(),
        br#"{"n": "\ud800"}"#.to_vec(),
        Vec::new(),
    ]
}

/// The record the table refuses (`n` is a BIGINT).
const REFUSED: &[u8] = br#"{"n": "not a number"}"#;

/// Good records with the bad ones spread among them.
fn input() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = (0..GOOD)
        .map(|n| format!("{{\"n\": {n}}}").into_bytes())
        .collect();
    for (i, bad) in bad_payloads().into_iter().enumerate() {
        out.insert(10 + i * 20, bad);
    }
    out.insert(150, REFUSED.to_vec());
    out
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let file = dir.join(name);
    std::fs::write(&file, text).unwrap();
    file.to_str().unwrap().to_owned()
}

fn rivus(dir: &Path, file: &str) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["run", file])
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until `done()` (at most 60 s), then stops the job with SIGINT and checks it
/// ended well.
async fn run_until<F, Fut>(mut child: std::process::Child, done: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done().await {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            panic!(
                "the job ended ({status}): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(Instant::now() < deadline, "the job did not get through");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn pg(url: &str) -> sqlx::PgConnection {
    use sqlx::Connection;
    sqlx::PgConnection::connect(url).await.unwrap()
}

async fn rows(url: &str, table: &str) -> (i64, i64) {
    sqlx::query_as(&format!("SELECT COUNT(*), COUNT(DISTINCT n) FROM {table}"))
        .fetch_one(&mut pg(url).await)
        .await
        .unwrap_or((0, 0))
}

/// The pipeline file: `source` into a new table, dead letters to `dead_letters` (TOML lines).
fn pipeline(name: &str, source: &str, table: &str, pg_url: &str, dead_letters: &str) -> String {
    format!(
        "name = \"{name}\"\n[checkpoint]\ninterval = \"200ms\"\ndir = \"state-{name}\"\n\
         [errors]\npolicy = \"dead-letter\"\n{dead_letters}\n\
         [source]\n{source}\n\
         [sink]\ntype = \"jdbc\"\nurl = \"{pg_url}\"\ntable = \"{table}\"\n\
         setup = \"CREATE TABLE IF NOT EXISTS {table} (n BIGINT)\"\n"
    )
}

/// Checks the letters of one run: the source's letters hold exactly the bad payloads (with
/// the right encoding), the sink's letter holds the refused record.
fn check_letters(letters: &[DeadLetter], raw: &[String], source_connector: &str) {
    let from_source: BTreeSet<Vec<u8>> = letters
        .iter()
        .filter(|l| l.connector == source_connector)
        .map(|l| l.payload.clone())
        .collect();
    let want: BTreeSet<Vec<u8>> = bad_payloads().into_iter().collect();
    assert_eq!(
        from_source.len(),
        want.len(),
        "{source_connector}: one letter per bad payload"
    );
    assert!(
        from_source == want,
        "{source_connector}: the letters keep the payloads byte for byte"
    );
    let from_sink: Vec<&DeadLetter> = letters.iter().filter(|l| l.connector == "jdbc").collect();
    assert_eq!(from_sink.len(), 1, "one letter from the sink: {letters:?}");
    assert!(
        from_sink[0]
            .payload_text()
            .unwrap()
            .contains("not a number"),
        "the refused record is readable"
    );
    assert_eq!(letters.len(), want.len() + 1, "{letters:?}");
    for l in letters {
        assert!(!l.position.is_empty() && !l.reason.is_empty(), "{l:?}");
        assert!(l.time_ms > 1_700_000_000_000, "{l:?}");
    }
    // On the wire: text stays text, the invalid UTF-8 one is base64.
    assert_eq!(
        raw.iter()
            .filter(|r| r.contains(r#""encoding":"base64""#))
            .count(),
        1
    );
    assert!(raw
        .iter()
        .any(|r| r.contains(r#""payload":"{\"n\": NaN}""#)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_records_from_every_source_keep_their_content_and_can_be_replayed() {
    let (Some(kafka), Some(amqp), Some(redis_url), Some(pg_url)) = (
        require(Service::Kafka),
        require(Service::RabbitMq),
        require(Service::Redis),
        require(Service::Postgres),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let records = input();
    let total = records.len() as i64;

    // ---- Kafka → PostgreSQL, letters into a file, then into a Kafka topic ----
    let topic = unique_name("dl-in");
    {
        use rdkafka::producer::{FutureProducer, FutureRecord};
        let p: FutureProducer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", &kafka)
            .set("message.max.bytes", "1000000")
            .create()
            .unwrap();
        for r in &records {
            p.send(
                FutureRecord::<(), [u8]>::to(&topic).payload(r),
                Duration::from_secs(30),
            )
            .await
            .unwrap();
        }
    }
    let kafka_source = format!(
        "type = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopics = [\"{topic}\"]\n\
         start = \"earliest\"\nbounded = true"
    );
    let table = unique_name("dl_kafka").replace('-', "_");
    let file = write(
        dir.path(),
        "kafka-file.toml",
        &pipeline(
            "kafka-file",
            &kafka_source,
            &table,
            &pg_url,
            "dead_letter = \"letters.jsonl\"",
        ),
    );
    let out = rivus(dir.path(), &file).wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let raw: Vec<String> = std::fs::read_to_string(dir.path().join("letters.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let letters: Vec<DeadLetter> = raw
        .iter()
        .map(|l| DeadLetter::from_json(l.as_bytes()).unwrap())
        .collect();
    check_letters(&letters, &raw, "kafka");
    assert!(
        letters
            .iter()
            .all(|l| l.connector == "jdbc" || l.position.starts_with(&topic)),
        "positions name the topic, partition and offset"
    );
    assert_eq!(rows(&pg_url, &table).await, (GOOD as i64, GOOD as i64));
    assert_eq!(GOOD as i64 + letters.len() as i64, total);

    let dlq_topic = unique_name("dl-out");
    let table = unique_name("dl_kafka2").replace('-', "_");
    let file = write(
        dir.path(),
        "kafka-topic.toml",
        &pipeline(
            "kafka-topic",
            &kafka_source,
            &table,
            &pg_url,
            &format!(
                "destination = {{ type = \"kafka\", bootstrap_servers = \"{kafka}\", topic = \"{dlq_topic}\" }}"
            ),
        ),
    );
    let out = rivus(dir.path(), &file).wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let raw = read_kafka(&kafka, &dlq_topic).await;
    let from_topic: Vec<DeadLetter> = raw
        .iter()
        .map(|l| DeadLetter::from_json(l.as_bytes()).unwrap())
        .collect();
    check_letters(&from_topic, &raw, "kafka");

    // ---- RabbitMQ → PostgreSQL, letters into a queue ----
    let (queue, dlq) = (unique_name("dl-in"), unique_name("dl-out"));
    let table = unique_name("dl_rabbit").replace('-', "_");
    {
        use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
        let ch = rabbit::durable_queues(&amqp, &[&queue, &dlq]).await;
        ch.confirm_select(ConfirmSelectOptions::default())
            .await
            .unwrap();
        for r in &records {
            ch.basic_publish(
                "".into(),
                queue.as_str().into(),
                BasicPublishOptions::default(),
                r,
                lapin::BasicProperties::default().with_delivery_mode(2),
            )
            .await
            .unwrap()
            .await
            .unwrap();
        }
        let _ = ch.close(200, "done".into()).await;
    }
    let file = write(
        dir.path(),
        "rabbit.toml",
        &pipeline(
            "rabbit",
            &format!("type = \"rabbitmq\"\nuri = \"{amqp}\"\nqueues = [\"{queue}\"]"),
            &table,
            &pg_url,
            &format!(
                "destination = {{ type = \"rabbitmq\", uri = \"{amqp}\", queue = \"{dlq}\" }}"
            ),
        ),
    );
    let check = Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["check", &file])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success() && said.contains("dead letters rabbitmq (amqp://guest:<redacted>@"),
        "check reaches the dead-letter destination: {said}"
    );
    let want = bad_payloads().len() as u64 + 1;
    run_until(rivus(dir.path(), &file), || {
        let (amqp, dlq, pg_url, table) = (amqp.clone(), dlq.clone(), pg_url.clone(), table.clone());
        async move {
            rows(&pg_url, &table).await.0 == GOOD as i64
                && rabbit::depth(&amqp, &dlq).await.map(u64::from) == Some(want)
        }
    })
    .await;
    let raw = drain_queue(&amqp, &dlq).await;
    let letters: Vec<DeadLetter> = raw
        .iter()
        .map(|l| DeadLetter::from_json(l.as_bytes()).unwrap())
        .collect();
    check_letters(&letters, &raw, "rabbitmq");

    // ---- Redis stream → PostgreSQL, letters into a stream ----
    let (stream, dl_stream) = (unique_name("dl-in"), unique_name("dl-out"));
    let table = unique_name("dl_redis").replace('-', "_");
    let mut con = redis::Client::open(redis_url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    for r in &records {
        let _: String = redis::cmd("XADD")
            .arg(&stream)
            .arg("*")
            .arg("payload")
            .arg(r.as_slice())
            .query_async(&mut con)
            .await
            .unwrap();
    }
    let file = write(
        dir.path(),
        "redis.toml",
        &pipeline(
            "redis",
            &format!(
                "type = \"redis-streams\"\nurl = \"{redis_url}\"\nstreams = [\"{stream}\"]\n\
                 group = \"g\"\njson_field = \"payload\""
            ),
            &table,
            &pg_url,
            &format!(
                "destination = {{ type = \"redis\", url = \"{redis_url}\", stream = \"{dl_stream}\" }}"
            ),
        ),
    );
    run_until(rivus(dir.path(), &file), || {
        let (mut con, dl, pg_url, table) = (
            con.clone(),
            dl_stream.clone(),
            pg_url.clone(),
            table.clone(),
        );
        async move {
            let n: u64 = redis::cmd("XLEN")
                .arg(&dl)
                .query_async(&mut con)
                .await
                .unwrap_or(0);
            rows(&pg_url, &table).await.0 == GOOD as i64 && n == want
        }
    })
    .await;
    type Entry = (String, Vec<(String, Vec<u8>)>);
    let entries: Vec<Entry> = redis::cmd("XRANGE")
        .arg(&dl_stream)
        .arg("-")
        .arg("+")
        .query_async(&mut con)
        .await
        .unwrap();
    let raw: Vec<String> = entries
        .iter()
        .map(|(_, fields)| {
            let letter = fields.iter().find(|(k, _)| k == "letter").unwrap();
            String::from_utf8(letter.1.clone()).unwrap()
        })
        .collect();
    let letters: Vec<DeadLetter> = raw
        .iter()
        .map(|l| DeadLetter::from_json(l.as_bytes()).unwrap())
        .collect();
    check_letters(&letters, &raw, "redis-streams");
    for l in letters.iter().filter(|l| l.connector == "redis-streams") {
        assert_eq!(
            l.fields,
            vec![("payload".to_owned(), l.payload.clone())],
            "a stream entry's letter carries its fields"
        );
        assert!(l.position.starts_with(&stream), "{}", l.position);
    }

    // ---- Replay the file's letters once the table is fixed ----
    // The refused record fits a table whose `n` is text; the malformed ones are still not
    // JSON and go to the replay's own dead-letter file.
    let fixed = unique_name("dl_fixed").replace('-', "_");
    let file = write(
        dir.path(),
        "replay.toml",
        &format!(
            "name = \"replay\"\n[checkpoint]\ninterval = \"200ms\"\ndir = \"state-replay\"\n\
             [errors]\npolicy = \"dead-letter\"\ndead_letter = \"still-bad.jsonl\"\n\
             [source]\ntype = \"dead-letters\"\npath = \"letters.jsonl\"\n\
             [sink]\ntype = \"jdbc\"\nurl = \"{pg_url}\"\ntable = \"{fixed}\"\n\
             setup = \"CREATE TABLE IF NOT EXISTS {fixed} (n TEXT)\"\n"
        ),
    );
    let out = rivus(dir.path(), &file).wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let replayed: Vec<String> = sqlx::query_scalar(&format!("SELECT n FROM {fixed}"))
        .fetch_all(&mut pg(&pg_url).await)
        .await
        .unwrap();
    assert_eq!(replayed, ["not a number"]);
    let still_bad: Vec<DeadLetter> = std::fs::read_to_string(dir.path().join("still-bad.jsonl"))
        .unwrap()
        .lines()
        .map(|l| DeadLetter::from_json(l.as_bytes()).unwrap())
        .collect();
    let still: BTreeSet<Vec<u8>> = still_bad.iter().map(|l| l.payload.clone()).collect();
    assert!(
        still == bad_payloads().into_iter().collect(),
        "the malformed payloads are kept again, byte for byte"
    );
    assert!(still_bad.iter().all(|l| l.position.starts_with(&topic)));
}

async fn read_kafka(bootstrap: &str, topic: &str) -> Vec<String> {
    let (b, t) = (bootstrap.to_owned(), topic.to_owned());
    tokio::task::spawn_blocking(move || {
        use rdkafka::consumer::{BaseConsumer, Consumer};
        use rdkafka::Message;
        let c: BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", &b)
            .set("group.id", unique_name("dl-reader"))
            .set("auto.offset.reset", "earliest")
            .set("enable.auto.commit", "false")
            .create()
            .unwrap();
        c.subscribe(&[&t]).unwrap();
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while out.len() < bad_payloads().len() + 1 && Instant::now() < deadline {
            if let Some(Ok(m)) = c.poll(Duration::from_millis(200)) {
                out.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
            }
        }
        out
    })
    .await
    .unwrap()
}

async fn drain_queue(amqp: &str, queue: &str) -> Vec<String> {
    let conn = lapin::Connection::connect(amqp, lapin::ConnectionProperties::default())
        .await
        .unwrap();
    let ch = conn.create_channel().await.unwrap();
    let mut out = Vec::new();
    while let Some(m) = ch
        .basic_get(
            queue.into(),
            lapin::options::BasicGetOptions { no_ack: true },
        )
        .await
        .unwrap()
    {
        out.push(String::from_utf8(m.delivery.data.clone()).unwrap());
    }
    let _ = conn.close(200, "done".into()).await;
    out
}
