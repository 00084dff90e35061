//! Partitioned tables: the table's partition spec applied to each record (Iceberg's own
//! transforms: identity, year, month, day, hour, bucket, truncate, void) gives the directory of
//! its file, `name=value/…/`; when the file is appended, its directory is read back as the
//! partition its data file names. A file therefore holds one partition, and its partition is
//! known from its key alone — after a restore too.
//!
//! A value in a directory is the partition value's JSON form (Iceberg's single-value
//! serialization: a date as `2024-03-01`, a number as digits), percent-encoded; `null` is a
//! missing value (a string `null` is written `%6Eull`).

use std::sync::Arc;

use iceberg::spec::{
    Datum, Literal, PartitionSpec, PrimitiveType, Schema, Struct, Transform, Type,
};
use iceberg::transform::{create_transform_function, BoxedTransformFunction};
use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::Value;

use rivus_sdk::calendar::{parse_date, parse_instant};
use rivus_sdk::{Error, Result};

/// What a value in a directory keeps as it is.
const KEPT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.');

/// A table's partition spec, as the sink lays files out by it.
#[derive(Debug)]
pub(crate) struct Partitioning {
    spec_id: i32,
    fields: Vec<Field>,
}

#[derive(Debug)]
struct Field {
    /// The partition field's name (`ts_day`).
    name: String,
    /// The column it is computed from, and the column's type.
    source: String,
    source_type: PrimitiveType,
    /// The partition value's type.
    result_type: Type,
    transform: BoxedTransformFunction,
}

impl Partitioning {
    /// The spec `spec` of a table with `schema`; `None` when it partitions nothing.
    pub(crate) fn of(spec: &PartitionSpec, schema: &Schema) -> Result<Option<Partitioning>> {
        if spec.is_unpartitioned() {
            return Ok(None);
        }
        let mut fields = Vec::new();
        for f in spec.fields() {
            let refused = |why: String| {
                Error::config("table", format!("partition field `{}`: {why}", f.name))
            };
            let source = schema
                .field_by_id(f.source_id)
                .ok_or_else(|| refused(format!("no column has id {}", f.source_id)))?;
            let Type::Primitive(source_type) = source.field_type.as_ref() else {
                return Err(refused(format!(
                    "column `{}` is not primitive",
                    source.name
                )));
            };
            let result_type = f
                .transform
                .result_type(&source.field_type)
                .map_err(|e| refused(e.to_string()))?;
            let transform =
                create_transform_function(&f.transform).map_err(|e| refused(e.to_string()))?;
            fields.push(Field {
                name: f.name.clone(),
                source: source.name.clone(),
                source_type: source_type.clone(),
                result_type,
                transform,
            });
        }
        Ok(Some(Partitioning {
            spec_id: spec.spec_id(),
            fields,
        }))
    }

    /// The spec's id, which each data file names.
    pub(crate) fn spec_id(&self) -> i32 {
        self.spec_id
    }

    /// The directory of `record`'s file: `name=value/` per partition field, in the spec's
    /// order; an error says why the record has no partition.
    pub(crate) fn directory(&self, record: &Value) -> std::result::Result<String, String> {
        let mut dir = String::new();
        for f in &self.fields {
            let value = record.get(&f.source).unwrap_or(&Value::Null);
            let datum = datum(value, &f.source_type)
                .map_err(|why| format!("column `{}` (partition `{}`): {why}", f.source, f.name))?;
            let part = match datum {
                None => None,
                Some(d) => f
                    .transform
                    .transform_literal(&d)
                    .map_err(|e| format!("partition `{}`: {e}", f.name))?,
            };
            dir.push_str(&f.name);
            dir.push('=');
            dir.push_str(&encode(part, &f.result_type)?);
            dir.push('/');
        }
        Ok(dir)
    }

