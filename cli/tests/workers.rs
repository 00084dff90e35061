//! Worker mode with real processes and real brokers: `rivus run FILE --worker ID` three
//! times on one 12-partition topic → a Kafka topic. Workers joining and leaving gracefully
//! repeat nothing (a revocation waits for a completed checkpoint). One worker is SIGKILLed mid-stream and a
//! fourth joins later; the others take its partitions over through the consumer group, and
//! every record arrives: at-least-once with a plain sink; exactly once, as a `read_committed`
//! reader sees it, with the transactional sink (the source's offsets commit in its
//! transactions, KIP-447). Then two workers as competing
//! consumers of one RabbitMQ queue: one is SIGKILLed, the broker redelivers what it held to
//! the other, and every message arrives. Kafka → PostgreSQL with the checkpoints in the S3
//! server: a killed worker loses nothing (at-least-once across workers; exactly-once into SQL
//! across workers is `workers_sql.rs`), and a second process with the same worker id is
//! refused.

#[path = "support/http.rs"]
mod http;
#[path = "support/workers.rs"]
mod support;

use std::process::{Child, Command};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rivus_testkit::services::{require, s3_credentials, unique_name, Service};
use support::*;

#[path = "support/run.rs"]
mod run;
use run::Succeeds;

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

/// Kafka → Kafka in group mode, checkpoints every 500 ms, a 6 s session.
fn kafka_pipeline(kafka: &str, input: &str, output: &str, sink_extra: &str) -> String {
    format!(
        "name = \"{input}\"\n[checkpoint]\ninterval = \"500ms\"\ndir = \"state\"\n\
         [source]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopics = [\"{input}\"]\n\
         properties = {{ \"session.timeout.ms\" = \"6000\", \"heartbeat.interval.ms\" = \"1000\" }}\n\
         [sink]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopic = \"{output}\"\n{sink_extra}"
    )
}

