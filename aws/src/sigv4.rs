//! AWS Signature Version 4: the `Authorization` header of a request to an AWS service (S3,
//! OpenSearch Service) or a store that checks the same signatures. Connectors call an API their
//! client library does not cover (S3's list of multipart uploads) through it.

use ring::{digest, hmac};

/// The keys a request is signed with. The secret and the token never appear in `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// Access key id.
    pub access_key: String,
    /// Secret access key.
    pub secret_key: String,
    /// Session token of temporary credentials.
    pub session_token: Option<String>,
}

impl Credentials {
    /// The keys of the standard environment variables `AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN`; `None` when the first two are not set.
    pub fn from_env() -> Option<Credentials> {
        let var = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
        Some(Credentials {
            access_key: var("AWS_ACCESS_KEY_ID")?,
            secret_key: var("AWS_SECRET_ACCESS_KEY")?,
            session_token: var("AWS_SESSION_TOKEN"),
        })
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key", &self.access_key)
            .field("secret_key", &"<redacted>")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// The request to sign.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// `GET`, `PUT`, ...
    pub method: &'a str,
    /// The `Host` header (`bucket.s3.amazonaws.com`, `127.0.0.1:8333`).
    pub host: &'a str,
    /// The path, already URI-encoded (`/`, `/bucket/key`).
    pub path: &'a str,
    /// Query parameters, not encoded (`("uploads", "")`).
    pub query: &'a [(&'a str, &'a str)],
    /// Further headers to sign (names in any case).
    pub headers: &'a [(&'a str, &'a str)],
    /// SHA-256 of the body in lower-case hex, or `UNSIGNED-PAYLOAD`.
    pub payload_sha256: &'a str,
}

/// SHA-256 of `data`, lower-case hex.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(digest::digest(&digest::SHA256, data).as_ref())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn hmac(key: &[u8], data: &str) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data.as_bytes())
        .as_ref()
        .to_vec()
}

/// RFC 3986 encoding, as SigV4 wants it: unreserved characters as they are, the rest `%XX`.
pub fn uri_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The canonical query string of `query`: encoded, sorted by name then value.
pub fn canonical_query(query: &[(&str, &str)]) -> String {
    let mut pairs: Vec<(String, String)> = query
        .iter()
        .map(|(k, v)| (uri_encode(k), uri_encode(v)))
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// The headers to add to `req` (`x-amz-date`, `x-amz-content-sha256`, the session token, and
/// `authorization`), signed for `region` and `service` at `amz_date` (`20150830T123600Z`).
pub fn sign(
    creds: &Credentials,
    region: &str,
    service: &str,
    req: &Request<'_>,
    amz_date: &str,
) -> Vec<(String, String)> {
    sign_parts(creds, region, service, req, amz_date, true)
}

/// [`sign`], with the `x-amz-content-sha256` header added and signed or not (S3 and
/// OpenSearch Serverless require it; AWS's generic test suite signs without it).
fn sign_parts(
    creds: &Credentials,
    region: &str,
    service: &str,
    req: &Request<'_>,
    amz_date: &str,
    content_header: bool,
) -> Vec<(String, String)> {
    let mut added = vec![("x-amz-date".to_owned(), amz_date.to_owned())];
    if content_header {
        added.push((
            "x-amz-content-sha256".to_owned(),
            req.payload_sha256.to_owned(),
        ));
    }
    if let Some(t) = &creds.session_token {
        added.push(("x-amz-security-token".to_owned(), t.clone()));
    }
    let mut headers: Vec<(String, String)> = req
        .headers
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.trim().to_owned()))
        .chain(std::iter::once(("host".to_owned(), req.host.to_owned())))
        .chain(added.iter().cloned())
        .collect();
    headers.sort();
    let signed: Vec<&str> = headers.iter().map(|(k, _)| k.as_str()).collect();
    let signed = signed.join(";");
    let canonical_headers: String = headers.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
    let canonical = format!(
        "{}\n{}\n{}\n{canonical_headers}\n{signed}\n{}",
        req.method,
        req.path,
        canonical_query(req.query),
        req.payload_sha256
    );
    let day = &amz_date[..8];
    let scope = format!("{day}/{region}/{service}/aws4_request");
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
        sha256_hex(canonical.as_bytes())
    );
    let key = hmac(format!("AWS4{}", creds.secret_key).as_bytes(), day);
    let key = hmac(&key, region);
    let key = hmac(&key, service);
    let key = hmac(&key, "aws4_request");
    let signature = hex(&hmac(&key, &to_sign));
    added.push((
        "authorization".to_owned(),
        format!(
            "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed}, Signature={signature}",
            creds.access_key
        ),
    ));
    added
}

/// Now as SigV4 writes it: `YYYYMMDDTHHMMSSZ`.
pub fn amz_date_now() -> String {
    rivus_sdk::calendar::format(rivus_sdk::calendar::now_ms(), "%Y%m%dT%H%M%SZ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMPTY: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    fn authorization(added: &[(String, String)]) -> &str {
        &added.iter().find(|(k, _)| k == "authorization").unwrap().1
    }

    /// AWS's published S3 example ("GET Object", Amazon S3 API reference, Signature Version 4
    /// examples).
    #[test]
    fn the_s3_get_object_example_signs_as_published() {
        let creds = Credentials {
            access_key: "AKIAIOSFODNN7EXAMPLE".into(),
            secret_key: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
            session_token: None,
        };
        let req = Request {
            method: "GET",
            host: "examplebucket.s3.amazonaws.com",
            path: "/test.txt",
            query: &[],
            headers: &[("Range", "bytes=0-9")],
            payload_sha256: EMPTY,
        };
        let added = sign(&creds, "us-east-1", "s3", &req, "20130524T000000Z");
        assert_eq!(
            authorization(&added),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, \
             SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, \
             Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        );
    }

    /// AWS's Signature Version 4 test suite (`aws-sig-v4-test-suite`): `get-vanilla`,
    /// `post-vanilla` and `get-vanilla-query-order-key-case`, with its example credentials.
    #[test]
    fn the_generic_test_suite_signs_as_published() {
        let creds = Credentials {
            access_key: "AKIDEXAMPLE".into(),
            secret_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            session_token: None,
        };
        type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);
        let cases: [Case<'_>; 3] = [
            (
                "GET",
                &[],
                "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
            ),
            (
                "POST",
                &[],
                "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
            ),
            (
                "GET",
                &[("Param2", "value2"), ("Param1", "value1")],
                "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
            ),
        ];
        for (method, query, signature) in cases {
            let req = Request {
                method,
                host: "example.amazonaws.com",
                path: "/",
                query,
                headers: &[],
                payload_sha256: EMPTY,
            };
            let added = sign_parts(
                &creds,
                "us-east-1",
                "service",
                &req,
                "20150830T123600Z",
                false,
            );
            assert_eq!(
                authorization(&added),
                format!(
                    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, \
                     SignedHeaders=host;x-amz-date, Signature={signature}"
                ),
                "{method} {query:?}"
            );
        }
    }

    #[test]
    fn queries_are_encoded_and_sorted_and_secrets_stay_hidden() {
        assert_eq!(
            canonical_query(&[("uploads", ""), ("prefix", "a b/c"), ("max-keys", "2")]),
            "max-keys=2&prefix=a%20b%2Fc&uploads="
        );
        let creds = Credentials {
            access_key: "AK".into(),
            secret_key: "hunter2".into(),
            session_token: Some("tok".into()),
        };
        let shown = format!("{creds:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("tok\""),
            "{shown}"
        );
        assert_eq!(amz_date_now().len(), 16);
    }
}
