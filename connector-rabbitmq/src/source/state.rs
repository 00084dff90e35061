//! [`RabbitSourceState`]: which correlation ids a restart or a lost connection may bring back
//! as redeliveries. An id stays in the state from the moment its delivery is taken (emitted, or
//! dropped as a duplicate) until the checkpoint that covers it is complete *and* its
//! acknowledgement was sent: a crash anywhere before that redelivers the message, and the
//! restored state must recognise it.

use std::collections::BTreeSet;

/// Checkpointed state of a RabbitMQ source subtask (used with correlation ids).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(from = "Stored")]
pub struct RabbitSourceState {
    /// Ids of the deliveries taken and not yet acknowledged, oldest first.
    pub unacked: Vec<String>,
    /// How many ids were acknowledged (and left `unacked`) before its first one.
    pub acked: u64,
    /// Ids taken before a restart or a lost connection whose acknowledgement may not have
    /// reached the broker: a redelivery with one of these ids is a duplicate.
    pub expected: BTreeSet<String>,
}

impl RabbitSourceState {
    /// The state a subtask starts from after a restore: every id any restored subtask had
    /// not seen acknowledged is expected back (a redelivery may reach any consumer).
    pub(crate) fn restored(states: impl IntoIterator<Item = RabbitSourceState>) -> Self {
        let mut st = RabbitSourceState::default();
        for s in states {
            st.expected.extend(s.unacked);
            st.expected.extend(s.expected);
        }
        st
    }

    /// A delivery with this id was emitted: it stays until acknowledged.
    pub(crate) fn taken(&mut self, id: String) {
        self.unacked.push(id);
    }

    /// True when a redelivery with `id` is a duplicate of one taken before; it is then taken
    /// again (its new delivery needs acknowledging too before the id may be forgotten).
    pub(crate) fn duplicate(&mut self, id: &str) -> bool {
        if self.expected.remove(id) {
            self.unacked.push(id.to_owned());
            true
        } else {
            false
        }
    }

    /// The deliveries taken before the barrier of the checkpoint whose snapshot is `at` were
    /// acknowledged: forget their ids. Robust to any number of barriers having passed since.
    pub(crate) fn acknowledged(&mut self, at: &RabbitSourceState) {
        let end = at.acked + at.unacked.len() as u64;
        let n = end
            .saturating_sub(self.acked)
            .min(self.unacked.len() as u64);
        self.unacked.drain(..n as usize);
        self.acked += n;
    }

    /// The connection was lost: every unacknowledged delivery comes back as a redelivery.
    pub(crate) fn connection_lost(&mut self) {
        self.acked += self.unacked.len() as u64;
        self.expected.extend(self.unacked.drain(..));
    }

    /// Forgets the ids still expected (their acknowledgement did reach the broker); returns
    /// how many.
    pub(crate) fn forget_expected(&mut self) -> usize {
        std::mem::take(&mut self.expected).len()
    }
}

/// What a stored state may hold: this layout, or the one before it (`current` and `previous`
/// windows of emitted ids), which restores as expected ids.
#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Stored {
    unacked: Vec<String>,
    acked: u64,
    expected: BTreeSet<String>,
    current: Vec<String>,
    previous: Vec<String>,
}

impl From<Stored> for RabbitSourceState {
    fn from(s: Stored) -> Self {
        let mut expected = s.expected;
        expected.extend(s.current);
        expected.extend(s.previous);
        RabbitSourceState {
            unacked: s.unacked,
            acked: s.acked,
            expected,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(st: &RabbitSourceState) -> Vec<&str> {
        st.unacked.iter().map(String::as_str).collect()
    }

    #[test]
    fn an_id_stays_until_the_checkpoint_covering_it_is_acknowledged_however_many_barriers_passed() {
        let mut st = RabbitSourceState::default();
        st.taken("a".into());
        st.taken("b".into());
        let first = st.clone(); // barrier 1
        st.taken("c".into());
        let second = st.clone(); // barrier 2, before checkpoint 1 completed
        st.taken("d".into());
        st.acknowledged(&first);
        assert_eq!(ids(&st), ["c", "d"]);
        // A late or repeated completion of an older checkpoint forgets nothing more.
        st.acknowledged(&first);
        assert_eq!(ids(&st), ["c", "d"]);
        st.acknowledged(&second);
        assert_eq!(ids(&st), ["d"]);
        assert_eq!(st.acked, 3);
    }

    #[test]
    fn a_dropped_duplicate_stays_in_the_state_until_its_new_delivery_is_acknowledged() {
        let before = {
            let mut st = RabbitSourceState::default();
            st.taken("x".into());
            st.taken("y".into());
            st
        };
        let mut st = RabbitSourceState::restored([before]);
        assert!(st.duplicate("x"));
        assert!(!st.duplicate("x"), "expected once");
        assert!(!st.duplicate("z"));
        // A checkpoint taken now (before the acknowledgement) still knows x and y.
        let snap = st.clone();
        let again = RabbitSourceState::restored([snap.clone()]);
        assert_eq!(again.expected, ["x", "y"].map(String::from).into());
        st.acknowledged(&snap);
        assert!(st.unacked.is_empty());
        assert_eq!(st.expected, ["y"].map(String::from).into());
    }

    #[test]
    fn a_lost_connection_expects_every_unacknowledged_id_back_and_ignores_older_completions() {
        let mut st = RabbitSourceState::default();
        st.taken("a".into());
        let snap = st.clone();
        st.taken("b".into());
        st.connection_lost();
        assert!(st.unacked.is_empty());
        st.taken("c".into());
        st.acknowledged(&snap); // a completion filed before the loss
        assert_eq!(ids(&st), ["c"]);
        assert!(st.duplicate("a") && st.duplicate("b"));
        assert_eq!(st.forget_expected(), 0);
    }

    #[test]
    fn the_earlier_layout_restores_as_expected_ids() {
        let old = r#"{"current":["c1"],"previous":["p1","p2"]}"#;
        let st: RabbitSourceState = serde_json::from_str(old).unwrap();
        let restored = RabbitSourceState::restored([st]);
        assert_eq!(
            restored.expected,
            ["c1", "p1", "p2"].map(String::from).into()
        );
        let now = serde_json::to_string(&restored).unwrap();
        assert_eq!(
            serde_json::from_str::<RabbitSourceState>(&now).unwrap(),
            restored
        );
    }
}
