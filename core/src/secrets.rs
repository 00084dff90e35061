//! Keeping secrets out of logs, errors and `Debug` output.

/// `scheme://user:<redacted>@host...?password=<redacted>`: a URL with the password of its
/// userinfo hidden (a password-only userinfo, `scheme://:pw@host`, likewise) and the values of
/// query parameters that hold secrets (`password`, `sslpassword`, `token`, `secret`, ...).
/// URLs without credentials are returned unchanged.
pub fn redact_url(url: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let mut out = redact_userinfo(base);
    if let Some(q) = query {
        out.push('?');
        let params: Vec<String> = q
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) if is_secret_name(k) => format!("{k}=<redacted>"),
                _ => kv.to_owned(),
            })
            .collect();
        out.push_str(&params.join("&"));
    }
    out
}

/// True when a setting or parameter called `name` holds a secret.
pub fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["password", "passwd", "secret", "token", "credential"]
        .iter()
        .any(|s| n.contains(s))
}

fn redact_userinfo(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.split_once(':') {
                Some((user, _)) => format!("{}{user}:<redacted>{}", &url[..s + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn hides_passwords_only() {
        assert_eq!(
            redact_url("amqp://guest:s3cret@h:5672/%2f"),
            "amqp://guest:<redacted>@h:5672/%2f"
        );
        assert_eq!(
            redact_url("redis://:pw@h:6379/0"),
            "redis://:<redacted>@h:6379/0"
        );
        assert_eq!(redact_url("redis://h:6379/0"), "redis://h:6379/0");
        assert_eq!(redact_url("postgres://rivus@h/db"), "postgres://rivus@h/db");
        assert_eq!(
            redact_url("postgres://u@h/db?sslmode=verify-full&password=pw1&sslpassword=pw2"),
            "postgres://u@h/db?sslmode=verify-full&password=<redacted>&sslpassword=<redacted>"
        );
        assert_eq!(
            redact_url("mysql://u:pw@h/db?ssl-ca=/ca.pem"),
            "mysql://u:<redacted>@h/db?ssl-ca=/ca.pem"
        );
    }
}
