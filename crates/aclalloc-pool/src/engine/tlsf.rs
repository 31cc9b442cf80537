//! The free blocks of one (pool kind, stream) of a shard, indexed for best
//! fit in constant time: two-level segregated fit (TLSF, the design of
//! Vulkan Memory Allocator and of the `xalloc` crate). A size in 512-byte
//! units falls in a class: a first level by power of two, a second of
//! [`SL`] linear steps within it. Each class is a doubly linked list through
//! the blocks' `free_prev`/`free_next`, and two bitmaps say which classes
//! hold blocks, so the first class that can serve a request is two bit scans
//! away whatever the number of free blocks.

use super::super::block::{Block, Slab, NIL};
use super::MIN_BLOCK_SIZE;

const SL_LOG2: u32 = 4;
/// Second-level classes per power of two: sizes within a class differ by at
/// most 1/16.
pub(crate) const SL: usize = 1 << SL_LOG2;
/// First-level classes: enough for any size in units (`usize::MAX / 512`).
const FL: usize = (usize::BITS - MIN_BLOCK_SIZE.trailing_zeros() - SL_LOG2 + 1) as usize;

/// How many blocks of one class a search compares. Lists of a class hold
/// sizes within 1/16 of each other, so the bound costs little fit.
const SCAN: usize = 16;

/// The class (first level, second level) of a block of `size` bytes (a
/// multiple of 512, at least 512).
#[inline]
pub(crate) fn class_of(size: usize) -> (usize, usize) {
    let units = size / MIN_BLOCK_SIZE;
    if units < SL {
        return (0, units);
    }
    let log = units.ilog2();
    (
        (log - SL_LOG2 + 1) as usize,
        (units >> (log - SL_LOG2)) - SL,
    )
}

/// The smallest size in bytes of class `(f, s)`.
#[inline]
pub(crate) fn class_min(f: usize, s: usize) -> usize {
    let units = if f == 0 { s } else { (SL + s) << (f - 1) };
    units * MIN_BLOCK_SIZE
}

pub(crate) struct Tlsf {
    /// Bit `f`: some class of first level `f` holds blocks.
    first: u64,
    /// Bit `s` of `second[f]`: class `(f, s)` holds blocks.
    second: [u32; FL],
    heads: [u32; FL * SL],
    len: usize,
}

