//! The soak run: a paced job per connector pair, all at once, for an hour
//! (`RIVUS_SOAK_SECS`, default 3600), while every server is restarted every ten minutes and a
//! network fault hits every sink's connections every five:
//! - generator → Kafka (exactly-once), and that topic → PostgreSQL (the Kafka source,
//!   exactly-once into SQL);
//! - generator → MariaDB (exactly-once), → Elasticsearch, → Redis (a list), → RabbitMQ (a
//!   durable queue, persistent messages).
//!
//! Each sink reaches its server through the testkit's fault proxy (Kafka through the listener
//! that advertises the proxy's address); the faults alternate between resetting every
//! connection and a 20 s blackhole, from minute 2.5 on. The servers restart one a minute apart
//! (`dev/services down NAME`, then `up NAME`), from minute 10 on. Every 10 s each job's
//! resident set and open file descriptors are sampled.
//!
//! A case passes when its job ended with success (the generator is bounded: rate × duration
//! records; the Kafka → PostgreSQL job is stopped with SIGINT once the table is complete), every
//! record arrived (ids 0..N, none twice where the sink is exactly-once or idempotent;
//! duplicates counted where it is at-least-once), and RSS and descriptors are flat: the last
//! quarter's median within 10 % of the second quarter's.
//!
//! `cargo bench --profile dev -p rivus-cli --bench soak` after `dev/services up`
//! (`RIVUS_SOAK_RATE`: records/s of each job, default 200; `RIVUS_BENCH_FILTER` picks cases —
//! the PostgreSQL case reads the Kafka case's topic). Not part of `dev/test`: it restarts the
//! shared servers.

#[path = "../tests/support/committed.rs"]
mod committed;
#[path = "../tests/support/rabbit.rs"]
mod rabbit;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rivus_testkit::bench::selected;
use rivus_testkit::fault_proxy::FaultProxy;
use rivus_testkit::services::{kafka_proxy_addr, unique_name, Service};

const SAMPLE_EVERY: Duration = Duration::from_secs(10);
const FAULT_EVERY: Duration = Duration::from_secs(300);
const FIRST_FAULT: Duration = Duration::from_secs(150);
const RESTART_EVERY: Duration = Duration::from_secs(600);
const BLACKHOLE: Duration = Duration::from_secs(20);
/// The servers restarted, in this order, one a minute apart.
const SERVERS: [&str; 6] = [
    "kafka",
    "postgres",
    "mariadb",
    "elasticsearch",
    "redis",
    "rabbitmq",
];

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Where a case's output is counted.
enum Output {
    Kafka(String),
    Sql { url: String, table: String },
    Elasticsearch(String),
    RedisList(String),
    RabbitQueue(String),
}

/// One job of the run.
struct Case {
    name: &'static str,
    /// Whether the destination keeps each id once (exactly-once or idempotent writes).
    once: bool,
    /// The pipeline's `[source]` and `[sink]` tables.
    body: String,
    output: Output,
    /// Unbounded: stopped with SIGINT once its output is complete.
    unbounded: bool,
}

/// A running case: its process, log and samples.
struct Running {
    case: Case,
    child: Child,
    log: PathBuf,
    /// (seconds since the start, RSS MiB, open descriptors).
    samples: Vec<(u64, f64, usize)>,
    exit: Option<String>,
}

/// The sink-side proxies and the URLs that go through them.
struct Proxies {
    kafka: FaultProxy,
    others: Vec<FaultProxy>,
    urls: BTreeMap<&'static str, String>,
}

impl Proxies {
    fn each(&self) -> impl Iterator<Item = &FaultProxy> {
        std::iter::once(&self.kafka).chain(&self.others)
    }
}

async fn proxies() -> Proxies {
    let kafka = FaultProxy::start_on(kafka_proxy_addr(), &Service::KafkaProxied.url())
        .await
        .expect("a proxy on the Kafka listener's advertised address");
    let mut urls = BTreeMap::from([("kafka", kafka.addr().to_string())]);
    let mut others = Vec::new();
    for (name, service) in [
        ("postgres", Service::Postgres),
        ("mariadb", Service::MySql),
        ("elasticsearch", Service::Elasticsearch),
        ("redis", Service::Redis),
        ("rabbitmq", Service::RabbitMq),
    ] {
        let (p, url) = FaultProxy::in_front_of(&service.url()).await.unwrap();
        urls.insert(name, url);
        others.push(p);
    }
    Proxies {
        kafka,
        others,
        urls,
    }
}

