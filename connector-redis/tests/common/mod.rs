//! Test contexts shared by the Redis tests: the Streams source and the sink under the
//! testkit's suites, for any endpoint (one server, TLS, a cluster).
#![allow(dead_code)]

use redis::AsyncCommands;
use rivus_connector_redis::{
    RedisCommand, RedisConfig, RedisConnection, RedisSink, RedisStreamsSource,
};
use rivus_sdk::error_policy::ErrorPolicy;
use rivus_sdk::prelude::*;
use rivus_sdk::schema::{DeserializationSchema, SchemaError, StringSchema};
use rivus_testkit::services::unique_name;
use rivus_testkit::suite::{SinkExternal, SourceExternal};

pub(crate) async fn con(endpoint: &RedisConfig) -> RedisConnection {
    endpoint.open().await.unwrap()
}

/// Streams `<name>-k`, one per split, written with XADD field `v`.
pub(crate) struct StreamsCtx {
    pub endpoint: RedisConfig,
    pub streams: Vec<String>,
    pub group: String,
}

impl StreamsCtx {
    pub(crate) fn new(endpoint: impl Into<RedisConfig>) -> Self {
        StreamsCtx {
            endpoint: endpoint.into(),
            streams: vec![],
            group: String::new(),
        }
    }
}

#[async_trait]
impl SourceExternal for StreamsCtx {
    type Source = RedisStreamsSource<String>;

    async fn prepare(&mut self, splits: usize) -> Result<()> {
        self.streams = (0..splits).map(|_| unique_name("stream")).collect();
        self.group = unique_name("group");
        Ok(())
    }

    async fn write(&mut self, split: usize, records: &[String]) -> Result<()> {
        let mut c = con(&self.endpoint).await;
        let mut pipe = redis::pipe();
        for r in records {
            pipe.xadd(&self.streams[split], "*", &[("v", r.as_bytes())])
                .ignore();
        }
        let _: () = pipe.query_async(&mut c).await.unwrap();
        Ok(())
    }

    async fn write_bad(&mut self, split: usize) -> Result<bool> {
        let mut c = con(&self.endpoint).await;
        let _: String = c
            .xadd(&self.streams[split], "*", &[("v", &[0xffu8, 0xfe][..])])
            .await
            .unwrap();
        Ok(true)
    }

    fn create_source(&self, _: usize, _: usize, policy: ErrorPolicy) -> RedisStreamsSource<String> {
        RedisStreamsSource::builder(self.endpoint.clone())
            .streams(self.streams.clone())
            .group(&self.group)
            .error_policy(policy)
            .build(|e| {
                let pos = format!("{}#{}", e.stream, e.id);
                let v = e
                    .field("v")
                    .ok_or_else(|| SchemaError::new("redis", &pos, "no field `v`"))?;
                StringSchema.deserialize(v, &pos)
            })
            .unwrap()
    }

    fn to_test_record(&self, record: &String) -> String {
        record.clone()
    }
    /// Deliveries are acknowledged to the broker when a checkpoint completes.
    fn commits_positions(&self) -> bool {
        true
    }
}

/// The sink RPUSHes each record to one of `keys` lists (`<name>:<k>`, k from the record's
/// bytes): with several keys on a cluster, the batches span hash slots and nodes.
pub(crate) struct ListCtx {
    pub endpoint: RedisConfig,
    pub base: String,
    pub keys: usize,
}

impl ListCtx {
    pub(crate) fn new(endpoint: impl Into<RedisConfig>, keys: usize) -> Self {
        ListCtx {
            endpoint: endpoint.into(),
            base: String::new(),
            keys,
        }
    }
}

fn list_key(base: &str, keys: usize, record: &str) -> String {
    let k = record.bytes().map(usize::from).sum::<usize>() % keys;
    format!("{base}:{k}")
}

#[async_trait]
impl SinkExternal for ListCtx {
    type Record = String;
    type Sink = RedisSink<String>;

