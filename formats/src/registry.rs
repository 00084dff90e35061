//! A client of a Confluent-compatible schema registry's REST API (Confluent Schema Registry,
//! Apicurio's `/apis/ccompat/v7`, Redpanda, Karapace): schemas by id — cached, so a running
//! job asks once per new id — registration under a subject, a subject's latest or numbered
//! version, and the schemas a schema references (another subject's version, by name).
//! Every request has a deadline; unreachable or failing servers are retried with core's
//! backoff, then reported as retryable errors (the job restarts from its checkpoint: nothing is
//! lost). Basic and bearer authentication, a CA file for TLS; secrets never printed.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rivus_sdk::backoff::{Attempts, BackoffPolicy};
use rivus_sdk::secrets::redact_url;
use rivus_sdk::{Error, Result};
use serde::Deserialize;

/// Schemas kept by id at most (a topic has a handful; a bound all the same).
const CACHE: usize = 1000;
const TIMEOUT: Duration = Duration::from_secs(10);
const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

/// `registry = { url, username, password, token, ca_file }` of a format.
#[derive(Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegistryConfig {
    /// The API's base URL (`http://host:8081`, `http://host:8080/apis/ccompat/v7`).
    pub url: String,
    /// Basic authentication's user.
    pub username: Option<String>,
    /// Basic authentication's password.
    pub password: Option<String>,
    /// A bearer token (instead of basic authentication).
    pub token: Option<String>,
    /// PEM file of the CA that signed the registry's certificate (an `https` URL).
    pub ca_file: Option<PathBuf>,
}

impl fmt::Debug for RegistryConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistryConfig")
            .field("url", &redact_url(&self.url))
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("ca_file", &self.ca_file)
            .finish()
    }
}

/// What kind of schema a registered schema is (`schemaType`; absent means Avro).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum SchemaType {
    /// Apache Avro.
    #[default]
    Avro,
    /// Protocol Buffers (a `.proto` file).
    Protobuf,
    /// JSON Schema.
    Json,
}

impl SchemaType {
    fn name(self) -> &'static str {
        match self {
            SchemaType::Avro => "AVRO",
            SchemaType::Protobuf => "PROTOBUF",
            SchemaType::Json => "JSON",
        }
    }
}

/// A schema as the registry gives it.
#[derive(Debug, Clone)]
pub struct Registered {
    /// The registry's id of the schema (what the wire format's header carries).
    pub id: u32,
    /// Avro, Protobuf or JSON Schema.
    pub schema_type: SchemaType,
    /// The schema's text as registered.
    pub text: String,
    /// Schemas this one uses, each by the name it uses them under (an imported `.proto` file,
    /// an Avro named type, a JSON Schema `$ref`).
    pub references: Vec<Reference>,
}

/// A schema another one uses: registered under `subject` as `version`, used as `name`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Reference {
    /// The name the referring schema uses it under.
    pub name: String,
    /// The subject it is registered under.
    pub subject: String,
    /// Its version under that subject.
    pub version: i64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ById {
    schema: String,
    #[serde(default)]
    schema_type: Option<SchemaType>,
    #[serde(default)]
    references: Vec<Reference>,
}