fn cases(tag: &str, urls: &BTreeMap<&str, String>, count: u64, rate: u64) -> Vec<Case> {
    let gen = format!("[source]\ntype = \"generator\"\ncount = {count}\nrate = {rate}\n");
    let table = |url: &str| Output::Sql {
        url: url.to_owned(),
        table: tag.to_owned(),
    };
    let create = format!(
        "table = \"{tag}\"\nsetup = \"CREATE TABLE IF NOT EXISTS {tag} (id BIGINT, customer VARCHAR(32), amount DOUBLE PRECISION, status VARCHAR(16), ts BIGINT)\"\n"
    );
    let rename = "[[transform]]\ntype = \"rename\"\nfields = { user = \"customer\" }\n";
    let topic = format!("{tag}-kafka");
    vec![
        Case {
            name: "generator → kafka exactly-once",
            once: true,
            body: format!(
                "{gen}[sink]\ntype = \"kafka\"\nbootstrap_servers = \"{}\"\ntopic = \"{topic}\"\nexactly_once = true\n",
                urls["kafka"]
            ),
            output: Output::Kafka(topic.clone()),
            unbounded: false,
        },
        Case {
            name: "kafka → postgres exactly-once",
            once: true,
            body: format!(
                "[source]\ntype = \"kafka\"\nbootstrap_servers = \"{}\"\ntopics = [\"{topic}\"]\n{rename}\
                 [sink]\ntype = \"jdbc\"\nurl = \"{}\"\nexactly_once = true\n{create}",
                Service::Kafka.url(),
                urls["postgres"]
            ),
            output: table(&Service::Postgres.url()),
            unbounded: true,
        },
        Case {
            name: "generator → mariadb exactly-once",
            once: true,
            body: format!(
                "{gen}{rename}[sink]\ntype = \"jdbc\"\nurl = \"{}\"\nexactly_once = true\n{create}",
                urls["mariadb"]
            ),
            output: table(&Service::MySql.url()),
            unbounded: false,
        },
        Case {
            name: "generator → elasticsearch",
            once: true,
            body: format!(
                "{gen}[sink]\ntype = \"elasticsearch\"\nurl = \"{}\"\nindex = \"{tag}\"\nid_field = \"id\"\n",
                urls["elasticsearch"]
            ),
            output: Output::Elasticsearch(tag.to_owned()),
            unbounded: false,
        },
        Case {
            name: "generator → redis",
            once: false,
            body: format!(
                "{gen}[sink]\ntype = \"redis\"\nurl = \"{}\"\ncommand = \"rpush\"\nkey = \"{tag}\"\n",
                urls["redis"]
            ),
            output: Output::RedisList(tag.to_owned()),
            unbounded: false,
        },
        Case {
            name: "generator → rabbitmq",
            once: false,
            body: format!(
                "{gen}[sink]\ntype = \"rabbitmq\"\nuri = \"{}\"\nrouting_key = \"{tag}\"\n",
                urls["rabbitmq"]
            ),
            output: Output::RabbitQueue(tag.to_owned()),
            unbounded: false,
        },
    ]
}

/// Starts a case's job, its log in a file (a pipe nobody reads would stall it).
fn start(case: Case, dir: &Path, port: u16) -> Running {
    let slug: String = case
        .name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let file = dir.join(format!("{slug}.toml"));
    std::fs::write(
        &file,
        format!(
            "name = \"soak-{port}\"\n[checkpoint]\ninterval = \"1s\"\ndir = \"{}\"\n\
             [restart]\nstrategy = \"exponential-delay\"\nreset_after = \"5m\"\nstall_timeout = \"2m\"\n{}",
            dir.join(format!("state-{slug}")).display(),
            case.body
        ),
    )
    .unwrap();
    let log = dir.join(format!("{slug}.log"));
    let child = Command::new(env!("CARGO_BIN_EXE_rivus"))
        .args(["run", file.to_str().unwrap()])
        .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    Running {
        case,
        child,
        log,
        samples: Vec::new(),
        exit: None,
    }
}

