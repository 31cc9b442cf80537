//! `ACLALLOC_RECORD_HISTORY=N`: pools created through the C API (and the
//! default pool) record their last N events from creation, and so does the
//! tracking layer from when it is first turned on.

use std::ffi::OsStr;
use std::io::Write as _;

use crate::base::env;
use crate::base::error::Result;
use crate::base::sync::statics::AtomicBool;
use crate::base::sync::Ordering;

/// The variable.
pub const ENV_VAR: &str = "ACLALLOC_RECORD_HISTORY";

/// What the variable accepts, as its error message says.
const ACCEPTED: &str = "a whole number of events to keep (0: off), e.g. 100000";

/// The number of events to keep (0: unset, blank or off). A value that is
/// not a whole number is an error naming the variable, not silently ignored.
pub fn max_entries_from_env() -> Result<usize> {
    Ok(parse_raw(env::var(ENV_VAR).as_deref())?.unwrap_or(0))
}

/// Starts recording the variable's number of events with `start` (a pool's
/// `record_history`). A history that cannot be allocated is one line on
/// stderr (the first time) and no history: what records works on without it.
pub fn start_from_env<E: std::fmt::Display>(
    what: &str,
    start: impl FnOnce(usize) -> std::result::Result<(), E>,
) -> Result<()> {
    static TOLD: AtomicBool = AtomicBool::new(false);
    let entries = max_entries_from_env()?;
    if let Err(e) = start(entries) {
        if !TOLD.swap(true, Ordering::Relaxed) {
            let _ = writeln!(
                std::io::stderr(),
                "aclalloc: {ENV_VAR}={entries}: {e}; {what} records no history"
            );
        }
    }
    Ok(())
}

/// What a raw value of the variable says (`None`: unset or blank), for
/// readers that fetch the value themselves (without allocating, at load time).
pub fn parse_raw(raw: Option<&OsStr>) -> env::Result<Option<usize>> {
    env::parsed(ENV_VAR, raw, ACCEPTED, |text| {
        env::whole(text).and_then(|n| usize::try_from(n).ok())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(text: Option<&str>) -> env::Result<usize> {
        parse_raw(text.map(OsStr::new)).map(|n| n.unwrap_or(0))
    }

    #[test]
    fn a_number_or_nothing() {
        assert_eq!(parse_text(None).unwrap(), 0);
        assert_eq!(parse_text(Some("")).unwrap(), 0);
        assert_eq!(parse_text(Some(" 1000 ")).unwrap(), 1000);
        assert_eq!(parse_text(Some("0")).unwrap(), 0);
        for bad in ["-1", "1e5", "all", "10k"] {
            let message = parse_text(Some(bad)).unwrap_err().to_string();
            assert!(
                message.contains(ENV_VAR) && message.contains(bad) && message.contains(ACCEPTED),
                "{message}"
            );
        }
    }
}
