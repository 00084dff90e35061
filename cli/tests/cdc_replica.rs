//! Replicas fed by change data capture through the `rivus` command, against the real
//! PostgreSQL, MariaDB and Elasticsearch: every column type PostgreSQL sends is written to a
//! PostgreSQL and a MariaDB replica equal to the source; values stored out of line (TOAST) that
//! updates do not touch keep their value in the replica and the index while a writer mixes
//! small and 20 000-row transactions and the job is SIGKILLed six times; a statement the
//! replica refuses every time ends the job instead of restarting it forever.

#[path = "support/cdc.rs"]
mod cdc;
#[path = "support/index.rs"]
mod index;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rivus_testkit::services::{require, unique_name, Service};
use sqlx::{Connection, MySqlConnection, PgConnection, Row};

use cdc::{count, rivus, stop, Cleanup, Job};
use index::Index;

/// A job file: `postgres-cdc` over publication `publication` through slot `slot` (flat rows),
/// then `transforms` and `sink` (TOML lines), a checkpoint every 300 ms.
fn job_file(
    dir: &Path,
    cdc: &str,
    (publication, slot): (&str, &str),
    parallelism: usize,
    transforms: &str,
    sink: &str,
) -> PathBuf {
    let file = dir.join(format!("{slot}.toml"));
    std::fs::write(
        &file,
        format!(
            "name = \"{slot}\"\nparallelism = {parallelism}\n\
             [checkpoint]\ninterval = \"300ms\"\ndir = \"state-{slot}\"\n\
             [source]\ntype = \"postgres-cdc\"\nurl = \"{cdc}\"\npublication = \"{publication}\"\n\
             slot = \"{slot}\"\nenvelope = \"flat\"\n{transforms}\n[sink]\n{sink}\n"
        ),
    )
    .unwrap();
    file
}

async fn exec(url: &str, sql: &str) {
    use sqlx::Executor;
    let mut c = PgConnection::connect(url).await.unwrap();
    c.execute(sqlx::raw_sql(sql)).await.unwrap();
}

async fn exec_my(url: &str, sql: &str) {
    use sqlx::Executor;
    let mut c = MySqlConnection::connect(url).await.unwrap();
    c.execute(sqlx::raw_sql(sql)).await.unwrap();
}

/// Rows of `table` with every column of `columns` as text (NULL as `None`), sorted.
async fn pg_rows(
    url: &str,
    table: &str,
    columns: &[(&str, &str, &str)],
) -> Vec<Vec<Option<String>>> {
    let exprs: Vec<String> = columns
        .iter()
        .map(|(_, pg, _)| format!("({pg})::text"))
        .collect();
    let mut c = PgConnection::connect(url).await.unwrap();
    let rows = sqlx::query(&format!(
        "SELECT {} FROM {table} ORDER BY id",
        exprs.join(", ")
    ))
    .fetch_all(&mut c)
    .await
    .unwrap();
    rows.iter()
        .map(|r| {
            (0..columns.len())
                .map(|i| r.get::<Option<String>, _>(i))
                .collect()
        })
        .collect()
}

async fn my_rows(
    url: &str,
    table: &str,
    columns: &[(&str, &str, &str)],
) -> Vec<Vec<Option<String>>> {
    let exprs: Vec<String> = columns
        .iter()
        .map(|(_, _, my)| format!("CAST({my} AS CHAR)"))
        .collect();
    let mut c = MySqlConnection::connect(url).await.unwrap();
    let Ok(rows) = sqlx::query(&format!(
        "SELECT {} FROM {table} ORDER BY id",
        exprs.join(", ")
    ))
    .fetch_all(&mut c)
    .await
    else {
        return Vec::new();
    };
    rows.iter()
        .map(|r| {
            (0..columns.len())
                .map(|i| r.get::<Option<String>, _>(i))
                .collect()
        })
        .collect()
}

