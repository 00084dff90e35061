//! The sink and the source over HTTPS with a client certificate: the dev node behind a TLS
//! front (testkit's `TlsFront`: the dev server certificate, client certificates required).

mod common;

use rivus_connector_es::{EsConfig, EsSink, EsSource};
use rivus_sdk::tls::TlsFiles;
use rivus_testkit::services::{require, tls_dir, Service};
use rivus_testkit::tls_front::TlsFront;
use serde_json::json;

fn host_port(url: &str) -> String {
    url.trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sink_and_source_work_over_https_with_a_client_certificate() {
    let Some(url) = require(Service::Elasticsearch) else {
        return;
    };
    let d = tls_dir();
    let front = TlsFront::start(&host_port(&url), &d).await.unwrap();
    let https = format!("https://{}", front.addr());
    let mut config = EsConfig::new(&https);
    config.tls = TlsFiles {
        ca_file: Some(d.join("ca.crt")),
        client_cert: Some(d.join("client.crt")),
        client_key: Some(d.join("client.key")),
    };
    let index = common::write_numbers(&config, "tls", 500).await;
    assert!(front.verified() >= 1, "the sink came through the TLS front");
    // Make what was written searchable (on the plain port; reading goes through TLS again).
    common::refresh(&url, &index).await;
    let before_read = front.verified();

    let source = EsSource::builder(config.clone())
        .index(&index)
        .build(|hit| Ok(hit["_source"]["n"].as_u64().unwrap_or(u64::MAX)))
        .unwrap();
    let mut got = rivus_testkit::read_all("es-tls-read", source, 1).await;
    got.sort();
    assert_eq!(got, (0..500).collect::<Vec<u64>>());
    assert!(
        front.verified() > before_read,
        "the source came through the TLS front"
    );

    // Without the client certificate the front refuses the handshake; the job fails at open,
    // when the sink asks the cluster what it is.
    let before = front.refused();
    let mut no_cert = config.clone();
    no_cert.tls.client_cert = None;
    no_cert.tls.client_key = None;
    let sink = EsSink::builder(no_cert)
        .bulk(rivus_sdk::bulk::BulkConfig {
            backoff: rivus_sdk::backoff::BackoffPolicy::None,
            ..EsSink::default_bulk()
        })
        .build(move |n: &u64, idx| {
            idx.index("never", Some(n.to_string()), json!({ "n": n }));
            Ok(())
        })
        .unwrap();
    let err = rivus_testkit::run_sequence_into("es-tls-refused", 1, 1, |_| sink.clone())
        .await
        .unwrap_err();
    // The front counts the refusal when its side of the handshake ends, which may be just
    // after the client has given up.
    rivus_testkit::wait::until(
        std::time::Duration::from_secs(10),
        || async { front.refused() > before },
        || "the front refused no handshake",
    )
    .await;
    assert!(err.to_string().contains("search cluster: GET /"), "{err}");
}

#[test]
fn a_client_certificate_with_basic_auth_or_on_http_is_refused() {
    let d = tls_dir();
    let mut c = EsConfig::new("http://127.0.0.1:9200");
    c.tls.ca_file = Some(d.join("ca.crt"));
    let err = c.validate().unwrap_err().to_string();
    assert!(err.contains("`tls`"), "{err}");
    c.url = "https://127.0.0.1:9200".into();
    c.tls.ca_file = Some("/no/such/ca.pem".into());
    let err = c.validate().unwrap_err().to_string();
    assert!(err.contains("`tls.ca_file`"), "{err}");
    c.tls = TlsFiles {
        ca_file: None,
        client_cert: Some(d.join("client.crt")),
        client_key: Some(d.join("client.key")),
    };
    c.auth = rivus_connector_es::EsAuth::Basic {
        user: "elastic".into(),
        password: "hunter2".into(),
    };
    let err = c.validate().unwrap_err().to_string();
    assert!(err.contains("`auth`"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
}
