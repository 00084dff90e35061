//! VRL's cost, side by side in one run: the same bounded `rivus run` job (Kafka → Kafka, JSON,
//! a 2-partition topic of the generator's records, parallelism 1) with no transform, with a
//! `remap` that leaves the record as it is (`.`: what converting each record to a VRL value
//! and back costs), and with a typical program (five assignments, a type conversion, a
//! timestamp, a condition), and with that program followed by a second `remap` (one chain:
//! the record converted once), and reading the records' Kafka metadata (`%kafka.topic`: the
//! source carries it); rounds rotating the order. Records/s (wall time of the whole run,
//! start-up included), CPU per record (user + system of the process), and each case's ratio
//! to the job without a transform.
//!
//! `cargo bench -p rivus-cli --bench remap` after `dev/services up kafka`
//! (`RIVUS_REMAP_RECORDS`, default 300 000; `RIVUS_REMAP_ROUNDS`, default 3).

#[path = "support/jobs.rs"]
mod jobs;
#[path = "../tests/support/topics.rs"]
mod topics;

use jobs::{env_usize, median, run};

use std::collections::BTreeMap;

use rivus_testkit::services::{unique_name, Service};

/// The typical program of the comparison.
const TYPICAL: &str = r#"
.amount_cents = to_int(round(to_float!(.amount) * 100))
.at = format_timestamp!(from_unix_timestamp!(.ts, unit: "milliseconds"), format: "%+")
.user = upcase!(.user)
.tier = if .amount_cents >= 50000 { "gold" } else { "standard" }
.paid = .status == "paid"
del(.ts)
"#;

/// The cases: name and the transform section (none for the baseline).
fn cases() -> Vec<(&'static str, String)> {
    let remap =
        |source: &str| format!("[[transform]]\ntype = \"remap\"\nsource = '''{source}'''\n");
    vec![
        ("none", String::new()),
        ("remap `.`", remap(".")),
        ("remap typical", remap(TYPICAL)),
        (
            "typical + %kafka",
            remap(&format!("{TYPICAL}.topic = %kafka.topic\n")),
        ),
        (
            "typical + 2nd remap",
            format!("{}{}", remap(TYPICAL), remap(".checked = true")),
        ),
    ]
}

fn main() {
    let n = env_usize("RIVUS_REMAP_RECORDS", 300_000);
    let rounds = env_usize("RIVUS_REMAP_ROUNDS", 3);
    let kafka = Service::Kafka.url();
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let input = unique_name("bench-remap");
    rt.block_on(topics::topic(&kafka, &input));
    run(
        dir.path(),
        "fill",
        &format!(
            "[source]\ntype = \"generator\"\ncount = {n}\n\
             [sink]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopic = \"{input}\"\n"
        ),
    );
    let cases = cases();
    let mut results: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    for round in 0..rounds {
        let mut order: Vec<&(&str, String)> = cases.iter().collect();
        order.rotate_left(round % cases.len());
        for (name, transform) in order {
            let out = unique_name("bench-remap-out");
            rt.block_on(topics::topic(&kafka, &out));
            let r = run(
                dir.path(),
                "remap",
                &format!(
                    "[source]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\n\
                     topics = [\"{input}\"]\nstart = \"earliest\"\nbounded = true\n{transform}\
                     [sink]\ntype = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopic = \"{out}\"\n"
                ),
            );
            println!(
                "round {round} {name:<20}: {:>8.0} records/s, {:.2} µs CPU per record",
                n as f64 / r.0,
                r.1 * 1e6 / n as f64
            );
            results.entry(name).or_default().push(r);
        }
    }
    let rate = |c: &str| median(results[c].iter().map(|r| n as f64 / r.0).collect());
    let cpu = |c: &str| median(results[c].iter().map(|r| r.1 * 1e6 / n as f64).collect());
    println!(
        "\n| Kafka → Kafka, {n} JSON records | records/s (median) | CPU µs/record | of none |"
    );
    println!("|---|---|---|---|");
    for (c, _) in &cases {
        println!(
            "| {c} | {:.0} | {:.2} | {:.2}× |",
            rate(c),
            cpu(c),
            rate(c) / rate("none")
        );
    }
}
