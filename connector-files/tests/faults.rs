//! Network faults between the file sink and S3 (SeaweedFS), through the testkit's fault proxy:
//! a blackhole mid-stream, connection resets every two seconds, 200 ms latency. The job keeps
//! running or restarts itself from its checkpoint, and the committed files end with every
//! record of the sequence exactly once and no upload left open.

mod common;

use std::collections::BTreeMap;

use async_trait::async_trait;
use common::Bucket;
use object_store::path::Path as Key;
use object_store::ObjectStoreExt;
use rivus_connector_files::{Compression, FileFormat, FilesSink, FilesState};
use rivus_sdk::prelude::*;
use rivus_testkit::fault_proxy::FaultProxy;
use rivus_testkit::faults::{sink_under_fault, Fault};
use serde_json::{json, Value};

/// The file sink fed sequence numbers as `{"n": …}` records.
struct Numbers(FilesSink);

#[async_trait]
impl RichFunction for Numbers {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        self.0.open(ctx).await
    }
    async fn close(&mut self) -> Result<()> {
        self.0.close().await
    }
}

#[async_trait]
impl CheckpointedFunction for Numbers {
    type State = FilesState;
    async fn initialize_state(&mut self, r: Restored<FilesState>) -> Result<()> {
        self.0.initialize_state(r).await
    }
    async fn snapshot_state(&mut self, id: u64) -> Result<FilesState> {
        self.0.snapshot_state(id).await
    }
}

#[async_trait]
impl CheckpointListener for Numbers {
    async fn notify_checkpoint_complete(&mut self, id: u64) -> Result<()> {
        self.0.notify_checkpoint_complete(id).await
    }
}

#[async_trait]
impl SinkFunction<u64> for Numbers {
    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        self.0.delivery_guarantee()
    }
    async fn invoke(&mut self, n: u64, ctx: &SinkContext) -> Result<()> {
        self.0.invoke(json!({ "n": n }), ctx).await
    }
    async fn invoke_batch(&mut self, values: Vec<u64>, ctx: &mut SinkContext) -> Result<()> {
        let values = values.into_iter().map(|n| json!({ "n": n })).collect();
        self.0.invoke_batch(values, ctx).await
    }
    async fn finish(&mut self) -> Result<()> {
        self.0.finish().await
    }
}

/// How many times each number is in the committed files.
async fn committed(b: &Bucket) -> BTreeMap<u64, u32> {
    let mut seen = BTreeMap::new();
    for (k, _) in b.keys(false).await {
        let Ok(got) = b.store.get(&Key::from(format!("{}/{k}", b.prefix))).await else {
            continue;
        };
        let Ok(body) = got.bytes().await else {
            continue;
        };
        for line in String::from_utf8_lossy(&body).lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            *seen.entry(v["n"].as_u64().unwrap()).or_default() += 1;
        }
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_on_s3_ride_out_network_faults_exactly_once() {
    let Some(direct) = Bucket::new("files-faults") else {
        return;
    };
    let (proxy, proxied) = FaultProxy::in_front_of(&direct.endpoint).await.unwrap();
    for fault in [
        Fault::Blackhole(Fault::blackhole_from_env()),
        Fault::Resets {
            every: std::time::Duration::from_secs(2),
            times: 3,
        },
        Fault::Latency {
            delay: std::time::Duration::from_millis(200),
            lasting: std::time::Duration::from_secs(5),
        },
    ] {
        let b = Bucket::new("files-faults").unwrap();
        let (url, mut opts) = (b.url(), b.options());
        opts.endpoint = Some(proxied.clone());
        let sink = move || {
            Numbers(
                FilesSink::builder(&url)
                    .s3(opts.clone())
                    .format(FileFormat::JsonLines(Compression::None))
                    .target_file_size(16 * 1024)
                    .build()
                    .unwrap(),
            )
        };
        let run = sink_under_fault("faults-files", &proxy, fault.clone(), 2_000, sink, || {
            let b = &b;
            async move { committed(b).await.len() as u64 }
        })
        .await;
        proxy.clear();
        let seen = committed(&b).await;
        let twice: Vec<_> = seen.iter().filter(|(_, c)| **c > 1).take(5).collect();
        assert!(
            twice.is_empty(),
            "{}: committed twice: {twice:?}",
            run.fault
        );
        assert_eq!(
            seen.len() as u64,
            run.emitted,
            "{}: every record of 0..{} committed",
            run.fault,
            run.emitted
        );
        assert_eq!(b.open_uploads(), 0, "{}: no upload left open", run.fault);
        eprintln!("{}", run.report("files sink on S3 (exactly-once)"));
    }
}
