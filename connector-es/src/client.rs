//! [`EsClient`]: the HTTP client every request of the sink and the source goes through — one
//! node URL, TLS, the credentials (signed per request for AWS), and the media types of the
//! cluster it talks to, learnt once at connect. It speaks plain HTTP on `reqwest` rather than
//! through a client library: the request bodies are built here anyway (bulk lines, search
//! bodies), OpenSearch and Elasticsearch 8+ want different media types, and a SigV4 signature
//! covers the exact body bytes.

use bytes::Bytes;
use reqwest::{Method, Response};
use rivus_aws::sigv4::uri_encode;
use rivus_sdk::{Error, Result};
use serde_json::Value;

use crate::auth::{EsAuth, Outgoing};
use crate::cluster::Cluster;
use crate::config::EsConfig;
use crate::error::{es_err, short, status_err};

/// A client of one node of a cluster whose engine and version are known.
#[derive(Clone)]
pub struct EsClient {
    http: reqwest::Client,
    /// `scheme://host:port` without a trailing slash, plus any path prefix of the URL.
    base: String,
    /// `host[:port]`, as the `Host` header says it.
    host: String,
    /// The URL's own path prefix (a proxy's mount point), without a trailing slash.
    prefix: String,
    auth: EsAuth,
    cluster: Cluster,
}

impl std::fmt::Debug for EsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EsClient")
            .field("base", &self.base)
            .field("auth", &self.auth)
            .field("cluster", &self.cluster)
            .finish()
    }
}

/// A request body.
pub(crate) enum Body {
    None,
    /// A JSON document.
    Json(Vec<u8>),
    /// `_bulk` lines.
    NdJson(Bytes),
}

impl EsClient {
    /// Connects with `config`: builds the HTTP client and learns the cluster (from
    /// `config.cluster`, or by asking `GET /`). `path` prefixes field names in errors.
    pub async fn connect(config: &EsConfig) -> Result<EsClient> {
        let url = config.validate()?;
        let mut b = reqwest::Client::builder()
            .timeout(config.timeout)
            .no_proxy()
            .use_rustls_tls();
        if let Some((mut cert, key)) = config.tls.read_client()? {
            cert.push(b'\n');
            cert.extend_from_slice(&key);
            let id = reqwest::Identity::from_pem(&cert)
                .map_err(|e| Error::config("tls.client_cert", e))?;
            b = b.identity(id);
        }
        if config.insecure {
            b = b.danger_accept_invalid_certs(true);
        } else if let Some(pem) = config.tls.read_ca()? {
            let cert = reqwest::Certificate::from_pem(&pem)
                .map_err(|e| Error::config("tls.ca_file", e))?;
            b = b.tls_built_in_root_certs(false).add_root_certificate(cert);
        }
        let http = b
            .build()
            .map_err(|e| es_err("search cluster: building the HTTP client", e))?;
        let host = match url.port() {
            Some(p) => format!("{}:{p}", url.host_str().unwrap_or_default()),
            None => url.host_str().unwrap_or_default().to_owned(),
        };
        let prefix = url.path().trim_end_matches('/').to_owned();
        let mut client = EsClient {
            http,
            base: format!("{}://{host}", url.scheme()),
            host,
            prefix,
            auth: config.auth.clone(),
            // Until `GET /` says otherwise: plain JSON, which every version accepts for it.
            cluster: config.cluster.unwrap_or(Cluster::opensearch(2, 0)),
        };
        match config.cluster {
            Some(c) => c.check()?,
            None => client.cluster = client.detect().await?,
        }
        Ok(client)
    }

    /// What `GET /` says the cluster is.
    async fn detect(&self) -> Result<Cluster> {
        let (status, info) = self.json(Method::GET, "/", &[], None).await?;
        if !(200..300).contains(&status) {
            return Err(status_err(
                "search cluster: `GET /`",
                status,
                format!("HTTP {status}: {}", short(&info)),
            ));
        }
        Cluster::from_info(&info)
    }

    /// The engine and version this client talks to.
    pub fn cluster(&self) -> Cluster {
        self.cluster
    }

    /// Sends a request: `path` starts with `/` and has its segments encoded already (see
    /// [`encode_segment`]); `query` is not encoded.
    pub(crate) async fn send(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        body: Body,
    ) -> std::result::Result<Response, reqwest::Error> {
        let full_path = format!("{}{path}", self.prefix);
        let query_text = query
            .iter()
            .map(|(k, v)| format!("{}={}", uri_encode(k), uri_encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        let mut url = format!("{}{full_path}", self.base);
        if !query_text.is_empty() {
            url.push('?');
            url.push_str(&query_text);
        }
        let (bytes, content_type): (Bytes, Option<&str>) = match body {
            Body::None => (Bytes::new(), None),
            Body::Json(v) => (Bytes::from(v), Some(self.cluster.json_type())),
            Body::NdJson(b) => (b, Some(self.cluster.ndjson_type())),
        };
        let auth = self.auth.headers(&Outgoing {
            method: method.as_str(),
            host: &self.host,
            path: &full_path,
            query,
            body: &bytes,
        });
        let mut req = self
            .http
            .request(method, url)
            .header("accept", self.cluster.json_type());
        if let Some(t) = content_type {
            req = req.header("content-type", t).body(bytes);
        }
        for (k, v) in auth {
            req = req.header(k, v);
        }
        req.send().await
    }

    /// Sends `body` (JSON) and reads the JSON answer: `(status, document)`; an answer that is
    /// not JSON becomes `{"text": ...}`. Errors only when no answer came.
    pub async fn json(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<(u16, Value)> {
        let body = match body {
            Some(v) => Body::Json(serde_json::to_vec(v).expect("JSON values serialize")),
            None => Body::None,
        };
        let what = format!("search cluster: {method} {path}");
        let r = self
            .send(method, path, query, body)
            .await
            .map_err(|e| es_err(what.clone(), e))?;
        let status = r.status().as_u16();
        let text = r.bytes().await.map_err(|e| es_err(what, e))?;
        let v = serde_json::from_slice(&text).unwrap_or_else(
            |_| serde_json::json!({ "text": String::from_utf8_lossy(&text).chars().take(500).collect::<String>() }),
        );
        Ok((status, v))
    }

    /// Like [`json`](Self::json), but an error status is an error naming `context`.
    pub async fn json_ok(
        &self,
        context: &str,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<Value> {
        let (status, v) = self.json(method, path, query, body).await?;
        if (200..300).contains(&status) {
            return Ok(v);
        }
        Err(status_err(
            context,
            status,
            format!("HTTP {status}: {}", short(&v)),
        ))
    }
}

/// One path segment (an index name, a document id) encoded for a URL.
pub fn encode_segment(s: &str) -> String {
    // `*` and `,` stay as they are: index patterns and lists are path syntax here.
    uri_encode(s).replace("%2A", "*").replace("%2C", ",")
}
