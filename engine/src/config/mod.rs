//! The pipeline file: TOML read into typed settings, with `${VAR}` references to the
//! environment expanded first and every error naming the path of the bad field. The
//! connector sections (`[source]`, `[sink]`, `[sources.NAME]`, `[sinks.NAME]`,
//! `[errors.destination]`) are parsed by the type their `type` names in the [`Registry`];
//! how the components connect is [`graph`]'s.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::registry::{AnyDestination, Registry, Section};

pub(crate) mod condition;
mod env;
pub(crate) mod graph;
mod restart;
mod transform;
pub(crate) mod transform_tests;

pub(crate) use env::expand_env;
pub(crate) use graph::{Graph, SinkNode, TransformKind};
pub(crate) use restart::{RestartConfig, RestartSection};
pub(crate) use rivus_pipeline_file::{duration, parse_duration};
use transform::compile;
pub(crate) use transform::{CompareOp, TransformConfig};

/// A whole pipeline file, its connector sections parsed.
#[derive(Debug, Clone)]
pub(crate) struct PipelineConfig {
    /// The job's name (keys its checkpoints).
    pub name: String,
    /// Subtasks per stage (default 1).
    pub parallelism: usize,
    /// Checkpoints: interval and state directory. Without it, no checkpoints.
    pub checkpoint: Option<CheckpointSection>,
    /// Restarts after a failure (default with checkpoints: exponential delay, unlimited).
    pub restart: Option<RestartSection>,
    /// No record into the sink and no checkpoint for this long: the job is reported stalled
    /// (default: five checkpoint intervals, at least 30 s; 60 s without checkpoints).
    pub stall_threshold: Option<Duration>,
    /// `[restart] stall_timeout`: a stalled job is restarted after this long.
    pub stall_timeout: Option<Duration>,
    /// What to do with records that cannot be read or written (a sink may have its own).
    pub errors: ErrorsSection,
    /// The sources, transforms and sinks, and how they connect.
    pub graph: Graph,
    /// `rivus run --worker ID`: this process is one worker of the job (not in the file).
    pub worker: Option<String>,
    /// `[[tests]]`: unit tests of the transforms, for `rivus test`.
    pub tests: Vec<transform_tests::TransformTest>,
}

impl PipelineConfig {
    /// What a section is told: the job's name, parallelism, worker, checkpoint interval, and
    /// `policy` for its bad records.
    pub(crate) fn context(
        &self,
        policy: rivus_sdk::error_policy::ErrorPolicy,
        dry: bool,
    ) -> rivus_pipeline_file::SectionContext {
        let mut ctx = rivus_pipeline_file::SectionContext::new(&self.name);
        ctx.parallelism = self.parallelism;
        ctx.worker = self.worker.clone();
        ctx.policy = policy;
        ctx.checkpoint_interval = self.checkpoint.as_ref().map(|c| c.interval);
        ctx.dry = dry;
        ctx.metadata = self.graph.reads_metadata();
        ctx
    }
}

/// The JSON Schema of a whole pipeline file with `registry`'s sections: `[source]`, `[sink]`,
/// `[sources.NAME]`, `[sinks.NAME]` and `[errors.destination]` one of the registered types
/// each (by `type`), every option described by its doc comment — for editors (`#:schema` in
/// the file) and `rivus schema`.
pub fn schema(registry: &Registry) -> Value {
    let mut g = schemars::SchemaGenerator::default();
    let mut file = <RawPipeline as schemars::JsonSchema>::json_schema(&mut g).to_value();
    let [sources, sinks, destinations] = registry.section_schemas(&mut g);
    let errors = g.subschema_for::<RawErrors>().to_value();
    let inputs = g.subschema_for::<Vec<String>>().to_value();
    let transform = g.subschema_for::<TransformConfig>().to_value();
    let route = g.subschema_for::<graph::RouteConfig>().to_value();
    file["properties"]["source"] = sources.clone();
    file["properties"]["sink"] = sinks.clone();
    file["properties"]["sources"]["additionalProperties"] = sources;
    file["properties"]["sinks"]["additionalProperties"] = with_properties(
        sinks,
        &[("inputs", &inputs, true), ("errors", &errors, false)],
    );
    file["properties"]["transforms"]["additionalProperties"] = serde_json::json!({
        "anyOf": [
            with_properties(inline(&g, transform), &[("inputs", &inputs, true)]),
            route,
        ]
    });
    if let Some(errors) = file_ref_target(&mut file, "errors") {
        errors["properties"]["destination"] = destinations;
    }
    let defs: serde_json::Map<String, Value> = g
        .definitions()
        .iter()
        .map(|(k, d)| (k.clone(), d.clone()))
        .collect();
    file["$defs"] = Value::Object(defs);
    file["$schema"] = Value::from("https://json-schema.org/draft/2020-12/schema");
    file["title"] = Value::from("rivus pipeline file");
    file
}

