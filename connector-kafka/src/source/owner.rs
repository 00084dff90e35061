//! Which subtask reads which partition outside group mode: deterministic, stable when partitions or topics are
//! added (each partition keeps its owner), and spreading a topic's partitions round-robin from a
//! topic-dependent start — the rule Flink's Kafka source uses.

/// The subtask (of `parallelism`) that owns `partition` of `topic`.
pub(super) fn owner(topic: &str, partition: i32, parallelism: usize) -> usize {
    let p = parallelism.max(1) as u64;
    let start = (crc32fast::hash(topic.as_bytes()) as u64) % p;
    ((start + partition.max(0) as u64) % p) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_evenly_and_is_stable() {
        let mut counts = [0usize; 4];
        for part in 0..16 {
            counts[owner("orders", part, 4)] += 1;
        }
        assert_eq!(counts, [4, 4, 4, 4]);
        assert_eq!(owner("orders", 5, 4), owner("orders", 5, 4));
        assert_eq!(owner("t", 3, 1), 0);
    }
}
