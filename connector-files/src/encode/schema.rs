//! The columns of a columnar file (Parquet, CSV): declared, or inferred from the first
//! records. Inference rule (documented in the README): the sink's first batch of records (up to
//! the pipeline's batch size) is read once per subtask; each field becomes a column, typed
//! `int64` when every value is an integer, `float64` when a value has a fraction, `boolean`,
//! `string`, and `json` (the value's JSON text) for objects, arrays and mixed types; columns are
//! nullable and ordered by name. A later record with a field outside the schema, or a value the
//! column's type cannot hold, goes to the error policy whole — unless the sink adds columns
//! (`SchemaEvolution::Basic`): then a field outside the schema becomes a new column, typed by
//! the same rule from the records that bring it. A field that is null and not a column is left
//! out: a null and a missing field read the same.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use arrow_schema::{DataType, Field, TimeUnit};
use serde_json::{Map, Value};

use rivus_sdk::{Error, Result};

/// The Arrow field metadata Parquet's writer turns into the column's `field_id`.
const FIELD_ID: &str = "PARQUET:field_id";

/// A column's type; a pipeline file names it in lower case (`int64`, or `long`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[cfg_attr(feature = "pipeline-file", derive(rivus_pipeline_file::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum ColumnType {
    /// `true`/`false`.
    #[serde(alias = "bool")]
    Boolean,
    /// 32-bit integer.
    #[serde(alias = "int")]
    Int32,
    /// 64-bit integer.
    #[serde(alias = "long")]
    Int64,
    /// 32-bit float.
    #[serde(alias = "float")]
    Float32,
    /// 64-bit float.
    #[serde(alias = "double")]
    Float64,
    /// UTF-8 text.
    String,
    /// A day (`"2024-03-01"`).
    Date,
    /// Microseconds in UTC (RFC 3339 text or milliseconds since the epoch in, `timestamp[us,
    /// UTC]` out).
    Timestamp,
    /// Any JSON value, stored as its text.
    Json,
}

impl ColumnType {
    fn arrow(&self) -> DataType {
        match self {
            ColumnType::Boolean => DataType::Boolean,
            ColumnType::Int32 => DataType::Int32,
            ColumnType::Int64 => DataType::Int64,
            ColumnType::Float32 => DataType::Float32,
            ColumnType::Float64 => DataType::Float64,
            ColumnType::String | ColumnType::Json => DataType::Utf8,
            ColumnType::Date => DataType::Date32,
            ColumnType::Timestamp => {
                DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into()))
            }
        }
    }
}

/// One column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The record's field.
    pub name: String,
    /// Its type.
    pub ty: ColumnType,
    /// Whether it may be missing or null (default true).
    pub nullable: bool,
    /// The column's id in a table that names columns by id (Iceberg), written into the
    /// files' schema (Parquet's `field_id`); `None` for files named by column names alone.
    pub field_id: Option<i32>,
}

impl Column {
    /// A column that may be missing or null: `Column::nullable("ts", ColumnType::Timestamp)`.
    pub fn nullable(name: impl Into<String>, ty: ColumnType) -> Column {
        Column {
            name: name.into(),
            ty,
            nullable: true,
            field_id: None,
        }
    }
}

/// Where the columns come from.
#[derive(Debug, Clone, Default)]
pub enum SchemaSource {
    /// From the first records (see the module docs).
    #[default]
    Infer,
    /// As declared.
    Declared(Vec<Column>),
    /// From the latest Avro schema of `subject` in a schema registry, fetched when the sink
    /// opens (see `avro_columns.rs` for the mapping).
    Registry {
        /// The registry.
        config: rivus_formats::RegistryConfig,
        /// The subject (`orders-value`).
        subject: String,
    },
}

/// The columns and their Arrow schema.
#[derive(Debug, Clone)]
pub(crate) struct Schema {
    pub(crate) columns: Vec<Column>,
    pub(crate) arrow: arrow_schema::SchemaRef,
    /// Fields records may have that the files leave out (a table's partition columns, whose
    /// values name the files' directories).
    pub(crate) skipped: Vec<String>,
}

