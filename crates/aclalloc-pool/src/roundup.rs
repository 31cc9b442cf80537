//! PyTorch's `roundup_power2_divisions`: requests are rounded up to one of
//! `n` equal steps between two powers of two instead of to 512 bytes, so
//! that slightly different sizes share cached blocks. The divisions are set
//! per power-of-two interval of the request size, 16 from 1 MiB (everything
//! below uses the first) to 64 GiB; 0 or 1: plain 512-byte rounding.
//!
//! The parser keeps PyTorch's quirks, so a `PYTORCH_NPU_ALLOC_CONF` string
//! means the same here: a plain number must be a power of two; a list entry
//! `512:2` sets the interval *starting* at 512 MiB (starts from 32 GiB on
//! set the last one); the first start also sets every interval below it;
//! `>:n` sets every interval after the one set last (PyTorch 2.8's rule; a
//! `>` first leaves the first interval at 0).

use super::engine::MIN_BLOCK_SIZE;
use crate::base::env;

/// What `roundup_power2_divisions` accepts, for messages.
pub const ACCEPTED: &str = "a power of two (divisions for every size), or [MiB:divisions,...,>:divisions] with each MiB a power of two and each divisions 0 or a power of two, e.g. [256:1,512:2,1024:4,>:8]";

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

    /// Per-interval divisions (`[256:1,512:2,>:4]`) as (start in MiB, `None` for
    /// `>`; divisions); `None` unless starts and divisions are powers of two (or 0).
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

    /// The value of `roundup_power2_divisions`: `4` or `[256:1,512:2,>:8]`;
    /// `None` when malformed or refused by the rules above.
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

    /// PyTorch's `round_size`: with 2 or more divisions (and `size` above 512 x
    /// divisions) up to the next equal step between powers of two, else up to
    /// 512 bytes. `None` on overflow.
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

/// A whole number (`base::env`'s syntax) that fits a `usize`.
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
