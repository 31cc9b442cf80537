//! Per-allocator statistics, in the shape of the pool's (PyTorch's
//! `memory_stats` keys): each counter has `current`, `peak`, `allocated` and
//! `freed`, all signed 64-bit as in the pool's `Stat`.

/// One statistic: what is live now, the most that ever was, and the totals
/// that came and went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    /// Live now.
    pub current: i64,
    /// The highest `current` seen.
    pub peak: i64,
    /// Total added.
    pub allocated: i64,
    /// Total removed.
    pub freed: i64,
}

impl Stat {
    #[inline]
    pub(crate) fn add(&mut self, amount: u64) {
        let amount = amount as i64;
        self.current += amount;
        self.allocated += amount;
        if self.current > self.peak {
            self.peak = self.current;
        }
    }

    #[inline]
    pub(crate) fn sub(&mut self, amount: u64) {
        let amount = amount as i64;
        self.current -= amount;
        self.freed += amount;
    }
}

/// What the tracking layer counts for one allocator object.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocatorStats {
    /// Blocks (`allocation` in PyTorch's keys).
    pub allocation: Stat,
    /// Bytes requested from alloc (`allocated_bytes`).
    pub allocated_bytes: Stat,
    /// Calls of alloc that returned NULL.
    pub num_alloc_failures: u64,
}

impl AllocatorStats {
    /// The flat key/value form, with the pool's key names.
    pub fn flat(&self) -> Vec<(String, i64)> {
        let mut out = Vec::with_capacity(9);
        for (name, s) in [
            ("allocation", &self.allocation),
            ("allocated_bytes", &self.allocated_bytes),
        ] {
            out.push((format!("{name}.all.current"), s.current));
            out.push((format!("{name}.all.peak"), s.peak));
            out.push((format!("{name}.all.allocated"), s.allocated));
            out.push((format!("{name}.all.freed"), s.freed));
        }
        out.push(("num_alloc_failures".into(), self.num_alloc_failures as i64));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_follows_current_and_totals_accumulate() {
        let mut s = Stat::default();
        s.add(10);
        s.add(5);
        s.sub(10);
        s.add(2);
        assert_eq!(
            s,
            Stat {
                current: 7,
                peak: 15,
                allocated: 17,
                freed: 10
            }
        );
    }
}
