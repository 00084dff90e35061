//! The built-in generator: order-like JSON records, numbered, optionally paced and bounded;
//! its position is checkpointed, so a restarted job continues the sequence (exactly-once).

use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

use rivus_pipeline_file::{CatalogEntry, Health, SectionContext, SourcePlan, SourceSection};
use rivus_sdk::prelude::*;

/// `[source] type = "generator"`.
#[derive(Debug, Clone, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GeneratorSection {
    /// Records to emit; unbounded when absent.
    pub count: Option<u64>,
    /// Records per second per subtask (unlimited when absent).
    pub rate: Option<u64>,
    /// Distinct users in the records (default 50).
    #[serde(default = "fifty")]
    pub users: u64,
}

fn fifty() -> u64 {
    50
}

#[async_trait]
impl SourceSection for GeneratorSection {
    const TYPE: &'static str = "generator";
    const CATALOG: CatalogEntry = CatalogEntry {
        summary: "numbered order-like records (id, user, amount, status, ts)",
        guarantee: "exactly-once (its position is checkpointed)",
    };

    fn build(&self, _ctx: &SectionContext) -> Result<SourcePlan> {
        let plan = SourcePlan::cloned(GeneratorTask::new(Generator {
            count: self.count,
            rate: self.rate,
            users: self.users,
        }));
        Ok(match self.count {
            Some(n) => plan.with_total(n),
            None => plan,
        })
    }

    async fn check(&self, _ctx: &SectionContext) -> Health {
        Health::new("generator", "built in", Ok("nothing to reach".into()))
    }
}

/// Record `n` of the generator.
pub(crate) fn record(n: u64, users: u64) -> Value {
    const STATUS: [&str; 3] = ["new", "paid", "shipped"];
    json!({
        "id": n,
        "user": format!("user-{}", n % users.max(1)),
        "amount": ((n.wrapping_mul(7919)) % 100_000) as f64 / 100.0,
        "status": STATUS[(n % 3) as usize],
        "ts": 1_700_000_000_000u64 + n * 1000,
    })
}

/// The generator's settings.
#[derive(Debug, Clone)]
pub(crate) struct Generator {
    pub count: Option<u64>,
    pub rate: Option<u64>,
    pub users: u64,
}

/// The generator as one subtask: it emits the numbers `n` its [`Share`] owns, below `count`.
#[derive(Debug, Clone)]
pub(crate) struct GeneratorTask {
    pub gen: Generator,
    share: Share,
}

impl GeneratorTask {
    /// A subtask of `gen`; which numbers it emits is known at `open`.
    pub(crate) fn new(gen: Generator) -> Self {
        GeneratorTask {
            gen,
            share: Share::whole(),
        }
    }
}

#[async_trait]
impl RichFunction for GeneratorTask {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        ctx.refuse_worker_mode("the generator")?;
        self.share = ctx.share();
        Ok(())
    }
}

#[async_trait]
impl SourceFunction for GeneratorTask {
    type Out = Value;
    type State = u64;

    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::ExactlyOnce
    }

    async fn run(&mut self, ctx: &mut SourceContext<Value, u64>) -> Result<()> {
        let chunk = self.gen.rate.map_or(1024, |r| (r / 50).max(1));
        let started = tokio::time::Instant::now();
        let first = *ctx.state();
        loop {
            for _ in 0..chunk {
                let k = *ctx.state();
                let n = self.share.nth(k as usize) as u64;
                if self.gen.count.is_some_and(|c| n >= c) {
                    return Ok(());
                }
                *ctx.state_mut() = k + 1;
                ctx.collect(record(n, self.gen.users)).await?;
            }
            if ctx.is_stopping() {
                return Ok(());
            }
            if let Some(rate) = self.gen.rate {
                let done = *ctx.state() - first;
                let due = started + Duration::from_secs_f64(done as f64 / rate.max(1) as f64);
                if ctx.wait_for(tokio::time::sleep_until(due)).await?.is_none() {
                    return Ok(());
                }
            }
        }
    }
}
