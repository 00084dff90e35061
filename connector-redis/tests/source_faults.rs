//! Network faults and a server restart between the Redis Streams source and Redis, through
//! the testkit's fault proxy: a blackhole, connection resets every two seconds, 200 ms
//! latency, the server restarted, while the test keeps adding entries. The job keeps running
//! or restarts itself and receives every entry. Alone in this file: it restarts the server.

use rivus_connector_redis::RedisStreamsSource;
use rivus_sdk::schema::SchemaError;
use rivus_testkit::fault_proxy::FaultProxy;
use rivus_testkit::faults::{source_under_fault, Fault};
use rivus_testkit::services::{require, unique_name, Service};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_source_rides_out_network_faults_and_a_server_restart() {
    let Some(url) = require(Service::Redis) else {
        return;
    };
    let (proxy, proxied) = FaultProxy::in_front_of(&url).await.unwrap();
    for fault in Fault::table(Fault::blackhole_from_env(), "redis") {
        let stream = unique_name("source-faults");
        let source = {
            let (proxied, stream) = (proxied.clone(), stream.clone());
            move || {
                RedisStreamsSource::builder(&proxied)
                    .streams([stream.clone()])
                    .group("g")
                    .count(100)
                    .build(|e| {
                        let v = e
                            .field("v")
                            .ok_or_else(|| SchemaError::new("redis", e.id, "no field `v`"))?;
                        String::from_utf8_lossy(v)
                            .parse::<u64>()
                            .map_err(|err| SchemaError::new("redis", e.id, err))
                    })
                    .unwrap()
            }
        };
        let produce = {
            let (url, stream) = (url.clone(), stream.clone());
            move |from: u64, to: u64| {
                let (url, stream) = (url.clone(), stream.clone());
                async move {
                    // Retried while the server restarts.
                    loop {
                        let added = async {
                            let client = redis::Client::open(url.as_str()).ok()?;
                            let mut con = client.get_multiplexed_async_connection().await.ok()?;
                            let mut pipe = redis::pipe();
                            pipe.atomic();
                            for n in from..to {
                                pipe.cmd("XADD").arg(&stream).arg("*").arg("v").arg(n);
                            }
                            pipe.query_async::<()>(&mut con).await.ok()
                        };
                        if added.await.is_some() {
                            return;
                        }
                        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                    }
                }
            }
        };
        let r = source_under_fault("source-faults-redis", &proxy, fault, source, produce).await;
        proxy.clear();
        eprintln!(
            "{} | {} duplicates",
            r.run.report("redis streams source (exactly-once)"),
            r.duplicates
        );
    }
}