/// (RSS MiB, open descriptors) of a live process.
fn sample(pid: u32) -> Option<(f64, usize)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count();
    Some((kb / 1024.0, fds))
}

fn services(cmd: &str, name: &str) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../dev/services");
    let ok = Command::new(script)
        .args([cmd, name])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "dev/services {cmd} {name} failed");
}

/// How a job ended.
fn describe_exit(status: std::process::ExitStatus, log: &Path) -> String {
    if status.success() {
        return "ended cleanly".into();
    }
    let err = std::fs::read_to_string(log).unwrap_or_default();
    let last: String = err
        .lines()
        .last()
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect();
    format!("{status}: {last}")
}

/// The ids in a case's destination: (records, distinct ids, ids below `n` missing).
async fn count(output: &Output, n: u64) -> (u64, u64, u64) {
    let ids: BTreeMap<u64, u32> = match output {
        Output::Kafka(topic) => committed::committed_ids(topic),
        Output::Sql { url, table } => sql_ids(url, table).await,
        Output::Elasticsearch(index) => es_ids(index).await,
        Output::RedisList(key) => redis_ids(key).await,
        Output::RabbitQueue(queue) => rabbit_ids(queue).await,
    };
    let total = ids.values().map(|c| u64::from(*c)).sum();
    let missing = (0..n).filter(|i| !ids.contains_key(i)).count() as u64;
    (total, ids.len() as u64, missing)
}

fn id_of(payload: &[u8]) -> Option<u64> {
    serde_json::from_slice::<serde_json::Value>(payload).ok()?["id"].as_u64()
}

async fn sql_ids(url: &str, table: &str) -> BTreeMap<u64, u32> {
    use sqlx::Connection;
    let q = format!("SELECT id, COUNT(*) FROM {table} GROUP BY id");
    let rows: Vec<(i64, i64)> = if url.starts_with("postgres") {
        let mut db = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::query_as(&q).fetch_all(&mut db).await.unwrap()
    } else {
        let mut db = sqlx::MySqlConnection::connect(url).await.unwrap();
        sqlx::query_as(&q).fetch_all(&mut db).await.unwrap()
    };
    rows.into_iter()
        .map(|(id, c)| (id as u64, c as u32))
        .collect()
}

/// Elasticsearch keeps each id once (the id is the document's `_id`): read them back.
async fn es_ids(index: &str) -> BTreeMap<u64, u32> {
    use reqwest::Method;
    let config = rivus_connector_es::EsConfig::new(Service::Elasticsearch.url());
    let es = rivus_connector_es::EsClient::connect(&config)
        .await
        .unwrap();
    es.json_ok(
        "refresh",
        Method::POST,
        &format!("/{index}/_refresh"),
        &[],
        None,
    )
    .await
    .unwrap();
    let mut ids = BTreeMap::new();
    let mut body = serde_json::json!({"size": 10000, "_source": false, "sort": [{"id": "asc"}]});
    loop {
        let r = es
            .json_ok(
                "search",
                Method::POST,
                &format!("/{index}/_search"),
                &[],
                Some(&body),
            )
            .await
            .unwrap();
        let hits = r["hits"]["hits"].as_array().cloned().unwrap_or_default();
        let Some(last) = hits.last() else { break };
        body["search_after"] = last["sort"].clone();
        for h in &hits {
            if let Some(id) = h["_id"].as_str().and_then(|s| s.parse().ok()) {
                *ids.entry(id).or_default() += 1;
            }
        }
    }
    ids
}

