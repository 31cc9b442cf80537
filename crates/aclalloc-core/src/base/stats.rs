//! The one statistic type of the pool and the tracking layer (`aclallocStat`
//! in C).

/// One statistic: its current value, its peak since the last peak reset, and
/// the totals added and removed since the last accumulated reset.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    /// The value now.
    pub current: i64,
    /// The highest `current` since creation or `reset_peak_stats`.
    pub peak: i64,
    /// Everything ever added.
    pub allocated: i64,
    /// Everything ever removed.
    pub freed: i64,
}

impl Stat {
    /// `reset_peak_memory_stats`: the peak becomes the value now.
    pub fn reset_peak(&mut self) {
        self.peak = self.current;
    }

    /// `reset_accumulated_memory_stats`: the totals added and taken go to 0.
    pub fn reset_accumulated(&mut self) {
        self.allocated = 0;
        self.freed = 0;
    }

    /// `amount` more: the value and the total added grow, the peak follows.
    #[inline]
    pub fn increase(&mut self, amount: i64) {
        self.current += amount;
        self.allocated += amount;
        if self.current > self.peak {
            self.peak = self.current;
        }
    }

    /// `amount` less: the value shrinks, the total removed grows.
    #[inline]
    pub fn decrease(&mut self, amount: i64) {
        self.current -= amount;
        self.freed += amount;
    }
}
