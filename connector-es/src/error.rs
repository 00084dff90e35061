//! How the client's and the cluster's errors become rivus errors: with what was being done,
//! URLs redacted, and the answer's [`Fault`]: HTTP 401/403 (credentials or role refused) and
//! the 4xx answers a cluster gives again to the same request (a malformed request, a missing
//! index, an unsupported media type, a request too large) end the job; 408, 409, 429, 5xx and
//! no answer at all restart it.

use rivus_sdk::secrets::redact_url;
use rivus_sdk::{Error, Fault};

/// What the cluster answered, cut to 500 characters, for an error message.
pub(crate) fn short(answer: &serde_json::Value) -> String {
    answer.to_string().chars().take(500).collect()
}

/// A failed request (no answer, a broken connection) as a rivus error with `context`.
pub(crate) fn es_err(context: impl Into<String>, e: impl std::fmt::Display) -> Error {
    Error::connector(context, redact_url(&e.to_string()))
}

/// An answer with the error status `status` (and `message`, the status and what the cluster
/// said) as a rivus error with `context`.
pub(crate) fn status_err(context: impl Into<String>, status: u16, message: String) -> Error {
    Error::client(context, message, Fault::of_http_status(status))
}

#[cfg(test)]
mod tests {
    #[test]
    fn refusals_are_told_apart() {
        let e = super::status_err("x", 403, "HTTP 403".into());
        assert!(matches!(e, rivus_sdk::Error::Refused { .. }), "{e}");
        let e = super::status_err("x", 503, "HTTP 503".into());
        assert!(matches!(e, rivus_sdk::Error::Connector { .. }), "{e}");
        let e = super::status_err("x", 429, "HTTP 429".into());
        assert!(e.is_retryable(), "{e}");
        let e = super::status_err("x", 400, "HTTP 400: illegal_argument_exception".into());
        assert!(matches!(e, rivus_sdk::Error::Rejected { .. }), "{e}");
    }
}
