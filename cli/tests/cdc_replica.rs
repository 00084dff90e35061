//! Replicas fed by change data capture through the `rivus` command, against the real
//! PostgreSQL and MariaDB: every column type PostgreSQL sends is written to a PostgreSQL and a
//! MariaDB replica equal to the source; a statement the replica refuses every time ends the job
//! instead of restarting it forever; the source's refusals name the setting as the file has it.
//! (Unchanged TOASTed values under SIGKILLs: `cdc_toast.rs`.)

#[path = "support/cdc.rs"]
mod cdc;

use std::time::{Duration, Instant};

use rivus_testkit::services::{require, unique_name, Service};
use sqlx::{Connection, MySqlConnection, PgConnection, Row};

use cdc::{count, differences, exec, job_file, rivus, stop, Cleanup};

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

/// A replica table dropped under a running job (a statement PostgreSQL will refuse every
/// time: `relation does not exist`) ends the job with that error, at once, instead of
/// restarting it from its checkpoint forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_refuses_every_statement_ends_the_job() {
    let (Some(pg), Some(cdc)) = (require(Service::Postgres), require(Service::PostgresCdc)) else {
        return;
    };
    let (name, _cleanup) = Cleanup::table(&pg, "cdc_refused", true);
    let replica = format!("{name}_copy");
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

/// What the server refuses about a setting names the setting as the file has it: a publication
/// that does not exist (`source.publication`), a table outside the publication
/// (`source.tables[0]`) — raised by the source while it starts, placed under the section once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_name_the_setting_in_the_file() {
    let (Some(pg), Some(cdc)) = (require(Service::Postgres), require(Service::PostgresCdc)) else {
        return;
    };
    let (name, _cleanup) = Cleanup::table(&pg, "cdc_named", false);
    exec(
        &pg,
        &format!(
            "CREATE TABLE {name} (id INT PRIMARY KEY);
             GRANT SELECT ON {name} TO rivus_cdc;
             CREATE PUBLICATION {name} FOR TABLE {name}"
        ),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let missing = format!("{name}_missing");
    let cases = [
        (
            (missing.as_str(), name.as_str()),
            String::new(),
            format!("(at `source.publication`): publication `{missing}` does not exist"),
        ),
        (
            (name.as_str(), name.as_str()),
            format!("tables = [\"public.{name}_other\"]"),
            "(at `source.tables[0]`): table `public.".to_owned(),
        ),
    ];
    for (i, ((publication, slot), source, expected)) in cases.iter().enumerate() {
        let file = job_file(
            dir.path(),
            &cdc,
            (publication, slot),
            1,
            source,
            "type = \"stdout\"",
        );
        let label = format!("case{i}");
        let mut job = rivus(dir.path(), &file, &label, &[]);
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = job.child().try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "case {i}: the job did not end");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        job.0 = None;
        let log = std::fs::read_to_string(dir.path().join(format!("{label}.log"))).unwrap();
        assert_eq!(status.code(), Some(2), "case {i}: {log}");
        assert!(
            log.contains(expected.as_str()),
            "case {i}: `{expected}` in: {log}"
        );
    }
}
