//! Which allocator is the default: parsed from `ACLALLOC_DEFAULT_ALLOCATOR`.
//!
//! | value | default allocator |
//! | --- | --- |
//! | unset, empty, `pool` | the caching pool (its settings from `ACLALLOC_ALLOC_CONF`), on the device current on the thread that first uses it |
//! | `device` | direct device memory (`aclrtMalloc`), no caching |
//! | `plugin:PATH:ALLOC:FREE` | a pluggable allocator loaded from the shared object PATH with the symbols ALLOC and FREE (PATH may contain ':') |

use crate::core::error::{Error, Result};
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

const BAD_VALUE: Error = Error::InvalidParam {
    param: "ACLALLOC_DEFAULT_ALLOCATOR",
    reason: "Expected pool, device or plugin:PATH:ALLOC_SYMBOL:FREE_SYMBOL",
};

impl Choice {
    /// Parses a value of [`ENV_VAR`]; `None` (unset) is [`DEFAULT`].
    pub fn parse(value: Option<&str>) -> Result<Choice> {
        let value = value.map(str::trim).unwrap_or("");
        match value {
            "" => Ok(DEFAULT),
            "pool" => Ok(Choice::Pool),
            "device" => Ok(Choice::Device),
            _ => {
                let spec = value.strip_prefix("plugin:").ok_or(BAD_VALUE)?;
                // Symbols cannot contain ':', the path may: split from the right.
                let mut parts = spec.rsplitn(3, ':');
                let (free, alloc, path) = (parts.next(), parts.next(), parts.next());
                match (path, alloc, free) {
                    (Some(p), Some(a), Some(f))
                        if !p.is_empty() && !a.is_empty() && !f.is_empty() =>
                    {
                        let c = |s: &str| CString::new(s).map_err(|_| BAD_VALUE);
                        Ok(Choice::Plugin {
                            path: c(p)?,
                            alloc: c(a)?,
                            free: c(f)?,
                        })
                    }
                    _ => Err(BAD_VALUE),
                }
            }
        }
    }

    /// The choice the environment makes.
    pub fn from_env() -> Result<Choice> {
        match std::env::var(ENV_VAR) {
            Ok(v) => Choice::parse(Some(&v)),
            Err(std::env::VarError::NotPresent) => Choice::parse(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(BAD_VALUE),
        }
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
            "Pool",
        ] {
            assert_eq!(Choice::parse(Some(bad)), Err(BAD_VALUE), "{bad}");
        }
    }
}
