//! The components of a pipeline file and how they connect: named sources, transforms and
//! sinks (`[sources.NAME]`, `[transforms.NAME]`, `[sinks.NAME]`), each transform and sink
//! reading the outputs its `inputs` name (`"orders"`, or a route of a router:
//! `"split.big"`). The single-path form (`[source]`, `[[transform]]`, `[sink]`) is the graph
//! of one source, one transform chain and one sink.
//!
//! Checked here, each refusal naming the component: unknown inputs, a route that does not
//! exist, a cycle, an output nobody reads, a sink fed by nothing.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use super::{CompareOp, ErrorsSection, TransformConfig};
use crate::registry::{AnySink, AnySource, Section};

/// The output of a router that gets the records no route matched.
pub(crate) const UNMATCHED: &str = "_unmatched";

/// A component's output a transform or sink reads: a component, or one route of a router.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Output {
    pub component: String,
    pub route: Option<String>,
}

impl std::fmt::Display for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.route {
            Some(r) => write!(f, "{}.{r}", self.component),
            None => f.write_str(&self.component),
        }
    }
}

impl Output {
    pub(crate) fn parse(text: &str) -> Output {
        match text.split_once('.') {
            Some((c, r)) => Output {
                component: c.to_owned(),
                route: Some(r.to_owned()),
            },
            None => Output {
                component: text.to_owned(),
                route: None,
            },
        }
    }
}

/// `[sources.NAME]` (or `[source]`, named `source`).
#[derive(Debug, Clone)]
pub(crate) struct SourceNode {
    pub name: String,
    pub section: Section<dyn AnySource>,
}

/// `[transforms.NAME]` (or the `[[transform]]` list, one chain named `transform`).
#[derive(Debug, Clone)]
pub(crate) struct TransformNode {
    pub name: String,
    /// Where it stands in the file (`transforms.NAME`, `transform`).
    pub path: String,
    pub inputs: Vec<Output>,
    pub kind: TransformKind,
}

/// What a transform does.
#[derive(Debug, Clone)]
pub(crate) enum TransformKind {
    /// Built-in transforms applied in order (`key` places records after the others).
    Steps(Vec<TransformConfig>),
    /// Each record to every route whose condition it meets, the rest to `_unmatched`.
    Route(Vec<(String, super::condition::Test)>),
}

/// A route's condition written as a comparison of one field, as a `filter` transform's (the
/// other form is a VRL boolean expression, as text).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Condition {
    /// The field compared.
    pub field: String,
    /// `==`, `!=`, `>`, `>=`, `<`, `<=`, `contains`, `exists` or `missing`.
    pub op: CompareOp,
    /// The value compared with (not needed for `exists` / `missing`).
    #[schemars(with = "Option<serde_json::Value>")]
    pub value: Option<toml::Value>,
}

/// A route's condition, as the JSON Schema describes it.
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)] // the schema's only
pub(crate) enum RouteCondition {
    /// A VRL boolean expression.
    Vrl(String),
    /// A comparison of one field.
    Compare(Condition),
}

/// `[transforms.NAME] type = "route"` as serde reads it.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RouteConfig {
    /// The outputs read: components, or routes of routers (`"split.big"`).
    pub inputs: Vec<String>,
    /// `route`.
    #[serde(rename = "type")]
    pub _type: RouteType,
    /// The routes by name, each with its condition — a VRL boolean expression (text) or a
    /// comparison (`{ field, op, value }`); a record goes to every route it meets, to
    /// `_unmatched` when it meets none.
    #[schemars(with = "BTreeMap<String, RouteCondition>")]
    pub route: BTreeMap<String, toml::Value>,
}

/// The `type` of a router.
#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum RouteType {
    /// A router.
    Route,
}

/// `[sinks.NAME]` (or `[sink]`, named `sink`).
#[derive(Debug, Clone)]
pub(crate) struct SinkNode {
    pub name: String,
    pub inputs: Vec<Output>,
    pub section: Section<dyn AnySink>,
    /// `[sinks.NAME.errors]`: this sink's error policy instead of the job's.
    pub errors: Option<ErrorsSection>,
}

/// The components of a file.
#[derive(Debug, Clone, Default)]
pub(crate) struct Graph {
    pub sources: Vec<SourceNode>,
    pub transforms: Vec<TransformNode>,
    pub sinks: Vec<SinkNode>,
}

/// The text of an `inputs` list.
pub(crate) fn outputs(inputs: &[String]) -> Vec<Output> {
    inputs.iter().map(|i| Output::parse(i)).collect()
}

