//! An Iceberg schema as the files' columns (each with its field id, which the Parquet files
//! carry: Iceberg readers find columns by id, not by name) and columns as a new table's schema.
//! JSON columns are strings in the table; the table property [`JSON_COLUMNS`] lists their
//! names, so a restore or another writer keeps taking any JSON value for them.

use std::collections::{BTreeSet, HashMap};

use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};

use rivus_connector_files::{Column, ColumnType};
use rivus_sdk::{Error, Result};

/// The table property listing the names of the JSON columns (`doc,tags`).
pub(crate) const JSON_COLUMNS: &str = "rivus.json-columns";

/// The columns of `schema` (top-level fields, in order); `properties` are the table's.
pub(crate) fn columns_of(
    schema: &Schema,
    properties: &HashMap<String, String>,
) -> Result<Vec<Column>> {
    let json = json_names(properties);
    schema
        .as_struct()
        .fields()
        .iter()
        .map(|f| {
            let ty = match f.field_type.as_ref() {
                Type::Primitive(p) => match p {
                    PrimitiveType::Boolean => ColumnType::Boolean,
                    PrimitiveType::Int => ColumnType::Int32,
                    PrimitiveType::Long => ColumnType::Int64,
                    PrimitiveType::Float => ColumnType::Float32,
                    PrimitiveType::Double => ColumnType::Float64,
                    PrimitiveType::String if json.contains(&f.name) => ColumnType::Json,
                    PrimitiveType::String => ColumnType::String,
                    PrimitiveType::Date => ColumnType::Date,
                    PrimitiveType::Timestamptz => ColumnType::Timestamp,
                    other => return Err(unsupported(&f.name, &other.to_string())),
                },
                other => return Err(unsupported(&f.name, &other.to_string())),
            };
            Ok(Column {
                name: f.name.clone(),
                ty,
                nullable: !f.required,
                field_id: Some(f.id),
            })
        })
        .collect()
}

fn unsupported(column: &str, ty: &str) -> Error {
    Error::config(
        "table",
        format!(
            "the table's column `{column}` has the type {ty}, which the sink does not write \
             (boolean, int, long, float, double, string, date and timestamptz columns are \
             written)"
        ),
    )
}

/// The Iceberg type of a column.
pub(crate) fn type_of(ty: ColumnType) -> Type {
    Type::Primitive(match ty {
        ColumnType::Boolean => PrimitiveType::Boolean,
        ColumnType::Int32 => PrimitiveType::Int,
        ColumnType::Int64 => PrimitiveType::Long,
        ColumnType::Float32 => PrimitiveType::Float,
        ColumnType::Float64 => PrimitiveType::Double,
        ColumnType::String | ColumnType::Json => PrimitiveType::String,
        ColumnType::Date => PrimitiveType::Date,
        ColumnType::Timestamp => PrimitiveType::Timestamptz,
    })
}

/// A new table's schema for `columns` (ids from 1, in order).
pub(crate) fn schema_of(columns: &[Column]) -> Result<Schema> {
    let fields = columns.iter().zip(1..).map(|(c, id)| {
        let field = if c.nullable {
            NestedField::optional(id, &c.name, type_of(c.ty))
        } else {
            NestedField::required(id, &c.name, type_of(c.ty))
        };
        field.into()
    });
    Schema::builder()
        .with_fields(fields)
        .build()
        .map_err(|e| Error::config("schema", e.to_string()))
}

/// The names of the JSON columns the table `properties` list.
pub(crate) fn json_names(properties: &HashMap<String, String>) -> BTreeSet<String> {
    properties
        .get(JSON_COLUMNS)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The [`JSON_COLUMNS`] value for `names`.
pub(crate) fn json_value<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    names
        .into_iter()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_go_into_a_schema_and_come_back_with_ids() {
        let columns = vec![
            Column {
                name: "id".into(),
                ty: ColumnType::Int64,
                nullable: false,
                field_id: None,
            },
            Column::nullable("doc", ColumnType::Json),
            Column::nullable("at", ColumnType::Timestamp),
        ];
        let schema = schema_of(&columns).unwrap();
        let json = [(JSON_COLUMNS.to_owned(), "doc".to_owned())].into();
        let back = columns_of(&schema, &json).unwrap();
        let ids: Vec<_> = back.iter().map(|c| c.field_id).collect();
        assert_eq!(ids, [Some(1), Some(2), Some(3)]);
        let without_ids: Vec<_> = back
            .into_iter()
            .map(|c| Column {
                field_id: None,
                ..c
            })
            .collect();
        assert_eq!(without_ids, columns);
        // Without the property the JSON column reads as the string it is stored as.
        let plain = columns_of(&schema, &HashMap::new()).unwrap();
        assert_eq!(plain[1].ty, ColumnType::String);
    }

    #[test]
    fn a_column_of_another_type_is_refused_by_name() {
        let schema = Schema::builder()
            .with_fields([NestedField::optional(
                1,
                "price",
                Type::Primitive(PrimitiveType::Decimal {
                    precision: 10,
                    scale: 2,
                }),
            )
            .into()])
            .build()
            .unwrap();
        let e = columns_of(&schema, &HashMap::new())
            .unwrap_err()
            .to_string();
        assert!(e.contains("`price`") && e.contains("decimal"), "{e}");
    }
}
