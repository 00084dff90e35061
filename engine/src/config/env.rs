//! `${NAME}` references in a pipeline file, replaced by environment variables before the TOML
//! is parsed.
//!
//! References are expanded in values only: a `#` comment is copied as it stands, so a comment
//! that mentions `${VAR}` needs no variable. Inside a quoted string the value is escaped for
//! that string (a password with `"` or `\` stays one string); a literal `'…'` string cannot hold
//! a `'` or a line break, so such a value is refused with the variable's name.

/// Where the scanner stands in the TOML text.
#[derive(Clone, Copy, PartialEq)]
enum At {
    Bare,
    Comment,
    Basic,
    MultiBasic,
    Literal,
    MultiLiteral,
}

/// Replaces `${NAME}` with the environment variable `NAME` outside comments; a missing one is
/// an error naming it and the line.
pub(crate) fn expand_env(text: &str) -> Result<String, String> {
    expand_with(text, |name| std::env::var(name).ok())
}

/// [`expand_env`] with the variables looked up by `lookup`.
pub(super) fn expand_with(
    text: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut at = At::Bare;
    let mut line = 1;
    let mut i = 0;
    let bytes = text.as_bytes();
    while i < bytes.len() {
        let rest = &text[i..];
        if rest.starts_with("${") && at != At::Comment {
            let end = rest[2..]
                .find('}')
                .ok_or_else(|| format!("line {line}: `${{` without `}}`"))?;
            let name = &rest[2..2 + end];
            let value = lookup(name)
                .ok_or_else(|| format!("line {line}: environment variable {name} is not set"))?;
            push_value(&mut out, at, name, &value, line)?;
            i += end + 3;
            continue;
        }
        let (next, step) = transition(at, rest);
        at = next;
        if rest.starts_with('\n') {
            line += 1;
            if at == At::Comment {
                at = At::Bare;
            }
        }
        out.push_str(&rest[..step]);
        i += step;
    }
    Ok(out)
}

/// The state after the token at the start of `rest`, and the token's length in bytes.
fn transition(at: At, rest: &str) -> (At, usize) {
    let one = rest.chars().next().map_or(1, char::len_utf8);
    match at {
        At::Bare if rest.starts_with('#') => (At::Comment, 1),
        At::Bare if rest.starts_with("\"\"\"") => (At::MultiBasic, 3),
        At::Bare if rest.starts_with("'''") => (At::MultiLiteral, 3),
        At::Bare if rest.starts_with('"') => (At::Basic, 1),
        At::Bare if rest.starts_with('\'') => (At::Literal, 1),
        At::Basic | At::MultiBasic if rest.starts_with('\\') => {
            (at, 1 + rest[1..].chars().next().map_or(0, char::len_utf8))
        }
        At::Basic if rest.starts_with('"') => (At::Bare, 1),
        At::MultiBasic if rest.starts_with("\"\"\"") => (At::Bare, 3),
        At::Literal if rest.starts_with('\'') => (At::Bare, 1),
        At::MultiLiteral if rest.starts_with("'''") => (At::Bare, 3),
        // An unclosed single-line string ends at the line's end; TOML reports it.
        At::Basic | At::Literal if rest.starts_with('\n') => (At::Bare, 1),
        _ => (at, one),
    }
}

/// Writes `value` where the reference stood, escaped for the string it stands in.
fn push_value(
    out: &mut String,
    at: At,
    name: &str,
    value: &str,
    line: usize,
) -> Result<(), String> {
    match at {
        At::Basic | At::MultiBasic => {
            for c in value.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
                    c => out.push(c),
                }
            }
        }
        At::Literal | At::MultiLiteral => {
            if value.contains('\'') || (at == At::Literal && value.contains('\n')) {
                return Err(format!(
                    "line {line}: environment variable {name} holds a `'` or a line break, which \
                     a '…' string cannot hold: quote the reference with \"…\" instead"
                ));
            }
            out.push_str(value);
        }
        At::Bare | At::Comment => out.push_str(value),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(name: &str) -> Option<String> {
        match name {
            "X" => Some("v".into()),
            "PASS" => Some(r#"a"b\c"#.into()),
            "QUOTE" => Some("it's".into()),
            "PORT" => Some("9092".into()),
            _ => None,
        }
    }

    #[test]
    fn values_expand() {
        assert_eq!(expand_with("a = \"${X}\"", vars).unwrap(), "a = \"v\"");
        assert_eq!(expand_with("p = ${PORT}", vars).unwrap(), "p = 9092");
        assert_eq!(expand_with("a = '${X}'", vars).unwrap(), "a = 'v'");
    }

    #[test]
    fn comments_are_left_alone() {
        let text = "# use ${NOT_SET} here\na = \"${X}\" # or ${NOT_SET}\nb = 1\n";
        assert_eq!(
            expand_with(text, vars).unwrap(),
            "# use ${NOT_SET} here\na = \"v\" # or ${NOT_SET}\nb = 1\n"
        );
        // A `#` inside a string starts no comment.
        assert_eq!(expand_with("a = \"#${X}\"", vars).unwrap(), "a = \"#v\"");
        assert_eq!(
            expand_with("a = '#' # ${NOT_SET}", vars).unwrap(),
            "a = '#' # ${NOT_SET}"
        );
    }

    #[test]
    fn values_are_escaped_for_their_string() {
        let text = expand_with("password = \"${PASS}\"", vars).unwrap();
        let parsed: toml::Table = text.parse().unwrap();
        assert_eq!(parsed["password"].as_str(), Some(r#"a"b\c"#));
        let e = expand_with("password = '${QUOTE}'", vars).unwrap_err();
        assert!(e.contains("line 1") && e.contains("QUOTE"), "{e}");
        // An escaped quote does not end the string.
        let text = expand_with(r#"a = "x\"${X}" # ${NOT_SET}"#, vars).unwrap();
        assert_eq!(text, r#"a = "x\"v" # ${NOT_SET}"#);
    }

    #[test]
    fn errors_name_the_variable_and_line() {
        let e = expand_with("a = 1\nb = \"${NOT_SET}\"", vars).unwrap_err();
        assert_eq!(e, "line 2: environment variable NOT_SET is not set");
        let e = expand_with("a = \"${X\"", vars).unwrap_err();
        assert!(e.contains("without"), "{e}");
        let e = expand_with("a = '''\n\n${NOT_SET}'''", vars).unwrap_err();
        assert!(e.starts_with("line 3:"), "{e}");
    }
}
