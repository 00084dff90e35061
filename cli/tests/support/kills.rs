//! What the lakehouse tables' SIGKILL tests share: a job killed three times, each time right
//! after its table gained a commit, and `rivus orphans` on what the kills left. Include beside
//! `support/cdc.rs` (as `cdc`) and `support/run.rs` (as `run`).

use std::path::Path;
use std::time::{Duration, Instant};

use crate::cdc;
use crate::run::{rivus_succeeds, text};

/// Runs the pipeline `file` three times, each killed (SIGKILL) once `commits()` — the
/// table's commits so far, its creation counting as one — grew: between a commit and the next
/// checkpoint, with files open and others made visible but not yet committed. Fails when a run
/// ends first (with its log, `run<round>.log` under `dir`) or commits nothing in 90 s.
pub(crate) async fn killed_after_commits(
    dir: &Path,
    file: &Path,
    commits: impl Fn() -> usize,
    env: &[(&str, &str)],
) {
    for round in 0..3 {
        // The first commit is the table's creation: the first kill waits for one of data.
        let before = commits().max(1);
        let label = format!("run{round}");
        let mut job = cdc::rivus(dir, file, &label, env);
        let deadline = Instant::now() + Duration::from_secs(90);
        while commits() <= before {
            if let Some(status) = job.child().try_wait().unwrap() {
                let log = std::fs::read_to_string(dir.join(format!("{label}.log")));
                panic!("round {round}: the job ended early ({status}): {log:?}");
            }
            assert!(
                Instant::now() < deadline,
                "round {round}: no commit in 90 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        job.kill();
    }
}

/// `rivus orphans file` lists nothing for the sink `kind`; after `put_stray` puts
/// `part-stray.parquet` (4 bytes) among the table's data files, it lists that file by key.
pub(crate) fn orphans_listed(dir: &Path, file: &Path, kind: &str, put_stray: impl FnOnce()) {
    let orphans = || text(&rivus_succeeds(dir, &["orphans", file.to_str().unwrap()]).stdout);
    let listed = orphans();
    assert!(
        listed.contains(&format!("sink {kind}: 0 orphaned")),
        "{listed}"
    );
    put_stray();
    let listed = orphans();
    assert!(
        listed.contains(&format!("sink {kind}: 1 orphaned")),
        "{listed}"
    );
    assert!(
        listed.contains("  part-stray.parquet  4 bytes  "),
        "{listed}"
    );
}
