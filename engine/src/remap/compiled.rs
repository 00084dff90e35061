//! The programs, compiled by the `vrl` crate.

use super::{functions, value, Link, Ran};
use serde_json::Value;
use vrl::compiler::runtime::{Runtime, Terminate};
use vrl::compiler::{state::RuntimeState, TargetValue, TimeZone};
use vrl::diagnostic::Formatter;
use vrl::value::{Secrets, Value as Vrl};

/// A compiled program and where it came from.
pub(crate) struct Program {
    program: vrl::compiler::Program,
    timezone: TimeZone,
    /// The program names `%` (reads, assigns or deletes there): the record's metadata goes
    /// into VRL and back. A program that never names it cannot change it.
    names_metadata: bool,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Program")
    }
}

/// VRL's diagnostics for `source`, each location given as `at:LINE:COLUMN`.
fn diagnostics(at: &str, source: &str, list: vrl::diagnostic::DiagnosticList) -> String {
    let text = Formatter::new(source, list).to_string();
    format!(
        "VRL does not compile:{}",
        text.replace("┌─ :", &format!("┌─ {at}:"))
    )
}

impl Program {
    /// Compiles `source`; `at` (`transforms.clean.source`) names it in the diagnostics;
    /// `allow_env` lets it read environment variables.
    pub(crate) fn compile(source: &str, at: &str, allow_env: bool) -> Result<Program, String> {
        let functions = functions::enabled(allow_env);
        let compiled = vrl::compiler::compile(source, &functions)
            .map_err(|list| diagnostics(at, source, list))?;
        let info = compiled.program.info();
        let names_metadata = info
            .target_queries
            .iter()
            .chain(&info.target_assignments)
            .any(|p| p.prefix == vrl::path::PathPrefix::Metadata);
        Ok(Program {
            program: compiled.program,
            timezone: TimeZone::parse("UTC").unwrap_or_default(),
            names_metadata,
        })
    }

    /// True when the program can fail at run time (it calls a function with `!`).
    pub(crate) fn fallible(&self) -> bool {
        self.program.info().fallible
    }

    /// True when the program can `abort`.
    pub(crate) fn abortable(&self) -> bool {
        self.program.info().abortable
    }

    /// True when the program reads the record's metadata (`%kafka.topic`): the file's
    /// sources then carry it.
    pub(crate) fn reads_metadata(&self) -> bool {
        self.program
            .info()
            .target_queries
            .iter()
            .any(|p| p.prefix == vrl::path::PathPrefix::Metadata)
    }

    /// True when the program's result is always a boolean (a condition).
    pub(crate) fn is_condition(&self) -> bool {
        self.program.final_type_info().result.is_boolean()
    }

    /// Runs the program on `target`: its result, or why it stopped.
    fn resolve(&self, target: &mut TargetValue) -> Result<Vrl, Terminate> {
        Runtime::new(RuntimeState::default()).resolve(target, &self.program, &self.timezone)
    }

    /// Runs a condition on `record` (which it cannot change): its result, or why it failed.
    pub(crate) fn test(&self, record: &Value) -> Result<bool, String> {
        let mut target = target_ref(record);
        match self.resolve(&mut target) {
            Ok(Vrl::Boolean(b)) => Ok(b),
            Ok(other) => Err(format!(
                "the condition gave {} where a boolean was expected",
                other.kind_str()
            )),
            Err(Terminate::Abort(e)) | Err(Terminate::Error(e)) => Err(e.to_string()),
            Err(Terminate::Interrupted) => Err("interrupted".into()),
        }
    }
}

