//! [`Template`]: a destination named per record — a table, a topic, an index, a key — as text
//! with fields of the record in braces: `replica.{source.table}`, `orders-{at:%Y.%m}`.
//!
//! - `{a.b}` is the record's field `b` of the object `a`: text as it is, a number or a
//!   boolean as JSON writes it; a missing field, a null, an object or an array is an error
//!   naming the field (the record then goes to the error policy, never to a made-up place).
//! - `{a:%Y.%m}` formats a time: the field holds RFC 3339 text, a date (`YYYY-MM-DD`) or
//!   milliseconds since the epoch, and the pattern uses `%Y %m %d %H %M %S` (UTC,
//!   [`crate::calendar::format`]). `{event_time:…}` is the record's timestamp where the sink
//!   has one, `{processing_time:…}` the time now.
//! - `{%kafka.topic}` is the record's metadata (see [`crate::metadata`]): what its source
//!   knows about it beside its value, or what a VRL program set.
//! - `{{` and `}}` are braces themselves.
//!
//! A template without fields is a fixed name; [`Template::fixed`] says so, and a sink keeps
//! its one-destination path for it.

use std::borrow::Cow;

use serde_json::Value;

/// A parsed destination template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    text: String,
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Field {
        /// The names to look up (`@metadata` first for a `%` path).
        path: Vec<String>,
        /// The path as written (`source.table`, `%kafka.topic`), for errors and `check`.
        name: String,
        time: Option<String>,
    },
}

impl Template {
    /// Parses `text`; the error says what is wrong and where (a 1-based character position).
    pub fn parse(text: &str) -> Result<Template, String> {
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut chars = text.char_indices().peekable();
        while let Some((at, c)) = chars.next() {
            match c {
                '{' if chars.peek().map(|p| p.1) == Some('{') => {
                    chars.next();
                    literal.push('{');
                }
                '}' if chars.peek().map(|p| p.1) == Some('}') => {
                    chars.next();
                    literal.push('}');
                }
                '}' => {
                    return Err(format!(
                        "a `}}` without its `{{` at character {} (write `}}}}` for a brace)",
                        at + 1
                    ))
                }
                '{' => {
                    let mut inner = String::new();
                    let mut closed = false;
                    for (_, c) in chars.by_ref() {
                        if c == '}' {
                            closed = true;
                            break;
                        }
                        inner.push(c);
                    }
                    if !closed {
                        return Err(format!("the `{{` at character {} is never closed", at + 1));
                    }
                    if !literal.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut literal)));
                    }
                    parts.push(field(&inner).map_err(|e| format!("`{{{inner}}}`: {e}"))?);
                }
                c => literal.push(c),
            }
        }
        if !literal.is_empty() {
            parts.push(Part::Text(literal));
        }
        Ok(Template {
            text: text.to_owned(),
            parts,
        })
    }

    /// The name when the template has no fields: every record goes to it.
    pub fn fixed(&self) -> Option<&str> {
        match self.parts.as_slice() {
            [] => Some(""),
            [Part::Text(t)] => Some(t),
            _ => None,
        }
    }

    /// The template as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The paths of the fields the template reads (`source.table`, `%kafka.topic`), in
    /// order.
    pub fn fields(&self) -> impl Iterator<Item = String> + '_ {
        self.parts.iter().filter_map(|p| match p {
            Part::Field { name, .. } => Some(name.clone()),
            Part::Text(_) => None,
        })
    }

    /// Whether the template reads the record's metadata (`{%kafka.topic}`).
    pub fn reads_metadata(&self) -> bool {
        self.parts.iter().any(|p| match p {
            Part::Field { path, .. } => path.first().is_some_and(|f| f == crate::metadata::KEY),
            Part::Text(_) => false,
        })
    }

    /// The destination of `record`, or why it has none.
    pub fn render<'a>(&'a self, record: &Value) -> Result<Cow<'a, str>, String> {
        match self.fixed() {
            Some(fixed) => Ok(Cow::Borrowed(fixed)),
            None => self
                .render_with(record, None, |_, _| Ok(()))
                .map(Cow::Owned),
        }
    }

    /// The destination of `record` whose timestamp is `event_time` (ms), each field's text
    /// first passed to `check` (its path and text: a path segment refuses `/`, say).
    pub fn render_with(
        &self,
        record: &Value,
        event_time: Option<i64>,
        check: impl Fn(&str, &str) -> Result<(), String>,
    ) -> Result<String, String> {
        let mut out = String::with_capacity(self.text.len() + 16);
        for part in &self.parts {
            let (names, path, time) = match part {
                Part::Text(t) => {
                    out.push_str(t);
                    continue;
                }
                Part::Field { path, name, time } => (path, name, time),
            };
            let text = match (path.as_str(), time) {
                ("event_time", Some(p)) => {
                    crate::calendar::format(event_time.ok_or("the record has no event time")?, p)
                }
                ("processing_time", Some(p)) => {
                    crate::calendar::format(crate::calendar::now_ms(), p)
                }
                (_, time) => {
                    let value = names
                        .iter()
                        .try_fold(record, |v, n| v.as_object()?.get(n))
                        .filter(|v| !v.is_null())
                        .ok_or_else(|| format!("field `{path}` is missing or null"))?;
                    match (time, value) {
                        (Some(p), v) => crate::calendar::format(
                            millis(v).ok_or_else(|| {
                                format!(
                                    "field `{path}` is not a time (RFC 3339 text, a date or \
                                     milliseconds since the epoch): {}",
                                    short(v)
                                )
                            })?,
                            p,
                        ),
                        (None, Value::String(s)) => s.clone(),
                        (None, Value::Number(n)) => n.to_string(),
                        (None, Value::Bool(b)) => b.to_string(),
                        (None, other) => {
                            return Err(format!("field `{path}` is {}, not a name", short(other)))
                        }
                    }
                }
            };
            check(path, &text)?;
            out.push_str(&text);
        }
        Ok(out)
    }
}

