//! JSON Schema in Confluent's wire format: the five-byte header, then the record as JSON text.
//! A writer validates each record against its schema before writing it (a misfit goes to the
//! error policy with the path of the failing value, `/items/2/price`); a reader validates each
//! payload against its writer's schema, fetched once per id like Avro's.

use std::fmt;
use std::sync::Arc;

use jsonschema::Validator;
use rivus_sdk::schema::SchemaError;
use rivus_sdk::{Error, Result};
use serde_json::Value;

use crate::format::SchemaFormat;
use crate::registry::{Registry, SchemaType};
use crate::schemas::{payload_schema, Registered};
use crate::{wire, Role};

/// Validators kept by id at most.
const KEPT: usize = 1000;

/// The writer's schema given in the file with its `title`; validators by id.
pub(crate) type JsonSchemaCodec = Registered<Option<String>, Arc<Validator>, Arc<Validator>>;

fn compile(text: &str, references: &[(String, String)]) -> std::result::Result<Validator, String> {
    let schema: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    if references.is_empty() {
        return jsonschema::validator_for(&schema).map_err(|e| format!("not a JSON Schema: {e}"));
    }
    let mut known = Vec::with_capacity(references.len());
    for (name, text) in references {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| format!("referenced schema `{name}`: not JSON: {e}"))?;
        known.push((name.clone(), v));
    }
    jsonschema::options()
        .with_retriever(References(known))
        .build(&schema)
        .map_err(|e| format!("not a JSON Schema: {e}"))
}

/// A schema's references, found by the name its `$ref`s use (resolved against the schema's
/// base URI, so `"$ref": "address.json"` asks for `json-schema:///address.json`).
struct References(Vec<(String, Value)>);

impl jsonschema::Retrieve for References {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> std::result::Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        let asked = uri.as_str();
        self.0
            .iter()
            .find(|(name, _)| {
                asked == name
                    || asked
                        .strip_suffix(name.as_str())
                        .is_some_and(|head| head.ends_with('/'))
            })
            .map(|(_, v)| v.clone())
            .ok_or_else(|| format!("`{asked}` is not among the schema's references").into())
    }
}

/// The first way `record` breaks `v`'s rules, with where.
fn misfit(v: &Validator, record: &Value) -> Option<String> {
    v.iter_errors(record).next().map(|e| {
        let at = e.instance_path().to_string();
        format!("{}: {e}", if at.is_empty() { "/" } else { &at })
    })
}

impl JsonSchemaCodec {
    /// Checks the settings and compiles a given schema; errors name `{path}.…`.
    pub(crate) fn new(
        spec: &SchemaFormat,
        registry: Registry,
        given: Option<String>,
        path: &str,
    ) -> Result<Self> {
        let given = match given {
            Some(text) => {
                compile(&text, &[]).map_err(|e| Error::config(format!("{path}.schema"), e))?;
                let title = serde_json::from_str::<Value>(&text)
                    .ok()
                    .and_then(|v| v.get("title")?.as_str().map(str::to_owned));
                Some((text, title))
            }
            None => None,
        };
        Registered::with_given(
            spec,
            registry,
            given,
            path,
            "a reader schema is for Avro; JSON Schema payloads are read as they are",
        )
    }

    /// Registers (or finds) the writer's schema; see `Codec::open_writer`.
    pub(crate) async fn open_writer(&self, topic: &str, role: Role) -> Result<()> {
        let name = self.given.as_ref().and_then(|g| g.1.clone());
        let Some((subject, id, schema)) = self
            .resolve_writer(topic, role, SchemaType::Json, name)
            .await?
        else {
            return Ok(());
        };
        let v = Arc::new(compile(&schema.text, &schema.references).map_err(|e| {
            Error::config(
                format!("{}.schema", self.path),
                format!("schema id {id}: {e}"),
            )
        })?);
        tracing::info!(%subject, id, registry = self.registry.url(), "json-schema: writing with the registered schema");
        self.readers.lock().insert(id, Arc::clone(&v));
        let _ = self.writer.set((id, v));
        Ok(())
    }

    pub(crate) fn encode(
        &self,
        record: &Value,
        out: &mut Vec<u8>,
    ) -> std::result::Result<(), SchemaError> {
        let Some((id, v)) = self.writer.get() else {
            return Err(SchemaError::unavailable(
                "json-schema",
                "(unassigned)",
                "the writer's schema is not resolved yet (open_writer was not called)",
            ));
        };
        if let Some(m) = misfit(v, record) {
            return Err(SchemaError::new(
                "json-schema",
                "(unassigned)",
                format!("schema id {id}: {m}"),
            ));
        }
        wire::header(*id, out);
        serde_json::to_writer(out, record)
            .map_err(|e| SchemaError::new("json-schema", "(unassigned)", e))
    }

    /// The validator of schema `id`, if known.
    pub(crate) fn known(&self, id: u32) -> Option<Arc<Validator>> {
        self.readers.lock().get(&id).cloned()
    }

    /// Fetches and compiles the schema of `id`.
    pub(crate) async fn learn(
        &self,
        id: u32,
        position: &str,
    ) -> std::result::Result<Arc<Validator>, SchemaError> {
        let r = payload_schema(
            &self.registry,
            id,
            SchemaType::Json,
            "json-schema",
            position,
        )
        .await?;
        let v = Arc::new(compile(&r.text, &r.references).map_err(|e| {
            SchemaError::new("json-schema", position, format!("schema id {id}: {e}"))
        })?);
        let mut m = self.readers.lock();
        if m.len() >= KEPT {
            m.clear();
        }
        m.insert(id, Arc::clone(&v));
        Ok(v)
    }

    /// Parses and validates a payload's body with the validator of its schema.
    pub(crate) fn read(
        v: &Validator,
        id: u32,
        body: &[u8],
        position: &dyn fmt::Display,
    ) -> std::result::Result<Value, SchemaError> {
        let record: Value = serde_json::from_slice(body).map_err(|e| {
            SchemaError::new(
                "json-schema",
                position,
                format!("schema id {id}: not JSON: {e}"),
            )
        })?;
        match misfit(v, &record) {
            Some(m) => Err(SchemaError::new(
                "json-schema",
                position,
                format!("schema id {id}: {m}"),
            )),
            None => Ok(record),
        }
    }
}