impl Schema {
    pub(crate) fn new(columns: Vec<Column>) -> Schema {
        let fields: Vec<Field> = columns
            .iter()
            .map(|c| {
                let field = Field::new(&c.name, c.ty.arrow(), c.nullable);
                match c.field_id {
                    Some(id) => field.with_metadata(std::collections::HashMap::from([(
                        FIELD_ID.to_owned(),
                        id.to_string(),
                    )])),
                    None => field,
                }
            })
            .collect();
        Schema {
            columns,
            arrow: Arc::new(arrow_schema::Schema::new(fields)),
            skipped: Vec::new(),
        }
    }

    /// The same columns, the records' fields `skipped` left out of the files.
    pub(crate) fn skipping(mut self, skipped: &[String]) -> Schema {
        self.skipped = skipped.to_vec();
        self
    }

    /// The columns of `records` (see the module docs).
    pub(crate) fn infer(records: &[&Value]) -> Result<Schema> {
        let seen = types(records, |_| true);
        if seen.is_empty() {
            return Err(Error::config(
                "schema",
                "no field in the first records to infer columns from: declare the schema",
            ));
        }
        Ok(Schema::new(
            seen.into_iter()
                .map(|(name, ty)| Column::nullable(name, ty.unwrap_or(ColumnType::String)))
                .collect(),
        ))
    }

    /// The fields of `records` with a value that are not columns, as new nullable columns
    /// typed by the inference rule (ordered by name), leaving out those `skip` names.
    pub(crate) fn added(&self, records: &[&Value], skip: &HashSet<String>) -> Vec<Column> {
        let known: HashSet<&str> = self
            .columns
            .iter()
            .map(|c| c.name.as_str())
            .chain(self.skipped.iter().map(String::as_str))
            .collect();
        types(records, |k| !known.contains(k) && !skip.contains(k))
            .into_iter()
            .filter_map(|(name, ty)| Some(Column::nullable(name, ty?)))
            .collect()
    }

    /// The record as the columns take it: an object of known fields, `json` columns as text,
    /// timestamps given as milliseconds turned into RFC 3339 text.
    pub(crate) fn prepare(&self, record: &Value) -> std::result::Result<Value, String> {
        let obj = record
            .as_object()
            .ok_or_else(|| "the record is not a JSON object".to_owned())?;
        if let Some((k, _)) = obj.iter().find(|(k, v)| {
            !v.is_null() && !self.columns.iter().any(|c| &c.name == *k) && !self.skipped.contains(k)
        }) {
            return Err(format!("field `{k}` is not a column of the file's schema"));
        }
        let mut out = Map::with_capacity(self.columns.len());
        for c in &self.columns {
            let v = obj.get(&c.name).unwrap_or(&Value::Null);
            if v.is_null() {
                if !c.nullable {
                    return Err(format!(
                        "column `{}` is not nullable and the record has none",
                        c.name
                    ));
                }
                continue;
            }
            let v = match (c.ty, v) {
                (ColumnType::Json, Value::String(s)) => Value::String(s.clone()),
                (ColumnType::Json, other) => Value::String(other.to_string()),
                (ColumnType::Timestamp, Value::Number(n)) => {
                    let ms = n
                        .as_i64()
                        .ok_or_else(|| format!("column `{}`: {n} is not milliseconds", c.name))?;
                    Value::String(rivus_sdk::calendar::instant(ms, 1000, 3, true))
                }
                (_, v) => v.clone(),
            };
            out.insert(c.name.clone(), v);
        }
        Ok(Value::Object(out))
    }
}