impl Graph {
    /// The single-path form: `[source]` → the `[[transform]]` chain → `[sink]`.
    pub(crate) fn path(
        source: Section<dyn AnySource>,
        transforms: Vec<TransformConfig>,
        sink: Section<dyn AnySink>,
    ) -> Graph {
        let mut last = "source".to_owned();
        let mut graph = Graph {
            sources: vec![SourceNode {
                name: last.clone(),
                section: source,
            }],
            ..Graph::default()
        };
        if !transforms.is_empty() {
            graph.transforms.push(TransformNode {
                name: "transform".into(),
                path: "transform".into(),
                inputs: outputs(&[last]),
                kind: TransformKind::Steps(transforms),
            });
            last = "transform".into();
        }
        graph.sinks.push(SinkNode {
            name: "sink".into(),
            inputs: outputs(&[last]),
            section: sink,
            errors: None,
        });
        graph
    }

    /// The routes of component `name` when it is a router.
    fn routes(&self, name: &str) -> Option<Vec<&str>> {
        self.transforms
            .iter()
            .find(|t| t.name == name)
            .and_then(|t| match &t.kind {
                TransformKind::Route(routes) => {
                    Some(routes.iter().map(|(r, _)| r.as_str()).collect())
                }
                TransformKind::Steps(_) => None,
            })
    }

    /// Whether something reads the records' metadata (a condition or program reading `%`, a
    /// sink option naming `%…`): the sources then carry it.
    pub(crate) fn reads_metadata(&self) -> bool {
        let transforms = self.transforms.iter().any(|t| match &t.kind {
            TransformKind::Steps(steps) => steps.iter().any(TransformConfig::reads_metadata),
            TransformKind::Route(routes) => routes.iter().any(|(_, c)| c.reads_metadata()),
        });
        transforms || self.sinks.iter().any(|s| s.section.reads_metadata)
    }

    /// The readers of every output, in the order the file gives them (transforms, then sinks).
    pub(crate) fn readers(&self) -> BTreeMap<Output, Vec<String>> {
        let mut readers: BTreeMap<Output, Vec<String>> = BTreeMap::new();
        let transforms = self.transforms.iter().map(|t| (&t.name, &t.inputs));
        let sinks = self.sinks.iter().map(|s| (&s.name, &s.inputs));
        for (name, inputs) in transforms.chain(sinks) {
            for i in inputs {
                readers.entry(i.clone()).or_default().push(name.clone());
            }
        }
        readers
    }

    /// The transforms in an order where each comes after the transforms it reads.
    pub(crate) fn transform_order(&self) -> Result<Vec<&TransformNode>, String> {
        let names: BTreeSet<&str> = self.transforms.iter().map(|t| t.name.as_str()).collect();
        let mut done: BTreeSet<&str> = BTreeSet::new();
        let mut order = Vec::new();
        while order.len() < self.transforms.len() {
            let ready = self.transforms.iter().find(|t| {
                !done.contains(t.name.as_str())
                    && t.inputs.iter().all(|i| {
                        !names.contains(i.component.as_str()) || done.contains(i.component.as_str())
                    })
            });
            match ready {
                Some(t) => {
                    done.insert(&t.name);
                    order.push(t);
                }
                None => {
                    let left: Vec<&str> = self
                        .transforms
                        .iter()
                        .map(|t| t.name.as_str())
                        .filter(|n| !done.contains(n))
                        .collect();
                    return Err(format!(
                        "transforms.{}.inputs: a cycle among transforms {}",
                        left[0],
                        left.join(", ")
                    ));
                }
            }
        }
        Ok(order)
    }

