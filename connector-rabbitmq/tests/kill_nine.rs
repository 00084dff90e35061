//! RabbitMQ → files exactly-once in a separate process, killed with SIGKILL several times
//! mid-stream: with correlation ids, every message arrives once — none lost, none duplicated.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{channel, declare, publish_with_ids};

use rivus_testkit::process::{example_binary, kill_after_progress, lines_in};
use rivus_testkit::services::{require, unique_name, Service};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_dash_nine_with_correlation_ids_is_exactly_once() {
    let Some(url) = require(Service::RabbitMq) else {
        return;
    };
    let example = example_binary("rivus-connector-rabbitmq", "rabbit_to_file");
    let queue = unique_name("kill");
    let n = 60_000;
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
    // Each run is killed once it has written a further tenth of the messages.
    let mid_stream =
        kill_after_progress(&spawn, 3, n / 10, n, || async { lines_in(&out).len() }).await;
    assert!(
        mid_stream >= 2,
        "killed mid-stream ({mid_stream} of 3 kills)"
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
