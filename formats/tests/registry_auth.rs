//! Credentials to the schema registry, against the real registry behind a front that demands
//! them (the dev registry itself runs without authentication): basic authentication and a
//! bearer token are sent as headers and let through; wrong ones are refused with an error that
//! says so, is not retried, and never shows the secret. A registry that does not answer is a
//! retryable error.

use std::sync::Arc;

use rivus_formats::{Codec, Format, Role};
use rivus_testkit::services::{require, unique_name, Service};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// An HTTP front on a free port that answers 401 unless a request's `Authorization` header is
/// one of `accepted`, and otherwise passes the connection through to `upstream`.
async fn front(upstream: String, accepted: Vec<String>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(accepted);
    tokio::spawn(async move {
        loop {
            let Ok((mut client, _)) = listener.accept().await else {
                return;
            };
            let (upstream, accepted) = (upstream.clone(), Arc::clone(&accepted));
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match client.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&head).to_lowercase();
                let ok = accepted
                    .iter()
                    .any(|a| text.contains(&format!("authorization: {}\r\n", a.to_lowercase())));
                if !ok {
                    let body = r#"{"error_code":40101,"message":"Unauthorized"}"#;
                    let resp = format!(
                        "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = client.write_all(resp.as_bytes()).await;
                    return;
                }
                let Ok(mut server) = TcpStream::connect(&upstream).await else {
                    return;
                };
                if server.write_all(&head).await.is_err() {
                    return;
                }
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            });
        }
    });
    addr.to_string()
}

fn codec(registry: serde_json::Value) -> Codec {
    let f: Format = serde_json::from_value(json!({
        "type": "avro", "registry": registry,
        "schema": r#"{"type":"record","name":"A","fields":[{"name":"x","type":"long"}]}"#
    }))
    .unwrap();
    Codec::new(&f, "sink.format").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basic_and_bearer_credentials_reach_the_registry_and_wrong_ones_are_refused() {
    let Some(registry) = require(Service::SchemaRegistry) else {
        return;
    };
    let (host_port, path) = {
        let rest = registry.trim_start_matches("http://");
        let (hp, p) = rest.split_once('/').unwrap_or((rest, ""));
        (hp.to_owned(), format!("/{p}"))
    };
    use base64::Engine as _;
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("rivus:s3cret-pw")
    );
    let addr = front(host_port, vec![basic, "Bearer t0ken-xyz".into()]).await;
    let url = format!("http://{addr}{path}");
    let topic = unique_name("auth");

    for creds in [
        json!({"url": url, "username": "rivus", "password": "s3cret-pw"}),
        json!({"url": url, "token": "t0ken-xyz"}),
    ] {
        let c = codec(creds);
        c.open_writer(&topic, Role::Value).await.unwrap();
        let mut out = Vec::new();
        c.encode(&json!({"x": 5}), &mut out).unwrap();
        // A second codec reads it: one schema request through the front.
        let reader = codec(json!({"url": url, "token": "t0ken-xyz"}));
        assert_eq!(
            reader.decode(&out, &"t/0@0").await.unwrap(),
            json!({"x": 5})
        );
    }

    for (creds, secret) in [
        (
            json!({"url": url, "username": "rivus", "password": "wrong-pw-123"}),
            "wrong-pw-123",
        ),
        (
            json!({"url": url, "token": "stolen-tok-456"}),
            "stolen-tok-456",
        ),
    ] {
        let e = codec(creds)
            .open_writer(&topic, Role::Value)
            .await
            .unwrap_err();
        let shown = format!("{e} {e:?}");
        assert!(!e.is_retryable(), "a refusal is not retried: {shown}");
        assert!(shown.contains("401"), "{shown}");
        assert!(!shown.contains(secret), "the secret leaked: {shown}");
    }
}

#[tokio::test]
async fn a_registry_that_does_not_answer_is_a_retryable_error() {
    // A port nothing listens on (bound, then closed).
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}");
    let c = codec(json!({ "url": url }));
    let started = std::time::Instant::now();
    let e = c.open_writer("t", Role::Value).await.unwrap_err();
    assert!(e.is_retryable(), "{e}");
    assert!(e.to_string().contains(&url), "{e}");
    // Retried with backoff before giving up (core's default: about 15 s).
    assert!(
        started.elapsed() > std::time::Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // Reading: a record is not at fault, so the error is transient (the task retries).
    let mut framed = vec![0, 0, 0, 0, 7];
    framed.extend_from_slice(&[10]);
    let e = c.decode(&framed, &"t/0@1").await.unwrap_err();
    assert!(e.transient, "{e}");
}
