//! The custom `rivus` runs a third party's connector from a pipeline file: `connectors` lists
//! `file` beside the built-in types, and `examples/custom-rivus/file-to-file.toml` copies the
//! files (and a second run, resumed from the final checkpoint, copies nothing again).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

const EXAMPLE: &str = "examples/custom-rivus";

fn custom_rivus(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_custom-rivus"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("custom-rivus runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The lines of every file in `dir`, each as its JSON value written back (keys in order).
fn lines_in(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
        out.extend(text.lines().map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v.to_string()
        }));
    }
    out
}

#[test]
fn connectors_lists_the_file_connector_beside_the_built_in_ones() {
    let dir = tempfile::tempdir().unwrap();
    let out = custom_rivus(dir.path(), &["connectors"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for (role, name) in [
        ("source", "file"),
        ("sink", "file"),
        ("source", "generator"),
        ("sink", "jdbc"),
    ] {
        assert!(
            stdout.lines().any(|l| {
                let mut w = l.split_whitespace();
                w.next() == Some(role) && w.next() == Some(name)
            }),
            "{role} {name} listed: {stdout}"
        );
    }
    assert!(
        stdout.contains("- dir: string (required): The directory"),
        "{stdout}"
    );
}

#[test]
fn the_example_pipeline_copies_the_files_once() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let work = tempfile::tempdir().unwrap();
    // The example's relative paths, laid out in a scratch directory.
    let input = work.path().join(EXAMPLE).join("input");
    std::fs::create_dir_all(&input).unwrap();
    for e in std::fs::read_dir(root.join(EXAMPLE).join("input")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), input.join(e.file_name())).unwrap();
    }
    let file = root.join(EXAMPLE).join("file-to-file.toml");
    let file = file.to_str().unwrap();

    let check = custom_rivus(work.path(), &["validate", file]);
    assert!(check.status.success(), "{}", text(&check.stderr));
    let stdout = text(&check.stdout);
    assert!(
        stdout.contains(": ok\n  source (file)\n") && stdout.contains("  sink (file) <- transform"),
        "{stdout}"
    );

    let run = custom_rivus(work.path(), &["run", file]);
    assert!(run.status.success(), "{}", text(&run.stderr));

    let wanted: BTreeSet<String> = lines_in(&input)
        .into_iter()
        .filter(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["amount"].as_f64().unwrap() >= 50.0
        })
        .collect();
    assert!(wanted.len() > 50 && wanted.len() < 150, "{}", wanted.len());
    let out_dir = work.path().join(EXAMPLE).join("out");
    let copied = lines_in(&out_dir);
    assert_eq!(copied.len(), wanted.len(), "every kept line once");
    assert_eq!(copied.into_iter().collect::<BTreeSet<_>>(), wanted);

    // Resumed from the final checkpoint: nothing is read or written again.
    let again = custom_rivus(work.path(), &["run", file]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(
        text(&again.stdout).contains("read        0 records"),
        "{}",
        text(&again.stdout)
    );
    assert_eq!(lines_in(&out_dir).len(), wanted.len());
}
