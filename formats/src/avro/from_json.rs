//! JSON records written as the Avro binary of a schema — the inverse of `decode.rs`, strict: a record
//! that does not fit fails with the path of the field that did not (`items[2].price`) and what
//! was expected. A field the schema does not have is refused (it would be dropped silently);
//! a missing field takes its default, or null when its type is a union with null.
//!
//! Besides the forms `to_json.rs` writes, numbers are accepted for decimals, and integers (units
//! since the epoch or midnight) for dates, times and timestamps.

use apache_avro::schema::{DecimalSchema, InnerDecimalSchema, Names, RecordSchema, UuidSchema};
use apache_avro::Schema;
use base64::Engine as _;
use num_bigint::BigInt;
use serde_json::Value;

use rivus_sdk::calendar;

/// A record did not fit its schema: where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Misfit {
    /// The path of the field (`$` for the record itself).
    pub path: String,
    /// What was expected and found.
    pub message: String,
}

impl std::fmt::Display for Misfit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Appends `v` as the Avro binary of `schema` to `out` (on a misfit, `out` is left as it was).
pub(super) fn write(
    v: &Value,
    schema: &Schema,
    names: &Names,
    out: &mut Vec<u8>,
) -> Result<(), Misfit> {
    let mut path = Vec::new();
    let start = out.len();
    convert(v, schema, names, &mut path, out).inspect_err(|_| out.truncate(start))
}

