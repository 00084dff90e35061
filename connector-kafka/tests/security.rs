//! The Kafka source and sink on the dev broker's secured listeners — SASL_SSL (SCRAM-SHA-512,
//! SCRAM-SHA-256, PLAIN) and mutual TLS, under the broker's authorizer — and each refusal:
//! a wrong password, an unknown CA, a missing client certificate, a topic without rights.

use std::time::{Duration, Instant};

use rivus_connector_kafka::connect::probe;
use rivus_connector_kafka::{
    KafkaConfig, OutRecord, SaslAuth, StartOffsets, StopOffsets, ValueDeserializer,
};
use rivus_sdk::prelude::*;
use rivus_sdk::schema::StringSchema;
use rivus_sdk::tls::TlsFiles;
use rivus_testkit::services::{
    kafka_guest_user, kafka_sasl_user, require, tls_dir, unique_name as unique, Service,
};
use rivus_testkit::suite::{SinkSuite, SourceSuite};
use rivus_testkit::{run_records_into, CollectingSink};

mod common;
use common::suites::{Conn, SinkCtx, SourceCtx};
use common::{create_topic, read_topic};

fn ca_only() -> TlsFiles {
    TlsFiles {
        ca_file: Some(tls_dir().join("ca.crt")),
        ..TlsFiles::default()
    }
}

fn client_cert() -> TlsFiles {
    TlsFiles {
        ca_file: Some(tls_dir().join("ca.crt")),
        client_cert: Some(tls_dir().join("client.crt")),
        client_key: Some(tls_dir().join("client.key")),
    }
}

/// The SASL_SSL listener as the user with every right, or `None` when skipping was asked for.
fn sasl(mechanism: &str) -> Option<Conn> {
    let admin = require(Service::Kafka)?;
    let bootstrap = require(Service::KafkaSasl)?;
    let (user, password) = kafka_sasl_user();
    Some(Conn {
        admin,
        bootstrap,
        tls: Some(ca_only()),
        sasl: Some(SaslAuth::new(mechanism, user, password)),
    })
}

/// The mutual-TLS listener with the test client certificate.
fn mutual_tls() -> Option<Conn> {
    let admin = require(Service::Kafka)?;
    let bootstrap = require(Service::KafkaSsl)?;
    Some(Conn {
        admin,
        bootstrap,
        tls: Some(client_cert()),
        sasl: None,
    })
}

fn props(conn: &Conn) -> KafkaConfig {
    let mut p = KafkaConfig::new(&conn.bootstrap);
    if let Some(t) = &conn.tls {
        p.set_tls(t.clone());
    }
    if let Some(s) = &conn.sasl {
        p.set_sasl(s.clone());
    }
    p
}

// ---- the suites over each secured listener ----

async fn source_suite(conn: Conn) {
    let mut suite = SourceSuite::new(SourceCtx::new(conn)).records_per_split(100);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
}

