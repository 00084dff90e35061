//! The owner's lease: one object (`<prefix>/_owner.json`) naming the holder and until when its
//! hold lasts, created only if absent and renewed only if unchanged (conditional writes by
//! ETag), so two processes can never both believe they hold it. A holder that dies stops
//! renewing; once the lease has run out, another process takes it over. A holder that finds
//! its lease taken over is fenced: [`Fence::check`] refuses every later checkpoint.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};
use parking_lot::Mutex;
use rivus_sdk::checkpoint::{Holder, OwnerLock};
use rivus_sdk::{Error, Result};
use serde::{Deserialize, Serialize};

use crate::error::s3_error;

/// What the lease object holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Lease {
    holder: Holder,
    /// Wall-clock end of the hold, ms since the Unix epoch.
    expires_ms: u64,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Whether this process may still write checkpoints, shared by the backend and the renewer.
#[derive(Debug, Default)]
pub(crate) struct Fence {
    state: Mutex<Option<Held>>,
}

#[derive(Debug)]
struct Held {
    /// The lease's ETag after our last write of it.
    e_tag: Option<String>,
    /// Until when this process is sure nobody else may hold the lease: the send time of the
    /// last successful renewal plus five sixths of the lease (a margin for clock drift).
    valid_until: Instant,
    /// Set when another process took the lease over.
    lost: Option<String>,
}

impl Fence {
    /// `Ok` unless this process took the lease and has lost it or let it run out.
    pub(crate) fn check(&self, store: &str, checkpoint_id: u64) -> Result<()> {
        match &*self.state.lock() {
            None => Ok(()),
            Some(Held {
                lost: Some(why), ..
            }) => Err(Error::owner(
                store,
                format!(
                    "not writing checkpoint {checkpoint_id}: this process lost its lease ({why})"
                ),
            )),
            Some(h) if Instant::now() >= h.valid_until => Err(Error::owner(
                store,
                format!(
                    "not writing checkpoint {checkpoint_id}: this process could not renew its \
                     lease in time, another may own the job now"
                ),
            )),
            Some(_) => Ok(()),
        }
    }
}

/// Takes the lease at `path` for `holder`, or refuses naming the holder.
pub(crate) async fn acquire(
    client: Arc<dyn ObjectStore>,
    path: Path,
    store: String,
    holder: &Holder,
    lease: Duration,
    fence: Arc<Fence>,
) -> Result<OwnerLock> {
    let lease_ms = lease.as_millis() as u64;
    let ours = |at: u64| Lease {
        holder: holder.clone(),
        expires_ms: at + lease_ms,
    };
    let body = |l: &Lease| PutPayload::from(serde_json::to_vec(l).unwrap_or_default());
    let sent = Instant::now();
    let created = client
        .put_opts(
            &path,
            body(&ours(now_ms())),
            PutOptions {
                mode: PutMode::Create,
                ..Default::default()
            },
        )
        .await;
    let e_tag = match created {
        Ok(r) => r.e_tag,
        Err(object_store::Error::AlreadyExists { .. }) => {
            let got = client
                .get(&path)
                .await
                .map_err(|e| s3_error(format!("reading {store}/_owner.json"), e))?;
            let e_tag = got.meta.e_tag.clone();
            let bytes = got
                .bytes()
                .await
                .map_err(|e| s3_error(format!("reading {store}/_owner.json"), e))?;
            let other: Lease = serde_json::from_slice(&bytes).map_err(|e| {
                Error::owner(
                    &store,
                    format!("its lease `_owner.json` is unreadable ({e}); delete it if no process runs this job"),
                )
            })?;
            let now = now_ms();
            if !other.holder.is_same_owner(holder) && now < other.expires_ms {
                return Err(Error::owner(
                    &store,
                    format!(
                        "held by {}, whose lease runs {:.1} s more; stop that process first (one \
                         job, one owner; several processes share a job only as workers, \
                         `--worker ID`)",
                        other.holder,
                        (other.expires_ms - now) as f64 / 1000.0
                    ),
                ));
            }
            if !other.holder.is_same_owner(holder) {
                tracing::warn!(store = %store, previous = %other.holder,
                    "taking over a checkpoint store whose lease ran out");
            }
            let taken = put_if_unchanged(&*client, &path, body(&ours(now)), e_tag).await;
            match taken {
                Ok(r) => r.e_tag,
                Err(object_store::Error::Precondition { .. }) => {
                    return Err(Error::owner(
                        &store,
                        "another process took the lease over at the same moment; stop it first",
                    ))
                }
                Err(e) => return Err(s3_error(format!("taking {store}/_owner.json"), e)),
            }
        }
        Err(e) => return Err(s3_error(format!("creating {store}/_owner.json"), e)),
    };
    *fence.state.lock() = Some(Held {
        e_tag,
        valid_until: sent + lease * 5 / 6,
        lost: None,
    });
    let renewer = tokio::spawn(renew(
        Arc::clone(&client),
        path.clone(),
        store.clone(),
        ours(0),
        lease,
        Arc::clone(&fence),
    ));
    let guard = AbortOnDrop(renewer);
    Ok(OwnerLock::new(guard).with_release(move || {
        Box::pin(async move {
            let e_tag = fence.state.lock().take().and_then(|h| h.e_tag);
            // Delete only our own lease: unchanged since our last renewal.
            match client.head(&path).await {
                Ok(meta) if meta.e_tag.is_some() && meta.e_tag == e_tag => {
                    if let Err(e) = client.delete(&path).await {
                        tracing::warn!(store = %store, error = %e,
                            "could not release the checkpoint store's lease; it runs out by itself");
                    }
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(store = %store, error = %e,
                    "could not release the checkpoint store's lease; it runs out by itself"),
            }
        })
    }))
}

/// Renews the lease every third of its length until aborted or taken over.
async fn renew(
    client: Arc<dyn ObjectStore>,
    path: Path,
    store: String,
    mut lease_body: Lease,
    lease: Duration,
    fence: Arc<Fence>,
) {
    loop {
        tokio::time::sleep(lease / 3).await;
        let Some(e_tag) = fence.state.lock().as_ref().map(|h| h.e_tag.clone()) else {
            return;
        };
        let sent = Instant::now();
        lease_body.expires_ms = now_ms() + lease.as_millis() as u64;
        let body = PutPayload::from(serde_json::to_vec(&lease_body).unwrap_or_default());
        let put = put_if_unchanged(&*client, &path, body, e_tag).await;
        let mut state = fence.state.lock();
        let Some(held) = state.as_mut() else { return };
        match put {
            Ok(r) => {
                held.e_tag = r.e_tag;
                held.valid_until = sent + lease * 5 / 6;
            }
            Err(object_store::Error::Precondition { .. }) => {
                tracing::error!(store = %store,
                    "the checkpoint store's lease was taken over by another process: no more checkpoints from this one");
                held.lost = Some("another process took it over after it ran out".to_owned());
                return;
            }
            Err(e) => {
                tracing::warn!(store = %store, error = %e, "could not renew the checkpoint store's lease; retrying");
            }
        }
    }
}

/// Writes `body` at `path` only if the object still has `e_tag` (`If-Match`).
async fn put_if_unchanged(
    client: &dyn ObjectStore,
    path: &Path,
    body: PutPayload,
    e_tag: Option<String>,
) -> object_store::Result<object_store::PutResult> {
    let mode = PutMode::Update(UpdateVersion {
        e_tag,
        version: None,
    });
    client
        .put_opts(
            path,
            body,
            PutOptions {
                mode,
                ..Default::default()
            },
        )
        .await
}

/// Stops the renewer when the hold is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
