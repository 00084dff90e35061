//! [`Partitions`]: a partitioned table's partition columns. The files sink writes each record
//! under `col=value/` directories (in the table's order) and leaves the columns out of the
//! files; each file's values are read back from its key for the log's `partitionValues`. The
//! types a directory name holds exactly: `string`, `integer`, `long`, `date`, `boolean`.

use std::collections::HashMap;

use delta_kernel::expressions::Scalar;
use serde_json::Value;

use rivus_connector_files::{Column, ColumnType};

/// A table's partition columns and their types.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Partitions(Vec<(String, ColumnType)>);

impl Partitions {
    /// The partition columns `names` among the table's `columns`; a type a directory name
    /// cannot hold exactly is refused by name.
    pub(crate) fn of(names: &[String], columns: &[Column]) -> Result<Partitions, String> {
        let mut out = Vec::with_capacity(names.len());
        for n in names {
            let c = columns
                .iter()
                .find(|c| &c.name == n)
                .ok_or_else(|| format!("partition column `{n}` is not a column"))?;
            match c.ty {
                ColumnType::String
                | ColumnType::Int32
                | ColumnType::Int64
                | ColumnType::Date
                | ColumnType::Boolean => out.push((n.clone(), c.ty)),
                other => {
                    return Err(format!(
                        "partition column `{n}` is of type {other:?}, which the sink does not \
                         partition by (string, integer, long, date, boolean)"
                    ))
                }
            }
        }
        Ok(Partitions(out))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The partition columns' names, in order.
    pub(crate) fn names(&self) -> Vec<String> {
        self.0.iter().map(|(n, _)| n.clone()).collect()
    }

    /// Whether `record`'s partition values fit their columns (the error says which does not).
    pub(crate) fn check(&self, record: &Value) -> Result<(), String> {
        for (name, ty) in &self.0 {
            match record.get(name) {
                None | Some(Value::Null) => {
                    return Err(format!(
                        "the record has no value for partition column `{name}`"
                    ))
                }
                Some(v) => {
                    scalar(*ty, &text(v)).map_err(|e| format!("partition column `{name}`: {e}"))?;
                }
            }
        }
        Ok(())
    }

    /// The partition values of the file at `key` (below the table's root), from its
    /// directories.
    pub(crate) fn values(&self, key: &str) -> Result<HashMap<String, Scalar>, String> {
        let dirs: HashMap<&str, &str> = key
            .split('/')
            .filter_map(|segment| segment.split_once('='))
            .collect();
        self.0
            .iter()
            .map(|(name, ty)| {
                let v = dirs
                    .get(name.as_str())
                    .ok_or_else(|| format!("`{key}` has no `{name}=` directory"))?;
                Ok((name.clone(), scalar(*ty, v)?))
            })
            .collect()
    }
}

/// A value as the partition directory holds it (strings as they are).
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// `text` as a value of type `ty`.
fn scalar(ty: ColumnType, text: &str) -> Result<Scalar, String> {
    let bad = || format!("`{text}` is not a {ty:?}");
    Ok(match ty {
        ColumnType::String => Scalar::String(text.to_owned()),
        ColumnType::Int32 => Scalar::Integer(text.parse().map_err(|_| bad())?),
        ColumnType::Int64 => Scalar::Long(text.parse().map_err(|_| bad())?),
        ColumnType::Boolean => Scalar::Boolean(text.parse().map_err(|_| bad())?),
        ColumnType::Date => {
            let days = rivus_sdk::calendar::parse_date(text).ok_or_else(bad)?;
            Scalar::Date(i32::try_from(days).map_err(|_| bad())?)
        }
        _ => return Err(bad()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parts() -> Partitions {
        let cols = vec![
            Column::nullable("day", ColumnType::Date),
            Column::nullable("kind", ColumnType::String),
            Column::nullable("n", ColumnType::Int64),
        ];
        Partitions::of(&["day".into(), "kind".into()], &cols).unwrap()
    }

    #[test]
    fn values_come_from_the_directories_typed() {
        let v = parts()
            .values("day=2024-03-01/kind=a b/part-1.parquet")
            .unwrap();
        assert_eq!(v["day"], Scalar::Date(19783));
        assert_eq!(v["kind"], Scalar::String("a b".into()));
        assert!(parts().values("kind=a/part-1.parquet").is_err());
    }

    #[test]
    fn records_without_a_fitting_value_are_refused_by_column() {
        let p = parts();
        assert!(p.check(&json!({"day": "2024-03-01", "kind": "a"})).is_ok());
        let e = p
            .check(&json!({"day": "yesterday", "kind": "a"}))
            .unwrap_err();
        assert!(e.contains("`day`"), "{e}");
        let e = p.check(&json!({"day": "2024-03-01"})).unwrap_err();
        assert!(e.contains("`kind`"), "{e}");
        let cols = vec![Column::nullable("at", ColumnType::Timestamp)];
        let e = Partitions::of(&["at".into()], &cols).unwrap_err();
        assert!(e.contains("`at`"), "{e}");
    }
}
