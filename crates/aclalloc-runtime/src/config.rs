//! The host runtime's configuration, read once from the environment.
//!
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `ACLALLOC_DEVICE_COUNT` | number of devices, a whole number from 1 to [`MAX_DEVICES`] | 1 |
//! | `ACLALLOC_DEVICE_MEMORY` | memory capacity of each device: a size ([`env::size`]: bytes, or `16GiB`, `512MiB`, `1GB`: binary units), at least 4KiB | 4GiB |
//!
//! The capacity is a budget: only touched pages cost host memory.

use crate::base::env;
use crate::base::error::Result;
use std::ffi::OsString;

/// The most devices the runtime offers (CANN's servers have at most 16 NPUs;
/// the limit keeps a typo from creating thousands of worker pools).
pub const MAX_DEVICES: u32 = 64;

/// The default capacity of each device: one a laptop can honour.
pub const DEFAULT_DEVICE_MEMORY: usize = 4 << 30;

const COUNT_VAR: &str = "ACLALLOC_DEVICE_COUNT";
const MEMORY_VAR: &str = "ACLALLOC_DEVICE_MEMORY";

/// The devices the host runtime offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Number of devices.
    pub device_count: u32,
    /// Capacity of each device, in bytes.
    pub device_memory: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            device_count: 1,
            device_memory: DEFAULT_DEVICE_MEMORY,
        }
    }
}

impl Config {
    /// The configuration the process environment describes.
    pub fn from_env() -> Result<Config> {
        Self::from_lookup(env::var)
    }

    /// The configuration described by `lookup` (an environment).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<OsString>) -> Result<Config> {
        let mut config = Config::default();
        let count = lookup(COUNT_VAR);
        if let Some(n) = env::parsed(
            COUNT_VAR,
            count.as_deref(),
            "a whole number from 1 to 64",
            |text| {
                env::whole(text)
                    .filter(|n| (1..=MAX_DEVICES as u64).contains(n))
                    .map(|n| n as u32)
            },
        )? {
            config.device_count = n;
        }
        let memory = lookup(MEMORY_VAR);
        if let Some(bytes) = env::parsed(
            MEMORY_VAR,
            memory.as_deref(),
            "a size of at least 4KiB: bytes, or a whole number with a binary unit: K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, TiB (16GiB, 512MiB)",
            parse_size,
        )? {
            config.device_memory = bytes;
        }
        Ok(config)
    }
}

/// A device capacity: a size ([`env::size`]) of at least a page.
pub fn parse_size(text: &str) -> Option<usize> {
    env::size(text).filter(|&bytes| bytes >= 4096)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::error::Error;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn sizes_parse_in_binary_units() {
        assert_eq!(parse_size("16GiB"), Some(16 << 30));
        assert_eq!(parse_size("512 MiB"), Some(512 << 20));
        assert_eq!(parse_size("1g"), Some(1 << 30));
        assert_eq!(parse_size("8KB"), Some(8 << 10));
        assert_eq!(parse_size("1048576"), Some(1 << 20));
        assert_eq!(parse_size("2T"), Some(2 << 40));
        for bad in [
            "",
            "GiB",
            "12 parsecs",
            "-1GiB",
            "1.5GiB",
            "100",
            "4095",
            "99999999999999TiB",
        ] {
            assert_eq!(parse_size(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn defaults_and_overrides() {
        assert_eq!(Config::from_lookup(env(&[])).unwrap(), Config::default());
        let c = Config::from_lookup(env(&[(COUNT_VAR, "8"), (MEMORY_VAR, "64GiB")])).unwrap();
        assert_eq!((c.device_count, c.device_memory), (8, 64 << 30));
    }

    #[test]
    fn malformed_values_name_the_variable_the_value_and_the_range() {
        let (count, size) = ("a whole number from 1 to 64", "a size of at least 4KiB");
        for (var, value, accepted) in [
            (COUNT_VAR, "0", count),
            (COUNT_VAR, "65", count),
            (COUNT_VAR, "two", count),
            (MEMORY_VAR, "lots", size),
            (MEMORY_VAR, "1KiB", size),
        ] {
            match Config::from_lookup(env(&[(var, value)])) {
                Err(e @ Error::Config(c)) => {
                    assert_eq!(c.variable, var);
                    let text = e.to_string();
                    assert!(
                        text.starts_with(&format!(
                            "Environment variable {var} is invalid. Reason: the value \"{value}\" is not accepted; accepted: {accepted}"
                        )),
                        "{text}"
                    );
                }
                other => panic!("{var}={value}: {other:?}"),
            }
        }
    }

    #[test]
    fn blank_is_the_default_and_not_utf8_is_an_error() {
        assert_eq!(
            Config::from_lookup(env(&[("ACLALLOC_DEVICE_COUNT", " ")])).unwrap(),
            Config::default()
        );
        use std::os::unix::ffi::OsStringExt as _;
        let bad = |name: &str| (name == COUNT_VAR).then(|| OsString::from_vec(b"\xff".to_vec()));
        assert!(matches!(
            Config::from_lookup(bad),
            Err(Error::Config(env::ConfigError {
                variable: "ACLALLOC_DEVICE_COUNT",
                problem: env::Problem::NotUtf8,
                ..
            }))
        ));
    }
}
