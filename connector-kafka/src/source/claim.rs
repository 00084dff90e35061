//! Group mode with a sink that keeps the positions in its database (rivus-sdk's
//! [`PositionsInSink`](rivus_sdk::PositionsInSink)): partitions the group assigns are claimed
//! from the sink's table, inside the rebalance, and start from the positions it holds — not
//! from the group's committed offsets, which such a job never commits.

use rdkafka::{Offset, TopicPartitionList};
use rivus_sdk::{PositionStore, Result};

use super::group_assignment::{parse_tp, tp_key};

/// Claims the partitions of `tpl` from `store` and sets the offset of each one the store
/// holds a position for (the others start as `auto.offset.reset` says). Returns how many
/// positions were found.
pub(crate) fn claim_into(store: &dyn PositionStore, tpl: &mut TopicPartitionList) -> Result<usize> {
    let keys: Vec<String> = tpl
        .elements()
        .iter()
        .map(|e| tp_key(e.topic(), e.partition()))
        .collect();
    if keys.is_empty() {
        return Ok(0);
    }
    let found = store.claim(&keys)?;
    let mut set = 0;
    for (key, position) in &found {
        let Some((topic, partition)) = parse_tp(key) else {
            continue;
        };
        if tpl
            .set_partition_offset(&topic, partition, Offset::Offset(*position))
            .is_ok()
        {
            set += 1;
        }
    }
    tracing::info!(
        partitions = keys.len(),
        positions = set,
        "kafka source: claimed the assigned partitions from the sink's positions table"
    );
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rivus_sdk::Positions;

    struct Table(Positions);
    impl PositionStore for Table {
        fn claim(&self, keys: &[String]) -> Result<Positions> {
            Ok(keys
                .iter()
                .filter_map(|k| Some((k.clone(), *self.0.get(k)?)))
                .collect())
        }
    }

    #[test]
    fn stored_positions_become_the_start_offsets() {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition("t", 0);
        tpl.add_partition("t", 1);
        let table = Table([("t/1".to_owned(), 42)].into());
        assert_eq!(claim_into(&table, &mut tpl).unwrap(), 1);
        assert_eq!(
            tpl.find_partition("t", 1).unwrap().offset(),
            Offset::Offset(42)
        );
        assert_eq!(
            tpl.find_partition("t", 0).unwrap().offset(),
            Offset::Invalid
        );
    }
}
