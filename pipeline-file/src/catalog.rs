//! What `rivus connectors` lists for a section, and what `rivus check` reports for it.

/// One option of a section, as `rivus connectors` lists it — read from the section type's
/// JSON Schema ([`options`](super::options)), never written by hand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionDoc {
    /// The key in the file.
    pub name: String,
    /// Its type as the file writes it (`string`, `[string]`, `duration`, `"json" | "text"`).
    pub ty: String,
    /// Whether the file must give it.
    pub required: bool,
    /// Its default value as the file would write it, when the schema states one (otherwise
    /// the description says what its absence means).
    pub default: Option<String>,
    /// Its description (the field's doc comment).
    pub doc: String,
    /// An old name kept for one release ([`renamed`](super::renamed)): the description names
    /// the new one.
    pub deprecated: bool,
}

impl OptionDoc {
    /// `name: type (required)`, `name: type = default`, or `name: type (optional)`.
    pub fn render(&self) -> String {
        if self.deprecated {
            return format!("{}: {} (deprecated)", self.name, self.ty);
        }
        match (&self.default, self.required) {
            (_, true) => format!("{}: {} (required)", self.name, self.ty),
            (Some(d), false) => format!("{}: {} = {d}", self.name, self.ty),
            (None, false) => format!("{}: {} (optional)", self.name, self.ty),
        }
    }
}

/// A section's entry in `rivus connectors` (its options come from its type's schema).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatalogEntry {
    /// One line: what it reads or writes.
    pub summary: &'static str,
    /// The delivery guarantee, and what changes it.
    pub guarantee: &'static str,
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
