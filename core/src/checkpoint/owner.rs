//! One job, one owner: the hold a running job keeps on its checkpoint store, so that a second
//! process of the same job is refused at start instead of writing the same output again.
//!
//! A [`StateBackend`](super::StateBackend) hands out an [`OwnerLock`] from
//! [`lock`](super::StateBackend::lock); the job keeps it for as long as it runs. Who holds a
//! store is written into it as a [`Holder`], so the refusal names the other process.

use serde::{Deserialize, Serialize};

/// Who holds a checkpoint store: enough to find the other process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// The job's name.
    pub job: String,
    /// The worker id in worker mode (`None`: the job runs as one process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// The holding process.
    pub pid: u32,
    /// The machine it runs on.
    pub host: String,
    /// When it took the store (RFC 3339, UTC).
    pub since: String,
}

impl Holder {
    /// This process, running `job` (as `worker` in worker mode).
    pub fn this_process(job: &str, worker: Option<&str>) -> Self {
        Holder {
            job: job.to_owned(),
            worker: worker.map(ToOwned::to_owned),
            pid: std::process::id(),
            host: host_name(),
            since: crate::error_policy::letter::rfc3339_ms(crate::calendar::now_ms()),
        }
    }

    /// True when `other` names this same process and worker (a restart of the same job in
    /// the same process may take its own store back).
    pub fn is_same_owner(&self, other: &Holder) -> bool {
        self.pid == other.pid
            && self.host == other.host
            && self.job == other.job
            && self.worker == other.worker
    }
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "job `{}`", self.job)?;
        if let Some(w) = &self.worker {
            write!(f, " worker `{w}`")?;
        }
        write!(
            f,
            " (pid {} on host {}, since {})",
            self.pid, self.host, self.since
        )
    }
}

/// The machine's host name (`unknown-host` where the system does not say).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".to_owned())
}

/// A held checkpoint store; dropping it lets go. Backends without owners (memory) hand out
/// [`OwnerLock::none`]. A store that other machines see (an object store) also gives its hold
/// back explicitly through [`release`](OwnerLock::release), so the next owner need not wait for
/// a lease to run out.
pub struct OwnerLock {
    _held: Option<Box<dyn Send + Sync>>,
    release: Option<Release>,
}

type Release = Box<dyn FnOnce() -> futures::future::BoxFuture<'static, ()> + Send + Sync>;

impl OwnerLock {
    /// No hold (a store only this process can see).
    pub fn none() -> Self {
        OwnerLock {
            _held: None,
            release: None,
        }
    }

    /// A hold kept alive by `guard` (an open locked file, a lease renewer).
    pub fn new(guard: impl Send + Sync + 'static) -> Self {
        OwnerLock {
            _held: Some(Box::new(guard)),
            release: None,
        }
    }

    /// The same hold, given back by `release` when the job ends (deleting a lease).
    pub fn with_release(
        mut self,
        release: impl FnOnce() -> futures::future::BoxFuture<'static, ()> + Send + Sync + 'static,
    ) -> Self {
        self.release = Some(Box::new(release));
        self
    }

    /// Gives the store back: runs the release step, then drops the hold.
    pub async fn release(mut self) {
        if let Some(r) = self.release.take() {
            r().await;
        }
    }
}

impl std::fmt::Debug for OwnerLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnerLock")
            .field("held", &self._held.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holder_names_its_process_and_round_trips() {
        let h = Holder::this_process("orders", Some("w2"));
        assert_eq!(h.pid, std::process::id());
        let text = h.to_string();
        assert!(text.contains("job `orders` worker `w2`"), "{text}");
        assert!(text.contains(&format!("pid {}", h.pid)), "{text}");
        let back: Holder = serde_json::from_str(&serde_json::to_string(&h).unwrap()).unwrap();
        assert_eq!(back, h);
        assert!(h.is_same_owner(&back));
        let other = Holder {
            pid: h.pid + 1,
            ..h.clone()
        };
        assert!(!h.is_same_owner(&other));
    }
}
