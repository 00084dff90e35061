//! [`MemoryDeadLetters`]: a dead-letter queue keeping its letters in memory, for the suites'
//! dead-letter cases and for connector tests.

use std::sync::Arc;

use parking_lot::Mutex;

use rivus_sdk::error_policy::{DeadLetter, DeadLetterQueue};
use rivus_sdk::prelude::*;

/// Keeps every letter it is sent; clones share the letters.
#[derive(Debug, Default, Clone)]
pub struct MemoryDeadLetters(Arc<Mutex<Vec<DeadLetter>>>);

impl MemoryDeadLetters {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// The letters received so far, in order.
    pub fn letters(&self) -> Vec<DeadLetter> {
        self.0.lock().clone()
    }
}

#[async_trait]
impl DeadLetterQueue for MemoryDeadLetters {
    async fn send(&self, letter: DeadLetter) -> Result<()> {
        self.0.lock().push(letter);
        Ok(())
    }
}
