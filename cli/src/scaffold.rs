//! `rivus new connector NAME`: a connector crate of one's own that builds and passes its
//! certification tests as written — a source, a sink, their pipeline-file sections, the
//! testkit's suites and a `rivus` with the connector built in.
//!
//! The files are the template in `cli/template/connector/`, the same sources this workspace
//! builds and certifies as `examples/file-connector` (so the template cannot rot); only the
//! crate's name changes, and where its rivus crates come from ([`Rivus`]): the registry at this
//! `rivus`'s version, a checkout on disk, or a git repository.

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

/// The rivus crates the new crate depends on, each as the template names it.
const RIVUS_CRATES: &[(&str, &str)] = &[
    ("rivus-sdk", "core"),
    ("rivus-pipeline-file", "pipeline-file"),
    ("rivus-cli", "cli"),
    ("rivus-testkit", "testkit"),
];

/// Where the new crate's rivus crates come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rivus {
    /// The public registry, at the version of the `rivus` that writes the crate.
    Registry,
    /// A checkout of the rivus repository (its root directory).
    Path(PathBuf),
    /// A git repository of rivus (cargo finds each crate in its workspace).
    Git(String),
}

impl Rivus {
    /// `major.minor` of this crate's version: what a `0.x` requirement must name to take the
    /// releases compatible with this one.
    fn version() -> String {
        let v = env!("CARGO_PKG_VERSION");
        let mut parts = v.split('.');
        match (parts.next(), parts.next()) {
            (Some("0"), Some(minor)) => format!("0.{minor}"),
            (Some(major), _) => major.to_owned(),
            _ => v.to_owned(),
        }
    }

    /// Where `package` (in directory `dir` of the repository) comes from, as the fields of a
    /// dependency's inline table.
    fn locate(&self, dir: &str) -> String {
        let version = Self::version();
        match self {
            Rivus::Registry => format!("version = \"{version}\""),
            Rivus::Path(root) => format!(
                "path = {}, version = \"{version}\"",
                toml_string(&root.join(dir).display().to_string())
            ),
            Rivus::Git(url) => format!("git = {}, version = \"{version}\"", toml_string(url)),
        }
    }

    /// The template's manifest with each rivus dependency taken from here.
    fn manifest(&self, template: &str) -> String {
        template
            .lines()
            .map(|line| {
                let Some((name, dir)) = RIVUS_CRATES
                    .iter()
                    .find(|(name, _)| line.starts_with(&format!("{name} = ")))
                else {
                    return format!("{line}\n");
                };
                let rest = &line[name.len() + 3..];
                // `"0.1"` or `{ version = "0.1", more… }`: the version's place takes the source.
                let more = rest
                    .strip_prefix("{ version = \"")
                    .and_then(|r| r.split_once("\", "))
                    .map(|(_, more)| more.trim_end_matches(" }").to_owned());
                match more {
                    Some(more) => format!("{name} = {{ {}, {more} }}\n", self.locate(dir)),
                    None if *self == Rivus::Registry => {
                        format!("{name} = \"{}\"\n", Self::version())
                    }
                    None => format!("{name} = {{ {} }}\n", self.locate(dir)),
                }
            })
            .collect()
    }
}

/// `s` as a TOML basic string.
fn toml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Why a crate was not made.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// The name cannot be a crate's.
    #[error("`{0}` is not a crate name: lower-case letters, digits, `-` and `_`, starting with a letter")]
    Name(String),
    /// `--rivus-path` does not hold a rivus checkout.
    #[error("{0} is not a rivus checkout (no core/Cargo.toml naming rivus-sdk)")]
    NotACheckout(PathBuf),
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

/// Writes the crate `name` into `dir` (created; it must not hold anything yet), its rivus
/// crates taken from `rivus`. Returns the files written, relative to `dir`.
pub fn new_connector(name: &str, dir: &Path, rivus: &Rivus) -> Result<Vec<PathBuf>, ScaffoldError> {
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
    let rivus = match rivus {
        Rivus::Path(root) => {
            let root = root
                .canonicalize()
                .map_err(|_| ScaffoldError::NotACheckout(root.clone()))?;
            let core = std::fs::read_to_string(root.join("core/Cargo.toml")).unwrap_or_default();
            if !core.contains("name = \"rivus-sdk\"") {
                return Err(ScaffoldError::NotACheckout(root));
            }
            Rivus::Path(root)
        }
        other => other.clone(),
    };
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
        let text = if *path == "Cargo.toml" {
            rivus.manifest(text)
        } else {
            text.to_string()
        };
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
        let files = new_connector("nats-connector", &at, &Rivus::Registry).unwrap();
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
        let again = new_connector("nats-connector", &at, &Rivus::Registry).unwrap_err();
        assert!(matches!(again, ScaffoldError::NotEmpty(_)), "{again}");
    }

    /// Each rivus dependency of the manifest from the registry at this version, a checkout or
    /// git, its other fields kept; nothing else of the manifest changes.
    #[test]
    fn the_rivus_crates_come_from_where_the_user_says() {
        let template = FILES[0].1;
        let v = Rivus::version();
        let registry = Rivus::Registry.manifest(template);
        assert!(
            registry.contains(&format!("rivus-sdk = \"{v}\"\n")),
            "{registry}"
        );
        assert!(
            registry.contains(&format!(
                "rivus-cli = {{ version = \"{v}\", default-features = false, features = [\"jdbc\"], optional = true }}"
            )),
            "{registry}"
        );
        let checkout = Rivus::Path(PathBuf::from("/src/rivus")).manifest(template);
        for (name, dir) in RIVUS_CRATES {
            assert!(
                checkout.contains(&format!(
                    "{name} = {{ path = \"/src/rivus/{dir}\", version = \"{v}\""
                )),
                "{name} in {checkout}"
            );
        }
        let git = Rivus::Git("https://example.org/rivus.git".into()).manifest(template);
        assert!(
            git.contains("rivus-testkit = { git = \"https://example.org/rivus.git\", version = "),
            "{git}"
        );
        let others = |m: &str| -> Vec<String> {
            m.lines()
                .filter(|l| !RIVUS_CRATES.iter().any(|(n, _)| l.starts_with(n)))
                .map(str::to_owned)
                .collect()
        };
        assert_eq!(others(&checkout), others(template));
        // A directory that is not a checkout is refused by name.
        let dir = tempfile::tempdir().unwrap();
        let e =
            new_connector("x", &dir.path().join("x"), &Rivus::Path(dir.path().into())).unwrap_err();
        assert!(matches!(e, ScaffoldError::NotACheckout(_)), "{e}");
    }

    #[test]
    fn names_that_cannot_be_crates_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        for bad in ["Nats", "1nats", "nats connector", "", "nats/x"] {
            let e = new_connector(bad, &dir.path().join("x"), &Rivus::Registry).unwrap_err();
            assert!(matches!(e, ScaffoldError::Name(_)), "{bad}: {e}");
        }
    }
}
