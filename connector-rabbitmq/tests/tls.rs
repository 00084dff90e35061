//! The source and sink over AMQPS with a client certificate (the broker's port 5671 requires
//! one), the queues written and read back through the plain port of the same broker.

mod common;

use common::{SinkCtx, SourceCtx};
use rivus_connector_rabbitmq::{AmqpConfig, OutMessage, RabbitSink};
use rivus_testkit::services::{require, tls_dir, unique_name, Service};
use rivus_testkit::suite::{SinkSuite, SourceSuite};

fn tls() -> Option<(String, AmqpConfig)> {
    let plain = require(Service::RabbitMq)?;
    let amqps = require(Service::RabbitMqTls)?;
    let d = tls_dir();
    let config = AmqpConfig::new(amqps)
        .with_ca_file(d.join("ca.crt"))
        .with_client_cert(d.join("client.crt"), d.join("client.key"));
    Some((plain, config))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqps_source_passes_the_conformance_suite_exactly_once() {
    let Some((plain, config)) = tls() else { return };
    let mut suite = SourceSuite::new(SourceCtx::new(&plain, config)).records_per_split(200);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqps_sink_passes_the_conformance_suite() {
    let Some((plain, config)) = tls() else { return };
    let mut suite = SinkSuite::new(SinkCtx::new(&plain, config)).records_per_split(200);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
}

/// Without the client certificate the broker refuses the handshake; without the CA the
/// client refuses the broker. Either way the job fails at open, naming the broker and never
/// the password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqps_refuses_a_missing_client_certificate_or_an_unknown_ca() {
    let Some((_, config)) = tls() else { return };
    let d = tls_dir();
    let no_cert = AmqpConfig::new(config.uri.clone()).with_ca_file(d.join("ca.crt"));
    let no_ca = AmqpConfig::new(config.uri.clone())
        .with_client_cert(d.join("client.crt"), d.join("client.key"));
    // With TLS 1.3 the broker checks the client certificate after the client has finished its
    // half of the handshake: the refusal arrives as an alert or, when the broker closes first,
    // as a reset connection.
    for (what, cfg, why) in [
        (
            "no client certificate",
            no_cert,
            &["CertificateRequired", "reset by peer", "Broken pipe"][..],
        ),
        ("unknown CA", no_ca, &["UnknownIssuer"][..]),
    ] {
        let cfg = AmqpConfig {
            connect_timeout: std::time::Duration::from_secs(10),
            reconnect: rivus_sdk::backoff::BackoffPolicy::None,
            ..cfg
        };
        let sink = RabbitSink::builder(cfg)
            .routing_key(unique_name("q"))
            .build(|_: &u64| Ok(OutMessage::default()))
            .unwrap();
        let err = rivus_testkit::run_sequence_into("amqps-refused", 1, 1, move |_| sink.clone())
            .await
            .expect_err(what);
        let text = err.to_string();
        assert!(why.iter().any(|w| text.contains(w)), "{what}: {text}");
        assert!(text.contains("127.0.0.1:5671"), "{what}: {text}");
        assert!(
            !text.contains("guest:guest"),
            "{what}: password shown: {text}"
        );
    }
}
