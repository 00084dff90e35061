//! A bare HTTP/1.1 client for the tests of `rivus run --http` and `--metrics-addr` (no client
//! library needed).
#![allow(dead_code)] // each includer uses a part

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A port free a moment ago on 127.0.0.1.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One HTTP/1.1 request: (status code, body); `None` when nothing answers there or the answer
/// is not HTTP/1.
pub(crate) fn request(
    port: u16,
    method: &str,
    path: &str,
    token: Option<&str>,
) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).ok()?;
    let (head, body) = raw.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.") {
        return None;
    }
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, body.to_owned()))
}

/// The Prometheus text a job serves on `port` (`/metrics`), if it answers with 200.
pub(crate) fn metrics(port: u16) -> Option<String> {
    match request(port, "GET", "/metrics", None)? {
        (200, body) => Some(body),
        _ => None,
    }
}
