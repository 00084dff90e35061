//! Where and how to connect, read from a `postgres://` URL: host, port, user, password,
//! database and the TLS parameters libpq users know (`sslmode`, `sslrootcert`, `sslcert`,
//! `sslkey`). `Debug` hides the password.

use rivus_sdk::{Error, Result};

/// TLS to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Plain TCP (`disable`, `allow`, `prefer` without a CA file, or no `sslmode`).
    Disable,
    /// TLS, the certificate checked against `sslrootcert` and the host name checked too
    /// (`require`, `verify-ca` and `verify-full` all verify here: a CDC stream carries
    /// every row of the database).
    Verify,
}

/// A parsed connection URL.
#[derive(Clone)]
pub struct ConnParams {
    /// Host name or address.
    pub host: String,
    /// Port (5432).
    pub port: u16,
    /// User name.
    pub user: String,
    /// Password, if any.
    pub password: Option<String>,
    /// Database name (the user's name when absent).
    pub dbname: String,
    /// TLS mode.
    pub ssl: SslMode,
    /// CA file (PEM).
    pub ca_file: Option<String>,
    /// Client certificate and key files (PEM).
    pub client_cert: Option<(String, String)>,
}

impl std::fmt::Debug for ConnParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnParams")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("dbname", &self.dbname)
            .field("ssl", &self.ssl)
            .finish_non_exhaustive()
    }
}

impl ConnParams {
    /// Parses `url`; `path` names the option in errors (which never show the password).
    pub fn parse(url: &str, path: &str) -> Result<Self> {
        let bad = |m: &str| {
            Error::config(
                path,
                format!("{m} (in {})", rivus_sdk::secrets::redact_url(url)),
            )
        };
        let rest = url
            .strip_prefix("postgres://")
            .or_else(|| url.strip_prefix("postgresql://"))
            .ok_or_else(|| bad("a postgres:// URL is expected"))?;
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, db) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let (user, password) = match userinfo {
            Some(u) => match u.split_once(':') {
                Some((u, p)) => (decode(u), Some(decode(p))),
                None => (decode(u), None),
            },
            None => (String::new(), None),
        };
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) => (
                h.to_owned(),
                p.parse().map_err(|_| bad("the port is not a number"))?,
            ),
            None => (hostport.to_owned(), 5432),
        };
        if host.is_empty() {
            return Err(bad("the URL names no host"));
        }
        if user.is_empty() {
            return Err(bad("the URL names no user"));
        }
        let mut p = ConnParams {
            host,
            port,
            dbname: if db.is_empty() {
                user.clone()
            } else {
                decode(db)
            },
            user,
            password,
            ssl: SslMode::Disable,
            ca_file: None,
            client_cert: None,
        };
        let (mut cert, mut key, mut mode) = (None, None, None);
        for pair in query.split('&').filter(|s| !s.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = decode(v);
            match k {
                "sslmode" => mode = Some(v),
                "sslrootcert" => p.ca_file = Some(v),
                "sslcert" => cert = Some(v),
                "sslkey" => key = Some(v),
                "application_name" | "connect_timeout" => {}
                other => return Err(bad(&format!("unknown URL parameter `{other}`"))),
            }
        }
        p.ssl = match mode.as_deref() {
            None if p.ca_file.is_some() => SslMode::Verify,
            None | Some("disable" | "allow" | "prefer") => SslMode::Disable,
            Some("require" | "verify-ca" | "verify-full") => SslMode::Verify,
            Some(other) => return Err(bad(&format!("unknown sslmode `{other}`"))),
        };
        if p.ssl == SslMode::Verify && p.ca_file.is_none() {
            return Err(bad("TLS needs the CA file to trust: add sslrootcert=PATH"));
        }
        p.client_cert = match (cert, key) {
            (Some(c), Some(k)) => Some((c, k)),
            (None, None) => None,
            _ => return Err(bad("sslcert and sslkey go together")),
        };
        Ok(p)
    }
}

/// Percent-decoding.
fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_read_and_passwords_stay_hidden() {
        let p =
            ConnParams::parse("postgres://rivus_cdc:p%40ss@127.0.0.1:5433/shop", "url").unwrap();
        assert_eq!(
            (p.host.as_str(), p.port, p.user.as_str()),
            ("127.0.0.1", 5433, "rivus_cdc")
        );
        assert_eq!(p.password.as_deref(), Some("p@ss"));
        assert_eq!(p.dbname, "shop");
        assert_eq!(p.ssl, SslMode::Disable);
        assert!(!format!("{p:?}").contains("p@ss"));

        let p = ConnParams::parse(
            "postgres://u@h/d?sslmode=verify-full&sslrootcert=/ca.crt",
            "x",
        )
        .unwrap();
        assert_eq!(
            (p.ssl, p.ca_file.as_deref()),
            (SslMode::Verify, Some("/ca.crt"))
        );

        let e = ConnParams::parse("postgres://u:secret@h/d?sslmode=require", "url")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`url`") && e.contains("sslrootcert"), "{e}");
        assert!(!e.contains("secret"), "{e}");
        let e = ConnParams::parse("mysql://u@h/d", "url")
            .unwrap_err()
            .to_string();
        assert!(e.contains("postgres://"), "{e}");
    }
}
