//! The `elasticsearch` section of a pipeline file (feature `pipeline-file`): `[sink] type =
//! "elasticsearch"`, read by serde (unknown fields refused), turned into the sink with JSON
//! documents, and checked by a healthcheck that asks the cluster for its version.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use rivus_core::error_policy::ErrorPolicy;
use rivus_core::pipeline_file::{
    CatalogEntry, Health, OptionDoc, SectionContext, SinkPlan, SinkSection,
};
use rivus_core::schema::SchemaError;
use rivus_core::secrets::redact_url;
use rivus_core::tls::TlsFiles;
use rivus_core::Result;

use crate::{EsAuth, EsConfig, EsSink};

/// `[sink] type = "elasticsearch"`: one index, each record a document.
#[derive(Debug, Clone, Deserialize)]
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
    /// For `https://`: `{ ca_file, client_cert, client_key }` (PEM files).
    #[serde(default)]
    pub tls: TlsFiles,
}

impl EsSinkSection {
    /// The client settings this section gives.
    pub fn config(&self) -> EsConfig {
        let mut es = EsConfig::new(&self.url);
        es.tls = self.tls.clone();
        if let Some(user) = &self.username {
            es.auth = EsAuth::Basic {
                user: user.clone(),
                password: self.password.clone().unwrap_or_default(),
            };
        }
        es
    }

    /// The sink: each record indexed as it is, with its id from `id_field` when set; errors
    /// name fields below `path`.
    pub fn sink(&self, policy: ErrorPolicy, path: &str) -> Result<EsSink<Value>> {
        let mut b = EsSink::builder(self.config())
            .path(path)
            .error_policy(policy);
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
                    format!("{path}.apply_changes"),
                    "a delete removes the document of its id: set `id_field`",
                ));
            }
            let field = self.id_field.clone().unwrap_or_default();
            return b.build(move |v: &Value, idx| {
                let change = rivus_core::change::Change::of(v)
                    .map_err(|e| SchemaError::new("json", "record", e))?;
                let (delete, row) = match change {
                    rivus_core::change::Change::Write(row) => (false, Value::Object(row)),
                    rivus_core::change::Change::Delete(row) => (true, Value::Object(row)),
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

    /// Asks the cluster for its version (authentication included), writing nothing; errors
    /// name fields below `path`.
    pub async fn healthcheck(&self, path: &str) -> Health {
        let outcome = async {
            let mut config = self.config();
            config.timeout = Duration::from_secs(5);
            let client = config.client(path).map_err(|e| e.to_string())?;
            let r = client
                .info()
                .send()
                .await
                .map_err(|e| redact_url(&e.to_string()))?;
            let status = r.status_code();
            if !status.is_success() {
                return Err(format!("HTTP {status} (authentication?)"));
            }
            let v: Value = r.json().await.map_err(|e| e.to_string())?;
            Ok(format!(
                "version {}",
                v["version"]["number"].as_str().unwrap_or("?")
            ))
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
        options: &[
            OptionDoc::required("url", "http(s)://host:port"),
            OptionDoc::required("index", "string"),
            OptionDoc::optional("id_field", "string", "ids chosen by the cluster"),
            OptionDoc::optional("apply_changes", "bool", "false"),
            OptionDoc::optional("max_actions", "integer", "1000"),
            OptionDoc::optional("username", "string", "no authentication"),
            OptionDoc::optional("password", "string (${VAR})", "none"),
            OptionDoc::optional(
                "tls",
                "{ ca_file, client_cert, client_key }",
                "system roots",
            ),
        ],
    };

    fn build(&self, ctx: &SectionContext) -> Result<SinkPlan> {
        Ok(SinkPlan::cloned(self.sink(ctx.policy.clone(), &ctx.path)?))
    }

    async fn check(&self, ctx: &SectionContext) -> Health {
        self.healthcheck(&ctx.path).await
    }
}