    async fn prepare(&mut self) -> Result<()> {
        self.base = unique_name("list");
        Ok(())
    }

    fn create_sink(&self, _: usize, _: usize, policy: ErrorPolicy) -> RedisSink<String> {
        let (base, keys) = (self.base.clone(), self.keys);
        RedisSink::builder(self.endpoint.clone())
            .batch_size(100)
            .error_policy(policy)
            .build(move |v: &String| {
                Ok(vec![RedisCommand::RPush {
                    key: list_key(&base, keys, v),
                    value: v.clone().into_bytes(),
                }])
            })
            .unwrap()
    }

    fn to_record(&self, test: &str) -> String {
        test.to_owned()
    }

    async fn read_back(&self) -> Result<Vec<String>> {
        let mut c = con(&self.endpoint).await;
        let mut all = Vec::new();
        for k in 0..self.keys {
            let v: Vec<String> = c.lrange(format!("{}:{k}", self.base), 0, -1).await.unwrap();
            all.extend(v);
        }
        Ok(all)
    }

    fn preserves_order(&self) -> bool {
        false // several subtasks push into the lists
    }
}

/// Subscribes a pub/sub source through `endpoint`, publishes through `plain_url` (after the
/// subscription is seen), and checks that 100 messages arrive in order and an undecodable one
/// is skipped; the source declares at-most-once.
pub(crate) async fn pubsub_roundtrip(endpoint: RedisConfig, plain_url: &str) {
    use rivus_connector_redis::RedisPubSubSource;
    let channel = unique_name("chan");
    let source = RedisPubSubSource::builder(endpoint)
        .channels([channel.clone()])
        .error_policy(ErrorPolicy::Skip)
        .build(|_, payload| StringSchema.deserialize(payload, &"pubsub"))
        .unwrap();
    assert_eq!(
        rivus_sdk::SourceFunction::delivery_guarantee(&source),
        DeliveryGuarantee::AtMostOnce
    );
    let sink = rivus_testkit::CollectingSink::<String>::new();
    let job = Pipeline::new("pubsub")
        .source("redis", 1, |_| source.clone())
        .sink("collect", 1, |i| sink.for_subtask(i))
        .unwrap();
    let handle = job.handle();
    let running = tokio::spawn(job.run());
    let mut c = redis::Client::open(plain_url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    // PUBLISH answers how many subscribers got it: wait for ours to be subscribed.
    rivus_testkit::wait::until(
        std::time::Duration::from_secs(30),
        || {
            let mut c = c.clone();
            let channel = channel.clone();
            async move {
                let n: i64 = c.publish(&channel, "probe").await.unwrap();
                n >= 1
            }
        },
        || "the source never subscribed",
    )
    .await;
    let _: i64 = c.publish(&channel, &[0xffu8, 0xfe][..]).await.unwrap(); // undecodable: skipped
    for i in 0..100 {
        let _: i64 = c.publish(&channel, format!("m{i:03}")).await.unwrap();
    }
    rivus_testkit::wait::until(
        std::time::Duration::from_secs(30),
        || async { sink.values().iter().filter(|v| v.starts_with('m')).count() >= 100 },
        || "messages did not arrive",
    )
    .await;
    handle.stop();
    running.await.unwrap().unwrap();
    let got: Vec<String> = sink
        .values()
        .into_iter()
        .filter(|v| v.starts_with('m'))
        .collect();
    assert_eq!(
        got,
        (0..100).map(|i| format!("m{i:03}")).collect::<Vec<_>>()
    );
}

/// XADDs entries `v = e<i>` (six digits) for `range` to `stream` on one server.
pub(crate) async fn add(url: &str, stream: &str, range: std::ops::Range<u32>) {
    let mut con = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let mut pipe = redis::pipe();
    for i in range {
        pipe.cmd("XADD")
            .arg(stream)
            .arg("*")
            .arg("v")
            .arg(format!("e{i:06}"))
            .ignore();
    }
    let _: () = pipe.query_async(&mut con).await.unwrap();
}
