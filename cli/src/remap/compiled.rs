//! The programs, compiled by the `vrl` crate.

use super::{functions, value, Outcome};
use serde_json::Value;
use vrl::compiler::runtime::{Runtime, Terminate};
use vrl::compiler::{state::RuntimeState, TargetValue, TimeZone};
use vrl::diagnostic::Formatter;
use vrl::value::{Secrets, Value as Vrl};

/// A compiled program and where it came from.
pub(crate) struct Program {
    program: vrl::compiler::Program,
    timezone: TimeZone,
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
        Ok(Program {
            program: compiled.program,
            timezone: TimeZone::parse("UTC").unwrap_or_default(),
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

    /// True when the program's result is always a boolean (a condition).
    pub(crate) fn is_condition(&self) -> bool {
        self.program.final_type_info().result.is_boolean()
    }

    /// Runs the program on `target`: its result, or why it stopped.
    fn resolve(&self, target: &mut TargetValue) -> Result<Vrl, Terminate> {
        Runtime::new(RuntimeState::default()).resolve(target, &self.program, &self.timezone)
    }

    /// Runs a `remap` program on `record`.
    pub(crate) fn remap(&self, record: Value) -> Outcome {
        self.remap_target(target(value::to_vrl(record)))
    }

    /// Runs a `remap` program on a copy of `record`, which the caller keeps (for the error
    /// policy, or to pass on after an `abort`).
    pub(crate) fn remap_copy(&self, record: &Value) -> Outcome {
        self.remap_target(target(value::to_vrl_ref(record)))
    }

    fn remap_target(&self, mut target: TargetValue) -> Outcome {
        let failed = |message: String, left: &Vrl| {
            let left = value::from_vrl(left).unwrap_or_else(|_| Value::String(left.to_string()));
            Outcome::Failed(message, left)
        };
        match self.resolve(&mut target) {
            Ok(_) => match &target.value {
                Vrl::Array(items) => {
                    let mut out = Vec::with_capacity(items.len());
                    for (i, item) in items.iter().enumerate() {
                        match value::from_vrl(item) {
                            Ok(v) => out.push(v),
                            Err(e) => return failed(format!("record {i} of `.`: {e}"), item),
                        }
                    }
                    Outcome::Records(out)
                }
                v => match value::from_vrl(v) {
                    Ok(json) => Outcome::Records(vec![json]),
                    Err(e) => failed(e, v),
                },
            },
            Err(Terminate::Abort(e)) => Outcome::Aborted(e.to_string()),
            Err(Terminate::Error(e)) => failed(e.to_string(), &target.value),
            Err(Terminate::Interrupted) => failed("interrupted".into(), &target.value),
        }
    }

    /// Runs a condition on `record` (which it cannot change): its result, or why it failed.
    pub(crate) fn test(&self, record: &Value) -> Result<bool, String> {
        let mut target = target(value::to_vrl_ref(record));
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

/// A record (`.`) with no metadata (`%`) and no secrets.
fn target(value: Vrl) -> TargetValue {
    TargetValue {
        value,
        metadata: Vrl::Object(Default::default()),
        secrets: Secrets::default(),
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

    #[test]
    fn a_program_computes_fields_converts_types_and_parses() {
        let p = Program::compile(
            r#"
            .amount = to_float!(.amount)
            .at = from_unix_timestamp!(.ms, unit: "milliseconds")
            .user = downcase!(.user)
            .parsed = parse_json!(.payload)
            del(.ms); del(.payload)
            "#,
            "transforms.t.source",
            false,
        )
        .unwrap();
        assert_eq!(
            p.remap(
                json!({"amount": "12.50", "ms": 1_765_000_000_123_i64, "user": "ALICE",
                "payload": "{\"a\": [1, 2]}"})
            ),
            Outcome::Records(vec![json!({
                "amount": 12.5, "at": "2025-12-06T05:46:40.123Z", "user": "alice",
                "parsed": {"a": [1, 2]},
            })])
        );
        // A failing conversion is a failure with VRL's message, the record kept by the caller.
        match p.remap(json!({"amount": "twelve", "ms": 1, "user": "a", "payload": "{}"})) {
            Outcome::Failed(m, _) => assert!(m.contains("to_float"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn timestamps_come_back_as_rfc_3339_in_utc() {
        let p = Program::compile(".at = t'2026-12-06T10:00:00.123+01:00'", "t", false).unwrap();
        assert_eq!(
            p.remap(json!({})),
            Outcome::Records(vec![json!({"at": "2026-12-06T09:00:00.123Z"})])
        );
    }

    #[test]
    fn abort_and_an_array_root() {
        let p = Program::compile(
            "if .drop == true { abort }\n. = [{\"n\": 1}, {\"n\": 2}]",
            "t",
            false,
        )
        .unwrap();
        assert!(matches!(
            p.remap(json!({"drop": true})),
            Outcome::Aborted(_)
        ));
        assert_eq!(
            p.remap(json!({})),
            Outcome::Records(vec![json!({"n": 1}), json!({"n": 2})])
        );
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
    fn environment_variables_only_when_allowed() {
        let e = Program::compile(".home = get_env_var!(\"HOME\")", "t", false).unwrap_err();
        assert!(e.contains("get_env_var"), "{e}");
        let p = Program::compile(".home = get_env_var!(\"HOME\")", "t", true).unwrap();
        assert!(matches!(p.remap(json!({})), Outcome::Records(_)));
    }
}
