//! How the CLI reaches the systems of a pipeline file: a Redis endpoint, Kafka client
//! properties and a SQL URL with its TLS files — shared by the job's sources and sinks,
//! `rivus check` and the run report, so they all connect the same way.

/// The URL of a `jdbc` source or sink with its `tls` files as the driver's parameters.
pub(crate) use rivus_connector_jdbc::tls::url_with_tls as jdbc_url;

/// The Redis endpoint of a `redis` sink or `redis-streams` source: one server, or a cluster
/// whose seed nodes `url` lists (commas), with TLS files.
pub(crate) fn redis_endpoint(
    url: &str,
    cluster: bool,
    tls: &rivus_core::tls::TlsFiles,
) -> rivus_connector_redis::Endpoint {
    use rivus_connector_redis::Endpoint;
    let e = if cluster {
        Endpoint::cluster(url.split(',').map(str::trim).filter(|u| !u.is_empty()))
    } else {
        Endpoint::new(url)
    };
    e.tls(tls.clone())
}

/// The Kafka client properties of a `kafka` source or sink: bootstrap servers, TLS, SASL and
/// raw librdkafka properties.
pub(crate) fn kafka_properties(
    bootstrap_servers: &str,
    tls: &Option<rivus_core::tls::TlsFiles>,
    sasl: &Option<rivus_connector_kafka::SaslAuth>,
    properties: &std::collections::BTreeMap<String, String>,
) -> rivus_connector_kafka::KafkaProperties {
    let mut p = rivus_connector_kafka::KafkaProperties::new(bootstrap_servers);
    for (k, v) in properties {
        p.set(k, v);
    }
    if let Some(t) = tls {
        p.set_tls(t.clone());
    }
    if let Some(s) = sasl {
        p.set_sasl(s.clone());
    }
    p
}
