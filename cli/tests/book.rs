//! The book (`docs/`) and the READMEs hold together: every relative link reaches a file (and a
//! heading of it, for `#anchor`), every page of `docs/` is a chapter of `docs/SUMMARY.md`, the
//! README stays an entrance (at most 200 lines), and its pipeline file is one `rivus` reads.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[path = "support/run.rs"]
mod run;
use run::Succeeds;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The Markdown files the links are checked in: `docs/`, the READMEs of the crates, the root's.
fn pages() -> Vec<PathBuf> {
    let mut out = vec![root().join("README.md")];
    let mut dirs = vec![root().join("docs")];
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    for e in std::fs::read_dir(root()).unwrap() {
        let readme = e.unwrap().path().join("README.md");
        if readme.is_file() {
            out.push(readme);
        }
    }
    out.sort();
    out
}

/// The targets of the inline links of `text` (`[words](target)`), outside code.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Inline code spans hold no links.
        let plain: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join("");
        let mut rest = plain.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].to_owned());
            rest = &after[end..];
        }
    }
    out
}

/// The anchors of a page's headings, as mdBook and GitHub make them.
fn anchors(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| {
            l.trim_start_matches('#')
                .trim()
                .to_lowercase()
                .chars()
                .filter_map(|c| match c {
                    c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                    ' ' => Some('-'),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

#[test]
fn every_relative_link_reaches_a_file_and_its_heading() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") || target.is_empty() {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let path = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(file)
            };
            if !path.exists() {
                broken.push(format!("{}: {target} (no such file)", page.display()));
                continue;
            }
            if let Some(a) = anchor {
                let target_text = std::fs::read_to_string(&path).unwrap_or_default();
                if !anchors(&target_text).contains(a) {
                    broken.push(format!("{}: {target} (no such heading)", page.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_page_of_the_book_is_a_chapter() {
    let docs = root().join("docs");
    let summary = std::fs::read_to_string(docs.join("SUMMARY.md")).unwrap();
    let chapters: BTreeSet<String> = links(&summary).into_iter().collect();
    let mut missing = Vec::new();
    for page in pages() {
        let Ok(rel) = page.strip_prefix(&docs) else {
            continue;
        };
        let rel = rel.to_string_lossy().into_owned();
        if rel != "SUMMARY.md" && !chapters.contains(&rel) {
            missing.push(rel);
        }
    }
    assert!(
        missing.is_empty(),
        "pages SUMMARY.md does not name: {missing:?}"
    );
    for c in &chapters {
        assert!(
            docs.join(c).is_file(),
            "SUMMARY.md names {c}, which does not exist"
        );
    }
}

#[test]
fn the_readme_is_an_entrance_and_its_pipeline_is_valid() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 200,
        "README.md has {lines} lines; the book holds the rest"
    );
    let start = readme
        .find("```toml\n")
        .expect("the README's pipeline file")
        + 8;
    let block = &readme[start..start + readme[start..].find("```").unwrap()];
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("readme.toml");
    std::fs::write(&file, block).unwrap();
    std::process::Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["validate", file.to_str().unwrap()])
        .env("RIVUS_KAFKA_BOOTSTRAP", "127.0.0.1:9092")
        .env("DATABASE_URL", "postgres://rivus@127.0.0.1/rivus")
        .current_dir(dir.path())
        .succeeds();
}
