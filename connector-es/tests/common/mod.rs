//! What the Elasticsearch tests share: a client of the node `dev/services` started, index
//! creation, loading numbered documents through the sink, and reading values back.

#![allow(dead_code)] // each test file uses its own part

use reqwest::Method;
use rivus_connector_es::{DocRequest, EsClient, EsConfig, EsSink};
use rivus_sdk::schema::SchemaError;
use rivus_testkit::run_sequence_into;
use serde_json::{json, Value};

/// Runs the async test function `$name(Service)` against each search server of
/// `dev/services`, as tests `$name::elasticsearch`, `$name::opensearch2` and
/// `$name::opensearch3`.
#[macro_export]
macro_rules! on_every_server {
    ($name:ident) => {
        mod $name {
            use rivus_testkit::services::Service;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn elasticsearch() {
                super::$name(Service::Elasticsearch).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn opensearch2() {
                super::$name(Service::OpenSearch2).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn opensearch3() {
                super::$name(Service::OpenSearch3).await
            }
        }
    };
}

/// A client of the server at `url` (which it asks what it is).
pub(crate) async fn client(url: &str) -> EsClient {
    EsClient::connect(&EsConfig::new(url)).await.unwrap()
}

/// `method path` with `body` on the server at `url`; the answer, which must be a success.
pub(crate) async fn call(url: &str, method: Method, path: &str, body: Option<Value>) -> Value {
    client(url)
        .await
        .json_ok("test", method, path, &[], body.as_ref())
        .await
        .unwrap()
}

pub(crate) async fn create_index(url: &str, index: &str, body: Value) {
    call(url, Method::PUT, &format!("/{index}"), Some(body)).await;
}

/// Writes `{"n": n}` with id `n` for `n` in `0..count` into a new index (its name from
/// `prefix`) through `config`, in bulks of 100: the index.
pub(crate) async fn write_numbers(config: &EsConfig, prefix: &str, count: u64) -> String {
    let index = rivus_testkit::services::unique_name(prefix);
    let ix = index.clone();
    let sink = EsSink::builder(config.clone())
        .batch_size(100)
        .build(move |n: &u64, idx| {
            idx.index(&ix, Some(n.to_string()), json!({ "n": n }));
            Ok(())
        })
        .unwrap();
    run_sequence_into(prefix, count, 1, |_| sink.clone())
        .await
        .unwrap();
    index
}

/// Indexes `{"v": n}` with id `n` — except record 77, which carries a string where the
/// mapping of the test indexes wants a number.
pub(crate) fn index_number(idx: &mut rivus_connector_es::RequestIndexer, index: &str, n: u64) {
    let v = if n == 77 {
        json!("seventy-seven")
    } else {
        json!(n)
    };
    idx.add(DocRequest::Index {
        index: index.to_owned(),
        id: Some(n.to_string()),
        routing: None,
        doc: json!({ "v": v }),
    });
}

/// The numeric `v` fields in `index`, sorted.
pub(crate) async fn sorted_numbers(url: &str, index: &str) -> Vec<u64> {
    let mut got: Vec<u64> = all_values(url, index)
        .await
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    got.sort();
    got
}

/// Makes everything indexed in `index` so far visible to searches.
pub(crate) async fn refresh(url: &str, index: &str) {
    call(url, Method::POST, &format!("/{index}/_refresh"), None).await;
}

/// Documents in `index` after a refresh; `None` while the server does not answer (0 before
/// the first bulk created the index).
pub(crate) async fn try_count(url: &str, index: &str) -> Option<u64> {
    let c = EsClient::connect(&EsConfig::new(url)).await.ok()?;
    c.json(Method::POST, &format!("/{index}/_refresh"), &[], None)
        .await
        .ok()?;
    let (status, v) = c
        .json(Method::GET, &format!("/{index}/_count"), &[], None)
        .await
        .ok()?;
    match status {
        404 => Some(0),
        200 => v["count"].as_u64(),
        _ => None,
    }
}

/// Every document's `v` field in `index`, after a refresh.
pub(crate) async fn all_values(url: &str, index: &str) -> Vec<Value> {
    refresh(url, index).await;
    let mut out = Vec::new();
    let mut after: Option<Value> = None;
    loop {
        let mut body = json!({"size": 5000, "sort": [{"_id": "asc"}], "query": {"match_all": {}}});
        if let Some(a) = &after {
            body["search_after"] = a.clone();
        }
        let r = call(url, Method::POST, &format!("/{index}/_search"), Some(body)).await;
        let hits = r["hits"]["hits"].as_array().cloned().unwrap_or_default();
        if hits.is_empty() {
            return out;
        }
        after = hits.last().map(|h| h["sort"].clone());
        out.extend(hits.into_iter().map(|h| h["_source"]["v"].clone()));
    }
}

/// Creates `index` holding documents `{"n": i, "even": i % 2 == 0}` with ids `d000000`...
pub(crate) async fn load(url: &str, index: &str, n: u64) {
    create_index(
        url,
        index,
        json!({"settings": {"number_of_shards": 3, "number_of_replicas": 0}}),
    )
    .await;
    // Loaded through the sink, which resends what the dev node's tiny write queue rejects.
    let ix = index.to_owned();
    let sink = EsSink::builder(url)
        .build(move |i: &u64, idx| {
            idx.index(
                &ix,
                Some(format!("d{i:06}")),
                json!({"n": i, "even": i.is_multiple_of(2)}),
            );
            Ok(())
        })
        .unwrap();
    run_sequence_into("load", n, 1, |_| sink.clone())
        .await
        .unwrap();
    refresh(url, index).await;
}

pub(crate) fn n_of(hit: &Value) -> std::result::Result<u64, SchemaError> {
    hit["_source"]["n"].as_u64().ok_or_else(|| {
        SchemaError::new("elasticsearch", hit["_id"].as_str().unwrap_or("?"), "no n")
    })
}
