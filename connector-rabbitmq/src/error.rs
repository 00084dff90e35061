//! How lapin's errors become rivus errors: with what was being done, URIs redacted, and a
//! refused login (`ACCESS_REFUSED`, 403) or virtual host (`NOT_ALLOWED`, 530) marked as
//! [`Error::Refused`], which no restart can fix.

use rivus_core::secrets::redact_url as redact;
use rivus_core::Error;

/// `e` (any lapin error) as a rivus error with `context`.
pub(crate) fn amqp(context: impl Into<String>, e: impl std::fmt::Display) -> Error {
    let text = redact(&e.to_string());
    let refused = text.contains("ACCESS_REFUSED") || text.contains("NOT_ALLOWED");
    Error::client(context, text, refused)
}

#[cfg(test)]
mod tests {
    #[test]
    fn refusals_are_told_apart_and_uris_redacted() {
        let e = super::amqp("connecting", "ACCESS_REFUSED - Login was refused");
        assert!(matches!(e, rivus_core::Error::Refused { .. }), "{e}");
        let e = super::amqp(
            "connecting",
            "io error at amqp://guest:s3cret@127.0.0.1:5672",
        );
        assert!(matches!(e, rivus_core::Error::Connector { .. }), "{e}");
        assert!(!e.to_string().contains("s3cret"), "{e}");
    }
}
