//! Values stored out of line (TOAST) that updates do not touch keep their value in a
//! PostgreSQL replica, an Elasticsearch index and a Delta table fed by `postgres-cdc` through
//! the `rivus` command, while a writer mixes small and 20 000-row transactions and the job is SIGKILLed six
//! times.

#[path = "support/cdc.rs"]
mod cdc;
#[path = "support/delta.rs"]
mod delta;
#[path = "support/index.rs"]
mod index;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rivus_testkit::services::{python_with, require, s3_credentials, Service};
use sqlx::{Connection, PgConnection, Row};

use cdc::{count, differences, exec, job_file, newest_checkpoint, rivus, stop, Cleanup, Job};
use delta::{delta_rows, text};
use index::Index;

/// Rows of the TOAST table (`RIVUS_CDC_TOAST_ROWS`, default 20 000: the writer's large
/// transactions touch every row).
fn toast_rows() -> i64 {
    cdc::env_count("RIVUS_CDC_TOAST_ROWS", 20_000)
}

/// The key of a TOAST table, and how it is stored.
#[derive(Clone, Copy, PartialEq)]
enum Key {
    /// `a`.
    A,
    /// `(a, b)`.
    AB,
    /// `(a, b)`, the table hash-partitioned by `a` into this many partitions and published
    /// through its root (`publish_via_partition_root`): the stream names the root, whichever
    /// partition a change hit, and a key change that moves a row to another partition is a
    /// delete and an insert.
    Partitioned(u32),
}

/// A table `name` of `n` rows keyed by `key` whose `big` text (3 200 characters, stored out of
/// line and uncompressed) is updated only now and then, with `REPLICA IDENTITY DEFAULT`:
/// PostgreSQL sends `big` as unchanged in every other update.
async fn toast_table(pg: &str, name: &str, n: i64, key: Key) {
    let (columns, storage, publication) = match key {
        Key::A => ("a", String::new(), ""),
        Key::AB => ("a, b", String::new(), ""),
        Key::Partitioned(parts) => (
            "a, b",
            format!(
                " PARTITION BY HASH (a); {}",
                (0..parts)
                    .map(|i| format!(
                        "CREATE TABLE {name}_p{i} PARTITION OF {name} \
                         FOR VALUES WITH (MODULUS {parts}, REMAINDER {i});"
                    ))
                    .collect::<String>()
            ),
            " WITH (publish_via_partition_root = true)",
        ),
    };
    exec(
        pg,
        &format!(
            "CREATE TABLE {name} (a INT NOT NULL, b TEXT NOT NULL, big TEXT, tags TEXT[],
               doc JSONB, amount NUMERIC(12,2), n INT, PRIMARY KEY ({columns})){storage};
             ALTER TABLE {name} ALTER COLUMN big SET STORAGE EXTERNAL;
             INSERT INTO {name} SELECT i, 'k' || (i % 7), repeat(md5(i::text), 100),
               ARRAY['t' || i, 'first'], jsonb_build_object('i', i), i / 100.0, 0
             FROM generate_series(1, {n}) i;
             GRANT SELECT ON {name} TO rivus_cdc;
             CREATE PUBLICATION {name} FOR TABLE {name}{publication}"
        ),
    )
    .await;
    let mut c = PgConnection::connect(pg).await.unwrap();
    // The table's own storage, or its partitions'.
    let toasted: i64 = sqlx::query_scalar(
        "SELECT coalesce(sum(pg_relation_size(reltoastrelid)), 0)::int8 FROM pg_class \
         WHERE relname = $1 OR relname LIKE $1 || '\\_p%'",
    )
    .bind(name)
    .fetch_one(&mut c)
    .await
    .unwrap();
    assert!(
        toasted > 0,
        "`big` is stored out of line (TOAST): {toasted} bytes"
    );
}

