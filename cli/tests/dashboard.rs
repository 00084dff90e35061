//! `rivus run FILE --http ADDR` against a running job: the JSON API (fields present, counters
//! move, checkpoints appear), the token rules, and the dashboard drawn by Debian's headless
//! Chromium (installed by `dev/browser`; `RIVUS_CHROMIUM` names it): the chart draws, the
//! page reports no error, and the screenshot is not blank.

#[path = "support/http.rs"]
mod http;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use http::{free_port, request};
use serde_json::Value;

/// An endless generator (2 000 records/s) through a filter into SQLite, checkpoints every
/// 200 ms.
fn pipeline(dir: &Path) -> PathBuf {
    let file = dir.join("p.toml");
    std::fs::write(
        &file,
        "name = \"dash\"\n[checkpoint]\ninterval = \"200ms\"\ndir = \"state\"\n\
         [source]\ntype = \"generator\"\nrate = 2000\n\
         [[transform]]\ntype = \"filter\"\nfield = \"amount\"\nop = \">\"\nvalue = 0\n\
         [sink]\ntype = \"jdbc\"\nurl = \"sqlite:out.db\"\ntable = \"orders\"\n\
         setup = \"CREATE TABLE IF NOT EXISTS orders (id INTEGER, user TEXT, amount REAL, status TEXT, ts INTEGER)\"\n",
    )
    .unwrap();
    file
}

fn start(dir: &Path, args: &[&str], token: Option<&str>) -> Child {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rivus"));
    c.arg("run")
        .arg(pipeline(dir))
        .args(args)
        .current_dir(dir)
        .env_remove("RIVUS_HTTP_TOKEN")
        .env("RUST_LOG", "warn,rivus=info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(t) = token {
        c.env("RIVUS_HTTP_TOKEN", t);
    }
    c.spawn().unwrap()
}