impl Schema {
    /// `records` as one Arrow batch; those the columns cannot hold are returned instead.
    pub(crate) fn batch(
        &self,
        records: &[&Value],
    ) -> Result<(Option<arrow_array::RecordBatch>, Vec<super::Rejected>)> {
        let mut rejected = Vec::new();
        let mut rows = Vec::with_capacity(records.len());
        for (index, r) in records.iter().enumerate() {
            match self.prepare(r) {
                Ok(v) => rows.push((index, v)),
                Err(reason) => rejected.push(super::Rejected { index, reason }),
            }
        }
        let decode =
            |rows: &[&Value]| -> std::result::Result<Option<arrow_array::RecordBatch>, String> {
                let mut d = arrow_json::ReaderBuilder::new(self.arrow.clone())
                    .with_batch_size(rows.len().max(1))
                    .build_decoder()
                    .map_err(|e| e.to_string())?;
                d.serialize(rows).map_err(|e| e.to_string())?;
                d.flush().map_err(|e| e.to_string())
            };
        let all: Vec<&Value> = rows.iter().map(|(_, v)| v).collect();
        match decode(&all) {
            Ok(batch) => Ok((batch, rejected)),
            Err(_) => {
                // One at a time, to tell the bad ones from the rest.
                let mut good = Vec::new();
                for (index, v) in &rows {
                    match decode(&[v]) {
                        Ok(_) => good.push(v),
                        Err(reason) => rejected.push(super::Rejected {
                            index: *index,
                            reason: format!("a value the file's columns cannot hold: {reason}"),
                        }),
                    }
                }
                rejected.sort_by_key(|r| r.index);
                let batch =
                    decode(&good).map_err(|e| Error::connector("files: encoding records", e))?;
                Ok((batch, rejected))
            }
        }
    }
}

/// The type of each field of `records` that `take` accepts, by the inference rule (`None`:
/// only nulls seen).
fn types(records: &[&Value], take: impl Fn(&str) -> bool) -> BTreeMap<String, Option<ColumnType>> {
    let mut seen: BTreeMap<String, Option<ColumnType>> = BTreeMap::new();
    for r in records {
        let Some(obj) = r.as_object() else { continue };
        for (k, v) in obj.iter().filter(|(k, _)| take(k)) {
            let ty = match v {
                Value::Null => None,
                Value::Bool(_) => Some(ColumnType::Boolean),
                Value::Number(n) if n.is_i64() || n.is_u64() => Some(ColumnType::Int64),
                Value::Number(_) => Some(ColumnType::Float64),
                Value::String(_) => Some(ColumnType::String),
                _ => Some(ColumnType::Json),
            };
            let slot = seen.entry(k.clone()).or_insert(None);
            *slot = match (*slot, ty) {
                (a, None) => a,
                (None, b) => b,
                (Some(a), Some(b)) if a == b => Some(a),
                (Some(ColumnType::Int64), Some(ColumnType::Float64))
                | (Some(ColumnType::Float64), Some(ColumnType::Int64)) => Some(ColumnType::Float64),
                _ => Some(ColumnType::Json),
            };
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn columns_are_inferred_by_a_stated_rule() {
        let a = json!({"id": 1, "price": 2, "name": "x", "tags": ["a"], "ok": true, "gone": null});
        let b = json!({"id": 2, "price": 2.5, "name": null, "extra": {"k": 1}});
        let s = Schema::infer(&[&a, &b]).unwrap();
        let got: Vec<(String, ColumnType)> =
            s.columns.iter().map(|c| (c.name.clone(), c.ty)).collect();
        assert_eq!(
            got,
            vec![
                ("extra".into(), ColumnType::Json),
                ("gone".into(), ColumnType::String),
                ("id".into(), ColumnType::Int64),
                ("name".into(), ColumnType::String),
                ("ok".into(), ColumnType::Boolean),
                ("price".into(), ColumnType::Float64),
                ("tags".into(), ColumnType::Json),
            ]
        );
        let prepared = s.prepare(&a).unwrap();
        assert_eq!(prepared["tags"], json!("[\"a\"]"));
        let e = s.prepare(&json!({"id": 3, "new": 1})).unwrap_err();
        assert!(e.contains("`new`"), "{e}");
        // A null field outside the columns reads as missing.
        assert_eq!(
            s.prepare(&json!({"id": 3, "new": null})).unwrap()["id"],
            json!(3)
        );
    }

    #[test]
    fn added_fields_are_typed_by_the_same_rule_and_nulls_add_nothing() {
        let s = Schema::new(vec![Column::nullable("id", ColumnType::Int64)]);
        let a = json!({"id": 1, "n": 1, "doc": {"k": 1}, "none": null, "Id": "x"});
        let b = json!({"id": 2, "n": 2.5, "doc": "text"});
        let skip = HashSet::from(["Id".to_owned()]);
        assert_eq!(
            s.added(&[&a, &b], &skip),
            vec![
                Column::nullable("doc", ColumnType::Json),
                Column::nullable("n", ColumnType::Float64),
            ]
        );
        assert!(s.added(&[&json!({"id": 3})], &skip).is_empty());
    }
}
