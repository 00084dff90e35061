//! The error type of rivus-sdk: every failure a function or the runtime can report, with the
//! context (task, subtask, checkpoint, record position) needed to act on it.

use std::fmt;

/// Result alias used throughout rivus.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A boxed error from a connector or user code.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Errors raised by functions, schemas and the runtime.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A record could not be decoded or encoded; names the record's position.
    #[error(transparent)]
    Schema(#[from] crate::schema::SchemaError),

    /// Configuration was refused before the job started; `path` names the bad field.
    #[error("invalid configuration{}: {message}", at(path))]
    Config {
        /// Dotted path of the offending field, e.g. `bulk.max_actions`: relative to the
        /// builder or section that raised it, prefixed once by whoever placed that section
        /// ([`Error::under`]) — `sink.bulk.max_actions` in a pipeline file.
        path: String,
        /// What was wrong and what was expected.
        message: String,
    },

    /// A connector's external system failed (network, broker, server-side error).
    #[error("{context}: {source}")]
    Connector {
        /// What was being done, e.g. `kafka producer: send to topic 'orders'`.
        context: String,
        /// The underlying error.
        #[source]
        source: BoxError,
    },

    /// The external system refused the job's credentials, certificate or permissions
    /// (authentication failed, authorization denied): a restart cannot fix it.
    #[error("{}: {message}", place(context, path))]
    Refused {
        /// What was being done, e.g. `kafka: cannot use 127.0.0.1:9093`.
        context: String,
        /// The setting the refusal is about, when one is (`publication`), relative like
        /// [`Error::Config`]'s path.
        path: Option<String>,
        /// What the system refused (never a secret).
        message: String,
    },

    /// The external system rejected a request it will reject every time (a missing table,
    /// type or queue, a statement it cannot parse, a request it does not support): a restart
    /// would meet the same answer, so the job ends with it.
    #[error("{}: {message}", place(context, path))]
    Rejected {
        /// What was being done, e.g. `jdbc sink: writing to "orders"`.
        context: String,
        /// The setting the rejection is about, when one is (`tables[0]`), relative like
        /// [`Error::Config`]'s path.
        path: Option<String>,
        /// What the system answered (never a secret).
        message: String,
    },

    /// A checkpoint could not be written, read or restored.
    #[error("checkpoint {checkpoint_id}: {message}")]
    Checkpoint {
        /// The checkpoint concerned (0 when not yet assigned).
        checkpoint_id: u64,
        /// What went wrong.
        message: String,
    },

    /// State could not be serialized or deserialized.
    #[error("state of `{operator}`: {source}")]
    State {
        /// The operator whose state failed.
        operator: String,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },

    /// A task failed; wraps the first error with the task's identity.
    #[error("task `{task}` (subtask {subtask}) failed: {source}")]
    Task {
        /// Stage name.
        task: String,
        /// Subtask index.
        subtask: usize,
        /// The original error.
        #[source]
        source: Box<Error>,
    },

    /// The job's checkpoint store is held by another process of the same job (or this
    /// process lost its hold): two owners would write the same output twice.
    #[error("checkpoint store `{store}`: {message}")]
    Owner {
        /// The store, as [`StateBackend::describe`](crate::checkpoint::StateBackend::describe)
        /// names it.
        store: String,
        /// Who holds it, and what to do.
        message: String,
    },

    /// Something is not open: a shared primitive (Handover, BulkProcessor) closed while in
    /// use, a function called before `open` or after `close`, or a connection the
    /// connector dropped and has not made again. Retryable: a restart opens it anew.
    #[error("{0} is closed")]
    Closed(&'static str),

    /// The job was cancelled because another task failed or a hard stop was requested.
    #[error("cancelled")]
    Cancelled,

    /// A record was rejected by the error policy `fail`.
    #[error("record rejected at {position}: {reason}")]
    Record {
        /// Where the record came from.
        position: String,
        /// Why it was rejected.
        reason: String,
    },

    /// The job handed no record to its sinks and completed no checkpoint for `since` (the
    /// stall timeout): the attempt is failed so that a restart gets it going again.
    #[error("stalled: no progress for {:.0}s{}", since.as_secs_f64(), waiting.as_ref().map(|w| format!(" ({w})")).unwrap_or_default())]
    Stalled {
        /// How long the job made no progress.
        since: std::time::Duration,
        /// The task in the same call the longest, as `` `sink` (subtask 0) in invoke for 35s ``.
        waiting: Option<String>,
    },

    /// A task panicked: a bug in the code at `location`, not a failure of an external system.
    /// Not retried — a restart would meet the same bug.
    #[error("panicked{}: {message}", location.as_ref().map(|l| format!(" at {l}")).unwrap_or_default())]
    Panic {
        /// The panic's message.
        message: String,
        /// `file:line:column` of the `panic!` (or the failed `unwrap`, index, ...), when known.
        location: Option<String>,
    },

    /// I/O failure with context.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// ` at `path`` for a path, nothing for the empty one (a builder's settings as a whole).
fn at(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!(" at `{path}`")
    }
}

/// `context`, and the path of the setting concerned when there is one.
fn place(context: &str, path: &Option<String>) -> String {
    match path {
        Some(p) => format!("{context} (at `{p}`)"),
        None => context.to_owned(),
    }
}

impl Error {
    /// Builds a [`Error::Config`] error.
    pub fn config(path: impl Into<String>, message: impl fmt::Display) -> Self {
        Error::Config {
            path: path.into(),
            message: message.to_string(),
        }
    }

    /// The same error placed under `prefix`: a path it names (of [`Error::Config`],
    /// [`Error::Refused`], [`Error::Rejected`], also inside [`Error::Task`]) becomes
    /// `prefix.path` (`tls.ca_file` under `sink` is `sink.tls.ca_file`; an index such as
    /// `[0].topic` joins without the dot). Builders and sections raise paths relative to
    /// themselves; whoever places them calls this once. Other errors are unchanged.
    pub fn under(mut self, prefix: &str) -> Self {
        if prefix.is_empty() {
            return self;
        }
        let join = |path: String| {
            if path.is_empty() {
                prefix.to_owned()
            } else if path.starts_with('[') {
                format!("{prefix}{path}")
            } else {
                format!("{prefix}.{path}")
            }
        };
        match self {
            Error::Config { path, message } => Error::Config {
                path: join(path),
                message,
            },
            Error::Refused {
                path: Some(ref mut path),
                ..
            }
            | Error::Rejected {
                path: Some(ref mut path),
                ..
            } => {
                *path = join(std::mem::take(path));
                self
            }
            Error::Task {
                task,
                subtask,
                source,
            } => Error::Task {
                task,
                subtask,
                source: Box::new(source.under(prefix)),
            },
            other => other,
        }
    }

    /// Wraps an error from an external system with what was being done.
    pub fn connector(context: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Error::Connector {
            context: context.into(),
            source: source.into(),
        }
    }

    /// Builds an [`Error::Refused`] error: authentication or authorization refused.
    pub fn refused(context: impl Into<String>, message: impl fmt::Display) -> Self {
        Error::Refused {
            context: context.into(),
            path: None,
            message: message.to_string(),
        }
    }

    /// An [`Error::Refused`] about the setting at `path` (relative, see [`Error::under`]): the
    /// system will not do what that setting asks (a publication missing, a slot in use).
    pub fn refused_at(
        context: impl Into<String>,
        path: impl Into<String>,
        message: impl fmt::Display,
    ) -> Self {
        Error::Refused {
            context: context.into(),
            path: Some(path.into()),
            message: message.to_string(),
        }
    }

    /// A client library's error, with what was being done, as its [`Fault`] says:
    /// [`Error::Connector`] (transient: restarted), [`Error::Refused`] or [`Error::Rejected`]
    /// (both end the job). The one way connectors wrap their client's errors: each decides the
    /// fault from its client's codes, in its own `error` module, and passes a `message`
    /// already free of secrets.
    pub fn client(context: impl Into<String>, message: impl fmt::Display, fault: Fault) -> Self {
        match fault {
            Fault::Transient => Error::connector(context, message.to_string()),
            Fault::Refused => Error::refused(context, message),
            Fault::Permanent => Error::Rejected {
                context: context.into(),
                path: None,
                message: message.to_string(),
            },
        }
    }

    /// Builds an [`Error::Owner`] error.
    pub fn owner(store: impl Into<String>, message: impl fmt::Display) -> Self {
        Error::Owner {
            store: store.into(),
            message: message.to_string(),
        }
    }

    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// Builds a [`Error::Checkpoint`] error.
    pub fn checkpoint(checkpoint_id: u64, message: impl fmt::Display) -> Self {
        Error::Checkpoint {
            checkpoint_id,
            message: message.to_string(),
        }
    }

    /// True when restarting the job from its last checkpoint may get past this failure (a lost
    /// connection, a server error, a failed checkpoint write). False for what a restart cannot
    /// fix: bad configuration, refused credentials or permissions, a request the system
    /// rejects every time ([`Error::Rejected`]), a checkpoint store held by
    /// another owner, a record rejected under the `fail` policy, undecodable state, and
    /// cancellation (not a failure).
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Connector { .. } | Error::Checkpoint { .. } | Error::Closed(_) => true,
            Error::Stalled { .. } => true,
            Error::Io { .. } => true,
            Error::Task { source, .. } => source.is_retryable(),
            Error::Schema(_)
            | Error::Config { .. }
            | Error::Refused { .. }
            | Error::Rejected { .. }
            | Error::Owner { .. }
            | Error::State { .. }
            | Error::Cancelled
            | Error::Panic { .. }
            | Error::Record { .. } => false,
        }
    }

    /// True when the operator must change something before the job can run: bad
    /// configuration, refused credentials or permissions, a checkpoint store held by another
    /// owner (the CLI exits with code 2 for these).
    pub fn is_setup(&self) -> bool {
        match self {
            Error::Task { source, .. } => source.is_setup(),
            Error::Config { .. } | Error::Refused { .. } | Error::Owner { .. } => true,
            _ => false,
        }
    }

    /// True when this error only reports cancellation (not a root cause).
    pub fn is_cancelled(&self) -> bool {
        match self {
            Error::Cancelled => true,
            Error::Task { source, .. } => source.is_cancelled(),
            _ => false,
        }
    }
}