async fn redis_ids(key: &str) -> BTreeMap<u64, u32> {
    let client = redis::Client::open(Service::Redis.url()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let mut ids = BTreeMap::new();
    let mut at = 0isize;
    loop {
        let chunk: Vec<Vec<u8>> = redis::cmd("LRANGE")
            .arg(key)
            .arg(at)
            .arg(at + 9999)
            .query_async(&mut c)
            .await
            .unwrap();
        if chunk.is_empty() {
            break;
        }
        at += chunk.len() as isize;
        for v in chunk {
            if let Some(id) = id_of(&v) {
                *ids.entry(id).or_default() += 1;
            }
        }
    }
    ids
}

async fn rabbit_ids(queue: &str) -> BTreeMap<u64, u32> {
    use lapin::options::BasicGetOptions;
    let conn = lapin::Connection::connect(&Service::RabbitMq.url(), Default::default())
        .await
        .unwrap();
    let ch = conn.create_channel().await.unwrap();
    let mut ids = BTreeMap::new();
    while let Some(m) = ch
        .basic_get(queue.into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap()
    {
        if let Some(id) = id_of(&m.delivery.data) {
            *ids.entry(id).or_default() += 1;
        }
    }
    ids
}

async fn declare_queue(name: &str) {
    rabbit::durable_queues(&Service::RabbitMq.url(), &[name]).await;
}

/// The median of the samples in `[from, to)` of the run's length.
fn median(samples: &[f64]) -> f64 {
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// (second quarter's median, last quarter's median, flat) of one sampled value.
fn flatness(samples: &[(u64, f64)], secs: u64) -> (f64, f64, bool) {
    let quarter = |q: u64| {
        let v: Vec<f64> = samples
            .iter()
            .filter(|(t, _)| *t >= secs * q / 4 && *t < secs * (q + 1) / 4)
            .map(|(_, v)| *v)
            .collect();
        median(&v)
    };
    let (q2, q4) = (quarter(1), quarter(3));
    (q2, q4, (q4 - q2).abs() <= q2 * 0.1)
}

fn main() {
    let secs = env_u64("RIVUS_SOAK_SECS", 3600);
    let rate = env_u64("RIVUS_SOAK_RATE", 200);
    let n = secs * rate;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let proxies = rt.block_on(proxies());
    let tag = unique_name("soak").replace('-', "_");
    let dir = std::env::temp_dir().join(&tag);
    std::fs::create_dir_all(&dir).unwrap();
    println!(
        "soak: {secs} s, {rate} records/s per job ({n} each); servers restarted every {RESTART_EVERY:?} one a minute apart, network faults every {FAULT_EVERY:?}; logs in {}",
        dir.display()
    );
    let selected_cases: Vec<Case> = cases(&tag, &proxies.urls, n, rate)
        .into_iter()
        .filter(|c| selected(c.name))
        .collect();
    if selected_cases.iter().any(|c| c.unbounded)
        && !selected_cases
            .iter()
            .any(|c| matches!(c.output, Output::Kafka(_)))
    {
        panic!("the PostgreSQL case reads the Kafka case's topic: select both");
    }
    if selected_cases
        .iter()
        .any(|c| matches!(c.output, Output::RabbitQueue(_)))
    {
        rt.block_on(declare_queue(&tag));
    }
    let mut jobs: Vec<Running> = selected_cases
        .into_iter()
        .enumerate()
        .map(|(i, c)| start(c, &dir, 9870 + i as u16))
        .collect();

    let t0 = Instant::now();
    let mut next_sample = Duration::ZERO;
    let mut next_fault = FIRST_FAULT;
    let mut faults = 0u32;
    let mut restarts: Vec<Duration> = (1..)
        .map(|k| RESTART_EVERY * k)
        .take_while(|t| *t < Duration::from_secs(secs))
        .flat_map(|t| (0..SERVERS.len()).map(move |i| t + Duration::from_secs(60 * i as u64)))
        .collect();
    restarts.reverse();
    let mut restarted = 0usize;
    let mut blackhole_until: Option<Instant> = None;
    loop {
        let now = t0.elapsed();
        if now >= next_sample {
            for j in &mut jobs {
                if j.exit.is_none() {
                    if let Some((rss, fds)) = sample(j.child.id()) {
                        j.samples.push((now.as_secs(), rss, fds));
                    }
                }
            }
            next_sample += SAMPLE_EVERY;
        }
        if now >= next_fault && now < Duration::from_secs(secs) {
            faults += 1;
            if faults % 2 == 1 {
                proxies.each().for_each(FaultProxy::reset_all);
                println!("{:>5} s: every sink connection reset", now.as_secs());
            } else {
                proxies.each().for_each(|p| p.set_blackhole(true));
                blackhole_until = Some(Instant::now() + BLACKHOLE);
                println!(
                    "{:>5} s: every sink connection blackholed for {BLACKHOLE:?}",
                    now.as_secs()
                );
            }
            next_fault += FAULT_EVERY;
        }
        if blackhole_until.is_some_and(|u| Instant::now() >= u) {
            proxies.each().for_each(FaultProxy::clear);
            blackhole_until = None;
        }
        if restarts.last().is_some_and(|t| now >= *t) {
            restarts.pop();
            let name = SERVERS[restarted % SERVERS.len()];
            restarted += 1;
            let t = Instant::now();
            services("down", name);
            services("up", name);
            println!(
                "{:>5} s: {name} restarted ({:.1} s)",
                now.as_secs(),
                t.elapsed().as_secs_f64()
            );
        }
        for j in &mut jobs {
            if j.exit.is_none() {
                if let Some(status) = j.child.try_wait().unwrap() {
                    j.exit = Some(describe_exit(status, &j.log));
                    println!(
                        "{:>5} s: {}: {}",
                        now.as_secs(),
                        j.case.name,
                        j.exit.as_deref().unwrap()
                    );
                }
            }
        }
        let bounded_done = jobs.iter().all(|j| j.case.unbounded || j.exit.is_some());
        if bounded_done {
            break;
        }
        if now > Duration::from_secs(secs) * 2 + Duration::from_secs(600) {
            println!("the bounded jobs did not end within twice the run's length: stopping them");
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    proxies.each().for_each(FaultProxy::clear);
    // The unbounded job: stopped once its output is complete (or after 10 minutes).
    for j in jobs.iter_mut().filter(|j| j.exit.is_none()) {
        let deadline = Instant::now() + Duration::from_secs(600);
        while Instant::now() < deadline && rt.block_on(count(&j.case.output, n)).2 > 0 {
            std::thread::sleep(Duration::from_secs(5));
        }
        let _ = Command::new("kill")
            .args(["-INT", &j.child.id().to_string()])
            .status();
        let status = j.child.wait().unwrap();
        j.exit = Some(describe_exit(status, &j.log));
    }

    println!("\n| job | records | delivered (distinct) | missing | duplicates | restarts | RSS Q2 → Q4 (MiB) | fds Q2 → Q4 | end |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut failed = Vec::new();
    for j in &jobs {
        let (total, distinct, missing) = rt.block_on(count(&j.case.output, n));
        let log = std::fs::read_to_string(&j.log).unwrap_or_default();
        let job_restarts = log
            .matches("restarting from the newest completed checkpoint")
            .count();
        let rss: Vec<(u64, f64)> = j.samples.iter().map(|(t, r, _)| (*t, *r)).collect();
        let fds: Vec<(u64, f64)> = j.samples.iter().map(|(t, _, f)| (*t, *f as f64)).collect();
        let (r2, r4, rss_flat) = flatness(&rss, secs);
        let (f2, f4, fds_flat) = flatness(&fds, secs);
        let dups = total - distinct;
        let exit = j.exit.clone().unwrap_or_default();
        println!(
            "| {} | {n} | {distinct} | {missing} | {dups} | {job_restarts} | {r2:.0} → {r4:.0}{} | {f2:.0} → {f4:.0}{} | {exit} |",
            j.case.name,
            if rss_flat { "" } else { " (grew)" },
            if fds_flat { "" } else { " (grew)" },
        );
        if missing > 0
            || (j.case.once && dups > 0)
            || !rss_flat
            || !fds_flat
            || exit != "ended cleanly"
        {
            failed.push(j.case.name);
        }
    }
    if failed.is_empty() {
        println!("\nevery job passed");
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        println!("\nfailed: {failed:?}; logs in {}", dir.display());
        std::process::exit(1);
    }
}
