//! The crate's errors are rivus errors with context: what was being done, and iceberg's own
//! message (the store's errors reach it through `storage.rs`, naming the path).

use iceberg::ErrorKind;
use rivus_sdk::error::Fault;
use rivus_sdk::Error;

/// An iceberg error while doing `what`: a commit conflict or an unexpected failure (a lost
/// connection, the store) restarts the job; a table, namespace or request the catalog rejects
/// ends it.
pub(crate) fn iceberg_error(what: impl Into<String>, e: iceberg::Error) -> Error {
    let fault = match e.kind() {
        ErrorKind::Unexpected | ErrorKind::CatalogCommitConflicts => Fault::Transient,
        _ if e.retryable() => Fault::Transient,
        _ => Fault::Permanent,
    };
    Error::client(what, e, fault)
}
