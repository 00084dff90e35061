//! What the sink learns about its table at start: columns, how to bind each, which are
//! generated, and the primary key — from the database's own catalog.

use sqlx::Row;

use crate::db::Conn;
use crate::dialect::Dialect;
use crate::value::{BytesText, Class, Element};

/// One column of a table.
#[derive(Debug, Clone, PartialEq)]
pub struct TableColumn {
    /// The column's name.
    pub name: String,
    /// How values are bound.
    pub class: Class,
    /// The PostgreSQL type to cast placeholders to (`"pg_catalog"."int4"`).
    pub cast: Option<String>,
    /// Filled by the database (identity, serial, auto_increment, generated).
    pub generated: bool,
    /// Computed from other columns (`GENERATED ALWAYS AS (...)`): never written, and a
    /// record's field of that name is left out (a change source's row carries it).
    pub computed: bool,
}

/// A table's columns and primary key.
#[derive(Debug, Clone, PartialEq)]
pub struct TableSchema {
    /// The table's name, as configured.
    pub name: String,
    /// Columns in table order.
    pub columns: Vec<TableColumn>,
    /// Primary-key columns.
    pub primary_key: Vec<String>,
}

impl TableSchema {
    /// The column named `name`.
    pub fn column(&self, name: &str) -> Option<&TableColumn> {
        self.columns.iter().find(|c| c.name == name)
    }
}

/// The class of a PostgreSQL column of type `typname` (category `category`; `element`: the
/// item type of an array, the base type of a domain).
fn pg_class(typname: &str, category: &str, element: &str) -> Class {
    match (typname, category) {
        (_, "A") => Class::Array(match element {
            "date" => Element::Date,
            "time" => Element::Time,
            "timestamp" | "timestamptz" => Element::Timestamp,
            "bytea" => Element::Bytes,
            _ => Element::Plain,
        }),
        ("int2" | "int4" | "int8" | "oid", _) => Class::Int,
        ("float4" | "float8", _) => Class::Float,
        ("bool", _) => Class::Bool,
        ("bytea", _) => Class::Bytes(BytesText::Utf8),
        ("date", _) => Class::Date,
        ("time", _) => Class::Time,
        ("timestamp" | "timestamptz", _) => Class::Timestamp { utc_text: false },
        // A domain binds like its base type.
        (_, _) if !element.is_empty() && category != "A" => pg_class(element, "", ""),
        _ => Class::Text,
    }
}

fn mysql_class(data_type: &str) -> Class {
    match data_type {
        "tinyint" | "smallint" | "mediumint" | "int" | "integer" | "bigint" | "year" => Class::Int,
        "float" | "double" | "real" => Class::Float,
        "binary" | "varbinary" | "tinyblob" | "blob" | "mediumblob" | "longblob" => {
            Class::Bytes(BytesText::Utf8)
        }
        "date" => Class::Date,
        "time" => Class::Time,
        "datetime" | "timestamp" => Class::Timestamp { utc_text: true },
        _ => Class::Text,
    }
}

/// SQLite's type-affinity rules (section 3.1 of its datatype page).
fn sqlite_class(declared: &str) -> Class {
    let t = declared.to_ascii_uppercase();
    if t.contains("INT") {
        Class::Int
    } else if t.contains("CHAR") || t.contains("CLOB") || t.contains("TEXT") {
        Class::Text
    } else if t.contains("REAL") || t.contains("FLOA") || t.contains("DOUB") {
        Class::Float
    } else if t.contains("BOOL") {
        Class::Bool
    } else {
        Class::Any
    }
}

