//! The page query of a split: the user's query wrapped so that the database returns each row
//! as one JSON text, filtered to the split's range and after the last position read, ordered
//! by the tracking columns, limited to the fetch size (keyset pagination).

use crate::dialect::Dialect;
use crate::value::SqlValue;
use serde_json::Value;

/// A column of the user's query as the database describes it.
#[derive(Debug, Clone)]
pub(crate) struct QueryColumn {
    pub name: String,
    /// The type name (used to cast positions on PostgreSQL).
    pub type_name: String,
}

/// Builds page statements for one query.
#[derive(Debug, Clone)]
pub(crate) struct PageQuery {
    pub dialect: Dialect,
    pub query: String,
    pub columns: Vec<QueryColumn>,
    /// Tracking columns (ordering and position), 1 or 2.
    pub track: Vec<String>,
    pub fetch: usize,
}

/// True when the column type is a date or time (ranges are then Unix seconds).
pub(crate) fn is_time(type_name: &str) -> bool {
    let t = type_name.to_ascii_uppercase();
    t.contains("TIMESTAMP") || t.contains("DATE")
}

impl PageQuery {
    fn row_json(&self) -> String {
        let q = |c: &str| self.dialect.quote(c);
        match self.dialect {
            Dialect::Postgres => "row_to_json(q)::text".to_owned(),
            Dialect::MySql | Dialect::Sqlite => {
                let pairs: Vec<String> = self
                    .columns
                    .iter()
                    .map(|c| format!("'{}', q.{}", c.name.replace('\'', "''"), q(&c.name)))
                    .collect();
                if self.dialect == Dialect::MySql {
                    format!("CAST(JSON_OBJECT({}) AS CHAR)", pairs.join(", "))
                } else {
                    format!("json_object({})", pairs.join(", "))
                }
            }
        }
    }

    fn param(&self, n: &mut usize, column: &str) -> String {
        *n += 1;
        match self.dialect {
            Dialect::Postgres => {
                let t = self
                    .columns
                    .iter()
                    .find(|c| c.name == column)
                    .map(|c| c.type_name.as_str())
                    .unwrap_or("text");
                format!("CAST(${n} AS {t})")
            }
            _ => "?".to_owned(),
        }
    }

    fn first_type(&self) -> &str {
        self.columns
            .iter()
            .find(|c| c.name == self.track[0])
            .map(|c| c.type_name.as_str())
            .unwrap_or("")
    }

    /// True when the range column is a date or time.
    pub(crate) fn time_range(&self) -> bool {
        is_time(self.first_type())
    }

    /// A range bound: the column's type for numbers; for dates and times the timestamp of a
    /// Unix second.
    fn range_param(&self, n: &mut usize) -> String {
        if !self.time_range() {
            return self.param(n, &self.track[0]);
        }
        *n += 1;
        match self.dialect {
            Dialect::Postgres if self.first_type().eq_ignore_ascii_case("TIMESTAMPTZ") => {
                format!("to_timestamp(CAST(${n} AS float8))")
            }
            Dialect::Postgres => format!("(to_timestamp(CAST(${n} AS float8)) AT TIME ZONE 'UTC')"),
            Dialect::MySql => "FROM_UNIXTIME(?)".to_owned(),
            Dialect::Sqlite => "datetime(?, 'unixepoch')".to_owned(),
        }
    }

