//! Columns from an Avro record schema — the one a schema registry holds for a subject — as the
//! Avro format of `rivus-formats` maps its values to JSON: `boolean`, `int` → `int32`, `long`
//! → `int64`, `float` → `float32`, `double` → `float64`, `string`, enums, uuids, `bytes` and
//! `fixed` (base64 text), decimals (exact text) and times of day (text) → `string`, `date` →
//! `date`, timestamps (millis, micros, local too) → `timestamp`, records, arrays and maps →
//! `json`; a union of `null` and one type is that type, nullable; other unions → `json`.

use apache_avro::schema::{RecordSchema, Schema as Avro};

use super::schema::{Column, ColumnType};

/// The columns of `schema`, a record; or why it has none.
pub(crate) fn columns(schema: &Avro) -> Result<Vec<Column>, String> {
    let Avro::Record(RecordSchema { fields, .. }) = schema else {
        return Err("the schema is not an Avro record".into());
    };
    Ok(fields
        .iter()
        .map(|f| {
            let (ty, nullable) = column_type(&f.schema);
            Column {
                name: f.name.clone(),
                ty,
                nullable,
                field_id: None,
            }
        })
        .collect())
}

fn column_type(s: &Avro) -> (ColumnType, bool) {
    match s {
        Avro::Union(u) => {
            let variants = u.variants();
            let non_null: Vec<&Avro> = variants.iter().filter(|v| **v != Avro::Null).collect();
            let nullable = non_null.len() < variants.len();
            match non_null.as_slice() {
                [one] => (column_type(one).0, nullable),
                _ => (ColumnType::Json, nullable),
            }
        }
        Avro::Null => (ColumnType::String, true),
        Avro::Boolean => (ColumnType::Boolean, false),
        Avro::Int => (ColumnType::Int32, false),
        Avro::Long => (ColumnType::Int64, false),
        Avro::Float => (ColumnType::Float32, false),
        Avro::Double => (ColumnType::Float64, false),
        Avro::Date => (ColumnType::Date, false),
        Avro::TimestampMillis
        | Avro::TimestampMicros
        | Avro::TimestampNanos
        | Avro::LocalTimestampMillis
        | Avro::LocalTimestampMicros
        | Avro::LocalTimestampNanos => (ColumnType::Timestamp, false),
        Avro::Record(_) | Avro::Array(_) | Avro::Map(_) => (ColumnType::Json, false),
        // Strings, enums, uuids, bytes, fixed, decimals, times of day, durations: text.
        _ => (ColumnType::String, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn avro_fields_become_columns() {
        let s = Avro::parse_str(
            r#"{"type": "record", "name": "Order", "fields": [
                {"name": "id", "type": "long"},
                {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
                {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-micros"}},
                {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}], "default": null},
                {"name": "tags", "type": {"type": "array", "items": "string"}},
                {"name": "either", "type": ["int", "string"]}
            ]}"#,
        )
        .unwrap();
        let got: Vec<(String, ColumnType, bool)> = columns(&s)
            .unwrap()
            .into_iter()
            .map(|c| (c.name, c.ty, c.nullable))
            .collect();
        assert_eq!(
            got,
            vec![
                ("id".into(), ColumnType::Int64, false),
                ("amount".into(), ColumnType::String, false),
                ("placed".into(), ColumnType::Timestamp, false),
                ("day".into(), ColumnType::Date, true),
                ("tags".into(), ColumnType::Json, false),
                ("either".into(), ColumnType::Json, false),
            ]
        );
        assert!(columns(&Avro::Long).is_err());
    }
}
