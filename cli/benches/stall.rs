//! Memory under a stalled destination, for every sink: a `rivus run` job (an unbounded
//! generator at a fixed rate, parallelism 2, checkpoints every second) writes into one real
//! server; after a warm-up the server's processes are frozen with SIGSTOP for 30 s, then
//! thawed. The bench reports the job's peak RSS (before and across the stall), how many records
//! the source still emitted while the server was frozen (back-pressure: a bounded number, not
//! the generator's rate × 30 s), and whether records flowed again after the thaw.
//!
//! `cargo bench -p rivus-cli --bench stall` after `dev/services up` (`RIVUS_BENCH_FILTER`
//! picks cases by name; `RIVUS_BENCH_STALL_SECS`, default 30). Not part of `dev/test`: it
//! freezes the shared servers. Every frozen process is thawed again, also when a case fails.

#[path = "../tests/support/frozen.rs"]
mod frozen;
#[path = "../tests/support/http.rs"]
mod http;

use frozen::{server_pids, signal, Frozen};

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rivus_testkit::bench::{rss_mib, selected};
use rivus_testkit::services::{unique_name, Service};

/// Records per second per subtask (two subtasks).
const RATE: u64 = 10_000;
const METRICS_PORT: u16 = 9899;

/// (current, peak) resident set of a process, in MiB (NaN once it is gone).
fn rss(pid: u32) -> (f64, f64) {
    rss_mib(&pid.to_string()).unwrap_or((f64::NAN, f64::NAN))
}

/// Records the generator has handed to the sink so far (`rivus_records_in_total` of the sink
/// task, from the job's Prometheus endpoint; the source is chained to the sink), if it answers.
fn emitted() -> Option<u64> {
    let body = http::metrics(METRICS_PORT)?;
    let total = body
        .lines()
        .filter(|l| l.starts_with("rivus_records_in_total{") && l.contains("task=\"sink\""))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum::<f64>();
    Some(total as u64)
}

/// One destination: its pipeline's `[sink]` table, the services to freeze, and what to
/// prepare before and remove after.
struct Case {
    name: &'static str,
    freeze: &'static [&'static str],
    sink: String,
}

fn cases(tag: &str) -> Vec<Case> {
    let kafka = Service::Kafka.url();
    let pg = Service::Postgres.url();
    let my = Service::MySql.url();
    let es = Service::Elasticsearch.url();
    let redis = Service::Redis.url();
    let amqp = Service::RabbitMq.url();
    // The generator's `user` is renamed `customer` (a reserved word in neither database).
    let table = || {
        format!(
            "table = \"{tag}\"\nsetup = \"CREATE TABLE IF NOT EXISTS {tag} (id BIGINT, customer VARCHAR(32), amount DOUBLE PRECISION, status VARCHAR(16), ts BIGINT)\"\n"
        )
    };
    vec![
        Case {
            name: "kafka at-least-once",
            freeze: &["kafka"],
            sink: format!(
                "type = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopic = \"{tag}-alo\"\n"
            ),
        },
        Case {
            name: "kafka exactly-once",
            freeze: &["kafka"],
            sink: format!(
                "type = \"kafka\"\nbootstrap_servers = \"{kafka}\"\ntopic = \"{tag}-eo\"\nexactly_once = true\n"
            ),
        },
        Case {
            name: "elasticsearch",
            freeze: &["elasticsearch"],
            sink: format!("type = \"elasticsearch\"\nurl = \"{es}\"\nindex = \"{tag}\"\nid_field = \"id\"\n"),
        },
        Case {
            name: "redis",
            freeze: &["redis"],
            // One key per user: the server's memory stays small however long the run.
            sink: format!(
                "type = \"redis\"\nurl = \"{redis}\"\ncommand = \"set\"\nkey = \"{tag}:{{customer}}\"\n"
            ),
        },
        Case {
            name: "rabbitmq",
            freeze: &["rabbitmq"],
            // Into a queue declared by `prepare` that keeps its newest 200 000 messages.
            sink: format!("type = \"rabbitmq\"\nuri = \"{amqp}\"\nrouting_key = \"{tag}\"\n"),
        },
        Case {
            name: "postgres at-least-once",
            freeze: &["postgres"],
            sink: format!("type = \"jdbc\"\nurl = \"{pg}\"\n{}", table()),
        },
        Case {
            name: "postgres exactly-once",
            freeze: &["postgres"],
            sink: format!(
                "type = \"jdbc\"\nurl = \"{pg}\"\nexactly_once = true\n{}",
                table()
            ),
        },
        Case {
            name: "mariadb exactly-once",
            freeze: &["mariadb"],
            sink: format!(
                "type = \"jdbc\"\nurl = \"{my}\"\nexactly_once = true\n{}",
                table()
            ),
        },
    ]
}

/// Figures of one case.
struct Outcome {
    rss_before: f64,
    peak: f64,
    emitted_in_stall: u64,
    emitted_after: u64,
    exit: String,
}