    /// The partition of the file at `key` (`name=value/…/part-….parquet`), read from its
    /// directories.
    pub(crate) fn partition(&self, key: &str) -> Result<Struct> {
        let bad = |why: String| {
            Error::connector(
                "iceberg",
                format!("the file {key} is not laid out by the table's partition spec: {why}"),
            )
        };
        let dirs: Vec<&str> = key.split('/').collect();
        let dirs = &dirs[..dirs.len().saturating_sub(1)];
        if dirs.len() != self.fields.len() {
            return Err(bad(format!(
                "{} directories for {} partition fields",
                dirs.len(),
                self.fields.len()
            )));
        }
        let mut values = Vec::with_capacity(self.fields.len());
        for (dir, f) in dirs.iter().zip(&self.fields) {
            let value = dir
                .strip_prefix(f.name.as_str())
                .and_then(|v| v.strip_prefix('='))
                .ok_or_else(|| bad(format!("`{dir}` is not `{}=…`", f.name)))?;
            values.push(decode(value, &f.result_type).map_err(bad)?);
        }
        Ok(Struct::from_iter(values))
    }
}

/// `partition_by`: the spec of a table the sink creates, as Spark's `PARTITIONED BY` writes it
/// — `day(ts)`, `hour(ts)`, `month(ts)`, `year(ts)`, `bucket(16, id)`, `truncate(4, name)`,
/// `identity(user)` or just `user` — each field named as Iceberg's Java library names it
/// (`ts_day`, `id_bucket`, `name_trunc`, `user`).
#[derive(Debug, Clone, Default)]
pub(crate) struct PartitionBy(Vec<(String, String, Transform)>);

impl PartitionBy {
    /// The fields written in `fields`; one it cannot read is refused by its place
    /// (`partition_by[1]`).
    pub(crate) fn parse(fields: &[String]) -> Result<PartitionBy> {
        let mut out = Vec::with_capacity(fields.len());
        for (i, text) in fields.iter().enumerate() {
            let refused = |why: &str| {
                Error::config(
                    format!("partition_by[{i}]"),
                    format!(
                        "`{text}`: {why} (day(ts), hour(ts), month(ts), year(ts), \
                             bucket(16, id), truncate(4, name), identity(c) or c)"
                    ),
                )
            };
            let t = text.trim();
            let (func, args) = match t.split_once('(') {
                Some((f, rest)) => {
                    let args = rest
                        .strip_suffix(')')
                        .ok_or_else(|| refused("no closing parenthesis"))?;
                    (
                        f.trim().to_lowercase(),
                        args.split(',').map(str::trim).collect(),
                    )
                }
                None => ("identity".to_owned(), vec![t]),
            };
            let width = |s: &str| -> Result<u32> {
                s.parse::<u32>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| refused("the width is not a positive whole number"))
            };
            let (column, transform, suffix) = match (func.as_str(), args.as_slice()) {
                ("identity", [c]) => (*c, Transform::Identity, ""),
                ("year" | "years", [c]) => (*c, Transform::Year, "_year"),
                ("month" | "months", [c]) => (*c, Transform::Month, "_month"),
                ("day" | "days", [c]) => (*c, Transform::Day, "_day"),
                ("hour" | "hours", [c]) => (*c, Transform::Hour, "_hour"),
                ("bucket", [n, c]) => (*c, Transform::Bucket(width(n)?), "_bucket"),
                ("truncate", [n, c]) => (*c, Transform::Truncate(width(n)?), "_trunc"),
                _ => return Err(refused("not a partition field")),
            };
            if column.is_empty() || column.contains([' ', '(', ')', ',']) {
                return Err(refused("no column named"));
            }
            out.push((column.to_owned(), format!("{column}{suffix}"), transform));
        }
        Ok(PartitionBy(out))
    }

    /// Whether it partitions at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The spec over `schema`; a column it lacks, or of a type the transform does not take,
    /// is refused naming `partition_by`.
    pub(crate) fn spec(&self, schema: &Schema) -> Result<PartitionSpec> {
        let mut b = PartitionSpec::builder(schema.clone());
        for (column, name, transform) in &self.0 {
            b = b
                .add_partition_field(column, name, *transform)
                .map_err(|e| Error::config("partition_by", format!("`{name}`: {e}")))?;
        }
        b.build()
            .map_err(|e| Error::config("partition_by", e.to_string()))
    }
}

/// The layout the files sink takes from a table partitioned by `p`.
pub(crate) fn layout(p: Arc<Partitioning>) -> rivus_connector_files::Layout {
    Arc::new(move |record| p.directory(record))
}

