//! The Avro binary of a schema read straight into the JSON form of `to_json.rs`, without
//! `apache-avro`'s intermediate values (a third of the cost; see the `avro` bench). Every
//! length and count is checked against what is left of the payload, so a corrupt or
//! truncated payload is an error, never a panic or a huge allocation.

use apache_avro::schema::{InnerDecimalSchema, Names, UuidSchema};
use apache_avro::Schema;
use num_bigint::BigInt;
use serde_json::{Map, Value};

use super::to_json::{base64, decimal, float};
use rivus_sdk::calendar;

/// Reads one value of `schema` from the front of `input`.
pub(super) fn read(schema: &Schema, names: &Names, input: &mut &[u8]) -> Result<Value, String> {
    read_depth(schema, names, input, 0)
}

/// Nesting deeper than this is refused (a recursive schema and a hostile payload would
/// otherwise overflow the stack).
const MAX_DEPTH: usize = 256;

fn read_depth(
    schema: &Schema,
    names: &Names,
    input: &mut &[u8],
    depth: usize,
) -> Result<Value, String> {
    if depth > MAX_DEPTH {
        return Err(format!("nested deeper than {MAX_DEPTH} levels"));
    }
    let next = |s: &Schema, input: &mut &[u8]| read_depth(s, names, input, depth + 1);
    Ok(match schema {
        Schema::Ref { name } => {
            let s = names
                .get(name)
                .ok_or_else(|| format!("undefined name `{name}`"))?;
            return read_depth(s, names, input, depth + 1);
        }
        Schema::Null => Value::Null,
        Schema::Boolean => match take(input, 1)?[0] {
            0 => Value::Bool(false),
            1 => Value::Bool(true),
            b => return Err(format!("{b} is not a boolean")),
        },
        Schema::Int => Value::from(int(input)?),
        Schema::Long => Value::from(long(input)?),
        Schema::Float => float(f64::from(f32::from_le_bytes(
            take(input, 4)?.try_into().unwrap(),
        ))),
        Schema::Double => float(f64::from_le_bytes(take(input, 8)?.try_into().unwrap())),
        Schema::Bytes => Value::String(base64(sized(input)?)),
        Schema::String => Value::String(text(input)?.to_owned()),
        Schema::Fixed(f) => Value::String(base64(take(input, f.size)?)),
        Schema::Enum(e) => {
            let i = int(input)?;
            Value::String(
                e.symbols
                    .get(i as usize)
                    .ok_or_else(|| format!("enum index {i} out of range for {}", e.name))?
                    .clone(),
            )
        }
        Schema::Union(u) => {
            let i = long(input)?;
            let branch = u
                .variants()
                .get(i as usize)
                .ok_or_else(|| format!("union index {i} out of range"))?;
            next(branch, input)?
        }
        Schema::Array(a) => {
            let mut out = Vec::new();
            blocks(input, |input| {
                out.push(next(&a.items, input)?);
                Ok(())
            })?;
            Value::Array(out)
        }
        Schema::Map(m) => {
            let mut out = Map::new();
            blocks(input, |input| {
                let k = text(input)?.to_owned();
                out.insert(k, next(&m.types, input)?);
                Ok(())
            })?;
            Value::Object(out)
        }
        Schema::Record(r) => {
            let mut out = Map::with_capacity(r.fields.len());
            for f in &r.fields {
                let v = next(&f.schema, input).map_err(|e| format!("{}: {e}", f.name))?;
                out.insert(f.name.clone(), v);
            }
            Value::Object(out)
        }
        Schema::Decimal(d) => {
            let raw = match &d.inner {
                InnerDecimalSchema::Bytes => sized(input)?,
                InnerDecimalSchema::Fixed(f) => take(input, f.size)?,
            };
            Value::String(decimal(&BigInt::from_signed_bytes_be(raw), d.scale))
        }
        Schema::BigDecimal => return Err("big-decimal is not supported".into()),
        Schema::Uuid(inner) => {
            let u = match inner {
                UuidSchema::String => {
                    let t = text(input)?;
                    apache_avro::Uuid::parse_str(t)
                        .map_err(|e| format!("`{t}` is not a UUID: {e}"))?
                }
                UuidSchema::Bytes => uuid_bytes(sized(input)?)?,
                UuidSchema::Fixed(_) => uuid_bytes(take(input, 16)?)?,
            };
            Value::String(u.hyphenated().to_string())
        }
        Schema::Date => Value::String(calendar::date(i64::from(int(input)?))),
        Schema::TimeMillis => Value::String(calendar::time_of_day(i64::from(int(input)?), 1000, 3)),
        Schema::TimeMicros => Value::String(calendar::time_of_day(long(input)?, 1_000_000, 6)),
        Schema::TimestampMillis => Value::String(calendar::instant(long(input)?, 1000, 3, true)),
        Schema::TimestampMicros => {
            Value::String(calendar::instant(long(input)?, 1_000_000, 6, true))
        }
        Schema::TimestampNanos => {
            Value::String(calendar::instant(long(input)?, 1_000_000_000, 9, true))
        }
        Schema::LocalTimestampMillis => {
            Value::String(calendar::instant(long(input)?, 1000, 3, false))
        }
        Schema::LocalTimestampMicros => {
            Value::String(calendar::instant(long(input)?, 1_000_000, 6, false))
        }
        Schema::LocalTimestampNanos => {
            Value::String(calendar::instant(long(input)?, 1_000_000_000, 9, false))
        }
        Schema::Duration(_) => {
            let b = take(input, 12)?;
            let part = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
            serde_json::json!({"months": part(0), "days": part(4), "millis": part(8)})
        }
    })
}