/// The sink suite at-least-once and exactly-once.
async fn sink_suites(conn: Conn) {
    for delivery in [
        DeliveryGuarantee::AtLeastOnce,
        DeliveryGuarantee::ExactlyOnce,
    ] {
        let mut suite = SinkSuite::new(SinkCtx::new(conn.clone(), delivery)).records_per_split(100);
        if let Err(f) = suite.run_all().await {
            panic!("{delivery:?}: {f}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_passes_the_suite_over_sasl_ssl() {
    if let Some(conn) = sasl("SCRAM-SHA-512") {
        source_suite(conn).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sinks_pass_the_suite_over_sasl_ssl() {
    if let Some(conn) = sasl("SCRAM-SHA-512") {
        sink_suites(conn).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_passes_the_suite_over_mutual_tls() {
    if let Some(conn) = mutual_tls() {
        source_suite(conn).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sinks_pass_the_suite_over_mutual_tls() {
    if let Some(conn) = mutual_tls() {
        sink_suites(conn).await;
    }
}

/// Each SASL mechanism carries a write through the sink and a bounded read through the source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sasl_mechanism_writes_and_reads() {
    for mechanism in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] {
        let Some(conn) = sasl(mechanism) else {
            return;
        };
        let topic = unique("sasl-mech");
        create_topic(&conn.admin, &topic, 1).await;
        let values: Vec<String> = (0..200).map(|i| format!("{mechanism}-{i:03}")).collect();
        let sink = conn
            .sink()
            .topic(&topic)
            .build(|v: &String| {
                Ok(OutRecord {
                    value: Some(v.clone().into_bytes()),
                    ..Default::default()
                })
            })
            .unwrap();
        run_records_into(&unique("sasl-write"), values.clone(), |_| sink.clone())
            .await
            .unwrap_or_else(|e| panic!("{mechanism}: {e}"));
        let (b, t) = (conn.admin.clone(), topic.clone());
        let written: Vec<String> = tokio::task::spawn_blocking(move || read_topic(&b, &t))
            .await
            .unwrap()
            .into_iter()
            .map(|(_, v)| v)
            .collect();
        assert_eq!(written, values, "{mechanism}: written");

        let source = conn
            .source()
            .topics([topic.clone()])
            .start(StartOffsets::Earliest)
            .stop(StopOffsets::LatestAtStart)
            .build(ValueDeserializer(StringSchema))
            .unwrap();
        let got = rivus_testkit::read_all(&format!("sasl-read-{mechanism}"), source, 1).await;
        assert_eq!(got, values, "{mechanism}: read");
    }
}

// ---- refusals: at once, naming what was refused, never showing the secret ----

/// Opens a source on `topic` as `conn` in a job and returns the job's error.
async fn job_error(conn: &Conn, topic: &str) -> String {
    let source = conn
        .source()
        .topics([topic.to_owned()])
        .start(StartOffsets::Earliest)
        .connect_timeout(Duration::from_secs(60))
        .build(ValueDeserializer(StringSchema))
        .unwrap();
    let collected = CollectingSink::<String>::new();
    let job = Pipeline::new(unique("refused"))
        .source("kafka", 1, |_| source.clone())
        .sink("collect", 1, |i| collected.for_subtask(i))
        .unwrap();
    let started = Instant::now();
    let err = tokio::time::timeout(Duration::from_secs(90), job.run())
        .await
        .expect("a refused job ends")
        .expect_err("a refused job fails")
        .to_string();
    // Refusals end the wait at once; only silence waits out the 60 s connect timeout.
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "waited {:?} for: {err}",
        started.elapsed()
    );
    err
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_an_authentication_error_naming_endpoint_and_mechanism() {
    let Some(mut conn) = sasl("SCRAM-SHA-512") else {
        return;
    };
    let wrong = "not-the-password-4711";
    conn.sasl = Some(SaslAuth::new("SCRAM-SHA-512", "rivus", wrong));
    let err = job_error(&conn, "public-anything").await;
    assert!(err.contains("authentication failed"), "{err}");
    assert!(err.contains(&conn.bootstrap), "{err}");
    assert!(err.contains("SCRAM-SHA-512"), "{err}");
    assert!(!err.contains(wrong), "{err}");
    // `rivus check` asks the same question.
    let err = probe(&props(&conn), &[], Duration::from_secs(60))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("authentication failed") && !err.contains(wrong),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_ca_is_a_tls_error() {
    let Some(mut conn) = mutual_tls() else {
        return;
    };
    // Trust only the system's roots: the test CA is not among them.
    conn.tls = Some(TlsFiles {
        ca_file: None,
        ..client_cert()
    });
    let err = job_error(&conn, "public-anything").await;
    assert!(err.contains("TLS handshake failed"), "{err}");
    assert!(err.contains("certificate verify failed"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_without_a_client_certificate_is_refused() {
    let Some(mut conn) = mutual_tls() else {
        return;
    };
    conn.tls = Some(ca_only());
    let err = job_error(&conn, "public-anything").await;
    assert!(err.contains("TLS handshake failed"), "{err}");
    assert!(err.contains(&conn.bootstrap), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_rights_on_a_topic_is_refused_naming_it() {
    let Some(mut conn) = sasl("SCRAM-SHA-512") else {
        return;
    };
    let (guest, password) = kafka_guest_user();
    conn.sasl = Some(SaslAuth::new("SCRAM-SHA-512", guest, password));
    let secret = unique("secret");
    create_topic(&conn.admin, &secret, 1).await;
    let err = job_error(&conn, &secret).await;
    assert!(err.contains("authorization refused"), "{err}");
    assert!(err.contains(&secret), "{err}");
    // The same user may use the topics its ACLs grant.
    let public = unique("public");
    create_topic(&conn.admin, &public, 1).await;
    probe(&props(&conn), &[public], Duration::from_secs(30))
        .await
        .expect("guest may use public-* topics");
}
