//! One round trip per service, with the client crate its connector uses. Under `CI=true` a
//! missing service fails the test; elsewhere it is skipped with a visible message.

use std::time::Duration;

use futures::StreamExt;
use rivus_testkit::services::{require, Service};

use rivus_testkit::services::unique_name as unique;

#[tokio::test]
async fn kafka_transactions_commit_and_abort() {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::consumer::{Consumer, StreamConsumer};
    use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
    use rdkafka::{ClientConfig, Message};

    let Some(bootstrap) = require(Service::Kafka) else {
        return;
    };
    let topic = unique("smoke");
    let admin: AdminClient<_> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    let created = admin
        .create_topics(
            &[NewTopic::new(&topic, 1, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        )
        .await
        .unwrap();
    assert!(created[0].is_ok(), "{created:?}");

    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("transactional.id", unique("smoke-txn"))
        .create()
        .unwrap();
    let t = Duration::from_secs(30);
    producer.init_transactions(t).unwrap();
    producer.begin_transaction().unwrap();
    producer
        .send(FutureRecord::to(&topic).key("k").payload("aborted"), t)
        .await
        .unwrap();
    producer.abort_transaction(t).unwrap();
    producer.begin_transaction().unwrap();
    for i in 0..3 {
        producer
            .send(
                FutureRecord::to(&topic)
                    .key("k")
                    .payload(&format!("committed-{i}")),
                t,
            )
            .await
            .unwrap();
    }
    producer.commit_transaction(t).unwrap();

    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", unique("smoke-group"))
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", "read_committed")
        .create()
        .unwrap();
    consumer.subscribe(&[&topic]).unwrap();
    let mut got = Vec::new();
    let mut stream = consumer.stream();
    while got.len() < 3 {
        let m = tokio::time::timeout(Duration::from_secs(30), stream.next())
            .await
            .expect("messages within 30 s")
            .unwrap()
            .unwrap();
        got.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
    }
    assert_eq!(got, vec!["committed-0", "committed-1", "committed-2"]);
}

/// Index, search and a point in time on one search server, over plain HTTP: `pit` is the
/// path that opens a point in time, and the name of the id in its answer.
async fn search_server_answers(service: Service, pit: (&str, &str)) {
    use serde_json::{json, Value};

    let Some(url) = require(service) else {
        return;
    };
    let http = reqwest::Client::new();
    let call = |method: reqwest::Method, path: String, body: Option<(&'static str, String)>| {
        let mut r = http.request(method, format!("{url}{path}"));
        if let Some((ct, b)) = body {
            r = r.header("content-type", ct).body(b);
        }
        async move {
            let r = r.send().await.unwrap();
            let status = r.status();
            let v: Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
            assert!(status.is_success(), "{status}: {v}");
            v
        }
    };
    let index = unique("smoke");
    let mapping =
        json!({"mappings": {"properties": {"name": {"type": "keyword"}, "n": {"type": "long"}}}});
    call(
        reqwest::Method::PUT,
        format!("/{index}"),
        Some(("application/json", mapping.to_string())),
    )
    .await;
    let bulk = format!(
        "{{\"index\":{{\"_index\":\"{index}\",\"_id\":\"1\"}}}}\n{{\"name\":\"a\",\"n\":1}}\n\
         {{\"index\":{{\"_index\":\"{index}\",\"_id\":\"2\"}}}}\n{{\"name\":\"b\",\"n\":2}}\n"
    );
    let v = call(
        reqwest::Method::POST,
        "/_bulk?refresh=true".into(),
        Some(("application/x-ndjson", bulk)),
    )
    .await;
    assert_eq!(v["errors"], json!(false), "{v}");
    let count = call(reqwest::Method::GET, format!("/{index}/_count"), None).await;
    assert_eq!(count["count"], json!(2));
    let found = call(
        reqwest::Method::POST,
        format!("/{index}/_search"),
        Some((
            "application/json",
            json!({"query": {"term": {"name": "b"}}}).to_string(),
        )),
    )
    .await;
    assert_eq!(found["hits"]["hits"][0]["_id"], json!("2"), "{found}");
    let opened = call(
        reqwest::Method::POST,
        format!("/{index}/{}?keep_alive=1m", pit.0),
        None,
    )
    .await;
    assert!(
        opened[pit.1].as_str().is_some_and(|s| !s.is_empty()),
        "{opened}"
    );
}

#[tokio::test]
async fn elasticsearch_index_search_and_point_in_time() {
    search_server_answers(Service::Elasticsearch, ("_pit", "id")).await;
}

#[tokio::test]
async fn opensearch2_index_search_and_point_in_time() {
    search_server_answers(Service::OpenSearch2, ("_search/point_in_time", "pit_id")).await;
}

#[tokio::test]
async fn opensearch3_index_search_and_point_in_time() {
    search_server_answers(Service::OpenSearch3, ("_search/point_in_time", "pit_id")).await;
}

#[tokio::test]
async fn rabbitmq_publish_with_confirms_and_consume() {
    use lapin::options::{
        BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, ConfirmSelectOptions,
        QueueDeclareOptions,
    };
    use lapin::types::FieldTable;
    use lapin::{BasicProperties, Connection, ConnectionProperties};

    let Some(url) = require(Service::RabbitMq) else {
        return;
    };
    let conn = Connection::connect(&url, ConnectionProperties::default())
        .await
        .unwrap();
    let ch = conn.create_channel().await.unwrap();
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    let q = unique("smoke");
    ch.queue_declare(
        q.as_str().into(),
        QueueDeclareOptions {
            auto_delete: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap();
    for i in 0..3 {
        let confirm = ch
            .basic_publish(
                "".into(),
                q.as_str().into(),
                BasicPublishOptions::default(),
                format!("m{i}").as_bytes(),
                BasicProperties::default(),
            )
            .await
            .unwrap()
            .await
            .unwrap();
        assert!(confirm.is_ack(), "publish {i} confirmed");
    }
    let mut consumer = ch
        .basic_consume(
            q.as_str().into(),
            "smoke".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let mut got = Vec::new();
    while got.len() < 3 {
        let d = tokio::time::timeout(Duration::from_secs(10), consumer.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        got.push(String::from_utf8(d.data.clone()).unwrap());
        d.ack(BasicAckOptions::default()).await.unwrap();
    }
    assert_eq!(got, vec!["m0", "m1", "m2"]);
}

#[tokio::test]
async fn redis_set_get() {
    use redis::AsyncCommands;

    let Some(url) = require(Service::Redis) else {
        return;
    };
    let client = redis::Client::open(url).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let key = unique("smoke");
    let _: () = con.set_ex(&key, "v1", 60).await.unwrap();
    let v: String = con.get(&key).await.unwrap();
    assert_eq!(v, "v1");
}

#[tokio::test]
async fn postgres_insert_select_and_prepared_transaction() {
    use sqlx::Connection;

    let Some(url) = require(Service::Postgres) else {
        return;
    };
    let mut con = sqlx::PgConnection::connect(&url).await.unwrap();
    let table = unique("smoke").replace('-', "_");
    sqlx::query(&format!(
        "create table {table} (id bigint primary key, name text)"
    ))
    .execute(&mut con)
    .await
    .unwrap();
    sqlx::query(&format!("insert into {table} values ($1, $2)"))
        .bind(1i64)
        .bind("a")
        .execute(&mut con)
        .await
        .unwrap();
    // A prepared transaction (two-phase commit) survives until COMMIT PREPARED.
    let gid = unique("gid");
    sqlx::raw_sql(&format!(
        "begin; insert into {table} values (2, 'b'); prepare transaction '{gid}'"
    ))
    .execute(&mut con)
    .await
    .unwrap();
    sqlx::raw_sql(&format!("commit prepared '{gid}'"))
        .execute(&mut con)
        .await
        .unwrap();
    let n: i64 = sqlx::query_scalar(&format!("select count(*) from {table}"))
        .fetch_one(&mut con)
        .await
        .unwrap();
    assert_eq!(n, 2);
    sqlx::query(&format!("drop table {table}"))
        .execute(&mut con)
        .await
        .unwrap();
}

#[tokio::test]
async fn mariadb_insert_select_and_xa() {
    use sqlx::Connection;

    let Some(url) = require(Service::MySql) else {
        return;
    };
    let mut con = sqlx::MySqlConnection::connect(&url).await.unwrap();
    let table = unique("smoke").replace('-', "_");
    sqlx::query(&format!(
        "create table {table} (id bigint primary key, name text)"
    ))
    .execute(&mut con)
    .await
    .unwrap();
    sqlx::query(&format!("insert into {table} values (?, ?)"))
        .bind(1i64)
        .bind("a")
        .execute(&mut con)
        .await
        .unwrap();
    let xid = unique("x");
    for stmt in [
        format!("xa start '{xid}'"),
        format!("insert into {table} values (2, 'b')"),
        format!("xa end '{xid}'"),
        format!("xa prepare '{xid}'"),
        format!("xa commit '{xid}'"),
    ] {
        sqlx::raw_sql(&stmt).execute(&mut con).await.unwrap();
    }
    let n: i64 = sqlx::query_scalar(&format!("select count(*) from {table}"))
        .fetch_one(&mut con)
        .await
        .unwrap();
    assert_eq!(n, 2);
    sqlx::query(&format!("drop table {table}"))
        .execute(&mut con)
        .await
        .unwrap();
}
