//! `[[tests]]`: unit tests of a file's transforms, which `rivus test FILE` runs without any
//! source or sink — records fed into a transform, the records expected at its outputs and
//! downstream of it, field by field, and the records expected to go to the error policy.
//!
//! ```toml
//! [[tests]]
//! name = "a gold order"
//! input = "enrich"
//! records = [{ id = 7, amount = 612.0, status = "paid" }]
//! errors = []                              # reasons expected, in order (default: none)
//! [[tests.outputs]]
//! from = "by_tier.gold"
//! records = [{ tier = "gold", amount_cents = 61200 }]
//! ```

use serde::Deserialize;
use serde_json::Value;

use super::graph::{Graph, Output, UNMATCHED};
use super::TransformKind;

/// One `[[tests]]` block.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TransformTest {
    /// What the test checks, named in the report.
    pub name: String,
    /// The transform the records are fed into.
    pub input: String,
    /// The records fed in, in order.
    #[schemars(with = "Vec<serde_json::Map<String, Value>>")]
    pub records: Vec<toml::Value>,
    /// The records expected at outputs of transforms (downstream of `input` too).
    #[serde(default)]
    pub outputs: Vec<ExpectedOutput>,
    /// For each record expected to go to the error policy, in order, text its reason holds
    /// (VRL's message, for a remap). Default: none may.
    #[serde(default)]
    pub errors: Vec<String>,
}

/// `[[tests.outputs]]`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExpectedOutput {
    /// A transform (`enrich`), or a route of a router (`by_tier.gold`, `by_tier._unmatched`).
    pub from: String,
    /// The records expected there, in order, each with the fields it must hold (other fields
    /// are not checked); `[]`: nothing comes out there.
    #[schemars(with = "Vec<serde_json::Map<String, Value>>")]
    pub records: Vec<toml::Value>,
}

/// Checks that each test names transforms and outputs the graph has.
pub(crate) fn check(tests: &[TransformTest], graph: &Graph) -> Result<(), String> {
    for (i, t) in tests.iter().enumerate() {
        let at = format!("tests[{i}]");
        if !graph.transforms.iter().any(|n| n.name == t.input) {
            return Err(format!(
                "{at}.input: no transform named \"{}\" (records are fed into a transform)",
                t.input
            ));
        }
        for (k, o) in t.outputs.iter().enumerate() {
            let out = Output::parse(&o.from);
            let Some(node) = graph.transforms.iter().find(|n| n.name == out.component) else {
                return Err(format!(
                    "{at}.outputs[{k}].from: no transform named \"{}\"",
                    out.component
                ));
            };
            match (&node.kind, &out.route) {
                (TransformKind::Route(routes), Some(r))
                    if r == UNMATCHED || routes.iter().any(|(name, _)| name == r) => {}
                (TransformKind::Route(_), _) => {
                    return Err(format!(
                        "{at}.outputs[{k}].from: \"{}\" is a router: name one of its routes",
                        o.from
                    ))
                }
                (TransformKind::Steps(_), Some(_)) => {
                    return Err(format!(
                        "{at}.outputs[{k}].from: \"{}\" has no routes",
                        out.component
                    ))
                }
                (TransformKind::Steps(_), None) => {}
            }
        }
    }
    Ok(())
}
