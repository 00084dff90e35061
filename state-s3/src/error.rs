//! The object store's errors as rivus errors: a refused key or permission is
//! [`Error::Refused`](rivus_core::Error::Refused), an invalid path or an operation the store
//! does not support [`Error::Rejected`](rivus_core::Error::Rejected) (no restart can fix
//! either), the rest a retryable connector error, each naming the operation and the object.

use rivus_core::{Error, Fault};

/// What a restart would make of `err`.
pub(crate) fn fault(err: &object_store::Error) -> Fault {
    use object_store::Error as E;
    match err {
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => Fault::Refused,
        E::InvalidPath { .. } | E::NotSupported { .. } | E::NotImplemented => Fault::Permanent,
        _ => Fault::Transient,
    }
}

/// `err` from `what` (e.g. `writing s3://bucket/prefix/chk-…`).
pub(crate) fn s3_error(what: impl std::fmt::Display, err: object_store::Error) -> Error {
    let fault = fault(&err);
    Error::client(format!("s3 checkpoint store: {what}"), err, fault)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_key_is_not_retryable_and_a_lost_connection_is() {
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
        let other = object_store::Error::Generic {
            store: "S3",
            source: "connection reset".into(),
        };
        assert!(s3_error("reading y", other).is_retryable());
    }
}
