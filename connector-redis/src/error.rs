//! How the redis crate's errors become rivus errors: with what was being done, URLs
//! redacted, refused credentials or permissions marked as [`rivus_sdk::Error::Refused`], and
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

/// What a restart would make of `e`: refused credentials or a permission (WRONGPASS, NOAUTH,
/// NOPERM) are refused; what passes with time ([`transient`]) is transient; any other answer
/// of the server (WRONGTYPE, an unknown command, a syntax error) is permanent: the same
/// command gets the same answer; client-side failures are transient.
pub(crate) fn fault(e: &redis::RedisError) -> rivus_sdk::Fault {
    use rivus_sdk::Fault;
    if e.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(e.code(), Some("WRONGPASS" | "NOAUTH" | "NOPERM"))
    {
        Fault::Refused
    } else if transient(e) {
        Fault::Transient
    } else if e.code().is_some() {
        Fault::Permanent
    } else {
        Fault::Transient
    }
}

/// `e` as a rivus error with `context` (URLs redacted) and its [`fault`].
pub(crate) fn redis_error(context: String, e: &redis::RedisError) -> rivus_sdk::Error {
    let text = redact(&e.to_string());
    rivus_sdk::Error::client(context, text, fault(e))
}
