//! Schema evolution (`schema_evolution = "basic"`): the statements that create a missing
//! table and add a missing column — never a drop, never a narrower type.
//!
//! A column's type comes from the record's **column types** when it carries them (a
//! `postgres-cdc` source with `column_types = true` puts its table's columns, PostgreSQL type
//! names and key, in each Debezium envelope as `columns`), else from the JSON value:
//!
//! | value | PostgreSQL | MySQL/MariaDB | SQLite |
//! |---|---|---|---|
//! | integer | `bigint` | `BIGINT` | `INTEGER` |
//! | other number | `double precision` | `DOUBLE` | `REAL` |
//! | boolean | `boolean` | `BOOLEAN` | `BOOLEAN` |
//! | text | `text` | `LONGTEXT` (`VARCHAR(255)` in a key) | `TEXT` |
//! | object, array | `jsonb` | `JSON` | `TEXT` |
//! | null | not created until a value comes | | |
//!
//! PostgreSQL types are kept as the source names them on PostgreSQL (and SQLite); on
//! MySQL/MariaDB they are translated ([`mysql_type`]). Type names from records are checked
//! to hold only letters, digits, spaces, `_ , ( ) [ ]` before they reach a statement.

use serde_json::Value;

use crate::dialect::Dialect;
pub use rivus_sdk::SchemaEvolution;

/// A column to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NewColumn {
    pub name: String,
    /// The type in the sink's dialect.
    pub ty: String,
    pub key: bool,
}

/// The column types a record carries: (name, PostgreSQL type, key), in table order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SourceColumns(Vec<(String, String, bool)>);

impl SourceColumns {
    /// The `columns` of a Debezium envelope (`[{"name", "type", "key"}]`), if it has them.
    pub(crate) fn of(record: &Value) -> Option<SourceColumns> {
        let envelope = record.get("op").is_some() && record.get("source").is_some();
        let cols = record.get("columns")?.as_array().filter(|_| envelope)?;
        let mut out = Vec::with_capacity(cols.len());
        for c in cols {
            let name = c.get("name")?.as_str()?;
            let ty = c.get("type")?.as_str()?;
            let key = c.get("key").and_then(Value::as_bool).unwrap_or(false);
            out.push((name.to_owned(), ty.to_owned(), key));
        }
        Some(SourceColumns(out))
    }

    /// The key columns, in table order.
    pub(crate) fn key(&self) -> Vec<String> {
        self.0.iter().filter(|c| c.2).map(|c| c.0.clone()).collect()
    }

    fn type_of(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|c| c.0 == name).map(|c| c.1.as_str())
    }

    /// The columns in table order.
    fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|c| c.0.as_str())
    }
}

/// The type of column `name` in `dialect`: from the source's types, else from `value`;
/// `None` when neither says (a null without types). An unsafe type name is an error.
pub(crate) fn column_type(
    dialect: Dialect,
    name: &str,
    source: Option<&SourceColumns>,
    value: Option<&Value>,
    key: bool,
) -> Result<Option<String>, String> {
    if let Some(pg) = source.and_then(|s| s.type_of(name)) {
        if !safe(pg) {
            return Err(format!("column `{name}`: type `{pg}` is not a type name"));
        }
        return Ok(Some(match dialect {
            Dialect::MySql => mysql_type(pg, key),
            Dialect::Postgres | Dialect::Sqlite => pg.to_owned(),
        }));
    }
    let ty = match (value, dialect) {
        (None | Some(Value::Null), _) => return Ok(None),
        (Some(Value::Number(n)), _) if n.is_i64() || n.is_u64() => match dialect {
            Dialect::Postgres => "bigint",
            Dialect::MySql => "BIGINT",
            Dialect::Sqlite => "INTEGER",
        },
        (Some(Value::Number(_)), Dialect::Postgres) => "double precision",
        (Some(Value::Number(_)), Dialect::MySql) => "DOUBLE",
        (Some(Value::Number(_)), Dialect::Sqlite) => "REAL",
        (Some(Value::Bool(_)), Dialect::Postgres) => "boolean",
        (Some(Value::Bool(_)), _) => "BOOLEAN",
        (Some(Value::String(_)), Dialect::Postgres) => "text",
        (Some(Value::String(_)), Dialect::MySql) if key => "VARCHAR(255)",
        (Some(Value::String(_)), Dialect::MySql) => "LONGTEXT",
        (Some(Value::String(_)), Dialect::Sqlite) => "TEXT",
        (Some(_), Dialect::Postgres) => "jsonb",
        (Some(_), Dialect::MySql) => "JSON",
        (Some(_), Dialect::Sqlite) => "TEXT",
    };
    Ok(Some(ty.to_owned()))
}

