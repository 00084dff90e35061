//! `rivus test FILE`: runs the file's `[[tests]]` through its transforms — the same compiled
//! transforms and routers a job runs, with no source and no sink — and reports each test, and
//! for a failure the output, record and field that differ.

use std::collections::HashMap;

use serde_json::Value;

use crate::config::graph::{Output, UNMATCHED};
use crate::config::transform_tests::TransformTest;
use crate::config::{to_json, PipelineConfig, TransformKind};
use crate::route::Router;
use crate::transform::Transforms;

/// One test's result: its name, and what differed (empty: it passed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The test's name.
    pub name: String,
    /// What differed, one line each (empty: it passed).
    pub failures: Vec<String>,
}

/// Runs every test of `config`.
pub(crate) fn run(config: &PipelineConfig) -> Result<Vec<Report>, String> {
    let order = config.graph.transform_order()?;
    let compiled: Vec<(&crate::config::graph::TransformNode, Compiled)> = order
        .into_iter()
        .map(|t| {
            let c = match &t.kind {
                TransformKind::Steps(steps) => Compiled::Steps(Transforms::new(steps, &t.path)),
                TransformKind::Route(routes) => Compiled::Route(
                    Router::new(&t.path, routes),
                    routes.iter().map(|(r, _)| r.clone()).collect(),
                ),
            };
            (t, c)
        })
        .collect();
    Ok(config
        .tests
        .iter()
        .map(|test| Report {
            name: test.name.clone(),
            failures: run_one(test, &compiled),
        })
        .collect())
}

enum Compiled {
    Steps(Transforms),
    /// The router and its routes' names (`_unmatched` after them).
    Route(Router, Vec<String>),
}

/// Feeds the test's records through the transforms from its input on; returns what differed.
fn run_one(
    test: &TransformTest,
    compiled: &[(&crate::config::graph::TransformNode, Compiled)],
) -> Vec<String> {
    let mut at: HashMap<Output, Vec<Value>> = HashMap::new();
    let mut errors: Vec<String> = Vec::new();
    for (node, c) in compiled {
        let input: Vec<Value> = if node.name == test.input {
            test.records.iter().map(to_json).collect()
        } else {
            node.inputs
                .iter()
                .flat_map(|i| at.get(i).cloned().unwrap_or_default())
                .collect()
        };
        let mut place = |route: Option<&str>, v: Value| {
            at.entry(Output {
                component: node.name.clone(),
                route: route.map(str::to_owned),
            })
            .or_default()
            .push(v)
        };
        for record in input {
            let outs: Vec<Result<Value, rivus_sdk::Rejected>> = match c {
                Compiled::Steps(t) => t.apply(record).collect(),
                Compiled::Route(..) => vec![Ok(record)],
            };
            for v in outs {
                let v = match v {
                    Ok(v) => v,
                    Err(rejected) => {
                        errors.push(rejected.reason);
                        continue;
                    }
                };
                match c {
                    Compiled::Steps(_) => place(None, v),
                    Compiled::Route(router, names) => {
                        let picked = router.routes(&v);
                        for (i, name) in names
                            .iter()
                            .map(String::as_str)
                            .chain([UNMATCHED])
                            .enumerate()
                        {
                            if picked.contains(i) {
                                place(Some(name), v.clone());
                            }
                        }
                    }
                }
            }
        }
    }
    let mut failures = Vec::new();
    for expected in &test.outputs {
        let got = at
            .get(&Output::parse(&expected.from))
            .cloned()
            .unwrap_or_default();
        let want: Vec<Value> = expected.records.iter().map(to_json).collect();
        if got.len() != want.len() {
            failures.push(format!(
                "outputs `{}`: {} records expected, {} came: {}",
                expected.from,
                want.len(),
                got.len(),
                short(&Value::Array(got.clone()))
            ));
            continue;
        }
        for (k, (w, g)) in want.iter().zip(&got).enumerate() {
            let Some(fields) = w.as_object() else {
                failures.push(format!(
                    "outputs `{}` record {k}: the expectation is not a table",
                    expected.from
                ));
                continue;
            };
            for (field, value) in fields {
                match g.get(field) {
                    Some(v) if v == value => {}
                    Some(v) => failures.push(format!(
                        "outputs `{}` record {k}: field `{field}`: expected {value}, got {v}",
                        expected.from
                    )),
                    None => failures.push(format!(
                        "outputs `{}` record {k}: field `{field}`: expected {value}, missing \
                         from {}",
                        expected.from,
                        short(g)
                    )),
                }
            }
        }
    }
    if errors.len() != test.errors.len() {
        failures.push(format!(
            "errors: {} expected, {} went to the error policy: {errors:?}",
            test.errors.len(),
            errors.len()
        ));
    } else {
        for (k, (want, got)) in test.errors.iter().zip(&errors).enumerate() {
            if !got.contains(want.as_str()) {
                failures.push(format!("errors[{k}]: expected text `{want}` in: {got}"));
            }
        }
    }
    failures
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(200) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s,
    }
}
