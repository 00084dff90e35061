//! RabbitMQ and Redis through the `rivus` command: generator → RabbitMQ queue, then the queue
//! → Redis hashes keyed by each message's metadata (routing key, correlation id; stopped with
//! SIGINT once everything arrived); Redis stream → stdout; and the
//! example file RabbitMQ → PostgreSQL.

#[path = "support/http.rs"]
mod http;
#[path = "support/rabbit.rs"]
mod rabbit;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use http::{free_port, request};
use redis::AsyncCommands;
use rivus_testkit::services::{require, unique_name, Service};

#[path = "support/run.rs"]
mod run;
use run::Succeeds;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let file = dir.join(name);
    std::fs::write(&file, text).unwrap();
    file.to_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_go_through_rabbitmq_into_redis() {
    let (Some(amqp), Some(redis_url)) = (require(Service::RabbitMq), require(Service::Redis))
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let queue = unique_name("orders");
    let prefix = unique_name("cli");
    let n = 2000;

    let to_queue = write(
        dir.path(),
        "to-queue.toml",
        &format!(
            "name = \"to-queue\"\n[source]\ntype = \"generator\"\ncount = {n}\n\
             [sink]\ntype = \"rabbitmq\"\nuri = \"{amqp}\"\nrouting_key = \"{queue}\"\n\
             correlation_id_field = \"id\"\n"
        ),
    );
    // The queue must exist before the generator publishes to it.
    rabbit::durable_queues(&amqp, &[&queue]).await;
    let out = Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["run", &to_queue])
        .current_dir(dir.path())
        .succeeds();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("written     {n} records")),
        "{stdout}"
    );

    let to_redis = write(
        dir.path(),
        "to-redis.toml",
        &format!(
            "name = \"to-redis\"\n[checkpoint]\ninterval = \"200ms\"\ndir = \"state\"\n\
             [source]\ntype = \"rabbitmq\"\nuri = \"{amqp}\"\nqueues = [\"{queue}\"]\n\
             correlation_ids = true\n\
             [sink]\ntype = \"redis\"\nurl = \"{redis_url}\"\ncommand = \"hset\"\n\
             key = \"{prefix}:{{%rabbitmq.routing_key}}:{{user}}\"\n\
             field = \"{{%rabbitmq.correlation_id}}\"\n"
        ),
    );
    let child = Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["run", &to_redis])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut con = redis::Client::open(redis_url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    // Keys and fields from each message's metadata: the routing key it was published with
    // (the queue's name) and its correlation id (the order's id).
    let prefix = format!("{prefix}:{queue}");
    let total = |mut con: redis::aio::MultiplexedConnection, prefix: String| async move {
        let mut sum = 0usize;
        for u in 0..50 {
            let n: usize = con.hlen(format!("{prefix}:user-{u}")).await.unwrap();
            sum += n;
        }
        sum
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while total(con.clone(), prefix.clone()).await < n {
        assert!(Instant::now() < deadline, "every order reached Redis");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(total(con.clone(), prefix.clone()).await, n);
    let order7: String = con.hget(format!("{prefix}:user-7"), "7").await.unwrap();
    let order7: serde_json::Value = serde_json::from_str(&order7).unwrap();
    assert_eq!(order7["id"], 7);
    assert_eq!(order7["user"], "user-7");
    assert!(order7.get("@metadata").is_none(), "{order7}");
    let depth = rabbit::depth(&amqp, &queue).await;
    assert_eq!(depth, Some(0), "every message was acknowledged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_stream_is_read_with_a_consumer_group() {
    let Some(redis_url) = require(Service::Redis) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let stream = unique_name("stream");
    let mut con = redis::Client::open(redis_url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    for i in 0..20 {
        let _: String = con
            .xadd(&stream, "*", &[("payload", format!("{{\"n\": {i}}}"))])
            .await
            .unwrap();
    }
    let file = write(
        dir.path(),
        "stream.toml",
        &format!(
            "name = \"stream\"\n[checkpoint]\ninterval = \"200ms\"\ndir = \"state\"\n\
             [source]\ntype = \"redis-streams\"\nurl = \"{redis_url}\"\n\
             streams = [\"{stream}\"]\ngroup = \"g\"\njson_field = \"payload\"\n\
             [[transform]]\ntype = \"filter\"\nfield = \"n\"\nop = \">=\"\nvalue = 15\n\
             [sink]\ntype = \"stdout\"\n"
        ),
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["run", &file])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let lines = std::thread::spawn(move || {
        use std::io::BufRead;
        std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .filter(|l| l.starts_with('{'))
            .take(5)
            .collect::<Vec<_>>()
    });
    let got = tokio::task::spawn_blocking(move || lines.join().unwrap())
        .await
        .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let got: Vec<String> = got.into_iter().map(|l| l.replace(' ', "")).collect();
    assert_eq!(
        got,
        [
            "{\"n\":15}",
            "{\"n\":16}",
            "{\"n\":17}",
            "{\"n\":18}",
            "{\"n\":19}"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rabbitmq_to_postgres_example_upserts_every_order() {
    use sqlx::Connection;
    let (Some(amqp), Some(pg)) = (require(Service::RabbitMq), require(Service::Postgres)) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let unique = unique_name("orders").replace('-', "_");
    let n = 1500;
    let example =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/rabbitmq-to-postgres.toml");
    let text = std::fs::read_to_string(example)
        .unwrap()
        .replace("\"orders\"", &format!("\"{unique}\""))
        .replace("EXISTS orders (", &format!("EXISTS {unique} ("));
    let consume = write(dir.path(), "consume.toml", &text);
    let publish = write(
        dir.path(),
        "publish.toml",
        &format!(
            "name = \"publish\"\n[source]\ntype = \"generator\"\ncount = {n}\n\
             [sink]\ntype = \"rabbitmq\"\nuri = \"${{RIVUS_AMQP_URL}}\"\nrouting_key = \"{unique}\"\n\
             correlation_id_field = \"id\"\n"
        ),
    );
    let port = free_port();
    let run = |file: &str, extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_rivus"))
            .args(["run", file])
            .args(extra)
            .current_dir(dir.path())
            .env("RIVUS_AMQP_URL", &amqp)
            .env("RIVUS_PG_URL", &pg)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // The consumer declares the queue; publish once it is there.
    // With the dashboard on: its status API follows the job.
    let consumer = run(&consume, &["--http", &format!("127.0.0.1:{port}")]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if rabbit::depth(&amqp, &unique).await.is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "the consumer declared the queue");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let out = run(&publish, &[]).wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut c = sqlx::PgConnection::connect(&pg).await.unwrap();
    let count_sql = format!("SELECT COUNT(*) FROM {unique}");
    while sqlx::query_scalar::<_, i64>(&count_sql)
        .fetch_one(&mut c)
        .await
        .unwrap_or(0)
        < n
    {
        assert!(Instant::now() < deadline, "every order reached PostgreSQL");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (code, body) = request(port, "GET", "/api/status", None).expect("the status API answers");
    assert_eq!(code, 200, "{body}");
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["state"], "running", "{status}");
    assert_eq!(status["pipeline"]["source"]["type"], "rabbitmq", "{status}");
    assert!(
        status["records"]["written"].as_u64().unwrap() >= n as u64,
        "{status}"
    );
    Command::new("kill")
        .args(["-INT", &consumer.id().to_string()])
        .status()
        .unwrap();
    let out = consumer.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(&format!("now holds {n} rows")), "{stdout}");
    let (amount, user): (String, String) = sqlx::query_as(&format!(
        "SELECT amount::text, \"user\" FROM {unique} WHERE id = 7"
    ))
    .fetch_one(&mut c)
    .await
    .unwrap();
    assert_eq!((amount.as_str(), user.as_str()), ("554.33", "user-7"));
}

/// Generated orders into a Redis Cluster over its seed nodes (`cluster = true`): every order's
/// key is there, spread over the nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_orders_go_into_a_redis_cluster() {
    let Some(nodes) = require(Service::RedisCluster) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let prefix = unique_name("order");
    let file = write(
        dir.path(),
        "cluster.toml",
        &format!(
            "name = \"cluster\"\n[source]\ntype = \"generator\"\ncount = 500\n\
             [sink]\ntype = \"redis\"\nurl = \"{nodes}\"\ncluster = true\ncommand = \"set\"\n\
             key = \"{prefix}:{{id}}\"\nttl_secs = 600\n"
        ),
    );
    Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["run", &file])
        .current_dir(dir.path())
        .succeeds();
    let endpoint = rivus_connector_redis::RedisConfig::cluster(nodes.split(','));
    let mut con = endpoint.open().await.unwrap();
    let mut found = 0;
    for id in 0..500 {
        let v: Option<String> = con.get(format!("{prefix}:{id}")).await.unwrap();
        if let Some(v) = v {
            let order: serde_json::Value = serde_json::from_str(&v).unwrap();
            assert_eq!(order["id"], id, "{v}");
            found += 1;
        }
    }
    assert_eq!(found, 500, "every generated order has its key");
}

/// `rivus check` reaches Redis over TLS with the client certificate, a Redis Cluster, and
/// RabbitMQ over AMQPS — and reports a TLS endpoint without the client certificate as FAILED.
#[test]
fn check_reaches_tls_and_cluster_endpoints() {
    let (Some(rediss), Some(cluster), Some(amqps)) = (
        require(Service::RedisTls),
        require(Service::RedisCluster),
        require(Service::RabbitMqTls),
    ) else {
        return;
    };
    let d = rivus_testkit::services::tls_dir();
    let files = format!(
        "tls = {{ ca_file = \"{ca}\", client_cert = \"{crt}\", client_key = \"{key}\" }}",
        ca = d.join("ca.crt").display(),
        crt = d.join("client.crt").display(),
        key = d.join("client.key").display()
    );
    let dir = tempfile::tempdir().unwrap();
    let run = |source: String, sink: String| {
        let file = write(
            dir.path(),
            "check.toml",
            &format!("name = \"t\"\n[source]\n{source}\n[sink]\n{sink}\n"),
        );
        let out = Command::new(env!("CARGO_BIN_EXE_rivus"))
            .args(["check", &file])
            .current_dir(dir.path())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, stdout) = run(
        format!("type = \"rabbitmq\"\nuri = \"{amqps}\"\nqueues = [\"q\"]\n{files}"),
        format!("type = \"redis\"\nurl = \"{rediss}\"\ncommand = \"set\"\nkey = \"k\"\n{files}"),
    );
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        stdout.contains("source rabbitmq (") && stdout.contains("): ok"),
        "{stdout}"
    );
    assert!(
        stdout.contains("sink redis (") && stdout.contains("): ok, PONG"),
        "{stdout}"
    );
    assert!(!stdout.contains("guest:guest"), "{stdout}");

    let (code, stdout) = run(
        "type = \"generator\"".into(),
        format!(
            "type = \"redis\"\nurl = \"{cluster}\"\ncluster = true\ncommand = \"set\"\nkey = \"k\""
        ),
    );
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("): ok, PONG"), "{stdout}");

    let (code, stdout) = run(
        "type = \"generator\"".into(),
        format!(
            "type = \"redis\"\nurl = \"{rediss}\"\ncommand = \"set\"\nkey = \"k\"\n\
             tls = {{ ca_file = \"{}\" }}",
            d.join("ca.crt").display()
        ),
    );
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("sink redis (") && stdout.contains("FAILED"),
        "{stdout}"
    );
}

/// Generated orders into MariaDB exactly-once (`exactly_once = true`: XA transactions per
/// checkpoint), the job killed with SIGKILL mid-run and run again: every order is in the
/// table exactly once (it has no key, so a duplicate would be a second row) and no prepared
/// transaction is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_orders_go_into_mariadb_exactly_once_across_a_kill() {
    use sqlx::{Connection, Row};
    let Some(my) = require(Service::MySql) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let table = unique_name("xa").replace('-', "_");
    let n = 30_000u64;
    let file = write(
        dir.path(),
        "p.toml",
        &format!(
            "name = \"to-mariadb\"\n[checkpoint]\ninterval = \"200ms\"\ndir = \"state\"\n\
             [source]\ntype = \"generator\"\ncount = {n}\nrate = 10000\n\
             [sink]\ntype = \"jdbc\"\nurl = \"${{RIVUS_MYSQL_URL}}\"\ntable = \"{table}\"\n\
             exactly_once = true\n\
             setup = \"CREATE TABLE IF NOT EXISTS {table} (id BIGINT, user VARCHAR(40), \
             amount DOUBLE, status VARCHAR(20), ts BIGINT)\"\n"
        ),
    );
    let spawn = || {
        Command::new(env!("CARGO_BIN_EXE_rivus"))
            .args(["run", &file])
            .current_dir(dir.path())
            .env("RIVUS_MYSQL_URL", &my)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut c = sqlx::MySqlConnection::connect(&my).await.unwrap();
    let count_sql = format!("SELECT COUNT(*) FROM {table}");
    let mut child = spawn();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let rows = sqlx::query_scalar::<_, i64>(&count_sql)
            .fetch_one(&mut c)
            .await
            .unwrap_or(0);
        if rows >= 3_000 {
            break;
        }
        assert!(Instant::now() < deadline, "rows arrive ({rows})");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let out = spawn().wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: String = sqlx::query_scalar(&format!(
        "SELECT CONCAT_WS(',', COUNT(*), COUNT(DISTINCT id), MIN(id), MAX(id)) FROM {table}"
    ))
    .fetch_one(&mut c)
    .await
    .unwrap();
    assert_eq!(summary, format!("{n},{n},0,{}", n - 1));
    let prepared: Vec<String> = sqlx::raw_sql("XA RECOVER")
        .fetch_all(&mut c)
        .await
        .unwrap()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.get::<Vec<u8>, _>("data")).into_owned())
        .filter(|xid| xid.contains("to-mariadb"))
        .collect();
    assert!(
        prepared.is_empty(),
        "prepared transactions left: {prepared:?}"
    );
}
