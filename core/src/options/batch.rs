//! `batch = { max_records, max_bytes, timeout, in_flight }`: when a sink sends what it
//! buffered, for every sink that batches through the [`BulkProcessor`](crate::bulk::BulkProcessor).

use std::borrow::Cow;
use std::marker::PhantomData;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use super::duration::{opt_duration, written, DurationText};
use super::Retry;
use crate::bulk::BulkConfig;

/// A sink's own batching defaults: what [`Batch`] takes for a key the file leaves out, and
/// what its schema (and so the sink's reference page) shows.
pub trait BatchDefaults: Send + Sync + 'static {
    /// Names the sink's batch type in schemas (`ElasticsearchBatch`).
    const NAME: &'static str;
    /// The sink's defaults: its builder's own (`EsSink::default_bulk()`), said once there.
    fn defaults() -> BulkConfig;
}

/// When a sink sends: once `max_records` records or `max_bytes` bytes are buffered, or
/// `timeout` after the oldest; with `in_flight` requests at once. A key left out is the
/// sink's default (`D`). Retries are [`Retry`](super::Retry)'s.
pub struct Batch<D> {
    /// Send once this many records are buffered (0: no count limit).
    pub max_records: usize,
    /// Send once the buffered records' estimated size reaches this many bytes (0: no size
    /// limit).
    pub max_bytes: usize,
    /// Send what is buffered at least this often.
    pub timeout: Duration,
    /// Requests in flight at once (at least 1): a sink waits while this many are outstanding,
    /// which is what slows a faster source.
    pub in_flight: usize,
    /// Whether the file gave `max_records` (a renamed option may give it otherwise).
    max_records_given: bool,
    defaults: PhantomData<fn() -> D>,
}

// By hand: the marker `D` needs none of these traits.
impl<D> Clone for Batch<D> {
    fn clone(&self) -> Self {
        Batch {
            defaults: PhantomData,
            ..*self
        }
    }
}

impl<D> PartialEq for Batch<D> {
    fn eq(&self, o: &Self) -> bool {
        (
            self.max_records,
            self.max_bytes,
            self.timeout,
            self.in_flight,
        ) == (o.max_records, o.max_bytes, o.timeout, o.in_flight)
    }
}

impl<D> Eq for Batch<D> {}

impl<D> std::fmt::Debug for Batch<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("max_records", &self.max_records)
            .field("max_bytes", &self.max_bytes)
            .field("timeout", &self.timeout)
            .field("in_flight", &self.in_flight)
            .finish()
    }
}

impl<D: BatchDefaults> Default for Batch<D> {
    fn default() -> Self {
        let d = D::defaults();
        Batch {
            max_records: d.max_actions,
            max_bytes: d.max_bytes,
            timeout: d.flush_interval.unwrap_or(Duration::from_secs(1)),
            in_flight: d.concurrent_requests,
            max_records_given: false,
            defaults: PhantomData,
        }
    }
}

impl<D: BatchDefaults> Batch<D> {
    /// The processor's configuration: the sink's defaults with these settings, retried as
    /// `retry` says.
    pub fn bulk(&self, retry: &Retry) -> BulkConfig {
        BulkConfig {
            max_actions: self.max_records,
            max_bytes: self.max_bytes,
            flush_interval: Some(self.timeout),
            concurrent_requests: self.in_flight,
            backoff: retry.policy(),
        }
    }

    /// Whether the file gave `max_records` itself (a renamed option that names the same
    /// setting is then refused beside it).
    pub fn max_records_given(&self) -> bool {
        self.max_records_given
    }
}

/// The keys as the file gives them.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Given {
    max_records: Option<usize>,
    max_bytes: Option<usize>,
    #[serde(default, deserialize_with = "opt_duration")]
    timeout: Option<Duration>,
    in_flight: Option<usize>,
}

