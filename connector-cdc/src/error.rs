//! The one place the wire client's errors become rivus errors: the server's answers by their
//! SQLSTATE ([`rivus_sdk::Fault::of_sqlstate`]) — refusals and what the server will answer
//! again (a missing publication, a syntax error) end the job; no answer at all (a lost
//! connection, a timeout) and a slot still held by a dying session are retried.

use rivus_sdk::{Error, Fault};

use crate::wire::WireError;

/// What a restart would make of `e`.
pub(crate) fn fault(e: &WireError) -> Fault {
    match e.code() {
        Some(code) => Fault::of_sqlstate(code),
        None => Fault::Transient,
    }
}

/// `e` as a rivus error, with what was being done and its [`fault`].
pub(crate) fn wire_error(context: impl Into<String>, e: WireError) -> Error {
    let fault = fault(&e);
    Error::client(context, e.to_string(), fault)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_answer_is_transient() {
        let lost = WireError::Io(std::io::Error::other("reset"));
        assert_eq!(fault(&lost), Fault::Transient);
        assert!(wire_error("x", lost).is_retryable());
        let late = WireError::Timeout(std::time::Duration::from_secs(1));
        assert_eq!(fault(&late), Fault::Transient);
    }
}
