//! What the commands say: their output on stdout, and a pipeline file read with its refusal
//! on stderr (exit code 2).

use std::process::ExitCode;

use rivus_engine::{Pipeline, Registry};

/// Reads `file` with the sections of `registry`; exit code 2 (said on stderr) if it is bad.
pub(crate) fn load(file: &std::path::Path, registry: &Registry) -> Result<Pipeline, ExitCode> {
    Pipeline::from_file(file, registry).map_err(|e| {
        eprintln!("invalid pipeline: {e}");
        ExitCode::from(2)
    })
}

/// Writes to stdout; a closed pipe (`| head`) is not an error.
pub(crate) fn out(text: &str) {
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}