/// The columns of a table created for `row`: the source's columns in their order when the
/// record carries them (the key from them unless `key` is configured), else the row's fields
/// with a value. Fields without a type yet (nulls) are left for a later record.
pub(crate) fn new_table(
    dialect: Dialect,
    row: &serde_json::Map<String, Value>,
    source: Option<&SourceColumns>,
    key: Option<&[String]>,
) -> Result<Vec<NewColumn>, String> {
    let key: Vec<String> = match (key, source) {
        (Some(k), _) => k.to_vec(),
        (None, Some(s)) => s.key(),
        (None, None) => Vec::new(),
    };
    let names: Vec<&str> = match source {
        Some(s) => s.names().collect(),
        None => row.keys().map(String::as_str).collect(),
    };
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let is_key = key.iter().any(|k| k == name);
        if let Some(ty) = column_type(dialect, name, source, row.get(name), is_key)? {
            out.push(NewColumn {
                name: name.to_owned(),
                ty,
                key: is_key,
            });
        } else if is_key {
            return Err(format!(
                "key column `{name}` has no value to take a type from"
            ));
        }
    }
    if let Some(k) = key.iter().find(|k| !out.iter().any(|c| &c.name == *k)) {
        return Err(format!("key column `{k}` is not among the record's fields"));
    }
    Ok(out)
}

/// `CREATE TABLE IF NOT EXISTS` of `columns`, the key as its primary key.
pub(crate) fn create_table_sql(dialect: Dialect, table: &str, columns: &[NewColumn]) -> String {
    let mut defs: Vec<String> = columns
        .iter()
        .map(|c| {
            let not_null = if c.key { " NOT NULL" } else { "" };
            format!("{} {}{not_null}", dialect.quote_one(&c.name), c.ty)
        })
        .collect();
    let key: Vec<String> = columns
        .iter()
        .filter(|c| c.key)
        .map(|c| dialect.quote_one(&c.name))
        .collect();
    if !key.is_empty() {
        defs.push(format!("PRIMARY KEY ({})", key.join(", ")));
    }
    format!(
        "CREATE TABLE IF NOT EXISTS {} ({})",
        dialect.quote(table),
        defs.join(", ")
    )
}

/// The statement creating the schema (PostgreSQL) or database (MySQL/MariaDB) of a
/// qualified `table`, if it names one.
pub(crate) fn create_schema_sql(dialect: Dialect, table: &str) -> Option<String> {
    let (schema, _) = table.split_once('.')?;
    match dialect {
        Dialect::Postgres => Some(format!(
            "CREATE SCHEMA IF NOT EXISTS {}",
            dialect.quote_one(schema)
        )),
        Dialect::MySql => Some(format!(
            "CREATE DATABASE IF NOT EXISTS {}",
            dialect.quote_one(schema)
        )),
        Dialect::Sqlite => None,
    }
}

/// `ALTER TABLE … ADD COLUMN` (nullable: the rows there are get NULL).
pub(crate) fn add_column_sql(dialect: Dialect, table: &str, column: &NewColumn) -> String {
    let if_not = match dialect {
        // MySQL has no IF NOT EXISTS here (MariaDB has): a column added meanwhile by another
        // subtask makes the statement fail, and the caller looks again.
        Dialect::Postgres => " IF NOT EXISTS",
        Dialect::MySql | Dialect::Sqlite => "",
    };
    format!(
        "ALTER TABLE {} ADD COLUMN{if_not} {} {}",
        dialect.quote(table),
        dialect.quote_one(&column.name),
        column.ty
    )
}

/// A PostgreSQL type name as MySQL/MariaDB's nearest type that holds every value (`key`: the
/// column is in the primary key, which needs a bounded length).
pub(crate) fn mysql_type(pg: &str, key: bool) -> String {
    let pg = pg.trim().to_ascii_lowercase();
    if pg.ends_with("[]") {
        return "JSON".into();
    }
    // `timestamp(3) with time zone`: the name, then what is in the parentheses.
    let (base, args) = match pg.split_once('(') {
        Some((b, rest)) => (b.trim(), rest.split_once(')').map(|(a, _)| a.trim())),
        None => (pg.as_str(), None),
    };
    let precision = |default: &str| args.map_or(default.to_owned(), str::to_owned);
    match base {
        "smallint" | "int2" => "SMALLINT".into(),
        "integer" | "int" | "int4" => "INT".into(),
        "bigint" | "int8" | "oid" => "BIGINT".into(),
        "real" | "float4" => "FLOAT".into(),
        "double precision" | "float8" => "DOUBLE".into(),
        "boolean" | "bool" => "BOOLEAN".into(),
        "numeric" | "decimal" => match args {
            Some(a) => format!("DECIMAL({a})"),
            None => "DECIMAL(65,30)".into(),
        },
        "character varying" | "varchar" => match args {
            Some(n) => format!("VARCHAR({n})"),
            None if key => "VARCHAR(255)".into(),
            None => "LONGTEXT".into(),
        },
        "character" | "char" | "bpchar" => format!("CHAR({})", precision("1")),
        "date" => "DATE".into(),
        b if b.starts_with("timestamp") => format!("DATETIME({})", precision("6")),
        b if b.starts_with("time") => format!("TIME({})", precision("6")),
        "bytea" if key => "VARBINARY(255)".into(),
        "bytea" => "LONGBLOB".into(),
        "uuid" => "CHAR(36)".into(),
        "json" | "jsonb" => "JSON".into(),
        _ if key => "VARCHAR(255)".into(),
        _ => "LONGTEXT".into(),
    }
}

