//! Applying changes (`apply_changes`) at the table: the checks at open, the change files of a
//! checkpoint read into the last change per key, one `MERGE` commit (see `merge.rs`), and the
//! merged change files deleted once no restore can need them.

use std::sync::Arc;

use rivus_sdk::{Error, Result};

use super::*;

impl DeltaTable {
    /// Applies the change files `adds` of `app`'s `sequence`, by `key`, in one commit.
    pub(super) async fn publish_changes(
        &self,
        app: &str,
        sequence: Option<u64>,
        key: Vec<String>,
        mut adds: Vec<(FileMeta, u64)>,
    ) -> Result<()> {
        // The change files in the order they were written (their names sort so).
        adds.sort_by(|a, b| a.0.location.as_str().cmp(b.0.location.as_str()));
        let last = self.changes_of(&key, &adds).await?;
        let what = format!("{} changed keys", last.len());
        let (engine, root) = (Arc::clone(&self.engine), self.root.clone());
        let file_bytes = self.file_bytes;
        let handle = tokio::runtime::Handle::current();
        self.commit(
            app,
            sequence,
            &what,
            UpdateTableOperation::Merge,
            move |snapshot, engine2, txn| {
                let context = txn.write_state()?.write_context_builder().build()?;
                let mut added = Vec::new();
                let applied = merge::apply(
                    engine2,
                    snapshot,
                    (&root, &key, file_bytes),
                    &last,
                    &mut |batch| {
                        let data = ArrowEngineData::new(batch);
                        added.push(handle.block_on(engine.write_parquet(&data, &context))?);
                        Ok(())
                    },
                )?;
                if applied.unknown > 0 {
                    tracing::warn!(
                    rows = applied.unknown,
                    "delta: written rows whose unchanged columns had no earlier value (left null)"
                );
                }
                tracing::debug!(
                    read = applied.read,
                    rewritten = applied.rewritten,
                    written = added.len(),
                    "delta: merge"
                );
                let table = root.to_string();
                metrics::counter!("rivus_delta_merge_files_read", "table" => table.clone())
                    .increment(applied.read as u64);
                metrics::counter!("rivus_delta_merge_files_rewritten", "table" => table)
                    .increment(applied.rewritten as u64);
                for a in added {
                    txn.add_files(a);
                }
                for r in applied.removes {
                    txn.remove_files(r);
                }
                Ok(())
            },
        )
        .await?;
        self.forget_merged(sequence, &adds).await;
        Ok(())
    }

    /// Refuses to apply changes where they would come out wrong: keys that are not columns,
    /// more than one subtask (one key's changes must stay in order), deletion vectors (a
    /// rewrite would bring their rows back).
    pub(super) fn check_changes(
        &self,
        ctx: &RuntimeContext,
        snapshot: &SnapshotRef,
        key: &[String],
        columns: &[Column],
    ) -> Result<()> {
        if let Some(k) = key.iter().find(|k| !columns.iter().any(|c| &c.name == *k)) {
            return Err(Error::config(
                "key",
                format!("`{k}` is not a column of the table {}", self.root),
            ));
        }
        if ctx.parallelism() > 1 {
            return Err(Error::config(
                "apply_changes",
                format!(
                    "applying changes needs one sink subtask (each key's changes in order), \
                     not {}",
                    ctx.parallelism()
                ),
            ));
        }
        if snapshot.table_properties().enable_deletion_vectors == Some(true) {
            return Err(Error::config(
                "apply_changes",
                format!(
                    "the table {} has deletion vectors enabled, which the sink does not \
                     write: rewriting a file would bring their rows back",
                    self.root
                ),
            ));
        }
        Ok(())
    }

    /// The last change of each key in the change files `adds`, read on the blocking pool.
    pub(super) async fn changes_of(
        &self,
        key: &[String],
        adds: &[(FileMeta, u64)],
    ) -> Result<std::collections::BTreeMap<String, merge::Last>> {
        let snapshot = self.snapshot().await?;
        let columns = columns_of(&snapshot.schema())
            .map_err(|e| Error::connector("delta", format!("the table {}: {e}", self.root)))?;
        let schema = Arc::new(schema_of(&merge::change_columns(columns))?);
        let (engine, key, files) = (Arc::clone(&self.engine), key.to_vec(), adds.to_vec());
        blocking(move || {
            let mut rows = Vec::new();
            for (file, _) in &files {
                for batch in merge::read(engine.as_ref(), file, &schema)? {
                    rows.extend(merge::rows_of(&batch)?);
                }
            }
            merge::reduce(&key, rows)
        })
        .await
        .map_err(|e| kernel_error(format!("delta: reading the changes for {}", self.root), e))
    }

    /// Queues the change files just merged for deletion, and deletes those merged at an
    /// earlier checkpoint than `sequence`'s (no restore can make them visible again now).
    pub(super) async fn forget_merged(&self, sequence: Option<u64>, adds: &[(FileMeta, u64)]) {
        let paths = adds
            .iter()
            .filter_map(|(file, _)| StorePath::from_url_path(file.location.path()).ok());
        let due: Vec<StorePath> = match sequence {
            // Without checkpoints no restore comes back to them: gone at once.
            None => paths.collect(),
            Some(s) => {
                let checkpoint = s / 2;
                let mut merged = self.merged.lock();
                merged.extend(paths.map(|p| (checkpoint, p)));
                let (due, kept) = std::mem::take(&mut *merged)
                    .into_iter()
                    .partition(|(c, _)| *c < checkpoint);
                *merged = kept;
                due.into_iter().map(|(_, p)| p).collect()
            }
        };
        for path in due {
            if let Err(e) = self.store.delete(&path).await {
                tracing::warn!(%path, error = %e, "delta: deleting a merged change file failed");
            }
        }
    }
}
