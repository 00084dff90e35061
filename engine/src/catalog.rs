//! `rivus connectors`: every section type the registry holds, with its summary, delivery
//! guarantee and options, and the transforms.

use crate::registry::Registry;

/// Every section type of `registry` with its summary, guarantee and options, and the
/// transforms, as text: `rivus connectors`.
pub fn catalog_text(registry: &Registry) -> String {
    let mut out =
        String::from("connectors (type = ... in [source], [sink] or [errors.destination]):\n");
    for l in registry.catalog() {
        let role = l.role.name();
        out.push_str(&format!(
            "\n  {role:6} {:14} {}\n         {}\n",
            l.kind, l.entry.guarantee, l.entry.summary
        ));
        for o in &l.options() {
            // The description on one line, cut to about a line of text.
            let doc = o.doc.split_whitespace().collect::<Vec<_>>().join(" ");
            let doc = match doc.char_indices().nth(110) {
                Some((i, _)) => format!("{}…", &doc[..i]),
                None => doc.trim_end_matches('.').to_owned(),
            };
            if doc.is_empty() {
                out.push_str(&format!("         - {}\n", o.render()));
            } else {
                out.push_str(&format!("         - {}: {doc}\n", o.render()));
            }
        }
    }
    out.push_str(
        "\n  (dlq: a dead-letter destination, [errors.destination] with policy = \"dead-letter\")\n\
         \ntransforms ([[transform]] type = ...): filter (field, op ==|!=|>|>=|<|<=|contains|exists|missing, value), \
         rename (fields {old = new}), drop (fields [..]), add (fields {name = value}), parse-json (field), key (field)\n",
    );
    out
}
