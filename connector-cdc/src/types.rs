//! Column types in records (`column_types = true`): each Debezium envelope carries its table's
//! columns as `"columns": [{"name", "type", "key"}]`, PostgreSQL type names as `format_type`
//! writes them (`integer`, `numeric(12,2)`, `timestamp with time zone`, `text[]`), so that a
//! sink creating the table downstream gives it the source's types and key. Built-in types
//! keep their names; a type of the database's own (an enum, a domain, a composite) is
//! `text`, which is how its values arrive.

use serde_json::{json, Value};

/// Where the database's own types begin (`FirstNormalObjectId`).
pub(crate) const FIRST_USER_OID: u32 = 16_384;

/// The name of built-in type `oid` with modifier `typmod` (-1: none), as `format_type` gives
/// it; `text` for a type this list does not know.
pub(crate) fn type_name(oid: u32, typmod: i32) -> String {
    if let Some(element) = array_element(oid) {
        return format!("{}[]", type_name(element, typmod));
    }
    let m = (typmod >= 0).then_some(typmod);
    let precise = |base: &str, rest: &str| match m {
        Some(p) => format!("{base}({p}){rest}"),
        None => format!("{base}{rest}"),
    };
    match oid {
        16 => "boolean".into(),
        17 => "bytea".into(),
        18 => "\"char\"".into(),
        19 => "name".into(),
        20 => "bigint".into(),
        21 => "smallint".into(),
        23 => "integer".into(),
        25 => "text".into(),
        26 => "oid".into(),
        114 => "json".into(),
        142 => "xml".into(),
        650 => "cidr".into(),
        700 => "real".into(),
        701 => "double precision".into(),
        790 => "money".into(),
        829 => "macaddr".into(),
        869 => "inet".into(),
        1042 => match m {
            Some(n) => format!("character({})", n - 4),
            None => "bpchar".into(),
        },
        1043 => match m {
            Some(n) => format!("character varying({})", n - 4),
            None => "character varying".into(),
        },
        1082 => "date".into(),
        1083 => precise("time", " without time zone"),
        1114 => precise("timestamp", " without time zone"),
        1184 => precise("timestamp", " with time zone"),
        1186 => "interval".into(),
        1266 => precise("time", " with time zone"),
        1560 => precise("bit", ""),
        1562 => precise("bit varying", ""),
        1700 => match m {
            Some(n) => {
                let n = n - 4;
                format!("numeric({},{})", (n >> 16) & 0xffff, n & 0xffff)
            }
            None => "numeric".into(),
        },
        2950 => "uuid".into(),
        3802 => "jsonb".into(),
        _ => "text".into(),
    }
}

/// The element type of built-in array type `oid` (the arrays whose records carry JSON
/// arrays; `value.rs` converts their items by it).
pub(crate) fn array_element(oid: u32) -> Option<u32> {
    Some(match oid {
        1000 => 16,
        1001 => 17,
        1005 => 21,
        1007 => 23,
        1016 => 20,
        1009 => 25,
        1014 => 1042,
        1015 => 1043,
        1021 => 700,
        1022 => 701,
        1231 => 1700,
        1182 => 1082,
        1115 => 1114,
        1185 => 1184,
        2951 => 2950,
        199 => 114,
        3807 => 3802,
        _ => return None,
    })
}

/// The `columns` value of a table: (name, type name, in the key) in table order.
pub(crate) fn columns_value<'a>(
    columns: impl IntoIterator<Item = (&'a str, String, bool)>,
) -> Value {
    Value::Array(
        columns
            .into_iter()
            .map(|(name, ty, key)| json!({"name": name, "type": ty, "key": key}))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_format_types() {
        assert_eq!(type_name(23, -1), "integer");
        assert_eq!(type_name(1700, (12 << 16 | 2) + 4), "numeric(12,2)");
        assert_eq!(type_name(1700, -1), "numeric");
        assert_eq!(type_name(1043, 24), "character varying(20)");
        assert_eq!(type_name(1184, -1), "timestamp with time zone");
        assert_eq!(type_name(1184, 3), "timestamp(3) with time zone");
        assert_eq!(type_name(1015, 24), "character varying(20)[]");
        assert_eq!(type_name(1009, -1), "text[]");
        assert_eq!(type_name(FIRST_USER_OID + 5, -1), "text");
        assert_eq!(
            columns_value([("id", "integer".to_owned(), true)]),
            json!([{"name": "id", "type": "integer", "key": true}])
        );
    }
}
