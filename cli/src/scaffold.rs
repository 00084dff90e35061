//! `rivus new connector NAME`: a connector crate of one's own that builds and passes its
//! certification tests as written — a source, a sink, their pipeline-file sections, the
//! testkit's suites and a `rivus` with the connector built in.
//!
//! The files are the template in `cli/template/connector/`, the same sources this workspace
//! builds and certifies as `examples/file-connector` (so the template cannot rot); only the
//! crate's name changes.

use std::path::{Path, PathBuf};

/// The template's files: (path in the new crate, content).
const FILES: &[(&str, &str)] = &[
    (
        "Cargo.toml",
        include_str!("../template/connector/Cargo.toml.template"),
    ),
    (
        "src/lib.rs",
        include_str!("../template/connector/src/lib.rs"),
    ),
    (
        "src/source.rs",
        include_str!("../template/connector/src/source.rs"),
    ),
    (
        "src/sink.rs",
        include_str!("../template/connector/src/sink.rs"),
    ),
    (
        "src/pipeline_file.rs",
        include_str!("../template/connector/src/pipeline_file.rs"),
    ),
    (
        "src/bin/rivus.rs",
        include_str!("../template/connector/src/bin/rivus.rs"),
    ),
    (
        "tests/certify.rs",
        include_str!("../template/connector/tests/certify.rs"),
    ),
];

/// The template crate's name, as a package and as a library.
const TEMPLATE_PACKAGE: &str = "rivus-example-file-connector";
const TEMPLATE_LIB: &str = "rivus_example_file_connector";

/// Why a crate was not made.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// The name cannot be a crate's.
    #[error("`{0}` is not a crate name: lower-case letters, digits, `-` and `_`, starting with a letter")]
    Name(String),
    /// The directory exists and holds something.
    #[error("{0} exists and is not empty; name a new directory with --path")]
    NotEmpty(PathBuf),
    /// Writing failed.
    #[error("writing {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
}

/// Writes the crate `name` into `dir` (created; it must not hold anything yet). Returns the
/// files written, relative to `dir`.
pub fn new_connector(name: &str, dir: &Path) -> Result<Vec<PathBuf>, ScaffoldError> {
    let valid = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !valid {
        return Err(ScaffoldError::Name(name.to_owned()));
    }
    if std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(ScaffoldError::NotEmpty(dir.to_owned()));
    }
    let lib = name.replace('-', "_");
    let mut written = Vec::with_capacity(FILES.len());
    for (path, text) in FILES {
        let to = dir.join(path);
        let io = |source| ScaffoldError::Io {
            path: to.clone(),
            source,
        };
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        let text = text
            .replace(TEMPLATE_PACKAGE, name)
            .replace(TEMPLATE_LIB, &lib);
        std::fs::write(&to, text).map_err(io)?;
        written.push(PathBuf::from(path));
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_crate_carries_its_own_name_everywhere() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("nats-connector");
        let files = new_connector("nats-connector", &at).unwrap();
        assert_eq!(files.len(), FILES.len());
        let manifest = std::fs::read_to_string(at.join("Cargo.toml")).unwrap();
        assert!(manifest.contains("name = \"nats-connector\""), "{manifest}");
        for f in &files {
            let text = std::fs::read_to_string(at.join(f)).unwrap();
            assert!(
                !text.contains(TEMPLATE_LIB) && !text.contains(TEMPLATE_PACKAGE),
                "{} still names the template",
                f.display()
            );
        }
        let certify = std::fs::read_to_string(at.join("tests/certify.rs")).unwrap();
        assert!(certify.contains("use nats_connector::"), "{certify}");
        // A second time into the same place: refused, nothing overwritten.
        let again = new_connector("nats-connector", &at).unwrap_err();
        assert!(matches!(again, ScaffoldError::NotEmpty(_)), "{again}");
    }

    #[test]
    fn names_that_cannot_be_crates_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        for bad in ["Nats", "1nats", "nats connector", "", "nats/x"] {
            let e = new_connector(bad, &dir.path().join("x")).unwrap_err();
            assert!(matches!(e, ScaffoldError::Name(_)), "{bad}: {e}");
        }
    }
}
