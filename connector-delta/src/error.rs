//! The crate's errors are rivus errors with context: what was being done, and where (the
//! store's through `rivus_aws::s3::store_error`, as for the files).

use rivus_sdk::Error;

/// A Delta kernel error while doing `what`.
pub(crate) fn kernel_error(what: impl Into<String>, e: delta_kernel::KernelError) -> Error {
    Error::connector(what, e.to_string())
}
