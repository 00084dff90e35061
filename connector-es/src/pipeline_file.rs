//! The `elasticsearch` and `opensearch` sections of a pipeline file (feature `pipeline-file`):
//! `[sink] type = "elasticsearch"` or `"opensearch"` (the same options and code: the engine is
//! learnt at open), read by serde (unknown fields refused), turned into the sink with JSON
//! documents, and checked by a healthcheck that asks the cluster what it is.

use std::time::Duration;

use rivus_sdk::template::Template;
use serde::Deserialize;
use serde_json::Value;

use rivus_pipeline_file::{renamed, CatalogEntry, Health, SectionContext, SinkPlan, SinkSection};
use rivus_sdk::bulk::BulkConfig;
use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::options::{Batch, BatchDefaults, Retry};
use rivus_sdk::schema::SchemaError;
use rivus_sdk::secrets::redact_url;
use rivus_sdk::tls::TlsFiles;
use rivus_sdk::Result;

use crate::{AwsCredentials, Cluster, EsAuth, EsClient, EsConfig, EsSink};

/// `[sink] type = "elasticsearch"`: one index, each record a document.
#[derive(Debug, Clone, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EsSinkSection {
    /// `http://` or `https://` URL of a node.
    pub url: String,
    /// The index written to: a name, or a template choosing it per record
    /// (`orders-{at:%Y.%m}`, `cdc-{source.table}`).
    pub index: String,
    /// The field whose value is the document id (replays then overwrite).
    pub id_field: Option<String>,
    /// Records are change records (`__deleted`, or Debezium's envelope, as the `postgres-cdc`
    /// source emits them): a write indexes its row, a delete removes the document. Needs
    /// `id_field`.
    #[serde(default)]
    pub apply_changes: bool,
    /// The old name of `batch.max_records`, read for one more release.
    #[schemars(extend("deprecated" = true))]
    pub max_actions: Option<usize>,
    /// When a bulk request is sent: `max_records` actions, `max_bytes`, `timeout` after the
    /// oldest, `in_flight` requests at once.
    #[serde(default)]
    pub batch: Batch<EsBatch>,
    /// How a bulk request or an item refused with 429 (or a node unreachable) is retried.
    #[serde(default)]
    pub retry: Retry,
    /// How to authenticate, one way: `{ basic = { username, password } }`, `{ api_key = … }`,
    /// `{ bearer_token = … }` or `{ aws = { region, service, … } }` (default: none).
    pub auth: Option<AuthSection>,
    /// The engine, for endpoints that do not answer `GET /`: `opensearch-2.19`,
    /// `elasticsearch-8.15`... (default: asked at open; OpenSearch Serverless: `opensearch-2.19`).
    #[serde(default, deserialize_with = "engine")]
    #[schemars(with = "Option<EngineText>")]
    pub engine: Option<Cluster>,
    /// For `https://`: `{ ca_file, client_cert, client_key }` (PEM files).
    #[serde(default)]
    pub tls: TlsFiles,
}

impl EsSinkSection {
    /// The client settings this section gives.
    pub fn config(&self) -> Result<EsConfig> {
        let mut es = EsConfig::new(&self.url);
        es.tls = self.tls.clone();
        es.cluster = self.engine;
        match &self.auth {
            None => {}
            Some(AuthSection::Basic { username, password }) => {
                es.auth = EsAuth::Basic {
                    user: username.clone(),
                    password: password.clone(),
                };
            }
            Some(AuthSection::ApiKey(key)) => {
                es.auth = api_key(key).ok_or_else(|| {
                    rivus_sdk::Error::config(
                        "auth.api_key",
                        "neither `id:key` nor the base64 encoding of one",
                    )
                })?;
            }
            Some(AuthSection::BearerToken(token)) => es.auth = EsAuth::Bearer(token.clone()),
            Some(AuthSection::Aws(aws)) => {
                es.auth = aws.auth().map_err(|e| e.under("auth.aws"))?;
                if aws.service == AwsService::Aoss && self.engine.is_none() {
                    es.cluster = Some(Cluster::opensearch(2, 19));
                }
            }
        }
        es.validate()?;
        Ok(es)
    }