impl<'de, D: BatchDefaults> Deserialize<'de> for Batch<D> {
    fn deserialize<De: Deserializer<'de>>(d: De) -> Result<Self, De::Error> {
        let given = Given::deserialize(d)?;
        let base = Batch::<D>::default();
        let batch = Batch {
            max_records: given.max_records.unwrap_or(base.max_records),
            max_bytes: given.max_bytes.unwrap_or(base.max_bytes),
            timeout: given.timeout.unwrap_or(base.timeout),
            in_flight: given.in_flight.unwrap_or(base.in_flight),
            max_records_given: given.max_records.is_some(),
            defaults: PhantomData,
        };
        if batch.in_flight == 0 {
            return Err(serde::de::Error::custom("in_flight: must be at least 1"));
        }
        if batch.max_records == 0 && batch.max_bytes == 0 {
            return Err(serde::de::Error::custom(
                "max_records and max_bytes are both 0: the buffer would grow without bound; set at least one",
            ));
        }
        Ok(batch)
    }
}

impl<D: BatchDefaults> schemars::JsonSchema for Batch<D> {
    fn schema_name() -> Cow<'static, str> {
        format!("{}Batch", D::NAME).into()
    }

    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let d = Batch::<D>::default();
        let mut timeout = g.subschema_for::<DurationText>();
        timeout.insert(
            "description".into(),
            "Send what is buffered at least this often.".into(),
        );
        timeout.insert("default".into(), written(d.timeout).into());
        schemars::json_schema!({
            "type": "object",
            "additionalProperties": false,
            "description": "When the sink sends: `{ max_records, max_bytes, timeout, in_flight }`, each key left out at the sink's default.",
            "properties": {
                "max_records": {
                    "type": "integer", "minimum": 0, "default": d.max_records,
                    "description": "Send once this many records are buffered (0: no count limit)."
                },
                "max_bytes": {
                    "type": "integer", "minimum": 0, "default": d.max_bytes,
                    "description": "Send once the buffered records' estimated size reaches this many bytes (0: no size limit)."
                },
                "timeout": timeout,
                "in_flight": {
                    "type": "integer", "minimum": 1, "default": d.in_flight,
                    "description": "Requests in flight at once: the sink waits while this many are outstanding."
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Small;
    impl BatchDefaults for Small {
        const NAME: &'static str = "Small";
        fn defaults() -> BulkConfig {
            BulkConfig {
                max_actions: 10,
                flush_interval: Some(Duration::from_millis(200)),
                ..BulkConfig::default()
            }
        }
    }

    #[test]
    fn a_key_left_out_is_the_sinks_default_and_the_schema_says_it() {
        let b: Batch<Small> =
            serde_json::from_value(serde_json::json!({ "max_bytes": 99 })).unwrap();
        assert_eq!(
            (b.max_records, b.max_bytes, b.timeout),
            (10, 99, Duration::from_millis(200))
        );
        assert!(!b.max_records_given());
        let bulk = b.bulk(&Retry::default());
        assert_eq!((bulk.max_actions, bulk.max_bytes), (10, 99));
        let given: Batch<Small> =
            serde_json::from_value(serde_json::json!({ "max_records": 10 })).unwrap();
        assert!(
            given.max_records_given(),
            "given, though equal to the default"
        );
        let schema = schemars::schema_for!(Batch<Small>).to_value();
        assert_eq!(schema["properties"]["max_records"]["default"], 10);
        assert_eq!(schema["properties"]["timeout"]["default"], "200ms");
    }

    #[test]
    fn bad_batches_are_refused_naming_the_key() {
        let e = serde_json::from_value::<Batch<Small>>(serde_json::json!({ "in_flight": 0 }))
            .unwrap_err();
        assert!(e.to_string().contains("in_flight"), "{e}");
        let e = serde_json::from_value::<Batch<Small>>(serde_json::json!({ "max_record": 1 }))
            .unwrap_err();
        assert!(e.to_string().contains("max_record"), "{e}");
        let e = serde_json::from_value::<Batch<Small>>(
            serde_json::json!({ "max_records": 0, "max_bytes": 0 }),
        )
        .unwrap_err();
        assert!(e.to_string().contains("without bound"), "{e}");
    }
}
