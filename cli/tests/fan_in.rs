//! Fan-in through the `rivus` command against the real servers: two Kafka topics and a
//! RabbitMQ queue, each a named source tagged by a transform, into one PostgreSQL table
//! (exactly-once, no key: a record written twice would be a second row). The job is
//! SIGKILLed twice mid-run and started again; afterwards the table holds every record of every
//! source once.

#[path = "support/cdc.rs"]
mod cdc;
#[path = "support/rabbit.rs"]
mod rabbit;
#[path = "support/run.rs"]
mod run;
#[path = "support/topics.rs"]
mod topics;

use std::time::{Duration, Instant};

use rivus_testkit::services::{require, unique_name, Service};
use run::produce;
use sqlx::{Connection, Row};

/// Rows per origin in `table`, each as (rows, distinct ids).
async fn per_origin(pg: &str, table: &str) -> Vec<(String, i64, i64)> {
    let mut c = sqlx::PgConnection::connect(pg).await.unwrap();
    sqlx::query(&format!(
        "SELECT origin, COUNT(*), COUNT(DISTINCT id) FROM {table} GROUP BY origin ORDER BY origin"
    ))
    .fetch_all(&mut c)
    .await
    .map(|rows| {
        rows.iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect()
    })
    .unwrap_or_default()
}

async fn total(pg: &str, table: &str) -> i64 {
    per_origin(pg, table).await.iter().map(|(_, n, _)| n).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_topics_and_a_queue_fill_one_table_exactly_once_across_sigkills() {
    let (Some(kafka), Some(amqp), Some(pg)) = (
        require(Service::Kafka),
        require(Service::RabbitMq),
        require(Service::Postgres),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let unique = unique_name("fan_in").replace('-', "_");
    let (t1, t2, queue) = (
        format!("{unique}-a"),
        format!("{unique}-b"),
        format!("{unique}-q"),
    );
    let n: u64 = 20_000;
    for t in [&t1, &t2] {
        topics::topic(&kafka, t).await;
        produce(
            dir.path(),
            &format!("to-{t}"),
            n,
            &format!(
                "type = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopic = \"{t}\"\n\
                 exactly_once = true"
            ),
        );
    }
    rabbit::durable_queues(&amqp, &[&queue]).await;
    produce(
        dir.path(),
        "to-queue",
        n,
        &format!(
            "type = \"rabbitmq\"\nuri = \"{amqp}\"\nrouting_key = \"{queue}\"\n\
             correlation_id_field = \"id\""
        ),
    );
    let kafka_source = |t: &str| {
        format!(
            "type = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopics = [\"{t}\"]\n\
             start = \"earliest\"\nproperties = {{ \"isolation.level\" = \"read_committed\" }}\n"
        )
    };
    let tag = |name: &str, input: &str| {
        format!(
            "[transforms.{name}]\ntype = \"add\"\ninputs = [\"{input}\"]\n\
             fields = {{ origin = \"{input}\" }}\n"
        )
    };
    let file = dir.path().join("fan-in.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"{unique}\"\n[checkpoint]\ninterval = \"300ms\"\ndir = \"state\"\n\
             [sources.a]\n{}[sources.b]\n{}\
             [sources.q]\ntype = \"rabbitmq\"\nuri = \"{amqp}\"\nqueues = [\"{queue}\"]\n\
             correlation_ids = true\n{}{}{}\
             [sinks.orders]\ntype = \"jdbc\"\ninputs = [\"from_a\", \"from_b\", \"from_q\"]\n\
             url = \"{pg}\"\ntable = \"{unique}\"\nexactly_once = true\n\
             setup = \"CREATE TABLE IF NOT EXISTS {unique} (id BIGINT, \\\"user\\\" TEXT, \
             amount NUMERIC(10,2), status TEXT, ts BIGINT, origin TEXT)\"\n",
            kafka_source(&t1),
            kafka_source(&t2),
            tag("from_a", "a"),
            tag("from_b", "b"),
            tag("from_q", "q"),
        ),
    )
    .unwrap();
    for round in 0..2 {
        let before = total(&pg, &unique).await;
        let mut job = cdc::rivus(dir.path(), &file, &format!("run{round}"), &[]);
        let deadline = Instant::now() + Duration::from_secs(120);
        while total(&pg, &unique).await <= before {
            assert!(
                job.child().try_wait().unwrap().is_none(),
                "round {round}: the job ended"
            );
            assert!(
                Instant::now() < deadline,
                "round {round}: nothing committed"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        job.kill();
    }
    let mut job = cdc::rivus(dir.path(), &file, "last", &[]);
    let want = 3 * n as i64;
    let deadline = Instant::now() + Duration::from_secs(180);
    while total(&pg, &unique).await < want {
        assert!(
            job.child().try_wait().unwrap().is_none(),
            "the last run ended"
        );
        assert!(
            Instant::now() < deadline,
            "{} of {want} rows",
            total(&pg, &unique).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    cdc::stop(job, dir.path(), "last");
    let n = n as i64;
    assert_eq!(
        per_origin(&pg, &unique).await,
        [
            ("a".to_owned(), n, n),
            ("b".to_owned(), n, n),
            ("q".to_owned(), n, n)
        ],
        "every record of every source once"
    );
    cdc::exec(&pg, &format!("DROP TABLE IF EXISTS {unique}")).await;
}