/// Zig-zag varint of a long.
pub(crate) fn long(n: i64, out: &mut Vec<u8>) {
    let mut z = ((n << 1) ^ (n >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn bytes_of(b: &[u8], out: &mut Vec<u8>) {
    long(b.len() as i64, out);
    out.extend_from_slice(b);
}

fn misfit(path: &[String], message: String) -> Misfit {
    let mut p = String::new();
    for seg in path {
        if !seg.starts_with('[') && !p.is_empty() {
            p.push('.');
        }
        p.push_str(seg);
    }
    Misfit {
        path: if p.is_empty() { "$".into() } else { p },
        message,
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "text",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn convert(
    v: &Value,
    schema: &Schema,
    names: &Names,
    path: &mut Vec<String>,
    out: &mut Vec<u8>,
) -> Result<(), Misfit> {
    let wrong =
        |path: &[String], want: &str| misfit(path, format!("expected {want}, got {}", kind(v)));
    match (schema, v) {
        (Schema::Ref { name }, _) => {
            let target = names.get(name).ok_or_else(|| {
                misfit(
                    path,
                    format!("the schema names `{name}` but never defines it"),
                )
            })?;
            return convert(v, target, names, path, out);
        }
        (Schema::Null, Value::Null) => {}
        (Schema::Boolean, Value::Bool(b)) => out.push(u8::from(*b)),
        (Schema::Int, Value::Number(n)) => long(
            n.as_i64()
                .filter(|i| i32::try_from(*i).is_ok())
                .ok_or_else(|| misfit(path, format!("{n} is not a 32-bit integer (int)")))?,
            out,
        ),
        (Schema::Long, Value::Number(n)) => long(
            n.as_i64()
                .ok_or_else(|| misfit(path, format!("{n} is not a 64-bit integer (long)")))?,
            out,
        ),
        (Schema::Float, _) => out.extend_from_slice(
            &(float(v).ok_or_else(|| wrong(path, "a number (float)"))? as f32).to_le_bytes(),
        ),
        (Schema::Double, _) => out.extend_from_slice(
            &float(v)
                .ok_or_else(|| wrong(path, "a number (double)"))?
                .to_le_bytes(),
        ),
        (Schema::String, Value::String(s)) => bytes_of(s.as_bytes(), out),
        (Schema::Bytes, _) => bytes_of(
            &bytes(v).ok_or_else(|| wrong(path, "base64 text (bytes)"))?,
            out,
        ),
        (Schema::Fixed(f), _) => {
            let b = bytes(v).ok_or_else(|| wrong(path, "base64 text (fixed)"))?;
            if b.len() != f.size {
                return Err(misfit(
                    path,
                    format!("{} bytes for a fixed of {}", b.len(), f.size),
                ));
            }
            out.extend_from_slice(&b);
        }
        (Schema::Enum(e), Value::String(s)) => {
            let i = e.symbols.iter().position(|x| x == s).ok_or_else(|| {
                misfit(
                    path,
                    format!(
                        "`{s}` is not a symbol of enum {} ({})",
                        e.name,
                        e.symbols.join(", ")
                    ),
                )
            })?;
            long(i as i64, out);
        }
        (Schema::Array(a), Value::Array(items)) => {
            if !items.is_empty() {
                long(items.len() as i64, out);
                for (i, item) in items.iter().enumerate() {
                    path.push(format!("[{i}]"));
                    convert(item, &a.items, names, path, out)?;
                    path.pop();
                }
            }
            out.push(0);
        }
        (Schema::Map(m), Value::Object(o)) => {
            if !o.is_empty() {
                long(o.len() as i64, out);
                for (k, item) in o {
                    path.push(format!("[{k:?}]"));
                    bytes_of(k.as_bytes(), out);
                    convert(item, &m.types, names, path, out)?;
                    path.pop();
                }
            }
            out.push(0);
        }
        (Schema::Record(r), Value::Object(_)) => record(v, r, names, path, out)?,
        (Schema::Union(u), _) => {
            let variants = u.variants();
            if v.is_null() {
                let i = variants
                    .iter()
                    .position(|s| matches!(s, Schema::Null))
                    .ok_or_else(|| misfit(path, "null for a union without null".into()))?;
                long(i as i64, out);
                return Ok(());
            }
            let mut last = None;
            for (i, s) in variants.iter().enumerate() {
                if matches!(s, Schema::Null) {
                    continue;
                }
                let start = out.len();
                long(i as i64, out);
                match convert(v, s, names, path, out) {
                    Ok(()) => return Ok(()),
                    Err(e) => {
                        out.truncate(start);
                        last = Some(e);
                    }
                }
            }
            return Err(last.unwrap_or_else(|| wrong(path, "a branch of the union")));
        }
        (Schema::Decimal(d), _) => decimal(v, d, out).map_err(|m| misfit(path, m))?,
        (Schema::Uuid(inner), Value::String(s)) => {
            let u = apache_avro::Uuid::parse_str(s)
                .map_err(|e| misfit(path, format!("`{s}` is not a UUID: {e}")))?;
            match inner {
                UuidSchema::String => bytes_of(u.hyphenated().to_string().as_bytes(), out),
                UuidSchema::Bytes => bytes_of(u.as_bytes(), out),
                UuidSchema::Fixed(_) => out.extend_from_slice(u.as_bytes()),
            }
        }
        (Schema::Date, _) => long(
            int_or(v, calendar::parse_date)
                .filter(|d| i32::try_from(*d).is_ok())
                .ok_or_else(|| wrong(path, "a date (`YYYY-MM-DD` or days since 1970-01-01)"))?,
            out,
        ),
        (Schema::TimeMillis, _) => long(
            int_or(v, |s| calendar::parse_time(s, 1000))
                .filter(|t| i32::try_from(*t).is_ok())
                .ok_or_else(|| wrong(path, "a time of day (`HH:MM:SS.fff` or milliseconds)"))?,
            out,
        ),
        (Schema::TimeMicros, _) => long(
            int_or(v, |s| calendar::parse_time(s, 1_000_000))
                .ok_or_else(|| wrong(path, "a time of day (`HH:MM:SS.ffffff` or microseconds)"))?,
            out,
        ),
        (Schema::TimestampMillis | Schema::LocalTimestampMillis, _) => {
            long(instant(v, 1000, path)?, out)
        }
        (Schema::TimestampMicros | Schema::LocalTimestampMicros, _) => {
            long(instant(v, 1_000_000, path)?, out)
        }
        (Schema::TimestampNanos | Schema::LocalTimestampNanos, _) => {
            long(instant(v, 1_000_000_000, path)?, out)
        }
        (Schema::Duration(_), Value::Object(o)) => {
            let part = |k: &str| {
                o.get(k)
                    .and_then(Value::as_u64)
                    .and_then(|n| u32::try_from(n).ok())
            };
            match (part("months"), part("days"), part("millis")) {
                (Some(m), Some(d), Some(ms)) => {
                    for p in [m, d, ms] {
                        out.extend_from_slice(&p.to_le_bytes());
                    }
                }
                _ => return Err(wrong(path, "{months, days, millis} (duration)")),
            }
        }
        (s, _) => return Err(wrong(path, &describe(s))),
    }
    Ok(())
}

fn describe(s: &Schema) -> String {
    match s {
        Schema::Record(r) => format!("an object (record {})", r.name),
        Schema::Map(_) => "an object (map)".into(),
        Schema::Array(_) => "an array".into(),
        Schema::Enum(e) => format!("a symbol of enum {}", e.name),
        Schema::Uuid(_) => "a UUID".into(),
        Schema::Duration(_) => "{months, days, millis} (duration)".into(),
        other => format!("{:?}", apache_avro::schema::SchemaKind::from(other)).to_lowercase(),
    }
}

fn record(
    v: &Value,
    r: &RecordSchema,
    names: &Names,
    path: &mut Vec<String>,
    out: &mut Vec<u8>,
) -> Result<(), Misfit> {
    let o = v.as_object().expect("matched an object");
    if let Some(extra) = o.keys().find(|k| !r.lookup.contains_key(*k)) {
        return Err(misfit(
            path,
            format!(
                "field `{extra}` is not in record {} (it would be lost)",
                r.name
            ),
        ));
    }
    for f in &r.fields {
        path.push(f.name.clone());
        match o.get(&f.name) {
            Some(x) => convert(x, &f.schema, names, path, out)?,
            None => match &f.default {
                // A default is Avro's JSON encoding, which for the types where it differs
                // from this mapping (bytes, logical types) is rarely given; it is taken as
                // this mapping's JSON.
                Some(d) => convert(d, &f.schema, names, path, out)?,
                None if matches!(&f.schema, Schema::Union(u) if u.variants().iter().any(|s| matches!(s, Schema::Null))) => {
                    convert(&Value::Null, &f.schema, names, path, out)?
                }
                None => return Err(misfit(path, "missing, and the field has no default".into())),
            },
        }
        path.pop();
    }
    Ok(())
}

fn float(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => match s.as_str() {
            "NaN" => Some(f64::NAN),
            "Infinity" => Some(f64::INFINITY),
            "-Infinity" => Some(f64::NEG_INFINITY),
            _ => None,
        },
        _ => None,
    }
}

fn bytes(v: &Value) -> Option<Vec<u8>> {
    let text = match v {
        Value::String(s) => s.as_str(),
        Value::Object(o) if o.len() == 1 => {
            o.get(rivus_pipeline_file::format::BASE64_KEY)?.as_str()?
        }
        _ => return None,
    };
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

fn int_or(v: &Value, parse: impl Fn(&str) -> Option<i64>) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => parse(s),
        _ => None,
    }
}

fn instant(v: &Value, per_second: i64, path: &[String]) -> Result<i64, Misfit> {
    int_or(v, |s| calendar::parse_instant(s, per_second)).ok_or_else(|| {
        misfit(
            path,
            format!(
                "expected a timestamp (RFC 3339 text or units since the epoch), got {}",
                kind(v)
            ),
        )
    })
}

/// A decimal from text or a number: its digits scaled to the schema's scale (more fraction
/// digits than the scale, or more digits than the precision, are refused: never rounded).
fn decimal(v: &Value, d: &DecimalSchema, out: &mut Vec<u8>) -> Result<(), String> {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => {
            return Err(format!(
                "expected a decimal (text or a number), got {}",
                kind(other)
            ))
        }
    };
    let (neg, body) = match text.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, text.strip_prefix('+').unwrap_or(&text)),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    let frac = frac.trim_end_matches('0');
    if int.is_empty() && frac.is_empty()
        || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
    {
        return Err(format!("`{text}` is not a decimal number"));
    }
    if frac.len() > d.scale {
        return Err(format!(
            "`{text}` has more fraction digits than the scale {}",
            d.scale
        ));
    }
    let digits = format!("{int}{frac:0<width$}", width = d.scale);
    let digits = digits.trim_start_matches('0');
    if digits.len() > d.precision {
        return Err(format!(
            "`{text}` has more digits than the precision {}",
            d.precision
        ));
    }
    let mut unscaled: BigInt = if digits.is_empty() {
        BigInt::from(0)
    } else {
        digits
            .parse()
            .map_err(|_| format!("`{text}` is not a decimal number"))?
    };
    if neg {
        unscaled = -unscaled;
    }
    let be = unscaled.to_signed_bytes_be();
    match &d.inner {
        InnerDecimalSchema::Bytes => bytes_of(&be, out),
        InnerDecimalSchema::Fixed(f) => {
            if be.len() > f.size {
                return Err(format!("`{text}` does not fit a fixed of {} bytes", f.size));
            }
            let sign = if unscaled.sign() == num_bigint::Sign::Minus {
                0xff
            } else {
                0
            };
            out.extend(std::iter::repeat_n(sign, f.size - be.len()));
            out.extend_from_slice(&be);
        }
    }
    Ok(())
}