/// Rows of `a` not in `b` and of `b` not in `a`, every column compared (`EXCEPT` both ways).
async fn differences(db: &mut PgConnection, a: &str, b: &str, columns: &str) -> (i64, i64) {
    let differ = |x: &str, y: &str| {
        format!(
            "SELECT count(*) FROM (SELECT {columns} FROM {x} EXCEPT SELECT {columns} FROM {y}) d"
        )
    };
    let missing: i64 = sqlx::query_scalar(&differ(a, b))
        .fetch_one(&mut *db)
        .await
        .unwrap_or(-1);
    let extra: i64 = sqlx::query_scalar(&differ(b, a))
        .fetch_one(&mut *db)
        .await
        .unwrap_or(-1);
    (missing, extra)
}

/// Each column: name, how PostgreSQL shows it as text, how MariaDB shows the replica's.
const TYPED: &[(&str, &str, &str)] = &[
    ("id", "id", "id"),
    ("small", "small", "small"),
    ("big", "big", "big"),
    ("price", "price", "price"),
    ("ratio", "ratio", "ratio"),
    ("wide", "wide", "wide"),
    ("ok", "ok::int", "ok"),
    ("label", "label", "label"),
    ("code", "code", "code"),
    ("body", "body", "body"),
    ("day", "day", "day"),
    (
        "clock",
        "to_char(DATE '2000-01-01' + clock, 'HH24:MI:SS.US')",
        "clock",
    ),
    ("zclock", "zclock", "zclock"),
    (
        "local",
        "to_char(local, 'YYYY-MM-DD HH24:MI:SS.US')",
        "local",
    ),
    (
        "at",
        "to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')",
        "at",
    ),
    ("span", "span", "span"),
    ("doc", "doc", "doc"),
    ("ref", "ref", "ref"),
    ("raw", "encode(raw, 'hex')", "LOWER(HEX(raw))"),
    ("tags", "to_json(tags)", "tags"),
    ("nums", "to_json(nums)", "nums"),
    ("amounts", "to_json(amounts::text[])", "amounts"),
    (
        "days",
        "CASE WHEN days IS NOT NULL THEN to_json(ARRAY(SELECT d - DATE '1970-01-01' \
         FROM unnest(days) WITH ORDINALITY u(d, o) ORDER BY o)) END",
        "days",
    ),
    ("grid", "grid", "grid"),
    ("within", "within", "within"),
    ("feel", "feel", "feel"),
    ("cash", "cash", "cash"),
    ("pos", "pos", "pos"),
    ("twice", "twice", "twice"),
];

