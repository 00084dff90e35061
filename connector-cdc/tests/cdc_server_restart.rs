//! PostgreSQL restarted under a streaming CDC job: the replication connection breaks, the job
//! fails and restarts by itself from its last checkpoint (retrying while the server is down),
//! and the changes made before, around and after the restart all arrive, each once. Alone in
//! its file: no other test sees the server go away.

mod common;

use std::sync::Arc;
use std::time::Duration;

use rivus_sdk::prelude::*;
use rivus_testkit::{restart, TransactionalSink, TxnStore};
use serde_json::Value;

use common::{assert_no_duplicates, source, until_replica_equals, write, Fixture};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdc_a_postgres_restart_is_ridden_out_and_nothing_is_lost_or_doubled() {
    let Some(mut f) = Fixture::new("cdc_pgrestart", 1_000).await else {
        return;
    };
    let (backend, store) = (MemoryStateBackend::new(), TxnStore::<Value>::new());
    let src = source(&f, |b| b);
    let build = {
        let (name, backend, store) = (f.name.clone(), backend.clone(), store.clone());
        move || {
            let (name, backend, store, src) =
                (name.clone(), backend.clone(), store.clone(), src.clone());
            async move {
                Pipeline::new(name.as_str())
                    .checkpointing(
                        CheckpointConfig::new(Duration::from_millis(200), Arc::new(backend))
                            .with_timeout(Duration::from_secs(120)),
                    )
                    .restart_strategy(RestartStrategy::ExponentialDelay {
                        initial: Duration::from_millis(200),
                        max: Duration::from_secs(2),
                        multiplier: 2.0,
                        jitter: 0.1,
                        reset_after: Duration::from_secs(60),
                        max_attempts: Some(60),
                    })
                    .source("cdc", 1, move |_| src.clone())
                    .sink("txn", 1, move |i| TransactionalSink::new(store.clone(), i))
            }
        }
    };
    let supervisor = Supervisor::new(build).await.expect("the job builds");
    let handle = supervisor.handle();
    let running = tokio::spawn(supervisor.run());

    write(f.owner_url.clone(), f.name.clone(), 0, 100).await;
    until_replica_equals(
        &mut f,
        &store,
        60,
        "the replica follows the table before the restart",
    )
    .await;

    restart::bounce("postgres", Duration::from_secs(2)).await;
    f.reconnect().await;
    write(f.owner_url.clone(), f.name.clone(), 100, 100).await;
    until_replica_equals(&mut f, &store, 120, "after the restart").await;
    handle.stop();
    let summary = running.await.unwrap().unwrap();
    assert!(summary.restarts >= 1, "the job restarted: {summary:?}");
    assert_no_duplicates(&store.committed());
    f.clean().await;
}
