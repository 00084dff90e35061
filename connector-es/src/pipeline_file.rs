//! The `elasticsearch` and `opensearch` sections of a pipeline file (feature `pipeline-file`):
//! `[sink] type = "elasticsearch"` or `"opensearch"` (the same options and code: the engine is
//! learnt at open), read by serde (unknown fields refused), turned into the sink with JSON
//! documents, and checked by a healthcheck that asks the cluster what it is.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use rivus_core::error_policy::ErrorPolicy;
use rivus_core::pipeline_file::{CatalogEntry, Health, SectionContext, SinkPlan, SinkSection};
use rivus_core::schema::SchemaError;
use rivus_core::secrets::redact_url;
use rivus_core::tls::TlsFiles;
use rivus_core::Result;

use crate::{AwsCredentials, Cluster, EsAuth, EsClient, EsConfig, EsSink};

/// `[sink] type = "elasticsearch"`: one index, each record a document.
#[derive(Debug, Clone, Deserialize, rivus_core::pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EsSinkSection {
    /// `http://` or `https://` URL of a node.
    pub url: String,
    /// The index written to.
    pub index: String,
    /// The field whose value is the document id (replays then overwrite).
    pub id_field: Option<String>,
    /// Records are change records (`__deleted`, or Debezium's envelope, as the `postgres-cdc`
    /// source emits them): a write indexes its row, a delete removes the document. Needs
    /// `id_field`.
    #[serde(default)]
    pub apply_changes: bool,
    /// Actions per bulk request.
    pub max_actions: Option<usize>,
    /// Basic authentication: the user.
    pub username: Option<String>,
    /// Basic authentication: the password (from `${VAR}`).
    pub password: Option<String>,
    /// An Elasticsearch API key: `id:key`, or the base64 `encoded` form Elasticsearch returns
    /// (from `${VAR}`).
    pub api_key: Option<String>,
    /// A bearer token (from `${VAR}`).
    pub bearer_token: Option<String>,
    /// AWS SigV4 signing (Amazon OpenSearch Service and Serverless).
    pub aws: Option<AwsSection>,
    /// The engine, for endpoints that do not answer `GET /`: `opensearch-2.19`,
    /// `elasticsearch-8.15`... (default: asked at open; OpenSearch Serverless: `opensearch-2.19`).
    pub engine: Option<String>,
    /// For `https://`: `{ ca_file, client_cert, client_key }` (PEM files).
    #[serde(default)]
    pub tls: TlsFiles,
}

impl EsSinkSection {
    /// The client settings this section gives.
    pub fn config(&self) -> Result<EsConfig> {
        let mut es = EsConfig::new(&self.url);
        es.tls = self.tls.clone();
        let mut given = Vec::new();
        if let Some(user) = &self.username {
            given.push("username");
            es.auth = EsAuth::Basic {
                user: user.clone(),
                password: self.password.clone().unwrap_or_default(),
            };
        } else if self.password.is_some() {
            return Err(rivus_core::Error::config(
                "password",
                "a password needs `username`",
            ));
        }
        if let Some(key) = &self.api_key {
            given.push("api_key");
            es.auth = api_key(key).ok_or_else(|| {
                rivus_core::Error::config(
                    "api_key",
                    "neither `id:key` nor the base64 encoding of one",
                )
            })?;
        }
        if let Some(token) = &self.bearer_token {
            given.push("bearer_token");
            es.auth = EsAuth::Bearer(token.clone());
        }
        if let Some(aws) = &self.aws {
            given.push("aws");
            es.auth = aws.auth().map_err(|e| e.under("aws"))?;
            if aws.service == "aoss" && self.engine.is_none() {
                es.cluster = Some(Cluster::opensearch(2, 19));
            }
        }
        if given.len() > 1 {
            return Err(rivus_core::Error::config(
                given[1],
                format!("one way to authenticate: `{}` is set too", given[0]),
            ));
        }
        if let Some(engine) = &self.engine {
            es.cluster = Some(parse_engine(engine).ok_or_else(|| {
                rivus_core::Error::config(
                    "engine",
                    format!("`{engine}`: `opensearch-MAJOR.MINOR` or `elasticsearch-MAJOR.MINOR`"),
                )
            })?);
        }
        es.validate()?;
        Ok(es)
    }

