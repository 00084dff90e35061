//! The one place the object store's errors become rivus errors: `rivus-aws`'s mapping (a
//! refused key or permission refused, an invalid path or an unsupported operation permanent,
//! the rest transient), shared with the S3 checkpoint store.

pub(crate) use rivus_aws::s3::store_error;
