//! A section's options described once: the JSON Schema derived from its serde type
//! ([`JsonSchema`], doc comments as descriptions), from which `rivus connectors` lists the
//! options ([`options`]) and `rivus schema` assembles the schema of a whole pipeline file.

use std::borrow::Cow;

use serde_json::{Map, Value};

pub use schemars::JsonSchema;

use super::OptionDoc;

pub use rivus_sdk::options::DurationText;

/// The JSON Schema of `T` (draft 2020-12; shared types under `$defs`).
pub fn schema_of<T: JsonSchema>() -> Value {
    schemars::schema_for!(T).to_value()
}

/// The options of a section whose schema is `schema`: required ones first, then by name.
pub fn options(schema: &Value) -> Vec<OptionDoc> {
    let defs = defs_of(schema);
    options_in(schema, &defs)
}

/// [`options`], and after each option whose value is a table of named keys (`tls`, `batch`),
/// those keys as options of their own (`tls.ca_file`): the reference pages' rows.
pub fn option_tree(schema: &Value) -> Vec<OptionDoc> {
    let defs = defs_of(schema);
    let mut out = Vec::new();
    nested(schema, &defs, "", None, &mut out);
    out
}

/// The rows of `schema`'s options under `prefix`; `given` is the table's own default, whose
/// keys are its options' defaults when they state none.
fn nested(
    schema: &Value,
    defs: &Map<String, Value>,
    prefix: &str,
    given: Option<&Value>,
    out: &mut Vec<OptionDoc>,
) {
    let resolved = resolve(schema, defs).into_owned();
    let props = resolved.get("properties").and_then(Value::as_object);
    for mut o in options_in(schema, defs) {
        let own = props.and_then(|p| p.get(&o.name));
        let inner = own.map(|p| table_of(p, defs)).filter(|t| {
            prefix.matches('.').count() < 3
                && t.get("properties")
                    .and_then(Value::as_object)
                    .is_some_and(|p| !p.is_empty())
        });
        if o.default.is_none() {
            o.default = given
                .and_then(|g| g.get(&o.name))
                .filter(|d| !d.is_null())
                .map(written);
        }
        let name = format!("{prefix}{}", o.name);
        o.name.clone_from(&name);
        let table_default = own.and_then(|p| p.get("default")).cloned();
        if inner.is_some() {
            // The table's keys carry its default, one each.
            o.default = None;
        }
        out.push(o);
        if let Some(t) = inner {
            nested(&t, defs, &format!("{name}."), table_default.as_ref(), out);
        }
    }
}

/// A default as the file would write it.
fn written(d: &Value) -> String {
    match d {
        Value::String(s) => format!("\"{s}\""),
        v => v.to_string(),
    }
}

/// The object an option's value is, seen through `Option` (`anyOf [T, null]`) and `$ref`.
fn table_of(schema: &Value, defs: &Map<String, Value>) -> Value {
    let s = resolve(schema, defs).into_owned();
    if let Some(Value::Array(choices)) = s.get("anyOf") {
        let real: Vec<&Value> = choices
            .iter()
            .filter(|c| c.get("type") != Some(&Value::from("null")))
            .collect();
        if let [one] = real.as_slice() {
            return resolve(one, defs).into_owned();
        }
    }
    s
}

