//! The file sink through the `rivus` command against S3 (SeaweedFS): a generator job writing
//! Parquet with 1 s checkpoints is killed with SIGKILL three times and started again from its
//! checkpoints — afterwards every record is in exactly one committed file, every committed file
//! reads whole, and no multipart upload is left open (listed through the S3 API); and files
//! reach their target size whatever the checkpoint interval. Read back by pyarrow.

#[path = "support/parquet.rs"]
mod parquet;
#[path = "support/run.rs"]
mod run;
use parquet::read;
use run::Succeeds;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rivus_testkit::services::{
    python_with, require, s3_credentials, s3_keys, s3_open_uploads, unique_name, Service,
};

/// A generator → files pipeline file in `dir`.
fn pipeline(
    dir: &Path,
    name: &str,
    prefix: &str,
    endpoint: &str,
    count: u64,
    rate: u64,
    target: u64,
) -> std::path::PathBuf {
    let (bucket, access, secret) = s3_credentials();
    let text = format!(
        r#"name = "{name}"
[checkpoint]
interval = "1s"
dir = "{state}"

[source]
type = "generator"
count = {count}
rate = {rate}
users = 100000

[sink]
type = "files"
url = "s3://{bucket}/{prefix}"
s3 = {{ endpoint = "{endpoint}", access_key = "{access}", secret_key = "{secret}" }}
format = "parquet"
target_file_size = {target}
row_group_bytes = 262144
schema = [
  {{ name = "id", type = "int64", nullable = false }},
  {{ name = "user", type = "string" }},
  {{ name = "amount", type = "float64" }},
  {{ name = "status", type = "string" }},
  {{ name = "ts", type = "timestamp" }},
]
"#,
        state = dir.join("state").display()
    );
    let file = dir.join(format!("{name}.toml"));
    std::fs::write(&file, text).unwrap();
    file
}

fn rivus(dir: &Path, file: &Path, label: &str) -> Child {
    let log = std::fs::File::create(dir.join(format!("{label}.log"))).unwrap();
    Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["run", file.to_str().unwrap()])
        .current_dir(dir)
        .env("RUST_LOG", "warn,rivus_connector_files=info")
        .stdout(Stdio::from(log.try_clone().unwrap()))
        .stderr(Stdio::from(log))
        .spawn()
        .unwrap()
}

/// Committed data files under `prefix`.
fn committed(endpoint: &str, prefix: &str) -> usize {
    s3_keys(endpoint, prefix)
        .iter()
        .filter(|k| k.ends_with(".parquet") && !k.contains("/_rivus/"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parquet_on_s3_sigkilled_three_times_holds_every_record_once() {
    let (Some(endpoint), Some(py)) = (require(Service::S3), python_with("pyarrow.parquet")) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let prefix = unique_name("files-kill");
    let n = 150_000;
    let file = pipeline(
        dir.path(),
        &prefix,
        &prefix,
        &endpoint,
        n,
        15_000,
        256 * 1024,
    );
    for round in 0..3 {
        let before = committed(&endpoint, &prefix);
        let mut child = rivus(dir.path(), &file, &format!("run{round}"));
        // Killed once it has committed something more: in the middle of files being written.
        let deadline = Instant::now() + Duration::from_secs(60);
        while committed(&endpoint, &prefix) <= before {
            assert!(
                child.try_wait().unwrap().is_none(),
                "round {round}: the job ended early"
            );
            assert!(
                Instant::now() < deadline,
                "round {round}: nothing committed in 60 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }
    let status = rivus(dir.path(), &file, "last").wait().unwrap();
    let log = std::fs::read_to_string(dir.path().join("last.log")).unwrap();
    assert!(status.success(), "{log}");
    let found = read(&py, &endpoint, &prefix);
    let mut ids = found.ids.clone();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(
        found.ids.len() as u64,
        n,
        "each record once ({} distinct)",
        ids.len()
    );
    assert_eq!(ids, (0..n).collect::<Vec<_>>(), "every record");
    assert_eq!(
        s3_open_uploads(&endpoint, &prefix),
        0,
        "no upload left open"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parquet_files_reach_their_target_size_at_one_second_checkpoints() {
    let (Some(endpoint), Some(py)) = (require(Service::S3), python_with("pyarrow.parquet")) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let prefix = unique_name("files-size");
    let target = 1 << 20;
    // About eight seconds of records: eight checkpoints or more.
    let file = pipeline(
        dir.path(),
        &prefix,
        &prefix,
        &endpoint,
        400_000,
        50_000,
        target,
    );
    let status = rivus(dir.path(), &file, "run").wait().unwrap();
    let log = std::fs::read_to_string(dir.path().join("run.log")).unwrap();
    assert!(status.success(), "{log}");
    let found = read(&py, &endpoint, &prefix);
    assert_eq!(found.ids.len(), 400_000);
    let (last, full) = found.files.split_last().unwrap();
    assert!(!full.is_empty(), "more than one file: {:?}", found.files);
    for (path, size, _) in full {
        assert!(
            *size >= target,
            "{path}: {size} bytes, under the target {target}"
        );
    }
    assert!(last.1 <= target + (1 << 20), "{last:?}");
    let total: u64 = found.files.iter().map(|f| f.1).sum();
    assert!(
        found.files.len() as u64 <= total / target + 1,
        "files by size, not by checkpoint: {:?}",
        found.files
    );

    // And `[source] type = "files"` reads them back, two subtasks, into local JSON lines.
    let (bucket, access, secret) = s3_credentials();
    let back = dir.path().join("back");
    let text = format!(
        r#"name = "{prefix}-back"
parallelism = 2
[checkpoint]
interval = "1s"
dir = "{state}"

[source]
type = "files"
url = "s3://{bucket}/{prefix}"
s3 = {{ endpoint = "{endpoint}", access_key = "{access}", secret_key = "{secret}" }}
format = "parquet"

[sink]
type = "files"
url = "file://{back}"
format = "jsonl"
"#,
        state = dir.path().join("state-back").display(),
        back = back.display()
    );
    let file = dir.path().join("back.toml");
    std::fs::write(&file, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["run", file.to_str().unwrap()])
        .current_dir(dir.path())
        .succeeds();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("read        400000 records"), "{stdout}");
    let mut lines = 0;
    for e in std::fs::read_dir(&back).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "jsonl") {
            lines += std::fs::read_to_string(e.path()).unwrap().lines().count();
        }
    }
    assert_eq!(lines, 400_000, "every record read back once");
}