    /// The sink: each record indexed as it is, with its id from `id_field` when set.
    pub fn sink(&self, policy: ErrorPolicy) -> Result<EsSink<Value>> {
        let mut b = EsSink::builder(self.config()?).error_policy(policy);
        if let Some(n) = self.max_actions {
            b = b.batch_size(n);
        }
        let (index, id_field) = (self.index.clone(), self.id_field.clone());
        let id_of = move |v: &Value| {
            id_field.as_ref().and_then(|f| match v.get(f) {
                Some(Value::String(s)) => Some(s.clone()),
                Some(Value::Null) | None => None,
                Some(other) => Some(other.to_string()),
            })
        };
        if self.apply_changes {
            if self.id_field.is_none() {
                return Err(rivus_core::Error::config(
                    "apply_changes",
                    "a delete removes the document of its id: set `id_field`",
                ));
            }
            let field = self.id_field.clone().unwrap_or_default();
            return b.build(move |v: &Value, idx| {
                let change = rivus_core::change::Change::of(v)
                    .map_err(|e| SchemaError::new("json", "record", e))?;
                // A change without some columns (unchanged TOASTed values) updates the
                // document partially: the fields it does not carry keep their values.
                let (delete, partial, row) = match change {
                    rivus_core::change::Change::Write { row, unchanged } => {
                        (false, !unchanged.is_empty(), Value::Object(row))
                    }
                    rivus_core::change::Change::Delete(row) => (true, false, Value::Object(row)),
                };
                let Some(id) = id_of(&row) else {
                    return Err(SchemaError::new(
                        "json",
                        "record",
                        format!("the change has no `{field}` (id_field)"),
                    ));
                };
                if delete {
                    idx.delete(index.clone(), id);
                } else if partial {
                    idx.update(index.clone(), id, row);
                } else {
                    idx.index(index.clone(), Some(id), row);
                }
                Ok(())
            });
        }
        b.build(move |v: &Value, idx| {
            idx.index(index.clone(), id_of(v), v.clone());
            Ok(())
        })
    }

    /// Asks the cluster for its version (authentication included), writing nothing.
    pub async fn healthcheck(&self) -> Health {
        let outcome = async {
            let mut config = self.config().map_err(|e| e.to_string())?;
            config.timeout = Duration::from_secs(5);
            let client = EsClient::connect(&config)
                .await
                .map_err(|e| redact_url(&e.to_string()))?;
            Ok(client.cluster().to_string())
        }
        .await;
        Health::new("elasticsearch", redact_url(&self.url), outcome)
    }
}

#[async_trait::async_trait]
impl SinkSection for EsSinkSection {
    const TYPE: &'static str = "elasticsearch";
    const CATALOG: CatalogEntry = CatalogEntry {
        summary: "one Elasticsearch index, each record a document (bulk requests)",
        guarantee: "at-least-once (id_field makes replays overwrite)",
    };

    fn build(&self, ctx: &SectionContext) -> Result<SinkPlan> {
        Ok(SinkPlan::cloned(self.sink(ctx.policy.clone())?))
    }

    async fn check(&self, _ctx: &SectionContext) -> Health {
        self.healthcheck().await
    }
}

/// `[sink] type = "opensearch"`: the same sink and options as `elasticsearch`, named for the
/// engine it writes to.
#[derive(Debug, Clone, Deserialize, rivus_core::pipeline_file::JsonSchema)]
#[serde(transparent)]
pub struct OpenSearchSinkSection(pub EsSinkSection);

#[async_trait::async_trait]
impl SinkSection for OpenSearchSinkSection {
    const TYPE: &'static str = "opensearch";
    const CATALOG: CatalogEntry = CatalogEntry {
        summary: "one OpenSearch index, each record a document (bulk requests; same options as elasticsearch)",
        ..EsSinkSection::CATALOG
    };

    fn build(&self, ctx: &SectionContext) -> Result<SinkPlan> {
        self.0.build(ctx)
    }

    async fn check(&self, ctx: &SectionContext) -> Health {
        let mut h = self.0.check(ctx).await;
        h.kind = "opensearch";
        h
    }
}

/// `aws = { ... }`: SigV4 signing.
#[derive(Debug, Clone, Deserialize, rivus_core::pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AwsSection {
    /// The region, e.g. `eu-west-1`.
    pub region: String,
    /// `es` (OpenSearch Service, the default) or `aoss` (Serverless).
    #[serde(default = "default_service")]
    pub service: String,
    /// Access key id (default `AWS_ACCESS_KEY_ID`).
    pub access_key: Option<String>,
    /// Secret access key (default `AWS_SECRET_ACCESS_KEY`; from `${VAR}`).
    pub secret_key: Option<String>,
    /// Session token of temporary credentials (default `AWS_SESSION_TOKEN`).
    pub session_token: Option<String>,
}

fn default_service() -> String {
    "es".to_owned()
}