fn safe(ty: &str) -> bool {
    !ty.is_empty()
        && ty.len() <= 100
        && ty.chars().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, ' ' | '_' | ',' | '(' | ')' | '[' | ']')
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cdc() -> Value {
        json!({"op": "c", "source": {"table": "t"}, "after": {"id": 1, "amount": "2.50"},
               "columns": [{"name": "id", "type": "integer", "key": true},
                           {"name": "amount", "type": "numeric(12,2)"},
                           {"name": "note", "type": "text"}]})
    }

    #[test]
    fn tables_take_the_sources_types_and_key() {
        let rec = cdc();
        let source = SourceColumns::of(&rec).unwrap();
        let row = rec["after"].as_object().unwrap();
        let cols = new_table(Dialect::Postgres, row, Some(&source), None).unwrap();
        assert_eq!(
            create_table_sql(Dialect::Postgres, "replica.t", &cols),
            "CREATE TABLE IF NOT EXISTS \"replica\".\"t\" (\"id\" integer NOT NULL, \
             \"amount\" numeric(12,2), \"note\" text, PRIMARY KEY (\"id\"))"
        );
        let cols = new_table(Dialect::MySql, row, Some(&source), None).unwrap();
        assert_eq!(
            create_table_sql(Dialect::MySql, "t", &cols),
            "CREATE TABLE IF NOT EXISTS `t` (`id` INT NOT NULL, `amount` DECIMAL(12,2), \
             `note` LONGTEXT, PRIMARY KEY (`id`))"
        );
        assert_eq!(
            create_schema_sql(Dialect::Postgres, "replica.t").as_deref(),
            Some("CREATE SCHEMA IF NOT EXISTS \"replica\"")
        );
        // A flat record is no envelope: its `columns` field is data.
        assert_eq!(SourceColumns::of(&json!({"columns": []})), None);
    }

    #[test]
    fn json_values_give_types_and_nulls_wait() {
        let row = json!({"id": "a", "n": 1, "x": 1.5, "ok": true, "tags": [1], "gone": null});
        let row = row.as_object().unwrap();
        let cols = new_table(Dialect::MySql, row, None, Some(&["id".into()])).unwrap();
        let types: Vec<(&str, &str)> = cols
            .iter()
            .map(|c| (c.name.as_str(), c.ty.as_str()))
            .collect();
        let mut types = types;
        types.sort();
        assert_eq!(
            types,
            [
                ("id", "VARCHAR(255)"),
                ("n", "BIGINT"),
                ("ok", "BOOLEAN"),
                ("tags", "JSON"),
                ("x", "DOUBLE")
            ]
        );
        let e = new_table(Dialect::Postgres, row, None, Some(&["gone".into()])).unwrap_err();
        assert!(e.contains("`gone`"), "{e}");
        assert_eq!(
            add_column_sql(
                Dialect::Postgres,
                "s.t",
                &NewColumn {
                    name: "n".into(),
                    ty: "bigint".into(),
                    key: false
                }
            ),
            "ALTER TABLE \"s\".\"t\" ADD COLUMN IF NOT EXISTS \"n\" bigint"
        );
    }

    #[test]
    fn postgres_types_become_mysql_types_and_odd_names_are_refused() {
        assert_eq!(
            mysql_type("timestamp(3) with time zone", false),
            "DATETIME(3)"
        );
        assert_eq!(
            mysql_type("timestamp without time zone", false),
            "DATETIME(6)"
        );
        assert_eq!(mysql_type("character varying(20)", false), "VARCHAR(20)");
        assert_eq!(mysql_type("text", true), "VARCHAR(255)");
        assert_eq!(mysql_type("integer[]", false), "JSON");
        assert_eq!(mysql_type("time without time zone", false), "TIME(6)");
        let bad = json!({"op": "c", "source": {}, "columns": [
            {"name": "id", "type": "int); DROP TABLE x; --"}]});
        let s = SourceColumns::of(&bad).unwrap();
        let e = column_type(Dialect::Postgres, "id", Some(&s), None, true).unwrap_err();
        assert!(e.contains("not a type name"), "{e}");
    }
}
