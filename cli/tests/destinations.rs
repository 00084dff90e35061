//! Destinations chosen per record through the `rivus` command: one generator's orders routed
//! by their `status` to a Kafka topic, an OpenSearch index and a RabbitMQ queue of each status
//! (templates `…{status}`), in one graph — Kafka exactly-once, each checkpoint's transaction
//! spanning the three topics. Each destination holds exactly the orders of its
//! status; a template naming a missing field is refused at the record (the error policy),
//! a malformed one at start with the option's path.

#[path = "support/index.rs"]
mod index;
#[path = "support/rabbit.rs"]
mod rabbit;
#[path = "support/run.rs"]
mod run;
#[path = "support/topics.rs"]
mod topics;

use std::path::Path;
use std::process::Command;

use rivus_testkit::services::{require, unique_name, Service};
use run::Succeeds;
use serde_json::Value;

const STATUSES: [&str; 3] = ["new", "paid", "shipped"];

fn write(dir: &Path, name: &str, text: &str) -> String {
    let file = dir.join(name);
    std::fs::write(&file, text).unwrap();
    file.to_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_go_to_the_topic_index_and_queue_of_their_status() {
    let (Some(kafka), Some(os), Some(amqp)) = (
        require(Service::Kafka),
        require(Service::OpenSearch2),
        require(Service::RabbitMq),
    ) else {
        return;
    };
    let unique = unique_name("dest").replace('-', "_");
    let n = 300;
    for s in STATUSES {
        topics::topic(&kafka, &format!("{unique}.{s}")).await;
    }
    let queues: Vec<String> = STATUSES.iter().map(|s| format!("{unique}.{s}")).collect();
    rabbit::durable_queues(
        &amqp,
        &queues.iter().map(String::as_str).collect::<Vec<_>>(),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "job.toml",
        &format!(
            "name = \"{unique}\"\n\
             [checkpoint]\ninterval = \"200ms\"\ndir = \"state\"\n\
             [sources.orders]\ntype = \"generator\"\ncount = {n}\n\
             [sinks.topics]\ntype = \"kafka\"\ninputs = [\"orders\"]\n\
             bootstrap_servers = \"{kafka}\"\ntopic = \"{unique}.{{status}}\"\n\
             exactly_once = true\n\
             [sinks.indexes]\ntype = \"opensearch\"\ninputs = [\"orders\"]\nurl = \"{os}\"\n\
             index = \"{unique}-{{status}}\"\nid_field = \"id\"\n\
             [sinks.queues]\ntype = \"rabbitmq\"\ninputs = [\"orders\"]\nuri = \"{amqp}\"\n\
             routing_key = \"{unique}.{{status}}\"\n"
        ),
    );
    Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["run", &file])
        .current_dir(dir.path())
        .succeeds();
    let index = index::Index::connect(&os).await;
    for (i, s) in STATUSES.iter().enumerate() {
        let expected = (0..n).filter(|k| k % 3 == i as u64).count();
        let payloads = topics::read(&kafka, &format!("{unique}.{s}"), expected);
        assert_eq!(payloads.len(), expected, "topic of {s}");
        for p in &payloads {
            let v: Value = serde_json::from_slice(p).unwrap();
            assert_eq!(v["status"], *s, "a record in the topic of {s}: {v}");
        }
        assert_eq!(
            index.count(&format!("{unique}-{s}")).await,
            expected as i64,
            "index of {s}"
        );
        assert_eq!(
            rabbit::depth(&amqp, &format!("{unique}.{s}")).await,
            Some(expected as u32),
            "queue of {s}"
        );
    }
    for s in STATUSES {
        index.drop_index(&format!("{unique}-{s}")).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_a_template_cannot_name_go_to_the_error_policy_and_bad_templates_are_refused() {
    let Some(kafka) = require(Service::Kafka) else {
        return;
    };
    let unique = unique_name("destbad").replace('-', "_");
    topics::topic(&kafka, &format!("{unique}.paid")).await;
    let dir = tempfile::tempdir().unwrap();
    // `paid` orders have a topic; the others name a field they lack.
    let file = write(
        dir.path(),
        "job.toml",
        &format!(
            "name = \"{unique}\"\n\
             [source]\ntype = \"generator\"\ncount = 30\n\
             [[transform]]\ntype = \"remap\"\n\
             source = 'if .status == \"paid\" {{ .kind = .status }}'\n\
             [sink]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\n\
             topic = \"{unique}.{{kind}}\"\n\
             [errors]\npolicy = \"skip\"\n"
        ),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["run", &file])
        .current_dir(dir.path())
        .succeeds();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("errors      20"), "{text}");
    assert_eq!(
        topics::read(&kafka, &format!("{unique}.paid"), 10).len(),
        10
    );

    let bad = write(
        dir.path(),
        "bad.toml",
        &format!(
            "name = \"bad\"\n[source]\ntype = \"generator\"\ncount = 1\n\
             [sink]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopic = \"t.{{status\"\n"
        ),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["validate", &bad])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("sink.topic") && err.contains("never closed"),
        "{err}"
    );
}
