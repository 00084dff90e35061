//! Restored state handed to a function at start: the states of every subtask of the previous
//! run, so that a function can take its own or redistribute all of them when the parallelism
//! changed.

use crate::error::{Error, Result};

/// What a subtask is given at start.
#[derive(Debug, Clone)]
pub struct Restored<S> {
    /// This subtask's index.
    pub subtask: usize,
    /// The parallelism of this run.
    pub parallelism: usize,
    /// The checkpoint restored from, or `None` on a fresh start.
    pub checkpoint_id: Option<u64>,
    /// One entry per subtask of the previous run (its parallelism is `previous.len()`); `None`
    /// for a subtask that stored no state.
    pub previous: Vec<Option<S>>,
    pub(crate) operator: String,
}

impl<S> Restored<S> {
    /// This subtask's share of a list of splits in this run.
    pub fn share(&self) -> crate::Share {
        crate::Share::new(self.subtask, self.parallelism)
    }

    /// A fresh start: nothing restored.
    pub fn fresh(operator: impl Into<String>, subtask: usize, parallelism: usize) -> Self {
        Restored {
            subtask,
            parallelism,
            checkpoint_id: None,
            previous: Vec::new(),
            operator: operator.into(),
        }
    }

    /// A restore from checkpoint `checkpoint_id` with the given per-subtask states.
    pub fn from_checkpoint(
        operator: impl Into<String>,
        subtask: usize,
        parallelism: usize,
        checkpoint_id: u64,
        previous: Vec<Option<S>>,
    ) -> Self {
        Restored {
            subtask,
            parallelism,
            checkpoint_id: Some(checkpoint_id),
            previous,
            operator: operator.into(),
        }
    }

    /// True when restoring from a checkpoint.
    pub fn is_restored(&self) -> bool {
        self.checkpoint_id.is_some()
    }

    /// The parallelism of the previous run (0 on a fresh start).
    pub fn previous_parallelism(&self) -> usize {
        self.previous.len()
    }

    /// Every restored state of every previous subtask (Flink's union list state).
    pub fn union(self) -> impl Iterator<Item = S> {
        self.previous.into_iter().flatten()
    }

    /// This subtask's own state when the parallelism is unchanged; `Default` on a fresh start;
    /// an error naming the operator when the parallelism changed.
    pub fn own_or_default(mut self) -> Result<S>
    where
        S: Default,
    {
        if !self.is_restored() || self.previous.is_empty() {
            return Ok(S::default());
        }
        if self.previous.len() != self.parallelism {
            return Err(Error::config(
                format!("{}.parallelism", self.operator),
                format!(
                    "restored from {} subtasks into {}: this function does not support rescaling (override its restore to redistribute state)",
                    self.previous.len(),
                    self.parallelism
                ),
            ));
        }
        Ok(self.previous[self.subtask].take().unwrap_or_default())
    }

    /// The operator restored (its name in the job), for errors about its state.
    pub fn operator(&self) -> &str {
        &self.operator
    }

    /// The same restore with each state converted by `f`.
    pub fn map<T>(self, f: impl FnMut(S) -> T) -> Restored<T> {
        let mut f = f;
        Restored {
            subtask: self.subtask,
            parallelism: self.parallelism,
            checkpoint_id: self.checkpoint_id,
            previous: self.previous.into_iter().map(|s| s.map(&mut f)).collect(),
            operator: self.operator,
        }
    }
}

impl<S> Restored<Option<S>> {
    /// The same restore with each `None` state counted as no state stored.
    pub fn flatten(self) -> Restored<S> {
        Restored {
            subtask: self.subtask,
            parallelism: self.parallelism,
            checkpoint_id: self.checkpoint_id,
            previous: self.previous.into_iter().map(Option::flatten).collect(),
            operator: self.operator,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_state_and_rescale_refusal() {
        let fresh: Restored<u64> = Restored::fresh("src", 0, 2);
        assert!(!fresh.is_restored());
        assert_eq!(fresh.own_or_default().unwrap(), 0);

        let same = Restored::from_checkpoint("src", 1, 2, 7, vec![Some(10u64), Some(20)]);
        assert_eq!(same.own_or_default().unwrap(), 20);

        let rescaled = Restored::from_checkpoint("src", 0, 3, 7, vec![Some(10u64), Some(20)]);
        let err = rescaled.clone().own_or_default().unwrap_err();
        assert!(err.to_string().contains("src.parallelism"), "{err}");
        assert_eq!(rescaled.union().sum::<u64>(), 30);
    }
}
