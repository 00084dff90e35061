//! The `dead-letters` source: reads a dead-letter file back and emits each letter's payload
//! (parsed as JSON) into the pipeline — the way to replay rejected records once the cause is
//! fixed. Its position (the next line) is checkpointed, so a replay that stops resumes where it
//! was, without repeats. A payload that still is not JSON goes to the error policy again, as a
//! letter with the original position.

use serde::Deserialize;
use serde_json::Value;

use rivus_pipeline_file::{CatalogEntry, Health, SectionContext, SourcePlan, SourceSection};
use rivus_sdk::error_policy::{DeadLetter, ErrorHandler, ErrorPolicy};
use rivus_sdk::prelude::*;

/// `[source] type = "dead-letters"`.
#[derive(Debug, Clone, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeadLettersSection {
    /// The dead-letter file (JSON lines).
    pub path: String,
    /// Only the letters of this connector (`kafka`, `rabbitmq`, `redis-streams`, ...).
    pub connector: Option<String>,
}

#[async_trait]
impl SourceSection for DeadLettersSection {
    const TYPE: &'static str = "dead-letters";
    const CATALOG: CatalogEntry = CatalogEntry {
        summary: "the records of a dead-letter file, payloads parsed as JSON (a replay)",
        guarantee: "exactly-once (the next line is checkpointed)",
    };

    fn build(&self, ctx: &SectionContext) -> Result<SourcePlan> {
        Ok(SourcePlan::cloned(DeadLetterReplay::new(
            self.path.clone(),
            self.connector.clone(),
            ctx.policy.clone(),
        )))
    }

    async fn check(&self, _ctx: &SectionContext) -> Health {
        let outcome = match std::fs::metadata(&self.path) {
            Ok(m) => Ok(format!("{} bytes", m.len())),
            Err(e) => Err(format!("cannot read: {e}")),
        };
        Health::new("dead-letters", self.path.clone(), outcome)
    }
}

/// Each subtask replays the lines its [`Share`] owns (line `n` is split `n`).
#[derive(Debug, Clone)]
pub(crate) struct DeadLetterReplay {
    pub path: String,
    /// Only letters of this connector (`kafka`, `redis-streams`, ...), when set.
    pub connector: Option<String>,
    pub policy: ErrorPolicy,
    share: Share,
}

impl DeadLetterReplay {
    /// Replays the letters in `path` (only those of `connector`, when set) under `policy`.
    pub(crate) fn new(path: String, connector: Option<String>, policy: ErrorPolicy) -> Self {
        DeadLetterReplay {
            path,
            connector,
            policy,
            share: Share::whole(),
        }
    }
}

#[async_trait]
impl RichFunction for DeadLetterReplay {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        ctx.refuse_worker_mode("the dead-letter replay (one file)")?;
        self.share = ctx.share();
        Ok(())
    }
}

#[async_trait]
impl SourceFunction for DeadLetterReplay {
    type Out = Value;
    /// The next line to read (0-based).
    type State = u64;

    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::ExactlyOnce
    }

    async fn run(&mut self, ctx: &mut SourceContext<Value, u64>) -> Result<()> {
        let text = tokio::fs::read_to_string(&self.path)
            .await
            .map_err(|e| Error::io(format!("source.path: reading {}", self.path), e))?;
        let handler = ErrorHandler::new(
            self.policy.clone(),
            format!("dead-letters[{}]", self.share.subtask()),
        )
        .connector("dead-letters");
        let lines: Vec<&str> = text.lines().collect();
        let mut next = *ctx.state() as usize;
        while next < lines.len() && !ctx.is_stopping() {
            let n = next;
            next += 1;
            *ctx.state_mut() = next as u64;
            if !self.share.owns(n) || lines[n].trim().is_empty() {
                continue;
            }
            let letter = DeadLetter::from_json(lines[n].as_bytes()).map_err(|e| Error::Record {
                position: format!("{}:{}", self.path, n + 1),
                reason: format!("not a dead letter: {e}"),
            })?;
            if self
                .connector
                .as_deref()
                .is_some_and(|c| c != letter.connector)
            {
                continue;
            }
            match serde_json::from_slice::<Value>(&letter.payload) {
                Ok(v) => ctx.collect(v).await?,
                Err(e) => {
                    let reason = format!("still not JSON: {e} (first: {})", letter.reason);
                    handler
                        .handle_fields(&letter.position, reason, &letter.payload, letter.fields)
                        .await?
                }
            }
        }
        Ok(())
    }
}