/// What a failure of an external system says about trying again. Each connector decides it
/// from its client's codes; [`Error::client`] turns it into the error the supervisor acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The next attempt may succeed: a lost connection, a server restarting or overloaded, a
    /// lock or serialization conflict, a timeout. The job restarts from its last checkpoint.
    Transient,
    /// The system refused the credentials, certificate or a permission.
    Refused,
    /// The system rejected the request itself and will reject it again: an unknown table,
    /// type or queue, a statement it cannot parse, a feature it lacks.
    Permanent,
}

impl Fault {
    /// The fault of an SQLSTATE code (ISO SQL's five characters, as PostgreSQL reports them).
    /// Transient: connection exceptions (class 08), serialization failures and deadlocks
    /// (40001, 40P01, and 40003: completion unknown), insufficient resources (53), operator
    /// intervention (57: shutdown, cancel, cannot connect now), a lock not available or an
    /// object in use (55P03, 55006: a replication slot still held by a dying session), system
    /// and internal errors (58, XX000). Refused: invalid authorization (28) and insufficient
    /// privilege (42501). Everything else — syntax and undefined objects (42), data
    /// exceptions (22), integrity violations (23), unsupported features (0A), a missing
    /// database or schema (3D, 3F) — is permanent: the same statement gets the same answer.
    pub fn of_sqlstate(code: &str) -> Fault {
        let class = code.get(..2).unwrap_or(code);
        match (class, code) {
            (_, "42501") | ("28", _) => Fault::Refused,
            ("08" | "53" | "57" | "58", _)
            | (_, "40001" | "40P01" | "40003" | "55P03" | "55006" | "XX000") => Fault::Transient,
            _ => Fault::Permanent,
        }
    }

