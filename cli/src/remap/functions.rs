//! The VRL functions a program may call: VRL's standard library (text, numbers, types,
//! timestamps, parsing, encoding, hashing and encryption, ...) built without its network
//! functions (none can reach a network from a transform) and without those that read files,
//! and without `get_env_var` unless the transform says `allow_env = true`: a program must not
//! read secrets it was not given. `docs/vrl.md` lists them; a test keeps that list true.

use vrl::compiler::Function;

/// The functions a program compiles against.
pub(crate) fn enabled(allow_env: bool) -> Vec<Box<dyn Function>> {
    vrl::stdlib::all()
        .into_iter()
        .filter(|f| allow_env || !ENV.contains(&f.identifier()))
        .collect()
}

/// The functions that read the process's environment.
const ENV: &[&str] = &["get_env_var"];
