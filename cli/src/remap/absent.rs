//! A `rivus` built without the `vrl` feature: no program compiles.

use serde_json::Value;

use super::Outcome;

const ABSENT: &str =
    "VRL needs a rivus built with the `vrl` feature (on by default: `cargo build -p rivus-cli`)";

/// A program, which cannot exist in this build.
#[derive(Debug)]
pub(crate) enum Program {}

impl Program {
    pub(crate) fn compile(_source: &str, _at: &str, _allow_env: bool) -> Result<Program, String> {
        Err(ABSENT.into())
    }

    pub(crate) fn fallible(&self) -> bool {
        match *self {}
    }

    pub(crate) fn abortable(&self) -> bool {
        match *self {}
    }

    pub(crate) fn remap(&self, _record: Value) -> Outcome {
        match *self {}
    }

    pub(crate) fn remap_copy(&self, _record: &Value) -> Outcome {
        match *self {}
    }

    pub(crate) fn test(&self, _record: &Value) -> Result<bool, String> {
        match *self {}
    }
}

pub(crate) fn condition(_source: &str, _at: &str) -> Result<Program, String> {
    Err(ABSENT.into())
}
