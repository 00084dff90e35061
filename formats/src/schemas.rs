//! Which registered schema a codec uses, shared by the formats with a schema: a writer's (the
//! one given in the pipeline file registered under its subject or looked up there, the
//! subject's latest version, or a fixed id) and the one a payload names, each with the schemas
//! it references, fetched transitively.

use std::collections::HashSet;

use rivus_sdk::schema::SchemaError;
use rivus_sdk::{Error, Result};

use crate::format::SchemaFormat;
use crate::registry::{Reference, Registry, RegistryError, SchemaType};

/// References one schema may pull in, transitively, at most (a cycle or a runaway chain ends
/// here with an error).
const MAX_REFERENCES: usize = 100;

/// A schema's text with the texts of the schemas it references, each under the name it is
/// referenced by (an imported file name, an Avro full name, a `$ref`).
#[derive(Debug, Clone, Default)]
pub(crate) struct WithReferences {
    pub text: String,
    pub references: Vec<(String, String)>,
}

/// The schemas `refs` name and the ones they reference in turn, each once.
async fn referenced(
    registry: &Registry,
    refs: &[Reference],
) -> std::result::Result<Vec<(String, String)>, RegistryError> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut todo: Vec<Reference> = refs.iter().rev().cloned().collect();
    while let Some(r) = todo.pop() {
        if !seen.insert(r.name.clone()) {
            continue;
        }
        if seen.len() > MAX_REFERENCES {
            return Err(RegistryError::Unusable {
                url: registry.url().to_owned(),
                what: format!("more than {MAX_REFERENCES} schema references (a cycle?)"),
            });
        }
        let got = registry.version(&r.subject, r.version).await?;
        todo.extend(got.references.into_iter().rev());
        out.push((r.name, got.text));
    }
    Ok(out)
}
use crate::Role;

/// The schema a writer of `topic` uses — the given one (`(text, record name)`) registered (or
/// looked up) under the subject, the subject's latest, or a fixed id — as `(subject, id,
/// schema)`; a registered schema of another type is refused.
pub(crate) async fn writer_schema(
    spec: &SchemaFormat,
    registry: &Registry,
    (topic, role): (&str, Role),
    kind: SchemaType,
    given: Option<(&str, Option<&str>)>,
    path: &str,
) -> Result<(String, u32, WithReferences)> {
    let subject = spec.subject_for(topic, role, given.and_then(|g| g.1), path)?;
    let (id, schema) =
        registered_for(spec, registry, &subject, kind, given.map(|g| g.0), path).await?;
    Ok((subject, id, schema))
}

async fn registered_for(
    spec: &SchemaFormat,
    registry: &Registry,
    subject: &str,
    kind: SchemaType,
    given: Option<&str>,
    path: &str,
) -> Result<(u32, WithReferences)> {
    let err = |e: RegistryError| e.into_error();
    let found = if let Some(id) = spec.schema_id {
        registry.schema(id).await.map_err(err)?.as_ref().clone()
    } else if spec.use_latest {
        registry.latest(subject).await.map_err(err)?
    } else if let Some(text) = given {
        let id = if spec.auto_register {
            registry.register(subject, kind, text).await
        } else {
            registry.lookup(subject, kind, text).await
        }
        .map_err(err)?;
        let schema = WithReferences {
            text: text.to_owned(),
            references: Vec::new(),
        };
        return Ok((id, schema));
    } else {
        return Err(Error::config(
            format!("{path}.schema"),
            "writing needs a schema: `schema`, `schema_file`, `use_latest = true` or `schema_id`",
        ));
    };
    if found.schema_type != kind {
        return Err(Error::config(
            format!("{path}.schema_id"),
            format!(
                "schema id {} is a {:?} schema, not {kind:?}",
                found.id, found.schema_type
            ),
        ));
    }
    let references = referenced(registry, &found.references).await.map_err(err)?;
    let schema = WithReferences {
        text: found.text,
        references,
    };
    Ok((found.id, schema))
}

