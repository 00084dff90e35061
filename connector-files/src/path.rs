//! Partition directories from a template, and file names. A template is text with fields:
//! `{name}` (a record field; `a.b` for a nested one), `{name:%Y-%m-%d}` (a field holding
//! milliseconds since the epoch or RFC 3339 text, formatted), `{event_time:…}` (the record's
//! timestamp) and `{processing_time:…}` (now). Formats take `%Y %m %d %H %M %S` and text.
//! Example: `orders/dt={event_time:%Y-%m-%d}/hour={event_time:%H}/`.
//!
//! A record whose field is missing, null, or would make a path (`/`, `..`) cannot be placed: it
//! goes to the error policy.

use serde_json::Value;

use rivus_core::calendar;
use rivus_core::{Error, Result};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Field {
        name: String,
        format: Option<String>,
    },
}

/// A parsed partition template.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PathTemplate {
    pieces: Vec<Piece>,
}

impl PathTemplate {
    /// Parses `template`; errors name `path` (the option holding it).
    pub fn parse(template: &str, path: &str) -> Result<PathTemplate> {
        let mut pieces = Vec::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                pieces.push(Piece::Text(rest[..open].to_owned()));
            }
            let close = rest[open..].find('}').ok_or_else(|| {
                Error::config(path, format!("`{template}`: a `{{` without its `}}`"))
            })? + open;
            let inner = &rest[open + 1..close];
            let (name, format) = match inner.split_once(':') {
                Some((n, f)) => (n, Some(f.to_owned())),
                None => (inner, None),
            };
            if name.is_empty() {
                return Err(Error::config(
                    path,
                    format!("`{template}`: an empty field name"),
                ));
            }
            if let Some(f) = &format {
                calendar::check_format(f)
                    .map_err(|e| Error::config(path, format!("`{template}`: {e}")))?;
            } else if name == "event_time" || name == "processing_time" {
                return Err(Error::config(
                    path,
                    format!(
                        "`{template}`: `{{{name}}}` needs a format, e.g. `{{{name}:%Y-%m-%d}}`"
                    ),
                ));
            }
            pieces.push(Piece::Field {
                name: name.to_owned(),
                format,
            });
            rest = &rest[close + 1..];
        }
        if !rest.is_empty() {
            pieces.push(Piece::Text(rest.to_owned()));
        }
        let mut t = PathTemplate { pieces };
        if let Some(Piece::Text(last)) = t.pieces.last_mut() {
            if !last.ends_with('/') {
                last.push('/');
            }
        } else if !t.pieces.is_empty() {
            t.pieces.push(Piece::Text("/".into()));
        }
        Ok(t)
    }

    /// The directory of every record when the template has no field.
    pub fn fixed(&self) -> Option<String> {
        let mut out = String::new();
        for p in &self.pieces {
            match p {
                Piece::Text(t) => out.push_str(t),
                Piece::Field { .. } => return None,
            }
        }
        Some(out)
    }

    /// The directory of `record` (`event_time`: its timestamp, ms), or why it has none.
    pub fn render(
        &self,
        record: &Value,
        event_time: Option<i64>,
    ) -> std::result::Result<String, String> {
        let mut out = String::new();
        for p in &self.pieces {
            match p {
                Piece::Text(t) => out.push_str(t),
                Piece::Field { name, format } => {
                    let ms = |v: &Value| -> std::result::Result<i64, String> {
                        match v {
                            Value::Number(n) => n
                                .as_i64()
                                .ok_or_else(|| format!("`{name}` = {n} is not milliseconds")),
                            Value::String(s) => calendar::parse_instant(s, 1000)
                                .or_else(|| calendar::parse_date(s).map(|d| d * 86_400_000))
                                .ok_or_else(|| format!("`{name}` = \"{s}\" is not a time")),
                            other => Err(format!("`{name}` = {other} is not a time")),
                        }
                    };
                    let text = match (name.as_str(), format) {
                        ("event_time", Some(f)) => {
                            let t = event_time.ok_or("the record has no event time")?;
                            calendar::format(t, f)
                        }
                        ("processing_time", Some(f)) => calendar::format(calendar::now_ms(), f),
                        (_, f) => {
                            let v = field(record, name)
                                .ok_or_else(|| format!("field `{name}` is missing or null"))?;
                            match f {
                                Some(f) => calendar::format(ms(v)?, f),
                                None => match v {
                                    Value::String(s) => s.clone(),
                                    Value::Number(_) | Value::Bool(_) => v.to_string(),
                                    _ => {
                                        return Err(format!(
                                            "field `{name}` is not a text, number or boolean"
                                        ))
                                    }
                                },
                            }
                        }
                    };
                    if text.is_empty() || text.contains('/') || text == "." || text == ".." {
                        return Err(format!(
                            "field `{name}` = \"{text}\" cannot be a path segment"
                        ));
                    }
                    out.push_str(&text);
                }
            }
        }
        Ok(out)
    }
}

fn field<'a>(record: &'a Value, name: &str) -> Option<&'a Value> {
    let mut v = record;
    for part in name.split('.') {
        v = v.get(part)?;
    }
    (!v.is_null()).then_some(v)
}

/// A file's name: `part-<attempt>-<job tag>-<subtask>-<sequence>.<ext>` — unique per job,
/// subtask and attempt, and sorting in the order written (the attempt is its start, ms since
/// the epoch).
pub(crate) fn file_name(attempt: &str, tag: &str, subtask: usize, seq: u64, ext: &str) -> String {
    format!("part-{attempt}-{tag}-{subtask:03}-{seq:06}.{ext}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn templates_place_records_or_say_why_not() {
        let t = PathTemplate::parse(
            "orders/dt={event_time:%Y-%m-%d}/hour={event_time:%H}/c={country}",
            "x",
        )
        .unwrap();
        // 2024-03-01T10:05:00Z
        let ms = 1_709_287_500_000;
        assert_eq!(
            t.render(&json!({"country": "fr"}), Some(ms)).unwrap(),
            "orders/dt=2024-03-01/hour=10/c=fr/"
        );
        assert!(t
            .render(&json!({}), Some(ms))
            .unwrap_err()
            .contains("`country`"));
        assert!(t
            .render(&json!({"country": "a/b"}), Some(ms))
            .unwrap_err()
            .contains("path segment"));
        assert!(t
            .render(&json!({"country": "fr"}), None)
            .unwrap_err()
            .contains("event time"));
        let by_field = PathTemplate::parse("d={at:%Y%m%d}", "x").unwrap();
        assert_eq!(
            by_field
                .render(&json!({"at": "2024-03-01T23:59:59Z"}), None)
                .unwrap(),
            "d=20240301/"
        );
        assert_eq!(
            by_field.render(&json!({"at": ms}), None).unwrap(),
            "d=20240301/"
        );
        let e = PathTemplate::parse("d={at:%q}", "path").unwrap_err();
        assert!(e.to_string().contains("`path`"), "{e}");
        assert!(PathTemplate::parse("d={event_time}", "x").is_err());
        assert_eq!(
            PathTemplate::parse("", "x")
                .unwrap()
                .render(&json!({}), None)
                .unwrap(),
            ""
        );
        assert!(file_name("0001", "t", 2, 7, "parquet") < file_name("0001", "t", 2, 10, "parquet"));
        assert_eq!(
            PathTemplate::parse("a/b", "x").unwrap().fixed().as_deref(),
            Some("a/b/")
        );
        assert_eq!(t.fixed(), None);
    }
}