/// A `$ref` replaced by the definition it names.
fn inline(g: &schemars::SchemaGenerator, schema: Value) -> Value {
    let target = schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| g.definitions().get(r.strip_prefix("#/$defs/")?).cloned());
    target.unwrap_or(schema)
}

/// `choices` (a `oneOf` of sections, or one schema with `oneOf` variants) with the properties
/// `extra` added to each choice (`(name, schema, required)`): a named component's `inputs`.
fn with_properties(mut choices: Value, extra: &[(&str, &Value, bool)]) -> Value {
    let add = |choice: &mut Value| {
        for (name, schema, required) in extra {
            choice["properties"][*name] = (*schema).clone();
            if *required {
                if let Some(r) = choice["required"].as_array_mut() {
                    r.push(Value::from(*name));
                } else {
                    choice["required"] = serde_json::json!([name]);
                }
            }
        }
    };
    match choices.get_mut("oneOf").and_then(Value::as_array_mut) {
        Some(list) => list.iter_mut().for_each(add),
        None => add(&mut choices),
    }
    choices
}

/// The schema of property `name` of `file` itself (not a `$ref` to it: the `errors` table is
/// inlined so that its destination can be filled in).
fn file_ref_target<'a>(file: &'a mut Value, name: &str) -> Option<&'a mut Value> {
    let reference = file["properties"][name]
        .get("$ref")
        .and_then(Value::as_str)
        .map(str::to_owned);
    if let Some(r) = reference {
        let def = r.strip_prefix("#/$defs/")?.to_owned();
        let inlined = file.get("$defs")?.get(&def)?.clone();
        file["properties"][name] = inlined;
    }
    file.get_mut("properties")?.get_mut(name)
}

/// The file as serde reads it: the connector sections still tables.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawPipeline {
    /// The job's name (keys its checkpoints).
    pub name: String,
    /// Unit tests of the transforms, which `rivus test FILE` runs (no source, no sink).
    #[serde(default)]
    pub tests: Vec<transform_tests::TransformTest>,
    /// Subtasks per stage (default 1).
    #[serde(default = "one")]
    pub parallelism: usize,
    /// Checkpoints: interval and state directory. Without it, no checkpoints.
    pub checkpoint: Option<CheckpointSection>,
    /// Restarts after a failure (default with checkpoints: exponential delay, unlimited), and
    /// `stall_timeout`.
    pub restart: Option<RestartConfig>,
    /// No progress for this long: reported stalled.
    #[serde(default, deserialize_with = "rivus_pipeline_file::opt_duration")]
    #[schemars(with = "Option<rivus_pipeline_file::DurationText>")]
    pub stall_threshold: Option<Duration>,
    /// What to do with records that cannot be read or written.
    #[serde(default)]
    pub errors: RawErrors,
    /// Where records come from, in a pipeline of one path.
    #[schemars(with = "Option<serde_json::Map<String, Value>>")]
    pub source: Option<toml::Table>,
    /// Built-in transforms, in order, in a pipeline of one path.
    #[serde(default, rename = "transform")]
    pub transforms: Vec<TransformConfig>,
    /// Where records go, in a pipeline of one path.
    #[schemars(with = "Option<serde_json::Map<String, Value>>")]
    pub sink: Option<toml::Table>,
    /// Named sources: `[sources.NAME]`.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, serde_json::Map<String, Value>>")]
    pub sources: BTreeMap<String, toml::Table>,
    /// Named transforms, each with the `inputs` it reads: `[transforms.NAME]`.
    #[serde(default, rename = "transforms")]
    #[schemars(with = "BTreeMap<String, serde_json::Map<String, Value>>")]
    pub named_transforms: BTreeMap<String, toml::Table>,
    /// Named sinks, each with the `inputs` it reads and its own `errors` if it differs from
    /// the job's: `[sinks.NAME]`.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, serde_json::Map<String, Value>>")]
    pub sinks: BTreeMap<String, toml::Table>,
}

fn one() -> usize {
    1
}

