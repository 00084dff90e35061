//! One output feeding several: a fan-out hands every record to each branch, a router to the
//! branches its function picks ([`Routes`]). The last branch a record goes to gets the record
//! itself, the others a clone — a single-branch path copies nothing.

use std::sync::Arc;

use async_trait::async_trait;

use super::output::{Notification, Output, Snapshot};
use crate::checkpoint::CompletedCheckpoint;
use crate::error::Result;

/// The routes a record goes to, out of at most [`Routes::MAX`] (a set of route indexes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Routes(u64);

impl Routes {
    /// The most routes one router has.
    pub const MAX: usize = 64;

    /// No route: the record is dropped.
    pub fn none() -> Self {
        Routes(0)
    }

    /// Route `i` alone.
    pub fn only(i: usize) -> Self {
        Routes::none().with(i)
    }

    /// These routes and route `i` too (an index past [`Routes::MAX`] is ignored).
    pub fn with(self, i: usize) -> Self {
        match 1u64.checked_shl(i as u32) {
            Some(bit) if i < Self::MAX => Routes(self.0 | bit),
            _ => self,
        }
    }

    /// Whether route `i` is among these.
    pub fn contains(self, i: usize) -> bool {
        i < Self::MAX && self.0 & (1 << i) != 0
    }

    /// Whether no route is.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// Picks a record's routes.
pub(crate) type Pick<T> = Arc<dyn Fn(&T) -> Routes + Send + Sync>;

/// Writes each record into the outputs of its branches: all of them (fan-out, `pick` is
/// `None`) or those `pick` names.
pub(crate) struct Split<T> {
    outputs: Vec<Box<dyn Output<T>>>,
    pick: Option<Pick<T>>,
    /// Every branch, for a fan-out.
    all: Routes,
}

impl<T: Clone + Send + 'static> Split<T> {
    pub(super) fn new(outputs: Vec<Box<dyn Output<T>>>, pick: Option<Pick<T>>) -> Self {
        let all = (0..outputs.len()).fold(Routes::none(), Routes::with);
        Split { outputs, pick, all }
    }
}

#[async_trait]
impl<T: Clone + Send + 'static> Output<T> for Split<T> {
    #[inline]
    fn push(&mut self, value: T, ts: Option<i64>) -> bool {
        let routes = match &self.pick {
            None => self.all,
            Some(pick) => Routes(pick(&value).0 & self.all.0),
        };
        if routes.is_empty() {
            return false;
        }
        let last = 63 - routes.0.leading_zeros() as usize;
        let mut full = false;
        for i in 0..last {
            if routes.contains(i) {
                full |= self.outputs[i].push(value.clone(), ts);
            }
        }
        full | self.outputs[last].push(value, ts)
    }

    fn buffered(&self) -> usize {
        self.outputs.iter().map(|o| o.buffered()).max().unwrap_or(0)
    }

    fn share_task(&mut self, shared: &crate::TaskShared) {
        self.outputs.iter_mut().for_each(|o| o.share_task(shared));
    }

    async fn open(&mut self, restore: Option<&CompletedCheckpoint>) -> Result<()> {
        for o in &mut self.outputs {
            o.open(restore).await?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<()> {
        for o in &mut self.outputs {
            o.flush().await?;
        }
        Ok(())
    }

    async fn watermark(&mut self, wm: i64) -> Result<()> {
        for o in &mut self.outputs {
            o.watermark(wm).await?;
        }
        Ok(())
    }

    async fn barrier(&mut self, id: u64, snap: &mut Snapshot) -> Result<()> {
        for o in &mut self.outputs {
            o.barrier(id, snap).await?;
        }
        Ok(())
    }

    async fn notify(&mut self, n: Notification) -> Result<()> {
        // Every branch hears of the checkpoint, also when one of them fails to commit.
        let mut first = Ok(());
        for o in &mut self.outputs {
            let r = o.notify(n).await;
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    async fn end_of_input(&mut self) -> Result<()> {
        for o in &mut self.outputs {
            o.end_of_input().await?;
        }
        Ok(())
    }

    async fn close(&mut self) -> Result<()> {
        let mut first = Ok(());
        for o in &mut self.outputs {
            let r = o.close().await;
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}

#[cfg(test)]
mod tests {
    use super::Routes;

    #[test]
    fn routes_are_a_set_of_indexes() {
        let r = Routes::only(2).with(0).with(63).with(64);
        assert!(r.contains(0) && r.contains(2) && r.contains(63));
        assert!(!r.contains(1) && !r.contains(64));
        assert!(Routes::none().is_empty() && !r.is_empty());
    }
}
