//! PyTorch's `roundup_power2_divisions`: requests are rounded up to one of
//! `n` equal steps between two powers of two instead of to 512 bytes, so
//! that slightly different sizes share cached blocks (fewer, larger size
//! classes; less fragmentation under dynamic shapes).
//!
//! The divisions are set per power-of-two interval of the request size,
//! from 1 MiB (everything below uses the first interval) to 64 GiB: 16
//! intervals, as in PyTorch's `CachingAllocatorConfig`. 0 or 1 divisions:
//! plain 512-byte rounding.
//!
//! `roundup_power2_divisions` in `ACLALLOC_ALLOC_CONF` ([`RoundupDivisions::parse`])
//! and `aclallocPoolConfig.roundup_power2_divisions` set the table; the pool
//! rounds every request with [`RoundupDivisions::round`] (PyTorch's
//! `round_size`).
//!
//! PyTorch's parser (c10's allocator configuration), with its quirks, kept
//! so that a `PYTORCH_NPU_ALLOC_CONF` string means the same here:
//!
//! - a plain number `n` sets every interval; it must be a power of two (1 is
//!   one, and means plain rounding; 0 is refused);
//! - in a list, an interval start is a power of two in MiB and is the start
//!   (not the end) of the interval it sets: `512:2` sets [512 MiB, 1 GiB);
//!   starts from 32768 MiB on all set the last interval ([32, 64) GiB and
//!   everything above);
//! - the first start given also sets every interval below it;
//! - `>:n` sets every interval after the one set last (PyTorch 2.8 on, and
//!   torch_npu on that base; the older `c10/cuda/CUDAAllocatorConfig.cpp`
//!   also overwrote the interval set last, so `[256:1,512:2,>:4]` gave
//!   [512 MiB, 1 GiB) 4 divisions instead of 2); a `>` first leaves the
//!   first interval (below 2 MiB) at 0;
//! - divisions in a list may be 0 (plain rounding) or a power of two;
//! - requests below 1 MiB use the first interval, so with 4 divisions a
//!   3000-byte request becomes 3072 bytes.

use super::engine::MIN_BLOCK_SIZE;
use crate::core::env;

/// What `roundup_power2_divisions` accepts, for messages.
pub const ACCEPTED: &str = "a power of two (divisions for every size), or [MiB:divisions,...,>:divisions] with each MiB a power of two and each divisions 0 or a power of two, e.g. [256:1,512:2,1024:4,>:8]";

/// Number of power-of-two intervals (1 MiB ... 64 GiB).
pub(crate) const ROUNDUP_INTERVALS: usize = 16;
/// log2 of the first interval's start (1 MiB).
const INTERVAL_START_LOG2: u32 = 20;

/// Divisions per interval (`[0; 16]`: off).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RoundupDivisions(pub [usize; ROUNDUP_INTERVALS]);

impl RoundupDivisions {
    /// The same divisions for every size (`roundup_power2_divisions:4`).
    /// `None` unless `divisions` is a power of two.
    pub fn uniform(divisions: usize) -> Option<Self> {
        divisions
            .is_power_of_two()
            .then_some(RoundupDivisions([divisions; ROUNDUP_INTERVALS]))
    }

    /// Per-interval divisions (`[256:1,512:2,>:4]`): each entry is
    /// (interval start in MiB, or `None` for `>`, divisions). As in
    /// PyTorch: the first start also covers every interval before it; `>`
    /// covers every interval after the one set last. `None` unless every
    /// start is a power of two and every division 0 or a power of two.
    pub fn per_interval(entries: &[(Option<usize>, usize)]) -> Option<Self> {
        let mut table = [0usize; ROUNDUP_INTERVALS];
        let mut last = 0usize;
        let mut first = true;
        for &(start_mib, divisions) in entries {
            if divisions != 0 && !divisions.is_power_of_two() {
                return None;
            }
            match start_mib {
                None => table[(last + 1).min(ROUNDUP_INTERVALS)..].fill(divisions),
                Some(mib) => {
                    if !mib.is_power_of_two() {
                        return None;
                    }
                    let index = (mib.ilog2() as usize).min(ROUNDUP_INTERVALS - 1);
                    if first {
                        table[..index].fill(divisions);
                        first = false;
                    }
                    table[index] = divisions;
                    last = index;
                }
            }
        }
        Some(RoundupDivisions(table))
    }

