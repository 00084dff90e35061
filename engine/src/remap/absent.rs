//! A `rivus` built without the `vrl` feature: no program compiles.

use serde_json::Value;

use super::{Link, Ran};

const ABSENT: &str =
    "VRL needs a rivus built with the `vrl` feature (on by default: `cargo build -p rivus-cli`)";

/// A program, which cannot exist in this build.
#[derive(Debug)]
pub(crate) enum Program {}

impl Program {
    pub(crate) fn compile(_source: &str, _at: &str, _allow_env: bool) -> Result<Program, String> {
        Err(ABSENT.into())
    }

    pub(crate) fn reads_metadata(&self) -> bool {
        match *self {}
    }

    pub(crate) fn test(&self, _record: &Value) -> Result<bool, String> {
        match *self {}
    }
}

/// No chain has a program in this build: the record passes on.
pub(crate) fn run_chain(links: &[Link], record: Value, out: &mut Vec<Ran>) {
    if let Some(link) = links.first() {
        match *link.program {}
    }
    out.push(Ran::Record(record));
}

pub(crate) fn condition(_source: &str, _at: &str) -> Result<Program, String> {
    Err(ABSENT.into())
}
