//! Pipeline files as graphs through the `rivus` command, on SQLite: two sources tagged by a
//! transform each, a router sending records by amount into two tables (fan-out of one source
//! into a third table too); every table holds exactly the records routed to it — also after a
//! graceful stop and a rerun that resumes from the checkpoint. `rivus validate` prints the
//! graph and refuses a cycle and an unknown input, naming the components.

#[path = "support/run.rs"]
mod run;
use run::{rivus, text};

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sqlx::{Connection, Row};

/// The generator's amount of record `n` (`cli/src/sections/generator.rs`).
fn amount(n: u64) -> f64 {
    (n.wrapping_mul(7919) % 100_000) as f64 / 100.0
}

const TABLE: &str = "CREATE TABLE IF NOT EXISTS orders \
    (id INTEGER, user TEXT, amount REAL, status TEXT, ts INTEGER, origin TEXT)";

/// Sources `a` (`na` records) and `b` (`nb`), each tagged with its origin; a router: amounts
/// above 500 to `big.db`, the rest (`_unmatched`) to `small.db`; `a` also whole to `all.db`.
fn graph_file(dir: &Path, na: u64, nb: u64, rate: Option<u64>) -> String {
    let rate = rate.map(|r| format!("rate = {r}\n")).unwrap_or_default();
    let sink = |name: &str, input: &str| {
        format!(
            "[sinks.{name}]\ntype = \"jdbc\"\ninputs = [{input}]\nurl = \"sqlite:{name}.db\"\n\
             table = \"orders\"\nsetup = \"{TABLE}\"\n"
        )
    };
    let text = format!(
        "name = \"graph\"\n[checkpoint]\ninterval = \"200ms\"\ndir = \"state\"\n\
         [sources.a]\ntype = \"generator\"\ncount = {na}\n{rate}\
         [sources.b]\ntype = \"generator\"\ncount = {nb}\n{rate}\
         [transforms.tag_a]\ntype = \"add\"\ninputs = [\"a\"]\nfields = {{ origin = \"a\" }}\n\
         [transforms.tag_b]\ntype = \"add\"\ninputs = [\"b\"]\nfields = {{ origin = \"b\" }}\n\
         [transforms.by_amount]\ntype = \"route\"\ninputs = [\"tag_a\", \"tag_b\"]\n\
         route.big = {{ field = \"amount\", op = \">\", value = 500 }}\n{}{}{}",
        sink("big", "\"by_amount.big\""),
        sink("small", "\"by_amount._unmatched\""),
        sink("all", "\"tag_a\""),
    );
    let file = dir.join("graph.toml");
    std::fs::write(&file, text).unwrap();
    file.to_str().unwrap().to_owned()
}

/// `(origin, id)` of every row of `orders` in `dir/name.db`, and whether a row repeats.
async fn rows(dir: &Path, name: &str) -> (BTreeSet<(String, u64)>, usize) {
    let url = format!("sqlite:{}", dir.join(format!("{name}.db")).display());
    let mut c = sqlx::SqliteConnection::connect(&url).await.unwrap();
    let rows = sqlx::query("SELECT origin, id FROM orders")
        .fetch_all(&mut c)
        .await
        .unwrap();
    let n = rows.len();
    let set = rows
        .iter()
        .map(|r| (r.get::<String, _>(0), r.get::<i64, _>(1) as u64))
        .collect();
    (set, n)
}

/// Every table holds exactly the records routed to it, each once.
async fn assert_routed(dir: &Path, na: u64, nb: u64) {
    fn all(origin: &str, n: u64) -> impl Iterator<Item = (String, u64)> + '_ {
        (0..n).map(move |i| (origin.to_owned(), i))
    }
    let input: Vec<(String, u64)> = all("a", na).chain(all("b", nb)).collect();
    let want = |big: bool| -> BTreeSet<(String, u64)> {
        input
            .iter()
            .filter(|(_, i)| (amount(*i) > 500.0) == big)
            .cloned()
            .collect()
    };
    for (name, want) in [
        ("big", want(true)),
        ("small", want(false)),
        ("all", all("a", na).collect()),
    ] {
        let (got, n) = rows(dir, name).await;
        assert_eq!(n, got.len(), "{name}: a record written twice");
        assert_eq!(got.len(), want.len(), "{name}: rows");
        assert!(got == want, "{name}: the rows are the records routed to it");
    }
}

#[tokio::test]
async fn a_graph_routes_two_sources_into_tables_that_hold_exactly_their_records() {
    let dir = tempfile::tempdir().unwrap();
    let file = graph_file(dir.path(), 3_000, 2_000, None);
    let out = rivus(dir.path(), &["run", &file]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("read        5000 records"), "{stdout}");
    assert_routed(dir.path(), 3_000, 2_000).await;
}

#[tokio::test]
async fn a_graph_stopped_with_ctrl_c_resumes_every_branch_without_loss_or_repeat() {
    let dir = tempfile::tempdir().unwrap();
    let (na, nb) = (40_000, 30_000);
    let file = graph_file(dir.path(), na, nb, Some(8_000));
    let spawn = || {
        Command::new(env!("CARGO_BIN_EXE_rivus"))
            .args(["run", &file])
            .current_dir(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let child = spawn();
    let deadline = Instant::now() + Duration::from_secs(60);
    let all_db = dir.path().join("all.db");
    loop {
        if all_db.exists() && rows(dir.path(), "all").await.1 >= 5_000 {
            break;
        }
        assert!(Instant::now() < deadline, "rows arrive");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    run::interrupt(child);
    let first = rows(dir.path(), "all").await.1 as u64;
    assert!(first < na, "stopped mid-stream ({first} of {na})");
    let out = spawn().wait_with_output().unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("resumed     from checkpoint"), "{stdout}");
    assert_routed(dir.path(), na, nb).await;
}

#[test]
fn validate_prints_the_graph_and_refuses_a_cycle_and_an_unknown_input() {
    let dir = tempfile::tempdir().unwrap();
    let file = graph_file(dir.path(), 10, 10, None);
    let out = rivus(dir.path(), &["validate", &file]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for line in [
        "  sources.a (generator)",
        "  transforms.by_amount (route: big) <- tag_a, tag_b",
        "  sinks.small (jdbc) <- by_amount._unmatched",
        "  sinks.all (jdbc) <- tag_a",
    ] {
        assert!(stdout.contains(line), "{line} in {stdout}");
    }
    let original = std::fs::read_to_string(&file).unwrap();
    for (from, to, want) in [
        (
            "inputs = [\"a\"]",
            "inputs = [\"a\", \"by_amount.big\"]",
            "a cycle among transforms",
        ),
        (
            "inputs = [\"tag_a\"]\nurl",
            "inputs = [\"tag_c\"]\nurl",
            "sinks.all.inputs[0]: no component named \"tag_c\"",
        ),
    ] {
        assert!(original.contains(from), "{from}");
        std::fs::write(&file, original.replacen(from, to, 1)).unwrap();
        let out = rivus(dir.path(), &["validate", &file]);
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "refused: {to}");
        assert!(stderr.contains(want), "{want} in {stderr}");
    }
}