    /// The value of `roundup_power2_divisions`: a number (`4`) or a list
    /// (`[256:1,512:2,>:8]`, entries `MiB:divisions` or `>:divisions`,
    /// spaces and empty entries ignored). `None` when malformed or refused
    /// by the rules above.
    pub fn parse(value: &str) -> Option<Self> {
        let value = value.trim();
        let Some(list) = value.strip_prefix('[') else {
            return Self::uniform(whole(value)?);
        };
        let list = list.strip_suffix(']')?;
        let mut entries = Vec::new();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (start, divisions) = entry.split_once(':')?;
            let start = match start.trim() {
                ">" => None,
                mib => Some(whole(mib)?),
            };
            entries.push((start, whole(divisions)?));
        }
        Self::per_interval(&entries)
    }

    /// True when some interval rounds to divisions (not all 0 or 1).
    pub fn is_set(&self) -> bool {
        self.0.iter().any(|&d| d > 1)
    }

    /// The divisions that apply to a request of `size` bytes.
    pub fn for_size(&self, size: usize) -> usize {
        let log = size.max(1).ilog2();
        let index = log.saturating_sub(INTERVAL_START_LOG2) as usize;
        self.0[index.min(ROUNDUP_INTERVALS - 1)]
    }

    /// PyTorch's `round_size`: at least 512 bytes; with 2 or more divisions
    /// (and a size above 512 x divisions), up to the next of the equal steps
    /// between the powers of two around `size`; otherwise up to 512 bytes.
    /// `None` on overflow.
    pub fn round(&self, size: usize) -> Option<usize> {
        if size < MIN_BLOCK_SIZE {
            return Some(MIN_BLOCK_SIZE);
        }
        let divisions = self.for_size(size);
        if divisions > 1 && size > MIN_BLOCK_SIZE.saturating_mul(divisions) {
            next_division(size, divisions)
        } else {
            size.checked_next_multiple_of(MIN_BLOCK_SIZE)
        }
    }
}

/// A whole number (`core::env`'s syntax) that fits a `usize`.
fn whole(text: &str) -> Option<usize> {
    usize::try_from(env::whole(text)?).ok()
}

