//! What `rivus connectors` lists for a section, and what `rivus check` reports for it.

/// One option of a section, as `rivus connectors` lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionDoc {
    /// The key in the file.
    pub name: &'static str,
    /// Its type as the file writes it (`string`, `[string]`, `duration`, `json|text|bytes`).
    pub ty: &'static str,
    /// The default, or `None` when the option is required. Optional options without a
    /// default say what their absence means (`"none"`, `"the job's name"`).
    pub default: Option<&'static str>,
}

impl OptionDoc {
    /// A required option.
    pub const fn required(name: &'static str, ty: &'static str) -> Self {
        OptionDoc {
            name,
            ty,
            default: None,
        }
    }

    /// An optional one, with what applies when it is absent.
    pub const fn optional(name: &'static str, ty: &'static str, default: &'static str) -> Self {
        OptionDoc {
            name,
            ty,
            default: Some(default),
        }
    }

    /// `name: type` for a required option, `name: type = default` otherwise.
    pub fn render(&self) -> String {
        match self.default {
            None => format!("{}: {} (required)", self.name, self.ty),
            Some(d) => format!("{}: {} = {d}", self.name, self.ty),
        }
    }
}

/// A section's entry in `rivus connectors`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatalogEntry {
    /// One line: what it reads or writes.
    pub summary: &'static str,
    /// The delivery guarantee, and what changes it.
    pub guarantee: &'static str,
    /// Its options.
    pub options: &'static [OptionDoc],
}

/// What a connector's healthcheck found: what it reached and what the system said (or why it
/// could not be reached). Addresses never hold a password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// The connector's `type` in the file (`kafka`, `redis-streams`, ...).
    pub kind: &'static str,
    /// What was reached: a URL without its password, a broker list, a file.
    pub address: String,
    /// What it said (`3 broker(s), 12 topic(s)`), or what went wrong.
    pub outcome: Result<String, String>,
}

impl Health {
    /// A healthcheck of `kind` at `address` with `outcome`.
    pub fn new(
        kind: &'static str,
        address: impl Into<String>,
        outcome: Result<String, String>,
    ) -> Self {
        Health {
            kind,
            address: address.into(),
            outcome,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_render_with_their_type_and_default() {
        assert_eq!(
            OptionDoc::required("topic", "string").render(),
            "topic: string (required)"
        );
        assert_eq!(
            OptionDoc::optional("bounded", "bool", "false").render(),
            "bounded: bool = false"
        );
    }
}