fn take<'a>(input: &mut &'a [u8], n: usize) -> Result<&'a [u8], String> {
    if input.len() < n {
        return Err(format!("the payload ends {} bytes early", n - input.len()));
    }
    let (head, rest) = input.split_at(n);
    *input = rest;
    Ok(head)
}

/// A zig-zag varint of at most 10 bytes.
pub(crate) fn long(input: &mut &[u8]) -> Result<i64, String> {
    let mut z: u64 = 0;
    for shift in (0..70).step_by(7) {
        let b = *input.first().ok_or("the payload ends inside a number")?;
        *input = &input[1..];
        z |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok((z >> 1) as i64 ^ -((z & 1) as i64));
        }
    }
    Err("a number longer than 10 bytes".into())
}

fn int(input: &mut &[u8]) -> Result<i32, String> {
    let n = long(input)?;
    i32::try_from(n).map_err(|_| format!("{n} is out of an int's range"))
}

fn sized<'a>(input: &mut &'a [u8]) -> Result<&'a [u8], String> {
    let n = long(input)?;
    let n = usize::try_from(n).map_err(|_| format!("a negative length {n}"))?;
    take(input, n)
}

fn text<'a>(input: &mut &'a [u8]) -> Result<&'a str, String> {
    std::str::from_utf8(sized(input)?).map_err(|e| format!("a string that is not UTF-8: {e}"))
}

fn uuid_bytes(b: &[u8]) -> Result<apache_avro::Uuid, String> {
    apache_avro::Uuid::from_slice(b).map_err(|e| format!("not a UUID: {e}"))
}

/// The blocks of an array or a map: a count (negative: followed by a byte size), items, until a
/// zero count. A count larger than the bytes left is refused before reading.
fn blocks(
    input: &mut &[u8],
    mut item: impl FnMut(&mut &[u8]) -> Result<(), String>,
) -> Result<(), String> {
    loop {
        let mut n = long(input)?;
        if n == 0 {
            return Ok(());
        }
        if n < 0 {
            n = n.checked_neg().ok_or("a block count out of range")?;
            long(input)?;
        }
        if n as u64 > input.len() as u64 + 1 {
            return Err(format!("a block of {n} items in {} bytes", input.len()));
        }
        for _ in 0..n {
            item(input)?;
        }
    }
}
