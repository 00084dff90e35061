//! The S3 checkpoint store (`[checkpoint] store = "s3://…"`), built with the `s3-state`
//! feature; without it such a file is refused at start, naming the field.

use std::sync::Arc;
use std::time::Duration;

use rivus_sdk::checkpoint::{OnDamaged, StateBackend};
use rivus_sdk::Result;

/// The store at `url` (credentials from the environment), keeping `retain` checkpoints, held
/// under a `lease` when given.
#[cfg(feature = "s3-state")]
pub(crate) fn s3(
    url: &str,
    retain: usize,
    lease: Option<Duration>,
    on_damaged: OnDamaged,
) -> Result<Arc<dyn StateBackend>> {
    let mut c = rivus_state_s3::S3Config::from_env(url)?
        .retain(retain)
        .on_damaged(on_damaged);
    if let Some(l) = lease {
        c = c.lease(l);
    }
    Ok(Arc::new(rivus_state_s3::S3StateBackend::new(c)?))
}

/// Refused: this `rivus` was built without S3 checkpoint stores.
#[cfg(not(feature = "s3-state"))]
pub(crate) fn s3(
    _url: &str,
    _retain: usize,
    _lease: Option<Duration>,
    _on_damaged: OnDamaged,
) -> Result<Arc<dyn StateBackend>> {
    Err(rivus_sdk::Error::config(
        "checkpoint.store",
        "this rivus was built without S3 checkpoint stores (the `s3-state` feature); \
         use `dir`, or build rivus with its default features",
    ))
}
