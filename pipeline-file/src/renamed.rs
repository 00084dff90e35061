//! Options renamed: the old name keeps working for one release, with a warning naming the new
//! one.

use rivus_sdk::{Error, Result};

/// Takes the value of a renamed option: `old` (the value under `old_name`, if the file gave
/// one) becomes `new`'s value, with a warning; given both, the file is refused naming the
/// old one. `new_given` is whether the file gave `new_name` itself.
///
/// The old field stays in the section type for one release, marked for the schema and the
/// reference: `#[schemars(extend("deprecated" = true))]`, its doc comment naming the new key.
pub fn renamed<T>(
    old: Option<T>,
    old_name: &str,
    new: &mut T,
    new_name: &str,
    new_given: bool,
) -> Result<()> {
    let Some(value) = old else {
        return Ok(());
    };
    if new_given {
        return Err(Error::config(
            old_name,
            format!("the old name of `{new_name}`, which is given too: keep only `{new_name}`"),
        ));
    }
    tracing::warn!(
        "`{old_name}` is deprecated and goes in the next release: write `{new_name}` instead"
    );
    *new = value;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_old_name_gives_the_value_unless_the_new_one_is_given() {
        let mut n = 1000;
        renamed(Some(10), "max_actions", &mut n, "batch.max_records", false).unwrap();
        assert_eq!(n, 10);
        let e = renamed(Some(10), "max_actions", &mut n, "batch.max_records", true).unwrap_err();
        assert!(e.to_string().contains("max_actions"), "{e}");
        assert!(e.to_string().contains("batch.max_records"), "{e}");
        let mut m = 5;
        renamed(None, "max_actions", &mut m, "batch.max_records", false).unwrap();
        assert_eq!(m, 5);
    }
}
