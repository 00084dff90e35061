//! [`EsSource`]: reads an index (optionally filtered by a query) as a bounded stream with
//! point-in-time + `search_after`, sliced across the parallel subtasks. The last sort values
//! read are checkpointed, so a restarted job continues after the last checkpointed document.

use std::sync::Arc;

use elasticsearch::{OpenPointInTimeParts, SearchParts};
use rivus_core::error_policy::{ErrorHandler, ErrorPolicy};
use rivus_core::prelude::*;
use rivus_core::schema::SchemaError;
use serde_json::{json, Value};

use crate::config::EsConfig;

type HitDecoder<T> = dyn Fn(&Value) -> Result<T, SchemaError> + Send + Sync;

/// What a [`EsSourceBuilder`] sets, shared by the subtasks of what it builds.
#[derive(Debug)]
struct Settings {
    config: EsConfig,
    index: String,
    query: Value,
    sort: Vec<Value>,
    page_size: usize,
    keep_alive: String,
    policy: ErrorPolicy,
}

/// Where one subtask is in its slice.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EsSourceState {
    /// Sort values of the last document emitted (`None`: not started).
    pub search_after: Option<Vec<Value>>,
    /// The slice was read to its end.
    pub done: bool,
}

/// Builds an [`EsSource`].
#[derive(Debug)]
pub struct EsSourceBuilder {
    s: Settings,
}

impl EsSourceBuilder {
    /// Connection settings.
    /// The index (or pattern / alias) to read.
    pub fn index(mut self, index: impl Into<String>) -> Self {
        self.s.index = index.into();
        self
    }

    /// A query in the search DSL (default `match_all`).
    pub fn query(mut self, query: Value) -> Self {
        self.s.query = query;
        self
    }

    /// The sort that orders the documents; it must be total and stable across restarts
    /// (default `[{"_id": {"order": "asc", "unmapped_type": "keyword"}}]`; on Elasticsearch 8+ sorting on `_id` is disabled — give a
    /// unique keyword field instead).
    pub fn sort(mut self, sort: Vec<Value>) -> Self {
        self.s.sort = sort;
        self
    }

    /// Documents per search request (default 1000).
    pub fn page_size(mut self, n: usize) -> Self {
        self.s.page_size = n;
        self
    }

    /// What to do with hits the decoder rejects (default: fail).
    pub fn error_policy(mut self, p: ErrorPolicy) -> Self {
        self.s.policy = p;
        self
    }

    /// Checks the settings; `decode` turns a hit (with `_id`, `_source`, `sort`) into a record.
    pub fn build<T: Send + 'static>(
        self,
        decode: impl Fn(&Value) -> Result<T, SchemaError> + Send + Sync + 'static,
    ) -> Result<EsSource<T>> {
        let s = self.s;
        s.config.validate("source.elasticsearch")?;
        if s.index.trim().is_empty() {
            return Err(Error::config("source.elasticsearch.index", "required"));
        }
        if s.page_size == 0 || s.page_size > 10_000 {
            return Err(Error::config(
                "source.elasticsearch.page_size",
                "between 1 and 10000",
            ));
        }
        if s.sort.is_empty() {
            return Err(Error::config(
                "source.elasticsearch.sort",
                "at least one sort field",
            ));
        }
        Ok(EsSource {
            settings: Arc::new(s),
            decode: Arc::new(decode),
            running: None,
        })
    }
}

/// A bounded Elasticsearch source. Clone it into each subtask.
pub struct EsSource<T> {
    settings: Arc<Settings>,
    decode: Arc<HitDecoder<T>>,
    running: Option<Running>,
}

/// What `open` creates.
struct Running {
    client: elasticsearch::Elasticsearch,
    handler: ErrorHandler,
    /// This subtask's slice of the point in time: (id, max).
    slice: (usize, usize),
}

impl<T> std::fmt::Debug for EsSource<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EsSource")
            .field("config", &self.settings.config)
            .field("index", &self.settings.index)
            .field("slice", &self.running.as_ref().map(|r| r.slice))
            .finish()
    }
}

impl<T> Clone for EsSource<T> {
    fn clone(&self) -> Self {
        EsSource {
            settings: Arc::clone(&self.settings),
            decode: Arc::clone(&self.decode),
            running: None,
        }
    }
}

impl EsSource<()> {
    /// Starts a builder reading from the node of `config`: a URL, or a whole [`EsConfig`]
    /// (authentication, TLS, timeout).
    pub fn builder(config: impl Into<EsConfig>) -> EsSourceBuilder {
        EsSourceBuilder {
            s: Settings {
                config: config.into(),
                index: String::new(),
                query: json!({"match_all": {}}),
                // `unmapped_type`: an index without documents has no mapping to sort on.
                sort: vec![json!({"_id": {"order": "asc", "unmapped_type": "keyword"}})],
                page_size: 1000,
                keep_alive: "5m".into(),
                policy: ErrorPolicy::Fail,
            },
        }
    }

