//! # rivus-aws
//!
//! What the rivus connectors that talk to AWS (or to stores that speak its APIs) share:
//!
//! - [`sigv4`]: request signatures, for the search connector's Amazon OpenSearch Service
//!   requests and for the S3 calls `object_store` does not make;
//! - `s3` (feature `s3`): an S3 location's settings (`s3://bucket/prefix`, endpoint, region,
//!   keys), the one way its client is built, and the store's errors as rivus errors — used by
//!   the files connector and the S3 checkpoint store.

#[cfg(feature = "s3")]
pub mod s3;
pub mod sigv4;