/// Reads `table`'s schema; an empty column list means the table does not exist.
pub(crate) async fn describe(
    conn: &mut Conn,
    dialect: Dialect,
    table: &str,
) -> Result<TableSchema, sqlx::Error> {
    let mut columns = Vec::new();
    let mut primary_key = Vec::new();
    match conn {
        Conn::Pg(c) => {
            let name = dialect.quote(table);
            let exists: Option<String> = sqlx::query_scalar("SELECT to_regclass($1)::text")
                .bind(&name)
                .fetch_one(&mut **c)
                .await?;
            if exists.is_none() {
                return Ok(TableSchema {
                    name: table.to_owned(),
                    columns,
                    primary_key,
                });
            }
            let rows = sqlx::query(
                "SELECT a.attname::text, t.typname::text, n.nspname::text, t.typcategory::text,
                        (a.attidentity <> '' OR a.attgenerated <> ''
                         OR coalesce(pg_get_expr(d.adbin, d.adrelid), '') LIKE 'nextval(%'),
                        coalesce(e.typname::text, ''),
                        a.attgenerated <> ''
                 FROM pg_attribute a
                 JOIN pg_type t ON t.oid = a.atttypid
                 JOIN pg_namespace n ON n.oid = t.typnamespace
                 LEFT JOIN pg_type e ON e.oid = CASE WHEN t.typcategory = 'A' THEN t.typelem
                                                     WHEN t.typtype = 'd' THEN t.typbasetype END
                 LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
                 WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
                 ORDER BY a.attnum",
            )
            .bind(&name)
            .fetch_all(&mut **c)
            .await?;
            for r in rows {
                let typname: String = r.get(1);
                let schema: String = r.get(2);
                let category: String = r.get(3);
                let element: String = r.get(5);
                columns.push(TableColumn {
                    name: r.get(0),
                    class: pg_class(&typname, &category, &element),
                    cast: Some(format!(
                        "{}.{}",
                        Dialect::Postgres.quote(&schema),
                        Dialect::Postgres.quote(&typname)
                    )),
                    generated: r.get(4),
                    computed: r.get(6),
                });
            }
            primary_key = sqlx::query_scalar(
                "SELECT a.attname::text FROM pg_index i
                 JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
                 WHERE i.indrelid = $1::regclass AND i.indisprimary",
            )
            .bind(&name)
            .fetch_all(&mut **c)
            .await?;
        }
        Conn::My(c) => {
            let (schema, name) = match table.split_once('.') {
                Some((s, n)) => (Some(s), n),
                None => (None, table),
            };
            let rows = sqlx::query(
                "SELECT CAST(column_name AS CHAR), CAST(data_type AS CHAR), CAST(extra AS CHAR),
                        CAST(column_key AS CHAR)
                 FROM information_schema.columns
                 WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?
                 ORDER BY ordinal_position",
            )
            .bind(schema)
            .bind(name)
            .fetch_all(&mut **c)
            .await?;
            for r in rows {
                let name: String = r.get(0);
                let data_type: String = r.get(1);
                let extra: String = r.get::<Option<String>, _>(2).unwrap_or_default();
                let key: String = r.get::<Option<String>, _>(3).unwrap_or_default();
                let extra = extra.to_ascii_lowercase();
                if key == "PRI" {
                    primary_key.push(name.clone());
                }
                let computed = extra.contains("generated")
                    || extra.contains("virtual")
                    || extra.contains("persistent")
                    || extra.contains("stored");
                columns.push(TableColumn {
                    name,
                    class: mysql_class(&data_type.to_ascii_lowercase()),
                    cast: None,
                    generated: extra.contains("auto_increment") || computed,
                    computed,
                });
            }
        }
        Conn::Lite(c) => {
            let rows = sqlx::query("SELECT name, type, pk FROM pragma_table_info(?) ORDER BY cid")
                .bind(table)
                .fetch_all(&mut **c)
                .await?;
            let mut keyed = Vec::new();
            for r in rows {
                let name: String = r.get(0);
                let declared: String = r.get(1);
                let pk: i64 = r.get(2);
                if pk > 0 {
                    keyed.push((pk, name.clone()));
                }
                columns.push(TableColumn {
                    name,
                    class: sqlite_class(&declared),
                    cast: None,
                    generated: false,
                    computed: false,
                });
            }
            keyed.sort();
            primary_key = keyed.into_iter().map(|(_, n)| n).collect();
        }
    }
    Ok(TableSchema {
        name: table.to_owned(),
        columns,
        primary_key,
    })
}

#[cfg(test)]
mod tests {
    use super::{mysql_class, sqlite_class};
    use crate::value::Class;

    #[test]
    fn declared_types_map_to_classes() {
        assert_eq!(sqlite_class("BIGINT"), Class::Int);
        assert_eq!(sqlite_class("varchar(20)"), Class::Text);
        assert_eq!(sqlite_class("DOUBLE PRECISION"), Class::Float);
        assert_eq!(sqlite_class(""), Class::Any);
        assert_eq!(mysql_class("decimal"), Class::Text);
        assert_eq!(mysql_class("bigint"), Class::Int);
        assert_eq!(mysql_class("datetime"), Class::Timestamp { utc_text: true });
        use super::pg_class;
        use crate::value::Element;
        assert_eq!(pg_class("_text", "A", "text"), Class::Array(Element::Plain));
        assert_eq!(pg_class("_date", "A", "date"), Class::Array(Element::Date));
        assert_eq!(pg_class("int4", "N", ""), Class::Int);
        // A domain over int8 binds as an integer.
        assert_eq!(pg_class("positive", "N", "int8"), Class::Int);
        assert_eq!(pg_class("mood", "E", ""), Class::Text);
        assert_eq!(
            pg_class("timestamptz", "D", ""),
            Class::Timestamp { utc_text: false }
        );
    }
}
