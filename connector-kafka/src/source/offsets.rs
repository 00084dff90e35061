//! Where each partition starts and, for a bounded source, where it stops.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::consumer::Consumer;

use super::lag::SourceConsumer;
use rdkafka::{Offset, TopicPartitionList};
use rivus_sdk::{Error, Result};

use super::group_assignment::parse_tp;
use super::subscription::Subscription;
use super::KafkaSourceState;
use crate::kafka_err;

/// Where a partition without checkpointed state starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartOffsets {
    /// The first available offset.
    Earliest,
    /// The end: only records produced from now on.
    Latest,
    /// The group's committed offset; without one, earliest (`true`) or latest.
    Committed {
        /// Where to start when the group has no committed offset for a partition.
        reset_to_earliest: bool,
    },
    /// The first offset whose timestamp is at or after this time (ms since the epoch).
    Timestamp(i64),
    /// These offsets (`topic/partition` → offset); other partitions start at earliest.
    Specific(BTreeMap<(String, i32), i64>),
}

/// When a source ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopOffsets {
    /// Never: an unbounded stream.
    Never,
    /// At the latest offsets when the source starts (a backfill that ends).
    LatestAtStart,
    /// Before these offsets (exclusive); partitions not listed stop at latest-at-start.
    Specific(BTreeMap<(String, i32), i64>),
}

pub(crate) struct Plan {
    /// Owned partition → next offset to read (resolved to a concrete number).
    pub positions: BTreeMap<(String, i32), i64>,
    /// Owned partition → offset to stop before (bounded only).
    pub stop: BTreeMap<(String, i32), i64>,
}

const TIMEOUT: Duration = Duration::from_secs(30);

/// Resolves the partitions this subtask owns and their start (and stop) offsets. Blocking.
pub(crate) fn plan(
    subscription: &Subscription,
    start: &StartOffsets,
    stop: &StopOffsets,
    consumer: &SourceConsumer,
    restored: KafkaSourceState,
    subtask: usize,
    parallelism: usize,
) -> Result<Plan> {
    let all = subscription.partitions(consumer, TIMEOUT).map_err(|e| {
        kafka_err(
            format!("kafka source: listing partitions of {subscription:?}"),
            e,
        )
    })?;
    let restored: BTreeMap<(String, i32), i64> = restored
        .iter()
        .filter_map(|(k, o)| parse_tp(k).map(|tp| (tp, *o)))
        .collect();
    let mine: Vec<(String, i32)> = all
        .into_iter()
        .filter(|(t, p)| super::owner::owner(t, *p, parallelism) == subtask)
        .collect();

    let mut positions = BTreeMap::new();
    let mut fresh = Vec::new();
    for tp in &mine {
        match restored.get(tp) {
            Some(o) => {
                positions.insert(tp.clone(), *o);
            }
            None => fresh.push(tp.clone()),
        }
    }
    // Asked once per partition: a bounded run from the earliest offset needs both ends.
    let mut known: BTreeMap<(String, i32), (i64, i64)> = BTreeMap::new();
    let mut watermarks = |t: &str, p: i32| -> Result<(i64, i64)> {
        if let Some(w) = known.get(&(t.to_owned(), p)) {
            return Ok(*w);
        }
        let w = consumer
            .fetch_watermarks(t, p, TIMEOUT)
            .map_err(|e| kafka_err(format!("kafka source: watermarks of {t}/{p}"), e))?;
        known.insert((t.to_owned(), p), w);
        Ok(w)
    };
    if !fresh.is_empty() {
        match start {
            StartOffsets::Earliest | StartOffsets::Latest | StartOffsets::Specific(_) => {
                for (t, p) in &fresh {
                    let (low, high) = watermarks(t, *p)?;
                    let o = match start {
                        StartOffsets::Latest => high,
                        StartOffsets::Specific(m) => {
                            m.get(&(t.clone(), *p)).copied().unwrap_or(low)
                        }
                        _ => low,
                    };
                    positions.insert((t.clone(), *p), o);
                }
            }
            StartOffsets::Committed { reset_to_earliest } => {
                let mut tpl = TopicPartitionList::new();
                for (t, p) in &fresh {
                    tpl.add_partition(t, *p);
                }
                let committed = consumer
                    .committed_offsets(tpl, TIMEOUT)
                    .map_err(|e| kafka_err("kafka source: reading committed offsets", e))?;
                for e in committed.elements() {
                    let o = match e.offset() {
                        Offset::Offset(o) => o,
                        _ => {
                            let (low, high) = watermarks(e.topic(), e.partition())?;
                            if *reset_to_earliest {
                                low
                            } else {
                                high
                            }
                        }
                    };
                    positions.insert((e.topic().to_owned(), e.partition()), o);
                }
            }
            StartOffsets::Timestamp(ts) => {
                let mut tpl = TopicPartitionList::new();
                for (t, p) in &fresh {
                    tpl.add_partition_offset(t, *p, Offset::Offset(*ts))
                        .map_err(|e| kafka_err("kafka source: offsets for timestamp", e))?;
                }
                let found = consumer
                    .offsets_for_times(tpl, TIMEOUT)
                    .map_err(|e| kafka_err("kafka source: offsets for timestamp", e))?;
                for e in found.elements() {
                    let o = match e.offset() {
                        Offset::Offset(o) => o,
                        _ => watermarks(e.topic(), e.partition())?.1,
                    };
                    positions.insert((e.topic().to_owned(), e.partition()), o);
                }
            }
        }
    }

    let mut stops = BTreeMap::new();
    if !matches!(stop, StopOffsets::Never) {
        for tp in &mine {
            let at = match stop {
                StopOffsets::Specific(m) if m.contains_key(tp) => m[tp],
                _ => watermarks(&tp.0, tp.1)?.1,
            };
            stops.insert(tp.clone(), at);
        }
    }
    if positions.values().any(|o| *o < 0) {
        return Err(Error::connector(
            "kafka source",
            "resolved a negative start offset",
        ));
    }
    Ok(Plan {
        positions,
        stop: stops,
    })
}
