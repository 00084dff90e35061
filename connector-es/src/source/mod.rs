//! [`EsSource`]: reads an index (optionally filtered by a query) as a bounded stream with
//! point-in-time + `search_after`, sliced across the parallel subtasks. The last sort values
//! read are checkpointed, so a restarted job continues after the last checkpointed document.

use std::sync::Arc;

use rivus_sdk::error_policy::{ErrorHandler, ErrorPolicy};
use rivus_sdk::prelude::*;
use rivus_sdk::schema::SchemaError;
use serde_json::{json, Value};

use crate::client::EsClient;
use crate::config::EsConfig;
use cursor::{Cursor, Query};

mod cursor;

type HitDecoder<T> = dyn Fn(&Value) -> Result<T, SchemaError> + Send + Sync;

/// What a [`EsSourceBuilder`] sets, shared by the subtasks of what it builds.
#[derive(Debug)]
struct Settings {
    config: EsConfig,
    index: String,
    query: Value,
    sort: Vec<Value>,
    /// `sort` was given (the default sorts on `_id`).
    sort_given: bool,
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
    rivus_sdk::setters! {
        /// Connection settings.
        /// The index (or pattern / alias) to read.
        index(index: impl Into<String>) => s.index = index.into();

        /// A query in the search DSL (default `match_all`).
        query(query: Value) => s.query;
    }

    /// The sort that orders the documents; it must be total and stable across restarts
    /// (default `[{"_id": {"order": "asc", "unmapped_type": "keyword"}}]`; on Elasticsearch 8+ sorting on `_id` is disabled — give a
    /// unique keyword field instead).
    pub fn sort(mut self, sort: Vec<Value>) -> Self {
        self.s.sort = sort;
        self.s.sort_given = true;
        self
    }

    rivus_sdk::setters! {
        /// Documents per search request (default 1000).
        page_size(n: usize) => s.page_size;

        /// What to do with hits the decoder rejects (default: fail).
        error_policy(p: ErrorPolicy) => s.policy;
    }

    /// Checks the settings; `decode` turns a hit (with `_id`, `_source`, `sort`) into a record.
    pub fn build<T: Send + 'static>(
        self,
        decode: impl Fn(&Value) -> Result<T, SchemaError> + Send + Sync + 'static,
    ) -> Result<EsSource<T>> {
        let s = self.s;
        s.config.validate()?;
        if s.index.trim().is_empty() {
            return Err(Error::config("index", "required"));
        }
        if s.page_size == 0 || s.page_size > 10_000 {
            return Err(Error::config("page_size", "between 1 and 10000"));
        }
        if s.sort.is_empty() {
            return Err(Error::config("sort", "at least one sort field"));
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
    client: EsClient,
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
                sort_given: false,
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

    fn query(&self) -> Result<Query<'_>> {
        let s = &self.settings;
        Ok(Query {
            index: &s.index,
            query: &s.query,
            sort: &s.sort,
            page_size: s.page_size,
            keep_alive: &s.keep_alive,
            slice: self.running()?.slice,
        })
    }
}

#[async_trait]
impl<T: Send + 'static> RichFunction for EsSource<T> {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        ctx.refuse_worker_mode("the Elasticsearch source (fixed slices)")?;
        let client = EsClient::connect(&self.settings.config).await?;
        if !self.settings.sort_given && !client.cluster().sorts_on_id() {
            return Err(Error::config(
                "sort",
                format!(
                    "{} does not sort on `_id` (indices.id_field_data.enabled is false): give a \
                     unique keyword field",
                    client.cluster()
                ),
            ));
        }
        self.running = Some(Running {
            client,
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
        let client = self.running()?.client.clone();
        let q = self.query()?;
        let start = ctx.state().search_after.clone();
        let mut cursor = match ctx
            .wait_for(Cursor::open(&client, &q, start.as_ref()))
            .await?
        {
            Some(c) => c?,
            None => return Ok(()),
        };
        loop {
            let after = ctx.state().search_after.clone();
            let hits = match ctx
                .wait_for(cursor.next(&client, &q, after.as_ref()))
                .await?
            {
                Some(p) => p?,
                None => break,
            };
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
        cursor.close(&client).await;
        Ok(())
    }
}
