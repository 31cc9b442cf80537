//! Free-block bookkeeping: the best-fit indices, the inactive-split counts,
//! the bins and merging.

use super::*;

impl Core {
    /// The best-fit index of `kind`'s free blocks of `stream`, if any.
    #[inline]
    pub(super) fn free_index(&self, kind: Kind, stream: usize) -> Option<&Tlsf> {
        let set = &self.free[kind.set()];
        set.iter().find(|(s, _)| *s == stream).map(|(_, t)| &**t)
    }

    pub(super) fn insert_free(&mut self, idx: u32) {
        let b = self.blocks[idx];
        let set = &mut self.free[b.kind.set()];
        let at = match set.iter().position(|(s, _)| *s == b.stream) {
            Some(at) => at,
            None => {
                set.push((b.stream, Box::new(Tlsf::new())));
                set.len() - 1
            }
        };
        set[at].1.insert(&mut self.blocks, idx);
    }

    /// Takes free block `idx` out of its best-fit index.
    pub(super) fn unlink_free(&mut self, idx: u32) {
        let b = self.blocks[idx];
        let set = &mut self.free[b.kind.set()];
        let at = set.iter().position(|(s, _)| *s == b.stream);
        set[at.expect("a free block's stream has an index")]
            .1
            .remove(&mut self.blocks, idx);
    }

    /// Takes free block `idx` out of the best-fit index and the split count.
    pub(super) fn detach_free(&mut self, idx: u32) {
        self.unlink_free(idx);
        self.unmark_split(idx);
    }

    #[inline]
    pub(super) fn mark_split(&mut self, idx: u32) {
        let b = &mut self.blocks[idx];
        if b.is_split() {
            b.counted_split = true;
            let size = b.size as i64;
            let k = b.kind.index();
            for i in [STAT_ALL, k] {
                self.stats.inactive_split[i].increase(1);
                self.stats.inactive_split_bytes[i].increase(size);
            }
        }
    }

    #[inline]
    pub(super) fn unmark_split(&mut self, idx: u32) {
        let b = &mut self.blocks[idx];
        if b.counted_split {
            b.counted_split = false;
            let size = b.size as i64;
            let k = b.kind.index();
            for i in [STAT_ALL, k] {
                self.stats.inactive_split[i].decrease(1);
                self.stats.inactive_split_bytes[i].decrease(size);
            }
        }
    }

    /// Merges every binned block with its free neighbours.
    pub(super) fn flush_bins(&mut self) {
        if self.bins.binned == 0 {
            return;
        }
        // Merging touches no bin; the vectors keep their capacity.
        let mut bins = std::mem::take(&mut self.bins);
        for (_, sb) in &mut bins.streams {
            for ci in sb.used.drain(..) {
                for (_, head) in sb.classes[ci].drain(..) {
                    // Oldest first, as the blocks were freed.
                    let mut at = self.reverse_bin(head);
                    while at != NIL {
                        let next = self.blocks[at].free_next;
                        self.merge(at);
                        at = next;
                    }
                }
            }
        }
        bins.binned = 0;
        self.bins = bins;
    }

    /// Reverses the bin list starting at `head`; returns its new head.
    fn reverse_bin(&mut self, head: u32) -> u32 {
        let (mut at, mut reversed) = (head, NIL);
        while at != NIL {
            let next = self.blocks[at].free_next;
            self.blocks[at].free_next = reversed;
            reversed = at;
            at = next;
        }
        reversed
    }

    /// Turns binned block `idx` into a free block merged with free neighbours.
    pub(super) fn merge(&mut self, mut idx: u32) {
        self.unmark_split(idx);
        let prev = self.blocks[idx].prev;
        if prev != NIL && self.blocks[prev].state == State::Free {
            self.detach_free(prev);
            self.absorb_next(prev);
            idx = prev;
        }
        let next = self.blocks[idx].next;
        if next != NIL && self.blocks[next].state == State::Free {
            self.detach_free(next);
            self.absorb_next(idx);
        }
        let b = &mut self.blocks[idx];
        b.state = State::Free;
        b.requested = 0;
        self.insert_free(idx);
        self.mark_split(idx);
    }

    /// Appends block `idx`'s successor to it and drops the successor.
    pub(super) fn absorb_next(&mut self, idx: u32) {
        let next = self.blocks[idx].next;
        let n = self.blocks[next];
        self.blocks[idx].size += n.size;
        self.blocks[idx].next = n.next;
        if n.next != NIL {
            self.blocks[n.next].prev = idx;
        }
        self.blocks.remove(next);
    }
}
