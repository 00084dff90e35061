//! What building a section gives: a [`SourcePlan`] that starts a pipeline, a [`SinkPlan`]
//! that makes one sink per subtask. Both hide the connector's concrete type, so that a
//! registry of sections can hold any connector. A plan placed at a section's path
//! ([`SourcePlan::under`], [`SinkPlan::under`]) names that path in every error its functions
//! raise.

use serde_json::Value;

use crate::dyn_sink::DynSink;
use rivus_sdk::function::{SinkFunction, SourceFunction};
use rivus_sdk::runtime::{Pipeline, Stream};

use super::under::Under;

type Attach = Box<dyn FnOnce(Pipeline, &str, usize, String) -> Stream<Value> + Send>;
/// Makes subtask `i`'s sink, its errors placed under the path given.
type Make = Box<dyn Fn(usize, &str) -> DynSink + Send>;

/// A built source section: attaches the source to a pipeline, one instance per subtask.
pub struct SourcePlan {
    attach: Attach,
    total: Option<u64>,
    path: String,
}

impl SourcePlan {
    /// Every subtask runs a clone of `source` (a source that divides its splits itself, by
    /// [`RuntimeContext::share`](rivus_sdk::RuntimeContext::share)).
    pub fn cloned<S>(source: S) -> Self
    where
        S: SourceFunction<Out = Value> + Clone + 'static,
    {
        Self::per_subtask(move |_| source.clone())
    }

    /// Subtask `i` runs `make(i)`.
    pub fn per_subtask<S, F>(make: F) -> Self
    where
        S: SourceFunction<Out = Value> + 'static,
        F: Fn(usize) -> S + Send + 'static,
    {
        SourcePlan {
            attach: Box::new(
                move |pipeline: Pipeline, name: &str, parallelism, path: String| {
                    pipeline.source(name, parallelism, move |i| {
                        Under::new(make(i), path.clone())
                    })
                },
            ),
            total: None,
            path: String::new(),
        }
    }

    rivus_sdk::setters! {
        /// The plan of a section at `path` in the file: the errors its sources raise name fields
        /// below it.
        under(path: impl Into<String>) => path = path.into();

        /// The source emits `total` records in all (the status line shows progress and an ETA).
        with_total(total: u64) => total = Some(total);
    }

    /// How many records the source will emit, when known.
    pub fn total(&self) -> Option<u64> {
        self.total
    }

    /// Starts `pipeline` at this source, named `name`, with `parallelism` subtasks.
    pub fn attach(self, pipeline: Pipeline, name: &str, parallelism: usize) -> Stream<Value> {
        (self.attach)(pipeline, name, parallelism, self.path)
    }
}

impl std::fmt::Debug for SourcePlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourcePlan")
            .field("total", &self.total)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// A built sink section: makes subtask `i`'s sink.
pub struct SinkPlan {
    make: Make,
    path: String,
}

impl SinkPlan {
    /// Every subtask writes through a clone of `sink`.
    pub fn cloned<S>(sink: S) -> Self
    where
        S: SinkFunction<Value> + Clone + 'static,
    {
        Self::per_subtask(move |_| sink.clone())
    }

    /// Every subtask writes through a sink of its own from `make`, which runs once here first:
    /// a bad option is refused when the plan is built, not when a subtask starts.
    pub fn checked<S, F>(make: F) -> rivus_sdk::Result<Self>
    where
        S: SinkFunction<Value> + 'static,
        F: Fn() -> rivus_sdk::Result<S> + Send + 'static,
    {
        make()?;
        Ok(Self::per_subtask(move |_| {
            make().expect("checked when the plan was built")
        }))
    }

    /// Subtask `i` writes through `make(i)`.
    pub fn per_subtask<S, F>(make: F) -> Self
    where
        S: SinkFunction<Value> + 'static,
        F: Fn(usize) -> S + Send + 'static,
    {
        SinkPlan {
            make: Box::new(move |i, path| DynSink::new(Under::new(make(i), path))),
            path: String::new(),
        }
    }

    rivus_sdk::setters! {
        /// The plan of a section at `path` in the file: the errors its sinks raise name fields
        /// below it.
        under(path: impl Into<String>) => path = path.into();
    }

    /// Subtask `i`'s sink.
    pub fn make(&self, subtask: usize) -> DynSink {
        (self.make)(subtask, &self.path)
    }
}

impl std::fmt::Debug for SinkPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SinkPlan")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}
