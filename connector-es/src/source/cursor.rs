//! Paging through one slice of an index, the way the cluster allows: a point in time with
//! `search_after` (Elasticsearch 7.10+ `_pit`, OpenSearch 2.4+ `_search/point_in_time`), or a
//! sliced scroll on versions without one. A point in time resumes after a position by
//! `search_after`; a scroll cannot, so a resumed scroll skips the hits that sort at or before
//! the position (the sort is total, so that is exactly what was read).

use std::cmp::Ordering;

use reqwest::Method;
use rivus_sdk::{Error, Result};
use serde_json::{json, Value};

use crate::client::{encode_segment, EsClient};
use crate::cluster::PitApi;

/// What a page request needs to know.
pub(crate) struct Query<'a> {
    pub index: &'a str,
    pub query: &'a Value,
    pub sort: &'a [Value],
    pub page_size: usize,
    pub keep_alive: &'a str,
    /// `(id, max)` of this reader's slice.
    pub slice: (usize, usize),
}

/// An open view of the index.
pub(crate) enum Cursor {
    /// A point in time (its id changes as pages come back).
    Pit { api: PitApi, id: String },
    /// A scroll: `None` until the first page opened it; hits at or before `resume` are
    /// skipped.
    Scroll {
        id: Option<String>,
        resume: Option<Vec<Value>>,
    },
}

fn err(what: &str, e: impl std::fmt::Display) -> Error {
    crate::error::es_err(format!("elasticsearch source: {what}"), e)
}

impl Cursor {
    /// Opens a view for the cluster of `client`; `after` is the position to resume after.
    pub(super) async fn open(
        client: &EsClient,
        q: &Query<'_>,
        after: Option<&Vec<Value>>,
    ) -> Result<Self> {
        let api = client.cluster().pit_api();
        let path = match api {
            PitApi::Elasticsearch => format!("/{}/_pit", encode_segment(q.index)),
            PitApi::OpenSearch => format!("/{}/_search/point_in_time", encode_segment(q.index)),
            PitApi::Scroll => {
                return Ok(Cursor::Scroll {
                    id: None,
                    resume: after.cloned(),
                })
            }
        };
        let v = client
            .json_ok(
                "elasticsearch source: opening a point in time",
                Method::POST,
                &path,
                &[("keep_alive", q.keep_alive)],
                None,
            )
            .await?;
        let id = v["id"]
            .as_str()
            .or_else(|| v["pit_id"].as_str())
            .ok_or_else(|| err("opening a point in time", format!("no id in {v}")))?;
        Ok(Cursor::Pit {
            api,
            id: id.to_owned(),
        })
    }

    /// The next page's hits after `after` (empty: the slice is read).
    pub(super) async fn next(
        &mut self,
        client: &EsClient,
        q: &Query<'_>,
        after: Option<&Vec<Value>>,
    ) -> Result<Vec<Value>> {
        match self {
            Cursor::Pit { id, .. } => {
                let mut body = json!({
                    "size": q.page_size,
                    "query": q.query,
                    "sort": q.sort,
                    "pit": {"id": id, "keep_alive": q.keep_alive},
                    "track_total_hits": false,
                });
                if q.slice.1 > 1 {
                    body["slice"] = json!({"id": q.slice.0, "max": q.slice.1});
                }
                if let Some(a) = after {
                    body["search_after"] = json!(a);
                }
                let (status, v) = client
                    .json(Method::POST, "/_search", &[], Some(&body))
                    .await?;
                if !(200..300).contains(&status) {
                    if q.slice.1 > 1 && unmapped_slice(&v) {
                        return Ok(Vec::new());
                    }
                    return Err(crate::error::status_err(
                        "elasticsearch source: search",
                        status,
                        format!("HTTP {status}: {}", crate::error::short(&v)),
                    ));
                }
                if let Some(new) = v["pit_id"].as_str() {
                    *id = new.to_owned();
                }
                Ok(hits(&v))
            }
            Cursor::Scroll { id, resume } => loop {
                let v = match id {
                    None => {
                        let mut body = json!({
                            "size": q.page_size,
                            "query": q.query,
                            "sort": q.sort,
                        });
                        if q.slice.1 > 1 {
                            body["slice"] = json!({"id": q.slice.0, "max": q.slice.1});
                        }
                        client
                            .json_ok(
                                "elasticsearch source: opening a scroll",
                                Method::POST,
                                &format!("/{}/_search", encode_segment(q.index)),
                                &[("scroll", q.keep_alive)],
                                Some(&body),
                            )
                            .await?
                    }
                    Some(s) => {
                        client
                            .json_ok(
                                "elasticsearch source: scroll",
                                Method::POST,
                                "/_search/scroll",
                                &[],
                                Some(&json!({"scroll": q.keep_alive, "scroll_id": s})),
                            )
                            .await?
                    }
                };
                if let Some(s) = v["_scroll_id"].as_str() {
                    *id = Some(s.to_owned());
                }
                let mut page = hits(&v);
                if page.is_empty() {
                    return Ok(page);
                }
                if let Some(pos) = resume.as_ref() {
                    let orders = orders(q.sort);
                    page.retain(|h| {
                        h["sort"]
                            .as_array()
                            .is_some_and(|s| compare(s, pos, &orders) == Ordering::Greater)
                    });
                    if page.is_empty() {
                        continue; // all of this page was read before
                    }
                    *resume = None;
                }
                return Ok(page);
            },
        }
    }

