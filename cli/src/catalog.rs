//! `rivus connectors`: every section type the registry holds, with its summary, delivery
//! guarantee and options, and the transforms.

use crate::registry::Registry;

/// The catalog of `registry` as text.
pub fn render(registry: &Registry) -> String {
    let mut out =
        String::from("connectors (type = ... in [source], [sink] or [errors.destination]):\n");
    for (role, name, e) in registry.catalog() {
        let role = role.name();
        out.push_str(&format!(
            "\n  {role:6} {name:14} {}\n         {}\n",
            e.guarantee, e.summary
        ));
        for o in e.options {
            out.push_str(&format!("         - {}\n", o.render()));
        }
    }
    out.push_str(
        "\n  (dlq: a dead-letter destination, [errors.destination] with policy = \"dead-letter\")\n\
         \ntransforms ([[transform]] type = ...): filter (field, op ==|!=|>|>=|<|<=|contains|exists|missing, value), \
         rename (fields {old = new}), drop (fields [..]), add (fields {name = value}), parse-json (field), key (field)\n",
    );
    out
}
