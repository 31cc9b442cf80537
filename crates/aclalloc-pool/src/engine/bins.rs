//! Bins of freed, not yet merged blocks, by stream and exact size, found
//! without hashing: per stream (streams are few, a short vector), per size
//! class of the best-fit index, the sizes in use with the newest block of
//! each. A bin's blocks are linked newest first through their `free_next`
//! (unused while a block is cached), so binning and taking allocate
//! nothing once a size has been seen.

use super::super::block::{Block, Slab, NIL};
use super::tlsf::{class_of, SL};

/// The bins of one stream.
#[derive(Default)]
pub(crate) struct StreamBins {
    /// Per class (`f * SL + s`): (size, newest block) of each size binned
    /// since the last flush (a drained bin keeps its entry until then).
    pub(super) classes: Vec<Vec<(usize, u32)>>,
    /// Classes with entries, for a flush to visit only those.
    pub(super) used: Vec<usize>,
}

#[derive(Default)]
pub(crate) struct Bins {
    pub(super) streams: Vec<(usize, StreamBins)>,
    /// Blocks in all bins.
    pub(super) binned: usize,
}

#[inline]
fn class_index(size: usize) -> usize {
    let (f, s) = class_of(size);
    f * SL + s
}

impl Bins {
    /// The newest block of the bin of (`stream`, `size`) (`NIL`: empty), to
    /// pop by storing its successor; `None`: no such bin.
    #[inline]
    pub(crate) fn head_mut(&mut self, stream: usize, size: usize) -> Option<&mut u32> {
        let (_, sb) = self.streams.iter_mut().find(|(s, _)| *s == stream)?;
        let class = sb.classes.get_mut(class_index(size))?;
        class
            .iter_mut()
            .find(|(s, _)| *s == size)
            .map(|(_, head)| head)
    }

    /// Parks cached block `idx` in the bin of (`stream`, `size`).
    #[inline]
    pub(crate) fn push(&mut self, blocks: &mut Slab<Block>, idx: u32, stream: usize, size: usize) {
        let at = match self.streams.iter().position(|(s, _)| *s == stream) {
            Some(at) => at,
            None => {
                self.streams.push((stream, StreamBins::default()));
                self.streams.len() - 1
            }
        };
        let sb = &mut self.streams[at].1;
        let ci = class_index(size);
        if sb.classes.len() <= ci {
            sb.classes.resize_with(ci + 1, Vec::new);
        }
        let class = &mut sb.classes[ci];
        if class.is_empty() {
            sb.used.push(ci);
        }
        let head = match class.iter_mut().find(|(s, _)| *s == size) {
            Some((_, head)) => head,
            None => {
                class.push((size, NIL));
                &mut class.last_mut().expect("just pushed").1
            }
        };
        blocks[idx].free_next = *head;
        *head = idx;
        self.binned += 1;
    }

    /// Drops the bins of `stream` (empty after a flush).
    pub(crate) fn forget_stream(&mut self, stream: usize) {
        self.streams.retain(|(s, _)| *s != stream);
    }

    /// Blocks reachable from the bins (for invariant checks).
    pub(crate) fn count(&self, blocks: &Slab<Block>) -> usize {
        let mut n = 0;
        for (_, sb) in &self.streams {
            for &(_, head) in sb.classes.iter().flatten() {
                let mut at = head;
                while at != NIL {
                    n += 1;
                    at = blocks[at].free_next;
                }
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::block::{Kind, State};
    use super::*;

    fn cached(addr: usize, size: usize) -> Block {
        Block {
            addr,
            size,
            requested: 0,
            prev: NIL,
            next: NIL,
            free_prev: NIL,
            free_next: NIL,
            segment: 0,
            kind: Kind::Small,
            stream: 0,
            state: State::Cached,
            counted_split: false,
        }
    }

    fn pop(bins: &mut Bins, blocks: &Slab<Block>, stream: usize, size: usize) -> Option<u32> {
        let head = bins.head_mut(stream, size)?;
        let idx = *head;
        if idx == NIL {
            return None;
        }
        *head = blocks[idx].free_next;
        bins.binned -= 1;
        Some(idx)
    }

    #[test]
    fn a_bin_serves_its_stream_and_exact_size_newest_first() {
        let mut blocks = Slab::new();
        let mut bins = Bins::default();
        // 1 MiB and 1 MiB + 512 share a class; streams 1 and 2 share nothing.
        let a = blocks.insert(cached(0, 1 << 20));
        let b = blocks.insert(cached(1 << 21, 1 << 20));
        let c = blocks.insert(cached(1 << 22, (1 << 20) + 512));
        let d = blocks.insert(cached(1 << 23, 1 << 20));
        bins.push(&mut blocks, a, 1, 1 << 20);
        bins.push(&mut blocks, b, 1, 1 << 20);
        bins.push(&mut blocks, c, 1, (1 << 20) + 512);
        bins.push(&mut blocks, d, 2, 1 << 20);
        assert_eq!((bins.binned, bins.count(&blocks)), (4, 4));
        assert_eq!(pop(&mut bins, &blocks, 1, 1 << 20), Some(b));
        assert_eq!(pop(&mut bins, &blocks, 1, 1 << 20), Some(a));
        assert_eq!(pop(&mut bins, &blocks, 1, 1 << 20), None);
        assert_eq!(pop(&mut bins, &blocks, 1, 512), None);
        assert_eq!(pop(&mut bins, &blocks, 3, 1 << 20), None);
        assert_eq!(pop(&mut bins, &blocks, 1, (1 << 20) + 512), Some(c));
        bins.forget_stream(1);
        assert_eq!(pop(&mut bins, &blocks, 2, 1 << 20), Some(d));
        assert_eq!((bins.binned, bins.count(&blocks)), (0, 0));
    }
}
