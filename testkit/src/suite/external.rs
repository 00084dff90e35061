//! What a connector author implements once per direction so that the suites can drive the
//! connector and its external system: [`SourceExternal`] and [`SinkExternal`].

use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::prelude::*;

/// How a suite drives one source connector and its external system.
#[async_trait]
pub trait SourceExternal: Send + Sync {
    /// The connector under test.
    type Source: SourceFunction + 'static;

    /// Creates a fresh, empty external resource (a topic, a queue, a key) with `splits` splits.
    async fn prepare(&mut self, splits: usize) -> Result<()>;

    /// Appends `records` to `split`, in order. Each record is a test string; write it as the
    /// payload the source decodes back into the same string.
    async fn write(&mut self, split: usize, records: &[String]) -> Result<()>;

    /// Appends a record the source cannot decode to `split`, or returns `false` when the
    /// connector has no notion of a bad record (the bad-record case is then skipped, and the
    /// report says so).
    async fn write_bad(&mut self, _split: usize) -> Result<bool> {
        Ok(false)
    }

    /// Creates subtask `subtask` of `parallelism` reading the prepared resource without end
    /// (until stopped), sending bad records to `policy`.
    fn create_source(
        &self,
        subtask: usize,
        parallelism: usize,
        policy: ErrorPolicy,
    ) -> Self::Source;

    /// The test string a record of the source carries.
    fn to_test_record(&self, record: &<Self::Source as SourceFunction>::Out) -> String;

    /// True when the source commits its positions to the external system when a checkpoint
    /// completes (consumer-group offsets, acknowledgements), so that a start *without* a
    /// checkpoint resumes after what was committed. Such a source is held to it by
    /// `source::restart_without_checkpoint`; for the others that case is skipped.
    fn commits_positions(&self) -> bool {
        false
    }

    /// True when the source restores into a different number of subtasks
    /// (`SourceFunction::restore_state` redistributes positions); otherwise the rescale case
    /// is skipped.
    fn rescales(&self) -> bool {
        true
    }

    /// True when each split's records arrive in the order they were written. A source that
    /// keeps order only per key — a change-data source whose snapshot of a table several
    /// subtasks read — returns false, and the verdicts leave order out (duplicates and losses
    /// still count).
    fn preserves_order(&self) -> bool {
        true
    }
}

/// How a suite drives one sink connector and reads back what reached the external system.
#[async_trait]
pub trait SinkExternal: Send + Sync {
    /// The record type the sink consumes.
    type Record: Clone + Send + Sync + 'static;
    /// The connector under test.
    type Sink: SinkFunction<Self::Record> + 'static;

    /// Creates a fresh, empty destination (a topic, an index, a table).
    async fn prepare(&mut self) -> Result<()>;

    /// Creates subtask `subtask` of `parallelism` writing to the prepared destination, sending
    /// records it cannot write to `policy`.
    fn create_sink(&self, subtask: usize, parallelism: usize, policy: ErrorPolicy) -> Self::Sink;

    /// The sink's record carrying the test string `test`.
    fn to_record(&self, test: &str) -> Self::Record;

    /// A record the external system will reject, if the connector has such a notion (the
    /// bad-record case is skipped otherwise, and the report says so).
    fn bad_record(&self) -> Option<Self::Record> {
        None
    }

    /// Every test string visible in the destination (for exactly-once sinks: committed only).
    async fn read_back(&self) -> Result<Vec<String>>;

    /// True when `read_back` returns each split's records in the order they were written.
    fn preserves_order(&self) -> bool {
        true
    }
}
