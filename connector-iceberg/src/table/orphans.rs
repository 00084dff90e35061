//! Orphan files: data files under the table's data directory that no snapshot of the table
//! names.

use std::collections::HashSet;

use futures::StreamExt;

use rivus_connector_files::Orphan;
use rivus_sdk::{Error, Result};

use super::IcebergTable;
use crate::error::iceberg_error;

impl IcebergTable {
    /// The files under the table's data directory (`<location>/data/`) that no snapshot of
    /// the table names, by key below that directory, oldest first: files a failure left (a
    /// job that never restarted from the checkpoint holding them — a restore commits them —
    /// or whose state was lost) or another writer's abandoned ones. Every snapshot the
    /// metadata keeps counts (time travel reads them); a file only expired snapshots named is
    /// listed. Hidden entries (`_`- or `.`-prefixed, such as the sink's `_rivus/` on a local
    /// disk) are not data. Lists only.
    pub(crate) async fn orphans(&self) -> Result<Vec<Orphan>> {
        if !self.exists().await? {
            return Err(self.missing());
        }
        let table = self.load().await?;
        let store = self.store().await?;
        let what = |w: &str| format!("iceberg: {w} of the table {}", self.ident);
        let key = |path: &str| {
            store
                .key(path)
                .map(|k| k.to_string())
                .map_err(|e| iceberg_error(what("reading the files"), e))
        };

        let mut named = HashSet::new();
        let mut manifests = HashSet::new();
        for snapshot in table.metadata().snapshots() {
            let list = table
                .manifest_list_reader(snapshot)
                .load()
                .await
                .map_err(|e| iceberg_error(what("reading the manifest lists"), e))?;
            for file in list.entries() {
                if !manifests.insert(file.manifest_path.clone()) {
                    continue;
                }
                let manifest = file
                    .load_manifest(table.file_io())
                    .await
                    .map_err(|e| iceberg_error(what("reading the manifests"), e))?;
                for entry in manifest.entries() {
                    named.insert(key(entry.file_path())?);
                }
            }
        }

        let data = format!("{}/data", table.metadata().location().trim_end_matches('/'));
        let root = key(&data)?;
        let mut out = Vec::new();
        let mut listing = store
            .list(&data)
            .map_err(|e| iceberg_error(what("listing the data files"), e))?;
        while let Some(meta) = listing.next().await {
            let meta = meta.map_err(|e| Error::connector(format!("iceberg: listing {data}"), e))?;
            let full = meta.location.to_string();
            let Some(rel) = full
                .strip_prefix(root.as_str())
                .map(|r| r.trim_start_matches('/'))
            else {
                continue;
            };
            if rel.is_empty()
                || rel
                    .split('/')
                    .any(|p| p.starts_with('_') || p.starts_with('.'))
            {
                continue;
            }
            if !named.contains(&full) {
                out.push(Orphan {
                    key: rel.to_owned(),
                    size: meta.size,
                    modified: meta.last_modified.into(),
                });
            }
        }
        out.sort_by(|a, b| a.modified.cmp(&b.modified).then(a.key.cmp(&b.key)));
        Ok(out)
    }
}
