//! What a function sees of the runtime: its identity in the job, its metrics group, and for
//! sinks the timestamp and watermark of the record being written.

use std::sync::Arc;
use std::time::Duration;

/// Watches the id of the newest completed checkpoint of a job.
#[derive(Debug, Clone)]
pub struct CompletedCheckpoints {
    rx: tokio::sync::watch::Receiver<Option<u64>>,
}

impl CompletedCheckpoints {
    /// A watch fed by `tx` (the job's coordinator holds the sender).
    pub(crate) fn new(rx: tokio::sync::watch::Receiver<Option<u64>>) -> Self {
        CompletedCheckpoints { rx }
    }

    /// A watch that never reports a checkpoint (functions run outside a job).
    pub fn none() -> Self {
        CompletedCheckpoints {
            rx: tokio::sync::watch::channel(None).1,
        }
    }

    /// The newest completed checkpoint so far.
    pub fn latest(&self) -> Option<u64> {
        *self.rx.borrow()
    }

    /// Waits until a checkpoint newer than the last one seen completes and returns its id;
    /// `None` once the job has ended.
    pub async fn changed(&mut self) -> Option<u64> {
        self.rx.changed().await.ok()?;
        *self.rx.borrow_and_update()
    }
}

/// The identity of one parallel instance, given to [`open`](crate::RichFunction::open).
#[derive(Debug, Clone)]
pub struct RuntimeContext {
    job_name: Arc<str>,
    worker: Option<Arc<str>>,
    task_name: Arc<str>,
    subtask_index: usize,
    parallelism: usize,
    restored_from: Option<u64>,
    metrics: MetricsGroup,
    completed: CompletedCheckpoints,
    checkpoint_interval: Option<Duration>,
    local_dir: Option<Arc<std::path::Path>>,
    task_shared: crate::TaskShared,
    subtasks_shared: crate::TaskShared,
    positions_offered: bool,
}

impl RuntimeContext {
    /// A context for subtask `subtask_index` of `parallelism` of `task_name` in `job_name`.
    pub fn new(
        job_name: impl Into<Arc<str>>,
        task_name: impl Into<Arc<str>>,
        subtask_index: usize,
        parallelism: usize,
        restored_from: Option<u64>,
    ) -> Self {
        let job_name = job_name.into();
        let task_name = task_name.into();
        let metrics = MetricsGroup::new(vec![
            ("job".to_owned(), job_name.to_string()),
            ("task".to_owned(), task_name.to_string()),
            ("subtask".to_owned(), subtask_index.to_string()),
        ]);
        RuntimeContext {
            job_name,
            worker: None,
            task_name,
            subtask_index,
            parallelism,
            restored_from,
            metrics,
            completed: CompletedCheckpoints::none(),
            checkpoint_interval: None,
            local_dir: None,
            task_shared: crate::TaskShared::default(),
            subtasks_shared: crate::TaskShared::default(),
            positions_offered: false,
        }
    }

    setters! {
        /// The same context in worker `id` of the job (`None`: the job runs as one process).
        with_worker(id: Option<&str>) => worker = id.map(Into::into);
    }

    /// What the functions of this task share (a source and the sink chained into it): see
    /// [`TaskShared`](crate::TaskShared).
    pub fn task_shared(&self) -> &crate::TaskShared {
        &self.task_shared
    }

    /// What the parallel subtasks of this operator share in this attempt of the job (one
    /// process; a restart begins with nothing shared): how subtasks that must act together
    /// meet, e.g. a CDC source's subtasks importing the snapshot that subtask 0 exported.
    pub fn subtasks_shared(&self) -> &crate::TaskShared {
        &self.subtasks_shared
    }

    setters! {
        /// The same context with the parallel subtasks' shared values `shared` (set by the
        /// runtime: one map per operator and attempt).
        with_subtasks_shared(shared: crate::TaskShared) => subtasks_shared;
    }

