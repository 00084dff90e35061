//! What the worker tests and the workers bench share: a 12-partition topic, a feed into it,
//! a reader of the output, and `rivus run --worker` processes.
#![allow(dead_code)] // each includer uses a part

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
use rivus_testkit::services::{s3_credentials, unique_name};
use tokio::task::JoinHandle;

pub(crate) const PARTITIONS: i32 = 12;

pub(crate) async fn create_topic(bootstrap: &str, topic: &str) {
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

pub(crate) fn worker(dir: &Path, file: &Path, id: &str) -> Child {
    worker_command(dir, file, id).spawn().unwrap()
}

/// `rivus run FILE --worker ID` in `dir`, its output captured.
pub(crate) fn worker_command(dir: &Path, file: &Path, id: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rivus"));
    c.args(["run", file.to_str().unwrap(), "--worker", id])
        .current_dir(dir)
        .env(
            "RUST_LOG",
            "warn,rivus_connector_kafka=info,rivus_connector_redis=info",
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// A worker whose checkpoint store is the S3 server at `endpoint`.
pub(crate) fn worker_s3(dir: &Path, file: &Path, id: &str, endpoint: &str) -> Command {
    let (_, key, secret) = s3_credentials();
    let mut c = worker_command(dir, file, id);
    c.env("AWS_ENDPOINT_URL", endpoint)
        .env("AWS_ACCESS_KEY_ID", key)
        .env("AWS_SECRET_ACCESS_KEY", secret)
        .env("AWS_REGION", "us-east-1");
    c
}

/// Produces `n` JSON records `{"id", "p", "pad"}` of about 100 bytes (record `i` to partition
/// `i % 12`) in chunks of 1 500 with `pause` between them (100 ms: about 15 000 a second),
/// counting them in `produced`.
pub(crate) fn feed(
    kafka: &str,
    topic: &str,
    n: u64,
    pause: Duration,
    produced: Arc<AtomicU64>,
) -> JoinHandle<()> {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", kafka)
        .set("linger.ms", "5")
        .create()
        .unwrap();
    let topic = topic.to_owned();
    tokio::spawn(async move {
        for chunk in (0..n).collect::<Vec<_>>().chunks(1500) {
            let sends: Vec<_> = chunk
                .iter()
                .map(|i| {
                    let p = (*i % PARTITIONS as u64) as i32;
                    let value = format!("{{\"id\":{i},\"p\":{p},\"pad\":\"{:0>60}\"}}", i);
                    let producer = producer.clone();
                    let topic = topic.clone();
                    async move {
                        producer
                            .send(
                                FutureRecord::<(), _>::to(&topic)
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
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
        }
    })
}

/// [`feed`] at about 15 000 records a second: the count produced so far, and the task.
pub(crate) fn paced_feed(kafka: &str, topic: &str, n: u64) -> (Arc<AtomicU64>, JoinHandle<()>) {
    let produced = Arc::new(AtomicU64::new(0));
    let task = feed(
        kafka,
        topic,
        n,
        Duration::from_millis(100),
        Arc::clone(&produced),
    );
    (produced, task)
}

/// Waits (at most 60 s) until the feed produced `k` records.
pub(crate) async fn wait_produced(produced: &AtomicU64, k: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while produced.load(Ordering::Relaxed) < k {
        assert!(Instant::now() < deadline, "the feed is stuck");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reads `topic` from the beginning on a thread, recording the ids seen, the total count, and
/// per input partition when the first record with an id at or above `after` arrived.
pub(crate) struct Reader {
    pub ids: Arc<Mutex<HashSet<u64>>>,
    pub total: Arc<AtomicU64>,
    pub after: Arc<AtomicU64>,
    pub first_after: Arc<Mutex<HashMap<i32, Instant>>>,
    pub stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Reader {
    pub(crate) fn start(bootstrap: &str, topic: &str) -> Self {
        Self::start_with(bootstrap, topic, "read_uncommitted")
    }

    pub(crate) fn start_with(bootstrap: &str, topic: &str, isolation: &str) -> Self {
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

    pub(crate) fn distinct(&self) -> usize {
        self.ids.lock().len()
    }

    /// Waits (at most 90 s) until every id in `0..n` arrived; `what` says what should have
    /// (in failures).
    pub(crate) async fn wait_for_all(&self, n: u64, what: &str) {
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
pub(crate) fn interrupt(w: &Child) {
    Command::new("kill")
        .args(["-INT", &w.id().to_string()])
        .status()
        .unwrap();
}

/// The input partitions a worker's log says it held last (assignments minus revocations).
pub(crate) fn held_at_the_end(log: &str) -> BTreeSet<i32> {
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

/// A worker whose log is read while it runs: what it holds can be asked at any moment, and
/// its stderr pipe never fills up.
pub(crate) struct Watched {
    pub child: Child,
    log: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Watched {
    /// Spawns `command` (its stderr piped) and starts reading its log.
    pub(crate) fn spawn(mut command: Command) -> Self {
        let mut child = command.spawn().unwrap();
        let stderr = child.stderr.take().expect("stderr piped");
        let log = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&log);
        let reader = std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let mut log = sink.lock();
                log.push_str(&line);
                log.push('\n');
            }
        });
        Self {
            child,
            log,
            reader: Some(reader),
        }
    }

    /// The input partitions its log says it holds now.
    pub(crate) fn held(&self) -> BTreeSet<i32> {
        held_at_the_end(&self.log.lock())
    }

    /// Waits until its log says it holds a partition, at most `limit`.
    pub(crate) async fn wait_holding(&self, id: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.held().is_empty() {
            assert!(
                Instant::now() < deadline,
                "{id} held no partition within {limit:?}: {}",
                self.log.lock()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits for the process to end; its exit status and whole log.
    pub(crate) fn finish(mut self) -> (std::process::ExitStatus, String) {
        let status = self.child.wait().unwrap();
        if let Some(r) = self.reader.take() {
            r.join().unwrap();
        }
        let log = std::mem::take(&mut *self.log.lock());
        (status, log)
    }
}

/// Stops Kafka workers gracefully (SIGINT): each ends with success and got partitions from
/// the group. Returns each one's log.
pub(crate) fn stop_kafka_workers(workers: Vec<(&str, Child)>) -> Vec<(String, String)> {
    for (_, w) in &workers {
        interrupt(w);
    }
    workers
        .into_iter()
        .map(|(id, w)| {
            let out = w.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr).into_owned();
            assert!(out.status.success(), "{id}: {err}");
            assert!(
                err.contains("the group assigned partitions"),
                "{id} never got partitions: {err}"
            );
            (id.to_owned(), err)
        })
        .collect()
}
