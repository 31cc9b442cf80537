//! The blocks an allocator has handed out (a pluggable one, or the default
//! allocator's raw functions), and its statistics, kept in the one
//! tracked-allocations adaptor ([`crate::base::tracked`]).
//!
//! Every pointer the plugin returns is recorded with the size, device and
//! stream it was allocated for, so that free can pass them back (torch_npu's
//! free takes all four) and so that a pointer the plugin never returned is
//! refused before it reaches the plugin. The most recent frees are
//! remembered to tell a double free from a foreign pointer in the message.

use crate::base::error::{Error, Result};
use crate::base::tracked::{
    Block, Counters, Guard, History, Meta, Refused, Tracked, INSPECTOR, META_WORDS,
};
use std::ffi::c_void;

/// What was passed to the plugin's alloc for one live block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveBlock {
    /// The allocator's own handle for the memory (for a plugin, the pointer
    /// itself; for a descriptor-based allocator, its block).
    pub block: usize,
    /// The bytes requested.
    pub size: usize,
    /// The device passed to alloc.
    pub device: i32,
    /// The stream passed to alloc (0 for NULL).
    pub stream: usize,
}

impl LiveBlock {
    /// The stream as the plugin receives it.
    pub fn stream_ptr(&self) -> *mut c_void {
        self.stream as *mut c_void
    }
}

/// Statistics of one allocator, in the spirit of PyTorch's `memory_stats`
/// (which its pluggable allocator does not offer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Bytes in live blocks now.
    pub allocated_bytes_current: u64,
    /// The most bytes live at once since creation or the last peak reset.
    pub allocated_bytes_peak: u64,
    /// Bytes ever allocated.
    pub allocated_bytes_total: u64,
    /// Bytes ever freed.
    pub freed_bytes_total: u64,
    /// Successful allocations.
    pub alloc_count: u64,
    /// Successful frees.
    pub free_count: u64,
    /// Live blocks now.
    pub active_count: u64,
    /// The most live blocks at once since creation or the last peak reset.
    pub active_peak: u64,
    /// Allocations the plugin answered with NULL.
    pub failed_alloc_count: u64,
    /// Frees refused (foreign pointers and double frees).
    pub refused_free_count: u64,
}

impl From<Counters> for Stats {
    /// The flat C view of the adaptor's counters.
    fn from(c: Counters) -> Self {
        let n = |v: i64| u64::try_from(v).unwrap_or(0);
        Stats {
            allocated_bytes_current: n(c.allocated_bytes.current),
            allocated_bytes_peak: n(c.allocated_bytes.peak),
            allocated_bytes_total: n(c.allocated_bytes.allocated),
            freed_bytes_total: n(c.allocated_bytes.freed),
            alloc_count: n(c.allocation.allocated),
            free_count: n(c.allocation.freed),
            active_count: n(c.allocation.current),
            active_peak: n(c.allocation.peak),
            failed_alloc_count: c.failed_allocs,
            refused_free_count: c.refused_frees,
        }
    }
}

/// How many freed pointers are remembered to name double frees.
pub(crate) const RECENTLY_FREED: usize = 1024;

/// What the adaptor keeps per block beside its size and stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PluginMeta {
    block: usize,
    device: i32,
}

impl Meta for PluginMeta {
    #[inline]
    fn pack(&self) -> [usize; META_WORDS] {
        [self.block, self.device as u32 as usize, 0, 0]
    }
    #[inline]
    fn unpack(w: &[usize; META_WORDS]) -> Self {
        PluginMeta {
            block: w[0],
            device: w[1] as u32 as i32,
        }
    }
}

/// The adaptor as a pluggable allocator keeps it.
pub type Books = Tracked<PluginMeta>;

/// New books remembering the most recent frees.
pub fn books() -> Books {
    Tracked::new(History::Recent(RECENTLY_FREED), ())
}

/// The owner a pluggable allocator enters its books as: it has no stream
/// rule, so every caller is the same owner (they take turns, nothing is
/// reported).
pub(crate) const ANY_CALLER: usize = 1;

/// The live block of an adaptor record.
#[inline]
pub(crate) fn live_block(b: &Block<PluginMeta>) -> LiveBlock {
    LiveBlock {
        block: b.meta.block,
        size: b.size,
        device: b.meta.device,
        stream: b.owner,
    }
}

/// Records `block` for `ptr`; a pointer still live is an internal error.
#[inline]
pub fn insert(books: &Books, ptr: usize, block: LiveBlock) -> Result<()> {
    let meta = PluginMeta {
        block: block.block,
        device: block.device,
    };
    let mut g = books.enter_brief(ANY_CALLER, |_| {}).ok_or(REENTERED)?;
    g.insert(ptr, block.size, block.stream, meta)
        .map_err(|_| Error::Internal {
            reason: "the plugin's alloc returned a pointer that is still allocated",
        })
}

/// Takes `ptr`'s block out for freeing; a pointer not live is refused.
#[inline]
pub fn remove(books: &Books, ptr: usize) -> Result<LiveBlock> {
    let mut g = books.enter_brief(ANY_CALLER, |_| {}).ok_or(REENTERED)?;
    match g.free(ptr, 0, 0) {
        Ok(b) => Ok(live_block(&b)),
        Err(Refused::DoubleFree(_)) => Err(Error::DoubleFree),
        Err(Refused::Unknown) => Err(Error::ForeignPointer),
    }
}