    /// The sink: each record indexed as it is, with its id from `id_field` when set.
    pub fn sink(&self, policy: ErrorPolicy) -> Result<EsSink<Value>> {
        let mut batch = self.batch.clone();
        let given = batch.max_records_given();
        renamed(
            self.max_actions,
            "max_actions",
            &mut batch.max_records,
            "batch.max_records",
            given,
        )?;
        let b = EsSink::builder(self.config()?)
            .error_policy(policy)
            .bulk(batch.bulk(&self.retry));
        let template =
            Template::parse(&self.index).map_err(|e| rivus_sdk::Error::config("index", e))?;
        // The index of a record: the section's, or the template's for this record (a record
        // it cannot name goes to the error policy).
        let index_of = move |v: &Value| {
            template
                .render(v)
                .map(|i| i.into_owned())
                .map_err(|e| SchemaError::new("json", "record", format!("index `{template}`: {e}")))
        };
        let id_field = self.id_field.clone();
        let id_of = move |v: &Value| {
            id_field
                .as_ref()
                .and_then(|f| match rivus_sdk::metadata::field(v, f) {
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(Value::Null) | None => None,
                    Some(other) => Some(other.to_string()),
                })
        };
        if self.apply_changes {
            if self.id_field.is_none() {
                return Err(rivus_sdk::Error::config(
                    "apply_changes",
                    "a delete removes the document of its id: set `id_field`",
                ));
            }
            let field = self.id_field.clone().unwrap_or_default();
            return b.build(move |v: &Value, idx| {
                let change = rivus_sdk::change::Change::of(&rivus_sdk::metadata::without(v))
                    .map_err(|e| SchemaError::new("json", "record", e))?;
                // A change without some columns (unchanged TOASTed values) updates the
                // document partially: the fields it does not carry keep their values. A key
                // change of that kind moves the old document (its delete half does nothing).
                let index = index_of(v)?;
                let id = |row: &Value| {
                    id_of(row).ok_or_else(|| {
                        SchemaError::new(
                            "json",
                            "record",
                            format!("the change has no `{field}` (id_field)"),
                        )
                    })
                };
                use rivus_sdk::change::Change;
                match change {
                    Change::Write {
                        row, moved_from, ..
                    } if moved_from.is_some() => {
                        let from = id(&Value::Object(moved_from.unwrap_or_default()))?;
                        let row = Value::Object(row);
                        idx.moved(index, from, id(&row)?, row);
                    }
                    Change::Write { row, unchanged, .. } => {
                        let row = Value::Object(row);
                        let to = id(&row)?;
                        if unchanged.is_empty() {
                            idx.index(index, Some(to), row);
                        } else {
                            idx.update(index, to, row);
                        }
                    }
                    Change::Delete(row) => idx.delete(index, id(&Value::Object(row))?),
                    Change::MovedOut { .. } => {}
                }
                Ok(())
            });
        }
        b.build(move |v: &Value, idx| {
            idx.index(
                index_of(v)?,
                id_of(v),
                rivus_sdk::metadata::without(v).into_owned(),
            );
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

/// The search sink's batching defaults: [`EsSink::default_bulk`]'s.
#[derive(Debug, Clone, Copy)]
pub struct EsBatch;

impl BatchDefaults for EsBatch {
    const NAME: &'static str = "Elasticsearch";
    fn defaults() -> BulkConfig {
        EsSink::default_bulk()
    }
}

/// `[sink] type = "opensearch"`: the same sink and options as `elasticsearch`, named for the
/// engine it writes to.
#[derive(Debug, Clone, Deserialize, rivus_pipeline_file::JsonSchema)]
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

/// `auth = { … }`: one way to authenticate.
#[derive(Clone, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum AuthSection {
    /// Basic authentication: `{ basic = { username = "elastic", password = "${ES_PASSWORD}" } }`.
    Basic {
        /// The user.
        username: String,
        /// The password (from `${VAR}`).
        #[serde(default)]
        password: String,
    },
    /// An Elasticsearch API key: `id:key`, or the base64 `encoded` form Elasticsearch returns
    /// (from `${VAR}`).
    ApiKey(String),
    /// A bearer token (from `${VAR}`).
    BearerToken(String),
    /// AWS SigV4 signing (Amazon OpenSearch Service and Serverless).
    Aws(AwsSection),
}

/// The way, never the secret.
impl std::fmt::Debug for AuthSection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuthSection::Basic { username, .. } => f
                .debug_struct("Basic")
                .field("username", username)
                .finish_non_exhaustive(),
            AuthSection::ApiKey(_) => f.write_str("ApiKey(<redacted>)"),
            AuthSection::BearerToken(_) => f.write_str("BearerToken(<redacted>)"),
            AuthSection::Aws(aws) => f.debug_tuple("Aws").field(aws).finish(),
        }
    }
}

