//! How librdkafka's errors become rivus errors: with what was being done, and refused
//! authentication or authorization (SASL, ACLs, transactional ids) marked as
//! [`Error::Refused`], which no restart can fix.

use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;
use rivus_core::Error;

/// True for the codes of a refused login or permission.
pub(crate) fn is_refusal(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        code,
        C::TopicAuthorizationFailed
            | C::GroupAuthorizationFailed
            | C::ClusterAuthorizationFailed
            | C::TransactionalIdAuthorizationFailed
            | C::SaslAuthenticationFailed
            | C::Authentication
            | C::DelegationTokenAuthorizationFailed
    )
}

/// `e` as a rivus error with `context`.
pub(crate) fn kafka_err(context: impl Into<String>, e: KafkaError) -> Error {
    let refused = e.rdkafka_error_code().is_some_and(is_refusal);
    Error::client(context, e, refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_told_apart() {
        let denied = KafkaError::MetadataFetch(RDKafkaErrorCode::TopicAuthorizationFailed);
        assert!(matches!(kafka_err("x", denied), Error::Refused { .. }));
        let lost = KafkaError::MetadataFetch(RDKafkaErrorCode::BrokerTransportFailure);
        assert!(matches!(kafka_err("x", lost), Error::Connector { .. }));
    }
}
