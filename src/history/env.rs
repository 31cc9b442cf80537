//! `ACLALLOC_RECORD_HISTORY=N`: pools created through the C API (and the
//! default pool) record their last N events from creation. Read in one
//! place so that it can move to the crate's common environment parsing.

use crate::core::error::{Error, Result};

/// The variable.
pub const ENV_VAR: &str = "ACLALLOC_RECORD_HISTORY";

/// The number of events to keep (0: unset or off). A value that is not a
/// number is an error, not silently ignored.
pub fn max_entries_from_env() -> Result<usize> {
    parse(std::env::var(ENV_VAR).ok().as_deref())
}

fn parse(value: Option<&str>) -> Result<usize> {
    match value.map(str::trim) {
        None | Some("") => Ok(0),
        Some(v) => v.parse().map_err(|_| Error::InvalidParam {
            param: ENV_VAR,
            reason: "It must be the number of events to keep (0: off), e.g. ACLALLOC_RECORD_HISTORY=100000",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_or_nothing() {
        assert_eq!(parse(None).unwrap(), 0);
        assert_eq!(parse(Some("")).unwrap(), 0);
        assert_eq!(parse(Some(" 1000 ")).unwrap(), 1000);
        assert_eq!(parse(Some("0")).unwrap(), 0);
        for bad in ["-1", "1e5", "all", "10k"] {
            assert!(parse(Some(bad)).is_err(), "{bad}");
        }
    }
}
