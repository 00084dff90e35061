//! Key changes that leave fields behind. A CDC source sends a row whose key changed without the
//! values it could not read (large values stored out of line that the update did not touch),
//! naming the old key; the document at the old id still holds them. A move is resolved when
//! it is sent, after every request before it took effect: the old document is read, the
//! change's fields laid over it, the result indexed at the new id and the old id deleted. When
//! the old document is gone (a replay after the move was applied), the change updates the
//! new id partially: what an earlier attempt carried across stays.

use reqwest::Method;
use serde_json::Value;

use crate::client::{Body, EsClient};
use crate::request::{BulkItem, DocRequest, Move};

/// The requests that apply `m`, the old document read now.
pub(crate) async fn resolve(client: &EsClient, m: &Move) -> Result<Vec<BulkItem>, String> {
    let update = |doc: serde_json::Map<String, Value>| DocRequest::Update {
        index: m.index.clone(),
        id: m.to.clone(),
        routing: None,
        doc: Value::Object(doc),
        upsert: None,
    };
    let fields = m.doc.as_object().cloned().unwrap_or_default();
    if let Some(mut doc) = source(client, &m.index, &m.from).await? {
        doc.extend(fields);
        return Ok(vec![
            BulkItem::encode(&DocRequest::Index {
                index: m.index.clone(),
                id: Some(m.to.clone()),
                routing: None,
                doc: Value::Object(doc),
            }),
            BulkItem::encode(&DocRequest::Delete {
                index: m.index.clone(),
                id: m.from.clone(),
                routing: None,
            }),
        ]);
    }
    // Moved by an earlier attempt: the new document keeps what that attempt carried across.
    // Neither there (moved on or deleted later in the stream, whose replay follows): nothing
    // is written — a document made of the change alone would lack what the move keeps.
    if source(client, &m.index, &m.to).await?.is_some() {
        return Ok(vec![BulkItem::encode(&update(fields))]);
    }
    metrics::counter!("rivus_es_moves_without_document_total", "index" => m.index.clone())
        .increment(1);
    Ok(Vec::new())
}

/// The source of document `id` in `index`; `None` when there is no such document.
async fn source(
    client: &EsClient,
    index: &str,
    id: &str,
) -> Result<Option<serde_json::Map<String, Value>>, String> {
    let path = format!(
        "/{}/_doc/{}",
        rivus_aws::sigv4::uri_encode(index),
        rivus_aws::sigv4::uri_encode(id)
    );
    let response = client
        .send(Method::GET, &path, &[], Body::None)
        .await
        .map_err(|e| format!("reading {index}/{id} for a key change: {e}"))?;
    let status = response.status();
    match status.as_u16() {
        404 => Ok(None),
        s if (200..300).contains(&s) => {
            let body = response
                .bytes()
                .await
                .map_err(|e| format!("reading {index}/{id} for a key change: {e}"))?;
            let v: Value = serde_json::from_slice(&body)
                .map_err(|e| format!("reading {index}/{id} for a key change: {e}"))?;
            Ok(match v.get("_source") {
                Some(Value::Object(doc)) => Some(doc.clone()),
                _ => None,
            })
        }
        _ => Err(format!(
            "reading {index}/{id} for a key change: HTTP {status}"
        )),
    }
}