    /// The `_source` of a hit, as JSON.
    pub fn source_of(hit: &Value) -> Result<Value, SchemaError> {
        hit.get("_source").cloned().ok_or_else(|| {
            SchemaError::new(
                "elasticsearch",
                hit["_id"].as_str().unwrap_or("?"),
                "hit without _source",
            )
        })
    }
}

fn es_err(what: &str, e: impl std::fmt::Display) -> Error {
    crate::error::es_err(format!("elasticsearch source: {what}"), e)
}

impl<T: Send + 'static> EsSource<T> {
    /// What `open` created; an error before `open`.
    fn running(&self) -> Result<&Running> {
        self.running
            .as_ref()
            .ok_or(Error::Closed("elasticsearch source (not open)"))
    }

    async fn open_pit(&self) -> Result<String> {
        let c = &self.running()?.client;
        let r = c
            .open_point_in_time(OpenPointInTimeParts::Index(&[&self.settings.index]))
            .keep_alive(&self.settings.keep_alive)
            .send()
            .await
            .map_err(|e| es_err("opening a point in time", e))?;
        let status = r.status_code();
        if matches!(status.as_u16(), 401 | 403) {
            return Err(crate::error::status_err(
                "elasticsearch source: opening a point in time",
                status.as_u16(),
                format!("HTTP {status}"),
            ));
        }
        let v: Value = r
            .json()
            .await
            .map_err(|e| es_err("opening a point in time", e))?;
        v["id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| es_err("opening a point in time", format!("HTTP {status}: {v}")))
    }

    async fn page(&self, pit: &str, after: Option<&Vec<Value>>) -> Result<Value> {
        let s = &self.settings;
        let mut body = json!({
            "size": s.page_size,
            "query": s.query,
            "sort": s.sort,
            "pit": {"id": pit, "keep_alive": s.keep_alive},
            "track_total_hits": false,
        });
        let running = self.running()?;
        if running.slice.1 > 1 {
            body["slice"] = json!({"id": running.slice.0, "max": running.slice.1});
        }
        if let Some(a) = after {
            body["search_after"] = json!(a);
        }
        let r = running
            .client
            .search(SearchParts::None)
            .body(body)
            .send()
            .await
            .map_err(|e| es_err("search", e))?;
        let status = r.status_code();
        let v: Value = r.json().await.map_err(|e| es_err("search", e))?;
        if !status.is_success() {
            return Err(es_err("search", format!("HTTP {status}: {}", v["error"])));
        }
        Ok(v)
    }
}

#[async_trait]
impl<T: Send + 'static> RichFunction for EsSource<T> {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        ctx.refuse_worker_mode(
            "source.elasticsearch",
            "the Elasticsearch source (fixed slices)",
        )?;
        self.running = Some(Running {
            client: self.settings.config.client("source.elasticsearch")?,
            handler: ErrorHandler::new(self.settings.policy.clone(), ctx.display_name())
                .connector("elasticsearch"),
            slice: (ctx.subtask_index(), ctx.parallelism()),
        });
        Ok(())
    }
}

#[async_trait]
impl<T: Send + 'static> SourceFunction for EsSource<T> {
    type Out = T;
    type State = EsSourceState;

    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::ExactlyOnce
    }

    async fn run(&mut self, ctx: &mut SourceContext<T, EsSourceState>) -> Result<()> {
        if ctx.state().done {
            return Ok(());
        }
        let handler = self.running()?.handler.clone();
        let mut pit = match ctx.wait_for(self.open_pit()).await? {
            Some(p) => p?,
            None => return Ok(()),
        };
        loop {
            let after = ctx.state().search_after.clone();
            let page = match ctx.wait_for(self.page(&pit, after.as_ref())).await? {
                Some(p) => p?,
                None => break,
            };
            if let Some(id) = page["pit_id"].as_str() {
                pit = id.to_owned();
            }
            let hits = page["hits"]["hits"].as_array().cloned().unwrap_or_default();
            if hits.is_empty() {
                ctx.state_mut().done = true;
                break;
            }
            for hit in &hits {
                let sort = hit["sort"]
                    .as_array()
                    .cloned()
                    .ok_or_else(|| es_err("search", "hit without sort values"))?;
                ctx.state_mut().search_after = Some(sort);
                match (self.decode)(hit) {
                    Ok(v) => ctx.collect(v).await?,
                    Err(e) => {
                        let raw = serde_json::to_vec(hit).unwrap_or_default();
                        handler.handle(&e.position, &e, &raw).await?;
                    }
                }
            }
            if ctx.is_stopping() {
                break;
            }
        }
        if let Some(r) = &self.running {
            let _ = r
                .client
                .close_point_in_time()
                .body(json!({"id": pit}))
                .send()
                .await;
        }
        Ok(())
    }
}
