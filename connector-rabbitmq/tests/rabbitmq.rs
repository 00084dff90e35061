//! The RabbitMQ source and sink against the real broker started by `dev/services`.

mod common;

use common::{SinkCtx, SourceCtx};

use rivus_connector_rabbitmq::{OutMessage, RabbitSink, RabbitSource};
use rivus_testkit::services::{require, unique_name, Service};
use rivus_testkit::suite::{SinkSuite, SourceSuite};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_passes_the_conformance_suite_exactly_once() {
    let Some(url) = require(Service::RabbitMq) else {
        return;
    };
    let mut suite = SourceSuite::new(SourceCtx::new(&url, &url)).records_per_split(200);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sink_passes_the_conformance_suite() {
    let Some(url) = require(Service::RabbitMq) else {
        return;
    };
    let mut suite = SinkSuite::new(SinkCtx::new(&url, &url)).records_per_split(200);
    if let Err(f) = suite.run_all().await {
        panic!("{f}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unroutable_messages_go_to_the_error_policy() {
    let Some(url) = require(Service::RabbitMq) else {
        return;
    };
    let sink = RabbitSink::builder(&url)
        .routing_key(unique_name("no-such-queue"))
        .build(|v: &u64| {
            Ok(OutMessage {
                body: v.to_string().into_bytes(),
                ..Default::default()
            })
        })
        .unwrap();
    let err = rivus_testkit::run_sequence_into("unroutable", 3, 1, |_| sink.clone())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("unroutable"), "{err}");
}

#[test]
fn bad_configuration_is_refused_with_the_field_path() {
    let err = RabbitSource::builder("amqp://h")
        .build(|_| Ok(()))
        .unwrap_err();
    assert!(err.to_string().contains("`queues`"), "{err}");
    let err = RabbitSource::builder("amqp://h")
        .queues(["q"])
        .prefetch(0)
        .build(|_| Ok(()))
        .unwrap_err();
    assert!(err.to_string().contains("`prefetch`"), "{err}");
    let err = RabbitSink::builder("amqp://h")
        .confirm_window(0)
        .build(|_: &u8| Ok(OutMessage::default()))
        .unwrap_err();
    assert!(err.to_string().contains("`confirm_window`"), "{err}");
}