/// The registered schema a payload names, of type `kind` (`format` names it in errors), with
/// the schemas it references: the record's fault when the registry does not know the id (or a
/// reference) or it is of another type; transient (not the record's fault) when the registry
/// cannot be asked.
pub(crate) async fn payload_schema(
    registry: &Registry,
    id: u32,
    kind: SchemaType,
    format: &'static str,
    position: &str,
) -> std::result::Result<WithReferences, SchemaError> {
    let r = match registry.schema(id).await {
        Ok(r) => r,
        Err(RegistryError::Answered { status: 404, .. }) => {
            return Err(SchemaError::new(
                format,
                position,
                format!(
                    "schema id {id} is unknown to the registry {}",
                    registry.url()
                ),
            ))
        }
        Err(e) => return Err(SchemaError::unavailable(format, position, e)),
    };
    if r.schema_type != kind {
        return Err(SchemaError::new(
            format,
            position,
            format!(
                "schema id {id} is a {:?} schema, not {kind:?}",
                r.schema_type
            ),
        ));
    }
    let references = match referenced(registry, &r.references).await {
        Ok(refs) => refs,
        Err(e @ (RegistryError::Answered { status: 404, .. } | RegistryError::Unusable { .. })) => {
            return Err(SchemaError::new(
                format,
                position,
                format!("schema id {id}: a referenced schema: {e}"),
            ))
        }
        Err(e) => return Err(SchemaError::unavailable(format, position, e)),
    };
    Ok(WithReferences {
        text: r.text.clone(),
        references,
    })
}

/// What a codec with a registry keeps (JSON Schema, Protobuf): where its settings sit in the
/// file, the settings, the registry, the writer's schema given in the file (its text and what
/// the codec compiled of it), the writer's schema once resolved (its id and compiled form),
/// and the readers' schemas by id.
pub(crate) struct Registered<G, W, R> {
    pub path: String,
    pub spec: SchemaFormat,
    pub registry: std::sync::Arc<Registry>,
    pub given: Option<(String, G)>,
    pub writer: std::sync::OnceLock<(u32, W)>,
    pub readers: parking_lot::Mutex<std::collections::HashMap<u32, R>>,
}

impl<G, W, R> Registered<G, W, R> {
    /// Refuses a reader schema (`why` says how the format reads instead: only Avro resolves
    /// a writer's schema against a reader's); errors name `{path}.…`.
    pub(crate) fn with_given(
        spec: &SchemaFormat,
        registry: Registry,
        given: Option<(String, G)>,
        path: &str,
        why: &str,
    ) -> Result<Self> {
        if spec.reader_schema.is_some() || spec.reader_schema_file.is_some() {
            return Err(Error::config(format!("{path}.reader_schema"), why));
        }
        Ok(Registered {
            path: path.to_owned(),
            spec: spec.clone(),
            registry: std::sync::Arc::new(registry),
            given,
            writer: std::sync::OnceLock::new(),
            readers: Default::default(),
        })
    }

    /// The writer's schema id, once resolved.
    pub(crate) fn writer_id(&self) -> Option<u32> {
        self.writer.get().map(|w| w.0)
    }

    /// Whether the writer's schema is resolved.
    pub(crate) fn is_open(&self) -> bool {
        self.writer.get().is_some()
    }

    /// The writer's registered schema for `topic` (the given one registered, or found), its
    /// subject and id — `None` when it is resolved already. `name` is the given schema's
    /// record name, for subject strategies that use it.
    pub(crate) async fn resolve_writer(
        &self,
        topic: &str,
        role: crate::Role,
        kind: SchemaType,
        name: Option<String>,
    ) -> Result<Option<(String, u32, WithReferences)>> {
        if self.is_open() {
            return Ok(None);
        }
        let given = self.given.as_ref().map(|g| (g.0.as_str(), name.as_deref()));
        writer_schema(
            &self.spec,
            &self.registry,
            (topic, role),
            kind,
            given,
            &self.path,
        )
        .await
        .map(Some)
    }
}