impl AwsSection {
    /// The credentials; errors name fields relative to the `aws` table (`region`).
    fn auth(&self) -> Result<EsAuth> {
        // Checked here, so that errors name the section's fields (`aws.region`), not the
        // client's.
        if self.region.trim().is_empty() {
            return Err(rivus_core::Error::config("region", "required"));
        }
        if !matches!(self.service.as_str(), "es" | "aoss") {
            return Err(rivus_core::Error::config(
                "service",
                format!(
                    "`{}`: `es` (OpenSearch Service) or `aoss` (Serverless)",
                    self.service
                ),
            ));
        }
        let credentials = match (&self.access_key, &self.secret_key) {
            (Some(a), Some(s)) => AwsCredentials {
                access_key: a.clone(),
                secret_key: s.clone(),
                session_token: self.session_token.clone(),
            },
            (None, None) => AwsCredentials::from_env().ok_or_else(|| {
                rivus_core::Error::config(
                    "access_key",
                    "not set, and neither are AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
                )
            })?,
            (Some(_), None) => {
                return Err(rivus_core::Error::config(
                    "secret_key",
                    "required with access_key",
                ))
            }
            (None, Some(_)) => {
                return Err(rivus_core::Error::config(
                    "access_key",
                    "required with secret_key",
                ))
            }
        };
        Ok(EsAuth::AwsSigV4 {
            region: self.region.clone(),
            service: self.service.clone(),
            credentials,
        })
    }
}

/// `id:key`, or base64 of it.
fn api_key(text: &str) -> Option<EsAuth> {
    use base64::Engine as _;
    let plain = match text.split_once(':') {
        Some(_) => text.to_owned(),
        None => String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(text.trim())
                .ok()?,
        )
        .ok()?,
    };
    let (id, key) = plain.split_once(':')?;
    (!id.is_empty() && !key.is_empty()).then(|| EsAuth::ApiKey {
        id: id.to_owned(),
        key: key.to_owned(),
    })
}

/// `opensearch-2.19` → OpenSearch 2.19.
fn parse_engine(text: &str) -> Option<Cluster> {
    let (name, version) = text.split_once('-')?;
    let (major, minor) = version.split_once('.')?;
    let (major, minor) = (major.parse().ok()?, minor.parse().ok()?);
    match name {
        "opensearch" => Some(Cluster::opensearch(major, minor)),
        "elasticsearch" => Some(Cluster::elasticsearch(major, minor)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(extra: &str) -> std::result::Result<EsSinkSection, String> {
        toml::from_str(&format!(
            "url = \"http://127.0.0.1:9200\"\nindex = \"i\"\n{extra}"
        ))
        .map_err(|e| e.to_string())
    }

    #[test]
    fn authentication_options_become_credentials_and_bad_ones_are_named() {
        let s =
            section("api_key = \"VnVhQ2ZHY0JDZGJrUW0tZTVhT3g6dWkybHAyYXhUTm1zeWFrdzl0dk5udw==\"")
                .unwrap();
        assert_eq!(
            s.config().unwrap().auth,
            EsAuth::ApiKey {
                id: "VuaCfGcBCdbkQm-e5aOx".into(),
                key: "ui2lp2axTNmsyakw9tvNnw".into()
            }
        );
        let s = section("api_key = \"!!\"").unwrap();
        let e = s.config().unwrap_err().to_string();
        assert!(e.contains("`api_key`") && !e.contains("!!"), "{e}");
        let s = section("username = \"u\"\npassword = \"p\"\nbearer_token = \"t\"").unwrap();
        let e = s.config().unwrap_err().to_string();
        assert!(e.contains("`bearer_token`"), "{e}");
        let s = section(
            "aws = { region = \"eu-west-1\", service = \"aoss\", access_key = \"AK\", secret_key = \"sk-secret\" }",
        )
        .unwrap();
        let c = s.config().unwrap();
        assert_eq!(c.cluster, Some(Cluster::opensearch(2, 19)));
        assert!(!format!("{c:?}").contains("sk-secret"));
        let s = section("aws = { region = \"eu-west-1\", service = \"s3\", access_key = \"AK\", secret_key = \"x\" }").unwrap();
        let e = s.config().unwrap_err().to_string();
        assert!(e.contains("`aws.service`"), "{e}");
        let s = section("engine = \"opensearch-2\"").unwrap();
        assert!(s.config().unwrap_err().to_string().contains("`engine`"));
        let s = section("engine = \"elasticsearch-8.15\"").unwrap();
        assert_eq!(
            s.config().unwrap().cluster,
            Some(Cluster::elasticsearch(8, 15))
        );
        assert!(section("aws = { region = \"x\", secret = \"y\" }")
            .unwrap_err()
            .contains("secret"));
    }
}
