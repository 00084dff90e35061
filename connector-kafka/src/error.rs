//! How librdkafka's errors become rivus errors: with what was being done and a [`Fault`]:
//! refused authentication or authorization (SASL, ACLs, transactional ids) and requests the
//! brokers will refuse again (an invalid topic name or configuration, a version or feature
//! the brokers lack) end the job; the rest (brokers down, leaders moving, timeouts, a fenced
//! producer) restarts it.

use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;
use rivus_sdk::{Error, Fault};

/// What a restart would make of an error with `code`.
pub(crate) fn fault(code: RDKafkaErrorCode) -> Fault {
    use RDKafkaErrorCode as C;
    match code {
        C::TopicAuthorizationFailed
        | C::GroupAuthorizationFailed
        | C::ClusterAuthorizationFailed
        | C::TransactionalIdAuthorizationFailed
        | C::SaslAuthenticationFailed
        | C::Authentication
        | C::DelegationTokenAuthorizationFailed => Fault::Refused,
        C::InvalidArgument
        | C::NotImplemented
        | C::UnsupportedFeature
        | C::InvalidTopic
        | C::InvalidRequiredAcks
        | C::InvalidGroupId
        | C::InvalidSessionTimeout
        | C::UnsupportedSASLMechanism
        | C::UnsupportedVersion
        | C::InvalidPartitions
        | C::InvalidReplicationFactor
        | C::InvalidReplicaAssignment
        | C::InvalidConfig
        | C::InvalidRequest
        | C::UnsupportedForMessageFormat
        | C::PolicyViolation
        | C::InvalidTransactionTimeout
        | C::UnsupportedCompressionType
        | C::UnsupportedAssignor => Fault::Permanent,
        _ => Fault::Transient,
    }
}

/// The fault of `e` (transient when it has no broker code).
pub(crate) fn fault_of(e: &KafkaError) -> Fault {
    e.rdkafka_error_code().map_or(Fault::Transient, fault)
}

/// `e` as a rivus error with `context`.
pub(crate) fn kafka_err(context: impl Into<String>, e: KafkaError) -> Error {
    let fault = fault_of(&e);
    Error::client(context, e, fault)
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
        let bad = KafkaError::MetadataFetch(RDKafkaErrorCode::InvalidTopic);
        assert!(matches!(kafka_err("x", bad), Error::Rejected { .. }));
    }
}
