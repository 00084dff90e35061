//! The commands a record can turn into, and their encoding.

/// One Redis command. Each variant's fields are the arguments its documentation names (a
/// TTL in seconds where it says `ttl`).
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)] // fields named in each variant's documentation
pub enum RedisCommand {
    /// SET key value [EX ttl].
    Set {
        key: String,
        value: Vec<u8>,
        ttl_secs: Option<u64>,
    },
    /// HSET key field value (then EXPIRE key ttl when given).
    HSet {
        key: String,
        field: String,
        value: Vec<u8>,
        ttl_secs: Option<u64>,
    },
    /// HINCRBY key field by.
    HIncrBy { key: String, field: String, by: i64 },
    /// HDEL key field.
    HDel { key: String, field: String },
    /// LPUSH key value.
    LPush { key: String, value: Vec<u8> },
    /// RPUSH key value.
    RPush { key: String, value: Vec<u8> },
    /// SADD key member.
    SAdd { key: String, member: Vec<u8> },
    /// SREM key member.
    SRem { key: String, member: Vec<u8> },
    /// ZADD key score member.
    ZAdd {
        key: String,
        member: Vec<u8>,
        score: f64,
    },
    /// ZINCRBY key by member.
    ZIncrBy {
        key: String,
        member: Vec<u8>,
        by: f64,
    },
    /// ZREM key member.
    ZRem { key: String, member: Vec<u8> },
    /// PFADD key element.
    PfAdd { key: String, element: Vec<u8> },
    /// INCRBY key by (negative: DECRBY).
    IncrBy { key: String, by: i64 },
    /// PUBLISH channel message.
    Publish { channel: String, message: Vec<u8> },
    /// XADD key [MAXLEN ~ n] * field value ...
    XAdd {
        key: String,
        fields: Vec<(String, Vec<u8>)>,
        maxlen: Option<usize>,
    },
    /// EXPIRE key seconds.
    Expire { key: String, secs: u64 },
    /// DEL key.
    Del { key: String },
}

impl RedisCommand {
    /// The key (or channel) the command touches, for errors.
    pub fn key(&self) -> &str {
        use RedisCommand::*;
        match self {
            Set { key, .. }
            | HSet { key, .. }
            | HIncrBy { key, .. }
            | HDel { key, .. }
            | LPush { key, .. }
            | RPush { key, .. }
            | SAdd { key, .. }
            | SRem { key, .. }
            | ZAdd { key, .. }
            | ZIncrBy { key, .. }
            | ZRem { key, .. }
            | PfAdd { key, .. }
            | IncrBy { key, .. }
            | XAdd { key, .. }
            | Expire { key, .. }
            | Del { key } => key,
            Publish { channel, .. } => channel,
        }
    }

    /// Estimated size on the wire (for the bulk size trigger).
    pub fn size(&self) -> usize {
        use RedisCommand::*;
        let payload = match self {
            Set { value, .. } | HSet { value, .. } | LPush { value, .. } | RPush { value, .. } => {
                value.len()
            }
            SAdd { member, .. }
            | SRem { member, .. }
            | ZAdd { member, .. }
            | ZIncrBy { member, .. }
            | ZRem { member, .. } => member.len(),
            PfAdd { element, .. } => element.len(),
            Publish { message, .. } => message.len(),
            XAdd { fields, .. } => fields.iter().map(|(k, v)| k.len() + v.len()).sum(),
            _ => 8,
        };
        self.key().len() + payload + 16
    }

    /// Appends the command (and, for a TTL, its EXPIRE) to `pipe`; returns how many replies it
    /// produces.
    pub(crate) fn add_to(&self, pipe: &mut redis::Pipeline) -> usize {
        use RedisCommand::*;
        match self {
            Set {
                key,
                value,
                ttl_secs,
            } => {
                let c = pipe.cmd("SET").arg(key).arg(value);
                if let Some(t) = ttl_secs {
                    c.arg("EX").arg(*t);
                }
                1
            }
            HSet {
                key,
                field,
                value,
                ttl_secs,
            } => {
                pipe.cmd("HSET").arg(key).arg(field).arg(value);
                match ttl_secs {
                    Some(t) => {
                        pipe.cmd("EXPIRE").arg(key).arg(*t);
                        2
                    }
                    None => 1,
                }
            }
            HIncrBy { key, field, by } => {
                pipe.cmd("HINCRBY").arg(key).arg(field).arg(*by);
                1
            }
            HDel { key, field } => {
                pipe.cmd("HDEL").arg(key).arg(field);
                1
            }
            LPush { key, value } => {
                pipe.cmd("LPUSH").arg(key).arg(value);
                1
            }
            RPush { key, value } => {
                pipe.cmd("RPUSH").arg(key).arg(value);
                1
            }
            SAdd { key, member } => {
                pipe.cmd("SADD").arg(key).arg(member);
                1
            }
            SRem { key, member } => {
                pipe.cmd("SREM").arg(key).arg(member);
                1
            }
            ZAdd { key, member, score } => {
                pipe.cmd("ZADD").arg(key).arg(*score).arg(member);
                1
            }
            ZIncrBy { key, member, by } => {
                pipe.cmd("ZINCRBY").arg(key).arg(*by).arg(member);
                1
            }
            ZRem { key, member } => {
                pipe.cmd("ZREM").arg(key).arg(member);
                1
            }
            PfAdd { key, element } => {
                pipe.cmd("PFADD").arg(key).arg(element);
                1
            }
            IncrBy { key, by } => {
                pipe.cmd("INCRBY").arg(key).arg(*by);
                1
            }
            Publish { channel, message } => {
                pipe.cmd("PUBLISH").arg(channel).arg(message);
                1
            }
            XAdd {
                key,
                fields,
                maxlen,
            } => {
                let c = pipe.cmd("XADD").arg(key);
                if let Some(m) = maxlen {
                    c.arg("MAXLEN").arg("~").arg(*m);
                }
                c.arg("*");
                for (f, v) in fields {
                    c.arg(f).arg(v);
                }
                1
            }
            Expire { key, secs } => {
                pipe.cmd("EXPIRE").arg(key).arg(*secs);
                1
            }
            Del { key } => {
                pipe.cmd("DEL").arg(key);
                1
            }
        }
    }
}