/// Changes `name` until `rounds` are done or `stop` is set (`done` counts them): most rounds
/// update a row's small columns (its `big` unchanged), every 10th rewrites a `big`, every 25th
/// deletes a key and inserts it again, every 200th updates all rows in one transaction; round
/// 300 inserts as many new rows as the table has in one transaction and round 900 deletes them
/// in another. With `moves`, every 25th round (offset 12) changes a row's key to one of its
/// own (`a = 3000000 + round` or `-round` in turn), its `big` unchanged.
fn toast_writer(
    (pg, name): (String, String),
    (rows, rounds, moves): (i64, u64, bool),
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        use sqlx::Executor;
        let mut c = PgConnection::connect(&pg).await.unwrap();
        for r in 0..rounds {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            let a = (r as i64 * 7919) % rows + 1;
            let sql = match r {
                300 => format!(
                    "INSERT INTO {name} SELECT i, 'k' || (i % 7), repeat(md5(i::text), 100), \
                     ARRAY['bulk'], '{{}}', 1, 0 FROM generate_series(1000001, {}) i",
                    1_000_000 + rows
                ),
                900 => format!("DELETE FROM {name} WHERE a > 1000000"),
                _ if r % 200 == 100 => {
                    format!("UPDATE {name} SET n = n + 1, amount = amount + 0.01")
                }
                // Up past every key and down below every key in turn: the snapshot may hold
                // either half of the change.
                _ if moves && r % 25 == 12 => {
                    let to = if r % 50 == 12 {
                        3_000_000 + r as i64
                    } else {
                        -(r as i64)
                    };
                    format!("UPDATE {name} SET a = {to}, n = n + 1 WHERE a = {a}")
                }
                _ if r % 25 == 0 => format!(
                    "BEGIN; DELETE FROM {name} WHERE a = {a}; \
                     INSERT INTO {name} VALUES ({a}, 'k' || ({a} % 7), repeat(md5('{r}'), 100), \
                       ARRAY['again', '{r}'], '{{\"again\": {r}}}', {r}, -1); COMMIT"
                ),
                _ if r % 10 == 0 => {
                    format!("UPDATE {name} SET big = repeat(md5('new{r}'), 100) WHERE a = {a}")
                }
                _ => format!(
                    "UPDATE {name} SET n = n + 1, tags = ARRAY['r{r}', NULL, 'x,y'], \
                     doc = jsonb_build_object('r', {r}, 'q', 'a\"b'), amount = {r}.25 \
                     WHERE a = {a}"
                ),
            };
            c.execute(sqlx::raw_sql(&sql)).await.unwrap();
            done.store(r + 1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
    })
}