/// A record's value as a datum of the column's type (`None`: null or missing), read as the
/// files sink reads it: a date from `YYYY-MM-DD` or days, a timestamp from RFC 3339 text or
/// milliseconds since the epoch.
fn datum(v: &Value, ty: &PrimitiveType) -> std::result::Result<Option<Datum>, String> {
    let wrong = || format!("{v} is not a {ty}");
    if v.is_null() {
        return Ok(None);
    }
    let d = match (ty, v) {
        (PrimitiveType::Boolean, Value::Bool(b)) => Datum::bool(*b),
        (PrimitiveType::Int, Value::Number(n)) => Datum::int(
            n.as_i64()
                .and_then(|i| i32::try_from(i).ok())
                .ok_or_else(wrong)?,
        ),
        (PrimitiveType::Long, Value::Number(n)) => Datum::long(n.as_i64().ok_or_else(wrong)?),
        (PrimitiveType::Float, Value::Number(n)) => {
            Datum::float(n.as_f64().ok_or_else(wrong)? as f32)
        }
        (PrimitiveType::Double, Value::Number(n)) => Datum::double(n.as_f64().ok_or_else(wrong)?),
        (PrimitiveType::String, Value::String(s)) => Datum::string(s),
        (PrimitiveType::Date, Value::String(s)) => Datum::date(
            parse_date(s)
                .and_then(|d| i32::try_from(d).ok())
                .ok_or_else(wrong)?,
        ),
        (PrimitiveType::Date, Value::Number(n)) => Datum::date(
            n.as_i64()
                .and_then(|d| i32::try_from(d).ok())
                .ok_or_else(wrong)?,
        ),
        (PrimitiveType::Timestamp | PrimitiveType::Timestamptz, v) => {
            let micros = match v {
                Value::String(s) => parse_instant(s, 1_000_000),
                Value::Number(n) => n.as_i64().and_then(|ms| ms.checked_mul(1000)),
                _ => None,
            }
            .ok_or_else(wrong)?;
            if *ty == PrimitiveType::Timestamp {
                Datum::timestamp_micros(micros)
            } else {
                Datum::timestamptz_micros(micros)
            }
        }
        _ => return Err(wrong()),
    };
    Ok(Some(d))
}

/// A partition value as a directory's value.
fn encode(value: Option<Datum>, ty: &Type) -> std::result::Result<String, String> {
    let Some(value) = value else {
        return Ok("null".into());
    };
    let json = Literal::from(value)
        .try_into_json(ty)
        .map_err(|e| e.to_string())?;
    let text = match json {
        Value::String(s) => s,
        other => other.to_string(),
    };
    let encoded = utf8_percent_encode(&text, KEPT).to_string();
    Ok(if encoded == "null" {
        "%6Eull".into()
    } else {
        encoded
    })
}

/// A directory's value as the partition value of type `ty`.
fn decode(text: &str, ty: &Type) -> std::result::Result<Option<Literal>, String> {
    if text == "null" {
        return Ok(None);
    }
    let text = percent_decode_str(text)
        .decode_utf8()
        .map_err(|e| format!("`{text}`: {e}"))?;
    let json = match ty {
        Type::Primitive(
            PrimitiveType::String
            | PrimitiveType::Date
            | PrimitiveType::Timestamp
            | PrimitiveType::Timestamptz
            | PrimitiveType::Time
            | PrimitiveType::Uuid,
        ) => Value::String(text.to_string()),
        _ => serde_json::from_str(&text).map_err(|e| format!("`{text}`: {e}"))?,
    };
    Literal::try_from_json(json, ty).map_err(|e| format!("`{text}`: {e}"))
}

#[cfg(test)]
mod tests {
    use iceberg::spec::NestedField;
    use serde_json::json;

    use super::*;