/// `[checkpoint]`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CheckpointSection {
    /// How often (`500ms`, `2s`, `1m`).
    #[serde(deserialize_with = "duration")]
    #[schemars(with = "rivus_pipeline_file::DurationText")]
    pub interval: Duration,
    /// Directory of the checkpoint files; a restart resumes from the newest. One of `dir`
    /// and `store`.
    pub dir: Option<String>,
    /// Or an object store, `s3://bucket/prefix` (endpoint, region and keys from
    /// `AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`): a
    /// process on another machine resumes from it.
    pub store: Option<String>,
    /// How many of the newest checkpoints are kept (default 3).
    pub retain: Option<usize>,
    /// With `store`: how long the owner's lease lasts unrenewed (default `30s`), the time
    /// before another process may take over from one that died.
    #[serde(default, deserialize_with = "rivus_pipeline_file::opt_duration")]
    #[schemars(with = "Option<rivus_pipeline_file::DurationText>")]
    pub lease: Option<Duration>,
    /// When the newest checkpoint cannot be read: `refuse` to start, naming it (default), or
    /// `restore-older` — the newest intact one, whose replay exactly-once sinks may write again.
    #[serde(default)]
    pub on_damaged: OnDamagedName,
}

/// `[checkpoint] on_damaged`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum OnDamagedName {
    /// Refuse to start, naming the damaged checkpoint.
    #[default]
    Refuse,
    /// Restore the newest intact older checkpoint.
    RestoreOlder,
}

impl From<OnDamagedName> for rivus_sdk::checkpoint::OnDamaged {
    fn from(n: OnDamagedName) -> Self {
        match n {
            OnDamagedName::Refuse => Self::Refuse,
            OnDamagedName::RestoreOlder => Self::RestoreOlder,
        }
    }
}

/// `[errors]`.
#[derive(Debug, Clone, Default)]
pub(crate) struct ErrorsSection {
    /// `fail` (default), `skip` or `dead-letter`.
    pub policy: PolicyName,
    /// The dead-letter file (JSON lines), for `dead-letter`.
    pub dead_letter: Option<String>,
    /// Or a dead-letter destination (`[errors.destination] type = ...`, any type the
    /// registry holds), for `dead-letter`. Each letter is confirmed by the destination
    /// before the record counts as done.
    pub destination: Option<Section<dyn AnyDestination>>,
}

/// `[errors]` as serde reads it.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawErrors {
    /// `fail` (default), `skip` or `dead-letter`.
    #[serde(default)]
    policy: PolicyName,
    /// The dead-letter file (JSON lines), for `dead-letter`.
    dead_letter: Option<String>,
    /// Or a dead-letter destination (`[errors.destination] type = ...`), for `dead-letter`.
    #[schemars(with = "Option<serde_json::Map<String, Value>>")]
    destination: Option<toml::Table>,
}

/// The error policies by name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum PolicyName {
    /// Stop at the first bad record.
    #[default]
    Fail,
    /// Count and log it, go on.
    Skip,
    /// Write it to the dead-letter file, go on.
    DeadLetter,
}

/// Reads and checks `path`, its sections parsed by the types of `registry`. The error names
/// the file, the path of the bad field and what was expected; it never repeats values (they
/// may be secrets).
pub(crate) fn load(path: &Path, registry: &Registry) -> Result<PipelineConfig, String> {
    let raw = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    parse(&raw, registry).map_err(|e| format!("{}: {e}", path.display()))
}

/// Parses the text of a pipeline file.
pub(crate) fn parse(raw: &str, registry: &Registry) -> Result<PipelineConfig, String> {
    let text = expand_env(raw)?;
    let de = toml::Deserializer::parse(&text).map_err(|e| match e.span() {
        Some(span) => format!(
            "line {}: {}",
            text[..span.start.min(text.len())].matches('\n').count() + 1,
            e.message()
        ),
        None => e.message().to_owned(),
    })?;
    let mut raw: RawPipeline = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let message = inner.message().to_owned();
        if path == "." {
            message
        } else {
            format!("{}: {message}", refine(&text, &path, &message))
        }
    })?;
    let graph = components(&mut raw, registry)?;
    let config = PipelineConfig {
        errors: errors_section(raw.errors, "errors", registry)?,
        name: raw.name,
        parallelism: raw.parallelism,
        checkpoint: raw.checkpoint,
        restart: raw.restart.as_ref().and_then(|r| r.strategy.clone()),
        stall_threshold: raw.stall_threshold,
        stall_timeout: raw.restart.and_then(|r| r.stall_timeout),
        graph,
        worker: None,
        tests: raw.tests,
    };
    if config.parallelism == 0 {
        return Err("parallelism: must be at least 1".into());
    }
    if let Some(r) = &config.restart {
        r.strategy()
            .validate()
            .map_err(|e| match e.under("restart") {
                rivus_sdk::Error::Config { path, message } => format!("{path}: {message}"),
                e => e.to_string(),
            })?;
    }
    let stall = rivus_sdk::StallSettings {
        threshold: config.stall_threshold.unwrap_or(
            rivus_sdk::StallSettings::default_for(config.checkpoint.as_ref().map(|c| c.interval))
                .threshold,
        ),
        timeout: config.stall_timeout,
    };
    if let Some(t) = stall.timeout.filter(|t| *t < stall.threshold) {
        return Err(format!(
            "restart.stall_timeout: {t:?} is shorter than the stall threshold ({:?}): the job \
             would restart before it is reported stalled",
            stall.threshold
        ));
    }
    config.graph.check()?;
    transform_tests::check(&config.tests, &config.graph)?;
    Ok(config)
}

