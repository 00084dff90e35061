//! A Delta schema as the files sink's columns, and back: the types both know (`boolean`,
//! `int32`/`integer`, `int64`/`long`, `float32`/`float`, `float64`/`double`, `string`,
//! `date`, `timestamp` in UTC); `json` columns are Delta strings marked `"rivus.type": "json"`
//! in the column's metadata, so that every writer (a restore, another subtask) takes any value
//! for them. A table column of another type (decimal, binary, nested) is refused by name.

use delta_kernel::schema::{DataType, MetadataValue, PrimitiveType, StructField, StructType};

use rivus_connector_files::{Column, ColumnType};
use rivus_sdk::{Error, Result};

/// The column metadata that marks a string column as JSON text.
const TYPE_KEY: &str = "rivus.type";

/// The table schema of `columns`.
pub(crate) fn schema_of(columns: &[Column]) -> Result<StructType> {
    let fields = columns.iter().map(|c| {
        let ty = match c.ty {
            ColumnType::Boolean => DataType::BOOLEAN,
            ColumnType::Int32 => DataType::INTEGER,
            ColumnType::Int64 => DataType::LONG,
            ColumnType::Float32 => DataType::FLOAT,
            ColumnType::Float64 => DataType::DOUBLE,
            ColumnType::String | ColumnType::Json => DataType::STRING,
            ColumnType::Date => DataType::DATE,
            ColumnType::Timestamp => DataType::TIMESTAMP,
        };
        let field = if c.nullable {
            StructField::nullable(&c.name, ty)
        } else {
            StructField::not_null(&c.name, ty)
        };
        match c.ty {
            ColumnType::Json => field.add_metadata([(TYPE_KEY, "json")]),
            _ => field,
        }
    });
    StructType::try_new(fields).map_err(|e| Error::config("schema", e.to_string()))
}

/// The columns of a table schema; the first column of a type outside the list refused.
pub(crate) fn columns_of(schema: &StructType) -> std::result::Result<Vec<Column>, String> {
    schema
        .fields()
        .map(|f| {
            let ty = match f.data_type() {
                DataType::Primitive(p) => match p {
                    PrimitiveType::Boolean => ColumnType::Boolean,
                    PrimitiveType::Integer => ColumnType::Int32,
                    PrimitiveType::Long => ColumnType::Int64,
                    PrimitiveType::Float => ColumnType::Float32,
                    PrimitiveType::Double => ColumnType::Float64,
                    PrimitiveType::String
                        if f.metadata.get(TYPE_KEY)
                            == Some(&MetadataValue::String("json".into())) =>
                    {
                        ColumnType::Json
                    }
                    PrimitiveType::String => ColumnType::String,
                    PrimitiveType::Date => ColumnType::Date,
                    PrimitiveType::Timestamp => ColumnType::Timestamp,
                    other => return Err(unsupported(f, &format!("{other:?}"))),
                },
                other => return Err(unsupported(f, &format!("{other:?}"))),
            };
            Ok(Column {
                name: f.name().clone(),
                ty,
                nullable: f.is_nullable(),
                field_id: None,
            })
        })
        .collect()
}

fn unsupported(f: &StructField, ty: &str) -> String {
    format!(
        "column `{}` is of type {ty}, which the sink does not write (boolean, integer, long, \
         float, double, string, date and timestamp)",
        f.name()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, ty: ColumnType, nullable: bool) -> Column {
        Column {
            name: name.into(),
            ty,
            nullable,
            field_id: None,
        }
    }

    #[test]
    fn columns_go_to_the_table_and_back() {
        let cols = vec![
            col("id", ColumnType::Int64, false),
            col("name", ColumnType::String, true),
            col("amount", ColumnType::Float64, true),
            col("at", ColumnType::Timestamp, true),
            col("day", ColumnType::Date, true),
            col("ok", ColumnType::Boolean, true),
            col("n", ColumnType::Int32, true),
            col("f", ColumnType::Float32, true),
        ];
        assert_eq!(columns_of(&schema_of(&cols).unwrap()).unwrap(), cols);
        // A JSON column is a string in the table, marked as JSON.
        let json = vec![col("doc", ColumnType::Json, true)];
        let schema = schema_of(&json).unwrap();
        let field = schema.fields().next().unwrap();
        assert_eq!(field.data_type(), &DataType::STRING);
        assert_eq!(columns_of(&schema).unwrap(), json);
        // A string column another engine made is a string.
        let plain = StructType::try_new([StructField::nullable("doc", DataType::STRING)]).unwrap();
        assert_eq!(
            columns_of(&plain).unwrap(),
            vec![col("doc", ColumnType::String, true)]
        );
    }

    #[test]
    fn a_column_of_another_type_is_refused_by_name() {
        let schema = StructType::try_new([
            StructField::nullable("id", DataType::LONG),
            StructField::nullable("price", DataType::decimal(10, 2).unwrap()),
        ])
        .unwrap();
        let e = columns_of(&schema).unwrap_err();
        assert!(e.contains("`price`"), "{e}");
    }
}
