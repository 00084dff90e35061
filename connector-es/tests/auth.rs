//! Credentials as managed clusters check them: the OpenSearch 3 node behind a front
//! (`auth_front.py`) that lets a request through only with the expected basic credentials, API
//! key, bearer token, or an AWS SigV4 signature that botocore — AWS's own implementation —
//! computes the same (Amazon OpenSearch Service is not reachable from tests). The sink writes
//! and the source reads through the front; wrong credentials fail the job as a refusal that
//! names the status and never the secret.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use rivus_connector_es::{AwsCredentials, EsAuth, EsConfig, EsSink, EsSource};
use rivus_testkit::services::{python_with, require, Service};
use serde_json::{json, Value};

/// The front, stopped when dropped.
struct Front {
    child: Child,
    url: String,
}

impl Front {
    fn start(python: &str, upstream: &str, args: &[&str]) -> Front {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/auth_front.py");
        let mut child = Command::new(python)
            .arg(script)
            .arg(upstream)
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting the auth front");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("port ")
            .unwrap_or_else(|| panic!("the front said `{line}`"));
        Front {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    /// `(verified, refused, reasons)` so far.
    async fn stats(&self) -> (u64, u64, Vec<Value>) {
        let v: Value = serde_json::from_slice(
            &reqwest::get(format!("{}/__front/stats", self.url))
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap(),
        )
        .unwrap();
        (
            v["verified"].as_u64().unwrap(),
            v["refused"].as_u64().unwrap(),
            v["reasons"].as_array().cloned().unwrap_or_default(),
        )
    }
}

impl Drop for Front {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes 300 documents and reads them back through the front with `auth`; then `wrong` is
/// refused at open, as a refusal naming `status`, without showing `secret`.
async fn round_trip(
    front: &Front,
    upstream: &str,
    auth: EsAuth,
    wrong: EsAuth,
    status: &str,
    secret: &str,
) {
    let mut config = EsConfig::new(&front.url);
    config.auth = auth;
    let index = common::write_numbers(&config, "auth", 300).await;
    common::refresh(upstream, &index).await;
    let source = EsSource::builder(config.clone())
        .index(&index)
        .page_size(50)
        .build(|hit| Ok(hit["_source"]["n"].as_u64().unwrap_or(u64::MAX)))
        .unwrap();
    let mut got = rivus_testkit::read_all("auth-source", source, 2).await;
    got.sort();
    assert_eq!(got, (0..300).collect::<Vec<u64>>());
    let (verified, refused, reasons) = front.stats().await;
    // GET / per subtask, 3 bulks, point in time, pages, releases.
    assert!(verified >= 3 + 2 + 6, "{verified} requests verified");
    assert_eq!(refused, 0, "{reasons:?}");

    config.auth = wrong;
    let sink = EsSink::builder(config)
        .build(|n: &u64, idx| {
            idx.index("never", Some(n.to_string()), json!({ "n": n }));
            Ok(())
        })
        .unwrap();
    let err = rivus_testkit::run_sequence_into("auth-wrong", 1, 1, |_| sink.clone())
        .await
        .unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(text.contains(status), "{text}");
    assert!(!text.contains(secret), "{text}");
    // A refusal, which no restart can fix.
    assert!(text.contains("Refused"), "{text}");
    assert!(front.stats().await.1 >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opensearch_behind_basic_api_key_and_bearer_checks() {
    let (Some(url), Some(python)) = (require(Service::OpenSearch3), python_with("botocore.auth"))
    else {
        return;
    };
    let front = Front::start(&python, &url, &["basic", "writer", "pw-basic-1"]);
    let basic = |password: &str| EsAuth::Basic {
        user: "writer".into(),
        password: password.into(),
    };
    round_trip(
        &front,
        &url,
        basic("pw-basic-1"),
        basic("pw-wrong-1"),
        "401",
        "pw-wrong-1",
    )
    .await;

    let front = Front::start(&python, &url, &["apikey", "key-id", "key-secret-2"]);
    let key = |secret: &str| EsAuth::ApiKey {
        id: "key-id".into(),
        key: secret.into(),
    };
    round_trip(
        &front,
        &url,
        key("key-secret-2"),
        key("key-wrong-2"),
        "401",
        "key-wrong-2",
    )
    .await;

    let front = Front::start(&python, &url, &["bearer", "token-3"]);
    round_trip(
        &front,
        &url,
        EsAuth::Bearer("token-3".into()),
        EsAuth::Bearer("token-wrong-3".into()),
        "401",
        "token-wrong-3",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opensearch_behind_a_front_that_checks_sigv4_with_botocore() {
    let (Some(url), Some(python)) = (require(Service::OpenSearch3), python_with("botocore.auth"))
    else {
        return;
    };
    let (access, secret, token) = (
        "AKIDRIVUSTEST",
        "sigv4-secret/K7MDENG+bP",
        "session-token-4",
    );
    let front = Front::start(
        &python,
        &url,
        &["sigv4", "eu-west-1", "es", access, secret, token],
    );
    let aws = |secret: &str| EsAuth::AwsSigV4 {
        region: "eu-west-1".into(),
        service: "es".into(),
        credentials: AwsCredentials {
            access_key: access.into(),
            secret_key: secret.into(),
            session_token: Some(token.into()),
        },
    };
    round_trip(
        &front,
        &url,
        aws(secret),
        aws("sigv4-wrong-secret"),
        "403",
        "sigv4-wrong-secret",
    )
    .await;
    let (_, _, reasons) = front.stats().await;
    assert!(
        reasons
            .iter()
            .any(|r| r.as_str().unwrap().contains("signature we calculated")),
        "{reasons:?}"
    );
}
