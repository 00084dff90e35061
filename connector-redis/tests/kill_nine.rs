//! Redis stream → files exactly-once in a separate process, killed with SIGKILL several times
//! mid-stream: pending entries are recovered, none lost, none duplicated.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rivus_testkit::process::{example_binary, kill_after_progress, lines_in};
use rivus_testkit::services::{require, unique_name, Service};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_dash_nine_stream_to_files_exactly_once() {
    let Some(url) = require(Service::Redis) else {
        return;
    };
    let example = example_binary("rivus-connector-redis", "stream_to_file");
    let (stream, group) = (unique_name("kill"), unique_name("group"));
    let n = 200_000u32;
    let mut con = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    for chunk in (0..n).collect::<Vec<_>>().chunks(5000) {
        let mut pipe = redis::pipe();
        for i in chunk {
            pipe.cmd("XADD")
                .arg(&stream)
                .arg("*")
                .arg("v")
                .arg(format!("m{i:07}"))
                .ignore();
        }
        let _: () = pipe.query_async(&mut con).await.unwrap();
    }
    let base = std::env::temp_dir().join(unique_name("redis-kill"));
    let (state, out) = (base.join("state"), base.join("out"));
    std::fs::create_dir_all(&out).unwrap();
    let spawn = || -> Child {
        Command::new(&example)
            .args([
                url.as_str(),
                stream.as_str(),
                group.as_str(),
                state.to_str().unwrap(),
                out.to_str().unwrap(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    // Each run is killed once it has written a further tenth of the entries.
    let mid_stream = kill_after_progress(&spawn, 3, n as usize / 10, n as usize, || async {
        lines_in(&out).len()
    })
    .await;
    assert!(
        mid_stream >= 2,
        "killed mid-stream ({mid_stream} of 3 kills)"
    );
    let mut child = spawn();
    let deadline = Instant::now() + Duration::from_secs(180);
    while lines_in(&out).len() < n as usize && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(child.wait().unwrap().success(), "graceful stop");
    let mut got = lines_in(&out);
    got.sort();
    let total = got.len();
    got.dedup();
    assert_eq!(total - got.len(), 0, "duplicated entries");
    assert_eq!(got.len(), n as usize, "every entry arrived");
}
