//! A reader schema applied to a record read with its writer's schema, on the JSON form (Avro's
//! resolution rules, as the specification states them): reader fields the writer lacked take
//! their defaults, writer fields the reader lacks are dropped, fields found by name or alias,
//! enum symbols the reader lacks take the enum's default, unions pick the first branch that
//! fits. Numeric promotions need nothing here (JSON numbers are JSON numbers).
//!
//! Done on JSON rather than inside `apache-avro`'s reader because that resolution refuses
//! byte-backed decimals whose value is shorter than the precision needs at most ("Precision 9
//! too small to hold decimal values with 1 bytes"), which is every small amount.

use apache_avro::schema::{Names, RecordField};
use apache_avro::types::Value as Avro;
use apache_avro::Schema;
use serde_json::{Map, Value};

use super::to_json;

/// `v` (a record read with its writer's schema) in the shape of `reader`.
pub(super) fn project(v: Value, reader: &Schema, names: &Names) -> Result<Value, String> {
    let reader = match reader {
        Schema::Ref { name } => names
            .get(name)
            .ok_or_else(|| format!("the reader schema names `{name}` but never defines it"))?,
        s => s,
    };
    match (reader, v) {
        (Schema::Record(r), Value::Object(mut o)) => {
            let mut out = Map::with_capacity(r.fields.len());
            for f in &r.fields {
                let found = std::iter::once(&f.name)
                    .chain(f.aliases.iter())
                    .find_map(|n| o.remove(n));
                let value = match found {
                    Some(x) => {
                        project(x, &f.schema, names).map_err(|e| format!("{}: {e}", f.name))?
                    }
                    None => default_of(f, names)?,
                };
                out.insert(f.name.clone(), value);
            }
            Ok(Value::Object(out))
        }
        (Schema::Union(u), v) => {
            if v.is_null() && u.variants().iter().any(|s| matches!(s, Schema::Null)) {
                return Ok(Value::Null);
            }
            let mut last = None;
            for s in u.variants().iter().filter(|s| !matches!(s, Schema::Null)) {
                match project(v.clone(), s, names) {
                    Ok(p) if fits(&p, s, names) => return Ok(p),
                    Ok(_) => {}
                    Err(e) => last = Some(e),
                }
            }
            Err(last.unwrap_or_else(|| format!("{v} fits no branch of the reader's union")))
        }
        (Schema::Array(a), Value::Array(items)) => items
            .into_iter()
            .map(|i| project(i, &a.items, names))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        (Schema::Map(m), Value::Object(o)) => o
            .into_iter()
            .map(|(k, i)| project(i, &m.types, names).map(|p| (k, p)))
            .collect::<Result<Map<_, _>, _>>()
            .map(Value::Object),
        (Schema::Enum(e), Value::String(s)) => {
            if e.symbols.contains(&s) {
                Ok(Value::String(s))
            } else if let Some(d) = &e.default {
                Ok(Value::String(d.clone()))
            } else {
                Err(format!(
                    "`{s}` is not a symbol of the reader's enum {} and it has no default",
                    e.name
                ))
            }
        }
        (_, v) => Ok(v),
    }
}

/// Whether a projected value has the JSON shape of `s` (to choose a union's branch).
fn fits(v: &Value, s: &Schema, names: &Names) -> bool {
    match (s, v) {
        (Schema::Ref { name }, _) => names.get(name).is_some_and(|t| fits(v, t, names)),
        (Schema::Null, Value::Null) => true,
        (Schema::Boolean, Value::Bool(_)) => true,
        (Schema::Int | Schema::Long, Value::Number(n)) => n.is_i64() || n.is_u64(),
        (Schema::Float | Schema::Double, Value::Number(_) | Value::String(_)) => true,
        (Schema::Record(_) | Schema::Map(_), Value::Object(_)) => true,
        (Schema::Array(_), Value::Array(_)) => true,
        (Schema::Duration(_), Value::Object(_)) => true,
        (Schema::Null | Schema::Boolean | Schema::Int | Schema::Long, _) => false,
        (Schema::Record(_) | Schema::Map(_) | Schema::Array(_) | Schema::Duration(_), _) => false,
        (_, Value::String(_)) => true,
        _ => false,
    }
}

/// A field's default (Avro's JSON encoding of it) in the JSON mapping of its schema.
fn default_of(f: &RecordField, names: &Names) -> Result<Value, String> {
    let Some(d) = &f.default else {
        return Err(format!(
            "{}: the writer's record has no such field and the reader's has no default",
            f.name
        ));
    };
    // A union's default is of its first branch.
    let schema = match &f.schema {
        Schema::Union(u) => u.variants().first().unwrap_or(&f.schema),
        s => s,
    };
    let resolved = Avro::try_from(d.clone())
        .and_then(|v| v.resolve(schema))
        .map_err(|e| format!("{}: its default {d}: {e}", f.name))?;
    Ok(to_json(resolved, schema, names))
}
