//! `[[transform]]` and `[transforms.NAME]`: the transforms' options as serde reads them, and
//! their compilation when the file is read (VRL programs and conditions, comparisons).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::condition;

/// `[[transform]]`, by `type`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub(crate) enum TransformConfig {
    /// Keep records whose field compares true (`field`, `op`, `value`), or for which a VRL
    /// boolean expression is true (`condition`).
    Filter {
        /// The field compared (a path: `customer.country`).
        field: Option<String>,
        /// How it is compared with `value`; `exists` and `missing` need no value.
        op: Option<CompareOp>,
        /// The value compared with (not needed for `exists` / `missing`).
        #[schemars(with = "Option<Value>")]
        value: Option<toml::Value>,
        /// A VRL boolean expression (`.amount > 10 && .status == "paid"`), instead of
        /// `field`, `op` and `value`.
        condition: Option<String>,
        /// Compiled when the file is read.
        #[serde(skip)]
        #[schemars(skip)]
        test: Option<condition::Test>,
    },
    /// A VRL program run on each record (`source`, or `file`): it may change, add and remove
    /// fields, `abort` (the record is dropped and counted), or fail (the record goes to the
    /// error policy with VRL's message); a record whose `.` becomes an array becomes one record
    /// per element.
    Remap {
        /// The program's text.
        source: Option<String>,
        /// A file holding the program, instead of `source`.
        file: Option<String>,
        /// Drop (and count) a record whose program failed, instead of handing it to the error
        /// policy.
        #[serde(default)]
        drop_on_error: bool,
        /// Drop (and count) a record whose program called `abort` (the default); `false`
        /// passes it on unchanged.
        #[serde(default = "yes")]
        drop_on_abort: bool,
        /// Let the program read environment variables (`get_env_var`); off, so that a program
        /// reads no secret it was not given.
        #[serde(default)]
        allow_env: bool,
        /// Compiled when the file is read.
        #[serde(skip)]
        #[schemars(skip)]
        program: Option<std::sync::Arc<crate::remap::Program>>,
    },
    /// Rename fields: `{ old = "new" }`.
    Rename {
        /// The old name of each field, and its new one.
        fields: BTreeMap<String, String>,
    },
    /// Remove fields.
    Drop {
        /// The fields removed.
        fields: Vec<String>,
    },
    /// Set fields to constant values.
    Add {
        /// Each field's name and value (a value already there is replaced).
        #[schemars(with = "BTreeMap<String, Value>")]
        fields: BTreeMap<String, toml::Value>,
    },
    /// Parse a text field holding JSON; an object parsed from field `"."` becomes the record.
    ParseJson {
        /// The field holding the text, or `"."` for the whole record.
        field: String,
    },
    /// Route records with the same value of `field` to the same sink subtask.
    Key {
        /// The field whose value chooses the subtask.
        field: String,
    },
}

impl TransformConfig {
    /// The `type` in the file.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            TransformConfig::Filter { .. } => "filter",
            TransformConfig::Remap { .. } => "remap",
            TransformConfig::Rename { .. } => "rename",
            TransformConfig::Drop { .. } => "drop",
            TransformConfig::Add { .. } => "add",
            TransformConfig::ParseJson { .. } => "parse-json",
            TransformConfig::Key { .. } => "key",
        }
    }

    /// Whether it reads the records' metadata (`%kafka.topic` in a condition or a program,
    /// `%kafka.key` as the key's field).
    pub(crate) fn reads_metadata(&self) -> bool {
        match self {
            TransformConfig::Filter { test, .. } => {
                test.as_ref().is_some_and(condition::Test::reads_metadata)
            }
            TransformConfig::Remap { program, .. } => {
                program.as_ref().is_some_and(|p| p.reads_metadata())
            }
            TransformConfig::Key { field } => field.starts_with('%'),
            _ => false,
        }
    }
}

/// Comparisons of a filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
pub(crate) enum CompareOp {
    #[serde(rename = "==")]
    Eq,
    #[serde(rename = "!=")]
    Ne,
    #[serde(rename = ">")]
    Gt,
    #[serde(rename = ">=")]
    Ge,
    #[serde(rename = "<")]
    Lt,
    #[serde(rename = "<=")]
    Le,
    #[serde(rename = "contains")]
    Contains,
    #[serde(rename = "exists")]
    Exists,
    #[serde(rename = "missing")]
    Missing,
}

fn yes() -> bool {
    true
}

/// Compiles what a transform at `path` says in VRL or as a comparison, refusing a filter that
/// says both or neither and a remap without a program.
pub(super) fn compile(t: &mut TransformConfig, path: &str) -> Result<(), String> {
    match t {
        TransformConfig::Filter {
            field,
            op,
            value,
            condition,
            test,
        } => {
            *test = Some(match (condition.as_deref(), field.as_deref(), op) {
                (Some(c), None, None) if value.is_none() => {
                    condition::Test::vrl(c, &format!("{path}.condition"))?
                }
                (None, Some(f), Some(op)) => condition::Test::compare(f, *op, value.as_ref(), path)?,
                (Some(_), _, _) => {
                    return Err(format!(
                        "{path}.condition: give either `condition` (VRL) or `field`, `op` and                          `value`, not both"
                    ))
                }
                (None, None, _) => {
                    return Err(format!(
                        "{path}: give `condition` (a VRL boolean expression) or `field`, `op`                          and `value`"
                    ))
                }
                (None, Some(_), None) => return Err(format!("{path}.op: missing")),
            });
        }
        TransformConfig::Remap {
            source,
            file,
            allow_env,
            program,
            ..
        } => {
            let (text, at) = match (source.as_deref(), file.as_deref()) {
                (Some(s), None) => (s.to_owned(), format!("{path}.source")),
                (None, Some(f)) => (
                    std::fs::read_to_string(f)
                        .map_err(|e| format!("{path}.file: cannot read `{f}`: {e}"))?,
                    f.to_owned(),
                ),
                (Some(_), Some(_)) => {
                    return Err(format!("{path}.file: give either `source` or `file`, not both"))
                }
                (None, None) => {
                    return Err(format!(
                        "{path}.source: missing: give the program (`source`) or a file holding                          it (`file`)"
                    ))
                }
            };
            let compiled = crate::remap::Program::compile(&text, &at, *allow_env)
                .map_err(|e| format!("{path}: {e}"))?;
            *program = Some(std::sync::Arc::new(compiled));
        }
        _ => {}
    }
    Ok(())
}
