//! An Elasticsearch or OpenSearch index read over plain HTTP by tests: its documents and its
//! count.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

/// An index read over plain HTTP.
#[derive(Clone)]
pub(crate) struct Index(Arc<rivus_connector_es::EsClient>);

impl Index {
    pub(crate) async fn connect(url: &str) -> Index {
        let config = rivus_connector_es::EsConfig::new(url);
        Index(Arc::new(
            rivus_connector_es::EsClient::connect(&config)
                .await
                .unwrap(),
        ))
    }

    pub(crate) async fn count(&self, index: &str) -> i64 {
        use reqwest::Method;
        let _ = self
            .0
            .json(Method::POST, &format!("/{index}/_refresh"), &[], None)
            .await;
        match self
            .0
            .json(Method::GET, &format!("/{index}/_count"), &[], None)
            .await
        {
            Ok((200, v)) => v["count"].as_i64().unwrap_or(0),
            _ => 0,
        }
    }

    /// Every document of `index` (after a refresh; none when it is missing) by id: the
    /// `fields` of each as text (strings as they are, other values as JSON, a missing field
    /// empty), paged in the order of `sort` (a field of every document).
    pub(crate) async fn docs(
        &self,
        index: &str,
        sort: &str,
        fields: &[&str],
    ) -> BTreeMap<String, Vec<String>> {
        use reqwest::Method;
        use serde_json::{json, Value};
        let _ = self
            .0
            .json(Method::POST, &format!("/{index}/_refresh"), &[], None)
            .await;
        let mut out = BTreeMap::new();
        let mut after: Option<Value> = None;
        loop {
            let mut order = serde_json::Map::new();
            order.insert(sort.to_owned(), json!("asc"));
            let mut body = json!({"size": 5000, "sort": [order], "query": {"match_all": {}}});
            if let Some(a) = &after {
                body["search_after"] = a.clone();
            }
            let Ok((200, v)) = self
                .0
                .json(Method::POST, &format!("/{index}/_search"), &[], Some(&body))
                .await
            else {
                return out;
            };
            let hits = v["hits"]["hits"].as_array().cloned().unwrap_or_default();
            if hits.is_empty() {
                return out;
            }
            for h in &hits {
                let s = &h["_source"];
                let text = |f: &str| match &s[f] {
                    Value::String(t) => t.clone(),
                    Value::Null => String::new(),
                    other => other.to_string(),
                };
                out.insert(
                    h["_id"].as_str().unwrap_or_default().to_owned(),
                    fields.iter().map(|f| text(f)).collect(),
                );
            }
            after = hits.last().map(|h| h["sort"].clone());
        }
    }

    pub(crate) async fn drop_index(&self, index: &str) {
        let _ = self
            .0
            .json(reqwest::Method::DELETE, &format!("/{index}"), &[], None)
            .await;
    }
}