/// `auth = { aws = { ... } }`: SigV4 signing.
#[derive(Clone, Deserialize, rivus_pipeline_file::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AwsSection {
    /// The region, e.g. `eu-west-1`.
    pub region: String,
    /// `es` (OpenSearch Service, the default) or `aoss` (Serverless).
    #[serde(default)]
    pub service: AwsService,
    /// Access key id (default `AWS_ACCESS_KEY_ID`).
    pub access_key: Option<String>,
    /// Secret access key (default `AWS_SECRET_ACCESS_KEY`; from `${VAR}`).
    pub secret_key: Option<String>,
    /// Session token of temporary credentials (default `AWS_SESSION_TOKEN`).
    pub session_token: Option<String>,
}

/// The region and service, never the keys.
impl std::fmt::Debug for AwsSection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsSection")
            .field("region", &self.region)
            .field("service", &self.service)
            .finish_non_exhaustive()
    }
}

/// The AWS service that signs: `es` (OpenSearch Service) or `aoss` (Serverless).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, rivus_pipeline_file::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum AwsService {
    /// Amazon OpenSearch Service.
    #[default]
    Es,
    /// Amazon OpenSearch Serverless.
    Aoss,
}

impl AwsService {
    /// The name SigV4 signs with.
    pub fn name(self) -> &'static str {
        match self {
            AwsService::Es => "es",
            AwsService::Aoss => "aoss",
        }
    }
}

/// `engine` as a file writes it: `opensearch-2.19`, `elasticsearch-8.15`.
pub struct EngineText;

impl rivus_pipeline_file::JsonSchema for EngineText {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Engine".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^(opensearch|elasticsearch)-[0-9]+\\.[0-9]+$",
            "description": "the engine and its version: `opensearch-MAJOR.MINOR` or `elasticsearch-MAJOR.MINOR`"
        })
    }
}

/// Reads `engine`, refusing anything but `opensearch-MAJOR.MINOR` or
/// `elasticsearch-MAJOR.MINOR`.
fn engine<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<Cluster>, D::Error> {
    let text = String::deserialize(d)?;
    parse_engine(&text).map(Some).ok_or_else(|| {
        serde::de::Error::custom(format!(
            "`{text}`: `opensearch-MAJOR.MINOR` or `elasticsearch-MAJOR.MINOR`"
        ))
    })
}

