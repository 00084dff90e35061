//! Avro object container files: a header (the schema, from the file's columns, and the codec),
//! then blocks of records, each ending with the file's sync marker. A block closes at
//! `block_records` and at every checkpoint, and a file is valid after any whole block: nothing
//! is needed to end it.
//!
//! Columns map to Avro as: `boolean`, `int32` → `int`, `int64` → `long`, `float32` → `float`,
//! `float64` → `double`, `string` and `json` → `string`, `date` → `int` (`date`), `timestamp`
//! → `long` (`timestamp-micros`); a nullable column is a union with `null` first.

use std::io::Write;

use apache_avro::types::Value as Avro;
use serde_json::{json, Value};

use rivus_sdk::calendar;
use rivus_sdk::{Error, Result};

use super::schema::{ColumnType, Schema};
use super::Rejected;

/// How Avro blocks are compressed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AvroCodec {
    /// None.
    Null,
    /// Deflate (RFC 1951).
    Deflate,
    /// Zstandard (default).
    #[default]
    Zstandard,
}

impl AvroCodec {
    fn name(&self) -> &'static str {
        match self {
            AvroCodec::Null => "null",
            AvroCodec::Deflate => "deflate",
            AvroCodec::Zstandard => "zstandard",
        }
    }
}

/// The Avro schema of `schema`'s columns.
pub(crate) fn avro_schema(schema: &Schema) -> Value {
    let fields: Vec<Value> = schema
        .columns
        .iter()
        .map(|c| {
            let ty = match c.ty {
                ColumnType::Boolean => json!("boolean"),
                ColumnType::Int32 => json!("int"),
                ColumnType::Int64 => json!("long"),
                ColumnType::Float32 => json!("float"),
                ColumnType::Float64 => json!("double"),
                ColumnType::String | ColumnType::Json => json!("string"),
                ColumnType::Date => json!({"type": "int", "logicalType": "date"}),
                ColumnType::Timestamp => json!({"type": "long", "logicalType": "timestamp-micros"}),
            };
            if c.nullable {
                json!({"name": c.name, "type": ["null", ty], "default": null})
            } else {
                json!({"name": c.name, "type": ty})
            }
        })
        .collect();
    json!({"type": "record", "name": "Record", "namespace": "rivus", "fields": fields})
}

fn long(out: &mut Vec<u8>, n: i64) {
    let mut z = ((n << 1) ^ (n >> 63)) as u64;
    loop {
        if z & !0x7f == 0 {
            out.push(z as u8);
            return;
        }
        out.push((z & 0x7f | 0x80) as u8);
        z >>= 7;
    }
}

fn bytes(out: &mut Vec<u8>, b: &[u8]) {
    long(out, b.len() as i64);
    out.extend_from_slice(b);
}

pub(crate) struct AvroEncoder {
    schema: Schema,
    avro: apache_avro::Schema,
    codec: AvroCodec,
    sync: [u8; 16],
    block: Vec<u8>,
    count: usize,
    block_records: usize,
    out: Vec<u8>,
}

fn bad(e: impl std::fmt::Display) -> Error {
    Error::connector("files: encoding Avro", e.to_string())
}

impl AvroEncoder {
    pub(crate) fn new(
        schema: &Schema,
        codec: AvroCodec,
        block_records: usize,
        seed: &str,
    ) -> Result<AvroEncoder> {
        let text = avro_schema(schema).to_string();
        let avro = apache_avro::Schema::parse_str(&text).map_err(bad)?;
        // A sync marker per file, from its name and the time.
        let mut sync = [0u8; 16];
        let a = crc32fast::hash(seed.as_bytes()).to_le_bytes();
        let b = (rivus_sdk::calendar::now_ms() as u64).to_le_bytes();
        let c = crc32fast::hash(format!("{seed}/sync").as_bytes()).to_le_bytes();
        sync[..4].copy_from_slice(&a);
        sync[4..12].copy_from_slice(&b);
        sync[12..].copy_from_slice(&c);
        let mut out = b"Obj\x01".to_vec();
        long(&mut out, 2);
        bytes(&mut out, b"avro.schema");
        bytes(&mut out, text.as_bytes());
        bytes(&mut out, b"avro.codec");
        bytes(&mut out, codec.name().as_bytes());
        long(&mut out, 0);
        out.extend_from_slice(&sync);
        Ok(AvroEncoder {
            schema: schema.clone(),
            avro,
            codec,
            sync,
            block: Vec::new(),
            count: 0,
            block_records,
            out,
        })
    }

