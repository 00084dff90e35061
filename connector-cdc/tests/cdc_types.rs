//! What change records carry, against the real server: PostgreSQL's types mapped like
//! Debezium's (the snapshot and the stream alike), a TOAST-ed value an update did not touch
//! marked as unchanged (never NULL), the old row of `REPLICA IDENTITY FULL`, a column added
//! while the job runs, and Debezium's envelope.

mod common;

use std::time::Duration;

use rivus_connector_cdc::{Envelope, UNCHANGED_TOAST};
use rivus_sdk::prelude::*;
use rivus_testkit::{wait, TxnStore};
use serde_json::{json, Value};

use common::{job, source, Fixture};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdc_records_map_types_mark_unchanged_toast_and_follow_new_columns() {
    let Some(mut f) = Fixture::new("cdc_types", 0).await else {
        return;
    };
    let t = format!("{}_typed", f.name);
    let mood = format!("{}_mood", f.name);
    f.exec(&format!(
        "CREATE TYPE {mood} AS ENUM ('happy', 'sad');
         CREATE TABLE {t} (
           id BIGINT PRIMARY KEY, price NUMERIC(12,3), ratio DOUBLE PRECISION, ok BOOLEAN,
           day DATE, at TIMESTAMPTZ, local TIMESTAMP, doc JSONB, tags TEXT[], nums INT[],
           raw BYTEA, ref UUID, feel {mood}, big TEXT);
         ALTER TABLE {t} REPLICA IDENTITY FULL;
         GRANT SELECT ON {t} TO rivus_cdc;
         ALTER PUBLICATION {0} ADD TABLE {t};
         CREATE TABLE {t}_toast (id INT PRIMARY KEY, n INT, big TEXT);
         ALTER TABLE {t}_toast ALTER COLUMN big SET STORAGE EXTERNAL;
         GRANT SELECT ON {t}_toast TO rivus_cdc;
         ALTER PUBLICATION {0} ADD TABLE {t}_toast;
         CREATE TABLE {t}_full (id INT PRIMARY KEY, n INT, big TEXT);
         ALTER TABLE {t}_full ALTER COLUMN big SET STORAGE EXTERNAL;
         ALTER TABLE {t}_full REPLICA IDENTITY FULL;
         GRANT SELECT ON {t}_full TO rivus_cdc;
         ALTER PUBLICATION {0} ADD TABLE {t}_full;
         INSERT INTO {t} VALUES (1, 12.5, 0.25, true, '2024-01-01', '2024-03-01 12:00:00.5+02',
           '1970-01-01 00:00:01.25', '{{\"a\": [1, 2]}}', '{{x,\"y z\"}}', '{{1,NULL,3}}',
           '\\x00ff', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'happy', NULL)",
        f.name
    ))
    .await;
    let (backend, store) = (MemoryStateBackend::new(), TxnStore::<Value>::new());
    let ms = Duration::from_millis;
    let src = source(&f, |b| b.envelope(Envelope::Debezium));
    let run = job(&f.name, src, &backend, &store, ms(100), ms(0));
    let handle = run.handle();
    let running = tokio::spawn(run.run());
    wait::until(
        Duration::from_secs(30),
        || async { store.committed_len() >= 1 },
        || "the snapshot row".to_owned(),
    )
    .await;
    // Each statement its own transaction.
    for sql in [
        format!(
            "INSERT INTO {t} (id, price, day, at) VALUES (2, -0.001, '1969-12-31', \
             '1970-01-01 00:00:00+00')"
        ),
        format!("UPDATE {t} SET price = 7 WHERE id = 2"),
        format!("ALTER TABLE {t} ADD COLUMN extra TEXT DEFAULT 'new'"),
        format!("UPDATE {t} SET extra = 'set' WHERE id = 1"),
        format!("DELETE FROM {t} WHERE id = 1"),
        // Stored out of line (TOAST), uncompressed: 22 400 characters.
        format!(
            "INSERT INTO {t}_toast SELECT 1, 1, string_agg(md5(i::text), '') \
             FROM generate_series(1, 700) i"
        ),
        format!("UPDATE {t}_toast SET n = 2 WHERE id = 1"),
        format!(
            "INSERT INTO {t}_full SELECT 1, 1, string_agg(md5(i::text), '') \
             FROM generate_series(1, 700) i"
        ),
        format!("UPDATE {t}_full SET n = 2 WHERE id = 1"),
    ] {
        f.exec(&sql).await;
    }
    wait::until(
        Duration::from_secs(30),
        || async { store.committed_len() >= 9 },
        || format!("{} of 9 changes", store.committed_len()),
    )
    .await;
    handle.stop();
    running.await.unwrap().unwrap();
    let got = store.committed();
    let of_table: Vec<&Value> = got.iter().filter(|r| r["source"]["table"] == t).collect();
    assert_eq!(of_table.len(), 5, "{got:#?}");
    let (snap, insert, update, update1, delete) = (
        of_table[0],
        of_table[1],
        of_table[2],
        of_table[3],
        of_table[4],
    );

    assert_eq!(snap["op"], "r");
    assert_eq!(snap["source"]["snapshot"], "last");
    let row = &snap["after"];
    assert_eq!(row["id"], 1);
    assert_eq!(row["price"], "12.500", "numeric as exact text");
    assert_eq!(row["ratio"], 0.25);
    assert_eq!(row["ok"], true);
    assert_eq!(row["day"], 19_723, "date as days since the epoch");
    assert_eq!(
        row["at"], "2024-03-01T10:00:00.500000Z",
        "timestamptz in UTC"
    );
    assert_eq!(row["local"], 1_250_000, "timestamp as microseconds");
    assert_eq!(row["doc"], r#"{"a": [1, 2]}"#, "jsonb as text");
    assert_eq!(row["tags"], json!(["x", "y z"]));
    assert_eq!(row["nums"], json!([1, null, 3]));
    assert_eq!(row["raw"], "AP8=", "bytea as base64");
    assert_eq!(row["ref"], "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
    assert_eq!(row["feel"], "happy", "enum as text");
    assert_eq!(row["big"], Value::Null);

    assert_eq!(insert["op"], "c");
    assert_eq!(insert["after"]["price"], "-0.001");
    assert_eq!(insert["after"]["day"], -1);
    assert_eq!(insert["after"]["at"], "1970-01-01T00:00:00.000000Z");
    assert!(insert["source"]["lsn"].as_u64().unwrap() > 0);
    assert!(insert["source"]["txId"].as_u64().unwrap() > 0);

    assert_eq!(update["op"], "u");
    assert_eq!(update["after"]["price"], "7.000");
    assert_eq!(
        update["before"]["price"], "-0.001",
        "REPLICA IDENTITY FULL: the old row"
    );

    assert_eq!(
        update1["after"]["extra"], "set",
        "the added column is followed"
    );
    assert_eq!(update1["before"]["extra"], "new");
    assert_eq!(delete["op"], "d");
    assert_eq!(delete["after"], Value::Null);
    assert_eq!(delete["before"]["id"], 1);
    assert_eq!(delete["before"]["extra"], "set");

    let toast: Vec<&Value> = got
        .iter()
        .filter(|r| r["source"]["table"] == format!("{t}_toast"))
        .collect();
    assert_eq!(toast.len(), 2);
    let len = |v: &Value| v.as_str().map(str::len);
    assert_eq!(len(&toast[0]["after"]["big"]), Some(22_400));
    assert_eq!(toast[1]["after"]["n"], 2);
    assert!(
        toast[1]["after"]["big"] == UNCHANGED_TOAST,
        "a TOAST-ed value the update did not touch is marked, not nulled (got {:?} characters)",
        len(&toast[1]["after"]["big"])
    );
    // REPLICA IDENTITY FULL: the update carries the whole old row, and the unchanged value
    // is taken from it — the record is complete, nothing for a sink to leave alone.
    let full: Vec<&Value> = got
        .iter()
        .filter(|r| r["source"]["table"] == format!("{t}_full"))
        .collect();
    assert_eq!(full.len(), 2);
    assert_eq!(full[1]["after"]["n"], 2);
    assert_eq!(
        len(&full[1]["after"]["big"]),
        Some(22_400),
        "{:?}",
        full[1]["after"]["big"]
            .as_str()
            .map(|s| &s[..40.min(s.len())])
    );
    assert_eq!(full[1]["after"]["big"], full[0]["after"]["big"]);
    f.exec(&format!(
        "DROP TABLE {t}; DROP TABLE {t}_toast; DROP TABLE {t}_full; DROP TYPE {mood}"
    ))
    .await;
    f.clean().await;
}