/// `[errors]` (or a sink's `errors`) at `path`, its destination parsed; the dead-letter
/// policy needs one place for its letters.
fn errors_section(
    raw: RawErrors,
    path: &str,
    registry: &Registry,
) -> Result<ErrorsSection, String> {
    let errors = ErrorsSection {
        policy: raw.policy,
        dead_letter: raw.dead_letter,
        destination: raw
            .destination
            .map(|d| registry.parse_destination(&format!("{path}.destination"), d))
            .transpose()?,
    };
    if errors.policy == PolicyName::DeadLetter {
        match (&errors.dead_letter, &errors.destination) {
            (None, None) => {
                return Err(format!(
                    "{path}.dead_letter: the dead-letter policy needs a file (or an \
                     {path}.destination)"
                ))
            }
            (Some(_), Some(_)) => {
                return Err(format!(
                    "{path}.destination: give either a dead_letter file or a destination"
                ))
            }
            _ => {}
        }
    }
    Ok(errors)
}

/// Reads a component table at `path` with serde; errors name the field below `path`.
fn component<T: serde::de::DeserializeOwned>(table: toml::Table, path: &str) -> Result<T, String> {
    serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
        let at = e.path().to_string();
        let message = e.into_inner().message().to_owned();
        if at == "." {
            format!("{path}: {message}")
        } else {
            format!("{path}.{at}: {message}")
        }
    })
}

/// The sources, transforms and sinks of the file: the single-path form or named components
/// (not both).
fn components(raw: &mut RawPipeline, registry: &Registry) -> Result<Graph, String> {
    let named =
        !(raw.sources.is_empty() && raw.named_transforms.is_empty() && raw.sinks.is_empty());
    let single = raw.source.is_some() || raw.sink.is_some() || !raw.transforms.is_empty();
    if named && single {
        return Err(
            "sources: give either [source], [[transform]] and [sink] (one path) or named \
             [sources.NAME], [transforms.NAME] and [sinks.NAME], not both"
                .into(),
        );
    }
    if !named {
        let source = raw
            .source
            .take()
            .ok_or("source: missing: give [source] (or [sources.NAME])")?;
        let sink = raw
            .sink
            .take()
            .ok_or("sink: missing: give [sink] (or [sinks.NAME])")?;
        for (i, t) in raw.transforms.iter_mut().enumerate() {
            compile(t, &format!("transform[{i}]"))?;
        }
        return Ok(Graph::path(
            registry.parse_source("source", source)?,
            std::mem::take(&mut raw.transforms),
            registry.parse_sink("sink", sink)?,
        ));
    }
    let mut graph = Graph::default();
    for (name, table) in std::mem::take(&mut raw.sources) {
        let section = registry.parse_source(&format!("sources.{name}"), table)?;
        graph.sources.push(graph::SourceNode { name, section });
    }
    for (name, mut table) in std::mem::take(&mut raw.named_transforms) {
        let path = format!("transforms.{name}");
        let (inputs, kind) = if table.get("type").and_then(toml::Value::as_str) == Some("route") {
            let route: graph::RouteConfig = component(table, &path)?;
            let mut routes = Vec::with_capacity(route.route.len());
            for (r, c) in route.route {
                let at = format!("{path}.route.{r}");
                let test = match c {
                    toml::Value::String(vrl) => condition::Test::vrl(&vrl, &at)?,
                    other => {
                        let c: graph::Condition = component(
                            match other {
                                toml::Value::Table(t) => t,
                                _ => {
                                    return Err(format!(
                                        "{at}: a VRL condition (text) or a comparison                                          ({{ field, op, value }})"
                                    ))
                                }
                            },
                            &at,
                        )?;
                        condition::Test::compare(&c.field, c.op, c.value.as_ref(), &at)?
                    }
                };
                routes.push((r, test));
            }
            (route.inputs, TransformKind::Route(routes))
        } else {
            let inputs = inputs_of(&mut table, &path)?;
            let mut t: TransformConfig = component(table, &path)?;
            compile(&mut t, &path)?;
            (inputs, TransformKind::Steps(vec![t]))
        };
        graph.transforms.push(graph::TransformNode {
            name,
            inputs: graph::outputs(&inputs),
            path,
            kind,
        });
    }
    for (name, mut table) in std::mem::take(&mut raw.sinks) {
        let path = format!("sinks.{name}");
        let inputs = inputs_of(&mut table, &path)?;
        let errors = match table.remove("errors") {
            Some(toml::Value::Table(t)) => {
                let at = format!("{path}.errors");
                Some(errors_section(component(t, &at)?, &at, registry)?)
            }
            Some(_) => return Err(format!("{path}.errors: a table")),
            None => None,
        };
        let section = registry.parse_sink(&path, table)?;
        graph.sinks.push(SinkNode {
            name,
            inputs: graph::outputs(&inputs),
            section,
            errors,
        });
    }
    Ok(graph)
}