/// Every column type PostgreSQL sends goes through `postgres-cdc` → `jdbc` into a PostgreSQL
/// replica (the same types: `EXCEPT` both ways, every column) and a MariaDB replica (its
/// nearest types: compared as text column by column) — snapshot rows and streamed inserts,
/// updates (NULLs included, a key changed) and deletes; the generated column is left to each
/// database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_column_type_round_trips_into_postgres_and_mariadb() {
    let (Some(pg), Some(cdc), Some(my)) = (
        require(Service::Postgres),
        require(Service::PostgresCdc),
        require(Service::MySql),
    ) else {
        return;
    };
    let name = unique_name("cdc_types").replace('-', "_");
    let (copy, my_copy) = (format!("{name}_pg"), format!("{name}_my"));
    let (slot_pg, slot_my) = (format!("{name}_to_pg"), format!("{name}_to_my"));
    let _cleanup = (
        Cleanup {
            pg: pg.clone(),
            name: slot_pg.clone(),
            tables: vec![copy.clone()],
        },
        Cleanup {
            pg: pg.clone(),
            name: slot_my.clone(),
            tables: vec![],
        },
        Cleanup {
            pg: pg.clone(),
            name: name.clone(),
            tables: vec![name.clone()],
        },
    );
    let columns = |table: &str| {
        format!(
            "CREATE TABLE {table} (
               id INT PRIMARY KEY, small SMALLINT, big BIGINT, price NUMERIC(12,3), ratio REAL,
               wide DOUBLE PRECISION, ok BOOLEAN, label VARCHAR(20), code CHAR(3), body TEXT,
               day DATE, clock TIME, zclock TIMETZ, local TIMESTAMP, at TIMESTAMPTZ,
               span INTERVAL, doc JSONB, ref UUID, raw BYTEA, tags TEXT[], nums INT[],
               amounts NUMERIC[], days DATE[], grid INT[][], within INT4RANGE,
               feel {name}_mood, cash MONEY, pos {name}_pos,
               twice INT GENERATED ALWAYS AS (id * 2) STORED)"
        )
    };
    exec(
        &pg,
        &format!(
            "CREATE TYPE {name}_mood AS ENUM ('happy', 'sad', 'it''s \"fine\"');
             CREATE DOMAIN {name}_pos AS INT CHECK (VALUE > 0);
             {};
             {};
             GRANT SELECT ON {name} TO rivus_cdc;
             CREATE PUBLICATION {name} FOR TABLE {name};
             INSERT INTO {name} (id, small, big, price, ratio, wide, ok, label, code, body, day,
               clock, zclock, local, at, span, doc, ref, raw, tags, nums, amounts, days, grid,
               within, feel, cash, pos) VALUES
             (1, 7, 9007199254740993, 12.5, 0.25, 0.125, true, 'label', 'abc',
              'ünïcödé \"quoted\" back\\slash', '2024-01-01', '10:00:00.5', '10:00:00+02',
              '1970-01-01 00:00:01.25', '2024-03-01 12:00:00.5+02', '1 day 02:00:00',
              '{{\"a\": [1, 2], \"b\": \"x\"}}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '\\x00ff10',
              ARRAY['x', 'y z', 'q\"uote', 'back\\slash', NULL], '{{1,NULL,3}}', '{{1.50,2.25}}',
              ARRAY[DATE '2024-01-01', NULL], '{{{{1,2}},{{3,4}}}}', '[1,5)', 'it''s \"fine\"',
              1234.56, 3),
             (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
              NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
             (3, -32768, -1, -0.001, -1.5, -0.5, false, '', 'xyz', '', '1969-12-31',
              '00:00:00', '23:59:59.999999-05:30', '1969-12-31 23:59:59.999999',
              '1970-01-01 00:00:00+00', '-3 mons +4 days -00:00:01', '[]', 
              '00000000-0000-0000-0000-000000000000', '', '{{}}', '{{}}', '{{}}', '{{}}',
              NULL, 'empty', 'sad', -0.01, 1)",
            columns(&name),
            columns(&copy),
        ),
    )
    .await;
    exec_my(
        &my,
        &format!(
            "CREATE TABLE {my_copy} (
               id INT PRIMARY KEY, small SMALLINT, big BIGINT, price DECIMAL(12,3), ratio FLOAT,
               wide DOUBLE, ok BOOLEAN, label VARCHAR(20), code CHAR(3), body TEXT, day DATE,
               clock TIME(6), zclock VARCHAR(40), local DATETIME(6), at DATETIME(6),
               span VARCHAR(60), doc JSON, ref UUID, raw BLOB, tags JSON, nums JSON,
               amounts JSON, days JSON, grid TEXT, within VARCHAR(40),
               feel ENUM('happy', 'sad', 'it''s \"fine\"'), cash VARCHAR(40), pos INT,
               twice INT AS (id * 2) STORED)"
        ),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let to_pg = job_file(
        dir.path(),
        &cdc,
        (&name, &slot_pg),
        1,
        "",
        &format!(
            "type = \"jdbc\"\nurl = \"{pg}\"\ntable = \"{copy}\"\nmode = \"upsert\"\n\
             apply_changes = true\nexactly_once = true"
        ),
    );
    let to_my = job_file(
        dir.path(),
        &cdc,
        (&name, &slot_my),
        1,
        "",
        &format!(
            "type = \"jdbc\"\nurl = \"{my}\"\ntable = \"{my_copy}\"\nmode = \"upsert\"\n\
             apply_changes = true\nexactly_once = true"
        ),
    );
    let mut jobs = [
        (rivus(dir.path(), &to_pg, "to_pg", &[]), "to_pg"),
        (rivus(dir.path(), &to_my, "to_my", &[]), "to_my"),
    ];
    let log = |label: &str| {
        std::fs::read_to_string(dir.path().join(format!("{label}.log"))).unwrap_or_default()
    };
    let mut db = PgConnection::connect(&pg).await.unwrap();

    let caught_up = |stage: &'static str| {
        let (pg, my, name, copy, my_copy) = (
            pg.clone(),
            my.clone(),
            name.clone(),
            copy.clone(),
            my_copy.clone(),
        );
        async move {
            let deadline = Instant::now() + Duration::from_secs(90);
            loop {
                let want = pg_rows(&pg, &name, TYPED).await;
                let got_pg = pg_rows(&pg, &copy, TYPED).await;
                let got_my = my_rows(&my, &my_copy, TYPED).await;
                if want == got_pg && want == got_my {
                    return;
                }
                if Instant::now() > deadline {
                    let diff = |got: &[Vec<Option<String>>]| -> Vec<String> {
                        want.iter()
                            .zip(got)
                            .flat_map(|(w, g)| {
                                w.iter().zip(g).zip(TYPED).filter(|((a, b), _)| a != b).map(
                                    |((a, b), (c, _, _))| {
                                        format!("{c}: source {a:?}, replica {b:?}")
                                    },
                                )
                            })
                            .collect()
                    };
                    panic!(
                        "{stage}: {} source rows, {} in PostgreSQL, {} in MariaDB; \
                         PostgreSQL differs in {:?}; MariaDB differs in {:?}",
                        want.len(),
                        got_pg.len(),
                        got_my.len(),
                        diff(&got_pg),
                        diff(&got_my)
                    );
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    caught_up("the snapshot").await;
    for (job, label) in &mut jobs {
        assert!(
            job.child().try_wait().unwrap().is_none(),
            "{label} ended: {}",
            log(label)
        );
    }
    // Streamed: each statement its own transaction.
    for sql in [
        format!(
            "INSERT INTO {name} (id, tags, nums, doc, at, day, clock, local, raw, feel, cash, pos, \
             within, span, zclock, amounts, days, grid) VALUES (4, ARRAY['new', ''], '{{-1}}', \
             '{{\"n\": null}}', '2030-06-30 23:59:59.123456+00', '2030-06-30', '23:59:59', \
             '2030-06-30 00:00:00', '\\xdeadbeef', 'happy', 0, 9, '(,10]', '00:00:00.000001', \
             '00:00:00Z', '{{0.001}}', ARRAY[DATE '1970-01-01'], '{{{{5}}}}')"
        ),
        format!("UPDATE {name} SET tags = ARRAY['changed'], doc = '[1, \"two\"]', ok = NULL WHERE id = 1"),
        format!("UPDATE {name} SET body = NULL, nums = NULL, price = 99999.999 WHERE id = 3"),
        format!("DELETE FROM {name} WHERE id = 2"),
        format!("INSERT INTO {name} (id, body) VALUES (5, repeat('long ', 2000))"),
        // A new key: the replicas lose the row under the old one.
        format!("UPDATE {name} SET id = 6, small = 6 WHERE id = 5"),
    ] {
        exec(&pg, &sql).await;
    }
    caught_up("the stream").await;
    let all: Vec<&str> = TYPED.iter().map(|(c, _, _)| *c).collect();
    assert_eq!(
        differences(&mut db, &name, &copy, &all.join(", ")).await,
        (0, 0),
        "EXCEPT both ways, every column"
    );
    for (job, label) in jobs {
        stop(job, dir.path(), label);
    }
    exec_my(&my, &format!("DROP TABLE {my_copy}")).await;
    drop(_cleanup);
    exec(
        &pg,
        &format!("DROP TYPE IF EXISTS {name}_mood; DROP DOMAIN IF EXISTS {name}_pos"),
    )
    .await;
}

/// Rows of the TOAST table (`RIVUS_CDC_TOAST_ROWS`, default 20 000: the writer's large
/// transactions touch every row).
fn toast_rows() -> i64 {
    std::env::var("RIVUS_CDC_TOAST_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

/// A table `name` of `n` rows whose `big` text (3 200 characters, stored out of line and
/// uncompressed) is updated only now and then, with `REPLICA IDENTITY DEFAULT`: PostgreSQL
/// sends `big` as unchanged in every other update. Key `(a, b)` when `composite`, else `a`.
async fn toast_table(pg: &str, name: &str, n: i64, composite: bool) {
    let key = if composite { "a, b" } else { "a" };
    exec(
        pg,
        &format!(
            "CREATE TABLE {name} (a INT NOT NULL, b TEXT NOT NULL, big TEXT, tags TEXT[],
               doc JSONB, amount NUMERIC(12,2), n INT, PRIMARY KEY ({key}));
             ALTER TABLE {name} ALTER COLUMN big SET STORAGE EXTERNAL;
             INSERT INTO {name} SELECT i, 'k' || (i % 7), repeat(md5(i::text), 100),
               ARRAY['t' || i, 'first'], jsonb_build_object('i', i), i / 100.0, 0
             FROM generate_series(1, {n}) i;
             GRANT SELECT ON {name} TO rivus_cdc;
             CREATE PUBLICATION {name} FOR TABLE {name}"
        ),
    )
    .await;
    let mut c = PgConnection::connect(pg).await.unwrap();
    let toasted: i64 = sqlx::query_scalar(
        "SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE relname = $1",
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
/// in another.
fn toast_writer(
    pg: String,
    name: String,
    rows: i64,
    rounds: u64,
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

/// Runs `postgres-cdc` over the TOAST table `name` of `snapshot` rows into `sink` (two sink
/// subtasks keyed by `a`) while [`Writing`] changes the table, SIGKILLs it six times (twice
/// while the snapshot is read — the writer starts after the second —, three times while the
/// stream runs, each after the writer moved on, and once when the writer is done), and starts
/// it once more; then waits until `equal()` or fails after three minutes, and stops the job.
/// `progress()` counts what the sink holds.
async fn through_six_kills<Fut>(
    (pg, cdc, name): (&str, &str, &str),
    snapshot: i64,
    (sink, kills): (&str, Kills),
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
            2,
            "[[transform]]\ntype = \"key\"\nfield = \"a\"",
            sink,
        ),
    );
    let file = file.as_path();
    let mut writing = Writing::start(pg, name, snapshot);
    let (done, halt) = (Arc::clone(&writing.done), Arc::clone(&writing.halt));
    let log =
        |label: &str| std::fs::read_to_string(dir.join(format!("{label}.log"))).unwrap_or_default();
    for kill in 0..6 {
        let label = format!("run{kill}");
        let mut job: Job = rivus(dir, file, &label, &[]);
        let from = done.load(Ordering::SeqCst);
        let checkpointed = newest_checkpoint(dir);
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let ready = match kill {
                0 => progress().await >= snapshot / 4,
                1 => progress().await >= snapshot * 3 / 4,
                // While streaming: the writer has moved on since this run started.
                _ => done.load(Ordering::SeqCst) >= from + 60 + 40 * kill as u64,
            } && (kills == Kills::Anywhere || newest_checkpoint(dir) > checkpointed);
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
        if kill == 1 {
            // The writer starts once the snapshot is well under way.
            halt.store(false, Ordering::SeqCst);
        }
        if kill == 5 {
            // The last kill comes when the writer is done, while the job still catches up.
            writing.handle.take().unwrap().await.unwrap();
        }
        job.kill();
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
    /// Anywhere, also before the run completed a checkpoint (a transactional sink: what a
    /// run wrote without a checkpoint is rolled back).
    Anywhere,
    /// Only after the run completed a checkpoint of its own. An at-least-once sink keeps what
    /// a run wrote before its first checkpoint; a job killed before any checkpoint after its
    /// snapshot reads the snapshot again, which cannot delete the rows deleted meanwhile (a
    /// known limit, in the CDC README).
    AfterACheckpoint,
}

/// The newest completed checkpoint's id under `dir` (0 before any).
fn newest_checkpoint(dir: &Path) -> u64 {
    fn walk(dir: &Path, best: &mut u64) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = e.path();
            if path.is_dir() {
                walk(&path, best);
            } else if let Some(id) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix("chk-")?.strip_suffix(".ckpt")?.parse().ok())
            {
                *best = (*best).max(id);
            }
        }
    }
    let mut best = 0;
    walk(dir, &mut best);
    best
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

    fn start(pg: &str, name: &str, rows: i64) -> Writing {
        let (done, halt) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicBool::new(true)));
        let (gate, d) = (Arc::clone(&halt), Arc::clone(&done));
        let (pg, name) = (pg.to_owned(), name.to_owned());
        let handle = tokio::spawn(async move {
            while gate.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            toast_writer(pg, name, rows, Self::ROUNDS, gate, d)
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
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unchanged_toast_values_survive_kill_nine_in_a_postgres_replica() {
    let (Some(pg), Some(cdc)) = (require(Service::Postgres), require(Service::PostgresCdc)) else {
        return;
    };
    let rows = toast_rows();
    let name = unique_name("cdc_toast").replace('-', "_");
    let replica = format!("{name}_copy");
    let _cleanup = Cleanup {
        pg: pg.clone(),
        name: name.clone(),
        tables: vec![name.clone(), replica.clone()],
    };
    toast_table(&pg, &name, rows, true).await;
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
            Some(format!(
                "{missing} rows missing or different, {extra} extra; {placeholders} replica rows \
                 hold the placeholder"
            ))
        }) as Check
    };
    through_six_kills(
        (&pg, &cdc, &name),
        rows,
        (&sink, Kills::Anywhere),
        progress,
        equal,
    )
    .await;
}

/// The same through the Elasticsearch sink (`apply_changes`, documents by `a`; 5 000 rows, the
/// large transactions as large as the table; each kill after the run completed a checkpoint,
/// see [`Kills`]): a change without `big` updates its document partially, so every document
/// ends equal to its row.
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
    let name = unique_name("cdc_toast_es").replace('-', "_");
    let _cleanup = Cleanup {
        pg: pg.clone(),
        name: name.clone(),
        tables: vec![name.clone()],
    };
    toast_table(&pg, &name, rows, false).await;
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
        (&sink, Kills::AfterACheckpoint),
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

/// A replica table dropped under a running job (a statement PostgreSQL will refuse every
/// time: `relation does not exist`) ends the job with that error, at once, instead of
/// restarting it from its checkpoint forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_refuses_every_statement_ends_the_job() {
    let (Some(pg), Some(cdc)) = (require(Service::Postgres), require(Service::PostgresCdc)) else {
        return;
    };
    let name = unique_name("cdc_refused").replace('-', "_");
    let replica = format!("{name}_copy");
    let _cleanup = Cleanup {
        pg: pg.clone(),
        name: name.clone(),
        tables: vec![name.clone(), replica.clone()],
    };
    exec(
        &pg,
        &format!(
            "CREATE TABLE {name} (id INT PRIMARY KEY, v TEXT);
             INSERT INTO {name} SELECT i, 'v' || i FROM generate_series(1, 100) i;
             GRANT SELECT ON {name} TO rivus_cdc;
             CREATE PUBLICATION {name} FOR TABLE {name};
             CREATE TABLE {replica} (id INT PRIMARY KEY, v TEXT)"
        ),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let file = job_file(
        dir.path(),
        &cdc,
        (&name, &name),
        1,
        "[restart]\nstrategy = \"fixed-delay\"\ndelay = \"100ms\"\nmax_attempts = 1000",
        &format!(
            "type = \"jdbc\"\nurl = \"{pg}\"\ntable = \"{replica}\"\nmode = \"upsert\"\n\
             apply_changes = true"
        ),
    );
    let mut job = rivus(dir.path(), &file, "run", &[]);
    let mut db = PgConnection::connect(&pg).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while count(&mut db, &replica).await < 100 {
        assert!(job.child().try_wait().unwrap().is_none(), "the job ended");
        assert!(Instant::now() < deadline, "the replica did not fill");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    exec(
        &pg,
        &format!("DROP TABLE {replica}; INSERT INTO {name} VALUES (101, 'after')"),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = job.child().try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the job did not end: {}",
            std::fs::read_to_string(dir.path().join("run.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    job.0 = None;
    let log = std::fs::read_to_string(dir.path().join("run.log")).unwrap_or_default();
    assert!(!status.success(), "{log}");
    assert!(
        log.contains("does not exist") && log.contains("42P01"),
        "the error names the refusal: {log}"
    );
    assert!(
        !log.contains("restarting from"),
        "no restart for a statement that fails every time: {log}"
    );
}
