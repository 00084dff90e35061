//! A new slot waits for every transaction open when it is asked for — a prepared transaction
//! left behind too, which never ends by itself. The wait is named: a warning lists the prepared
//! transaction by its global id, with the statement that ends it; once it ends, the snapshot is
//! read as usual.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rivus_sdk::prelude::*;
use rivus_testkit::{wait, TxnStore};
use serde_json::Value;

use common::{job, replay, source, Fixture};

/// What the process logs, kept.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_waiting_for_an_orphaned_prepared_transaction_names_it() {
    let logs = Logs::default();
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::WARN)
        .init();
    let Some(mut f) = Fixture::new("cdc_wait", 3).await else {
        return;
    };
    let gid = format!("{}_orphan", f.name);
    f.exec(&format!(
        "BEGIN; INSERT INTO {} (id, body, amount) VALUES (100, 'prepared', 1); \
         PREPARE TRANSACTION '{gid}'",
        f.name
    ))
    .await;

    let (backend, store) = (MemoryStateBackend::new(), TxnStore::<Value>::new());
    let run = job(
        &f.name,
        source(&f, |b| b),
        &backend,
        &store,
        Duration::from_millis(100),
        Duration::ZERO,
    );
    let handle = run.handle();
    let running = tokio::spawn(run.run());
    wait::until(
        Duration::from_secs(60),
        || async { logs.text().contains(&format!("'{gid}'")) },
        || format!("a warning naming {gid}; logged: {}", logs.text()),
    )
    .await;
    let warning = logs.text();
    assert!(
        warning.contains("waits for these transactions to end")
            && warning.contains(&format!("ROLLBACK PREPARED '{gid}'")),
        "{warning}"
    );
    assert_eq!(
        store.committed_len(),
        0,
        "nothing is read before the slot exists"
    );

    f.exec(&format!("ROLLBACK PREPARED '{gid}'")).await;
    wait::until(
        Duration::from_secs(60),
        || async { store.committed_len() >= 3 },
        || "the snapshot's rows once the prepared transaction ended".to_owned(),
    )
    .await;
    handle.stop();
    running.await.unwrap().unwrap();
    assert_eq!(replay(&store.committed()), f.rows().await);
    f.clean().await;
}
