//! Which allocator is the default: parsed from `ACLALLOC_DEFAULT_ALLOCATOR`.
//!
//! | value | default allocator |
//! | --- | --- |
//! | unset, empty, `pool` | the caching pool (its settings from `ACLALLOC_ALLOC_CONF`), one per device, each created when first used on its device |
//! | `device` | direct device memory (`aclrtMalloc`), no caching |
//! | `plugin:PATH:ALLOC:FREE` | a pluggable allocator loaded from the shared object PATH with the symbols ALLOC and FREE (PATH may contain ':') |
//!
//! The words `pool`, `device` and `plugin` are matched in any case (the
//! environment's rules, [`crate::base::env`]); PATH and the symbols as given.

use crate::base::env::{self, Accepted, ConfigError};
use crate::base::error::{Error, Result};
use std::ffi::CString;

/// The environment variable that chooses the default allocator at start-up.
pub const ENV_VAR: &str = "ACLALLOC_DEFAULT_ALLOCATOR";

/// A choice made by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    /// The caching pool.
    Pool,
    /// Direct device memory.
    Device,
    /// A pluggable allocator from a shared object.
    Plugin {
        /// The shared object.
        path: CString,
        /// Its alloc symbol.
        alloc: CString,
        /// Its free symbol.
        free: CString,
    },
}

/// What an unset or empty variable means: the caching pool.
pub const DEFAULT: Choice = Choice::Pool;

const ACCEPTED: Accepted = Accepted::Text("pool, device or plugin:PATH:ALLOC_SYMBOL:FREE_SYMBOL");

fn bad(value: &str) -> Error {
    ConfigError::value(ENV_VAR, value, ACCEPTED).into()
}

impl Choice {
    /// Parses a value of [`ENV_VAR`]; `None` (unset) is [`DEFAULT`].
    pub fn parse(value: Option<&str>) -> Result<Choice> {
        let value = value.map(str::trim).unwrap_or("");
        if value.is_empty() {
            return Ok(DEFAULT);
        }
        match env::word(value, &[("pool", Choice::Pool), ("device", Choice::Device)]) {
            Some(choice) => Ok(choice),
            None => {
                let spec = value
                    .get(..7)
                    .filter(|prefix| prefix.eq_ignore_ascii_case("plugin:"))
                    .map(|_| &value[7..])
                    .ok_or_else(|| bad(value))?;
                // Symbols cannot contain ':', the path may: split from the right.
                let mut parts = spec.rsplitn(3, ':');
                let (free, alloc, path) = (parts.next(), parts.next(), parts.next());
                match (path, alloc, free) {
                    (Some(p), Some(a), Some(f))
                        if !p.is_empty() && !a.is_empty() && !f.is_empty() =>
                    {
                        let c = |s: &str| CString::new(s).map_err(|_| bad(value));
                        Ok(Choice::Plugin {
                            path: c(p)?,
                            alloc: c(a)?,
                            free: c(f)?,
                        })
                    }
                    _ => Err(bad(value)),
                }
            }
        }
    }

    /// The choice the environment makes.
    pub fn from_env() -> Result<Choice> {
        let raw = env::var(ENV_VAR);
        Choice::parse(env::text(ENV_VAR, raw.as_deref(), ACCEPTED)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_as_documented() {
        assert_eq!(Choice::parse(None), Ok(DEFAULT));
        assert_eq!(Choice::parse(Some("")), Ok(DEFAULT));
        assert_eq!(Choice::parse(Some("pool")), Ok(Choice::Pool));
        assert_eq!(Choice::parse(Some(" device ")), Ok(Choice::Device));
        assert_eq!(Choice::parse(Some("Pool")), Ok(Choice::Pool));
        assert_eq!(
            Choice::parse(Some("PLUGIN:x.so:m:f")),
            Ok(Choice::Plugin {
                path: CString::new("x.so").unwrap(),
                alloc: CString::new("m").unwrap(),
                free: CString::new("f").unwrap(),
            })
        );
        assert_eq!(
            Choice::parse(Some("plugin:/opt/a:b/libx.so:my_malloc:my_free")),
            Ok(Choice::Plugin {
                path: CString::new("/opt/a:b/libx.so").unwrap(),
                alloc: CString::new("my_malloc").unwrap(),
                free: CString::new("my_free").unwrap(),
            })
        );
        for bad in [
            "caching",
            "plugin:",
            "plugin:x.so:m",
            "plugin::m:f",
            "plugin:x.so::f",
            "pools",
            "plugin",
        ] {
            let message = Choice::parse(Some(bad)).unwrap_err().to_string();
            assert_eq!(
                message,
                format!("Environment variable ACLALLOC_DEFAULT_ALLOCATOR is invalid. Reason: the value \"{bad}\" is not accepted; accepted: pool, device or plugin:PATH:ALLOC_SYMBOL:FREE_SYMBOL"),
            );
        }
    }
}
