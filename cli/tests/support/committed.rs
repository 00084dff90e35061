//! What a `read_committed` reader finds in a topic: every id of the generator's JSON records,
//! with how often (the freeze and soak benches count exactly-once deliveries with it).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use rivus_testkit::services::{unique_name, Service};

/// Every id a `read_committed` reader finds in `topic`, with how often.
pub(crate) fn committed_ids(topic: &str) -> BTreeMap<u64, u32> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", Service::Kafka.url())
        .set("group.id", unique_name("freeze-check"))
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let md = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    let mut ends = BTreeMap::new();
    for p in md.topics()[0].partitions() {
        let (_, high) = consumer
            .fetch_watermarks(topic, p.id(), Duration::from_secs(10))
            .unwrap();
        tpl.add_partition_offset(topic, p.id(), Offset::Beginning)
            .unwrap();
        ends.insert(p.id(), high);
    }
    consumer.assign(&tpl).unwrap();
    let mut ids: BTreeMap<u64, u32> = BTreeMap::new();
    let mut done = BTreeMap::new();
    let t = Instant::now();
    while done.len() < ends.len() && t.elapsed() < Duration::from_secs(120) {
        let Some(m) = consumer.poll(Duration::from_millis(500)) else {
            // A partition read to its end (transaction markers fill the last offsets).
            for (p, high) in &ends {
                let pos = consumer
                    .position()
                    .ok()
                    .and_then(|l| l.find_partition(topic, *p)?.offset().to_raw());
                if pos.is_some_and(|o| o >= *high) || *high == 0 {
                    done.insert(*p, ());
                }
            }
            continue;
        };
        let m = m.unwrap();
        let v: serde_json::Value = serde_json::from_slice(m.payload().unwrap_or_default()).unwrap();
        *ids.entry(v["id"].as_u64().unwrap()).or_default() += 1;
        if m.offset() + 1 >= ends[&m.partition()] {
            done.insert(m.partition(), ());
        }
    }
    ids
}
