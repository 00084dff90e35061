//! Partition directories from a template, and file names. A template is text with fields:
//! `{name}` (a record field; `a.b` for a nested one), `{name:%Y-%m-%d}` (a field holding
//! milliseconds since the epoch or RFC 3339 text, formatted), `{event_time:…}` (the record's
//! timestamp) and `{processing_time:…}` (now). Formats take `%Y %m %d %H %M %S` and text.
//! Example: `orders/dt={event_time:%Y-%m-%d}/hour={event_time:%H}/`.
//!
//! A record whose field is missing, null, or would make a path (`/`, `..`) cannot be placed: it
//! goes to the error policy.

use serde_json::Value;

use rivus_sdk::template::Template;
use rivus_sdk::{Error, Result};

/// A parsed partition template: core's [`Template`] whose fields must each make one path
/// segment, ending in `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathTemplate {
    template: Template,
}

impl Default for PathTemplate {
    fn default() -> Self {
        PathTemplate::parse("", "path").expect("the empty template parses")
    }
}

impl PathTemplate {
    /// Parses `template`; errors name `path` (the option holding it).
    pub fn parse(template: &str, path: &str) -> Result<PathTemplate> {
        let mut text = template.to_owned();
        if !text.is_empty() && !text.ends_with('/') {
            text.push('/');
        }
        let template = Template::parse(&text)
            .map_err(|e| Error::config(path, format!("`{template}`: {e}")))?;
        Ok(PathTemplate { template })
    }

    /// The directory of every record when the template has no field.
    pub fn fixed(&self) -> Option<String> {
        self.template.fixed().map(str::to_owned)
    }

    /// The directory of `record` (`event_time`: its timestamp, ms), or why it has none.
    pub fn render(
        &self,
        record: &Value,
        event_time: Option<i64>,
    ) -> std::result::Result<String, String> {
        self.template.render_with(record, event_time, |name, text| {
            if text.is_empty() || text.contains('/') || text == "." || text == ".." {
                return Err(format!(
                    "field `{name}` = \"{text}\" cannot be a path segment"
                ));
            }
            Ok(())
        })
    }
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