/// The books are entered from inside themselves: only a callback that
/// calls back into the allocator while its books are being changed could.
const REENTERED: Error = Error::Internal {
    reason: "the allocator's books were entered again from inside an update",
};

/// Runs `f` on the books (statistics, peak resets, counts).
pub fn with<R>(books: &Books, f: impl FnOnce(&mut Guard<'_, PluginMeta, ()>) -> R) -> Result<R> {
    let mut g = books.enter(INSPECTOR, |_| {}).ok_or(REENTERED)?;
    Ok(f(&mut g))
}

/// The live blocks and the counters of an allocator whose callers serialise
/// themselves (the default allocator's raw functions, under its own lock).
pub struct LiveTable {
    books: Books,
}

impl Default for LiveTable {
    fn default() -> Self {
        LiveTable { books: books() }
    }
}

impl LiveTable {
    /// Records a block the plugin has just returned.
    pub fn insert(&mut self, ptr: usize, block: LiveBlock) -> Result<()> {
        insert(&self.books, ptr, block)
    }

    /// Takes a block out for freeing; a pointer not live here is refused.
    pub fn remove(&mut self, ptr: usize) -> Result<LiveBlock> {
        remove(&self.books, ptr)
    }

    /// Counts an allocation the plugin failed.
    pub fn count_failure(&mut self) {
        let _ = with(&self.books, |g| g.count_failure());
    }

    /// The block recorded for `ptr`, if it is live (lock-free).
    pub fn get(&self, ptr: usize) -> Option<LiveBlock> {
        self.books
            .lookup(ptr)
            .filter(Block::is_live)
            .map(|b| live_block(&b))
    }

    /// The counters.
    pub fn stats(&self) -> Stats {
        with(&self.books, |g| g.counters()).map_or_else(|_| Stats::default(), Stats::from)
    }

    /// Peaks restart from the current values.
    pub fn reset_peaks(&mut self) {
        let _ = with(&self.books, |g| g.counters_mut().reset_peaks());
    }

    /// Live blocks now.
    pub fn live(&self) -> usize {
        with(&self.books, |g| g.live_count()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(size: usize) -> LiveBlock {
        LiveBlock {
            block: 0,
            size,
            device: 0,
            stream: 0x10,
        }
    }

    #[test]
    fn stats_follow_allocs_and_frees_and_peaks_reset_to_current() {
        let mut t = LiveTable::default();
        t.insert(0x1000, block(100)).unwrap();
        t.insert(0x2000, block(50)).unwrap();
        assert_eq!(t.remove(0x1000).unwrap(), block(100));
        let s = t.stats();
        assert_eq!(
            (
                s.allocated_bytes_current,
                s.allocated_bytes_peak,
                s.active_count,
                s.active_peak
            ),
            (50, 150, 1, 2)
        );
        assert_eq!((s.alloc_count, s.free_count), (2, 1));
        assert_eq!((s.allocated_bytes_total, s.freed_bytes_total), (150, 100));
        t.reset_peaks();
        assert_eq!(t.stats().allocated_bytes_peak, 50);
        assert_eq!(t.stats().active_peak, 1);
    }

    #[test]
    fn foreign_and_double_frees_are_refused_and_told_apart() {
        let mut t = LiveTable::default();
        t.insert(0x1000, block(8)).unwrap();
        assert_eq!(t.remove(0x3000), Err(Error::ForeignPointer));
        t.remove(0x1000).unwrap();
        assert_eq!(t.remove(0x1000), Err(Error::DoubleFree));
        assert_eq!(t.stats().refused_free_count, 2);
        assert_eq!(t.stats().allocated_bytes_current, 0);
        // Handed out again: live, not "already freed".
        t.insert(0x1000, block(8)).unwrap();
        assert_eq!(t.get(0x1000), Some(block(8)));
        t.remove(0x1000).unwrap();
    }

    #[test]
    fn a_pointer_returned_twice_while_live_is_an_error() {
        let mut t = LiveTable::default();
        t.insert(0x1000, block(8)).unwrap();
        assert!(matches!(
            t.insert(0x1000, block(16)),
            Err(Error::Internal { .. })
        ));
        assert_eq!(t.get(0x1000), Some(block(8)));
        assert_eq!(t.stats().alloc_count, 1);
    }

    #[test]
    fn the_memory_of_freed_pointers_is_bounded() {
        let mut t = LiveTable::default();
        for i in 1..=(RECENTLY_FREED + 10) {
            t.insert(i * 16, block(1)).unwrap();
            t.remove(i * 16).unwrap();
        }
        let kept = with(&t.books, |g| g.freed_count()).unwrap();
        assert!(
            (RECENTLY_FREED / 2..=RECENTLY_FREED).contains(&kept),
            "{kept}"
        );
        assert_eq!(t.remove(16), Err(Error::ForeignPointer), "forgotten");
        assert_eq!(t.remove((RECENTLY_FREED + 10) * 16), Err(Error::DoubleFree));
    }
}
