//! [`SchemaEvolution`]: whether a sink's destinations follow the fields of its records — the
//! `schema_evolution` option of every sink that has one (SQL tables, columnar files, Delta
//! tables). What "follow" adds is the sink's to say; no sink ever drops a column or narrows a
//! type.

/// Whether a sink's destinations follow the records' fields (`schema_evolution = "none"` or
/// `"basic"` in a pipeline file).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SchemaEvolution {
    /// The destination stays as it is; a record with a field it lacks goes to the error
    /// policy (default).
    #[default]
    None,
    /// A field the destination lacks is added to it (a column, nullable, typed from the
    /// values); SQL sinks also create a missing table. Never a drop, never a narrower type.
    Basic,
}
