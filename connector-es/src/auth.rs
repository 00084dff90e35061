//! How requests prove who sends them: HTTP basic, an Elasticsearch API key, a bearer token, or
//! AWS Signature Version 4 (Amazon OpenSearch Service and OpenSearch Serverless). Secrets never
//! appear in `Debug` output or errors.

use std::fmt;

use rivus_aws::sigv4;

/// How to authenticate.
#[derive(Clone, PartialEq, Eq, Default)]
pub enum EsAuth {
    /// No authentication.
    #[default]
    None,
    /// HTTP basic authentication.
    Basic {
        /// User name.
        user: String,
        /// Password (redacted in `Debug`).
        password: String,
    },
    /// An Elasticsearch API key (id and secret).
    ApiKey {
        /// Key id.
        id: String,
        /// Key secret (redacted in `Debug`).
        key: String,
    },
    /// A bearer token (redacted in `Debug`).
    Bearer(String),
    /// AWS Signature Version 4: every request signed for `region` and `service` (`es` for
    /// Amazon OpenSearch Service domains, `aoss` for OpenSearch Serverless collections).
    AwsSigV4 {
        /// The AWS region, e.g. `eu-west-1`.
        region: String,
        /// `es` or `aoss`.
        service: String,
        /// Access key, secret key and the session token of temporary credentials.
        credentials: AwsCredentials,
    },
}

/// AWS keys (the secret and the token redacted in `Debug`): rivus-aws's SigV4 credentials.
pub use rivus_aws::sigv4::Credentials as AwsCredentials;

impl fmt::Debug for EsAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EsAuth::None => f.write_str("None"),
            EsAuth::Basic { user, .. } => {
                write!(f, "Basic {{ user: {user:?}, password: <redacted> }}")
            }
            EsAuth::ApiKey { id, .. } => write!(f, "ApiKey {{ id: {id:?}, key: <redacted> }}"),
            EsAuth::Bearer(_) => f.write_str("Bearer(<redacted>)"),
            EsAuth::AwsSigV4 {
                region,
                service,
                credentials,
            } => f
                .debug_struct("AwsSigV4")
                .field("region", region)
                .field("service", service)
                .field("credentials", credentials)
                .finish(),
        }
    }
}

/// What an outgoing request looks like to the signer.
pub(crate) struct Outgoing<'a> {
    pub method: &'a str,
    /// `host[:port]` as the `Host` header carries it.
    pub host: &'a str,
    /// The URL's path, already percent-encoded.
    pub path: &'a str,
    /// Query parameters, not encoded.
    pub query: &'a [(&'a str, &'a str)],
    pub body: &'a [u8],
}

impl EsAuth {
    /// The headers that authenticate `req` (none for [`EsAuth::None`]).
    pub(crate) fn headers(&self, req: &Outgoing<'_>) -> Vec<(String, String)> {
        use base64::Engine as _;
        let b64 = |s: String| base64::engine::general_purpose::STANDARD.encode(s);
        match self {
            EsAuth::None => Vec::new(),
            EsAuth::Basic { user, password } => vec![(
                "authorization".into(),
                format!("Basic {}", b64(format!("{user}:{password}"))),
            )],
            EsAuth::ApiKey { id, key } => vec![(
                "authorization".into(),
                format!("ApiKey {}", b64(format!("{id}:{key}"))),
            )],
            EsAuth::Bearer(t) => vec![("authorization".into(), format!("Bearer {t}"))],
            EsAuth::AwsSigV4 {
                region,
                service,
                credentials,
            } => {
                let payload = sigv4::sha256_hex(req.body);
                // Services other than S3 sign each path segment encoded once more than sent.
                let canonical: Vec<String> = req.path.split('/').map(sigv4::uri_encode).collect();
                let canonical = canonical.join("/");
                let signed = sigv4::Request {
                    method: req.method,
                    host: req.host,
                    path: &canonical,
                    query: req.query,
                    headers: &[],
                    payload_sha256: &payload,
                };
                sigv4::sign(
                    credentials,
                    region,
                    service,
                    &signed,
                    &sigv4::amz_date_now(),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_and_hidden_secrets() {
        let req = Outgoing {
            method: "GET",
            host: "h:9200",
            path: "/",
            query: &[],
            body: b"",
        };
        let basic = EsAuth::Basic {
            user: "elastic".into(),
            password: "hunter2".into(),
        };
        // RFC 7617's example encodes `Aladdin:open sesame` like this.
        let aladdin = EsAuth::Basic {
            user: "Aladdin".into(),
            password: "open sesame".into(),
        };
        assert_eq!(
            aladdin.headers(&req),
            vec![(
                "authorization".to_owned(),
                "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==".to_owned()
            )]
        );
        let key = EsAuth::ApiKey {
            id: "VuaCfGcBCdbkQm-e5aOx".into(),
            key: "ui2lp2axTNmsyakw9tvNnw".into(),
        };
        // Elasticsearch's documentation shows this id:key pair and its encoding.
        assert_eq!(
            key.headers(&req)[0].1,
            "ApiKey VnVhQ2ZHY0JDZGJrUW0tZTVhT3g6dWkybHAyYXhUTm1zeWFrdzl0dk5udw=="
        );
        let aws = EsAuth::AwsSigV4 {
            region: "eu-west-1".into(),
            service: "es".into(),
            credentials: AwsCredentials {
                access_key: "AKID".into(),
                secret_key: "s3cr3t-key".into(),
                session_token: Some("t0ken".into()),
            },
        };
        for a in [&basic, &key, &aws, &EsAuth::Bearer("tok3n".into())] {
            let shown = format!("{a:?}");
            for secret in ["hunter2", "ui2lp2ax", "s3cr3t-key", "t0ken", "tok3n"] {
                assert!(!shown.contains(secret), "{shown}");
            }
        }
        let names: Vec<String> = aws.headers(&req).into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            names,
            [
                "x-amz-date",
                "x-amz-content-sha256",
                "x-amz-security-token",
                "authorization"
            ]
        );
    }
}
