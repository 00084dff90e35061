//! PostgreSQL's bulk forms: UNNEST of one array per column, and COPY in CSV.

use sqlx::PgConnection;

use crate::change::Change;
use crate::statement::Plan;
use crate::value::{Class, SqlValue};

/// `INSERT ... SELECT ... FROM UNNEST($1::t[], ...)` of `run`, whose changes all have the
/// shape (kept columns) of the first.
pub(crate) async fn unnest(
    pg: &mut PgConnection,
    plan: &Plan,
    run: &[Change],
) -> Result<(), sqlx::Error> {
    let kept = run.first().map_or(&[][..], |c| &c.kept[..]);
    let sql = plan.unnest_sql(kept);
    let mut q = sqlx::query(&sql);
    for i in plan.written(kept) {
        let column = &plan.columns[i];
        let values = run.iter().map(|c| &c.values[i]);
        q = match column.class {
            Class::Int => q.bind(
                values
                    .map(|v| match v {
                        SqlValue::Int(x) => *x,
                        _ => None,
                    })
                    .collect::<Vec<_>>(),
            ),
            Class::Float => q.bind(
                values
                    .map(|v| match v {
                        SqlValue::Float(x) => *x,
                        _ => None,
                    })
                    .collect::<Vec<_>>(),
            ),
            Class::Bool => q.bind(
                values
                    .map(|v| match v {
                        SqlValue::Bool(x) => *x,
                        _ => None,
                    })
                    .collect::<Vec<_>>(),
            ),
            Class::Bytes(_) => q.bind(
                values
                    .map(|v| match v {
                        SqlValue::Bytes(x, _) => x.as_deref(),
                        _ => None,
                    })
                    .collect::<Vec<_>>(),
            ),
            _ => q.bind(
                values
                    .map(|v| match v {
                        SqlValue::Text(x) => x.as_deref(),
                        _ => None,
                    })
                    .collect::<Vec<_>>(),
            ),
        };
    }
    q.execute(pg).await.map(drop)
}

/// Appends `v` as one CSV field (NULL is an empty unquoted field, text is always quoted).
fn csv_field(out: &mut Vec<u8>, v: &SqlValue) {
    use std::io::Write;
    match v {
        SqlValue::Int(Some(i)) => {
            let _ = write!(out, "{i}");
        }
        SqlValue::Float(Some(f)) => {
            let _ = write!(out, "{f:?}");
        }
        SqlValue::Bool(Some(b)) => out.push(if *b { b't' } else { b'f' }),
        SqlValue::Text(Some(s)) => quoted(out, s.as_bytes()),
        SqlValue::Bytes(Some(b), _) => {
            out.extend_from_slice(b"\"\\x");
            for byte in b {
                let _ = write!(out, "{byte:02x}");
            }
            out.push(b'"');
        }
        _ => {}
    }
}

fn quoted(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &b in s {
        if b == b'"' {
            out.push(b'"');
        }
        out.push(b);
    }
    out.push(b'"');
}

/// The rows of `run` as COPY CSV.
pub(crate) fn csv(run: &[Change]) -> Vec<u8> {
    let mut out = Vec::with_capacity(run.len() * 64);
    for change in run {
        for (i, v) in change.values.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            csv_field(&mut out, v);
        }
        out.push(b'\n');
    }
    out
}

/// `COPY ... FROM STDIN (FORMAT csv)` of `run`.
pub(crate) async fn copy_in(
    pg: &mut PgConnection,
    plan: &Plan,
    run: &[Change],
) -> Result<(), sqlx::Error> {
    let data = csv(run);
    let mut copy = pg.copy_in_raw(&plan.copy_sql()).await?;
    if let Err(e) = copy.send(data).await {
        let _ = copy.abort("rivus: sending failed").await;
        return Err(e);
    }
    copy.finish().await.map(drop)
}

#[cfg(test)]
mod tests {
    use super::csv;
    use crate::change::Change;
    use crate::value::SqlValue;

    #[test]
    fn csv_quotes_text_and_leaves_null_empty() {
        let rows = vec![Change {
            kept: Vec::new(),
            moved_from: None,
            delete: false,
            values: vec![
                SqlValue::Int(Some(7)),
                SqlValue::Text(Some("a \"b\", c".into())),
                SqlValue::Text(None),
                SqlValue::Text(Some(String::new())),
                SqlValue::Bool(Some(true)),
                SqlValue::Float(Some(1.0)),
            ],
        }];
        assert_eq!(
            String::from_utf8(csv(&rows)).unwrap(),
            "7,\"a \"\"b\"\", c\",,\"\",t,1.0\n"
        );
    }
}