    /// Joins the functions of the task that `shared` belongs to (set by the runtime when it
    /// chains a sink into a source's task).
    pub(crate) fn set_task_shared(&mut self, shared: crate::TaskShared) {
        self.task_shared = shared;
    }

    /// For a sink: the source chained into its task offers its positions for the sink's
    /// transactions ([`SourceFunction::offers_positions_to_sink`]), and this sink said it
    /// commits them ([`SinkFunction::commits_source_positions`]): it must, at every barrier.
    ///
    /// [`SourceFunction::offers_positions_to_sink`]: crate::SourceFunction::offers_positions_to_sink
    /// [`SinkFunction::commits_source_positions`]: crate::SinkFunction::commits_source_positions
    pub fn source_positions_offered(&self) -> bool {
        self.positions_offered
    }

    /// Marks a sink's context as committing the chained source's positions.
    pub(crate) fn with_source_positions_offered(mut self, offered: bool) -> Self {
        self.positions_offered = offered;
        self
    }

    /// This process's worker id when the job runs on several processes
    /// ([`Pipeline::worker`](crate::Pipeline::worker)). A source whose splits no broker hands
    /// out (a fixed list of ranges, slices, files) refuses to open in worker mode; a source on
    /// a broker's group protocol names its group member after the worker.
    pub fn worker(&self) -> Option<&str> {
        self.worker.as_deref()
    }

    /// `Err` in worker mode, a configuration error of the source as a whole (its section's
    /// path once placed): for a source whose splits no broker hands out, so that two workers
    /// would read the same records. `what` names the source.
    pub fn refuse_worker_mode(&self, what: &str) -> crate::Result<()> {
        match self.worker() {
            None => Ok(()),
            Some(w) => Err(crate::Error::config(
                "",
                format!(
                    "worker `{w}`: {what} has no group protocol to share its work with other \
                     workers; run it as one process (without a worker id)"
                ),
            )),
        }
    }

    setters! {
        /// The same context in a job that takes a checkpoint every `interval` (`None`: no
        /// checkpoints). The runtime sets it; tests that open a function by hand use it too.
        with_checkpoint_interval(interval: Option<Duration>) => checkpoint_interval;

        /// The same context with `dir` as the place for files that checkpointed state refers to
        /// (see [`local_dir`](Self::local_dir)).
        with_local_dir(dir: Option<std::path::PathBuf>) => local_dir = dir.map(Into::into);
    }

    /// A directory on this machine for files that this function's checkpointed state refers
    /// to and that must outlive a crash (a transactional sink's write-ahead log), given by the
    /// job's state backend ([`StateBackend::local_dir`](crate::checkpoint::StateBackend::local_dir));
    /// `None` without checkpoints or when the backend has none. Files go into a subdirectory
    /// named after the function (it may not exist yet).
    pub fn local_dir(&self) -> Option<&std::path::Path> {
        self.local_dir.as_deref()
    }

    /// True when the job takes checkpoints. A source that acknowledges or commits to its
    /// broker only when a checkpoint completes never would without them: it must fall back
    /// (e.g. to the broker's automatic acknowledgement) or refuse to start with a clear error.
    pub fn is_checkpointing_enabled(&self) -> bool {
        self.checkpoint_interval.is_some()
    }

    /// The time between checkpoints, when the job takes them.
    pub fn checkpoint_interval(&self) -> Option<Duration> {
        self.checkpoint_interval
    }

    pub(crate) fn set_completed_checkpoints(&mut self, c: CompletedCheckpoints) {
        self.completed = c;
    }

    /// The newest completed checkpoint, observable from any task the function spawns.
    ///
    /// [`CheckpointListener::notify_checkpoint_complete`](crate::CheckpointListener) is
    /// delivered through the function's own task, between records; a function whose writes can
    /// wait on its own pending commit (a database row lock held by a prepared transaction) uses
    /// this to commit from a separate task instead.
    pub fn completed_checkpoints(&self) -> CompletedCheckpoints {
        self.completed.clone()
    }

