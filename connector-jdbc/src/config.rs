//! Where the database is and how to reach it: [`JdbcConfig`] — the URL, the TLS files and the
//! connect timeout — and how the TLS files become the driver's own URL parameters
//! ([`url_with_tls`]), so every connection (sink, source, admin statements) carries them.
//!
//! | database | CA | client certificate and key | mode when a file is set and the URL names none |
//! |---|---|---|---|
//! | PostgreSQL | `sslrootcert` | `sslcert`, `sslkey` | `sslmode=verify-full` |
//! | MySQL, MariaDB | `ssl-ca` | `ssl-cert`, `ssl-key` | `ssl-mode=VERIFY_IDENTITY` |
//!
//! A URL may carry these parameters itself; the `tls` option then adds nothing it already has.

use std::time::Duration;

use rivus_sdk::tls::TlsFiles;
use rivus_sdk::{Error, Result};

use crate::dialect::Dialect;

/// How to reach one database: its URL (`postgres://`, `mysql://`, `mariadb://`,
/// `sqlite:path`), TLS files (the CA to trust and a client certificate; the URL's own
/// `sslmode` / `ssl-mode` parameters also work) and the connect and acquire timeout. A `&str`
/// or `String` converts into one with the URL alone. `Debug` hides the URL's password.
#[derive(Clone)]
pub struct JdbcConfig {
    /// The database URL.
    pub url: String,
    /// TLS files, written into the URL as the driver's parameters (see the table above).
    pub tls: TlsFiles,
    /// Connect and acquire timeout (default 10 s).
    pub timeout: Duration,
    /// Longest wait for the database to answer one write, prepare or commit (default 60 s);
    /// past it the connection is dropped and the write retried (a frozen server, a lost
    /// network path: no TCP error ever comes).
    pub statement_timeout: Duration,
}

impl JdbcConfig {
    /// The settings of `url`: no TLS files, a 10 s timeout.
    pub fn new(url: impl Into<String>) -> Self {
        JdbcConfig {
            url: url.into(),
            tls: TlsFiles::default(),
            timeout: Duration::from_secs(10),
            statement_timeout: Duration::from_secs(60),
        }
    }

    rivus_sdk::setters! {
        /// With these TLS files.
        tls(tls: TlsFiles) => tls;

        /// With this connect and acquire timeout.
        timeout(timeout: Duration) => timeout;

        /// With this longest wait for one write, prepare or commit.
        statement_timeout(timeout: Duration) => statement_timeout;
    }
}

impl std::fmt::Debug for JdbcConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JdbcConfig")
            .field("url", &crate::redact(&self.url))
            .field("tls", &self.tls)
            .field("timeout", &self.timeout)
            .field("statement_timeout", &self.statement_timeout)
            .finish()
    }
}

impl From<&str> for JdbcConfig {
    fn from(url: &str) -> Self {
        JdbcConfig::new(url)
    }
}

impl From<&String> for JdbcConfig {
    fn from(url: &String) -> Self {
        JdbcConfig::new(url.as_str())
    }
}

impl From<String> for JdbcConfig {
    fn from(url: String) -> Self {
        JdbcConfig::new(url)
    }
}

