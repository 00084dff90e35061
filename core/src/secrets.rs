//! Keeping secrets out of logs, errors and `Debug` output.

/// `scheme://user:<redacted>@host...`: a URL with the password of its userinfo hidden (and a
/// password-only userinfo, `scheme://:pw@host`, likewise). URLs without credentials are
/// returned unchanged.
pub fn redact_url(url: &str) -> String {
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
    }
}
