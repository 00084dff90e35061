//! The writer's schema of a subject, shared by the formats with a schema: the one given in the
//! pipeline file registered under the subject (or looked up there), the subject's latest
//! version, or a fixed id.

use rivus_core::{Error, Result};

use crate::format::SchemaFormat;
use crate::registry::{Registry, RegistryError, SchemaType};

/// The writer's schema of a subject — the given one registered (or looked up), the subject's
/// latest, or a fixed id — as `(id, text)`; a registered schema of another type is refused.
pub(crate) async fn writer_schema(
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