/// `url` with the files of `tls` as query parameters (errors name `url` and `tls.…`, relative
/// to the section). An empty `tls` returns `url` unchanged. A secret parameter the
/// driver does not read (`sslpassword`: encrypted client keys) is refused: the driver would
/// log it, value and all, as unrecognised.
pub fn url_with_tls(url: &str, tls: &TlsFiles) -> Result<String> {
    refuse_unread_secrets(url)?;
    if tls.is_empty() {
        return Ok(url.to_owned());
    }
    tls.validate_files()?;
    let (mode, ca, cert, key) = match Dialect::of_url(url)? {
        Dialect::Postgres => (
            ("sslmode", "verify-full"),
            "sslrootcert",
            "sslcert",
            "sslkey",
        ),
        Dialect::MySql => (
            ("ssl-mode", "VERIFY_IDENTITY"),
            "ssl-ca",
            "ssl-cert",
            "ssl-key",
        ),
        Dialect::Sqlite => {
            return Err(Error::config(
                "tls",
                "SQLite is a local file: it has no TLS",
            ))
        }
    };
    let mut out = url.to_owned();
    let mut add = |name: &str, value: &str| {
        if has_param(&out, name) {
            return;
        }
        out.push(if out.contains('?') { '&' } else { '?' });
        out.push_str(name);
        out.push('=');
        out.push_str(&encode(value));
    };
    add(mode.0, mode.1);
    let files = [
        (ca, &tls.ca_file),
        (cert, &tls.client_cert),
        (key, &tls.client_key),
    ];
    for (name, file) in files {
        if let Some(f) = file {
            add(name, &f.display().to_string());
        }
    }
    Ok(out)
}

/// Secret query parameters other than the password, which only PostgreSQL's driver reads.
fn refuse_unread_secrets(url: &str) -> Result<()> {
    let Some((_, query)) = url.split_once('?') else {
        return Ok(());
    };
    let postgres = matches!(Dialect::of_url(url), Ok(Dialect::Postgres));
    for name in query.split('&').filter_map(|kv| kv.split('=').next()) {
        if rivus_sdk::secrets::is_secret_name(name) && !(postgres && name == "password") {
            return Err(Error::config(
                "url",
                format!(
                    "the parameter `{name}` is not supported here (client keys must be \
                     unencrypted PKCS#8; a password goes in the URL's user part)"
                ),
            ));
        }
    }
    Ok(())
}

fn has_param(url: &str, name: &str) -> bool {
    url.split_once('?')
        .is_some_and(|(_, q)| q.split('&').any(|kv| kv.split('=').next() == Some(name)))
}

/// Percent-encodes what a query value cannot hold as is (paths keep their slashes).
fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> TlsFiles {
        TlsFiles {
            ca_file: Some("/etc/hostname".into()),
            client_cert: Some("/etc/hostname".into()),
            client_key: Some("/etc/hostname".into()),
        }
    }

    #[test]
    fn files_become_the_drivers_parameters() {
        let pg = url_with_tls("postgres://u@h/db", &files()).unwrap();
        assert_eq!(
            pg,
            "postgres://u@h/db?sslmode=verify-full&sslrootcert=/etc/hostname\
             &sslcert=/etc/hostname&sslkey=/etc/hostname"
        );
        let my = url_with_tls("mysql://u@h/db?ssl-mode=REQUIRED", &files()).unwrap();
        assert!(
            my.starts_with("mysql://u@h/db?ssl-mode=REQUIRED&ssl-ca=/etc/hostname"),
            "{my}"
        );
        assert!(!my.contains("VERIFY_IDENTITY"), "{my}");
        assert_eq!(
            url_with_tls("postgres://h/db", &TlsFiles::default()).unwrap(),
            "postgres://h/db"
        );
        let e = url_with_tls("sqlite:x.db", &files()).unwrap_err();
        assert!(e.to_string().contains("`tls`"), "{e}");
        let missing = TlsFiles {
            ca_file: Some("/no/such/ca.pem".into()),
            ..TlsFiles::default()
        };
        let e = url_with_tls("postgres://h/db", &missing).unwrap_err();
        assert!(e.to_string().contains("`tls.ca_file`"), "{e}");
        assert_eq!(encode("/a b/c&d"), "/a%20b/c%26d");
        let e = url_with_tls("postgres://h/db?sslpassword=pw9", &TlsFiles::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`url`") && e.contains("sslpassword") && !e.contains("pw9"),
            "{e}"
        );
        assert!(url_with_tls("postgres://h/db?password=x", &TlsFiles::default()).is_ok());
    }
}
