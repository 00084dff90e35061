//! How lapin's errors become rivus errors: with what was being done, URIs redacted, and the
//! AMQP reply's [`Fault`]: a refused login (`ACCESS_REFUSED`, 403) or virtual host
//! (`NOT_ALLOWED`, 530) is refused; a missing queue or exchange (`NOT_FOUND`, 404), a queue
//! declared with other arguments (`PRECONDITION_FAILED`, 406) and a command the broker does
//! not take (`NOT_IMPLEMENTED`, `COMMAND_INVALID`, `SYNTAX_ERROR`) are permanent; the rest (a
//! closed connection, a broker restarting, a queue held by another connection) is transient.

use rivus_sdk::secrets::redact_url as redact;
use rivus_sdk::{Error, Fault};

/// What a restart would make of an error whose text is `text`.
pub(crate) fn fault(text: &str) -> Fault {
    let has = |names: &[&str]| names.iter().any(|n| text.contains(n));
    if has(&["ACCESS_REFUSED", "NOT_ALLOWED"]) {
        Fault::Refused
    } else if has(&[
        "NOT_FOUND",
        "PRECONDITION_FAILED",
        "NOT_IMPLEMENTED",
        "COMMAND_INVALID",
        "SYNTAX_ERROR",
    ]) {
        Fault::Permanent
    } else {
        Fault::Transient
    }
}

/// `e` (any lapin error) as a rivus error with `context`.
pub(crate) fn amqp(context: impl Into<String>, e: impl std::fmt::Display) -> Error {
    let text = redact(&e.to_string());
    let fault = fault(&text);
    Error::client(context, text, fault)
}

#[cfg(test)]
mod tests {
    #[test]
    fn refusals_are_told_apart_and_uris_redacted() {
        let e = super::amqp("connecting", "ACCESS_REFUSED - Login was refused");
        assert!(matches!(e, rivus_sdk::Error::Refused { .. }), "{e}");
        let e = super::amqp(
            "connecting",
            "io error at amqp://guest:s3cret@127.0.0.1:5672",
        );
        assert!(matches!(e, rivus_sdk::Error::Connector { .. }), "{e}");
        assert!(!e.to_string().contains("s3cret"), "{e}");
        let e = super::amqp("declaring", "NOT_FOUND - no queue 'orders' in vhost '/'");
        assert!(matches!(e, rivus_sdk::Error::Rejected { .. }), "{e}");
    }
}
