//! A complete job written against rivus-sdk: a checkpointed counter source, a map, and a
//! sink printing one line per 100 000 records. Run it, stop it with Ctrl-C, run it again: it
//! resumes after the last checkpoint.
//!
//! ```text
//! cargo run --release -p rivus-sdk --example quickstart -- [records] [state-dir]
//! ```

use std::sync::Arc;
use std::time::Duration;

use rivus_sdk::prelude::*;

/// Emits 0, 1, 2, ... up to `limit`; its position is checkpointed state.
struct Counter {
    limit: u64,
}

#[async_trait]
impl RichFunction for Counter {}

#[async_trait]
impl SourceFunction for Counter {
    type Out = u64;
    type State = u64;

    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::ExactlyOnce
    }

    async fn run(&mut self, ctx: &mut SourceContext<u64, u64>) -> Result<()> {
        while *ctx.state() < self.limit && !ctx.is_stopping() {
            let n = *ctx.state();
            *ctx.state_mut() = n + 1;
            ctx.collect(n).await?;
        }
        Ok(())
    }
}

/// Prints progress; idempotent output, so at-least-once is all it needs.
struct Progress {
    seen: u64,
}

#[async_trait]
impl RichFunction for Progress {
    async fn close(&mut self) -> Result<()> {
        println!("sink closed after {} records", self.seen);
        Ok(())
    }
}

#[async_trait]
impl CheckpointedFunction for Progress {
    type State = ();
    async fn snapshot_state(&mut self, _: u64) -> Result<()> {
        Ok(())
    }
}

#[async_trait]
impl CheckpointListener for Progress {
    async fn notify_checkpoint_complete(&mut self, id: u64) -> Result<()> {
        println!("checkpoint {id} complete");
        Ok(())
    }
}

#[async_trait]
impl SinkFunction<u64> for Progress {
    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::AtLeastOnce
    }

    async fn invoke(&mut self, value: u64, _: &SinkContext) -> Result<()> {
        self.seen += 1;
        if value.is_multiple_of(100_000) {
            println!("at {value}");
        }
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let limit: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let dir = args
        .next()
        .unwrap_or_else(|| "target/quickstart-state".into());
    let backend = Arc::new(FsStateBackend::new(&dir, 3)?);
    let job = Pipeline::new("quickstart")
        .checkpointing(CheckpointConfig::new(Duration::from_millis(500), backend))
        .source("counter", 1, |_| Counter { limit })
        .map(|n| n * 2)
        .sink("progress", 1, |_| Progress { seen: 0 })?;
    println!("guarantee: {}", job.delivery_guarantee());
    job.handle().stop_on_signals();
    let summary = job.run().await?;
    println!("{summary:?}");
    Ok(())
}