/// Runs consecutive `remap`s on `record` as one VRL value, converted once each way (a chain
/// of remaps stays in VRL values), pushing what they made of it onto `out`: the record (one
/// per element where a program made `.` an array), or why it stopped.
pub(crate) fn run_chain(links: &[Link], mut record: Value, out: &mut Vec<Ran>) {
    // No program names `%`: the metadata goes around them as it came, never converted.
    let aside = match links.iter().any(|l| l.program.names_metadata) {
        true => None,
        false => rivus_sdk::metadata::take(&mut record),
    };
    let start = out.len();
    run_links(links, target(record), out);
    let Some(meta) = aside else { return };
    let made = out.len() - start;
    let mut meta = Some(meta);
    for (i, r) in out[start..].iter_mut().enumerate() {
        let m = match i + 1 == made {
            true => meta.take(),
            false => meta.clone(),
        };
        if let (Ran::Record(v) | Ran::Failed { record: v, .. }, Some(m)) = (r, m) {
            rivus_sdk::metadata::put(v, m);
        }
    }
}

fn run_links(links: &[Link], mut t: TargetValue, out: &mut Vec<Ran>) {
    for (i, link) in links.iter().enumerate() {
        let p = &link.program;
        // The record as it came into this remap, for the error policy or to pass on after
        // an `abort`: kept only where the program can fail or abort.
        let keep = p.fallible() || (p.abortable() && !link.drop_on_abort);
        let before = keep.then(|| (t.value.clone(), t.metadata.clone()));
        match p.resolve(&mut t) {
            Ok(_) => {
                if let Vrl::Array(items) = &mut t.value {
                    for value in std::mem::take(items) {
                        let each = TargetValue {
                            value,
                            metadata: t.metadata.clone(),
                            secrets: Secrets::default(),
                        };
                        run_links(&links[i + 1..], each, out);
                    }
                    return;
                }
            }
            Err(Terminate::Abort(_)) if link.drop_on_abort => {
                out.push(Ran::Dropped("abort"));
                return;
            }
            Err(Terminate::Abort(_)) => {
                (t.value, t.metadata) = before.expect("kept: the program can abort");
            }
            Err(_) if link.drop_on_error => {
                out.push(Ran::Dropped("error"));
                return;
            }
            Err(e) => {
                let message = match e {
                    Terminate::Abort(e) | Terminate::Error(e) => e.to_string(),
                    Terminate::Interrupted => "interrupted".into(),
                };
                let (value, metadata) = before.unwrap_or((t.value, t.metadata));
                out.push(Ran::Failed {
                    message,
                    record: json_or_text(&value, &metadata),
                });
                return;
            }
        }
    }
    out.push(match record_of(&t.value, &t.metadata) {
        Ok(record) => Ran::Record(record),
        Err(message) => Ran::Failed {
            message,
            record: json_or_text(&t.value, &t.metadata),
        },
    });
}

/// A VRL value and its metadata as a record; an error names what JSON cannot hold.
fn record_of(value: &Vrl, metadata: &Vrl) -> Result<Value, String> {
    let mut record = value::from_vrl(value)?;
    if !matches!(metadata, Vrl::Object(m) if m.is_empty()) {
        let meta = value::from_vrl(metadata).map_err(|e| format!("`%`: {e}"))?;
        rivus_sdk::metadata::put(&mut record, meta);
    }
    Ok(record)
}

/// [`record_of`], or VRL's notation of the value as text where JSON cannot hold it (for the
/// error policy, which keeps what there is).
fn json_or_text(value: &Vrl, metadata: &Vrl) -> Value {
    record_of(value, metadata).unwrap_or_else(|_| Value::String(value.to_string()))
}

/// A record as VRL's target: its value `.`, its metadata (`@metadata`) `%`, no secrets.
fn target(mut record: Value) -> TargetValue {
    let metadata = rivus_sdk::metadata::take(&mut record);
    TargetValue {
        value: value::to_vrl(record),
        metadata: metadata.map_or_else(|| Vrl::Object(Default::default()), value::to_vrl),
        secrets: Secrets::default(),
    }
}

/// [`target`] of a record the caller keeps.
fn target_ref(record: &Value) -> TargetValue {
    let key = rivus_sdk::metadata::KEY;
    match record {
        Value::Object(m) if m.contains_key(key) => TargetValue {
            value: Vrl::Object(
                m.iter()
                    .filter(|(k, _)| k.as_str() != key)
                    .map(|(k, v)| (k.as_str().into(), value::to_vrl_ref(v)))
                    .collect(),
            ),
            metadata: value::to_vrl_ref(&m[key]),
            secrets: Secrets::default(),
        },
        _ => TargetValue {
            value: value::to_vrl_ref(record),
            metadata: Vrl::Object(Default::default()),
            secrets: Secrets::default(),
        },
    }
}

