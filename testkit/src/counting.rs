//! [`CountingSink`]: counts what it receives and drops it — the null sink of benchmarks and
//! back-pressure tests.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rivus_sdk::prelude::*;

/// Counts records (shared by clones) and discards them. Declares exactly-once: it keeps nothing.
#[derive(Debug, Clone, Default)]
pub struct CountingSink {
    count: Arc<AtomicU64>,
}

impl CountingSink {
    /// A sink starting at 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records received so far by this sink and its clones.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

#[async_trait]
impl RichFunction for CountingSink {}

#[async_trait]
impl CheckpointedFunction for CountingSink {
    type State = ();

    async fn snapshot_state(&mut self, _: u64) -> Result<()> {
        Ok(())
    }
}

#[async_trait]
impl CheckpointListener for CountingSink {}

#[async_trait]
impl<T: Send + 'static> SinkFunction<T> for CountingSink {
    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::ExactlyOnce
    }

    async fn invoke(&mut self, value: T, _: &SinkContext) -> Result<()> {
        drop(std::hint::black_box(value));
        self.count.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    async fn invoke_batch(&mut self, values: Vec<T>, _: &mut SinkContext) -> Result<()> {
        self.count.fetch_add(values.len() as u64, Ordering::Relaxed);
        drop(std::hint::black_box(values));
        Ok(())
    }
}
