//! Orphan files: data files under the table's root that its newest version does not name.

use std::sync::Arc;

use rivus_connector_files::Orphan;
use rivus_sdk::Result;

use super::*;

impl DeltaTable {
    /// The data files under the table's root that its newest version does not name, by key:
    /// files a failure left (a job that never restarted from the checkpoint holding them —
    /// a restore commits them — or whose state was lost) or another writer's abandoned ones.
    /// The table's own directories (`_delta_log/`, the sink's `_rivus/`) and hidden entries
    /// (`_`- or `.`-prefixed, as Delta readers skip them) are not data. The sink never removes
    /// a file from a table; a file another engine removed (a compaction) is listed too, as it
    /// is no longer in the newest version — older versions (time travel) may still read it,
    /// and `VACUUM` keeps it for its retention.
    pub(crate) async fn orphans(&self) -> Result<Vec<Orphan>> {
        use futures::StreamExt;
        if !self.exists().await? {
            return Err(self.missing());
        }
        let snapshot = self.snapshot().await?;
        let engine = Arc::clone(&self.engine);
        let named = blocking(move || {
            let scan = snapshot.scan_builder().build()?;
            let mut named = HashSet::new();
            for meta in scan.scan_metadata(engine.as_ref())? {
                named = meta?.visit_scan_files(named, |named, file| {
                    named.insert(file.path);
                })?;
            }
            Ok(named)
        })
        .await
        .map_err(|e| kernel_error(format!("delta: reading the files of {}", self.root), e))?;
        let named: HashSet<String> = named.iter().map(|p| self.relative(p)).collect();
        let mut out = Vec::new();
        let mut listing = self.store.list(Some(&self.root_path));
        while let Some(meta) = listing.next().await {
            let meta = meta.map_err(|e| store_error(format!("delta: listing {}", self.root), e))?;
            let key = meta
                .location
                .prefix_match(&self.root_path)
                .map(|parts| parts.map(|p| p.as_ref().to_owned()).collect::<Vec<_>>())
                .unwrap_or_default();
            if key.is_empty() || key.iter().any(|p| p.starts_with('_') || p.starts_with('.')) {
                continue;
            }
            let key = decode(&key.join("/"));
            if !named.contains(&key) {
                out.push(Orphan {
                    key,
                    size: meta.size,
                    modified: meta.last_modified.into(),
                });
            }
        }
        out.sort_by(|a, b| a.modified.cmp(&b.modified).then(a.key.cmp(&b.key)));
        Ok(out)
    }

    /// A path of the log (relative and percent-encoded, or an absolute URL) as a key below
    /// the root.
    pub(super) fn relative(&self, path: &str) -> String {
        let path = path.strip_prefix(self.root.as_str()).unwrap_or(path);
        decode(path)
    }
}

/// Percent-decodes a key as the Delta log encodes paths.
fn decode(path: &str) -> String {
    percent_encoding::percent_decode_str(path)
        .decode_utf8_lossy()
        .into_owned()
}
