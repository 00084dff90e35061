//! [`Change`]: one row change as the SQL sink writes it — a write or a delete, its values in
//! the plan's column order — shared by the batch writer and the COPY/UNNEST encoders.

use crate::value::SqlValue;

/// One row to write or delete, its values in the plan's column order.
#[derive(Debug, Clone)]
pub(crate) struct Change {
    pub delete: bool,
    pub values: Vec<SqlValue>,
    /// Positions of the columns this write leaves as they are (ascending; their values are
    /// NULL placeholders, never bound): a change that did not carry them. Empty for most.
    pub kept: Vec<usize>,
    /// The key values (in the plan's key order) of the row this write moves (a key change
    /// whose new row lacks the `kept` values): the row is updated in place, keeping them.
    pub moved_from: Option<Vec<SqlValue>>,
}

impl Change {
    pub(crate) fn size(&self) -> usize {
        self.values.iter().map(SqlValue::size).sum()
    }
}
