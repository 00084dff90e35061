//! Files on a local disk: written under `<dir>/_rivus/<job>/inprogress/<id>`, synced at each
//! checkpoint (whose state holds the length), renamed to their key when it completes. A
//! restore cuts a file back to the checkpoint's length, appends its trailer and renames it.

use std::collections::HashSet;
use std::io::Write;
use std::path::PathBuf;

use rivus_sdk::{Error, Result};

use super::{Recoverable, Upload};

/// A local destination.
#[derive(Debug)]
pub(crate) struct LocalStaging {
    pub(crate) dir: PathBuf,
    pub(crate) own: PathBuf,
}

fn io(what: String, e: std::io::Error) -> Error {
    Error::io(what, e)
}

impl LocalStaging {
    pub(crate) fn new(dir: PathBuf, job: &str) -> LocalStaging {
        let own = dir.join("_rivus").join(job).join("inprogress");
        LocalStaging { dir, own }
    }

    fn staged(&self, id: &str) -> PathBuf {
        self.own.join(id)
    }

    pub(crate) async fn begin(&self, key: &str, id: &str) -> Result<Upload> {
        std::fs::create_dir_all(&self.own)
            .map_err(|e| io(format!("files: creating {}", self.own.display()), e))?;
        let path = self.staged(id);
        std::fs::File::create(&path)
            .map_err(|e| io(format!("files: creating {}", path.display()), e))?;
        Ok(Upload {
            rec: Recoverable {
                key: key.to_owned(),
                id: id.to_owned(),
                upload: String::new(),
                parts: Vec::new(),
                len: 0,
                tails: Vec::new(),
                trailer: String::new(),
                records: 0,
                sequence: 0,
            },
        })
    }

    pub(crate) async fn append(&self, up: &mut Upload, bytes: Vec<u8>) -> Result<()> {
        let path = self.staged(&up.rec.id);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(|e| io(format!("files: opening {}", path.display()), e))?;
        f.write_all(&bytes)
            .map_err(|e| io(format!("files: writing {}", path.display()), e))?;
        up.rec.len += bytes.len() as u64;
        Ok(())
    }

    pub(crate) async fn sync(&self, up: &mut Upload) -> Result<()> {
        let path = self.staged(&up.rec.id);
        std::fs::File::open(&path)
            .and_then(|f| f.sync_data())
            .map_err(|e| io(format!("files: syncing {}", path.display()), e))
    }

    pub(crate) async fn commit(&self, rec: &Recoverable) -> Result<()> {
        let staged = self.staged(&rec.id);
        let target = self.dir.join(&rec.key);
        if !staged.exists() {
            if target.exists() {
                return Ok(());
            }
            return Err(Error::connector(
                "files",
                format!(
                    "{} was neither committed nor can it be: {} is gone",
                    target.display(),
                    staged.display()
                ),
            ));
        }
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&staged)
            .map_err(|e| io(format!("files: opening {}", staged.display()), e))?;
        f.set_len(rec.len)
            .map_err(|e| io(format!("files: cutting {}", staged.display()), e))?;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&staged)
            .map_err(|e| io(format!("files: opening {}", staged.display()), e))?;
        f.write_all(&rec.trailer_bytes())
            .and_then(|_| f.sync_data())
            .map_err(|e| io(format!("files: finishing {}", staged.display()), e))?;
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| io(format!("files: creating {}", parent.display()), e))?;
        }
        std::fs::rename(&staged, &target)
            .map_err(|e| io(format!("files: renaming to {}", target.display()), e))
    }

    pub(crate) async fn clean(&self, keep: &HashSet<String>, attempt: &str) -> Result<u64> {
        let Ok(entries) = std::fs::read_dir(&self.own) else {
            return Ok(0);
        };
        let mut removed = 0;
        for e in entries.flatten() {
            let id = e.file_name().to_string_lossy().into_owned();
            if keep.contains(&id) || id.starts_with(&format!("{attempt}-")) {
                continue;
            }
            std::fs::remove_file(e.path())
                .map_err(|err| io(format!("files: removing {}", e.path().display()), err))?;
            removed += 1;
        }
        Ok(removed)
    }
}
