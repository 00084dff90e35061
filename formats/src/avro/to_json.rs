//! Avro values as the JSON records pipelines work on. The mapping (also in the README):
//!
//! | Avro | JSON |
//! |---|---|
//! | null, boolean, int, long, float, double, string | the same (a float that is not finite: `"NaN"`, `"Infinity"`, `"-Infinity"`) |
//! | bytes, fixed | base64 text |
//! | enum | its symbol |
//! | union | the branch's value itself (no `{"type": value}` wrapper) |
//! | array, map, record | array, object, object |
//! | decimal | text, the exact number with its scale (`"12.30"`) |
//! | date | `"YYYY-MM-DD"` |
//! | time-millis / time-micros | `"HH:MM:SS.fff"` / `"HH:MM:SS.ffffff"` |
//! | timestamp-millis / -micros / -nanos | RFC 3339 in UTC (`"2024-01-01T00:00:00.000Z"`) |
//! | local-timestamp-* | the same without `Z` |
//! | uuid | its text |
//! | duration | `{"months": m, "days": d, "millis": ms}` |

use apache_avro::schema::Names;
use apache_avro::types::Value as Avro;
use apache_avro::Schema;
use base64::Engine as _;
use num_bigint::BigInt;
use serde_json::{Map, Number, Value};

use rivus_sdk::calendar;

/// The JSON form of `v`, a value of `schema` (the reader's schema when one resolved it).
pub fn to_json(v: Avro, schema: &Schema, names: &Names) -> Value {
    let schema = match schema {
        Schema::Ref { name } => names.get(name).unwrap_or(schema),
        s => s,
    };
    match v {
        Avro::Null => Value::Null,
        Avro::Boolean(b) => Value::Bool(b),
        Avro::Int(i) => Value::from(i),
        Avro::Long(i) => Value::from(i),
        Avro::Float(f) => float(f64::from(f)),
        Avro::Double(f) => float(f),
        Avro::Bytes(b) | Avro::Fixed(_, b) => Value::String(base64(&b)),
        Avro::String(s) | Avro::Enum(_, s) => Value::String(s),
        Avro::Union(i, inner) => {
            let branch = match schema {
                Schema::Union(u) => u.variants().get(i as usize).unwrap_or(schema),
                s => s,
            };
            to_json(*inner, branch, names)
        }
        Avro::Array(items) => {
            let item = match schema {
                Schema::Array(a) => &*a.items,
                s => s,
            };
            Value::Array(items.into_iter().map(|i| to_json(i, item, names)).collect())
        }
        Avro::Map(m) => {
            let item = match schema {
                Schema::Map(m) => &*m.types,
                s => s,
            };
            Value::Object(
                m.into_iter()
                    .map(|(k, v)| (k, to_json(v, item, names)))
                    .collect(),
            )
        }
        Avro::Record(fields) => {
            let by_name = |n: &str| match schema {
                Schema::Record(r) => r.lookup.get(n).map(|i| &r.fields[*i].schema),
                _ => None,
            };
            Value::Object(
                fields
                    .into_iter()
                    .map(|(k, v)| {
                        let s = by_name(&k).unwrap_or(&Schema::Null);
                        let j = to_json(v, s, names);
                        (k, j)
                    })
                    .collect::<Map<_, _>>(),
            )
        }
        Avro::Date(d) => Value::String(calendar::date(i64::from(d))),
        Avro::Decimal(d) => {
            let scale = match schema {
                Schema::Decimal(d) => d.scale,
                _ => 0,
            };
            Value::String(decimal(&BigInt::from(d), scale))
        }
        Avro::BigDecimal(d) => Value::String(d.to_string()),
        Avro::TimeMillis(t) => Value::String(calendar::time_of_day(i64::from(t), 1000, 3)),
        Avro::TimeMicros(t) => Value::String(calendar::time_of_day(t, 1_000_000, 6)),
        Avro::TimestampMillis(t) => Value::String(calendar::instant(t, 1000, 3, true)),
        Avro::TimestampMicros(t) => Value::String(calendar::instant(t, 1_000_000, 6, true)),
        Avro::TimestampNanos(t) => Value::String(calendar::instant(t, 1_000_000_000, 9, true)),
        Avro::LocalTimestampMillis(t) => Value::String(calendar::instant(t, 1000, 3, false)),
        Avro::LocalTimestampMicros(t) => Value::String(calendar::instant(t, 1_000_000, 6, false)),
        Avro::LocalTimestampNanos(t) => {
            Value::String(calendar::instant(t, 1_000_000_000, 9, false))
        }
        Avro::Uuid(u) => Value::String(u.to_string()),
        Avro::Duration(d) => serde_json::json!({
            "months": u32::from(d.months()),
            "days": u32::from(d.days()),
            "millis": u32::from(d.millis()),
        }),
    }
}

pub(crate) fn float(f: f64) -> Value {
    Number::from_f64(f).map_or_else(
        || {
            Value::String(
                if f.is_nan() {
                    "NaN"
                } else if f > 0.0 {
                    "Infinity"
                } else {
                    "-Infinity"
                }
                .to_owned(),
            )
        },
        Value::Number,
    )
}

pub(crate) fn base64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// `unscaled × 10^-scale` as text, every digit of the scale kept (`1230`, 2 → `"12.30"`).
pub fn decimal(unscaled: &BigInt, scale: usize) -> String {
    let digits = unscaled.magnitude().to_string();
    let sign = if unscaled.sign() == num_bigint::Sign::Minus {
        "-"
    } else {
        ""
    };
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{sign}{int}.{frac}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_keep_their_scale() {
        assert_eq!(decimal(&BigInt::from(1230), 2), "12.30");
        assert_eq!(decimal(&BigInt::from(-5), 3), "-0.005");
        assert_eq!(decimal(&BigInt::from(42), 0), "42");
    }

    #[test]
    fn non_finite_floats_become_text() {
        assert_eq!(float(f64::NAN), Value::from("NaN"));
        assert_eq!(float(f64::NEG_INFINITY), Value::from("-Infinity"));
        assert_eq!(float(1.5), Value::from(1.5));
    }
}
