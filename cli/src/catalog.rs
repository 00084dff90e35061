//! `rivus connectors`: every connector a pipeline file can name, with its options and
//! delivery guarantee.

/// One entry of the catalog.
pub struct Entry {
    pub role: &'static str,
    pub name: &'static str,
    pub guarantee: &'static str,
    pub options: &'static str,
}

/// The connectors, sources first.
pub const CATALOG: &[Entry] = &[
    Entry {
        role: "source",
        name: "dead-letters",
        guarantee: "exactly-once",
        options: "path (a dead-letter file), connector (only its letters); payloads parsed as JSON",
    },
    Entry {
        role: "source",
        name: "generator",
        guarantee: "exactly-once",
        options: "count (unbounded if absent), rate (records/s per subtask), users (50)",
    },
    Entry {
        role: "source",
        name: "jdbc",
        guarantee: "exactly-once",
        options: "url, table | query, track_by [..], mode continuous|bounded, poll_interval (1s), splits, fetch_size (1000)",
    },
    Entry {
        role: "source",
        name: "kafka",
        guarantee: "exactly-once",
        options: "bootstrap_servers, topics [..], group_id, start committed|earliest|latest, bounded (false), properties {..}",
    },
    Entry {
        role: "source",
        name: "rabbitmq",
        guarantee: "at-least-once; exactly-once with correlation_ids = true",
        options: "uri, queues [..], prefetch (500), declare (false), correlation_ids (false)",
    },
    Entry {
        role: "source",
        name: "redis-streams",
        guarantee: "exactly-once",
        options: "url, streams [..], group, json_field (else the entry's fields as text)",
    },
    Entry {
        role: "sink",
        name: "stdout",
        guarantee: "at-least-once",
        options: "(none)",
    },
    Entry {
        role: "sink",
        name: "jdbc",
        guarantee: "at-least-once; exactly-once on PostgreSQL and MySQL/MariaDB (exactly_once = true)",
        options: "url, table, mode insert|upsert, key [..], columns [..], exactly_once, batch_size (1000), setup (SQL), ignore_unknown_fields",
    },
    Entry {
        role: "sink",
        name: "kafka",
        guarantee: "at-least-once; exactly-once with transactions (exactly_once = true)",
        options: "bootstrap_servers, topic, key_field, exactly_once, properties {..}",
    },
    Entry {
        role: "sink",
        name: "elasticsearch",
        guarantee: "at-least-once (id_field makes replays overwrite)",
        options: "url, index, id_field, max_actions (1000), username, password",
    },
    Entry {
        role: "sink",
        name: "rabbitmq",
        guarantee: "at-least-once (publisher confirms)",
        options: "uri, exchange (\"\"), routing_key, routing_key_field, correlation_id_field",
    },
    Entry {
        role: "sink",
        name: "redis",
        guarantee: "at-least-once (set/hset/sadd rewrite the same value on replay)",
        options: "url, command set|hset|xadd|lpush|rpush|sadd|publish, key (template `order:{id}`), field (hset), ttl_secs, maxlen",
    },
];

/// The catalog as text.
pub fn render() -> String {
    let mut out = String::from("connectors (type = ... in [source] or [sink]):\n");
    for e in CATALOG {
        out.push_str(&format!(
            "\n  {:6} {:14} {}\n         options: {}\n",
            e.role, e.name, e.guarantee, e.options
        ));
    }
    out.push_str(
        "\ntransforms ([[transform]] type = ...): filter (field, op ==|!=|>|>=|<|<=|contains|exists|missing, value), \
         rename (fields {old = new}), drop (fields [..]), add (fields {name = value}), parse-json (field), key (field)\n",
    );
    out
}
