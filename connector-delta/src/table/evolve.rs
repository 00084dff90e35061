//! Added columns: the columns records bring, committed to the table as a version of their own
//! before any file holding them is published (Delta's `ALTER TABLE ADD COLUMN`); a name the
//! table cannot take (a case-insensitive clash, a character Delta refuses) is left out.

use std::collections::HashSet;

use std::sync::Arc;

use rivus_sdk::{Error, Result};

use super::commit::{outcome_of, Outcome};
use super::*;

impl DeltaTable {
    /// Adds `added` to the table, each new column at once in a version of its own (see
    /// [`Publish::evolve`]); the table's columns after it, as the files take them.
    pub(super) async fn add_columns(&self, added: &[Column]) -> Result<Vec<Column>> {
        let columns = |snapshot: &SnapshotRef| {
            columns_of(&snapshot.schema())
                .map(|c| self.file_columns(c))
                .map_err(|e| Error::connector("delta", format!("the table {}: {e}", self.root)))
        };
        for attempt in 0..MAX_CONFLICTS {
            let snapshot = self.snapshot().await?;
            let taken: HashSet<String> = snapshot
                .schema()
                .fields()
                .map(|f| f.name().to_lowercase())
                .collect();
            let new: Vec<Column> = added
                .iter()
                .filter(|c| addable(&c.name, &taken))
                .cloned()
                .collect();
            if new.is_empty() {
                return columns(&snapshot);
            }
            let fields = schema_of(&new)?;
            let engine = Arc::clone(&self.engine);
            let outcome = blocking(move || -> delta_kernel::KernelResult<Outcome> {
                let mut builder = Arc::clone(&snapshot).update_table(
                    UpdateTableOperation::AlterTable,
                    ENGINE_INFO,
                    false,
                );
                for f in fields.fields() {
                    builder = builder.add_column(f.clone());
                }
                let txn = builder.build(engine.as_ref(), Box::new(FileSystemCommitter::new()))?;
                outcome_of(txn.commit(engine.as_ref())?)
            })
            .await
            .map_err(|e| kernel_error(format!("delta: adding columns to {}", self.root), e))?;
            match outcome {
                Outcome::Committed(version, snapshot) => {
                    let snapshot = match snapshot {
                        Some(s) => {
                            *self.latest.lock() = Some(Arc::clone(&s));
                            s
                        }
                        None => self.snapshot().await?,
                    };
                    let names: Vec<&str> = new.iter().map(|c| c.name.as_str()).collect();
                    tracing::info!(table = %self.root, version, columns = ?names,
                        "delta: columns added");
                    return columns(&snapshot);
                }
                Outcome::Conflicted => {
                    tracing::debug!(table = %self.root, attempt, "delta: lost a version; again");
                }
                Outcome::Failed(e) => {
                    return Err(kernel_error(
                        format!("delta: adding columns to {}", self.root),
                        e,
                    ))
                }
                Outcome::Skipped => unreachable!("schema changes carry no transaction id"),
            }
        }
        Err(Error::connector(
            "delta",
            format!(
                "adding columns to {}: lost {MAX_CONFLICTS} versions in a row to other writers",
                self.root
            ),
        ))
    }
}

/// Characters a Delta column name cannot hold without column mapping (Parquet's).
const NOT_IN_NAMES: &[char] = &[' ', ',', ';', '{', '}', '(', ')', '\n', '\t', '='];

/// Whether a column `name` can be added to a table whose columns, in lower case, are
/// `taken`: not there in any case (Delta's names are case-insensitive), and without the
/// characters Delta refuses.
fn addable(name: &str, taken: &HashSet<String>) -> bool {
    !taken.contains(&name.to_lowercase()) && !name.contains(NOT_IN_NAMES) && !name.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_column_is_added_unless_its_name_is_taken_in_any_case_or_bad() {
        let taken = HashSet::from(["id".to_owned(), "name".to_owned()]);
        assert!(addable("amount", &taken));
        assert!(!addable("Name", &taken), "case-insensitive");
        assert!(!addable("a b", &taken), "a space");
        assert!(!addable("k=v", &taken));
        assert!(!addable("", &taken));
    }
}
