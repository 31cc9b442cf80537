//! Expandable segments (PyTorch's `expandable_segments:True`): one large
//! reservation of address space per (stream, small/large pool), backed one
//! page at a time, so a free range anywhere serves a request of any size.
//!
//! The reservation is one block list, carved, split and merged as a fixed
//! segment; handing out a block maps its unmapped pages, releasing unmaps
//! pages holding no live block (tracked per page, unlike PyTorch).
//! `reserved_bytes` counts mapped pages. A stream whose reservation is full
//! gets another one.
//!
//! Unmapping does not wait for streams: callers synchronize the device first
//! with no lock held, since a stream's worker may need this pool's locks.

use super::*;
use crate::virtual_memory::VirtualMemory;

/// The mapped pages of one expandable segment.
pub(crate) struct PageMap {
    page: usize,
    /// Per page: the token of its physical memory, `None` when unmapped.
    tokens: Vec<Option<NonZeroUsize>>,
    /// Bytes mapped.
    pub(crate) mapped: usize,
}

/// Address space reserved per (stream, pool), in device capacities, as
/// PyTorch does (the 1/8 leaves room to map at the end).
fn reservation_size(capacity: usize, rounded: usize, page: usize) -> usize {
    let want = capacity.saturating_add(capacity / 8).max(rounded);
    round_up(want, page)
}

impl Core {
    /// True when `seg` is an expandable segment.
    #[inline]
    pub(crate) fn is_expandable(&self, seg: u32) -> bool {
        self.segments[seg].expandable
    }

    /// Bytes of `seg` that count as reserved: all of a fixed segment, the
    /// mapped pages of an expandable one.
    pub(crate) fn reserved_of(&self, seg: u32) -> usize {
        match self.pages.get(&seg) {
            Some(p) => p.mapped,
            None => self.segments[seg].size,
        }
    }

    /// Page indices of `seg` overlapping `[addr, addr + len)`.
    fn page_span(&self, seg: u32, addr: usize, len: usize) -> std::ops::Range<usize> {
        let s = self.segments[seg];
        let page = self.pages[&seg].page;
        let first = (addr - s.addr) / page;
        let end = (addr + len - s.addr).div_ceil(page);
        first..end
    }

    /// True when every page under `[addr, addr + len)` of `seg` is mapped.
    pub(crate) fn is_mapped(&self, seg: u32, addr: usize, len: usize) -> bool {
        let span = self.page_span(seg, addr, len);
        self.pages[&seg].tokens[span].iter().all(Option::is_some)
    }

    /// Maps the unmapped pages under `[addr, addr + len)` of `seg` within `room`
    /// new bytes; all or nothing.
    pub(crate) fn map_range(
        &mut self,
        vm: &dyn VirtualMemory,
        seg: u32,
        addr: usize,
        len: usize,
        room: usize,
    ) -> bool {
        let span = self.page_span(seg, addr, len);
        let base = self.segments[seg].addr;
        let kind = self.segments[seg].kind;
        let pm = self
            .pages
            .get_mut(&seg)
            .expect("an expandable segment has a page map");
        let page = pm.page;
        let missing = pm.tokens[span.clone()]
            .iter()
            .filter(|t| t.is_none())
            .count();
        if missing.saturating_mul(page) > room {
            return false;
        }
        let mut done = Vec::new();
        for i in span {
            if pm.tokens[i].is_some() {
                continue;
            }
            match vm.map_page(base + i * page) {
                Some(token) => {
                    pm.tokens[i] = Some(token);
                    done.push(i);
                }
                None => {
                    for j in done {
                        if let Some(token) = pm.tokens[j].take() {
                            vm.unmap_page(base + j * page, token);
                        }
                    }
                    return false;
                }
            }
        }
        let bytes = done.len() * page;
        pm.mapped += bytes;
        let s = &mut self.stats;
        for i in [STAT_ALL, kind.index()] {
            s.reserved_bytes[i].increase(bytes as i64);
        }
        s.num_device_alloc += done.len() as i64;
        true
    }

