//! SQL text that differs between PostgreSQL, MySQL/MariaDB and SQLite: identifier quoting,
//! placeholders, upsert clauses, bind-parameter limits.

use rivus_sdk::{Error, Result};

/// The database family behind a URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Dialect {
    /// PostgreSQL (`postgres://`, `postgresql://`).
    Postgres,
    /// MySQL or MariaDB (`mysql://`, `mariadb://`).
    MySql,
    /// SQLite (`sqlite:` file or `sqlite::memory:`).
    Sqlite,
}

impl Dialect {
    /// The dialect of `url`; the error names the `url` setting.
    pub fn of_url(url: &str) -> Result<Self> {
        let scheme = url.split(':').next().unwrap_or_default();
        match scheme {
            "postgres" | "postgresql" => Ok(Dialect::Postgres),
            "mysql" | "mariadb" => Ok(Dialect::MySql),
            "sqlite" => Ok(Dialect::Sqlite),
            _ => Err(Error::config(
                "url",
                format!(
                    "`{}` must start with postgres://, mysql://, mariadb:// or sqlite:",
                    crate::redact(url)
                ),
            )),
        }
    }

    /// Bind parameters one statement may carry.
    pub fn max_params(self) -> usize {
        match self {
            Dialect::Postgres | Dialect::MySql => 65_535,
            Dialect::Sqlite => 32_766,
        }
    }

    /// `name` quoted as an identifier; a dotted name (`schema.table`) is quoted part by part.
    pub fn quote(self, name: &str) -> String {
        name.split('.')
            .map(|part| self.quote_one(part))
            .collect::<Vec<_>>()
            .join(".")
    }

    /// `name` quoted as one identifier, dots and all (a column).
    pub fn quote_one(self, name: &str) -> String {
        match self {
            Dialect::MySql => format!("`{}`", name.replace('`', "``")),
            _ => format!("\"{}\"", name.replace('"', "\"\"")),
        }
    }

    /// The placeholder for parameter `n` (1-based), cast to `cast` on PostgreSQL.
    pub fn placeholder(self, n: usize, cast: Option<&str>) -> String {
        match (self, cast) {
            (Dialect::Postgres, Some(t)) => format!("${n}::{t}"),
            (Dialect::Postgres, None) => format!("${n}"),
            _ => "?".to_owned(),
        }
    }

    /// The clause turning an INSERT into an upsert on `keys`, updating `updates`.
    pub fn upsert_clause(self, keys: &[String], updates: &[String]) -> String {
        let q = |c: &String| self.quote(c);
        match self {
            Dialect::MySql => {
                // With nothing to update, assigning a key to itself keeps the row as it is.
                let cols = if updates.is_empty() { keys } else { updates };
                let set: Vec<String> = cols
                    .iter()
                    .map(|c| format!("{0} = VALUES({0})", q(c)))
                    .collect();
                format!(" ON DUPLICATE KEY UPDATE {}", set.join(", "))
            }
            _ => {
                let target: Vec<String> = keys.iter().map(q).collect();
                if updates.is_empty() {
                    format!(" ON CONFLICT ({}) DO NOTHING", target.join(", "))
                } else {
                    let set: Vec<String> = updates
                        .iter()
                        .map(|c| format!("{0} = excluded.{0}", q(c)))
                        .collect();
                    format!(
                        " ON CONFLICT ({}) DO UPDATE SET {}",
                        target.join(", "),
                        set.join(", ")
                    )
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Dialect;

    #[test]
    fn urls_pick_the_dialect() {
        assert_eq!(
            Dialect::of_url("postgres://u:p@h/db").unwrap(),
            Dialect::Postgres
        );
        assert_eq!(Dialect::of_url("mariadb://h/db").unwrap(), Dialect::MySql);
        assert_eq!(Dialect::of_url("sqlite:data.db").unwrap(), Dialect::Sqlite);
        let e = Dialect::of_url("oracle://u:secret@h").unwrap_err();
        let text = e.to_string();
        assert!(text.contains("`url`"), "{text}");
        assert!(!text.contains("secret"), "{text}");
    }

    #[test]
    fn identifiers_are_quoted_per_dialect() {
        assert_eq!(Dialect::Postgres.quote("a\"b"), "\"a\"\"b\"");
        assert_eq!(Dialect::Postgres.quote("s.t"), "\"s\".\"t\"");
        assert_eq!(Dialect::MySql.quote("a`b"), "`a``b`");
    }

    #[test]
    fn upserts_per_dialect() {
        let k = vec!["id".to_owned()];
        let u = vec!["v".to_owned()];
        assert_eq!(
            Dialect::Postgres.upsert_clause(&k, &u),
            " ON CONFLICT (\"id\") DO UPDATE SET \"v\" = excluded.\"v\""
        );
        assert_eq!(
            Dialect::MySql.upsert_clause(&k, &u),
            " ON DUPLICATE KEY UPDATE `v` = VALUES(`v`)"
        );
        assert_eq!(
            Dialect::Sqlite.upsert_clause(&k, &[]),
            " ON CONFLICT (\"id\") DO NOTHING"
        );
    }
}
