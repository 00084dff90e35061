//! The SQL sink's refusals: bad configuration named by the field's path, TLS failures named
//! without the password.

mod common;

use std::time::Duration;

use common::sqlite;
use rivus_connector_jdbc::{JdbcConfig, JdbcSink, PgMethod, WriteMode};
use rivus_sdk::prelude::*;
use rivus_testkit::run_records_into;
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_configuration_is_refused_with_the_field_path() {
    let lite = sqlite();
    lite.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
        .await;
    let open_err = |mut sink: JdbcSink<Value>| async move {
        let ctx = RuntimeContext::new("job", "sink", 0, 1, None);
        let e = sink.open(&ctx).await.unwrap_err().to_string();
        let _ = sink.close().await;
        e
    };
    let e = open_err(
        JdbcSink::builder(&lite.url, "missing")
            .build_json()
            .unwrap(),
    )
    .await;
    assert!(e.contains("`table`") && e.contains("does not exist"), "{e}");
    let sink = JdbcSink::builder(&lite.url, "t")
        .columns(["id", "nope"])
        .build_json()
        .unwrap();
    let e = open_err(sink).await;
    assert!(e.contains("`columns[1]`") && e.contains("nope"), "{e}");
    let e = JdbcSink::builder(&lite.url, "t")
        .guarantee(DeliveryGuarantee::ExactlyOnce)
        .build_json()
        .unwrap_err()
        .to_string();
    assert!(e.contains("`exactly_once`"), "{e}");
    let e = JdbcSink::builder(&lite.url, "t")
        .postgres_method(PgMethod::Copy)
        .mode(WriteMode::Upsert)
        .build_json()
        .unwrap_err()
        .to_string();
    assert!(e.contains("`postgres_method`"), "{e}");
    let e = JdbcSink::builder("jdbc:oracle:thin:@h", "t")
        .build_json()
        .unwrap_err()
        .to_string();
    assert!(e.contains("`url`"), "{e}");
    // A password never shows, in errors or Debug output.
    let secret = "postgres://rivus:supersecret@127.0.0.1:1/rivus";
    let sink = JdbcSink::builder(
        JdbcConfig::new(secret).timeout(Duration::from_millis(300)),
        "t",
    )
    .build_json()
    .unwrap();
    assert!(!format!("{sink:?}").contains("supersecret"));
    let e = open_err(sink).await;
    assert!(
        e.contains("connecting") && !e.contains("supersecret"),
        "{e}"
    );
}

/// TLS refusals name the problem: a server certificate from an unknown CA, and a user the
/// server admits only over TLS connecting without it. The password never shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_refusals_name_the_problem_without_the_password() {
    use rivus_sdk::tls::TlsFiles;
    let Some(url) = rivus_testkit::services::require(rivus_testkit::services::Service::PostgresTls)
    else {
        return;
    };
    let base = url.split('?').next().unwrap().to_owned();
    let password = "rivus-pg-pw";
    // The client certificate is no CA: the server's certificate cannot be verified.
    let wrong_ca = TlsFiles {
        ca_file: Some(rivus_testkit::services::tls_dir().join("client.crt")),
        ..TlsFiles::default()
    };
    let sink = JdbcSink::builder(JdbcConfig::new(&base).tls(wrong_ca), "t")
        .build_json()
        .unwrap();
    let err = run_records_into("tls-wrong-ca", vec![json!({"v": 1})], |_| sink.clone())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.to_lowercase().contains("certificate"), "{err}");
    assert!(!err.contains(password), "{err}");
    // Without TLS the server refuses this user.
    let plain = format!("{base}?sslmode=disable");
    let err = rivus_connector_jdbc::run_script(&plain, "SELECT 1")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("no encryption"), "{err}");
    assert!(!err.contains(password), "{err}");
}

/// A statement the database refuses every time (here a trigger raising
/// `feature_not_supported`, as a read-only replica would) ends the job with that error at the
/// first attempt, under a restart strategy that would otherwise restart it a thousand times;
/// a dropped connection still restarts (the database-restart tests).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_the_database_refuses_every_time_ends_the_job() {
    let Some(db) = common::postgres() else {
        return;
    };
    let table = rivus_testkit::services::unique_name("refused").replace('-', "_");
    db.exec(&format!(
        "CREATE TABLE {table} (id BIGINT PRIMARY KEY);
         CREATE FUNCTION {table}_no() RETURNS trigger LANGUAGE plpgsql AS
           $$ BEGIN RAISE EXCEPTION 'this replica takes no writes'
              USING ERRCODE = 'feature_not_supported'; END $$;
         CREATE TRIGGER {table}_no BEFORE INSERT ON {table}
           FOR EACH ROW EXECUTE FUNCTION {table}_no()"
    ))
    .await;
    let records: std::sync::Arc<Vec<Vec<Value>>> =
        std::sync::Arc::new(vec![(0..10).map(|i| json!({ "id": i })).collect()]);
    let attempts = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let (url, t, a) = (
        db.url.clone(),
        table.clone(),
        std::sync::Arc::clone(&attempts),
    );
    let supervisor = Supervisor::new(move || {
        a.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let (url, t, records) = (url.clone(), t.clone(), std::sync::Arc::clone(&records));
        async move {
            let sink = JdbcSink::builder(&url, &t)
                .mode(WriteMode::Upsert)
                .build_json()?;
            Pipeline::new("refused")
                .restart_strategy(RestartStrategy::FixedDelay {
                    delay: Duration::from_millis(20),
                    max_attempts: 1000,
                })
                .source("records", 1, move |i| {
                    rivus_testkit::VecSource::new(std::sync::Arc::clone(&records), i, 1)
                })
                .sink("sink", 1, move |_| sink.clone())
        }
    })
    .await
    .unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(30), supervisor.run())
        .await
        .expect("the job ends instead of restarting forever");
    let err = ended.unwrap_err();
    assert!(!err.is_retryable(), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("this replica takes no writes") && text.contains("0A000"),
        "{text}"
    );
    assert_eq!(
        attempts.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "no restart"
    );
    db.exec(&format!("DROP TABLE {table}; DROP FUNCTION {table}_no()"))
        .await;
}
