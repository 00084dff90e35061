//! `rivus run --http ADDR`: the status API and the live dashboard of a running job.
//!
//! - `GET /` — the dashboard (one page, its script and styles embedded in the binary);
//! - `GET /api/status` — the job's state, totals, stages, checkpoints, lag, failures (JSON);
//! - `GET /api/checkpoints` — the recent checkpoints (JSON);
//! - `GET /metrics` — Prometheus text, as `--metrics-addr` serves it;
//! - `POST /api/stop` — a graceful stop (drain, final checkpoint), with the token only.
//!
//! Safety: the server binds to loopback unless told otherwise, and a non-loopback address is
//! refused without a token (`--http-token` or `RIVUS_HTTP_TOKEN`). With a token every request
//! must carry it (`Authorization: Bearer TOKEN`, or `?token=TOKEN` to open the page in a
//! browser). Everything is read-only except `/api/stop`, which always needs the token.

mod prom;
mod snapshot;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};

pub(crate) use snapshot::{JobState, Snapshot};

const DASHBOARD: &str = include_str!("dashboard.html");

/// The access token. Never printed: `Debug` shows its length only.
#[derive(Clone)]
pub(crate) struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Token(<{} characters>)", self.0.len())
    }
}

impl Token {
    /// Compares in time independent of where the strings differ.
    fn matches(&self, given: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), given.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

/// Checks `--http` and its token before anything starts: a non-loopback address needs one;
/// an empty token is no token.
pub(crate) fn check(addr: SocketAddr, token: Option<String>) -> Result<Option<Token>, String> {
    let token = token.filter(|t| !t.is_empty()).map(Token);
    if !addr.ip().is_loopback() && token.is_none() {
        return Err(format!(
            "--http {addr}: a non-loopback address needs an access token \
             (--http-token TOKEN or RIVUS_HTTP_TOKEN); or bind to 127.0.0.1"
        ));
    }
    Ok(token)
}

/// What the handlers share.
struct Server {
    snapshot: Arc<Snapshot>,
    token: Option<Token>,
    stop: rivus_sdk::JobHandle,
}

/// Binds `addr` (an error names it) and serves until the process ends.
pub(crate) async fn serve(
    addr: SocketAddr,
    token: Option<Token>,
    snapshot: Arc<Snapshot>,
    stop: rivus_sdk::JobHandle,
) -> Result<tokio::task::JoinHandle<()>, String> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("--http {addr}: {e}"))?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("--http {addr}: {e}"))?;
    tracing::info!(address = %bound, token = token.is_some(), "dashboard and status API listening");
    let server = Arc::new(Server {
        snapshot,
        token,
        stop,
    });
    Ok(tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let server = Arc::clone(&server);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let server = Arc::clone(&server);
                    async move { Ok::<_, Infallible>(server.route(req).await) }
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    }))
}

fn respond(
    status: StatusCode,
    content_type: &str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .header("cache-control", "no-store")
        .header("x-content-type-options", "nosniff")
        .body(Full::new(body.into()))
        .expect("a valid response")
}

fn json(status: StatusCode, v: &serde_json::Value) -> Response<Full<Bytes>> {
    respond(status, "application/json", v.to_string())
}

fn error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    json(status, &serde_json::json!({ "error": message }))
}

/// The token a request carries: the bearer header, else `?token=`.
fn token_of(req: &Request<Incoming>) -> Option<String> {
    if let Some(h) = req.headers().get("authorization") {
        return h
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::to_owned);
    }
    req.uri().query().and_then(|q| {
        q.split('&')
            .find_map(|kv| kv.strip_prefix("token="))
            .map(str::to_owned)
    })
}

impl Server {
    fn authorized(&self, req: &Request<Incoming>) -> bool {
        match &self.token {
            None => true,
            Some(t) => token_of(req).is_some_and(|g| t.matches(&g)),
        }
    }

    async fn route(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        if !self.authorized(&req) {
            return error(
                StatusCode::UNAUTHORIZED,
                "this server needs its access token (Authorization: Bearer TOKEN, or ?token=TOKEN)",
            );
        }
        let path = req.uri().path().to_owned();
        match (req.method().clone(), path.as_str()) {
            (Method::GET, "/") => respond(StatusCode::OK, "text/html; charset=utf-8", DASHBOARD),
            (Method::GET, "/api/status") => json(StatusCode::OK, &self.snapshot.status()),
            (Method::GET, "/api/checkpoints") => json(StatusCode::OK, &self.snapshot.checkpoints()),
            (Method::GET, "/metrics") => respond(
                StatusCode::OK,
                "text/plain; version=0.0.4",
                self.snapshot.metrics_text(),
            ),
            (Method::POST, "/api/stop") => {
                if self.token.is_none() {
                    return error(
                        StatusCode::FORBIDDEN,
                        "stopping needs an access token: start the job with --http-token",
                    );
                }
                // The body is not used; read it so the connection stays usable.
                let _ = req.into_body().collect().await;
                tracing::info!("graceful stop asked for through the status API");
                self.stop.stop();
                json(
                    StatusCode::ACCEPTED,
                    &serde_json::json!({ "stopping": true }),
                )
            }
            (_, "/" | "/api/status" | "/api/checkpoints" | "/metrics" | "/api/stop") => {
                error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
            }
            _ => error(StatusCode::NOT_FOUND, &format!("no such path: {path}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_non_loopback_address_needs_a_token_and_the_token_never_prints() {
        let lo: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        assert!(check(lo, None).unwrap().is_none());
        let e = check(any, Some(String::new())).unwrap_err();
        assert!(
            e.contains("--http 0.0.0.0:8080") && e.contains("RIVUS_HTTP_TOKEN"),
            "{e}"
        );
        let t = check(any, Some("s3cret-token".into())).unwrap().unwrap();
        assert!(!format!("{t:?}").contains("s3cret"));
        assert!(t.matches("s3cret-token"));
        assert!(!t.matches("s3cret-tokeN") && !t.matches("s3cret"));
    }
}
