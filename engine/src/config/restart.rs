//! `[restart]`: the restart strategy of a pipeline file, read into core's
//! [`RestartStrategy`](rivus_sdk::RestartStrategy), and the stall timeout that turns a
//! stalled job into a restart.

use std::time::Duration;

use serde::Deserialize;

use super::duration;

/// `[restart]`, by `strategy`: how the job restarts from its newest checkpoint after a failure
/// that a restart may fix.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(tag = "strategy", rename_all = "kebab-case", deny_unknown_fields)]
pub(crate) enum RestartSection {
    /// Waits growing from `initial_delay` by `multiplier` up to `max_delay`, ± `jitter`; a run
    /// that lasted `reset_after` starts again at `initial_delay`.
    ExponentialDelay {
        #[serde(default = "one_second", deserialize_with = "duration")]
        #[schemars(with = "rivus_pipeline_file::DurationText")]
        initial_delay: Duration,
        #[serde(default = "one_minute", deserialize_with = "duration")]
        #[schemars(with = "rivus_pipeline_file::DurationText")]
        max_delay: Duration,
        #[serde(default = "one_and_a_half")]
        multiplier: f64,
        #[serde(default = "a_tenth")]
        jitter: f64,
        #[serde(default = "one_hour", deserialize_with = "duration")]
        #[schemars(with = "rivus_pipeline_file::DurationText")]
        reset_after: Duration,
        /// Restarts in a row before giving up (unlimited when absent).
        max_attempts: Option<u32>,
    },
    /// `delay` before each restart, at most `max_attempts` restarts.
    FixedDelay {
        #[serde(default = "one_second", deserialize_with = "duration")]
        #[schemars(with = "rivus_pipeline_file::DurationText")]
        delay: Duration,
        max_attempts: u32,
    },
    /// Restart after `delay` unless more than `max_failures` failed within `interval`.
    FailureRate {
        max_failures: u32,
        #[serde(deserialize_with = "duration")]
        #[schemars(with = "rivus_pipeline_file::DurationText")]
        interval: Duration,
        #[serde(default = "one_second", deserialize_with = "duration")]
        #[schemars(with = "rivus_pipeline_file::DurationText")]
        delay: Duration,
    },
    /// Never restart.
    None,
}

/// `[restart]` as a whole: the strategy (absent: the default) and `stall_timeout`.
#[derive(Debug, Clone, Default)]
pub(crate) struct RestartConfig {
    /// `strategy = ...` and its settings, when given.
    pub strategy: Option<RestartSection>,
    /// A job that made no progress for this long is restarted (see `stall_threshold`).
    pub stall_timeout: Option<Duration>,
}

/// `[restart]`: one of the strategies (by `strategy`) or none, each with `stall_timeout`.
impl schemars::JsonSchema for RestartConfig {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "RestartConfig".into()
    }

    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let stall = g.subschema_for::<Option<rivus_pipeline_file::DurationText>>();
        let stall = serde_json::json!({
            "description": "a job that made no progress for this long is restarted",
            "allOf": [stall]
        });
        let mut choices: Vec<serde_json::Value> =
            match <RestartSection as schemars::JsonSchema>::json_schema(g).to_value() {
                serde_json::Value::Object(mut o) => match o.remove("oneOf") {
                    Some(serde_json::Value::Array(v)) => v,
                    _ => vec![serde_json::Value::Object(o)],
                },
                other => vec![other],
            };
        for c in &mut choices {
            if let Some(p) = c.get_mut("properties").and_then(|p| p.as_object_mut()) {
                p.insert("stall_timeout".into(), stall.clone());
            }
        }
        choices.push(serde_json::json!({
            "type": "object",
            "properties": { "stall_timeout": stall },
            "additionalProperties": false
        }));
        schemars::json_schema!({
            "description": "how the job restarts after a failure a restart may fix (default with checkpoints: exponential-delay)",
            "oneOf": choices
        })
    }
}

impl<'de> Deserialize<'de> for RestartConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        let mut table = toml::Table::deserialize(d)?;
        let stall_timeout = match table.remove("stall_timeout") {
            None => None,
            Some(v) => Some(v.as_str().and_then(super::parse_duration).ok_or_else(|| {
                D::Error::custom(format!("stall_timeout: `{v}` is not a duration (30s, 2m)"))
            })?),
        };
        let strategy = if table.is_empty() {
            None
        } else {
            Some(
                RestartSection::deserialize(toml::Value::Table(table))
                    .map_err(|e| D::Error::custom(e.message()))?,
            )
        };
        Ok(RestartConfig {
            strategy,
            stall_timeout,
        })
    }
}

fn one_second() -> Duration {
    Duration::from_secs(1)
}
fn one_minute() -> Duration {
    Duration::from_secs(60)
}
fn one_hour() -> Duration {
    Duration::from_secs(3600)
}
fn one_and_a_half() -> f64 {
    1.5
}
fn a_tenth() -> f64 {
    0.1
}

impl RestartSection {
    /// The core strategy these settings describe.
    pub(crate) fn strategy(&self) -> rivus_sdk::RestartStrategy {
        use rivus_sdk::RestartStrategy as S;
        match *self {
            RestartSection::ExponentialDelay {
                initial_delay,
                max_delay,
                multiplier,
                jitter,
                reset_after,
                max_attempts,
            } => S::ExponentialDelay {
                initial: initial_delay,
                max: max_delay,
                multiplier,
                jitter,
                reset_after,
                max_attempts,
            },
            RestartSection::FixedDelay {
                delay,
                max_attempts,
            } => S::FixedDelay {
                delay,
                max_attempts,
            },
            RestartSection::FailureRate {
                max_failures,
                interval,
                delay,
            } => S::FailureRate {
                max_failures,
                interval,
                delay,
            },
            RestartSection::None => S::None,
        }
    }
}