#[derive(Deserialize)]
struct Id {
    id: u32,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Version {
    id: u32,
    schema: String,
    #[serde(default)]
    schema_type: Option<SchemaType>,
    #[serde(default)]
    references: Vec<Reference>,
}

/// Why a request failed. Each variant carries the registry's `url`, `what` was asked (the
/// request, naming the subject or id) and the registry's or the client's `message`; answers
/// also their HTTP `status` and the registry's error `code`.
#[derive(Debug, thiserror::Error)]
#[allow(missing_docs)] // the fields are named in the enum's documentation
pub enum RegistryError {
    /// No answer, or a server error: worth retrying.
    #[error("schema registry {url}: {what}: {message}")]
    Unavailable {
        url: String,
        what: String,
        message: String,
    },
    /// The registry refused the credentials (401/403).
    #[error("schema registry {url}: {what}: refused ({status}): {message}")]
    Refused {
        url: String,
        what: String,
        status: u16,
        message: String,
    },
    /// The registry answered that what was asked does not exist or is not allowed (4xx):
    /// an unknown id or subject, an incompatible schema, an invalid one.
    #[error("schema registry {url}: {what}: {message} (HTTP {status}, error code {code})")]
    Answered {
        url: String,
        what: String,
        status: u16,
        code: i64,
        message: String,
    },
    /// The answers make no usable schema: references past the limit, or in a cycle.
    #[error("schema registry {url}: {what}")]
    Unusable { url: String, what: String },
}

impl RegistryError {
    /// Whether retrying may help.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, RegistryError::Unavailable { .. })
    }

    /// The same failure as a core error: retryable when the registry was unavailable.
    /// Unavailable: a retryable connector error; refused credentials or an answer such as
    /// "incompatible" or "not found": a refusal no restart can fix.
    pub fn into_error(self) -> Error {
        if self.is_unavailable() {
            Error::connector("schema registry", self.to_string())
        } else {
            Error::refused("schema registry", self.to_string())
        }
    }
}