#[tokio::test]
async fn workers_joining_and_leaving_gracefully_repeat_nothing() {
    let Some(kafka) = require(Service::Kafka) else {
        return;
    };
    let (input, output) = (
        unique_name("workers-move-in"),
        unique_name("workers-move-out"),
    );
    create_topic(&kafka, &input).await;
    create_topic(&kafka, &output).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.toml");
    // At-least-once sink: only the revocation's wait for a completed checkpoint keeps the
    // new owner from repeating what the old one emitted.
    std::fs::write(&file, kafka_pipeline(&kafka, &input, &output, "")).unwrap();
    let reader = Reader::start(&kafka, &output);
    let n: u64 = 90_000;
    let (produced, feed) = paced_feed(&kafka, &input, n);
    let w1 = worker(dir.path(), &file, "w1");
    let w2 = worker(dir.path(), &file, "w2");
    // A third joins (partitions move to it), later the first leaves (its partitions move).
    wait_produced(&produced, 25_000).await;
    let w3 = worker(dir.path(), &file, "w3");
    wait_produced(&produced, 60_000).await;
    interrupt(&w1);
    let w1 = w1.wait_with_output().unwrap();
    assert!(
        w1.status.success(),
        "{}",
        String::from_utf8_lossy(&w1.stderr)
    );
    feed.await.unwrap();
    reader.wait_for_all(n, "records arrived").await;
    // Late duplicates would come after the last distinct record: a few checkpoints more.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let total = reader.total.load(Ordering::Relaxed);
    reader.stop.store(true, Ordering::Relaxed);
    let mut drained = 0;
    let mut logs = vec![String::from_utf8_lossy(&w1.stderr).into_owned()];
    for w in [w2, w3] {
        interrupt(&w);
        let out = w.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        logs.push(err);
    }
    for log in &logs {
        drained += log
            .matches("revoked partitions committed by a completed checkpoint")
            .count();
    }
    eprintln!(
        "workers joining and leaving: {n} records, {} duplicates, {drained} revocations waited \
         for a checkpoint",
        total - n
    );
    // Where a duplicate would come from: partitions given up before a checkpoint covered
    // them (the drain's limit, or a revocation while a worker closes).
    let released: Vec<&str> = logs
        .iter()
        .flat_map(|l| l.lines())
        .filter(|l| l.contains("released before") || l.contains("revoked partitions"))
        .collect();
    assert_eq!(
        total,
        n,
        "{} duplicates after graceful rebalances; the workers' revocations:\n{}",
        total - n,
        released.join("\n")
    );
    assert!(drained > 0, "no revocation waited: {logs:?}");
    assert!(
        logs[2].contains("the group assigned partitions"),
        "w3 never got partitions: {}",
        logs[2]
    );
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
    std::fs::write(&file, kafka_pipeline(&kafka, &input, &output, sink_extra)).unwrap();

    let reader = if exactly_once {
        Reader::start_with(&kafka, &output, "read_committed")
    } else {
        Reader::start(&kafka, &output)
    };
    let n: u64 = 120_000;
    // About 15 000 records/s for 8 s: the kill and the join fall mid-stream.
    let (produced, feed) = paced_feed(&kafka, &input, n);

    let mut workers = vec![
        ("w1", worker(dir.path(), &file, "w1")),
        ("w3", worker(dir.path(), &file, "w3")),
    ];
    let mut w2 = Watched::spawn(worker_command(dir.path(), &file, "w2"));

    // Mid-stream, while it holds partitions (the three joining at once rebalance several
    // times, and an exactly-once job whose offsets commit meets a new generation restarts
    // and rejoins): kill w2. Records of its partitions produced after the kill can only
    // arrive through the worker that takes each partition over.
    wait_produced(&produced, 40_000).await;
    w2.wait_holding("w2", Duration::from_secs(60)).await;
    reader
        .after
        .store(produced.load(Ordering::Relaxed) + 1500, Ordering::Relaxed);
    w2.child.kill().unwrap();
    let killed = Instant::now();
    let (_, w2_log) = w2.finish();
    let w2_partitions = held_at_the_end(&w2_log);
    assert!(
        !w2_partitions.is_empty(),
        "w2 held no partition when it was killed: {w2_log}"
    );

    // A worker joins mid-stream, once the group has moved w2's partitions (joining earlier,
    // it would just get those, and no living worker would give any up); partitions move to it.
    wait_produced(&produced, 80_000).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !w2_partitions
        .iter()
        .all(|p| reader.first_after.lock().contains_key(p))
    {
        assert!(
            Instant::now() < deadline,
            "w2's partitions were never taken over"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let w4_http = http::free_port();
    let mut w4 = worker_command(dir.path(), &file, "w4");
    w4.args(["--http", &format!("127.0.0.1:{w4_http}")]);
    workers.push(("w4", w4.spawn().unwrap()));
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

    // The joiner's partitions may come after the last record arrived (its join waits for the
    // others' revocations, which wait for a checkpoint): wait until it has some, as its
    // per-partition lag (published from each statistics report) shows.
    wait_for_partitions("w4", w4_http).await;
    // The living workers stop gracefully on SIGINT; the one that joined got partitions.
    reader.stop.store(true, Ordering::Relaxed);
    let mut drained = 0;
    for (id, err) in stop_kafka_workers(workers) {
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
            dir.path().join("state").join(&id).join(".owner").exists(),
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
    Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["run", fill.to_str().unwrap()])
        .current_dir(dir.path())
        .succeeds();

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

/// Rows in `table`, and distinct ids among them.
async fn count(db: &mut sqlx::PgConnection, table: &str) -> (i64, i64) {
    sqlx::query_as(&format!("SELECT COUNT(*), COUNT(DISTINCT id) FROM {table}"))
        .fetch_one(db)
        .await
        .unwrap()
}

#[tokio::test]
async fn kafka_to_postgres_workers_with_checkpoints_in_s3_lose_nothing_when_one_is_killed() {
    let (Some(kafka), Some(pg), Some(s3)) = (
        require(Service::Kafka),
        require(Service::Postgres),
        require(Service::S3),
    ) else {
        return;
    };
    use sqlx::Connection;
    let mut db = sqlx::PgConnection::connect(&pg).await.unwrap();
    let input = unique_name("workers-pg-in");
    create_topic(&kafka, &input).await;
    let table = unique_name("workers_pg").replace('-', "_");
    let (bucket, _, _) = s3_credentials();
    let dir = tempfile::tempdir().unwrap();
    let pipeline = |store: &str, extra: &str| {
        format!(
            "name = \"{input}\"\n[checkpoint]\ninterval = \"500ms\"\nstore = \"{store}\"\nlease = \"5s\"\n\
             [source]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopics = [\"{input}\"]\n\
             properties = {{ \"session.timeout.ms\" = \"6000\", \"heartbeat.interval.ms\" = \"1000\" }}\n\
             [sink]\ntype = \"jdbc\"\nurl = \"{pg}\"\ntable = \"{table}\"\n{extra}\
             setup = \"CREATE TABLE IF NOT EXISTS {table} (id BIGINT, p INT, pad TEXT)\"\n"
        )
    };

    // The table has no key: a record written twice is a second row.
    let file = dir.path().join("p.toml");
    let store = format!("s3://{bucket}/{}", unique_name("workers-pg"));
    std::fs::write(&file, pipeline(&store, "")).unwrap();
    let n: u64 = 60_000;
    // Each worker serves /metrics, where its per-partition lag shows that it holds partitions.
    let ports: Vec<(&str, u16)> = ["w1", "w2", "w3", "w4"]
        .into_iter()
        .map(|id| (id, http::free_port()))
        .collect();
    let spawn = |id: &str| {
        let port = ports.iter().find(|(w, _)| *w == id).unwrap().1;
        worker_s3(dir.path(), &file, id, &s3)
            .args(["--http", &format!("127.0.0.1:{port}")])
            .spawn()
            .unwrap()
    };
    let mut workers: Vec<(&str, Child)> = ["w1", "w2", "w3"]
        .into_iter()
        .map(|id| (id, spawn(id)))
        .collect();
    let (produced, feed) = paced_feed(&kafka, &input, n);
    // Rows arrive: every worker holds its lease by now.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (exists,): (bool,) = sqlx::query_as("SELECT to_regclass($1) IS NOT NULL")
            .bind(&table)
            .fetch_one(&mut db)
            .await
            .unwrap();
        if exists && count(&mut db, &table).await.0 > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "no row arrived");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The same worker id a second time: refused, naming the holder of the store's lease.
    let twin = worker_s3(dir.path(), &file, "w1", &s3).output().unwrap();
    let err = String::from_utf8_lossy(&twin.stderr);
    assert!(!twin.status.success(), "a second w1 must not run: {err}");
    assert!(
        err.contains(&format!("checkpoint store `{store}/w1`")),
        "{err}"
    );
    assert!(err.contains("held by job"), "{err}");

    // Mid-stream: kill w2; later w4 joins.
    wait_produced(&produced, 20_000).await;
    workers[1].1.kill().unwrap();
    let killed = Instant::now();
    workers.remove(1).1.wait().unwrap();
    let at_kill = count(&mut db, &table).await.1;
    wait_produced(&produced, 40_000).await;
    workers.push(("w4", spawn("w4")));
    feed.await.unwrap();

    let deadline = Instant::now() + Duration::from_secs(90);
    let (rows, distinct) = loop {
        let (rows, distinct) = count(&mut db, &table).await;
        if distinct as u64 == n {
            break (rows, distinct);
        }
        assert!(
            Instant::now() < deadline,
            "only {distinct} of {n} ids arrived ({rows} rows)"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let (min, max): (i64, i64) = sqlx::query_as(&format!("SELECT MIN(id), MAX(id) FROM {table}"))
        .fetch_one(&mut db)
        .await
        .unwrap();
    assert_eq!((min, max), (0, n as i64 - 1), "ids outside 0..{n}");
    eprintln!(
        "kafka → postgres workers: {n} records, {} duplicate rows ({at_kill} distinct when w2 \
         was killed; every id {:.1} s after the kill)",
        rows - distinct,
        killed.elapsed().as_secs_f64()
    );
    // A worker's assignment can complete after the last row arrived (a join waits for the
    // others' revocations, which wait for a checkpoint).
    for (id, _) in &workers {
        let port = ports.iter().find(|(w, _)| w == id).unwrap().1;
        wait_for_partitions(id, port).await;
    }
    stop_kafka_workers(workers);
}

/// Waits (at most 60 s) until the worker serving `/metrics` on `port` holds partitions, as
/// its per-partition lag (published from each statistics report) shows.
async fn wait_for_partitions(id: &str, port: u16) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !http::metrics(port).is_some_and(|m| m.contains("rivus_kafka_consumer_lag{")) {
        assert!(
            Instant::now() < deadline,
            "{id} got no partition within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