fn get_json(port: u16, path: &str) -> Value {
    let (code, body) = request(port, "GET", path, None).expect("the server answers");
    assert_eq!(code, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

/// Polls `/api/status` (at most 60 s) until `ready` holds.
fn wait_status(port: u16, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some((200, body)) = request(port, "GET", "/api/status", None) {
            let v: Value = serde_json::from_str(&body).unwrap();
            if ready(&v) {
                return v;
            }
            assert!(Instant::now() < deadline, "{what}: {v:#}");
        } else {
            assert!(
                Instant::now() < deadline,
                "{what}: the server never answered"
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn stop(mut job: Child) -> std::process::Output {
    Command::new("kill")
        .args(["-INT", &job.id().to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while job.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the job did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
    job.wait_with_output().unwrap()
}

fn read_in(status: &Value) -> u64 {
    status["stages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["subtasks"].as_array().unwrap())
        .map(|t| t["records_in"].as_u64().unwrap())
        .sum()
}

#[test]
fn the_status_api_reports_a_running_job() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let job = start(dir.path(), &["--http", &format!("127.0.0.1:{port}")], None);
    let first = wait_status(port, "a checkpoint and throughput", |v| {
        !v["checkpoints"]["last_completed"].is_null()
            && v["throughput"].as_array().is_some_and(|t| t.len() >= 2)
            && !v["stages"].as_array().unwrap().is_empty()
    });
    assert_eq!(first["job"], "dash");
    assert_eq!(first["state"], "running");
    assert_eq!(first["guarantee"], "at-least-once");
    assert!(first["uptime_seconds"].as_f64().unwrap() > 0.0);
    assert_eq!(first["pipeline"]["source"]["type"], "generator");
    assert_eq!(
        first["pipeline"]["transforms"],
        serde_json::json!(["filter"])
    );
    assert_eq!(first["pipeline"]["sink"]["type"], "jdbc");
    assert_eq!(first["restarts"], 0);
    assert!(first["lag"].is_array() && first["failures"].is_array());
    assert!(first["records"]["dead_lettered"].is_u64());
    let last = &first["checkpoints"]["last_completed"];
    assert_eq!(last["result"], "completed");
    assert!(last["bytes"].as_u64().unwrap() > 0, "{last}");
    let stage = &first["stages"][0]["subtasks"][0];
    for field in [
        "records_in",
        "records_out",
        "in_per_second",
        "backpressure_ms",
    ] {
        assert!(stage[field].is_number(), "{field}: {stage}");
    }

    // Counters move: the records read and each stage's input grow.
    let (read0, in0) = (first["records"]["read"].as_u64().unwrap(), read_in(&first));
    let later = wait_status(port, "counters move", |v| {
        v["records"]["read"].as_u64().unwrap() > read0 + 1000 && read_in(v) > in0 + 1000
    });
    assert!(later["records"]["read_per_second"].as_f64().unwrap() > 0.0);
    // Each component's figures: what left the source and the filter, what the sink wrote and
    // how busy it is.
    let flows = &later["flows"];
    for name in ["source", "transform", "sink"] {
        assert!(
            flows[name]["records"].as_u64().unwrap() > 0,
            "{name}: {flows}"
        );
        assert!(
            flows[name]["per_second"].as_f64().unwrap() > 0.0,
            "{name}: {flows}"
        );
    }
    assert!(
        flows["sink"]["records"].as_u64() <= flows["transform"]["records"].as_u64(),
        "{flows}"
    );
    let busy = flows["sink"]["busy"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&busy), "{flows}");
    assert!(
        flows["source"]["busy"].is_null(),
        "only sinks are sampled: {flows}"
    );
    assert!(
        later["checkpoints"]["completed"].as_u64().unwrap()
            > first["checkpoints"]["completed"].as_u64().unwrap()
    );

    let checkpoints = get_json(port, "/api/checkpoints");
    let list = checkpoints.as_array().unwrap();
    assert!(list.len() >= 2, "{checkpoints}");
    assert!(list
        .windows(2)
        .all(|w| w[0]["id"].as_u64() < w[1]["id"].as_u64()));
    assert!(list.iter().all(|c| c["duration_ms"].is_u64()));

    let (code, metrics) = request(port, "GET", "/metrics", None).unwrap();
    assert_eq!(code, 200);
    assert!(metrics.contains("rivus_records_in_total{"), "{metrics}");
    let (code, page) = request(port, "GET", "/", None).unwrap();
    assert_eq!(code, 200);
    assert!(page.contains("<svg id=\"chart\""));
    assert_eq!(request(port, "GET", "/nope", None).unwrap().0, 404);
    // Without a token the server is read-only.
    let (code, body) = request(port, "POST", "/api/stop", None).unwrap();
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("--http-token"), "{body}");

    let out = stop(job);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_dashboard_needs_its_token_and_stops_the_job_with_it() {
    let dir = tempfile::tempdir().unwrap();
    // A non-loopback address without a token: refused before anything runs.
    let out = start(dir.path(), &["--http", "0.0.0.0:1"], None)
        .wait_with_output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--http 0.0.0.0:1") && err.contains("--http-token"),
        "{err}"
    );

    let token = format!("tok-{}", std::process::id());
    let port = free_port();
    let job = start(
        dir.path(),
        &["--http", &format!("127.0.0.1:{port}")],
        Some(&token),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let code = loop {
        match request(port, "GET", "/api/status", None) {
            Some((code, _)) => break code,
            None => assert!(Instant::now() < deadline, "the server never answered"),
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(code, 401, "no token");
    assert_eq!(
        request(port, "GET", "/api/status", Some("wrong"))
            .unwrap()
            .0,
        401
    );
    assert_eq!(request(port, "GET", "/", None).unwrap().0, 401);
    assert_eq!(
        request(port, "GET", "/api/status", Some(&token)).unwrap().0,
        200
    );
    let (code, _) = request(port, "GET", &format!("/api/status?token={token}"), None).unwrap();
    assert_eq!(code, 200, "the page's ?token=");
    assert_eq!(
        request(port, "POST", "/api/stop", Some("wrong")).unwrap().0,
        401
    );
    let (code, body) = request(port, "POST", "/api/stop", Some(&token)).unwrap();
    assert_eq!(code, 202, "{body}");
    // A graceful stop: drained, final checkpoint, exit 0 — and the token printed nowhere.
    let out = job.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("graceful stop asked for"), "{stderr}");
    assert!(
        !stdout.contains(&token) && !stderr.contains(&token),
        "the token leaked"
    );
}

/// Debian's Chromium (`dev/browser`), or a failure unless skipping was asked for.
fn chromium() -> Option<PathBuf> {
    let bin = PathBuf::from(
        std::env::var("RIVUS_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()),
    );
    if bin.exists() {
        return Some(bin);
    }
    let msg = format!(
        "no Chromium at {} (RIVUS_CHROMIUM): install it with `dev/browser`",
        bin.display()
    );
    if rivus_testkit::services::skipping_allowed() {
        eprintln!("SKIP (RIVUS_SKIP_SERVICES=1): {msg}");
        return None;
    }
    panic!("{msg}");
}

fn headless(bin: &Path, profile: &Path, args: &[&str], url: &str) -> std::process::Output {
    Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1280,1000",
            "--virtual-time-budget=3000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .output()
        .unwrap()
}

#[test]
fn the_dashboard_draws_in_a_headless_browser() {
    let Some(bin) = chromium() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let job = start(dir.path(), &["--http", &format!("127.0.0.1:{port}")], None);
    wait_status(port, "a few throughput points", |v| {
        v["throughput"].as_array().is_some_and(|t| t.len() >= 3)
            && !v["checkpoints"]["last_completed"].is_null()
    });
    let url = format!("http://127.0.0.1:{port}/");
    let profile = dir.path().join("chromium");

    let out = headless(&bin, &profile, &["--dump-dom"], &url);
    let dom = String::from_utf8_lossy(&out.stdout);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(
        dom.contains("data-drawn=\"true\""),
        "the chart did not draw: {dom}\n{log}"
    );
    assert!(dom.contains("class=\"series\""), "{dom}");
    assert!(
        dom.contains("<body data-errors=\"0\""),
        "the page reported errors: {dom}"
    );
    assert!(
        !log.contains("Uncaught"),
        "the console shows an error: {log}"
    );
    assert!(dom.contains(">running<"), "{dom}");
    // The graph shows each component's rate, and the sink's busy share.
    assert!(dom.contains("data-slow=\"false\""), "{dom}");
    assert!(
        dom.contains("/s · busy "),
        "no sink figures in the graph: {dom}"
    );

    let shot = std::env::var("RIVUS_DASHBOARD_SCREENSHOT")
        .map_or_else(|_| dir.path().join("dashboard.png"), PathBuf::from);
    let arg = format!("--screenshot={}", shot.display());
    let out = headless(&bin, &profile, &[&arg], &url);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (distinct, inked) = picture(&shot);
    eprintln!(
        "dashboard screenshot {}: {distinct} colours, {:.1} % not background",
        shot.display(),
        inked * 100.0
    );
    assert!(distinct > 20, "a blank screenshot: {distinct} colours");
    assert!(inked > 0.05, "a blank screenshot: {:.3} inked", inked);

    let out = stop(job);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The screenshot's distinct colours and the share of pixels unlike the most common one.
fn picture(path: &Path) -> (usize, f64) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let mut counts: std::collections::HashMap<&[u8], usize> = std::collections::HashMap::new();
    let pixels = &buf[..info.buffer_size()];
    for px in pixels.chunks(channels) {
        *counts.entry(&px[..channels.min(3)]).or_default() += 1;
    }
    let total = pixels.len() / channels;
    let background = counts.values().copied().max().unwrap_or(0);
    (counts.len(), 1.0 - background as f64 / total as f64)
}
