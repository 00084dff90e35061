//! The sink and the Streams source on a Redis Cluster (three primaries from `dev/services up
//! redis-cluster`) and over TLS with a client certificate (the `redis` service's TLS port).

use redis::AsyncCommands;
use rivus_connector_redis::{RedisCommand, RedisConfig, RedisSink};
use rivus_testkit::services::{require, tls_dir, unique_name, Service};
use rivus_testkit::suite::{SinkSuite, SourceSuite};

mod common;
use common::{ListCtx, StreamsCtx};

fn cluster() -> Option<RedisConfig> {
    let urls = require(Service::RedisCluster)?;
    Some(RedisConfig::cluster(urls.split(',')))
}

fn tls() -> Option<RedisConfig> {
    let url = require(Service::RedisTls)?;
    let d = tls_dir();
    Some(
        RedisConfig::new(url)
            .ca_file(d.join("ca.crt"))
            .client_cert(d.join("client.crt"), d.join("client.key")),
    )
}

/// Batches of records for 16 lists spread over the cluster's slots and nodes: each batch is
/// split into one pipeline per slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_sink_passes_the_conformance_suite() {
    let Some(endpoint) = cluster() else { return };
    let mut suite = SinkSuite::new(ListCtx::new(endpoint, 16)).records_per_split(200);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
}

/// Streams in different slots: a subtask owning several reads each slot's streams apart; on a
/// rescale the new owner claims the entries another consumer held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_streams_source_passes_the_conformance_suite_exactly_once() {
    let Some(endpoint) = cluster() else { return };
    let mut suite = SourceSuite::new(StreamsCtx::new(endpoint)).records_per_split(200);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
}

/// The keys of one batch really land on all three nodes (not everything on one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_sink_writes_to_every_node() {
    let Some(endpoint) = cluster() else { return };
    let base = unique_name("k");
    let b = base.clone();
    let sink = RedisSink::builder(endpoint.clone())
        .batch_size(1000)
        .build(move |n: &u64| {
            Ok(vec![RedisCommand::Set {
                key: format!("{b}:{n}"),
                value: n.to_string().into_bytes(),
                ttl_secs: Some(600),
            }])
        })
        .unwrap();
    rivus_testkit::run_sequence_into("cluster-set", 3000, 1, |_| sink.clone())
        .await
        .unwrap();
    let mut c = endpoint.open().await.unwrap();
    for n in (0..3000u64).step_by(7) {
        let v: Option<String> = c.get(format!("{base}:{n}")).await.unwrap();
        assert_eq!(v, Some(n.to_string()), "key {base}:{n}");
    }
    // Each node holds a share of the keys.
    let urls = require(Service::RedisCluster).unwrap();
    for url in urls.split(',') {
        let mut node = redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let mut found = 0;
        for n in 0..3000u64 {
            let e: bool = redis::cmd("EXISTS")
                .arg(format!("{base}:{n}"))
                .query_async(&mut node)
                .await
                .unwrap_or(false);
            found += usize::from(e);
        }
        assert!(found > 300, "node {url} holds only {found} of 3000 keys");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_sink_passes_the_conformance_suite() {
    let Some(endpoint) = tls() else { return };
    let mut suite = SinkSuite::new(ListCtx::new(endpoint, 4)).records_per_split(200);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_streams_source_passes_the_conformance_suite_exactly_once() {
    let Some(endpoint) = tls() else { return };
    let mut suite = SourceSuite::new(StreamsCtx::new(endpoint)).records_per_split(200);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
}

/// The TLS port demands a client certificate and a trusted server: without the client
/// certificate, or without the CA, the connection is refused with a clear error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_refuses_a_missing_client_certificate_or_an_unknown_ca() {
    let Some(url) = require(Service::RedisTls) else {
        return;
    };
    let d = tls_dir();
    let with_ca = RedisConfig::new(url.as_str()).ca_file(d.join("ca.crt"));
    let failed = async {
        // The server checks the certificate after the handshake: the first command fails.
        let mut c = with_ca.open().await?;
        let _: String = redis::cmd("PING")
            .query_async(&mut c)
            .await
            .map_err(|e| rivus_sdk::Error::connector("ping", e.to_string()))?;
        Ok::<_, rivus_sdk::Error>(())
    }
    .await;
    let err = failed.expect_err("a client without certificate got in");
    // TLS 1.3: the refusal comes as an alert or, when the server closes first, a reset.
    let text = err.to_string();
    assert!(
        ["CertificateRequired", "reset by peer", "Broken pipe"]
            .iter()
            .any(|w| text.contains(w)),
        "{text}"
    );

    let no_ca =
        RedisConfig::new(url.as_str()).client_cert(d.join("client.crt"), d.join("client.key"));
    let err = no_ca.open().await.err().expect("an unknown CA is refused");
    assert!(err.to_string().contains("UnknownIssuer"), "{err}");
    assert!(
        err.to_string().contains("127.0.0.1:6380") || err.to_string().contains("rediss://"),
        "{err}"
    );

    let sink = RedisSink::builder(url.as_str())
        .build(|_: &u64| Ok(vec![]))
        .unwrap();
    let err = rivus_testkit::run_sequence_into("tls-no-ca", 1, 1, move |_| sink.clone())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("connecting"), "{err}");
}

/// Pub/sub over TLS with the client certificate; messages published on the plain port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_pubsub_source_receives_published_messages() {
    let (Some(endpoint), Some(plain)) = (tls(), require(Service::Redis)) else {
        return;
    };
    common::pubsub_roundtrip(endpoint, &plain).await;
}

#[test]
fn pubsub_refuses_a_cluster() {
    let err = rivus_connector_redis::RedisPubSubSource::builder(RedisConfig::cluster([
        "redis://127.0.0.1:7001/",
    ]))
    .channels(["c"])
    .build(|_, p| Ok(p.len()))
    .unwrap_err();
    assert!(err.to_string().contains("url"), "{err}");
}
