//! Reading the pool: statistics, the segment and block views, and the
//! consistency check the tests use.

use super::*;

impl Core {
    /// True when `addr` lies in one of this shard's segments.
    pub(crate) fn holds(&self, addr: usize) -> bool {
        self.by_addr
            .at_or_before(addr)
            .is_some_and(|(start, seg)| addr - start < self.segments[seg].size)
    }

    pub(crate) fn live_blocks(&self) -> usize {
        self.live.len()
    }

    pub(crate) fn reserved(&self) -> usize {
        self.stats.reserved_bytes[STAT_ALL].current as usize
    }

    pub(crate) fn segments_view(&self) -> Vec<SegmentView> {
        self.by_addr
            .values()
            .map(|seg| {
                let s = self.segments[seg];
                let mut blocks = Vec::new();
                let mut idx = s.first;
                while idx != NIL {
                    let b = &self.blocks[idx];
                    blocks.push(BlockView {
                        address: b.addr,
                        size: b.size,
                        requested_size: b.requested,
                        allocated: b.state == State::Allocated,
                    });
                    idx = b.next;
                }
                SegmentView {
                    address: s.addr,
                    total_size: s.size,
                    small: s.kind == Kind::Small,
                    stream: s.stream,
                    blocks,
                    is_expandable: s.expandable,
                    mapped_size: self.reserved_of(seg),
                }
            })
            .collect()
    }

    /// Recomputes everything from the block lists and compares it with the
    /// incremental bookkeeping. For tests.
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        macro_rules! ensure {
            ($ok:expr, $($message:tt)+) => {
                if !$ok {
                    return Err(format!($($message)+));
                }
            };
        }
        let mut expect = [[0i64; 3]; 6]; // alloc, alloc bytes, req bytes, split, split bytes, seg/reserved
        let mut segs = [0i64; 3];
        let mut reserved = [0i64; 3];
        let mut free_count = 0;
        let mut live = 0;
        let mut binned = 0;
        for seg in self.by_addr.values() {
            let s = self.segments[seg];
            let k = s.kind.index();
            segs[0] += 1;
            segs[k] += 1;
            reserved[0] += self.reserved_of(seg) as i64;
            reserved[k] += self.reserved_of(seg) as i64;
            let mut idx = s.first;
            let mut at = s.addr;
            let mut prev = NIL;
            let mut last_free = false;
            while idx != NIL {
                let b = self.blocks[idx];
                let (a, s_addr) = (b.addr, s.addr);
                ensure!(
                    b.addr == at && b.prev == prev && b.segment == seg,
                    "block list of segment {s_addr:#x} is broken at {a:#x}"
                );
                ensure!(
                    b.size != 0 && b.size % MIN_BLOCK_SIZE == 0,
                    "block {a:#x} has size {}",
                    b.size
                );
                let is_free = b.state == State::Free;
                ensure!(
                    !(is_free && last_free),
                    "free block {a:#x} was not merged with its neighbour"
                );
                last_free = is_free;
                match b.state {
                    State::Allocated => {
                        live += 1;
                        ensure!(
                            self.live_at(a) == Some(idx),
                            "allocated block {a:#x} is not in the live tree"
                        );
                        for i in [0, k] {
                            expect[0][i] += 1;
                            expect[1][i] += b.size as i64;
                            expect[2][i] += b.requested as i64;
                        }
                    }
                    State::Free => {
                        free_count += 1;
                        ensure!(
                            b.stream == s.stream
                                && self
                                    .free_index(s.kind, s.stream)
                                    .is_some_and(|t| t.contains(&self.blocks, idx)),
                            "free block {a:#x} is not in the free index"
                        );
                    }
                    State::Cached => binned += 1,
                    // Checked with every thread's cache drained.
                    State::Lent => ensure!(false, "block {a:#x} is still lent to a cache"),
                }
                let split = b.state != State::Allocated && b.is_split();
                if split {
                    for i in [0, k] {
                        expect[3][i] += 1;
                        expect[4][i] += b.size as i64;
                    }
                }
                ensure!(
                    b.counted_split == split,
                    "block {a:#x} is miscounted as inactive split"
                );
                at += b.size;
                prev = idx;
                idx = b.next;
            }
            ensure!(
                at == s.addr + s.size,
                "blocks of segment {:#x} do not tile it",
                s.addr
            );
        }
        let st = &self.stats;
        let cur = |a: &[super::counters::Part; 3]| [a[0].current, a[1].current, a[2].current];
        let checks = [
            ("allocation", cur(&st.allocation), expect[0]),
            ("allocated_bytes", cur(&st.allocated_bytes), expect[1]),
            ("requested_bytes", cur(&st.requested_bytes), expect[2]),
            ("inactive_split", cur(&st.inactive_split), expect[3]),
            (
                "inactive_split_bytes",
                cur(&st.inactive_split_bytes),
                expect[4],
            ),
            ("segment", cur(&st.segment), segs),
            ("reserved_bytes", cur(&st.reserved_bytes), reserved),
        ];
        for (name, got, want) in checks {
            ensure!(
                got == want,
                "{name}: stats say {got:?}, blocks say {want:?}"
            );
        }
        ensure!(
            live == self.live.len(),
            "the live tree holds blocks that are not allocated"
        );
        let indexed: usize = self.free.iter().flatten().map(|(_, t)| t.len()).sum();
        ensure!(
            free_count == indexed,
            "the free indices hold blocks that are not free"
        );
        let in_bins = self.bins.count(&self.blocks);
        ensure!(
            binned == self.bins.binned && in_bins == binned,
            "the bins and the cached blocks disagree"
        );
        Ok(())
    }
}
