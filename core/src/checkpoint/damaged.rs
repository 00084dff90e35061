//! What a restore does when a checkpoint cannot be read (a torn write, a damaged disk or
//! object): refuse, naming it. An older checkpoint is behind what two-phase-commit sinks have
//! already committed, so restoring it would write that output again; only an explicit
//! [`OnDamaged::RestoreOlder`] takes it.

use crate::error::{Error, Result};

/// What a restore does when the newest checkpoint of the job cannot be read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnDamaged {
    /// Refuse to start, naming the damaged checkpoint (the default).
    #[default]
    Refuse,
    /// Restore the newest intact older one, with a warning: exactly-once sinks may then write
    /// again what they committed after it.
    RestoreOlder,
}

impl OnDamaged {
    /// The answer to checkpoint `id` at `place` being unreadable (`why`): an error, or — with
    /// [`OnDamaged::RestoreOlder`] — a warning and `Ok` to go on to the next older one.
    pub fn damaged(self, id: u64, place: &str, why: &str) -> Result<()> {
        match self {
            // Not retried: a restart would read the same bytes; the operator decides.
            OnDamaged::Refuse => Err(Error::refused(
                format!("restoring checkpoint {id}"),
                format!(
                    "{place} cannot be read ({why}); restoring an older checkpoint would replay \
                     output that exactly-once sinks have already committed, so the job does not \
                     start: repair or remove it, or allow the older one explicitly \
                     (`[checkpoint] on_damaged = \"restore-older\"`)"
                ),
            )),
            OnDamaged::RestoreOlder => {
                tracing::warn!(checkpoint = id, %place, %why,
                    "skipping a damaged checkpoint: restoring an older one (on_damaged = restore-older)");
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_damaged_checkpoint_is_refused_by_name_unless_older_ones_are_allowed() {
        let e = OnDamaged::default()
            .damaged(7, "/cp/chk-7.ckpt", "checksum mismatch")
            .unwrap_err()
            .to_string();
        assert!(e.contains("checkpoint 7"), "{e}");
        let refused = OnDamaged::Refuse.damaged(7, "x", "y").unwrap_err();
        assert!(!refused.is_retryable() && refused.is_setup(), "{refused}");
        assert!(
            e.contains("/cp/chk-7.ckpt") && e.contains("checksum mismatch"),
            "{e}"
        );
        assert!(e.contains("on_damaged"), "{e}");
        assert!(OnDamaged::RestoreOlder.damaged(7, "x", "y").is_ok());
    }
}