/// A registry client, shared by every codec of a job that names the same registry.
pub struct Registry {
    http: reqwest::Client,
    base: String,
    shown: String,
    auth: Option<String>,
    backoff: BackoffPolicy,
    cache: Mutex<Cache>,
    requests: AtomicU64,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("url", &self.shown)
            .field("requests", &self.requests())
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Cache {
    by_id: HashMap<u32, Arc<Registered>>,
    order: VecDeque<u32>,
}

impl Registry {
    /// A client of `config`'s registry; `path` names the setting in errors (`sink.format.registry`).
    pub fn new(config: &RegistryConfig, path: &str) -> Result<Self> {
        let url = config.url.trim_end_matches('/');
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(Error::config(
                format!("{path}.url"),
                format!("`{}` is not an http(s) URL", redact_url(url)),
            ));
        }
        let auth = match (&config.username, &config.password, &config.token) {
            (_, _, Some(_)) if config.username.is_some() => {
                return Err(Error::config(
                    format!("{path}.token"),
                    "give either a token or a username and password, not both",
                ))
            }
            (_, _, Some(t)) => Some(format!("Bearer {t}")),
            (Some(u), p, None) => {
                use base64::Engine as _;
                let pair = format!("{u}:{}", p.as_deref().unwrap_or(""));
                Some(format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(pair)
                ))
            }
            (None, Some(_), None) => {
                return Err(Error::config(
                    format!("{path}.username"),
                    "a password is set without a username",
                ))
            }
            (None, None, None) => None,
        };
        let mut b = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .connect_timeout(Duration::from_secs(5))
            // Requests are rare (one per new schema): no pooled connection outlives the
            // runtime that opened it (blocking readers run their own).
            .pool_max_idle_per_host(0);
        if let Some(ca) = &config.ca_file {
            let pem = std::fs::read(ca).map_err(|e| {
                Error::config(format!("{path}.ca_file"), format!("{}: {e}", ca.display()))
            })?;
            let cert = reqwest::Certificate::from_pem(&pem).map_err(|e| {
                Error::config(format!("{path}.ca_file"), format!("{}: {e}", ca.display()))
            })?;
            b = b.add_root_certificate(cert);
        }
        let http = b
            .build()
            .map_err(|e| Error::config(path.to_owned(), format!("HTTP client: {e}")))?;
        Ok(Registry {
            http,
            base: url.to_owned(),
            shown: redact_url(url),
            auth,
            backoff: BackoffPolicy::default(),
            cache: Mutex::new(Cache::default()),
            requests: AtomicU64::new(0),
        })
    }

    rivus_sdk::setters! {
        /// Sets the retry policy of unavailable requests (default: core's, about 15 s).
        with_backoff(backoff: BackoffPolicy) => backoff;
    }

    /// Requests sent so far (a steady job sends one per distinct schema).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// The registry's URL, without secrets.
    pub fn url(&self) -> &str {
        &self.shown
    }

    /// The schema of `id`, from the cache or the registry.
    pub async fn schema(&self, id: u32) -> std::result::Result<Arc<Registered>, RegistryError> {
        if let Some(s) = self.cached(id) {
            return Ok(s);
        }
        let got: ById = self
            .call(
                format!("schema id {id}"),
                reqwest::Method::GET,
                &format!("/schemas/ids/{id}"),
                None,
            )
            .await?;
        let s = Arc::new(Registered {
            id,
            schema_type: got.schema_type.unwrap_or_default(),
            text: got.schema,
            references: got.references,
        });
        let mut c = self.cache.lock();
        if c.by_id.insert(id, Arc::clone(&s)).is_none() {
            c.order.push_back(id);
            while c.order.len() > CACHE {
                if let Some(old) = c.order.pop_front() {
                    c.by_id.remove(&old);
                }
            }
        }
        Ok(s)
    }

    /// The schema of `id` if it is cached.
    pub fn cached(&self, id: u32) -> Option<Arc<Registered>> {
        self.cache.lock().by_id.get(&id).cloned()
    }

    /// Registers `text` under `subject` (or finds it registered): its id. An incompatible
    /// schema is refused by the registry's compatibility rule.
    pub async fn register(
        &self,
        subject: &str,
        schema_type: SchemaType,
        text: &str,
    ) -> std::result::Result<u32, RegistryError> {
        let what = format!("registering a schema under subject `{subject}`");
        let path = format!("/subjects/{}/versions", encode(subject));
        self.post_schema(what, &path, schema_type, text).await
    }

    /// The id of `text` registered under `subject` already (nothing is registered).
    pub async fn lookup(
        &self,
        subject: &str,
        schema_type: SchemaType,
        text: &str,
    ) -> std::result::Result<u32, RegistryError> {
        let what =
            format!("looking up the schema under subject `{subject}` (auto_register = false)");
        let path = format!("/subjects/{}", encode(subject));
        self.post_schema(what, &path, schema_type, text).await
    }

    /// Posts a schema to `path` (registration or lookup): the id the registry answers.
    async fn post_schema(
        &self,
        what: String,
        path: &str,
        schema_type: SchemaType,
        text: &str,
    ) -> std::result::Result<u32, RegistryError> {
        let mut body = serde_json::json!({ "schema": text });
        if schema_type != SchemaType::Avro {
            body["schemaType"] = schema_type.name().into();
        }
        let got: Id = self
            .call(what, reqwest::Method::POST, path, Some(body))
            .await?;
        Ok(got.id)
    }

    /// The latest version registered under `subject`.
    pub async fn latest(&self, subject: &str) -> std::result::Result<Registered, RegistryError> {
        self.version(subject, -1).await
    }

    /// Version `version` of `subject` (`-1`: the latest).
    pub async fn version(
        &self,
        subject: &str,
        version: i64,
    ) -> std::result::Result<Registered, RegistryError> {
        let (what, v) = match version {
            -1 => (
                format!("the latest schema of subject `{subject}`"),
                "latest".to_owned(),
            ),
            v => (format!("version {v} of subject `{subject}`"), v.to_string()),
        };
        let got: Version = self
            .call(
                what,
                reqwest::Method::GET,
                &format!("/subjects/{}/versions/{v}", encode(subject)),
                None,
            )
            .await?;
        Ok(Registered {
            id: got.id,
            schema_type: got.schema_type.unwrap_or_default(),
            text: got.schema,
            references: got.references,
        })
    }

    /// One request, retried while the registry is unavailable.
    async fn call<T: serde::de::DeserializeOwned>(
        &self,
        what: String,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> std::result::Result<T, RegistryError> {
        let mut attempts = Attempts::new("schema registry request", &self.backoff);
        loop {
            match self.once(&what, method.clone(), path, body.as_ref()).await {
                Err(e) if e.is_unavailable() => match attempts.next_delay() {
                    Some(wait) => {
                        tracing::warn!(registry = %self.shown, error = %e, ?wait, "schema registry unavailable, retrying");
                        tokio::time::sleep(wait).await;
                    }
                    None => return Err(e),
                },
                other => return other,
            }
        }
    }

    async fn once<T: serde::de::DeserializeOwned>(
        &self,
        what: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> std::result::Result<T, RegistryError> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("rivus_schema_registry_requests_total").increment(1);
        let unavailable = |message: String| RegistryError::Unavailable {
            url: self.shown.clone(),
            what: what.to_owned(),
            message,
        };
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("Accept", CONTENT_TYPE);
        if let Some(a) = &self.auth {
            req = req.header("Authorization", a);
        }
        if let Some(b) = body {
            req = req.header("Content-Type", CONTENT_TYPE).body(b.to_string());
        }
        // reqwest's errors carry the URL, which holds no secret here (credentials go in a
        // header); without_url keeps them short all the same.
        let resp = req
            .send()
            .await
            .map_err(|e| unavailable(e.without_url().to_string()))?;
        let status = resp.status();
        let text = resp
            .text()
            .await
            .map_err(|e| unavailable(e.without_url().to_string()))?;
        if status.is_success() {
            return serde_json::from_str(&text).map_err(|e| RegistryError::Answered {
                url: self.shown.clone(),
                what: what.to_owned(),
                status: status.as_u16(),
                code: 0,
                message: format!("unexpected answer ({e}): {}", cut(&text)),
            });
        }
        #[derive(Deserialize, Default)]
        struct Problem {
            #[serde(default)]
            error_code: i64,
            #[serde(default)]
            message: String,
        }
        let p: Problem = serde_json::from_str(&text).unwrap_or_default();
        let message = if p.message.is_empty() {
            cut(&text)
        } else {
            p.message
        };
        Err(match status.as_u16() {
            401 | 403 => RegistryError::Refused {
                url: self.shown.clone(),
                what: what.to_owned(),
                status: status.as_u16(),
                message,
            },
            s if s >= 500 || s == 408 || s == 429 => unavailable(format!("HTTP {s}: {message}")),
            s => RegistryError::Answered {
                url: self.shown.clone(),
                what: what.to_owned(),
                status: s,
                code: p.error_code,
                message,
            },
        })
    }
}

