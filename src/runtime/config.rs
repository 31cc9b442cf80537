//! The host runtime's configuration, read once from the environment.
//!
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `ACLALLOC_DEVICE_COUNT` | number of devices, 1 to [`MAX_DEVICES`] | 1 |
//! | `ACLALLOC_DEVICE_MEMORY` | memory capacity of each device: bytes, or a number with `KiB`, `MiB`, `GiB`, `TiB` (or `K`, `M`, `G`, `T`, `KB`, ...: all binary) | 4GiB |
//!
//! The capacity is a budget, not a reservation: device memory is mapped per
//! allocation and only pages that are touched cost host memory, so a large
//! capacity is free until used.

use crate::core::error::{Error, Result};

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
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// The configuration described by `lookup` (an environment).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Config> {
        let mut config = Config::default();
        if let Some(count) = lookup(COUNT_VAR) {
            config.device_count = match count.trim().parse::<u32>() {
                Ok(n) if (1..=MAX_DEVICES).contains(&n) => n,
                _ => {
                    return Err(Error::Config {
                        variable: COUNT_VAR,
                        reason: "it must be a whole number from 1 to 64",
                    })
                }
            };
        }
        if let Some(memory) = lookup(MEMORY_VAR) {
            config.device_memory = parse_size(&memory).ok_or(Error::Config {
                variable: MEMORY_VAR,
                reason: "it must be a size such as 16GiB, 512MiB or 1073741824, at least one page",
            })?;
        }
        Ok(config)
    }
}

/// Parses "16GiB", "512 MiB", "1G", "4096": binary units, case-insensitive.
/// Sizes below a page or that overflow are refused.
pub fn parse_size(text: &str) -> Option<usize> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let number: usize = digits.parse().ok()?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return None,
    };
    let bytes = number.checked_mul(1usize << shift)?;
    (bytes >= 4096).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
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
            "99999999999999TiB",
        ] {
            assert_eq!(parse_size(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn defaults_and_overrides() {
        assert_eq!(Config::from_lookup(env(&[])).unwrap(), Config::default());
        let c = Config::from_lookup(env(&[
            ("ACLALLOC_DEVICE_COUNT", "8"),
            ("ACLALLOC_DEVICE_MEMORY", "64GiB"),
        ]))
        .unwrap();
        assert_eq!((c.device_count, c.device_memory), (8, 64 << 30));
    }

    #[test]
    fn malformed_values_name_the_variable() {
        for (var, value) in [
            ("ACLALLOC_DEVICE_COUNT", "0"),
            ("ACLALLOC_DEVICE_COUNT", "65"),
            ("ACLALLOC_DEVICE_COUNT", "two"),
            ("ACLALLOC_DEVICE_MEMORY", "lots"),
        ] {
            match Config::from_lookup(env(&[(var, value)])) {
                Err(Error::Config { variable, .. }) => assert_eq!(variable, var),
                other => panic!("{var}={value}: {other:?}"),
            }
        }
    }
}