/// Runs `postgres-cdc` over the TOAST table `name` of `snapshot` rows into `sink` (`parallelism`
/// sink subtasks keyed by `a`) while [`Writing`] changes the table, SIGKILLs it six times (twice
/// while the snapshot is read — the writer starts after the second —, three times while the
/// stream runs, each after the writer moved on, and once when the writer is done), and starts
/// it once more; then waits until `equal()` or fails after three minutes, and stops the job.
/// `progress()` counts what the sink holds.
async fn through_six_kills<Fut>(
    (pg, cdc, name): (&str, &str, &str),
    snapshot: i64,
    (sink, kills, parallelism, moves): (&str, Kills, usize, bool),
    progress: impl Fn() -> Fut,
    equal: impl Fn() -> Check,
) where
    Fut: std::future::Future<Output = i64>,
{
    let dir = tempfile::tempdir().unwrap();
    let (dir, file) = (
        dir.path(),
        job_file(
            dir.path(),
            cdc,
            (name, name),
            parallelism,
            "[[transform]]\ntype = \"key\"\nfield = \"a\"",
            sink,
        ),
    );
    let file = file.as_path();
    let mut writing = Writing::start(pg, name, snapshot, moves);
    let (done, halt) = (Arc::clone(&writing.done), Arc::clone(&writing.halt));
    let log =
        |label: &str| std::fs::read_to_string(dir.join(format!("{label}.log"))).unwrap_or_default();
    for kill in 0..6 {
        let label = format!("run{kill}");
        let mut job: Job = rivus(dir, file, &label, &[]);
        let from = done.load(Ordering::SeqCst);
        let checkpointed = newest_checkpoint(dir);
        // The newest checkpoint when this run was first seen streaming.
        let mut streaming: Option<u64> = None;
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if streaming.is_none() && log(&label).contains("postgres-cdc: streaming") {
                streaming = Some(newest_checkpoint(dir));
            }
            if kill == 2 && kills == Kills::AfterTheSnapshot && streaming.is_some() {
                // The writer starts once a run has read the snapshot and streams.
                halt.store(false, Ordering::SeqCst);
            }
            let ready = match kill {
                0 => progress().await >= snapshot / 4,
                1 => progress().await >= snapshot * 3 / 4,
                // While streaming: the writer has moved on since this run started.
                _ => done.load(Ordering::SeqCst) >= from + 60 + 40 * kill as u64,
            } && match kills {
                Kills::Anywhere => true,
                Kills::AfterTheSnapshot if kill < 2 => newest_checkpoint(dir) > checkpointed,
                Kills::AfterTheSnapshot => streaming.is_some_and(|at| newest_checkpoint(dir) > at),
            };
            if ready {
                break;
            }
            if let Some(status) = job.child().try_wait().unwrap() {
                panic!("{label} ended ({status}): {}", log(&label));
            }
            assert!(
                Instant::now() < deadline,
                "{label} made no progress: {}",
                log(&label)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if kill == 5 {
            // The last kill comes when the writer is done, while the job still catches up.
            writing.handle.take().unwrap().await.unwrap();
        }
        job.kill();
        if kill == 1 && kills == Kills::Anywhere {
            // The writer starts once the snapshot is well under way.
            halt.store(false, Ordering::SeqCst);
        }
    }
    let mut job = rivus(dir, file, "last", &[]);
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let differs = equal().await;
        let Some(why) = differs else {
            break;
        };
        if let Some(status) = job.child().try_wait().unwrap() {
            panic!("the last run ended ({status}): {}", log("last"));
        }
        if Instant::now() > deadline {
            let log = log("last");
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            panic!(
                "after six kills: {why}\nthe last run's log ends:\n{}",
                tail.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    stop(job, dir, "last");
    assert_eq!(
        done.load(Ordering::SeqCst),
        Writing::ROUNDS,
        "the writer ran to its end"
    );
}

/// Where the soak's kills may fall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kills {
    /// Anywhere: twice while the snapshot is read (the writer starts right after the second),
    /// then while streaming. For a transactional sink: what a run wrote without a checkpoint
    /// is rolled back.
    Anywhere,
    /// Twice while the snapshot is read with the writer held, each after a checkpoint of that
    /// run; the writer starts when the third run streams, and each later kill comes after a
    /// checkpoint completed while its run streamed. An at-least-once sink keeps what a run
    /// wrote after its last checkpoint, which the next run reads again in a newer snapshot
    /// without the rows deleted meanwhile (a known limit, in the CDC README).
    AfterTheSnapshot,
}

/// Whether a replica equals its source: `None`, or what differs.
type Check = std::pin::Pin<Box<dyn std::future::Future<Output = Option<String>> + Send>>;

/// The TOAST table's writer: held until `halt` is cleared, then 1 200 rounds of
/// [`toast_writer`], `done` counting them.
struct Writing {
    done: Arc<AtomicU64>,
    halt: Arc<AtomicBool>,
    handle: Option<tokio::task::JoinHandle<()>>,
}

impl Writing {
    const ROUNDS: u64 = 1_200;

    fn start(pg: &str, name: &str, rows: i64, moves: bool) -> Writing {
        let (done, halt) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicBool::new(true)));
        let (gate, d) = (Arc::clone(&halt), Arc::clone(&done));
        let (pg, name) = (pg.to_owned(), name.to_owned());
        let handle = tokio::spawn(async move {
            while gate.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            toast_writer((pg, name), (rows, Self::ROUNDS, moves), gate, d)
                .await
                .unwrap();
        });
        Writing {
            done,
            halt,
            handle: Some(handle),
        }
    }
}