    /// The job's name.
    pub fn job_name(&self) -> &str {
        &self.job_name
    }

    /// The name of the operator this function runs as (unique in the job; keys its state).
    pub fn task_name(&self) -> &str {
        &self.task_name
    }

    /// This instance's index, `0..parallelism`.
    pub fn subtask_index(&self) -> usize {
        self.subtask_index
    }

    /// How many parallel instances of this operator run.
    pub fn parallelism(&self) -> usize {
        self.parallelism
    }

    /// This subtask's share of a list of splits (split `k` → subtask `k % parallelism`).
    pub fn share(&self) -> crate::Share {
        crate::Share::new(self.subtask_index(), self.parallelism())
    }

    /// The checkpoint this run restored from, if any.
    pub fn restored_from(&self) -> Option<u64> {
        self.restored_from
    }

    pub(crate) fn set_restored_from(&mut self, id: Option<u64>) {
        self.restored_from = id;
    }

    /// `task[subtask]`, for logs and error messages.
    pub fn display_name(&self) -> String {
        format!("{}[{}]", self.task_name, self.subtask_index)
    }

    /// Metrics labelled with job, task and subtask.
    pub fn metrics(&self) -> &MetricsGroup {
        &self.metrics
    }
}

/// Labels shared by every metric of one subtask; hands out `metrics` facade handles.
///
/// Take handles once (in `open`) and keep them: incrementing a handle is cheap, looking one up
/// is not.
#[derive(Debug, Clone)]
pub struct MetricsGroup {
    labels: Vec<(String, String)>,
}

impl MetricsGroup {
    /// A group with the given labels.
    pub fn new(labels: Vec<(String, String)>) -> Self {
        MetricsGroup { labels }
    }

    /// The same group with one more label.
    pub fn with_label(&self, key: &str, value: impl Into<String>) -> Self {
        let mut labels = self.labels.clone();
        labels.push((key.to_owned(), value.into()));
        MetricsGroup { labels }
    }

    fn label_vec(&self) -> Vec<metrics::Label> {
        self.labels
            .iter()
            .map(|(k, v)| metrics::Label::new(k.clone(), v.clone()))
            .collect()
    }

    /// A counter named `name` with this group's labels.
    pub fn counter(&self, name: &'static str) -> metrics::Counter {
        metrics::counter!(name, self.label_vec())
    }

    /// A gauge named `name` with this group's labels.
    pub fn gauge(&self, name: &'static str) -> metrics::Gauge {
        metrics::gauge!(name, self.label_vec())
    }

    /// A histogram named `name` with this group's labels.
    pub fn histogram(&self, name: &'static str) -> metrics::Histogram {
        metrics::histogram!(name, self.label_vec())
    }
}

/// What a sink sees of the records it writes.
#[derive(Debug, Clone, Default)]
pub struct SinkContext {
    timestamps: Option<Vec<i64>>,
    index: usize,
    watermark: Option<i64>,
}

/// Marks "no timestamp" inside a batch's timestamp column.
pub(crate) const NO_TIMESTAMP: i64 = i64::MIN;

impl SinkContext {
    pub(crate) fn for_batch(timestamps: Option<Vec<i64>>, watermark: Option<i64>) -> Self {
        SinkContext {
            timestamps,
            index: 0,
            watermark,
        }
    }

    /// Points the context at record `index` of the current batch.
    pub fn set_index(&mut self, index: usize) {
        self.index = index;
    }

    /// The event timestamp (ms) of the current record, if the source gave one.
    pub fn timestamp(&self) -> Option<i64> {
        self.timestamp_at(self.index)
    }

    /// The event timestamp of record `index` of the current batch.
    pub fn timestamp_at(&self, index: usize) -> Option<i64> {
        self.timestamps
            .as_ref()
            .and_then(|t| t.get(index).copied())
            .filter(|&t| t != NO_TIMESTAMP)
    }

    /// The current watermark, if any source emitted one.
    pub fn current_watermark(&self) -> Option<i64> {
        self.watermark
    }
}
