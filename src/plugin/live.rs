//! The blocks an allocator has handed out (a pluggable one, or the default
//! allocator's raw functions), and its statistics.
//!
//! Every pointer the plugin returns is recorded with the size, device and
//! stream it was allocated for, so that free can pass them back (torch_npu's
//! free takes all four) and so that a pointer the plugin never returned is
//! refused before it reaches the plugin. A bounded memory of recently freed
//! pointers tells a double free from a foreign pointer in the message.

use crate::core::error::{Error, Result};
use std::collections::{HashMap, VecDeque};
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

/// How many freed pointers are remembered to name double frees.
const RECENTLY_FREED: usize = 1024;

/// The live blocks and the counters, kept under one lock so they always agree.
#[derive(Default)]
pub struct LiveTable {
    blocks: HashMap<usize, LiveBlock>,
    /// Freed pointers, oldest first, each with the sequence number of its free.
    freed_order: VecDeque<(usize, u64)>,
    /// Freed pointers not handed out since, with the sequence of their last free.
    freed: HashMap<usize, u64>,
    frees: u64,
    stats: Stats,
}

impl LiveTable {
    /// Records a block the plugin has just returned.
    pub fn insert(&mut self, ptr: usize, block: LiveBlock) -> Result<()> {
        self.blocks.try_reserve(1).map_err(|_| Error::BadAlloc {
            what: "the table of live blocks",
        })?;
        if self.blocks.contains_key(&ptr) {
            return Err(Error::Internal {
                reason: "the plugin's alloc returned a pointer that is still allocated",
            });
        }
        self.blocks.insert(ptr, block);
        // Its entry in `freed_order` stays and expires on its own (the
        // sequence number no longer matches): no scan on the alloc path.
        self.freed.remove(&ptr);
        let s = &mut self.stats;
        let size = block.size as u64;
        s.alloc_count += 1;
        s.active_count += 1;
        s.active_peak = s.active_peak.max(s.active_count);
        s.allocated_bytes_total += size;
        s.allocated_bytes_current += size;
        s.allocated_bytes_peak = s.allocated_bytes_peak.max(s.allocated_bytes_current);
        Ok(())
    }

    /// Takes a block out for freeing; a pointer not live here is refused.
    pub fn remove(&mut self, ptr: usize) -> Result<LiveBlock> {
        let Some(block) = self.blocks.remove(&ptr) else {
            self.stats.refused_free_count += 1;
            return Err(if self.freed.contains_key(&ptr) {
                Error::DoubleFree
            } else {
                Error::ForeignPointer
            });
        };
        if self.freed_order.len() == RECENTLY_FREED {
            if let Some((oldest, seq)) = self.freed_order.pop_front() {
                if self.freed.get(&oldest) == Some(&seq) {
                    self.freed.remove(&oldest);
                }
            }
        }
        self.frees += 1;
        self.freed_order.push_back((ptr, self.frees));
        self.freed.insert(ptr, self.frees);
        let s = &mut self.stats;
        let size = block.size as u64;
        s.free_count += 1;
        s.active_count -= 1;
        s.freed_bytes_total += size;
        s.allocated_bytes_current -= size;
        Ok(block)
    }

    /// Counts an allocation the plugin failed.
    pub fn count_failure(&mut self) {
        self.stats.failed_alloc_count += 1;
    }

    /// The block recorded for `ptr`, if it is live.
    pub fn get(&self, ptr: usize) -> Option<LiveBlock> {
        self.blocks.get(&ptr).copied()
    }

    /// The counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Peaks restart from the current values.
    pub fn reset_peaks(&mut self) {
        self.stats.allocated_bytes_peak = self.stats.allocated_bytes_current;
        self.stats.active_peak = self.stats.active_count;
    }

    /// Live blocks now.
    pub fn live(&self) -> usize {
        self.blocks.len()
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
        assert_eq!(t.freed.len(), RECENTLY_FREED);
        assert_eq!(t.remove(16), Err(Error::ForeignPointer), "forgotten");
        assert_eq!(t.remove((RECENTLY_FREED + 10) * 16), Err(Error::DoubleFree));
    }
}
