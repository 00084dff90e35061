//! `retry = { max_retries, initial_backoff, max_backoff }`: how a connector retries what failed
//! in a way worth retrying (a refused bulk item, a timed-out request), the same keys everywhere.

use std::borrow::Cow;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use super::duration::{opt_duration, written, DurationText};
use crate::backoff::BackoffPolicy;

/// Exponential backoff: `initial_backoff` before the first retry, doubling up to
/// `max_backoff`, at most `max_retries` retries. A key left out is
/// [`BackoffPolicy::default`]'s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retry {
    /// Retries after the first attempt (0: none).
    pub max_retries: u32,
    /// Wait before the first retry.
    pub initial_backoff: Duration,
    /// Upper bound of one wait.
    pub max_backoff: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        match BackoffPolicy::default() {
            BackoffPolicy::Exponential {
                initial,
                max_delay,
                max_retries,
            } => Retry {
                max_retries,
                initial_backoff: initial,
                max_backoff: max_delay,
            },
            _ => unreachable!("the default backoff is exponential"),
        }
    }
}

impl Retry {
    /// The policy these settings describe.
    pub fn policy(&self) -> BackoffPolicy {
        if self.max_retries == 0 {
            return BackoffPolicy::None;
        }
        BackoffPolicy::Exponential {
            initial: self.initial_backoff,
            max_delay: self.max_backoff,
            max_retries: self.max_retries,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Given {
    max_retries: Option<u32>,
    #[serde(default, deserialize_with = "opt_duration")]
    initial_backoff: Option<Duration>,
    #[serde(default, deserialize_with = "opt_duration")]
    max_backoff: Option<Duration>,
}

impl<'de> Deserialize<'de> for Retry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let given = Given::deserialize(d)?;
        let base = Retry::default();
        let r = Retry {
            max_retries: given.max_retries.unwrap_or(base.max_retries),
            initial_backoff: given.initial_backoff.unwrap_or(base.initial_backoff),
            max_backoff: given.max_backoff.unwrap_or(base.max_backoff),
        };
        if r.max_backoff < r.initial_backoff {
            return Err(serde::de::Error::custom(
                "max_backoff is shorter than initial_backoff",
            ));
        }
        Ok(r)
    }
}

impl schemars::JsonSchema for Retry {
    fn schema_name() -> Cow<'static, str> {
        "Retry".into()
    }

    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let d = Retry::default();
        let mut initial = g.subschema_for::<DurationText>();
        initial.insert("description".into(), "Wait before the first retry.".into());
        initial.insert("default".into(), written(d.initial_backoff).into());
        let mut max = g.subschema_for::<DurationText>();
        max.insert(
            "description".into(),
            "Upper bound of one wait (each doubles the last).".into(),
        );
        max.insert("default".into(), written(d.max_backoff).into());
        schemars::json_schema!({
            "type": "object",
            "additionalProperties": false,
            "description": "Retries with exponential backoff: `{ max_retries, initial_backoff, max_backoff }`.",
            "properties": {
                "max_retries": {
                    "type": "integer", "minimum": 0, "default": d.max_retries,
                    "description": "Retries after the first attempt (0: none)."
                },
                "initial_backoff": initial,
                "max_backoff": max
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_read_with_defaults_and_become_a_policy() {
        let r: Retry = serde_json::from_value(serde_json::json!({ "max_retries": 3 })).unwrap();
        assert_eq!(r.max_retries, 3);
        assert_eq!(r.initial_backoff, Retry::default().initial_backoff);
        assert_eq!(r.policy().max_retries(), 3);
        let none: Retry = serde_json::from_value(serde_json::json!({ "max_retries": 0 })).unwrap();
        assert_eq!(none.policy(), BackoffPolicy::None);
        let e = serde_json::from_value::<Retry>(
            serde_json::json!({ "initial_backoff": "2s", "max_backoff": "1s" }),
        )
        .unwrap_err();
        assert!(e.to_string().contains("max_backoff"), "{e}");
    }
}
