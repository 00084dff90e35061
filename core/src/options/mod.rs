//! Option groups every connector shares, with one name and one meaning everywhere: durations
//! as files write them ([`duration`]), batching ([`Batch`]) and retries ([`Retry`]). Each is
//! a serde type with its JSON Schema — defaults included — so that a connector's options
//! struct, its pipeline-file section and its reference page take the group from one
//! declaration. TLS files are [`crate::tls::TlsFiles`].

mod batch;
pub mod duration;
mod retry;

pub use batch::{Batch, BatchDefaults};
pub use duration::DurationText;
pub use retry::Retry;