/// Compiles a condition (`filter`'s `condition`, a route's): a VRL expression whose value is
/// always a boolean.
pub(crate) fn condition(source: &str, at: &str) -> Result<Program, String> {
    let p = Program::compile(source, at, false)?;
    if !p.is_condition() {
        return Err(format!(
            "`{}` is not a condition: its value is {}, not always a boolean (compare with \
             `==`, `>`, …, or test with a function such as `exists(.field)`)",
            source.trim(),
            p.program.final_type_info().result.kind()
        ));
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    /// What `p` (dropping on `abort`, failures to the error policy) makes of `record`.
    fn run(p: &Arc<Program>, record: Value) -> Vec<Ran> {
        let link = Link {
            program: Arc::clone(p),
            drop_on_error: false,
            drop_on_abort: true,
        };
        let mut out = Vec::new();
        run_chain(&[link], record, &mut out);
        out
    }

    fn compile(source: &str) -> Arc<Program> {
        Arc::new(Program::compile(source, "t", false).unwrap())
    }

    #[test]
    fn a_program_computes_fields_converts_types_and_parses() {
        let p = compile(
            r#"
            .amount = to_float!(.amount)
            .at = from_unix_timestamp!(.ms, unit: "milliseconds")
            .user = downcase!(.user)
            .parsed = parse_json!(.payload)
            del(.ms); del(.payload)
            "#,
        );
        assert_eq!(
            run(
                &p,
                json!({"amount": "12.50", "ms": 1_765_000_000_123_i64, "user": "ALICE",
                "payload": "{\"a\": [1, 2]}"})
            ),
            [Ran::Record(json!({
                "amount": 12.5, "at": "2025-12-06T05:46:40.123Z", "user": "alice",
                "parsed": {"a": [1, 2]},
            }))]
        );
        // A failing conversion is a failure with VRL's message and the record as it came.
        let bad = json!({"amount": "twelve", "ms": 1, "user": "a", "payload": "{}"});
        match &run(&p, bad.clone())[..] {
            [Ran::Failed { message, record }] => {
                assert!(message.contains("to_float"), "{message}");
                assert_eq!(record, &bad);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn timestamps_come_back_as_rfc_3339_in_utc() {
        let p = compile(".at = t'2026-12-06T10:00:00.123+01:00'");
        assert_eq!(
            run(&p, json!({})),
            [Ran::Record(json!({"at": "2026-12-06T09:00:00.123Z"}))]
        );
    }

    #[test]
    fn abort_and_an_array_root() {
        let p = compile("if .drop == true { abort }\n. = [{\"n\": 1}, {\"n\": 2}]");
        assert_eq!(run(&p, json!({"drop": true})), [Ran::Dropped("abort")]);
        assert_eq!(
            run(&p, json!({})),
            [Ran::Record(json!({"n": 1})), Ran::Record(json!({"n": 2}))]
        );
    }

    #[test]
    fn a_chain_runs_on_one_value_and_fans_out_into_the_rest() {
        let split = compile(". = [{\"n\": 1}, {\"n\": 2}]");
        let double = compile(".n = int!(.n) * 2\nif .n == 4 { abort }");
        let link = |p: &Arc<Program>, drop_on_abort| Link {
            program: Arc::clone(p),
            drop_on_error: false,
            drop_on_abort,
        };
        let mut out = Vec::new();
        run_chain(
            &[link(&split, true), link(&double, true)],
            json!({}),
            &mut out,
        );
        assert_eq!(out, [Ran::Record(json!({"n": 2})), Ran::Dropped("abort")]);
        // `abort` without dropping: the record passes on as it came into that remap.
        out.clear();
        run_chain(
            &[link(&split, true), link(&double, false)],
            json!({}),
            &mut out,
        );
        assert_eq!(
            out,
            [Ran::Record(json!({"n": 2})), Ran::Record(json!({"n": 2}))]
        );
        // A failure in the second remap keeps the record as the first left it.
        out.clear();
        let text = compile(". = [{\"n\": \"x\"}]");
        run_chain(
            &[link(&text, true), link(&double, true)],
            json!({}),
            &mut out,
        );
        match &out[..] {
            [Ran::Failed { message, record }] => {
                assert!(message.contains("int"), "{message}");
                assert_eq!(record, &json!({"n": "x"}));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn diagnostics_name_the_component_line_and_column() {
        let e =
            Program::compile(".a = 1\n.b = upcase(.a)", "transforms.up.source", false).unwrap_err();
        assert!(e.contains("transforms.up.source:2:"), "{e}");
        assert!(e.contains("error[E"), "{e}");
    }

    #[test]
    fn conditions_are_boolean_expressions() {
        let c = condition(".status == \"paid\" && ((.amount > 10) ?? false)", "c").unwrap();
        assert_eq!(c.test(&json!({"amount": 11, "status": "paid"})), Ok(true));
        assert_eq!(c.test(&json!({"amount": 11, "status": "open"})), Ok(false));
        let e = condition(".amount", "transforms.f.condition").unwrap_err();
        assert!(e.contains("not a condition"), "{e}");
        // `.amount` may not be a number: VRL wants the error handled.
        let e = condition(".amount > 10", "transforms.f.condition").unwrap_err();
        assert!(
            e.contains("error[E100]") && e.contains("transforms.f.condition:1:1"),
            "{e}"
        );
    }

    #[test]
    fn metadata_is_percent_read_and_set_and_comes_back_beside_the_record() {
        let p = compile(".topic = %kafka.topic\n%kafka.key = .user\n.n = 1");
        assert!(p.reads_metadata());
        let rec = json!({"user": "u1", "@metadata": {"kafka": {"topic": "orders", "key": "k0"}}});
        let want = json!({"user": "u1", "topic": "orders", "n": 1,
            "@metadata": {"kafka": {"topic": "orders", "key": "u1"}}});
        assert_eq!(run(&p, rec.clone()), [Ran::Record(want)]);
        // Without metadata `%` reads null; what the program sets comes back all the same.
        assert_eq!(
            run(&p, json!({"user": "u2"})),
            [Ran::Record(json!({"user": "u2", "topic": null, "n": 1,
                "@metadata": {"kafka": {"key": "u2"}}}))]
        );
        let plain = Program::compile(".n = 1", "t", false).unwrap();
        assert!(!plain.reads_metadata());
        // A program that does not name `%` passes the metadata around, as it came, to every
        // record it makes.
        let split = compile(". = [{\"n\": 1}, {\"n\": 2}]");
        let meta = json!({"kafka": {"topic": "orders", "key": {"base64": "/wB/"}}});
        assert_eq!(
            run(&split, json!({"@metadata": meta})),
            [
                Ran::Record(json!({"n": 1, "@metadata": meta})),
                Ran::Record(json!({"n": 2, "@metadata": meta}))
            ]
        );
        let writes = compile("%kafka.key = \"k\"");
        assert!(!writes.reads_metadata() && writes.names_metadata);
        let c = condition("%kafka.topic == \"orders\"", "c").unwrap();
        assert!(c.reads_metadata());
        assert_eq!(c.test(&rec), Ok(true));
        assert_eq!(c.test(&json!({})), Ok(false));
    }

    #[test]
    fn environment_variables_only_when_allowed() {
        let e = Program::compile(".home = get_env_var!(\"HOME\")", "t", false).unwrap_err();
        assert!(e.contains("get_env_var"), "{e}");
        let p = Arc::new(Program::compile(".home = get_env_var!(\"HOME\")", "t", true).unwrap());
        assert!(matches!(&run(&p, json!({}))[..], [Ran::Record(_)]));
    }
}
