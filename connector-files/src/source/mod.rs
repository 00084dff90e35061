//! [`FilesSource`]: the records of the files under a location — listed once (bounded) or again
//! every `discover` interval (continuous), each file read by the subtask that owns its key (`Share::owns_name`).
//! The state holds the files read to their end and, for a file being read, how many of its
//! records were emitted: a restore (at any parallelism) skips what the checkpoint holds —
//! exactly once.
//!
//! - `list.rs`: the files under the location;
//! - `read.rs`: a file's bytes to records, per format.

mod list;
mod read;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use rivus_sdk::error_policy::{ErrorHandler, ErrorPolicy};
use rivus_sdk::prelude::*;

use crate::location::{Location, S3Options};
use list::Files;
pub use read::ReadFormat;

/// What a checkpoint holds of the source (every subtask restores the union).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilesSourceState {
    /// Files read to their end.
    pub done: BTreeSet<String>,
    /// Files being read, with the records of each emitted so far.
    pub reading: BTreeMap<String, u64>,
}

#[derive(Debug, Clone)]
struct Settings {
    location: Location,
    s3: S3Options,
    format: ReadFormat,
    discover: Option<Duration>,
    max_file_bytes: u64,
    policy: ErrorPolicy,
}

/// Reads the files under a location, exactly once (see the crate's README).
#[derive(Debug, Clone)]
pub struct FilesSource {
    s: Arc<Settings>,
    files: Option<Files>,
    share: rivus_sdk::Share,
    errors: Option<ErrorHandler>,
}

/// Builds a [`FilesSource`].
#[derive(Debug)]
pub struct FilesSourceBuilder {
    url: String,
    s: Settings,
}

impl FilesSource {
    /// A source reading the files of `format` under `url` (`s3://bucket/prefix`,
    /// `file:///dir`).
    pub fn builder(url: impl Into<String>, format: ReadFormat) -> FilesSourceBuilder {
        FilesSourceBuilder {
            url: url.into(),
            s: Settings {
                location: Location::Local(".".into()),
                s3: S3Options::default(),
                format,
                discover: None,
                max_file_bytes: 256 << 20,
                policy: ErrorPolicy::Fail,
            },
        }
    }
}

impl FilesSourceBuilder {
    rivus_sdk::setters! {
        /// The S3 endpoint, region, keys and addressing.
        s3(o: S3Options) => s.s3;

        /// Keep listing every `every` for new files (default: list once, then end).
        discover(every: Duration) => s.discover = Some(every);

        /// A larger file is refused (it is read whole into memory; default 256 MiB).
        max_file_bytes(n: u64) => s.max_file_bytes;

        /// Where lines that are not records go (default: fail).
        error_policy(p: ErrorPolicy) => s.policy;
    }

    /// Checks the options; errors name `source.files.<option>`.
    pub fn build(mut self) -> Result<FilesSource> {
        self.s.location = Location::parse(&self.url, "url")?;
        if self.s.discover.is_some_and(|d| d.is_zero()) {
            return Err(Error::config("discover", "must be above 0"));
        }
        if self.s.max_file_bytes == 0 {
            return Err(Error::config("max_file_bytes", "must be above 0"));
        }
        Ok(FilesSource {
            s: Arc::new(self.s),
            files: None,
            share: rivus_sdk::Share::whole(),
            errors: None,
        })
    }
}

impl FilesSource {
    /// What `rivus check` says: how many files of the format are there, reading none.
    pub async fn report(&self) -> Result<String> {
        let files = match &self.s.location {
            Location::S3 { bucket, prefix } => Files::S3 {
                client: crate::location::s3_client(bucket, &self.s.s3)?.store,
                prefix: prefix.clone(),
            },
            Location::Local(dir) => Files::Local(dir.clone()),
        };
        let listed = files.list(self.s.format).await?;
        let bytes: u64 = listed.iter().map(|(_, n)| n).sum();
        Ok(format!("{} file(s), {bytes} bytes", listed.len()))
    }

