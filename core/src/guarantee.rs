//! Delivery guarantees that sources, sinks and whole pipelines declare, so that a test harness
//! can hold a connector to what it claims.

use std::fmt;

/// What a source or sink promises about each record across failures and restarts.
///
/// Ordered from weakest to strongest: a pipeline's end-to-end guarantee is the weakest of its
/// parts (see [`DeliveryGuarantee::weakest`]).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum DeliveryGuarantee {
    /// A record may be lost after a failure, never duplicated.
    AtMostOnce,
    /// A record is never lost; after a failure it may arrive more than once.
    AtLeastOnce,
    /// Every record takes effect exactly once, even across failures.
    ExactlyOnce,
}

impl DeliveryGuarantee {
    /// The weaker of two guarantees.
    pub fn weakest(self, other: DeliveryGuarantee) -> DeliveryGuarantee {
        self.min(other)
    }

    /// True when records are never lost under this guarantee.
    pub fn no_loss(self) -> bool {
        self >= DeliveryGuarantee::AtLeastOnce
    }

    /// True when records are never duplicated under this guarantee.
    pub fn no_duplicates(self) -> bool {
        self != DeliveryGuarantee::AtLeastOnce
    }

    /// The kebab-case name used in configuration files.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryGuarantee::AtMostOnce => "at-most-once",
            DeliveryGuarantee::AtLeastOnce => "at-least-once",
            DeliveryGuarantee::ExactlyOnce => "exactly-once",
        }
    }
}

impl fmt::Display for DeliveryGuarantee {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::DeliveryGuarantee::*;

    #[test]
    fn weakest_and_properties() {
        assert_eq!(ExactlyOnce.weakest(AtLeastOnce), AtLeastOnce);
        assert_eq!(AtMostOnce.weakest(ExactlyOnce), AtMostOnce);
        assert!(ExactlyOnce.no_loss() && ExactlyOnce.no_duplicates());
        assert!(AtLeastOnce.no_loss() && !AtLeastOnce.no_duplicates());
        assert!(!AtMostOnce.no_loss() && AtMostOnce.no_duplicates());
        assert_eq!(AtLeastOnce.to_string(), "at-least-once");
    }
}