const TOAST_COLUMNS: &str = "a, b, big, tags, doc, amount, n";

/// `postgres-cdc` → `jdbc` (upserts applying changes, exactly-once, two sink subtasks keyed by
/// `a`) over a table with a composite key and a large text stored out of line that updates
/// mostly leave alone: through six SIGKILLs the replica ends equal to the table in every
/// column (`EXCEPT` both ways) — never the placeholder of an unchanged value.
///
/// Over 60 s (94 s here): six kills, and the replica compared with the table in every column.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unchanged_toast_values_survive_kill_nine_in_a_postgres_replica() {
    postgres_replica("cdc_toast", toast_rows(), (Key::AB, 2), false).await;
}

/// The same with one sink subtask while the writer also changes keys (`a`, its `big` left
/// unchanged): each key change moves the replica's row, and no row loses its `big`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_changes_keep_unchanged_toast_values_through_kill_nine_in_a_postgres_replica() {
    postgres_replica("cdc_moves", toast_rows() / 2, (Key::AB, 1), true).await;
}

/// The same over a table hash-partitioned into four, published through its root; key changes
/// move rows between partitions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_table_replicates_exactly_through_kill_nine() {
    postgres_replica(
        "cdc_parts",
        toast_rows() / 2,
        (Key::Partitioned(4), 1),
        true,
    )
    .await;
}

/// The replica test over `rows` rows keyed by `key` into `parallelism` sink subtasks, key
/// changes or not.
async fn postgres_replica(prefix: &str, rows: i64, (key, parallelism): (Key, usize), moves: bool) {
    let (Some(pg), Some(cdc)) = (require(Service::Postgres), require(Service::PostgresCdc)) else {
        return;
    };
    let (name, _cleanup) = Cleanup::table(&pg, prefix, true);
    let replica = format!("{name}_copy");
    toast_table(&pg, &name, rows, key).await;
    exec(
        &pg,
        &format!(
            "CREATE TABLE {replica} (a INT NOT NULL, b TEXT NOT NULL, big TEXT, tags TEXT[],
               doc JSONB, amount NUMERIC(12,2), n INT, PRIMARY KEY (a, b))"
        ),
    )
    .await;
    let sink = format!(
        "type = \"jdbc\"\nurl = \"{pg}\"\ntable = \"{replica}\"\nmode = \"upsert\"\n\
         apply_changes = true\nexactly_once = true"
    );
    let progress = || {
        let (pg, replica) = (pg.clone(), replica.clone());
        async move {
            let mut c = PgConnection::connect(&pg).await.unwrap();
            count(&mut c, &replica).await
        }
    };
    let equal = || {
        let (pg, name, replica) = (pg.clone(), name.clone(), replica.clone());
        Box::pin(async move {
            let mut c = PgConnection::connect(&pg).await.unwrap();
            let (missing, extra) = differences(&mut c, &name, &replica, TOAST_COLUMNS).await;
            if (missing, extra) == (0, 0) {
                return None;
            }
            let placeholders: i64 = sqlx::query_scalar(&format!(
                "SELECT count(*) FROM {replica} WHERE big = '__debezium_unavailable_value'"
            ))
            .fetch_one(&mut c)
            .await
            .unwrap_or(-1);
            // The first rows that differ, each side: key, n, tags.
            let sample = |from: &str, minus: &str| {
                format!(
                    "SELECT a, b, n, tags::text FROM (SELECT {TOAST_COLUMNS} FROM {from} \
                     EXCEPT SELECT {TOAST_COLUMNS} FROM {minus}) d ORDER BY a LIMIT 5"
                )
            };
            let mut rows = Vec::new();
            for (side, from, minus) in [("replica", &replica, &name), ("table", &name, &replica)] {
                let got: Vec<(i32, String, Option<i32>, Option<String>)> =
                    sqlx::query_as(&sample(from, minus))
                        .fetch_all(&mut c)
                        .await
                        .unwrap_or_default();
                rows.push(format!("{side} only: {got:?}"));
            }
            Some(format!(
                "{missing} rows missing or different, {extra} extra; {placeholders} replica rows \
                 hold the placeholder; {}",
                rows.join("; ")
            ))
        }) as Check
    };
    through_six_kills(
        (&pg, &cdc, &name),
        rows,
        (&sink, Kills::Anywhere, parallelism, moves),
        progress,
        equal,
    )
    .await;
}

