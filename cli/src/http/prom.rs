//! Reads the Prometheus text that the job's metrics recorder renders back into samples, so the
//! status API shows exactly the figures `/metrics` serves.

use std::collections::BTreeMap;

/// One sample line: `name{label="value",...} value`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

impl Sample {
    pub(super) fn label(&self, key: &str) -> &str {
        self.labels.get(key).map_or("", String::as_str)
    }
}

/// The samples of an exposition text; comment lines and lines it cannot read are skipped.
pub(super) fn parse(text: &str) -> Vec<Sample> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let (name, rest) = match line.find(['{', ' ']) {
        Some(i) => line.split_at(i),
        None => return None,
    };
    let (labels, rest) = if let Some(body) = rest.strip_prefix('{') {
        parse_labels(body)?
    } else {
        (BTreeMap::new(), rest)
    };
    // A timestamp may follow the value.
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// `k="v",k2="v2"} rest` → the labels and `rest`.
fn parse_labels(mut s: &str) -> Option<(BTreeMap<String, String>, &str)> {
    let mut labels = BTreeMap::new();
    loop {
        s = s.trim_start_matches([',', ' ']);
        if let Some(rest) = s.strip_prefix('}') {
            return Some((labels, rest));
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim().to_owned();
        s = s[eq + 1..].strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let end = loop {
            match chars.next()? {
                (i, '"') => break i,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (_, c) => value.push(c),
            }
        };
        labels.insert(key, value);
        s = &s[end + 1..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_names_labels_values_and_escapes() {
        let text = "# TYPE rivus_records_in_total counter\n\
            rivus_records_in_total{job=\"j\",task=\"source -> sink\",subtask=\"1\"} 42\n\
            rivus_kafka_consumer_lag{partition=\"t/0\",note=\"a \\\"b\\\" \\\\ c\"} 7 1700000000\n\
            rivus_up 1\n\
            q{quantile=\"0.99\"} +Inf\n\
            broken{x=\"1\" 3\n";
        let s = parse(text);
        assert_eq!(s.len(), 4, "{s:?}");
        assert_eq!(s[0].name, "rivus_records_in_total");
        assert_eq!(s[0].label("task"), "source -> sink");
        assert_eq!(s[0].label("subtask"), "1");
        assert_eq!(s[0].value, 42.0);
        assert_eq!(s[1].label("note"), "a \"b\" \\ c");
        assert_eq!(s[1].value, 7.0);
        assert_eq!((s[2].name.as_str(), s[2].value), ("rivus_up", 1.0));
        assert!(s[3].value.is_infinite());
    }
}
