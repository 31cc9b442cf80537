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
//! `ACLALLOC_ALLOC_CONF` gains the key once the configuration parser is
//! reworked; this file is the computation and the table.

use super::engine::MIN_BLOCK_SIZE;

/// Number of power-of-two intervals (1 MiB ... 64 GiB).
pub const ROUNDUP_INTERVALS: usize = 16;
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
    /// PyTorch: the first entry also covers every interval before it; `>`
    /// covers every interval after the previous entry. `None` unless every
    /// start and every division is a power of two.
    pub fn per_interval(entries: &[(Option<usize>, usize)]) -> Option<Self> {
        let mut table = [0usize; ROUNDUP_INTERVALS];
        let mut last = 0usize;
        for &(start_mib, divisions) in entries {
            if !divisions.is_power_of_two() {
                return None;
            }
            match start_mib {
                None => table[last..].fill(divisions),
                Some(mib) => {
                    if !mib.is_power_of_two() {
                        return None;
                    }
                    let index = (mib.ilog2() as usize).min(ROUNDUP_INTERVALS - 1);
                    if last == 0 {
                        table[..index].fill(divisions);
                    }
                    table[index] = divisions;
                    last = index;
                }
            }
        }
        Some(RoundupDivisions(table))
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
        if divisions > 1 && size > MIN_BLOCK_SIZE * divisions {
            next_division(size, divisions)
        } else {
            size.checked_next_multiple_of(MIN_BLOCK_SIZE)
        }
    }
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
        // [256:1,512:2,>:4]. PyTorch's parser fills `>` from the previous
        // entry's interval on, so the 512 MiB interval ends up with 4 too;
        // the same table here, so a PYTORCH_NPU_ALLOC_CONF string means the
        // same thing.
        let t =
            RoundupDivisions::per_interval(&[(Some(256), 1), (Some(512), 2), (None, 4)]).unwrap();
        assert_eq!(t.for_size(MIB), 1);
        assert_eq!(t.for_size(300 * MIB), 1);
        assert_eq!(t.for_size(600 * MIB), 4);
        assert_eq!(t.for_size(2048 * MIB), 4);
        assert_eq!(t.for_size(1 << 40), 4, "past 64 GiB: the last interval");
        // 600 MiB with 4 divisions: steps of 128 MiB between 512 and 1024.
        assert_eq!(t.round(600 * MIB), Some(640 * MIB));
        assert_eq!(t.round(300 * MIB), Some(300 * MIB));
        let two = RoundupDivisions::per_interval(&[(Some(256), 1), (Some(512), 2)]).unwrap();
        // 2 divisions: steps of 256 MiB between 512 and 1024.
        assert_eq!(two.round(600 * MIB), Some(768 * MIB));
        assert_eq!(two.for_size(2048 * MIB), 0, "not set: plain rounding");
        assert_eq!(two.round(2048 * MIB + 1), Some(2048 * MIB + 512));
        assert_eq!(RoundupDivisions::per_interval(&[(Some(300), 2)]), None);
        assert_eq!(RoundupDivisions::per_interval(&[(Some(256), 3)]), None);
    }
}
