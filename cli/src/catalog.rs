//! `rivus connectors`: every connector a pipeline file can name, with its options and
//! delivery guarantee — the built-in ones listed here, each connector's from its own crate.

use rivus_core::pipeline_file::CatalogEntry;

/// The built-in sources and sinks.
const BUILT_IN: &[CatalogEntry] = &[
    CatalogEntry {
        role: "source",
        name: "dead-letters",
        guarantee: "exactly-once",
        options: "path (a dead-letter file), connector (only its letters); payloads parsed as JSON",
    },
    CatalogEntry {
        role: "source",
        name: "generator",
        guarantee: "exactly-once",
        options: "count (unbounded if absent), rate (records/s per subtask), users (50)",
    },
    CatalogEntry {
        role: "sink",
        name: "stdout",
        guarantee: "at-least-once",
        options: "(none)",
    },
];

/// Every entry, sources first.
pub fn entries() -> Vec<CatalogEntry> {
    let mut all: Vec<CatalogEntry> = [
        BUILT_IN,
        rivus_connector_jdbc::pipeline_file::CATALOG,
        rivus_connector_kafka::pipeline_file::CATALOG,
        rivus_connector_rabbitmq::pipeline_file::CATALOG,
        rivus_connector_redis::pipeline_file::CATALOG,
        rivus_connector_es::pipeline_file::CATALOG,
    ]
    .concat();
    all.sort_by_key(|e| e.role != "source");
    all
}

/// The catalog as text.
pub fn render() -> String {
    let mut out = String::from("connectors (type = ... in [source] or [sink]):\n");
    for e in entries() {
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