    /// The fault of an HTTP error status: 401 and 403 refused; 408 (timeout), 409
    /// (conflict), 425 and 429 (too early, too many requests) transient; any other 4xx
    /// permanent (the same request gets the same answer); 5xx transient.
    pub fn of_http_status(status: u16) -> Fault {
        match status {
            401 | 403 => Fault::Refused,
            408 | 409 | 425 | 429 => Fault::Transient,
            400..=499 => Fault::Permanent,
            _ => Fault::Transient,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_errors_follow_their_fault() {
        let e = Error::client("db", "connection reset", Fault::Transient);
        assert!(e.is_retryable() && !e.is_setup(), "{e}");
        let e = Error::client("db", "password authentication failed", Fault::Refused);
        assert!(!e.is_retryable() && e.is_setup(), "{e}");
        let e = Error::client("db", "type \"_text[]\" does not exist", Fault::Permanent);
        assert!(matches!(e, Error::Rejected { .. }), "{e}");
        assert!(!e.is_retryable(), "{e}");
        let wrapped = Error::Task {
            task: "sink".into(),
            subtask: 0,
            source: Box::new(e),
        };
        assert!(!wrapped.is_retryable());
    }

    #[test]
    fn sqlstates_that_a_restart_cannot_fix_are_permanent() {
        for code in [
            "42704", "42P01", "42601", "22P02", "23505", "0A000", "3D000", "3F000",
        ] {
            assert_eq!(Fault::of_sqlstate(code), Fault::Permanent, "{code}");
        }
        for code in [
            "08006", "08P01", "40001", "40P01", "53300", "57P01", "57014", "55006",
        ] {
            assert_eq!(Fault::of_sqlstate(code), Fault::Transient, "{code}");
        }
        for code in ["28P01", "28000", "42501"] {
            assert_eq!(Fault::of_sqlstate(code), Fault::Refused, "{code}");
        }
    }

    #[test]
    fn under_prefixes_the_paths_errors_name() {
        let e = Error::config("tls.ca_file", "cannot read").under("sink");
        assert!(
            matches!(&e, Error::Config { path, .. } if path == "sink.tls.ca_file"),
            "{e}"
        );
        let whole = Error::config("", "bad").under("errors.destination");
        assert!(matches!(&whole, Error::Config { path, .. } if path == "errors.destination"));
        let item = Error::config("[2]", "bad").under("source.tables");
        assert!(matches!(&item, Error::Config { path, .. } if path == "source.tables[2]"));
        let refused = Error::refused_at("postgres-cdc", "publication", "missing").under("source");
        assert_eq!(
            refused.to_string(),
            "postgres-cdc (at `source.publication`): missing"
        );
        let task = Error::Task {
            task: "sink".into(),
            subtask: 0,
            source: Box::new(Error::config("topic", "empty")),
        }
        .under("sink");
        assert!(task.to_string().contains("`sink.topic`"), "{task}");
        let other = Error::refused("kafka", "denied").under("sink");
        assert_eq!(other.to_string(), "kafka: denied");
    }
}