/// The same through the Elasticsearch sink (`apply_changes`, documents by `a`; 5 000 rows, the
/// large transactions as large as the table; each kill after the run completed a checkpoint,
/// see [`Kills`]): a change without `big` updates its document partially, so every document
/// ends equal to its row.
///
/// Over 60 s (123 s here): the kills each wait for a completed checkpoint, over 5 000 rows of
/// 3 200-character values that Elasticsearch reads and reindexes on each partial update.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unchanged_toast_values_survive_kill_nine_in_an_elasticsearch_index() {
    let (Some(pg), Some(cdc), Some(es)) = (
        require(Service::Postgres),
        require(Service::PostgresCdc),
        require(Service::Elasticsearch),
    ) else {
        return;
    };
    // Partial updates cost Elasticsearch a read and a reindex of the 3 200-character document
    // each: a quarter of the rows keeps the run (six restarts, each may read the snapshot
    // again when no checkpoint completed since) within minutes on two cores.
    let rows = toast_rows() / 4;
    let (name, _cleanup) = Cleanup::table(&pg, "cdc_toast_es", false);
    toast_table(&pg, &name, rows, Key::A).await;
    let sink = format!(
        "type = \"elasticsearch\"\nurl = \"{es}\"\nindex = \"{name}\"\nid_field = \"a\"\n\
         apply_changes = true"
    );
    let index = Index::connect(&es).await;
    let progress = || {
        let (index, name) = (index.clone(), name.clone());
        async move { index.count(&name).await }
    };
    let equal = || {
        let (pg, name, index) = (pg.clone(), name.clone(), index.clone());
        Box::pin(async move {
            let want = table_docs(&pg, &name).await;
            let got = index
                .docs(&name, "a", &["big", "tags", "doc", "amount", "n"])
                .await;
            if want == got {
                return None;
            }
            let differ = want.iter().filter(|(k, v)| got.get(*k) != Some(v)).count();
            let shown = |v: Option<&Vec<String>>| {
                v.map(|f| {
                    let big = &f[0];
                    format!(
                        "big {}… ({} chars), {:?}",
                        &big[..big.len().min(12)],
                        big.len(),
                        &f[1..]
                    )
                })
            };
            let samples: Vec<String> = want
                .iter()
                .filter(|(k, v)| got.get(*k) != Some(v))
                .take(3)
                .map(|(k, v)| {
                    format!(
                        "{k}: row {:?}, document {:?}",
                        shown(Some(v)),
                        shown(got.get(k))
                    )
                })
                .collect();
            let placeholders = got
                .values()
                .filter(|d| d[0] == "__debezium_unavailable_value")
                .count();
            Some(format!(
                "{} rows, {} documents, {differ} rows without their document; {placeholders} \
                 documents hold the placeholder; {samples:?}",
                want.len(),
                got.len()
            ))
        }) as Check
    };
    through_six_kills(
        (&pg, &cdc, &name),
        rows,
        (&sink, Kills::AfterTheSnapshot, 2, false),
        progress,
        equal,
    )
    .await;
    index.drop_index(&name).await;
}

/// The TOAST table's rows as documents would show them, by `a`: big, tags (JSON), doc
/// (jsonb's text), amount (text), n.
async fn table_docs(pg: &str, name: &str) -> BTreeMap<String, Vec<String>> {
    let mut c = PgConnection::connect(pg).await.unwrap();
    let rows = sqlx::query(&format!(
        "SELECT a::text, big, to_json(tags)::text, doc::text, amount::text, n::text FROM {name}"
    ))
    .fetch_all(&mut c)
    .await
    .unwrap();
    rows.iter()
        .map(|r| {
            let cols: Vec<String> = (1..6)
                .map(|i| r.get::<Option<String>, _>(i).unwrap_or_default())
                .collect();
            (r.get::<String, _>(0), cols)
        })
        .collect()
}

