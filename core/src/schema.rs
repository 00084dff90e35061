//! Serialization schemas: how connectors turn bytes into records and back. Raw bytes, UTF-8
//! strings and JSON through serde are built in; a bad record is a typed error naming its
//! position, never a panic.

use std::fmt;
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;

/// A record could not be decoded or encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{format} error at {position}: {message}")]
pub struct SchemaError {
    /// Where the record came from: `topic/partition@offset`, `queue#delivery-tag`, a row key...
    pub position: String,
    /// The schema that failed (`utf-8`, `json`, ...).
    pub format: &'static str,
    /// What was wrong, with the location inside the record when known.
    pub message: String,
    /// The record is not at fault: something it needs could not be reached (a schema
    /// registry). The task fails and retries from its checkpoint instead of handing the record
    /// to the error policy.
    pub transient: bool,
}

impl SchemaError {
    /// A new error for the record at `position`.
    pub fn new(
        format: &'static str,
        position: impl fmt::Display,
        message: impl fmt::Display,
    ) -> Self {
        SchemaError {
            position: position.to_string(),
            format,
            message: message.to_string(),
            transient: false,
        }
    }

    /// An error that is not the record's fault (see [`SchemaError::transient`]).
    pub fn unavailable(
        format: &'static str,
        position: impl fmt::Display,
        message: impl fmt::Display,
    ) -> Self {
        SchemaError {
            transient: true,
            ..SchemaError::new(format, position, message)
        }
    }

    setters! {
        /// The same error, attributed to `position` (used when encoding, where the schema does not
        /// know where the record is going).
        at(position: impl fmt::Display) => position = position.to_string();
    }
}

/// Turns the bytes of one external record into a value.
pub trait DeserializationSchema<T>: Send + Sync {
    /// Decodes `data`. `position` names the record in errors.
    fn deserialize(&self, data: &[u8], position: &dyn fmt::Display) -> Result<T, SchemaError>;
}

/// Turns a value into the bytes of one external record.
pub trait SerializationSchema<T>: Send + Sync {
    /// Appends the encoding of `value` to `out`.
    fn serialize(&self, value: &T, out: &mut Vec<u8>) -> Result<(), SchemaError>;

    /// Encodes `value` into a new buffer.
    fn to_vec(&self, value: &T) -> Result<Vec<u8>, SchemaError> {
        let mut out = Vec::new();
        self.serialize(value, &mut out)?;
        Ok(out)
    }
}

/// Bytes in, bytes out, unchanged.
#[derive(Debug, Clone, Copy, Default)]
pub struct BytesSchema;

impl DeserializationSchema<Vec<u8>> for BytesSchema {
    fn deserialize(&self, data: &[u8], _: &dyn fmt::Display) -> Result<Vec<u8>, SchemaError> {
        Ok(data.to_vec())
    }
}

impl SerializationSchema<Vec<u8>> for BytesSchema {
    fn serialize(&self, value: &Vec<u8>, out: &mut Vec<u8>) -> Result<(), SchemaError> {
        out.extend_from_slice(value);
        Ok(())
    }
}

/// UTF-8 text; invalid bytes are an error naming the byte offset.
#[derive(Debug, Clone, Copy, Default)]
pub struct StringSchema;

impl DeserializationSchema<String> for StringSchema {
    fn deserialize(&self, data: &[u8], position: &dyn fmt::Display) -> Result<String, SchemaError> {
        match std::str::from_utf8(data) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) => Err(SchemaError::new(
                "utf-8",
                position,
                format_args!("invalid UTF-8 at byte {}", e.valid_up_to()),
            )),
        }
    }
}

impl SerializationSchema<String> for StringSchema {
    fn serialize(&self, value: &String, out: &mut Vec<u8>) -> Result<(), SchemaError> {
        out.extend_from_slice(value.as_bytes());
        Ok(())
    }
}

/// JSON through serde: any `T: Deserialize` in, any `T: Serialize` out.
pub struct JsonSchema<T>(PhantomData<fn() -> T>);

impl<T> JsonSchema<T> {
    /// A JSON schema for `T`.
    pub fn new() -> Self {
        JsonSchema(PhantomData)
    }
}

impl<T> Default for JsonSchema<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Clone for JsonSchema<T> {
    fn clone(&self) -> Self {
        Self::new()
    }
}

impl<T> fmt::Debug for JsonSchema<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JsonSchema<{}>", std::any::type_name::<T>())
    }
}

impl<T: DeserializeOwned> DeserializationSchema<T> for JsonSchema<T> {
    fn deserialize(&self, data: &[u8], position: &dyn fmt::Display) -> Result<T, SchemaError> {
        serde_json::from_slice(data).map_err(|e| {
            SchemaError::new(
                "json",
                position,
                format_args!("{} (line {}, column {})", e, e.line(), e.column()),
            )
        })
    }
}

impl<T: Serialize> SerializationSchema<T> for JsonSchema<T> {
    fn serialize(&self, value: &T, out: &mut Vec<u8>) -> Result<(), SchemaError> {
        serde_json::to_writer(out, value).map_err(|e| SchemaError::new("json", "(unassigned)", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Order {
        id: u32,
        item: String,
    }

    #[test]
    fn json_round_trip_and_error_position() {
        let s = JsonSchema::<Order>::new();
        let bytes = s
            .to_vec(&Order {
                id: 7,
                item: "tea".into(),
            })
            .unwrap();
        assert_eq!(s.deserialize(&bytes, &"t/0@1").unwrap().id, 7);
        let err = s
            .deserialize(b"{\"id\": \"x\"}", &"orders/3@42")
            .unwrap_err();
        assert_eq!(err.position, "orders/3@42");
        assert_eq!(err.format, "json");
        assert!(err.to_string().contains("orders/3@42"), "{err}");
    }

    #[test]
    fn utf8_error_names_byte() {
        let err = StringSchema
            .deserialize(&[b'o', b'k', 0xff], &"q#9")
            .unwrap_err();
        assert!(err.message.contains("byte 2"), "{err}");
        assert_eq!(StringSchema.deserialize(b"fine", &"q#1").unwrap(), "fine");
        assert_eq!(BytesSchema.deserialize(&[1, 2], &"x").unwrap(), vec![1, 2]);
    }
}
