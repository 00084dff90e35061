//! Worker mode with real processes and real brokers: `rivus run FILE --worker ID` three
//! times on one 12-partition topic → a Kafka topic. One worker is SIGKILLed mid-stream and a
//! fourth joins later; the others take its partitions over through the consumer group, and
//! every record arrives: at-least-once with a plain sink; exactly once, as a `read_committed`
//! reader sees it, with the transactional sink (the source's offsets commit in its
//! transactions, KIP-447). Then two workers as competing
//! consumers of one RabbitMQ queue: one is SIGKILLed, the broker redelivers what it held to
//! the other, and every message arrives.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use rivus_testkit::services::{require, unique_name, Service};

const PARTITIONS: i32 = 12;

async fn create_topic(bootstrap: &str, topic: &str) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let r = admin
        .create_topics(
            &[NewTopic::new(topic, PARTITIONS, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        )
        .await
        .unwrap();
    assert!(r[0].is_ok(), "{r:?}");
}

fn worker(dir: &Path, file: &Path, id: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["run", file.to_str().unwrap(), "--worker", id])
        .current_dir(dir)
        .env(
            "RUST_LOG",
            "warn,rivus_connector_kafka=info,rivus_connector_redis=info",
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Reads `topic` from the beginning on a thread, recording the ids seen, the total count, and
/// per input partition when the first record with an id at or above `after` arrived.
struct Reader {
    ids: Arc<Mutex<HashSet<u64>>>,
    total: Arc<AtomicU64>,
    after: Arc<AtomicU64>,
    first_after: Arc<Mutex<HashMap<i32, Instant>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Reader {
    fn start(bootstrap: &str, topic: &str) -> Self {
        Self::start_with(bootstrap, topic, "read_uncommitted")
    }

    fn start_with(bootstrap: &str, topic: &str, isolation: &str) -> Self {
        let c: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", unique_name("reader"))
            .set("enable.auto.commit", "false")
            .set("isolation.level", isolation)
            .create()
            .unwrap();
        let mut tpl = TopicPartitionList::new();
        for p in 0..PARTITIONS {
            tpl.add_partition_offset(topic, p, Offset::Beginning)
                .unwrap();
        }
        c.assign(&tpl).unwrap();
        let r = Reader {
            ids: Arc::default(),
            total: Arc::default(),
            after: Arc::new(AtomicU64::new(u64::MAX)),
            first_after: Arc::default(),
            stop: Arc::default(),
        };
        let (ids, total, after, first_after, stop) = (
            Arc::clone(&r.ids),
            Arc::clone(&r.total),
            Arc::clone(&r.after),
            Arc::clone(&r.first_after),
            Arc::clone(&r.stop),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
                    let v: serde_json::Value =
                        serde_json::from_slice(m.payload().unwrap_or_default()).unwrap();
                    let id = v["id"].as_u64().unwrap();
                    ids.lock().insert(id);
                    total.fetch_add(1, Ordering::Relaxed);
                    if id >= after.load(Ordering::Relaxed) {
                        let p = v["p"].as_i64().unwrap() as i32;
                        first_after.lock().entry(p).or_insert_with(Instant::now);
                    }
                }
            }
        });
        r
    }

    fn distinct(&self) -> usize {
        self.ids.lock().len()
    }

    /// Waits (at most 90 s) until every id in `0..n` arrived; `what` says what should have
    /// (in failures).
    async fn wait_for_all(&self, n: u64, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(90);
        while (self.distinct() as u64) < n {
            assert!(
                Instant::now() < deadline,
                "only {} of {n} {what}",
                self.distinct()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let ids = self.ids.lock().clone();
        assert!(
            (0..n).all(|i| ids.contains(&i)),
            "not all {n} {what}: one is missing"
        );
    }
}

/// Asks a worker to stop gracefully (SIGINT).
fn interrupt(w: &Child) {
    Command::new("kill")
        .args(["-INT", &w.id().to_string()])
        .status()
        .unwrap();
}

#[tokio::test]
async fn workers_share_a_topic_and_take_over_a_killed_workers_partitions() {
    let Some(kafka) = require(Service::Kafka) else {
        return;
    };
    kafka_workers(&kafka, false).await;
}

#[tokio::test]
async fn workers_with_the_transactional_sink_deliver_every_record_exactly_once() {
    let Some(kafka) = require(Service::Kafka) else {
        return;
    };
    kafka_workers(&kafka, true).await;
}

/// Three workers, one killed at ~40 000 records, a fourth joining at ~80 000 (a rebalance
/// that revokes partitions from the living ones).
async fn kafka_workers(kafka: &str, exactly_once: bool) {
    let kafka = kafka.to_owned();
    let (input, output) = (unique_name("workers-in"), unique_name("workers-out"));
    create_topic(&kafka, &input).await;
    create_topic(&kafka, &output).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.toml");
    // A 6 s session (the broker's minimum): a killed worker's partitions move after at most
    // that long. Exactly-once: the killed worker's open transaction runs out after 10 s
    // (until then `read_committed` readers of the partitions it wrote wait).
    let sink_extra = if exactly_once {
        "exactly_once = true\nproperties = { \"transaction.timeout.ms\" = \"10000\" }\n"
    } else {
        ""
    };
    std::fs::write(
        &file,
        format!(
            "name = \"{input}\"\n[checkpoint]\ninterval = \"500ms\"\ndir = \"state\"\n\
             [source]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopics = [\"{input}\"]\n\
             properties = {{ \"session.timeout.ms\" = \"6000\", \"heartbeat.interval.ms\" = \"1000\" }}\n\
             [sink]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopic = \"{output}\"\n{sink_extra}"
        ),
    )
    .unwrap();

    let reader = if exactly_once {
        Reader::start_with(&kafka, &output, "read_committed")
    } else {
        Reader::start(&kafka, &output)
    };
    let n: u64 = 120_000;
    let produced = Arc::new(AtomicU64::new(0));
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &kafka)
        .set("linger.ms", "5")
        .create()
        .unwrap();
    let feed = {
        let (input, produced) = (input.clone(), Arc::clone(&produced));
        tokio::spawn(async move {
            // About 15 000 records/s for 8 s: the kill and the join fall mid-stream.
            for chunk in (0..n).collect::<Vec<_>>().chunks(1500) {
                let sends: Vec<_> = chunk
                    .iter()
                    .map(|i| {
                        let p = (*i % PARTITIONS as u64) as i32;
                        let value = format!("{{\"id\":{i},\"p\":{p},\"pad\":\"{:0>60}\"}}", i);
                        let producer = producer.clone();
                        let input = input.clone();
                        async move {
                            producer
                                .send(
                                    FutureRecord::<(), _>::to(&input)
                                        .partition(p)
                                        .payload(&value),
                                    Duration::from_secs(30),
                                )
                                .await
                                .map(|_| ())
                                .map_err(|(e, _)| e)
                        }
                    })
                    .collect();
                for r in futures::future::join_all(sends).await {
                    r.unwrap();
                }
                produced.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    let mut workers = vec![
        ("w1", worker(dir.path(), &file, "w1")),
        ("w2", worker(dir.path(), &file, "w2")),
        ("w3", worker(dir.path(), &file, "w3")),
    ];
    let wait_produced = |k: u64| {
        let produced = Arc::clone(&produced);
        async move {
            let deadline = Instant::now() + Duration::from_secs(60);
            while produced.load(Ordering::Relaxed) < k {
                assert!(Instant::now() < deadline, "the feed is stuck");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };

    // Mid-stream: kill w2. Records of its partitions produced after the kill can only arrive
    // through the worker that takes each partition over.
    wait_produced(40_000).await;
    reader
        .after
        .store(produced.load(Ordering::Relaxed) + 1500, Ordering::Relaxed);
    workers[1].1.kill().unwrap();
    let killed = Instant::now();
    let w2 = workers.remove(1).1.wait_with_output().unwrap();
    let w2_log = String::from_utf8_lossy(&w2.stderr);
    let w2_partitions = held_at_the_end(&w2_log);
    assert!(
        !w2_partitions.is_empty(),
        "w2 held no partition when it was killed: {w2_log}"
    );

    // A worker joins mid-stream; partitions move to it.
    wait_produced(80_000).await;
    workers.push(("w4", worker(dir.path(), &file, "w4")));
    feed.await.unwrap();
    reader.wait_for_all(n, "records arrived").await;
    let total = reader.total.load(Ordering::Relaxed);
    if exactly_once {
        // Late duplicates would arrive after the last distinct record: wait for a checkpoint
        // or two more of every worker.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let total = reader.total.load(Ordering::Relaxed);
        assert_eq!(total, n, "{} duplicates under read_committed", total - n);
    }
    let takeover = {
        let first = reader.first_after.lock();
        w2_partitions
            .iter()
            .map(|p| first[p].duration_since(killed))
            .max()
            .unwrap()
    };
    eprintln!(
        "workers (exactly_once = {exactly_once}): {n} records, {} duplicates; w2's partitions \
         {w2_partitions:?} taken over {:.1} s after the kill (session timeout 6 s{})",
        total - n,
        takeover.as_secs_f64(),
        if exactly_once {
            ", transaction timeout 10 s"
        } else {
            ""
        }
    );
    // Exactly-once: a read_committed reader also waits for the killed worker's open
    // transaction to run out (10 s) on the output partitions it wrote.
    let bound = Duration::from_secs(if exactly_once { 35 } else { 20 });
    assert!(takeover < bound, "took {takeover:?} to take over");

    // The living workers stop gracefully on SIGINT; the one that joined got partitions.
    for (_, w) in &workers {
        interrupt(w);
    }
    reader.stop.store(true, Ordering::Relaxed);
    let mut drained = 0;
    for (id, w) in workers {
        let out = w.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{id}: {err}");
        assert!(
            err.contains("the group assigned partitions"),
            "{id} never got partitions: {err}"
        );
        if exactly_once {
            assert!(
                err.contains("offsets commit in this sink's transactions"),
                "{id}: {err}"
            );
            drained += err
                .matches("revoked partitions committed by the sink's transaction")
                .count();
        }
        // Each worker checkpointed into its own directory.
        assert!(
            dir.path().join("state").join(id).join(".owner").exists(),
            "{id}"
        );
    }
    // The fourth worker's arrival revoked partitions from the others: each revocation
    // waited for a transaction holding those partitions' records and offsets.
    if exactly_once {
        assert!(
            drained > 0,
            "no revocation waited for the sink's transaction"
        );
    }
}

/// The input partitions a worker's log says it held last (assignments minus revocations).
fn held_at_the_end(log: &str) -> BTreeSet<i32> {
    let mut held = BTreeSet::new();
    for line in log.lines() {
        let assigned = line.contains("the group assigned partitions");
        if !assigned && !line.contains("the group revoked partitions") {
            continue;
        }
        // partitions=["topic/3", "topic/7"]
        for part in line.split('"').filter_map(|s| s.rsplit_once('/')) {
            if let Ok(p) = part.1.parse::<i32>() {
                if assigned {
                    held.insert(p);
                } else {
                    held.remove(&p);
                }
            }
        }
    }
    held
}

#[tokio::test]
async fn rabbitmq_workers_compete_for_a_queue_and_a_killed_workers_deliveries_reach_the_other() {
    let (Some(amqp), Some(kafka)) = (require(Service::RabbitMq), require(Service::Kafka)) else {
        return;
    };
    let queue = unique_name("workers-q");
    let output = unique_name("workers-rabbit-out");
    create_topic(&kafka, &output).await;
    let channel = lapin::Connection::connect(&amqp, Default::default())
        .await
        .unwrap()
        .create_channel()
        .await
        .unwrap();
    let declare = |passive| lapin::options::QueueDeclareOptions {
        durable: true,
        passive,
        ..Default::default()
    };
    channel
        .queue_declare(queue.as_str().into(), declare(false), Default::default())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let n = 10_000u64;
    let fill = dir.path().join("fill.toml");
    std::fs::write(
        &fill,
        format!(
            "name = \"fill\"\n[source]\ntype = \"generator\"\ncount = {n}\n\
             [sink]\ntype = \"rabbitmq\"\nuri = \"{amqp}\"\nrouting_key = \"{queue}\"\n"
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["run", fill.to_str().unwrap()])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let file = dir.path().join("p.toml");
    // Each worker holds at most `prefetch` unacknowledged deliveries, acknowledged when a
    // checkpoint completes: both get a share of the queue.
    std::fs::write(
        &file,
        format!(
            "name = \"{queue}\"\n[checkpoint]\ninterval = \"200ms\"\ndir = \"state\"\n\
             [source]\ntype = \"rabbitmq\"\nuri = \"{amqp}\"\nqueues = [\"{queue}\"]\nprefetch = 300\n\
             [sink]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopic = \"{output}\"\n"
        ),
    )
    .unwrap();
    let reader = Reader::start(&kafka, &output);
    let mut w1 = worker(dir.path(), &file, "w1");
    let w2 = worker(dir.path(), &file, "w2");
    // Both consume the queue.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let q = channel
            .queue_declare(queue.as_str().into(), declare(true), Default::default())
            .await
            .unwrap();
        if q.consumer_count() == 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the two workers never both consumed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    while reader.distinct() < 2_000 {
        assert!(Instant::now() < deadline, "messages arrive");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    w1.kill().unwrap();
    w1.wait().unwrap();
    let at_kill = reader.distinct() as u64;
    assert!(at_kill < n, "killed mid-stream ({at_kill} of {n})");
    reader
        .wait_for_all(n, "messages arrived after the kill")
        .await;
    let q = channel
        .queue_declare(queue.as_str().into(), declare(true), Default::default())
        .await
        .unwrap();
    eprintln!(
        "rabbitmq workers: {n} messages, {} duplicates, {at_kill} through both before the kill",
        reader.total.load(Ordering::Relaxed) - n
    );
    interrupt(&w2);
    reader.stop.store(true, Ordering::Relaxed);
    let out = w2.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(q.message_count(), 0, "the queue is drained");
}

#[tokio::test]
async fn redis_streams_workers_claim_a_killed_workers_pending_entries() {
    let (Some(redis_url), Some(kafka)) = (require(Service::Redis), require(Service::Kafka)) else {
        return;
    };
    let stream = unique_name("workers-stream");
    let output = unique_name("workers-redis-out");
    create_topic(&kafka, &output).await;
    let client = redis::Client::open(redis_url.as_str()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.toml");
    // Entries wait up to a checkpoint interval (1 s) for their acknowledgement; a killed
    // worker's pending ones are claimed once idle for 3 s.
    std::fs::write(
        &file,
        format!(
            "name = \"{stream}\"\n[checkpoint]\ninterval = \"1s\"\ndir = \"state\"\n\
             [source]\ntype = \"redis-streams\"\nurl = \"{redis_url}\"\nstreams = [\"{stream}\"]\n\
             group = \"g\"\njson_field = \"json\"\nclaim_idle = \"3s\"\n\
             [sink]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopic = \"{output}\"\n"
        ),
    )
    .unwrap();
    let reader = Reader::start(&kafka, &output);
    let n = 12_000u64;
    let feed = {
        let (mut con, stream) = (con.clone(), stream.clone());
        tokio::spawn(async move {
            // About 2 000 entries/s for 6 s: the kill falls mid-stream.
            for chunk in (0..n).collect::<Vec<_>>().chunks(200) {
                let mut pipe = redis::pipe();
                for i in chunk {
                    let json = format!("{{\"id\":{i},\"p\":0}}");
                    pipe.xadd(&stream, "*", &[("json", json)]).ignore();
                }
                let () = pipe.query_async(&mut con).await.unwrap();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let mut w1 = worker(dir.path(), &file, "w1");
    let w2 = worker(dir.path(), &file, "w2");
    let deadline = Instant::now() + Duration::from_secs(60);
    while reader.distinct() < 3_000 {
        assert!(Instant::now() < deadline, "entries arrive");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    w1.kill().unwrap();
    let w1_out = w1.wait_with_output().unwrap();
    let w1_log = String::from_utf8_lossy(&w1_out.stderr);
    // What the killed worker held: delivered to it, never acknowledged.
    let pending: redis::streams::StreamPendingCountReply = redis::cmd("XPENDING")
        .arg(&stream)
        .arg("g")
        .arg("-")
        .arg("+")
        .arg(100_000)
        .arg("rivus-w1-0")
        .query_async(&mut con)
        .await
        .unwrap();
    let held = pending.ids.len();
    assert!(
        held > 0,
        "w1 held no pending entry when killed (it consumed? {w1_log})"
    );
    feed.await.unwrap();
    reader
        .wait_for_all(n, "entries arrived after the kill")
        .await;
    // Nothing stays pending: the claimed entries are acknowledged by w2's checkpoints.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let summary: redis::streams::StreamPendingReply =
            redis::AsyncCommands::xpending(&mut con, &stream, "g")
                .await
                .unwrap();
        if summary.count() == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} entries still pending",
            summary.count()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "redis streams workers: {n} entries, {} duplicates, {held} pending with the killed worker \
         claimed by the other",
        reader.total.load(Ordering::Relaxed) - n
    );
    interrupt(&w2);
    reader.stop.store(true, Ordering::Relaxed);
    let out = w2.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("claimed entries pending longer than claim_idle"),
        "{err}"
    );
}