fn defs_of(schema: &Value) -> Map<String, Value> {
    schema
        .get("$defs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

fn options_in(schema: &Value, defs: &Map<String, Value>) -> Vec<OptionDoc> {
    // A transparent wrapper is a reference to the section it wraps.
    let schema = resolve(schema, defs).into_owned();
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut out: Vec<OptionDoc> = props
        .iter()
        .map(|(name, p)| OptionDoc {
            name: name.clone(),
            ty: type_word(p, defs, 0),
            required: required.contains(&name.as_str()),
            default: p.get("default").filter(|d| !d.is_null()).map(written),
            doc: p
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            deprecated: p.get("deprecated") == Some(&Value::Bool(true)),
        })
        .collect();
    // Required first, then by name.
    out.sort_by(|a, b| {
        b.required
            .cmp(&a.required)
            .then_with(|| a.name.cmp(&b.name))
    });
    out
}

/// How the file writes a value of `schema`: `string`, `integer`, `bool`, `duration`,
/// `[string]`, `a|b|c`, `{ key, key }`.
fn type_word(schema: &Value, defs: &Map<String, Value>, depth: usize) -> String {
    let resolved = resolve(schema, defs);
    let s = resolved.as_ref();
    if depth > 4 {
        return "…".into();
    }
    if s.get("pattern").is_some() && s.get("type") == Some(&Value::from("string")) {
        if let Some(Value::String(d)) = s.get("description") {
            if d.starts_with("a positive duration") {
                return "duration".into();
            }
        }
    }
    if let Some(Value::String(c)) = s.get("const") {
        return format!("\"{c}\"");
    }
    if let Some(Value::Array(values)) = s.get("enum") {
        let words: Vec<String> = values
            .iter()
            .filter(|v| !v.is_null())
            .map(|v| {
                v.as_str()
                    .map_or_else(|| v.to_string(), |t| format!("\"{t}\""))
            })
            .collect();
        return words.join(" | ");
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(Value::Array(choices)) = s.get(key) {
            let words: Vec<String> = choices
                .iter()
                .filter(|c| c.get("type") != Some(&Value::from("null")))
                .map(|c| type_word(c, defs, depth + 1))
                .collect();
            return words.join(" | ");
        }
    }
    let ty = match s.get("type") {
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("any")
            .to_owned(),
        Some(Value::String(t)) => t.clone(),
        _ => "any".to_owned(),
    };
    match ty.as_str() {
        "boolean" => "bool".into(),
        "array" => match s.get("items") {
            Some(items) => format!("[{}]", type_word(items, defs, depth + 1)),
            None => "[any]".into(),
        },
        "object" => match s.get("properties").and_then(Value::as_object) {
            Some(props) if !props.is_empty() => {
                let keys: Vec<&str> = props.keys().map(String::as_str).collect();
                if keys.len() > 5 {
                    format!("{{ {}, … }}", keys[..3].join(", "))
                } else {
                    format!("{{ {} }}", keys.join(", "))
                }
            }
            _ => match s.get("additionalProperties") {
                Some(v) if v.is_object() => {
                    format!("{{ name = {} }}", type_word(v, defs, depth + 1))
                }
                _ => "table".into(),
            },
        },
        other => other.into(),
    }
}

/// `schema` with a `$ref` to `#/$defs/NAME` replaced by the definition.
fn resolve<'a>(schema: &'a Value, defs: &'a Map<String, Value>) -> Cow<'a, Value> {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => match r.strip_prefix("#/$defs/").and_then(|n| defs.get(n)) {
            Some(d) => Cow::Borrowed(d),
            None => Cow::Borrowed(schema),
        },
        None => Cow::Borrowed(schema),
    }
}

/// The schema of a `[source]`, `[sink]` or `[errors.destination]` section of type `kind`:
/// `schema` (its options) with the `type` key, required and fixed to `kind`.
pub fn section_schema(kind: &str, mut schema: Value) -> Value {
    if let Some(obj) = schema.as_object_mut() {
        let props = obj
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(props) = props.as_object_mut() {
            props.insert(
                "type".into(),
                serde_json::json!({ "const": kind, "description": "the connector" }),
            );
        }
        let required = obj
            .entry("required")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Some(r) = required.as_array_mut() {
            r.insert(0, Value::from("type"));
        }
        obj.remove("$schema");
        obj.insert("title".into(), Value::from(kind));
    }
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An example section.
    #[derive(serde::Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Example {
        /// Where to connect.
        url: String,
        /// Topics to read.
        #[serde(default)]
        topics: Vec<String>,
        /// How often.
        #[serde(default, deserialize_with = "crate::opt_duration")]
        #[schemars(with = "Option<DurationText>")]
        every: Option<std::time::Duration>,
        /// How.
        #[serde(default)]
        mode: Mode,
    }

    #[derive(serde::Deserialize, JsonSchema, Default)]
    #[serde(rename_all = "kebab-case")]
    #[allow(dead_code)]
    enum Mode {
        #[default]
        Insert,
        Upsert,
    }

    #[test]
    fn options_are_read_from_the_derived_schema() {
        let o = options(&schema_of::<Example>());
        let rendered: Vec<String> = o.iter().map(OptionDoc::render).collect();
        assert_eq!(
            rendered,
            vec![
                "url: string (required)",
                "every: duration (optional)",
                "mode: \"insert\" | \"upsert\" (optional)",
                "topics: [string] = []",
            ],
            "{o:#?}"
        );
        assert_eq!(o[0].doc, "Where to connect.");
        assert_eq!(o[2].doc, "How.");
    }
}