impl Tlsf {
    pub(crate) fn new() -> Self {
        Tlsf {
            first: 0,
            second: [0; FL],
            heads: [NIL; FL * SL],
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Files free block `idx` at the head of its class.
    pub(crate) fn insert(&mut self, blocks: &mut Slab<Block>, idx: u32) {
        let (f, s) = class_of(blocks[idx].size);
        let head = self.heads[f * SL + s];
        blocks[idx].free_prev = NIL;
        blocks[idx].free_next = head;
        if head != NIL {
            blocks[head].free_prev = idx;
        }
        self.heads[f * SL + s] = idx;
        self.second[f] |= 1 << s;
        self.first |= 1 << f;
        self.len += 1;
    }

    /// Unlinks free block `idx` (its size unchanged since [`Tlsf::insert`]).
    pub(crate) fn remove(&mut self, blocks: &mut Slab<Block>, idx: u32) {
        let (f, s) = class_of(blocks[idx].size);
        let (prev, next) = (blocks[idx].free_prev, blocks[idx].free_next);
        if prev != NIL {
            blocks[prev].free_next = next;
        } else {
            debug_assert_eq!(
                self.heads[f * SL + s],
                idx,
                "a free block outside its class"
            );
            self.heads[f * SL + s] = next;
            if next == NIL {
                self.second[f] &= !(1 << s);
                if self.second[f] == 0 {
                    self.first &= !(1 << f);
                }
            }
        }
        if next != NIL {
            blocks[next].free_prev = prev;
        }
        self.len -= 1;
    }

    /// The first class at or after `(f, s)` that holds blocks.
    #[inline]
    fn first_from(&self, f: usize, s: usize) -> Option<(usize, usize)> {
        if f >= FL {
            return None;
        }
        let here = self.second[f] & (u32::MAX << s);
        if here != 0 {
            return Some((f, here.trailing_zeros() as usize));
        }
        let above = self.first & u64::MAX.checked_shl(f as u32 + 1).unwrap_or(0);
        if above == 0 {
            return None;
        }
        let f = above.trailing_zeros() as usize;
        Some((f, self.second[f].trailing_zeros() as usize))
    }

    /// The class after `(f, s)`.
    #[inline]
    fn next_class(f: usize, s: usize) -> (usize, usize) {
        if s + 1 < SL {
            (f, s + 1)
        } else {
            (f + 1, 0)
        }
    }

    /// The smallest free block of at least `size` bytes, the lowest address
    /// among equals (up to [`SCAN`] blocks of a class compared).
    pub(crate) fn best_fit(&self, blocks: &Slab<Block>, size: usize) -> Option<u32> {
        let (f, s) = class_of(size);
        let mut class = self.first_from(f, s)?;
        loop {
            let mut best: Option<(usize, usize, u32)> = None;
            let mut idx = self.heads[class.0 * SL + class.1];
            for _ in 0..SCAN {
                if idx == NIL {
                    break;
                }
                let b = &blocks[idx];
                if b.size >= size && best.map_or(true, |(bs, ba, _)| (b.size, b.addr) < (bs, ba)) {
                    best = Some((b.size, b.addr, idx));
                }
                idx = b.free_next;
            }
            if let Some((_, _, idx)) = best {
                return Some(idx);
            }
            // Only the request's own class can hold blocks that are too small.
            let (f, s) = Self::next_class(class.0, class.1);
            class = self.first_from(f, s)?;
        }
    }

    /// Calls `visit` on up to `limit` free blocks of at least `size` bytes in
    /// classes below `below` bytes, by class, smallest first.
    pub(crate) fn for_each_fit(
        &self,
        blocks: &Slab<Block>,
        size: usize,
        below: usize,
        limit: usize,
        mut visit: impl FnMut(u32),
    ) {
        let (f, s) = class_of(size);
        let mut left = limit;
        let mut class = self.first_from(f, s);
        while let Some((f, s)) = class {
            if left == 0 || class_min(f, s) >= below {
                return;
            }
            let mut idx = self.heads[f * SL + s];
            while idx != NIL && left > 0 {
                if blocks[idx].size >= size {
                    visit(idx);
                    left -= 1;
                }
                idx = blocks[idx].free_next;
            }
            let (f, s) = Self::next_class(f, s);
            class = self.first_from(f, s);
        }
    }

    /// True if free block `idx` is linked in its class (for invariant checks).
    pub(crate) fn contains(&self, blocks: &Slab<Block>, idx: u32) -> bool {
        let (f, s) = class_of(blocks[idx].size);
        let mut at = self.heads[f * SL + s];
        while at != NIL {
            if at == idx {
                return true;
            }
            at = blocks[at].free_next;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::block::{Kind, State};
    use super::*;

    #[test]
    fn every_size_falls_in_the_class_whose_range_holds_it() {
        let mut sizes: Vec<usize> = (1..4096).map(|u| u * MIN_BLOCK_SIZE).collect();
        for shift in 12..usize::BITS - 1 {
            let p = 1usize << shift;
            sizes.extend([p - MIN_BLOCK_SIZE, p, p + MIN_BLOCK_SIZE]);
        }
        sizes.push(usize::MAX / MIN_BLOCK_SIZE * MIN_BLOCK_SIZE);
        for size in sizes {
            let (f, s) = class_of(size);
            assert!(f < FL && s < SL, "{size}: class ({f}, {s})");
            assert!(class_min(f, s) <= size, "{size} below its class");
            let (nf, ns) = Tlsf::next_class(f, s);
            if nf < FL {
                assert!(size < class_min(nf, ns), "{size} reaches the next class");
                assert_eq!(class_of(class_min(nf, ns)), (nf, ns));
            }
            assert_eq!(class_of(class_min(f, s)), (f, s), "class minimum of {size}");
        }
    }

    fn block(addr: usize, size: usize) -> Block {
        Block {
            addr,
            size,
            requested: 0,
            prev: NIL,
            next: NIL,
            free_prev: NIL,
            free_next: NIL,
            segment: 0,
            kind: Kind::Large,
            stream: 0,
            state: State::Free,
            counted_split: false,
        }
    }

    #[test]
    fn best_fit_finds_the_smallest_fitting_block_at_class_boundaries() {
        let mut blocks = Slab::new();
        let mut t = Tlsf::new();
        let sizes = [
            512,
            15 * 512,
            16 * 512,
            17 * 512,
            1 << 20,
            (1 << 20) + 512,
            12 << 20,
        ];
        let mut idx = Vec::new();
        for (i, &size) in sizes.iter().enumerate() {
            let b = blocks.insert(block(i << 30, size));
            t.insert(&mut blocks, b);
            idx.push(b);
        }
        assert_eq!(t.len(), sizes.len());
        for (i, &size) in sizes.iter().enumerate() {
            assert_eq!(t.best_fit(&blocks, size), Some(idx[i]), "exact {size}");
            if i + 1 < sizes.len() {
                assert_eq!(
                    t.best_fit(&blocks, size + 512),
                    Some(idx[i + 1]),
                    "above {size}"
                );
            }
        }
        assert_eq!(t.best_fit(&blocks, (12 << 20) + 512), None);
        // Removing empties classes and the bitmaps with them.
        for &b in &idx {
            assert!(t.contains(&blocks, b));
            t.remove(&mut blocks, b);
            assert!(!t.contains(&blocks, b));
        }
        assert_eq!((t.len(), t.first), (0, 0));
        assert_eq!(t.best_fit(&blocks, 512), None);
    }

    #[test]
    fn within_a_class_the_smallest_then_the_lowest_address_wins() {
        let mut blocks = Slab::new();
        let mut t = Tlsf::new();
        // One class: 17 to 18 units of 512 (16-unit classes step by 1 unit
        // from 16 to 31), so use a wider class: 1 MiB .. 1 MiB + 64 KiB.
        let base = 1 << 20;
        for (addr, size) in [
            (5, base + 8192),
            (3, base + 4096),
            (9, base + 4096),
            (1, base + 16384),
        ] {
            let b = blocks.insert(block(addr << 30, size));
            t.insert(&mut blocks, b);
        }
        let got = t.best_fit(&blocks, base + 512).unwrap();
        assert_eq!((blocks[got].addr >> 30, blocks[got].size), (3, base + 4096));
        let got = t.best_fit(&blocks, base + 8192).unwrap();
        assert_eq!(blocks[got].addr >> 30, 5);
        let mut seen = Vec::new();
        t.for_each_fit(&blocks, base + 4096, usize::MAX, 3, |i| seen.push(i));
        assert_eq!(seen.len(), 3);
    }
}
