//! The object store's errors as rivus errors, by `rivus-aws`'s mapping (shared with the files
//! connector): a refused key or permission is [`Error::Refused`](rivus_sdk::Error::Refused),
//! an invalid path or an operation the store does not support
//! [`Error::Rejected`](rivus_sdk::Error::Rejected) (no restart can fix either), the rest a
//! retryable connector error, each naming the operation and the object.

use rivus_sdk::Error;

/// `err` from `what` (e.g. `writing s3://bucket/prefix/chk-…`).
pub(crate) fn s3_error(what: impl std::fmt::Display, err: object_store::Error) -> Error {
    rivus_aws::s3::store_error(format!("s3 checkpoint store: {what}"), err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_store_and_the_operation() {
        let denied = object_store::Error::PermissionDenied {
            path: "p".into(),
            source: "403".into(),
        };
        let e = s3_error("writing x", denied);
        assert!(matches!(e, Error::Refused { .. }), "{e}");
        assert!(
            e.to_string().contains("s3 checkpoint store: writing x"),
            "{e}"
        );
    }
}