    fn value(&self, record: &Value) -> std::result::Result<Avro, String> {
        let prepared = self.schema.prepare(record)?;
        let mut fields = Vec::with_capacity(self.schema.columns.len());
        for c in &self.schema.columns {
            let v = prepared.get(&c.name).unwrap_or(&Value::Null);
            let name = &c.name;
            let typed = match (c.ty, v) {
                (_, Value::Null) => None,
                (ColumnType::Boolean, Value::Bool(b)) => Some(Avro::Boolean(*b)),
                (ColumnType::Int32, Value::Number(n)) => n
                    .as_i64()
                    .and_then(|n| i32::try_from(n).ok())
                    .map(Avro::Int),
                (ColumnType::Int64, Value::Number(n)) => n.as_i64().map(Avro::Long),
                (ColumnType::Float32, Value::Number(n)) => {
                    n.as_f64().map(|f| Avro::Float(f as f32))
                }
                (ColumnType::Float64, Value::Number(n)) => n.as_f64().map(Avro::Double),
                (ColumnType::String | ColumnType::Json, Value::String(s)) => {
                    Some(Avro::String(s.clone()))
                }
                (ColumnType::Date, Value::String(s)) => {
                    calendar::parse_date(s).map(|d| Avro::Date(d as i32))
                }
                (ColumnType::Timestamp, Value::String(s)) => {
                    calendar::parse_instant(s, 1_000_000).map(Avro::TimestampMicros)
                }
                _ => None,
            };
            let typed = match (typed, v.is_null()) {
                (Some(t), _) => t,
                (None, true) => Avro::Null,
                (None, false) => return Err(format!("column `{name}` cannot hold {v}")),
            };
            let typed = if c.nullable {
                match typed {
                    Avro::Null => Avro::Union(0, Box::new(Avro::Null)),
                    t => Avro::Union(1, Box::new(t)),
                }
            } else {
                typed
            };
            fields.push((name.clone(), typed));
        }
        Ok(Avro::Record(fields))
    }

    pub(crate) fn write(&mut self, records: &[&Value]) -> Result<Vec<Rejected>> {
        let mut rejected = Vec::new();
        let mut encoded = Vec::with_capacity(records.len());
        {
            let w = apache_avro::writer::datum::GenericDatumWriter::builder(&self.avro)
                .build()
                .map_err(bad)?;
            for (index, r) in records.iter().enumerate() {
                let datum = self
                    .value(r)
                    .and_then(|v| w.write_value_to_vec(v).map_err(|e| e.to_string()));
                match datum {
                    Ok(d) => encoded.push(d),
                    Err(reason) => rejected.push(Rejected { index, reason }),
                }
            }
        }
        for d in encoded {
            self.block.extend_from_slice(&d);
            self.count += 1;
            if self.count >= self.block_records {
                self.end_block()?;
            }
        }
        Ok(rejected)
    }

    fn end_block(&mut self) -> Result<()> {
        if self.count == 0 {
            return Ok(());
        }
        let data = std::mem::take(&mut self.block);
        let data = match self.codec {
            AvroCodec::Null => data,
            AvroCodec::Deflate => {
                let mut e =
                    flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
                e.write_all(&data).and_then(|_| e.finish()).map_err(bad)?
            }
            AvroCodec::Zstandard => zstd::stream::encode_all(&data[..], 3).map_err(bad)?,
        };
        long(&mut self.out, self.count as i64);
        bytes(&mut self.out, &data);
        self.out.extend_from_slice(&self.sync);
        self.count = 0;
        Ok(())
    }

    pub(crate) fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    pub(crate) fn buffered(&self) -> usize {
        self.out.len()
    }

    /// Closes the block; a file ends after any block.
    pub(crate) fn checkpoint(&mut self) -> Result<Vec<u8>> {
        self.end_block()?;
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::schema::Column;

    #[test]
    fn files_read_back_with_the_avro_crate() {
        let cols = vec![
            Column {
                name: "id".into(),
                ty: ColumnType::Int64,
                nullable: false,
                field_id: None,
            },
            Column {
                name: "day".into(),
                ty: ColumnType::Date,
                nullable: true,
                field_id: None,
            },
            Column {
                name: "at".into(),
                ty: ColumnType::Timestamp,
                nullable: true,
                field_id: None,
            },
        ];
        for codec in [AvroCodec::Null, AvroCodec::Deflate, AvroCodec::Zstandard] {
            let mut e = AvroEncoder::new(&Schema::new(cols.clone()), codec, 2, "f").unwrap();
            let recs: Vec<Value> = (0..5)
                .map(|i| json!({"id": i, "day": "2024-03-01", "at": 1_709_287_200_000i64 + i}))
                .collect();
            let refs: Vec<&Value> = recs.iter().collect();
            assert!(e.write(&refs).unwrap().is_empty());
            let bad = json!({"id": "x"});
            assert_eq!(e.write(&[&bad]).unwrap().len(), 1);
            e.checkpoint().unwrap();
            let file = e.take();
            let read: Vec<_> = apache_avro::Reader::new(&file[..])
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            assert_eq!(read.len(), 5, "{codec:?}");
            let Avro::Record(f) = &read[4] else { panic!() };
            assert_eq!(f[0].1, Avro::Long(4));
            assert_eq!(
                f[2].1,
                Avro::Union(1, Box::new(Avro::TimestampMicros(1_709_287_200_004_000)))
            );
        }
    }
}