/// Waits until `f` holds; else stops the job and fails with what it printed.
fn wait_for(
    child: &mut Child,
    log: &Path,
    what: &str,
    limit: Duration,
    mut f: impl FnMut() -> bool,
) {
    let t = Instant::now();
    while !f() {
        if t.elapsed() > limit || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let err = std::fs::read_to_string(log).unwrap_or_default();
            panic!("no {what} within {limit:?}: {err}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn run_case(case: &Case, dir: &Path, stall: Duration) -> Outcome {
    let file = dir.join(format!("{}.toml", case.name.replace(' ', "-")));
    std::fs::write(
        &file,
        format!(
            "name = \"stall-{}\"\nparallelism = 2\n[checkpoint]\ninterval = \"1s\"\ndir = \"{}\"\n\
             [source]\ntype = \"generator\"\nrate = {RATE}\n\
             [[transform]]\ntype = \"rename\"\nfields = {{ user = \"customer\" }}\n\
             [sink]\n{}",
            case.name.replace(' ', "-"),
            dir.join(format!("state-{}", case.name.replace(' ', "-")))
                .display(),
            case.sink
        ),
    )
    .unwrap();
    // The job's log goes to a file: a pipe nobody reads would stall the job once full.
    let log = dir.join(format!("{}.log", case.name.replace(' ', "-")));
    let mut child: Child = Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["run", file.to_str().unwrap()])
        .args(["--metrics-addr", &format!("127.0.0.1:{METRICS_PORT}")])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Warm-up: records flow for 10 s.
    wait_for(
        &mut child,
        &log,
        "records from the job",
        Duration::from_secs(60),
        || emitted().is_some_and(|n| n > 0),
    );
    std::thread::sleep(Duration::from_secs(10));
    let (rss_before, _) = rss(pid);
    let at_freeze = emitted().unwrap_or(0);
    let frozen = Frozen::new(case.freeze.iter().flat_map(|s| server_pids(s)).collect());
    // Buffers fill in the first seconds of the stall; after that, back-pressure must hold
    // the source still.
    std::thread::sleep(Duration::from_secs(5).min(stall / 2));
    let settled = emitted().unwrap_or(0);
    std::thread::sleep(stall - Duration::from_secs(5).min(stall / 2));
    let at_thaw = emitted().unwrap_or(0);
    drop(frozen);
    std::thread::sleep(Duration::from_secs(10));
    let after = emitted().unwrap_or(0);
    let (_, peak) = rss(pid);
    signal(&[pid], "INT");
    let t = Instant::now();
    let exit = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break if status.success() {
                "stopped cleanly".to_owned()
            } else {
                let err = std::fs::read_to_string(&log).unwrap_or_default();
                format!(
                    "{status}: {}",
                    err.lines()
                        .last()
                        .unwrap_or_default()
                        .chars()
                        .take(200)
                        .collect::<String>()
                )
            };
        }
        if t.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            break "did not stop within 60 s of SIGINT".to_owned();
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    println!(
        "{:<24} before {:>6.1} MiB  peak {:>6.1} MiB  emitted: {:>7} in the stall's first 5 s, {:>6} in the rest of it, {:>7} in 10 s after  {exit}",
        case.name,
        rss_before,
        peak,
        settled - at_freeze,
        at_thaw - settled,
        after - at_thaw
    );
    Outcome {
        rss_before,
        peak,
        emitted_in_stall: at_thaw - at_freeze,
        emitted_after: after - at_thaw,
        exit,
    }
}

/// The RabbitMQ case's queue, bounded so that the broker's memory stays small.
fn declare_queue(name: &str) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let conn = lapin::Connection::connect(&Service::RabbitMq.url(), Default::default())
            .await
            .unwrap();
        let ch = conn.create_channel().await.unwrap();
        let mut args = lapin::types::FieldTable::default();
        args.insert(
            "x-max-length".into(),
            lapin::types::AMQPValue::LongInt(200_000),
        );
        args.insert(
            "x-overflow".into(),
            lapin::types::AMQPValue::LongString("drop-head".into()),
        );
        ch.queue_declare(
            name.into(),
            lapin::options::QueueDeclareOptions {
                durable: true,
                ..Default::default()
            },
            args,
        )
        .await
        .unwrap();
    });
}

fn main() {
    let stall = Duration::from_secs(
        std::env::var("RIVUS_BENCH_STALL_SECS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(30),
    );
    // Kept when a case fails (its job's log is there); removed after a complete run.
    let dir = std::env::temp_dir().join(unique_name("rivus-stall"));
    std::fs::create_dir_all(&dir).unwrap();
    println!("job files and logs in {}", dir.display());
    let tag = unique_name("stall").replace('-', "_");
    println!(
        "generator ({RATE} records/s × 2 subtasks, checkpoints every 1 s) → each sink; the server frozen (SIGSTOP) for {stall:?}"
    );
    let mut rows: Vec<(&str, Outcome)> = Vec::new();
    for case in cases(&tag) {
        if !selected(case.name) {
            continue;
        }
        if case.name == "rabbitmq" {
            declare_queue(&tag);
        }
        let o = run_case(&case, &dir, stall);
        rows.push((case.name, o));
    }
    let clean = rows.iter().all(|(_, o)| o.exit == "stopped cleanly");
    println!("\n| sink | RSS before | peak RSS | emitted while frozen (of {}) | after the thaw (10 s) | end |", RATE * 2 * stall.as_secs());
    println!("|---|---|---|---|---|---|");
    for (name, o) in rows {
        println!(
            "| {name} | {:.0} MiB | {:.0} MiB | {} | {} | {} |",
            o.rss_before, o.peak, o.emitted_in_stall, o.emitted_after, o.exit
        );
    }
    if clean {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        println!(
            "a job did not stop cleanly: its log is in {}",
            dir.display()
        );
    }
}
