//! A command a test expects to succeed.

use std::process::{Command, Output};

/// Runs a command and returns its output, failing the test with its stderr when it did not
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
            "{:?} failed: {}",
            self,
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }
}
