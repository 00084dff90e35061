//! Kafka records as connectors see them, and the (de)serializers that turn them into values:
//! any core schema applies to the value, or implement the traits to use key, headers and
//! metadata.

use std::fmt;

use rivus_sdk::schema::{DeserializationSchema, SchemaError, SerializationSchema};

/// One consumed record, borrowed from the client's buffer.
#[derive(Debug, Clone, Copy)]
pub struct KafkaRecord<'a> {
    /// Topic.
    pub topic: &'a str,
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
    /// Timestamp (ms since the epoch), if the broker or producer set one.
    pub timestamp: Option<i64>,
    /// Key bytes.
    pub key: Option<&'a [u8]>,
    /// Value bytes (`None` for a tombstone).
    pub value: Option<&'a [u8]>,
    /// Headers in order.
    pub headers: &'a [(String, Option<Vec<u8>>)],
}

impl KafkaRecord<'_> {
    /// `topic/partition@offset`, the position used in errors and dead letters.
    pub fn position(&self) -> String {
        format!("{}/{}@{}", self.topic, self.partition, self.offset)
    }
}

/// Turns a consumed record into a value.
pub trait KafkaDeserializer<T>: Send + Sync + 'static {
    /// Decodes `record`; errors name the record's position.
    fn deserialize(&self, record: &KafkaRecord<'_>) -> Result<T, SchemaError>;
}

/// Applies a core [`DeserializationSchema`] to the record's value.
#[derive(Debug, Clone, Default)]
pub struct ValueDeserializer<S>(pub S);

impl<T, S: DeserializationSchema<T> + 'static> KafkaDeserializer<T> for ValueDeserializer<S> {
    fn deserialize(&self, record: &KafkaRecord<'_>) -> Result<T, SchemaError> {
        let pos = record.position();
        match record.value {
            Some(v) => self.0.deserialize(v, &pos),
            None => Err(SchemaError::new("kafka", pos, "null value (a tombstone)")),
        }
    }
}

/// A record to produce.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct OutRecord {
    /// Topic; `None` uses the sink's default topic.
    pub topic: Option<String>,
    /// Key bytes (decides the partition unless `partition` is set).
    pub key: Option<Vec<u8>>,
    /// Value bytes (`None`: a tombstone).
    pub value: Option<Vec<u8>>,
    /// Headers.
    pub headers: Vec<(String, Vec<u8>)>,
    /// Explicit partition.
    pub partition: Option<i32>,
    /// Timestamp, ms since the epoch.
    pub timestamp: Option<i64>,
}

impl fmt::Debug for OutRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutRecord")
            .field("topic", &self.topic)
            .field("key_len", &self.key.as_ref().map(Vec::len))
            .field("value_len", &self.value.as_ref().map(Vec::len))
            .field("headers", &self.headers.len())
            .field("partition", &self.partition)
            .finish()
    }
}

/// Turns a value into a record to produce.
#[async_trait::async_trait]
pub trait KafkaSerializer<T>: Send + Sync + 'static {
    /// Encodes `value`.
    fn serialize(&self, value: &T) -> Result<OutRecord, SchemaError>;

    /// Called by each sink subtask at open, before any record, with the sink's default topic:
    /// a format with a schema registers (or finds) its schema here. Nothing by default.
    async fn open(&self, _topic: Option<&str>) -> rivus_sdk::Result<()> {
        Ok(())
    }
}

/// Computes a record key from a value.
type KeyFn<T> = dyn Fn(&T) -> Vec<u8> + Send + Sync;

/// Applies a core [`SerializationSchema`] to make the value; optionally a key from the value.
pub struct ValueSerializer<S, T> {
    schema: S,
    key: Option<Box<KeyFn<T>>>,
}

impl<S, T> ValueSerializer<S, T> {
    /// Values encoded by `schema`, no key.
    pub fn new(schema: S) -> Self {
        ValueSerializer { schema, key: None }
    }

    rivus_sdk::setters! {
        /// Adds a key computed from each value.
        with_key(key: impl Fn(&T) -> Vec<u8> + Send + Sync + 'static) => key = Some(Box::new(key));
    }
}

impl<T: 'static, S: SerializationSchema<T> + 'static> KafkaSerializer<T> for ValueSerializer<S, T> {
    fn serialize(&self, value: &T) -> Result<OutRecord, SchemaError> {
        Ok(OutRecord {
            key: self.key.as_ref().map(|k| k(value)),
            value: Some(self.schema.to_vec(value)?),
            ..Default::default()
        })
    }
}

impl<T, F> KafkaSerializer<T> for F
where
    F: Fn(&T) -> Result<OutRecord, SchemaError> + Send + Sync + 'static,
{
    fn serialize(&self, value: &T) -> Result<OutRecord, SchemaError> {
        self(value)
    }
}