/// The same into a Delta table on S3 (`apply_changes` by `a`, one sink subtask: a MERGE per
/// checkpoint; 400 rows — each merge rewrites the files holding changed keys, here the whole
/// table, and the dev store holds 3.2 GB; the writer also changes keys): a change without `big`
/// keeps the value of the row it replaces, or of the old key's row when the key changed, so
/// `deltalake` ends reading the table.
///
/// Over 60 s (110 s here): every merge rewrites the whole table, through the kills.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unchanged_toast_values_survive_kill_nine_in_a_delta_table() {
    let (Some(pg), Some(cdc), Some(endpoint), Some(py)) = (
        require(Service::Postgres),
        require(Service::PostgresCdc),
        require(Service::S3),
        python_with("deltalake, pyarrow"),
    ) else {
        return;
    };
    let rows = toast_rows() / 50;
    let (name, _cleanup) = Cleanup::table(&pg, "cdc_toast_delta", false);
    toast_table(&pg, &name, rows, Key::A).await;
    let (bucket, access, secret) = s3_credentials();
    let uri = format!("s3://{bucket}/{name}");
    let sink = format!(
        r#"type = "delta"
url = "{uri}"
s3 = {{ endpoint = "{endpoint}", access_key = "{access}", secret_key = "{secret}" }}
create_table = true
apply_changes = true
key = ["a"]
schema = [
  {{ name = "a", type = "int64", nullable = false }},
  {{ name = "b", type = "string" }},
  {{ name = "big", type = "string" }},
  {{ name = "tags", type = "json" }},
  {{ name = "doc", type = "string" }},
  {{ name = "amount", type = "string" }},
  {{ name = "n", type = "int64" }},
]"#
    );
    let read = move || delta_docs(&py, &uri, &endpoint);
    let progress = || {
        let read = read.clone();
        async move { read().len() as i64 }
    };
    let equal = || {
        let (pg, name, read) = (pg.clone(), name.clone(), read.clone());
        Box::pin(async move {
            let want = table_docs(&pg, &name).await;
            let got = read();
            if want == got {
                return None;
            }
            let differ = want.iter().filter(|(k, v)| got.get(*k) != Some(v)).count();
            let placeholders = got
                .values()
                .filter(|d| d[0] == "__debezium_unavailable_value")
                .count();
            let short = |v: Option<&Vec<String>>| {
                v.map(|f| format!("big {}… {:?}", &f[0][..f[0].len().min(12)], &f[1..]))
            };
            let samples: Vec<String> = want
                .iter()
                .filter(|(k, v)| got.get(*k) != Some(v))
                .take(3)
                .map(|(k, v)| {
                    format!(
                        "{k}: row {:?}, Delta {:?}",
                        short(Some(v)),
                        short(got.get(k))
                    )
                })
                .collect();
            Some(format!(
                "{} rows, {} in the Delta table, {differ} differ; {placeholders} hold the \
                 placeholder; {samples:?}",
                want.len(),
                got.len()
            ))
        }) as Check
    };
    through_six_kills(
        (&pg, &cdc, &name),
        rows,
        (&sink, Kills::Anywhere, 1, true),
        progress,
        equal,
    )
    .await;
}

/// The rows of the Delta table `uri` as [`table_docs`] shows them, by `a` (none while the table
/// does not exist).
fn delta_docs(py: &str, uri: &str, endpoint: &str) -> BTreeMap<String, Vec<String>> {
    delta_rows(py, uri, endpoint)
        .iter()
        .map(|r| {
            let cols = ["big", "tags", "doc", "amount", "n"].map(|k| text(&r[k]));
            (text(&r["a"]), cols.to_vec())
        })
        .collect()
}
