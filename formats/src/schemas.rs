//! Which registered schema a codec uses, shared by the formats with a schema: a writer's (the
//! one given in the pipeline file registered under its subject or looked up there, the
//! subject's latest version, or a fixed id) and the one a payload names.

use std::sync::Arc;

use rivus_core::schema::SchemaError;
use rivus_core::{Error, Result};

use crate::format::SchemaFormat;
use crate::registry::{Registered, Registry, RegistryError, SchemaType};
use crate::Role;

/// The schema a writer of `topic` uses — the given one (`(text, record name)`) registered (or
/// looked up) under the subject, the subject's latest, or a fixed id — as `(subject, id, text)`;
/// a registered schema of another type is refused.
pub(crate) async fn writer_schema(
    spec: &SchemaFormat,
    registry: &Registry,
    (topic, role): (&str, Role),
    kind: SchemaType,
    given: Option<(&str, Option<&str>)>,
    path: &str,
) -> Result<(String, u32, String)> {
    let subject = spec.subject_for(topic, role, given.and_then(|g| g.1), path)?;
    let (id, text) =
        registered_for(spec, registry, &subject, kind, given.map(|g| g.0), path).await?;
    Ok((subject, id, text))
}

async fn registered_for(
    spec: &SchemaFormat,
    registry: &Registry,
    subject: &str,
    kind: SchemaType,
    given: Option<&str>,
    path: &str,
) -> Result<(u32, String)> {
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
        return Ok((id, text.to_owned()));
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
    Ok((found.id, found.text))
}

/// The registered schema a payload names, of type `kind` (`format` names it in errors): the
/// record's fault when the registry does not know the id or it is of another type; transient
/// (not the record's fault) when the registry cannot be asked.
pub(crate) async fn payload_schema(
    registry: &Registry,
    id: u32,
    kind: SchemaType,
    format: &'static str,
    position: &str,
) -> std::result::Result<Arc<Registered>, SchemaError> {
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
    Ok(r)
}