    /// The statement and its parameters for the page after `last` within `range` (both on the
    /// first tracking column; for a date or time column the range is in Unix seconds).
    pub(crate) fn page(
        &self,
        range: Option<(i64, i64)>,
        last: Option<&[Value]>,
    ) -> (String, Vec<SqlValue>) {
        let q = |c: &str| format!("q.{}", self.dialect.quote(c));
        let mut n = 0;
        let mut conditions = Vec::new();
        let mut binds = Vec::new();
        let first = &self.track[0];
        if let Some((lo, hi)) = range {
            conditions.push(format!(
                "{} >= {} AND {} < {}",
                q(first),
                self.range_param(&mut n),
                q(first),
                self.range_param(&mut n)
            ));
            binds.push(SqlValue::Int(Some(lo)));
            binds.push(SqlValue::Int(Some(hi)));
        }
        if let Some(last) = last {
            if self.track.len() == 1 {
                conditions.push(format!("{} > {}", q(first), self.param(&mut n, first)));
                binds.push(bind(&last[0]));
            } else {
                let second = &self.track[1];
                conditions.push(format!(
                    "({a} > {p1} OR ({a} = {p2} AND {b} > {p3}))",
                    a = q(first),
                    p1 = self.param(&mut n, first),
                    p2 = self.param(&mut n, first),
                    b = q(second),
                    p3 = self.param(&mut n, second),
                ));
                binds.extend([bind(&last[0]), bind(&last[0]), bind(&last[1])]);
            }
        }
        let filter = if conditions.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", conditions.join(" AND "))
        };
        let order: Vec<String> = self.track.iter().map(|c| q(c)).collect();
        let sql = format!(
            "SELECT {} FROM ({}) q{} ORDER BY {} LIMIT {}",
            self.row_json(),
            self.query,
            filter,
            order.join(", "),
            self.fetch
        );
        (sql, binds)
    }

    /// The statement for the smallest and largest value of the first tracking column (Unix
    /// seconds for a date or time).
    pub(crate) fn bounds(&self) -> String {
        let c = format!("q.{}", self.dialect.quote(&self.track[0]));
        let cast = match self.dialect {
            Dialect::Postgres => "::text",
            _ => "",
        };
        let concat = match (self.dialect, self.time_range()) {
            (Dialect::MySql, false) => format!("CAST(CONCAT(MIN({c}), ',', MAX({c})) AS CHAR)"),
            (_, false) => format!("MIN({c}){cast} || ',' || MAX({c}){cast}"),
            (Dialect::Postgres, true) => format!(
                "floor(extract(epoch FROM MIN({c})))::bigint::text || ',' || \
                 ceil(extract(epoch FROM MAX({c})))::bigint::text"
            ),
            (Dialect::MySql, true) => format!(
                "CAST(CONCAT(FLOOR(UNIX_TIMESTAMP(MIN({c}))), ',', \
                 CEIL(UNIX_TIMESTAMP(MAX({c})))) AS CHAR)"
            ),
            (Dialect::Sqlite, true) => {
                format!("strftime('%s', MIN({c})) || ',' || strftime('%s', MAX({c}))")
            }
        };
        // An empty result has NULL bounds: '' then says "nothing to read".
        format!("SELECT COALESCE({concat}, '') FROM ({}) q", self.query)
    }
}

/// A position value as a parameter.
fn bind(v: &Value) -> SqlValue {
    match v {
        Value::Number(n) => match n.as_i64() {
            Some(i) => SqlValue::Int(Some(i)),
            None => SqlValue::Float(n.as_f64()),
        },
        Value::String(s) => SqlValue::Text(Some(s.clone())),
        Value::Bool(b) => SqlValue::Bool(Some(*b)),
        Value::Null => SqlValue::Text(None),
        other => SqlValue::Text(Some(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn page_query(dialect: Dialect, track: &[&str]) -> PageQuery {
        PageQuery {
            dialect,
            query: "SELECT * FROM t".into(),
            columns: vec![
                QueryColumn {
                    name: "id".into(),
                    type_name: "INT8".into(),
                },
                QueryColumn {
                    name: "at".into(),
                    type_name: "TIMESTAMPTZ".into(),
                },
            ],
            track: track.iter().map(|s| s.to_string()).collect(),
            fetch: 500,
        }
    }

    #[test]
    fn pages_filter_by_range_and_position() {
        let p = page_query(Dialect::Postgres, &["id"]);
        let (sql, binds) = p.page(Some((0, 100)), Some(&[json!(42)]));
        assert_eq!(
            sql,
            "SELECT row_to_json(q)::text FROM (SELECT * FROM t) q WHERE q.\"id\" >= CAST($1 AS INT8) \
             AND q.\"id\" < CAST($2 AS INT8) AND q.\"id\" > CAST($3 AS INT8) ORDER BY q.\"id\" LIMIT 500"
        );
        assert_eq!(binds.len(), 3);
    }

    #[test]
    fn two_tracking_columns_page_by_tuple() {
        let p = page_query(Dialect::Sqlite, &["at", "id"]);
        let (sql, binds) = p.page(None, Some(&[json!("2024-01-01"), json!(7)]));
        assert!(
            sql.starts_with("SELECT json_object('id', q.\"id\", 'at', q.\"at\")"),
            "{sql}"
        );
        assert!(
            sql.contains("WHERE (q.\"at\" > ? OR (q.\"at\" = ? AND q.\"id\" > ?)) ORDER BY q.\"at\", q.\"id\""),
            "{sql}"
        );
        assert_eq!(binds.len(), 3);
    }
}
