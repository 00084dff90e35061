//! The crate's errors are rivus errors with context: what was being done, and where.

use rivus_core::Error;

/// A Delta kernel error while doing `what`.
pub(crate) fn kernel_error(what: impl Into<String>, e: delta_kernel::KernelError) -> Error {
    Error::connector(what, e.to_string())
}

/// A store error while doing `what`: a refused key or permission is not retried.
pub(crate) fn store_error(what: impl Into<String>, e: object_store::Error) -> Error {
    use object_store::Error as E;
    match e {
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => {
            Error::refused(what.into(), e.to_string())
        }
        _ => Error::connector(what, e.to_string()),
    }
}