    /// Whether this subtask reads `key`.
    fn owns(&self, key: &str) -> bool {
        self.share.owns_name(key)
    }

    /// Reads `key` from after the records the state holds; `Ok(false)`: stop.
    async fn read(
        &self,
        ctx: &mut SourceContext<Value, FilesSourceState>,
        key: &str,
    ) -> Result<bool> {
        let files = self.files.as_ref().expect("opened");
        let Some(bytes) = ctx.wait_for(files.get(key)).await? else {
            return Ok(false);
        };
        let bytes = bytes?;
        let skip = ctx.state().reading.get(key).copied().unwrap_or(0);
        ctx.state_mut().reading.insert(key.to_owned(), skip);
        let errors = self.errors.as_ref().expect("opened");
        let mut n = 0u64;
        for chunk in read::records(self.s.format, key, bytes, 1024)? {
            for item in chunk? {
                n += 1;
                if n <= skip {
                    continue;
                }
                *ctx.state_mut()
                    .reading
                    .get_mut(key)
                    .expect("inserted above") = n;
                match item {
                    Ok(v) => ctx.collect(v).await?,
                    Err(bad) => {
                        errors
                            .handle(
                                format!("{key}:{}", bad.line),
                                bad.reason,
                                bad.text.as_bytes(),
                            )
                            .await?
                    }
                }
            }
            if ctx.is_stopping() {
                return Ok(false);
            }
        }
        let st = ctx.state_mut();
        st.reading.remove(key);
        st.done.insert(key.to_owned());
        Ok(true)
    }
}

#[async_trait]
impl RichFunction for FilesSource {
    async fn open(&mut self, ctx: &RuntimeContext) -> Result<()> {
        ctx.refuse_worker_mode("the file source (files split by key)")?;
        self.share = ctx.share();
        self.errors = Some(
            ErrorHandler::new(self.s.policy.clone(), self.s.location.url()).connector("files"),
        );
        self.files = Some(match &self.s.location {
            Location::S3 { bucket, prefix } => Files::S3 {
                client: crate::location::s3_client(bucket, &self.s.s3)?.store,
                prefix: prefix.clone(),
            },
            Location::Local(dir) => Files::Local(dir.clone()),
        });
        Ok(())
    }
}

#[async_trait]
impl SourceFunction for FilesSource {
    type Out = Value;
    type State = FilesSourceState;

    fn delivery_guarantee(&self) -> DeliveryGuarantee {
        DeliveryGuarantee::ExactlyOnce
    }

    /// Every subtask takes the union: which files it reads follows from their keys.
    fn restore_state(&mut self, restored: Restored<FilesSourceState>) -> Result<FilesSourceState> {
        let mut st = FilesSourceState::default();
        for s in restored.union() {
            st.done.extend(s.done);
            for (k, n) in s.reading {
                let e = st.reading.entry(k).or_default();
                *e = (*e).max(n);
            }
        }
        Ok(st)
    }

    async fn run(&mut self, ctx: &mut SourceContext<Value, FilesSourceState>) -> Result<()> {
        loop {
            let files = self.files.clone().expect("opened");
            let listed = match ctx.wait_for(files.list(self.s.format)).await? {
                Some(l) => l?,
                None => return Ok(()),
            };
            for (key, size) in listed {
                if !self.owns(&key) || ctx.state().done.contains(&key) {
                    continue;
                }
                if size > self.s.max_file_bytes {
                    return Err(Error::refused_at(
                        "files source",
                        "max_file_bytes",
                        format!(
                            "{key} has {size} bytes, more than max_file_bytes ({}): raise it",
                            self.s.max_file_bytes
                        ),
                    ));
                }
                if !self.read(ctx, &key).await? {
                    return Ok(());
                }
            }
            let Some(every) = self.s.discover else {
                return Ok(());
            };
            if ctx.wait_for(tokio::time::sleep(every)).await?.is_none() {
                return Ok(());
            }
        }
    }
}