    /// A new expandable segment for (`kind`, `stream`) able to hold a block
    /// of `rounded` bytes; its whole range is one free, unmapped block.
    pub(crate) fn new_reservation(
        &mut self,
        vm: &dyn VirtualMemory,
        kind: Kind,
        rounded: usize,
        stream: usize,
        capacity: usize,
    ) -> Result<u32, &'static str> {
        let page = vm.page_size();
        let least = round_up(rounded, page);
        let mut size = reservation_size(capacity, rounded, page);
        // The host may lack that much address space: halve down to what the request needs.
        let addr = loop {
            if let Some(addr) = vm.reserve(size) {
                break addr;
            }
            if size <= least {
                return Err("the device's address space is exhausted");
            }
            size = round_up((size / 2).max(least), page);
        };
        let idx = self.insert_segment(addr.get(), size, kind, stream, true);
        let tokens = vec![None; size / page];
        let pages = PageMap {
            page,
            tokens,
            mapped: 0,
        };
        self.pages.insert(self.blocks[idx].segment, pages);
        Ok(idx)
    }

    /// Unmaps every page of this shard's expandable segments that holds no
    /// live block (after merging the bins). Returns the bytes unmapped.
    pub(crate) fn unmap_free_pages(&mut self, vm: &dyn VirtualMemory) -> usize {
        self.unmap_free_pages_up_to(vm, usize::MAX)
    }

    /// `unmap_free_pages`, stopping once at least `want` bytes are unmapped.
    /// Returns the bytes unmapped.
    pub(crate) fn unmap_free_pages_up_to(&mut self, vm: &dyn VirtualMemory, want: usize) -> usize {
        if want == 0 || self.pages.is_empty() {
            return 0;
        }
        self.flush_bins();
        let mut segs: Vec<u32> = self.pages.keys().copied().collect();
        // Highest addresses first: blocks are carved from the front of a
        // free range, so the pages kept are the ones the next request uses.
        segs.sort_unstable_by_key(|&seg| std::cmp::Reverse(self.segments[seg].addr));
        let mut total = 0;
        for seg in segs {
            if total >= want {
                break;
            }
            let s = self.segments[seg];
            let mut idx = s.first;
            let mut ranges = Vec::new();
            while idx != NIL {
                let b = self.blocks[idx];
                if b.state == State::Free {
                    ranges.push((b.addr, b.size));
                }
                idx = b.next;
            }
            let pm = self.pages.get_mut(&seg).expect("page map");
            let page = pm.page;
            let mut pages = 0usize;
            'ranges: for (addr, size) in ranges.into_iter().rev() {
                // Only pages wholly inside the free block: a page it shares
                // with a live neighbour stays.
                let first = (addr - s.addr).div_ceil(page);
                let end = (addr + size - s.addr) / page;
                for i in (first..end).rev() {
                    if total + pages * page >= want {
                        break 'ranges;
                    }
                    if let Some(token) = pm.tokens[i].take() {
                        vm.unmap_page(s.addr + i * page, token);
                        pages += 1;
                    }
                }
            }
            let bytes = pages * page;
            pm.mapped -= bytes;
            total += bytes;
            let st = &mut self.stats;
            for i in [STAT_ALL, s.kind.index()] {
                st.reserved_bytes[i].decrease(bytes as i64);
            }
            st.num_device_free += pages as i64;
        }
        total
    }

    /// Releases the expandable segments that back no block (`all`: every
    /// one, live blocks included, for closing). Returns how many.
    pub(crate) fn release_reservations(&mut self, vm: &dyn VirtualMemory, all: bool) -> usize {
        if !all {
            self.flush_bins();
        }
        let idle: Vec<u32> = self
            .pages
            .keys()
            .copied()
            .filter(|&seg| {
                let b = &self.blocks[self.segments[seg].first];
                all || (b.state == State::Free && b.next == NIL)
            })
            .collect();
        for &seg in &idle {
            let s = self.segments[seg];
            let pm = self.pages.remove(&seg).expect("page map");
            let mut pages = 0i64;
            for (i, token) in pm.tokens.iter().enumerate() {
                if let Some(token) = *token {
                    vm.unmap_page(s.addr + i * pm.page, token);
                    pages += 1;
                }
            }
            let mut idx = s.first;
            while idx != NIL {
                let b = self.blocks[idx];
                match b.state {
                    State::Free => self.detach_free(idx),
                    // Only when closing: the pool forgets everything next.
                    State::Allocated => self.unset_live(idx),
                    // Caches are drained before anything is released.
                    State::Cached | State::Lent => {}
                }
                self.blocks.remove(idx);
                idx = b.next;
            }
            self.segments.remove(seg);
            self.by_addr.remove(s.addr);
            self.live.release(s.addr, s.size);
            if let Some(addr) = NonZeroUsize::new(s.addr) {
                vm.release(addr, s.size);
            }
            let st = &mut self.stats;
            for i in [STAT_ALL, s.kind.index()] {
                st.segment[i].decrease(1);
                st.reserved_bytes[i].decrease(pm.mapped as i64);
            }
            st.num_device_free += pages;
        }
        idle.len()
    }
}
