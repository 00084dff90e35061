//! Running the `rivus` command in tests: a run that must succeed, or any run's output.
#![allow(dead_code)] // each includer uses a part

use std::path::Path;
use std::process::{Child, Command, Output};

/// Runs a command and returns its output, failing the test with what it printed when it did not
/// succeed: `Command::new(env!("CARGO_BIN_EXE_rivus")).args(["run", &file]).succeeds()`.
pub(crate) trait Succeeds {
    /// The output of a run that succeeded.
    fn succeeds(&mut self) -> Output;
}

impl Succeeds for Command {
    fn succeeds(&mut self) -> Output {
        let out = self.output().unwrap();
        assert!(
            out.status.success(),
            "{:?} failed: {}{}",
            self,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }
}

/// `rivus ARGS` run in `dir`, which must succeed: its output.
pub(crate) fn rivus_succeeds(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(args)
        .current_dir(dir)
        .succeeds()
}

/// `rivus ARGS` run in `dir`: its output, whatever its status.
pub(crate) fn rivus(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// Output bytes as text.
pub(crate) fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Interrupts a running `rivus` (SIGINT, as Ctrl-C does) and waits for it: it must stop
/// gracefully.
pub(crate) fn interrupt(child: Child) {
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "graceful stop: {}", text(&out.stderr));
}

/// Runs a `rivus` job of `n` generated orders into `sink` (TOML lines of a `[sink]`). The job's
/// name is unique: it keys a Kafka sink's transactional ids, and two tests producing at once
/// under one name would fence each other's producer.
pub(crate) fn produce(dir: &Path, label: &str, n: u64, sink: &str) {
    let file = dir.join(format!("{label}.toml"));
    let name = rivus_testkit::services::unique_name(label);
    std::fs::write(
        &file,
        format!(
            "name = \"{name}\"\n[checkpoint]\ninterval = \"1s\"\ndir = \"{label}-state\"\n\
             [source]\ntype = \"generator\"\ncount = {n}\n[sink]\n{sink}\n"
        ),
    )
    .unwrap();
    Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["run", file.to_str().unwrap()])
        .current_dir(dir)
        .succeeds();
}
