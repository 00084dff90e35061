//! How the redis crate's errors become rivus errors: with what was being done, URLs
//! redacted, refused credentials or permissions marked as [`rivus_core::Error::Refused`], and
//! which errors pass with time or a new connection (retried, never blamed on a record).

use crate::redact;

/// The error passes with time or a new connection (connection lost, refused, timed out; the
/// server loading its data after a restart, TRYAGAIN...): retry, do not blame the record.
pub(crate) fn transient(e: &redis::RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || matches!(
            e.retry_method(),
            redis::RetryMethod::WaitAndRetry
                | redis::RetryMethod::Reconnect
                | redis::RetryMethod::RetryImmediately
        )
}

/// `e` as a rivus error with `context` (URLs redacted): [`rivus_core::Error::Refused`] when
/// the server refused the credentials or a permission (WRONGPASS, NOAUTH, NOPERM), which a
/// restart cannot fix; else [`rivus_core::Error::Connector`].
pub(crate) fn redis_error(context: String, e: &redis::RedisError) -> rivus_core::Error {
    let text = redact(&e.to_string());
    let refused = e.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(e.code(), Some("WRONGPASS" | "NOAUTH" | "NOPERM"));
    rivus_core::Error::client(context, text, refused)
}
