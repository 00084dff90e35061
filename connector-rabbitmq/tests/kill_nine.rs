//! RabbitMQ → files exactly-once in a separate process, killed with SIGKILL several times
//! mid-stream: with correlation ids, every message arrives once — none lost, none duplicated.
//! Killed at each run's first commit too: the moment a checkpoint is complete (the files are
//! published) but its deliveries, among them the restored run's dropped redeliveries, may not
//! be acknowledged yet.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{channel, declare, publish_with_ids};

use rivus_testkit::process::{example_binary, kill_after_progress, lines_in};
use rivus_testkit::services::{require, unique_name, Service};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_dash_nine_with_correlation_ids_is_exactly_once() {
    // Each run is killed once it has written a further tenth of the messages.
    killed_runs_deliver_every_message_once(60_000, 3, 6_000, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_at_each_runs_first_commit_with_correlation_ids_is_exactly_once() {
    killed_runs_deliver_every_message_once(20_000, 6, 1, 4).await;
}

/// Publishes `n` messages with ids, runs the job `kills` times, each killed once it has written
/// `step` more lines (at least `mid_stream` of them mid-stream), then once to the end.
async fn killed_runs_deliver_every_message_once(
    n: usize,
    kills: usize,
    step: usize,
    mid_stream: usize,
) {
    let Some(url) = require(Service::RabbitMq) else {
        return;
    };
    let example = example_binary("rivus-connector-rabbitmq", "rabbit_to_file");
    let queue = unique_name("kill");
    let (conn, ch) = channel(&url).await;
    declare(&ch, &queue).await;
    let bodies = (0..n).map(|i| format!("m{i:06}"));
    assert!(publish_with_ids(&ch, &queue, bodies).await.unwrap());
    let base = std::env::temp_dir().join(unique_name("rabbit-kill"));
    let (state, out) = (base.join("state"), base.join("out"));
    std::fs::create_dir_all(&out).unwrap();
    let spawn = || -> Child {
        Command::new(&example)
            .args([
                url.as_str(),
                queue.as_str(),
                state.to_str().unwrap(),
                out.to_str().unwrap(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let killed =
        kill_after_progress(&spawn, kills, step, n, || async { lines_in(&out).len() }).await;
    assert!(
        killed >= mid_stream,
        "killed mid-stream ({killed} of {kills} kills)"
    );
    // The last run reads to the end, then stops gracefully (SIGTERM: final checkpoint).
    let mut child = spawn();
    let deadline = Instant::now() + Duration::from_secs(120);
    while lines_in(&out).len() < n && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let pid = child.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(child.wait().unwrap().success(), "graceful stop");
    let mut got = lines_in(&out);
    got.sort();
    let total = got.len();
    got.dedup();
    assert_eq!(total - got.len(), 0, "duplicated messages");
    assert_eq!(got.len(), n, "every message arrived");
    let _ = conn.close(200, "".into()).await;
}
