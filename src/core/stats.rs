//! The one statistic type: the pool's, the tracking layer's and the
//! pluggable allocators' figures are all counted in it (`aclallocStat` in C).

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