    fn partitioning(transforms: &[(&str, i32, Transform)]) -> Partitioning {
        let schema = Schema::builder()
            .with_fields(vec![
                NestedField::optional(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                NestedField::optional(2, "user", Type::Primitive(PrimitiveType::String)).into(),
                NestedField::optional(3, "ts", Type::Primitive(PrimitiveType::Timestamptz)).into(),
                NestedField::optional(4, "day", Type::Primitive(PrimitiveType::Date)).into(),
            ])
            .build()
            .unwrap();
        let mut spec = PartitionSpec::builder(schema.clone()).with_spec_id(1);
        for (name, source, t) in transforms {
            let column = schema.name_by_field_id(*source).unwrap();
            spec = spec.add_partition_field(column, *name, *t).unwrap();
        }
        Partitioning::of(&spec.build().unwrap(), &schema)
            .unwrap()
            .unwrap()
    }

    #[test]
    fn a_record_s_directory_reads_back_as_its_partition() {
        let p = partitioning(&[
            ("ts_hour", 3, Transform::Hour),
            ("id_bucket", 1, Transform::Bucket(8)),
            ("user", 2, Transform::Identity),
            ("day", 4, Transform::Identity),
        ]);
        let record = json!({
            "id": 42, "user": "a/b=c", "ts": "2024-03-01T10:15:00Z", "day": "2024-03-02"
        });
        let dir = p.directory(&record).unwrap();
        assert!(dir.starts_with("ts_hour=474802/id_bucket="), "{dir}");
        assert!(dir.contains("/user=a%2Fb%3Dc/day=2024-03-02/"), "{dir}");
        let part = p.partition(&format!("{dir}part-1.parquet")).unwrap();
        let hours = 1_709_287_200 / 3600; // 2024-03-01T10:00Z
        assert_eq!(part[0], Some(Literal::int(hours)));
        assert!(matches!(part[1], Some(Literal::Primitive(_))));
        assert_eq!(part[2], Some(Literal::string("a/b=c")));
        assert_eq!(part[3], Some(Literal::date(19_784)));
        // Milliseconds give the same partition as the text.
        let ms = json!({"id": 42, "user": "a/b=c", "ts": 1_709_288_100_000i64, "day": 19_784});
        assert_eq!(p.directory(&ms).unwrap(), dir);

        let days = partitioning(&[("ts_day", 3, Transform::Day)]);
        let dir = days.directory(&record).unwrap();
        assert_eq!(dir, "ts_day=2024-03-01/");
        let part = days.partition(&format!("{dir}part-1.parquet")).unwrap();
        assert_eq!(part[0], Some(Literal::date(19_783)));
    }

    #[test]
    fn partition_by_reads_spark_s_syntax_and_refuses_by_place() {
        let by = PartitionBy::parse(&[
            "day(ts)".into(),
            "bucket(16, id)".into(),
            "user".into(),
            "truncate(4,user)".into(),
        ])
        .unwrap();
        let names: Vec<&str> = by.0.iter().map(|(_, n, _)| n.as_str()).collect();
        assert_eq!(names, ["ts_day", "id_bucket", "user", "user_trunc"]);
        assert_eq!(by.0[1].2, Transform::Bucket(16));
        for (bad, at) in [
            ("bucket(id)", 0),
            ("day(ts", 0),
            ("bucket(0, id)", 0),
            ("week(ts)", 0),
        ] {
            let e = PartitionBy::parse(&[bad.into()]).unwrap_err().to_string();
            assert!(e.contains(&format!("partition_by[{at}]")), "{e}");
        }
        let schema = Schema::builder()
            .with_fields(vec![NestedField::optional(
                1,
                "id",
                Type::Primitive(PrimitiveType::Long),
            )
            .into()])
            .build()
            .unwrap();
        let e = PartitionBy::parse(&["day(ts)".into()])
            .unwrap()
            .spec(&schema)
            .unwrap_err();
        assert!(e.to_string().contains("partition_by"), "{e}");
        let e = PartitionBy::parse(&["day(id)".into()])
            .unwrap()
            .spec(&schema)
            .unwrap_err();
        assert!(e.to_string().contains("partition_by"), "{e}");
    }

    #[test]
    fn nulls_and_the_string_null_stay_apart() {
        let p = partitioning(&[("user", 2, Transform::Identity)]);
        let none = p.directory(&json!({"id": 1})).unwrap();
        let text = p.directory(&json!({"user": "null"})).unwrap();
        assert_eq!(none, "user=null/");
        assert_eq!(text, "user=%6Eull/");
        assert_eq!(p.partition(&format!("{none}f")).unwrap()[0], None);
        assert_eq!(
            p.partition(&format!("{text}f")).unwrap()[0],
            Some(Literal::string("null"))
        );
    }

    #[test]
    fn values_of_the_wrong_type_and_foreign_keys_are_refused() {
        let p = partitioning(&[("ts_day", 3, Transform::Day)]);
        let e = p.directory(&json!({"ts": true})).unwrap_err();
        assert!(e.contains("column `ts`"), "{e}");
        assert!(p.partition("part-1.parquet").is_err());
        assert!(p.partition("other=1/part-1.parquet").is_err());
    }
}