/// `size` rounded up to the next of `divisions` equal steps between the
/// power of two at or below it and the next one.
fn next_division(size: usize, divisions: usize) -> Option<usize> {
    if size.is_power_of_two() {
        return Some(size);
    }
    let floor = 1usize << size.ilog2();
    let step = floor >> divisions.ilog2();
    if step == 0 {
        return floor.checked_mul(2);
    }
    let down = size & !(step - 1);
    if down == size {
        Some(size)
    } else {
        down.checked_add(step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    #[test]
    fn off_rounds_to_512_bytes() {
        let off = RoundupDivisions::default();
        assert_eq!(off.round(1), Some(512));
        assert_eq!(off.round(513), Some(1024));
        assert_eq!(off.round(5 * MIB + 1), Some(5 * MIB + 512));
    }

    #[test]
    fn uniform_divisions_match_pytorch() {
        let four = RoundupDivisions::uniform(4).unwrap();
        // 1200 MiB lies between 1024 and 2048: steps of 256 MiB -> 1280 MiB.
        assert_eq!(four.round(1200 * MIB), Some(1280 * MIB));
        assert_eq!(four.round(1280 * MIB), Some(1280 * MIB));
        assert_eq!(four.round(1024 * MIB), Some(1024 * MIB));
        // 5 MiB + 1: between 4 and 8 MiB, steps of 1 MiB -> 6 MiB.
        assert_eq!(four.round(5 * MIB + 1), Some(6 * MIB));
        // At most 512 x divisions: plain rounding.
        assert_eq!(four.round(2000), Some(2048));
        assert_eq!(four.round(2049), Some(2560));
        assert_eq!(RoundupDivisions::uniform(3), None);
        assert_eq!(four.round(usize::MAX - 5), None);
    }

    #[test]
    fn per_interval_table_follows_pytorch() {
        // [256:1,512:2,>:4]: 256 sets [256, 512) MiB and everything below,
        // 512 sets [512, 1024) MiB, `>` everything from 1 GiB on.
        let t =
            RoundupDivisions::per_interval(&[(Some(256), 1), (Some(512), 2), (None, 4)]).unwrap();
        assert_eq!(t.for_size(MIB), 1);
        assert_eq!(t.for_size(300 * MIB), 1);
        assert_eq!(t.for_size(600 * MIB), 2);
        assert_eq!(t.for_size(1024 * MIB), 4);
        assert_eq!(t.for_size(2048 * MIB), 4);
        assert_eq!(t.for_size(1 << 40), 4, "past 64 GiB: the last interval");
        // 600 MiB with 2 divisions: steps of 256 MiB between 512 and 1024.
        assert_eq!(t.round(600 * MIB), Some(768 * MIB));
        assert_eq!(t.round(300 * MIB), Some(300 * MIB));
        // 1200 MiB with 4 divisions: steps of 256 MiB between 1 and 2 GiB.
        assert_eq!(t.round(1200 * MIB), Some(1280 * MIB));
        let two = RoundupDivisions::per_interval(&[(Some(256), 1), (Some(512), 2)]).unwrap();
        assert_eq!(two.for_size(2048 * MIB), 0, "not set: plain rounding");
        assert_eq!(two.round(2048 * MIB + 1), Some(2048 * MIB + 512));
        assert_eq!(RoundupDivisions::per_interval(&[(Some(300), 2)]), None);
        assert_eq!(RoundupDivisions::per_interval(&[(Some(256), 3)]), None);
        // 0 divisions in a list: plain rounding for that interval.
        let zero = RoundupDivisions::per_interval(&[(Some(1), 4), (Some(2), 0)]).unwrap();
        assert_eq!(zero.round(3 * MIB + 1), Some(3 * MIB + 512));
        assert_eq!(zero.round(MIB + 1), Some(MIB + MIB / 4));
    }

    #[test]
    fn parses_pytorch_syntax_with_its_quirks() {
        let parse = RoundupDivisions::parse;
        assert_eq!(parse("4"), RoundupDivisions::uniform(4));
        assert_eq!(parse(" 1 "), Some(RoundupDivisions([1; ROUNDUP_INTERVALS])));
        for bad in [
            "0", "3", "-4", "4.0", "x", "", "[256:1", "256:1]", "[256]", "[256:3]",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
        for bad in ["[300:2]", "[0:2]", "[256:1,x:2]", "[>:3]", "[256:1,512:-2]"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
        let t = parse("[256:1, 512:2, 1024:4, >:8]").unwrap();
        let mut want = [1usize; ROUNDUP_INTERVALS];
        want[9] = 2;
        want[10] = 4;
        want[11..].fill(8);
        assert_eq!(t.0, want);
        // The first start fills below it, not the later ones.
        let t = parse("[64:2,16:8]").unwrap();
        assert_eq!(&t.0[..7], &[2, 2, 2, 2, 8, 2, 2]);
        // `>` first: every interval after the first; the first stays 0.
        let t = parse("[>:4]").unwrap();
        assert_eq!(t.0[0], 0);
        assert!(t.0[1..].iter().all(|&d| d == 4));
        // Starts past 32 GiB all set the last interval.
        let t = parse("[65536:2]").unwrap();
        assert_eq!(t.0, [2; ROUNDUP_INTERVALS]);
        assert_eq!(parse("[]"), Some(RoundupDivisions::default()));
        assert_eq!(parse("[256:1,]"), parse("[256:1]"));
    }

    #[test]
    fn small_requests_use_the_first_interval() {
        let four = RoundupDivisions::uniform(4).unwrap();
        assert_eq!(four.round(3000), Some(3072));
        assert_eq!(four.round(0), Some(512));
        assert!(four.is_set());
        assert!(!RoundupDivisions::uniform(1).unwrap().is_set());
        assert!(!RoundupDivisions::default().is_set());
    }
}