fn cut(text: &str) -> String {
    text.chars().take(300).collect()
}

/// A subject as a path segment.
fn encode(subject: &str) -> String {
    let mut out = String::with_capacity(subject.len());
    for b in subject.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_stay_out_of_debug_output() {
        let c = RegistryConfig {
            url: "https://u:hunter2@registry:8081".into(),
            username: Some("u".into()),
            password: Some("hunter2".into()),
            token: None,
            ca_file: None,
        };
        let shown = format!("{c:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        let r = Registry::new(&c, "format.registry").unwrap();
        assert!(!format!("{r:?}").contains("hunter2"));
    }

    #[test]
    fn bad_settings_name_their_field() {
        let e = Registry::new(
            &RegistryConfig {
                url: "registry:8081".into(),
                ..Default::default()
            },
            "format.registry",
        )
        .unwrap_err();
        assert!(e.to_string().contains("`format.registry.url`"), "{e}");
        let e = Registry::new(
            &RegistryConfig {
                url: "http://r".into(),
                username: Some("u".into()),
                token: Some("t".into()),
                ..Default::default()
            },
            "s.format.registry",
        )
        .unwrap_err();
        assert!(e.to_string().contains("s.format.registry.token"), "{e}");
    }

    #[test]
    fn subjects_are_escaped_in_paths() {
        assert_eq!(encode("orders-value"), "orders-value");
        assert_eq!(encode("a/b c"), "a%2Fb%20c");
    }
}