    /// Releases the view (best effort: it expires anyway).
    pub(super) async fn close(self, client: &EsClient) {
        let (path, body) = match self {
            Cursor::Pit {
                api: PitApi::Elasticsearch,
                id,
            } => ("/_pit", json!({ "id": id })),
            Cursor::Pit { id, .. } => ("/_search/point_in_time", json!({ "pit_id": [id] })),
            Cursor::Scroll { id: Some(id), .. } => {
                ("/_search/scroll", json!({ "scroll_id": [id] }))
            }
            Cursor::Scroll { id: None, .. } => return,
        };
        if let Err(e) = client.json(Method::DELETE, path, &[], Some(&body)).await {
            tracing::debug!(error = %e, "elasticsearch source: releasing the view failed");
        }
    }
}

/// OpenSearch refuses a sliced search of an index that has no mapping yet ("field _id not
/// found"): such an index has never held a document, so the slice is empty.
fn unmapped_slice(answer: &Value) -> bool {
    let causes = answer["error"]["root_cause"].as_array();
    causes.is_some_and(|c| {
        !c.is_empty()
            && c.iter().all(|c| {
                c["type"] == "illegal_argument_exception" && c["reason"] == "field _id not found"
            })
    })
}

fn hits(v: &Value) -> Vec<Value> {
    v["hits"]["hits"].as_array().cloned().unwrap_or_default()
}

/// For each sort key: descending or not. A key is `"field"`, `{"field": "desc"}` or
/// `{"field": {"order": "desc", ...}}`; `_score` defaults to descending, the rest ascending.
fn orders(sort: &[Value]) -> Vec<bool> {
    sort.iter()
        .map(|k| match k {
            Value::String(f) => f == "_score",
            Value::Object(o) => match o.iter().next() {
                Some((_, Value::String(order))) => order == "desc",
                Some((f, Value::Object(spec))) => match spec.get("order") {
                    Some(order) => order == "desc",
                    None => f == "_score",
                },
                _ => false,
            },
            _ => false,
        })
        .collect()
}

/// Compares two hits' sort values under `desc` orders: missing values (`null`) sort last
/// either way, as the engines do by default.
fn compare(a: &[Value], b: &[Value], desc: &[bool]) -> Ordering {
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let o = match (x, y) {
            (Value::Null, Value::Null) => Ordering::Equal,
            (Value::Null, _) => Ordering::Greater,
            (_, Value::Null) => Ordering::Less,
            (Value::Number(m), Value::Number(n)) => {
                let o = match (m.as_i64(), n.as_i64()) {
                    (Some(m), Some(n)) => m.cmp(&n),
                    _ => m
                        .as_f64()
                        .partial_cmp(&n.as_f64())
                        .unwrap_or(Ordering::Equal),
                };
                if desc.get(i) == Some(&true) {
                    o.reverse()
                } else {
                    o
                }
            }
            (Value::String(m), Value::String(n)) => {
                let o = m.cmp(n);
                if desc.get(i) == Some(&true) {
                    o.reverse()
                } else {
                    o
                }
            }
            (m, n) => m.to_string().cmp(&n.to_string()),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_positions_compare_in_the_sort_order() {
        let sort = [
            json!({"day": "desc"}),
            json!({"id": {"order": "asc", "unmapped_type": "keyword"}}),
            json!("_score"),
        ];
        let desc = orders(&sort);
        assert_eq!(desc, [true, false, true]);
        let pos = [json!(20), json!("b"), json!(1.5)];
        // A later day sorts first under `desc`.
        assert_eq!(
            compare(&[json!(21), json!("z"), json!(0)], &pos, &desc),
            Ordering::Less
        );
        assert_eq!(
            compare(&[json!(20), json!("c"), json!(0)], &pos, &desc),
            Ordering::Greater
        );
        assert_eq!(compare(&pos, &pos, &desc), Ordering::Equal);
        assert_eq!(
            compare(&[json!(20), json!("b"), json!(1.0)], &pos, &desc),
            Ordering::Greater
        );
        // Missing values come last.
        assert_eq!(
            compare(&[Value::Null, json!("a"), json!(9)], &pos, &desc),
            Ordering::Greater
        );
        assert_eq!(orders(&[json!("n")]), [false]);
    }
}