/// Takes a component's `inputs` (a list of names) out of its table.
fn inputs_of(table: &mut toml::Table, path: &str) -> Result<Vec<String>, String> {
    /// A component's `inputs`.
    #[derive(Deserialize)]
    struct Inputs {
        inputs: Vec<String>,
    }
    match table.remove("inputs") {
        Some(v) => component(toml::Table::from_iter([("inputs".to_owned(), v)]), path)
            .map(|w: Inputs| w.inputs),
        None => Err(format!(
            "{path}.inputs: missing: name the components it reads"
        )),
    }
}

/// Inside a section chosen by `type` or `strategy`, serde reports the section, not the field:
/// name the unknown field, or find the field holding the value the error quotes (an unknown
/// variant, a bad duration).
fn refine(text: &str, path: &str, message: &str) -> String {
    let unknown_field = message
        .strip_prefix("unknown field `")
        .and_then(|m| m.split('`').next());
    if let Some(field) = unknown_field {
        // Outside a tagged section serde's path already ends with the field.
        if path.rsplit('.').next() == Some(field) {
            return path.to_owned();
        }
    }
    let quoted = message.strip_prefix("unknown variant `").or_else(|| {
        message
            .strip_prefix('`')
            .filter(|_| message.contains("` is not a"))
    });
    let bad = quoted.and_then(|m| m.split('`').next());
    if unknown_field.is_none() && bad.is_none() {
        return path.to_owned();
    }
    let Some(node) = text
        .parse::<toml::Table>()
        .ok()
        .and_then(|root| lookup(toml::Value::Table(root), path))
    else {
        return path.to_owned();
    };
    // The key named by the error (an unknown field) or holding the quoted value, searched
    // through the section's nested tables (`tls = { cafile = .. }` → `sink.tls.cafile`).
    let found = find(&node, &|k, v| match unknown_field {
        Some(f) => k == f,
        None => v.as_str() == bad,
    });
    match found {
        Some(rest) => format!("{path}.{rest}"),
        None => path.to_owned(),
    }
}

/// The value at a serde path (`transform[0]`, `sink`).
fn lookup(mut node: toml::Value, path: &str) -> Option<toml::Value> {
    for part in path.split('.') {
        let (key, index) = match part.split_once('[') {
            Some((k, i)) => (k, i.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        let next = node.get(key)?.clone();
        node = match index {
            Some(i) => next.get(i)?.clone(),
            None => next,
        };
    }
    Some(node)
}

/// The dotted path, below `node`, of the first key for which `hit(key, value)` holds.
fn find(node: &toml::Value, hit: &dyn Fn(&str, &toml::Value) -> bool) -> Option<String> {
    let table = node.as_table()?;
    if let Some((k, _)) = table.iter().find(|(k, v)| hit(k, v)) {
        return Some(k.clone());
    }
    table
        .iter()
        .find_map(|(k, v)| find(v, hit).map(|rest| format!("{k}.{rest}")))
}

/// A TOML value as JSON.
pub(crate) fn to_json(v: &toml::Value) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests;