impl std::fmt::Display for Template {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

fn field(inner: &str) -> Result<Part, String> {
    let (path, time) = match inner.split_once(':') {
        Some((p, t)) => {
            crate::calendar::check_format(t)?;
            (p, Some(t.to_owned()))
        }
        None => (inner, None),
    };
    let path = path.trim();
    let (meta, names) = match path.strip_prefix('%') {
        Some(rest) => (true, rest),
        None => (false, path),
    };
    let mut path: Vec<String> = names.split('.').map(str::to_owned).collect();
    if path.iter().any(String::is_empty) {
        return Err("a field path is names joined by dots (`source.table`, `%kafka.topic`)".into());
    }
    if meta {
        path.insert(0, crate::metadata::KEY.to_owned());
    }
    let name = crate::metadata::shown(&path);
    if time.is_none() && matches!(name.as_str(), "event_time" | "processing_time") {
        return Err(format!("a time needs a format, e.g. `{{{name}:%Y-%m-%d}}`"));
    }
    Ok(Part::Field { path, name, time })
}

fn millis(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => crate::calendar::parse_instant(s, 1000)
            .or_else(|| crate::calendar::parse_date(s).map(|d| d * 86_400_000)),
        _ => None,
    }
}

fn short(v: &Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(60) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_and_times_fill_the_name() {
        let t = Template::parse("cdc.{source.schema}.{source.table}").unwrap();
        assert_eq!(t.fixed(), None);
        let rec = json!({"source": {"schema": "public", "table": "orders"}});
        assert_eq!(t.render(&rec).unwrap(), "cdc.public.orders");
        assert_eq!(
            t.fields().collect::<Vec<_>>(),
            ["source.schema", "source.table"]
        );
        let t = Template::parse("orders-{ts:%Y.%m}").unwrap();
        assert_eq!(
            t.render(&json!({"ts": "2024-03-01T10:00:00Z"})).unwrap(),
            "orders-2024.03"
        );
        assert_eq!(
            t.render(&json!({"ts": 1_709_287_200_000_i64})).unwrap(),
            "orders-2024.03"
        );
        let t = Template::parse("k:{id}:{ok}").unwrap();
        assert_eq!(t.render(&json!({"id": 7, "ok": true})).unwrap(), "k:7:true");
    }

    #[test]
    fn metadata_fields() {
        let t = Template::parse("copy.{%kafka.topic}.{region}").unwrap();
        assert!(t.reads_metadata());
        assert!(!Template::parse("{region}").unwrap().reads_metadata());
        assert_eq!(t.fields().collect::<Vec<_>>(), ["%kafka.topic", "region"]);
        let rec = json!({"region": "eu", "@metadata": {"kafka": {"topic": "orders"}}});
        assert_eq!(t.render(&rec).unwrap(), "copy.orders.eu");
        let e = t.render(&json!({"region": "eu"})).unwrap_err();
        assert!(e.contains("`%kafka.topic` is missing"), "{e}");
        assert!(Template::parse("{%}").is_err());
    }

    #[test]
    fn a_fixed_name_and_braces() {
        let t = Template::parse("orders").unwrap();
        assert_eq!(t.fixed(), Some("orders"));
        assert_eq!(t.render(&json!(null)).unwrap(), "orders");
        let t = Template::parse("a{{b}}").unwrap();
        assert_eq!(t.fixed(), Some("a{b}"));
    }

    #[test]
    fn bad_templates_and_records_say_what_is_wrong() {
        assert!(Template::parse("x{a").unwrap_err().contains("never closed"));
        assert!(Template::parse("x}").unwrap_err().contains("character 2"));
        assert!(Template::parse("{a..b}").unwrap_err().contains("`{a..b}`"));
        assert!(Template::parse("{a:%Q}").unwrap_err().contains("%Q"));
        let t = Template::parse("t_{source.table}").unwrap();
        let e = t.render(&json!({})).unwrap_err();
        assert!(e.contains("`source.table` is missing"), "{e}");
        let e = t
            .render(&json!({"source": {"table": {"a": 1}}}))
            .unwrap_err();
        assert!(e.contains("not a name"), "{e}");
        assert!(Template::parse("{event_time}")
            .unwrap_err()
            .contains("format"));
        let t = Template::parse("d={event_time:%Y}/{at:%m}").unwrap();
        let ok = |_: &str, _: &str| Ok(());
        assert_eq!(
            t.render_with(&json!({"at": "2024-03-01"}), Some(0), ok)
                .unwrap(),
            "d=1970/03"
        );
        assert!(t
            .render_with(&json!({"at": "2024-03-01"}), None, ok)
            .unwrap_err()
            .contains("no event time"));
        let t = Template::parse("{at:%Y}").unwrap();
        assert!(t
            .render(&json!({"at": "soon"}))
            .unwrap_err()
            .contains("not a time"));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

        /// Any template over any record: refused at parse, filled in, or refused naming the
        /// missing field — never a panic.
        #[test]
        fn templates_never_panic_and_name_the_missing_field(
            t in "[a-z{}:.%Y]{0,30}",
            fields in proptest::collection::btree_map("[a-z]{1,3}", ".{0,8}", 0..4),
        ) {
            let record = Value::Object(fields.iter().map(|(k, v)| (k.clone(), json!(v))).collect());
            let Ok(template) = Template::parse(&t) else { return Ok(()) };
            match template.render(&record) {
                Ok(out) => {
                    if !t.contains(['{', '}']) {
                        proptest::prop_assert_eq!(out, t);
                    }
                }
                Err(e) => {
                    let missing = e
                        .split("field `")
                        .nth(1)
                        .and_then(|r| r.split('`').next())
                        .unwrap_or_default()
                        .to_owned();
                    proptest::prop_assert!(t.contains(&missing), "{e}");
                }
            }
        }
    }
}
