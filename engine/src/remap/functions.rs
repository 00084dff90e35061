//! The VRL functions a program may call: VRL's standard library (text, numbers, types,
//! timestamps, parsing, encoding, hashing and encryption, ...) built without its network
//! functions (none can reach a network from a transform) and without those that read files,
//! and without `get_env_var` unless the transform says `allow_env = true`: a program must not
//! read secrets it was not given. `docs/vrl.md` lists them; a test keeps that list true.

use vrl::compiler::Function;

/// The functions a program compiles against.
pub(crate) fn enabled(allow_env: bool) -> Vec<Box<dyn Function>> {
    vrl::stdlib::all()
        .into_iter()
        .filter(|f| allow_env || !ENV.contains(&f.identifier()))
        .collect()
}

/// The functions that read the process's environment.
const ENV: &[&str] = &["get_env_var"];

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/vrl.md` lists every enabled function, one per line between its markers.
    #[test]
    fn the_docs_list_exactly_the_enabled_functions() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/vrl.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let listed: Vec<&str> = doc
            .split("<!-- functions -->")
            .nth(1)
            .and_then(|rest| rest.split("<!-- /functions -->").next())
            .unwrap_or_default()
            .split('`')
            .skip(1)
            .step_by(2)
            .collect();
        let all = enabled(true);
        let mut names: Vec<&str> = all.iter().map(|f| f.identifier()).collect();
        names.sort_unstable();
        let block: String = names
            .chunks(6)
            .map(|c| {
                c.iter()
                    .map(|f| format!("`{f}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .collect::<Vec<_>>()
            .join(",\n");
        assert_eq!(
            listed, names,
            "docs/vrl.md lists other functions; between its markers it should read:\n{block}"
        );
        assert!(!enabled(false)
            .iter()
            .any(|f| f.identifier() == "get_env_var"));
    }
}