    /// Checks the connections; the error names the component and field.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.sources.is_empty() {
            return Err("sources: a pipeline needs a source ([source] or [sources.NAME])".into());
        }
        if self.sinks.is_empty() {
            return Err("sinks: a pipeline needs a sink ([sink] or [sinks.NAME])".into());
        }
        let mut kinds: BTreeMap<&str, &str> = BTreeMap::new();
        let all = (self.sources.iter().map(|s| (s.name.as_str(), "sources")))
            .chain(
                self.transforms
                    .iter()
                    .map(|t| (t.name.as_str(), "transforms")),
            )
            .chain(self.sinks.iter().map(|s| (s.name.as_str(), "sinks")));
        for (name, kind) in all {
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
            {
                return Err(format!(
                    "{kind}.{name}: a component's name is letters, digits, `-` and `_`"
                ));
            }
            if let Some(other) = kinds.insert(name, kind) {
                return Err(format!(
                    "{kind}.{name}: the name is taken by {other}.{name} (a name keys the \
                     component's checkpointed state)"
                ));
            }
        }
        let fed = self
            .transforms
            .iter()
            .map(|t| (t.path.as_str(), &t.inputs))
            .chain(
                self.sinks
                    .iter()
                    .map(|s| (s.section.path.as_str(), &s.inputs)),
            );
        for (path, inputs) in fed {
            if inputs.is_empty() {
                return Err(format!(
                    "{path}.inputs: empty: name the components it reads"
                ));
            }
            let mut seen = BTreeSet::new();
            for (k, input) in inputs.iter().enumerate() {
                let at = format!("{path}.inputs[{k}]");
                if !seen.insert(input) {
                    return Err(format!("{at}: `{input}` is read twice"));
                }
                match (kinds.get(input.component.as_str()), &input.route) {
                    (None, _) => {
                        return Err(format!("{at}: no component named \"{}\"", input.component))
                    }
                    (Some(&"sinks"), _) => {
                        return Err(format!(
                            "{at}: \"{}\" is a sink: nothing reads from a sink",
                            input.component
                        ))
                    }
                    (Some(_), None) if self.routes(&input.component).is_some() => {
                        return Err(format!(
                            "{at}: \"{}\" is a router: name one of its routes (\"{}.ROUTE\" or \
                             \"{}.{UNMATCHED}\")",
                            input.component, input.component, input.component
                        ))
                    }
                    (Some(_), Some(route)) => match self.routes(&input.component) {
                        None => {
                            return Err(format!(
                                "{at}: \"{}\" has no routes (it is not a router)",
                                input.component
                            ))
                        }
                        Some(routes) if route != UNMATCHED && !routes.contains(&route.as_str()) => {
                            return Err(format!(
                                "{at}: router \"{}\" has no route \"{route}\" (it has {})",
                                input.component,
                                routes.join(", ")
                            ))
                        }
                        Some(_) => {}
                    },
                    (Some(_), None) => {}
                }
            }
        }
        self.transform_order()?;
        let readers = self.readers();
        let read = |o: Output| readers.contains_key(&o);
        for s in &self.sources {
            if !read(Output::parse(&s.name)) {
                return Err(format!(
                    "{}: its records go nowhere: no transform or sink reads \"{}\"",
                    s.section.path, s.name
                ));
            }
        }
        for t in &self.transforms {
            match &t.kind {
                TransformKind::Steps(_) if !read(Output::parse(&t.name)) => {
                    return Err(format!(
                        "{}: its records go nowhere: no transform or sink reads \"{}\"",
                        t.path, t.name
                    ))
                }
                TransformKind::Route(routes) => {
                    if routes.is_empty() {
                        return Err(format!("{}.route: name at least one route", t.path));
                    }
                    if routes.len() + 1 > rivus_sdk::Routes::MAX {
                        return Err(format!(
                            "{}.route: at most {} routes",
                            t.path,
                            rivus_sdk::Routes::MAX - 1
                        ));
                    }
                    for (r, _) in routes {
                        if !read(Output {
                            component: t.name.clone(),
                            route: Some(r.clone()),
                        }) {
                            return Err(format!(
                                "{}.route.{r}: nothing reads \"{}.{r}\"",
                                t.path, t.name
                            ));
                        }
                    }
                }
                TransformKind::Steps(_) => {}
            }
        }
        Ok(())
    }

    /// The graph in words, one component a line, each transform after what it reads:
    /// `sinks.lake (files) <- split.big`.
    pub(crate) fn describe(&self) -> String {
        let from = |inputs: &[Output]| {
            let names: Vec<String> = inputs.iter().map(ToString::to_string).collect();
            names.join(", ")
        };
        let mut lines = Vec::new();
        for s in &self.sources {
            lines.push(format!("{} ({})", s.section.path, s.section.kind));
        }
        let order = self
            .transform_order()
            .unwrap_or_else(|_| self.transforms.iter().collect());
        for t in order {
            let kind = match &t.kind {
                TransformKind::Steps(steps) => {
                    let kinds: Vec<&str> = steps.iter().map(TransformConfig::kind).collect();
                    kinds.join(" → ")
                }
                TransformKind::Route(routes) => {
                    let names: Vec<&str> = routes.iter().map(|(r, _)| r.as_str()).collect();
                    format!("route: {}", names.join(", "))
                }
            };
            lines.push(format!("{} ({kind}) <- {}", t.path, from(&t.inputs)));
        }
        for s in &self.sinks {
            lines.push(format!(
                "{} ({}) <- {}",
                s.section.path,
                s.section.kind,
                from(&s.inputs)
            ));
        }
        lines.join("\n")
    }
}