impl AwsSection {
    /// The credentials; errors name fields relative to the `aws` table (`region`).
    fn auth(&self) -> Result<EsAuth> {
        // Checked here, so that errors name the section's fields (`aws.region`), not the
        // client's.
        if self.region.trim().is_empty() {
            return Err(rivus_sdk::Error::config("region", "required"));
        }
        let credentials = match (&self.access_key, &self.secret_key) {
            (Some(a), Some(s)) => AwsCredentials {
                access_key: a.clone(),
                secret_key: s.clone(),
                session_token: self.session_token.clone(),
            },
            (None, None) => AwsCredentials::from_env().ok_or_else(|| {
                rivus_sdk::Error::config(
                    "access_key",
                    "not set, and neither are AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
                )
            })?,
            (Some(_), None) => {
                return Err(rivus_sdk::Error::config(
                    "secret_key",
                    "required with access_key",
                ))
            }
            (None, Some(_)) => {
                return Err(rivus_sdk::Error::config(
                    "access_key",
                    "required with secret_key",
                ))
            }
        };
        Ok(EsAuth::AwsSigV4 {
            region: self.region.clone(),
            service: self.service.name().to_owned(),
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
    fn batching_is_the_shared_batch_group_and_the_old_name_still_works() {
        let sink = |extra: &str| {
            section(extra)
                .unwrap()
                .sink(ErrorPolicy::Fail)
                .map(|s| format!("{s:?}"))
                .map_err(|e| e.to_string())
        };
        let d = sink("batch = { max_records = 20, timeout = \"5s\", in_flight = 3 }").unwrap();
        assert!(d.contains("max_actions: 20"), "{d}");
        assert!(d.contains("flush_interval: Some(5s)"), "{d}");
        assert!(d.contains("concurrent_requests: 3"), "{d}");
        assert!(
            d.contains("max_bytes: 5242880"),
            "the sink's default stays: {d}"
        );
        let d = sink("max_actions = 10\nretry = { max_retries = 2 }").unwrap();
        assert!(d.contains("max_actions: 10"), "{d}");
        assert!(d.contains("max_retries: 2"), "{d}");
        let e = sink("max_actions = 10\nbatch = { max_records = 20 }").unwrap_err();
        assert!(
            e.contains("max_actions") && e.contains("batch.max_records"),
            "{e}"
        );
        let e = section("batch = { in_flight = 0 }").unwrap_err();
        assert!(e.contains("in_flight"), "{e}");
    }

    #[test]
    fn authentication_options_become_credentials_and_bad_ones_are_named() {
        let s = section(
            "auth = { api_key = \"VnVhQ2ZHY0JDZGJrUW0tZTVhT3g6dWkybHAyYXhUTm1zeWFrdzl0dk5udw==\" }",
        )
        .unwrap();
        assert_eq!(
            s.config().unwrap().auth,
            EsAuth::ApiKey {
                id: "VuaCfGcBCdbkQm-e5aOx".into(),
                key: "ui2lp2axTNmsyakw9tvNnw".into()
            }
        );
        assert!(!format!("{s:?}").contains("VnVhQ2"), "{s:?}");
        let s = section("auth = { api_key = \"!!\" }").unwrap();
        let e = s.config().unwrap_err().to_string();
        assert!(e.contains("`auth.api_key`") && !e.contains("!!"), "{e}");
        let s = section("auth = { basic = { username = \"u\", password = \"hunter2\" } }").unwrap();
        assert_eq!(
            s.config().unwrap().auth,
            EsAuth::Basic {
                user: "u".into(),
                password: "hunter2".into()
            }
        );
        assert!(!format!("{s:?}").contains("hunter2"), "{s:?}");
        // One way only: the type has no room for two.
        let two = section("auth = { basic = { username = \"u\" }, bearer_token = \"t\" }");
        assert!(two.is_err(), "{two:?}");
        let s = section(
            "auth = { aws = { region = \"eu-west-1\", service = \"aoss\", access_key = \"AK\", secret_key = \"sk-secret\" } }",
        )
        .unwrap();
        let c = s.config().unwrap();
        assert_eq!(c.cluster, Some(Cluster::opensearch(2, 19)));
        assert!(!format!("{c:?}").contains("sk-secret"));
        assert!(!format!("{s:?}").contains("sk-secret"));
        let e =
            section("auth = { aws = { region = \"eu-west-1\", service = \"s3\" } }").unwrap_err();
        assert!(e.contains("s3") && e.contains("aoss"), "{e}");
        let s =
            section("auth = { aws = { region = \" \", access_key = \"AK\", secret_key = \"x\" } }")
                .unwrap();
        let e = s.config().unwrap_err().to_string();
        assert!(e.contains("`auth.aws.region`"), "{e}");
        let e = section("engine = \"opensearch-2\"").unwrap_err();
        assert!(e.contains("opensearch-MAJOR.MINOR"), "{e}");
        let s = section("engine = \"elasticsearch-8.15\"").unwrap();
        assert_eq!(
            s.config().unwrap().cluster,
            Some(Cluster::elasticsearch(8, 15))
        );
        assert!(
            section("auth = { aws = { region = \"x\", secret = \"y\" } }")
                .unwrap_err()
                .contains("secret")
        );
    }
}
