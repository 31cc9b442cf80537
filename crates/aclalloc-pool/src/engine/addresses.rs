//! Finding blocks and segments from an address without hashing: the
//! segments in a vector sorted by start (a binary search finds the one
//! holding an address, off the hot path), and the allocated blocks in a
//! radix tree over the address, by 512-byte unit (the hot path of a free).

use super::super::block::NIL;
use super::MIN_BLOCK_SIZE;

/// 512-byte units per leaf of the live tree: 2 MiB.
const CHUNK: usize = 4096;

/// The shard's segments by start address.
#[derive(Default)]
pub(crate) struct SegmentIndex {
    /// (start, segment), sorted by start; segments never overlap.
    sorted: Vec<(usize, u32)>,
}

impl SegmentIndex {
    pub(crate) fn insert(&mut self, start: usize, seg: u32) {
        let at = self.sorted.partition_point(|&(s, _)| s < start);
        self.sorted.insert(at, (start, seg));
    }

    pub(crate) fn remove(&mut self, start: usize) {
        if let Ok(at) = self.sorted.binary_search_by_key(&start, |&(s, _)| s) {
            self.sorted.remove(at);
        }
    }

    /// The segment starting last at or before `addr` (the caller checks
    /// that `addr` is within it).
    #[inline]
    pub(crate) fn at_or_before(&self, addr: usize) -> Option<(usize, u32)> {
        let at = self.sorted.partition_point(|&(s, _)| s <= addr);
        at.checked_sub(1).map(|i| self.sorted[i])
    }

    /// (start, segment) in address order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, u32)> + '_ {
        self.sorted.iter().copied()
    }

    /// The segments in address order.
    pub(crate) fn values(&self) -> impl Iterator<Item = u32> + '_ {
        self.sorted.iter().map(|&(_, seg)| seg)
    }

    pub(crate) fn len(&self) -> usize {
        self.sorted.len()
    }
}

/// Address bits below a leaf's range: a leaf covers 2 MiB.
const LEAF_SHIFT: u32 = 21;
/// Address bits resolved by each of the two inner levels.
const LEVEL_BITS: u32 = 9;
/// Address bits below a root entry's range (512 GiB).
const ROOT_SHIFT: u32 = LEAF_SHIFT + 2 * LEVEL_BITS;
const FANOUT: usize = 1 << LEVEL_BITS;

/// The allocated blocks starting in one 2 MiB range of addresses: the block
/// per 512-byte unit (`NIL`: none), then at [`COUNT`] how many there are.
type Leaf = [u32; CHUNK + 1];
const COUNT: usize = CHUNK;

/// An empty leaf, made on the heap (it is too large for a small stack).
fn new_leaf() -> Box<Leaf> {
    let mut slots = vec![NIL; CHUNK + 1];
    slots[COUNT] = 0;
    slots
        .into_boxed_slice()
        .try_into()
        .expect("a leaf has CHUNK + 1 slots")
}

/// A level of the tree: [`FANOUT`] optional children.
type Level<T> = Box<[Option<T>]>;

fn level<T>() -> Level<T> {
    (0..FANOUT).map(|_| None).collect()
}

/// Every allocated block by its address: a radix tree over the address
/// (512 GiB roots, in a short vector since a shard's segments lie in few of
/// them; two levels of 512; leaves of 2 MiB), so a lookup is three loads
/// after the root. Leaves are made when a block in them is first handed out
/// and dropped with the segments around them.
#[derive(Default)]
pub(crate) struct LiveBlocks {
    roots: Vec<(usize, Level<Level<Box<Leaf>>>)>,
    count: usize,
}

/// (root key, first level, second level, slot) of `addr`.
#[inline]
fn split(addr: usize) -> (usize, usize, usize, usize) {
    (
        addr >> ROOT_SHIFT,
        (addr >> (LEAF_SHIFT + LEVEL_BITS)) % FANOUT,
        (addr >> LEAF_SHIFT) % FANOUT,
        (addr / MIN_BLOCK_SIZE) % CHUNK,
    )
}

impl LiveBlocks {
    /// How many blocks are allocated.
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    #[inline]
    fn leaf(&self, addr: usize) -> Option<&Leaf> {
        let (r, a, b, _) = split(addr);
        let (_, root) = self.roots.iter().find(|(k, _)| *k == r)?;
        root[a].as_ref()?[b].as_deref()
    }

    #[inline]
    fn leaf_mut(&mut self, addr: usize) -> Option<&mut Leaf> {
        let (r, a, b, _) = split(addr);
        let (_, root) = self.roots.iter_mut().find(|(k, _)| *k == r)?;
        root[a].as_mut()?[b].as_deref_mut()
    }

    /// The allocated block at `addr`, if any.
    #[inline]
    pub(crate) fn get(&self, addr: usize) -> Option<u32> {
        if addr % MIN_BLOCK_SIZE != 0 {
            return None;
        }
        let idx = self.leaf(addr)?[split(addr).3];
        (idx != NIL).then_some(idx)
    }

    /// Records block `idx`, at `addr` (a multiple of 512), as allocated.
    #[inline]
    pub(crate) fn insert(&mut self, addr: usize, idx: u32) {
        let (r, a, b, slot) = split(addr);
        let at = match self.roots.iter().position(|(k, _)| *k == r) {
            Some(at) => at,
            None => {
                self.roots.push((r, level()));
                self.roots.len() - 1
            }
        };
        let inner = self.roots[at].1[a].get_or_insert_with(level);
        let leaf = inner[b].get_or_insert_with(new_leaf);
        debug_assert_eq!(leaf[slot], NIL, "two allocated blocks at one address");
        leaf[slot] = idx;
        leaf[COUNT] += 1;
        self.count += 1;
    }

    /// Forgets the allocated block at `addr`.
    #[inline]
    pub(crate) fn remove(&mut self, addr: usize) {
        let slot = split(addr).3;
        let Some(leaf) = self.leaf_mut(addr) else {
            return;
        };
        if leaf[slot] != NIL {
            leaf[slot] = NIL;
            leaf[COUNT] -= 1;
            self.count -= 1;
        }
    }

    /// Drops the empty leaves over `[start, start + size)`, a released
    /// segment's range, so memory the pool gave back costs no table.
    pub(crate) fn release(&mut self, start: usize, size: usize) {
        let first = start >> LEAF_SHIFT;
        let last = (start + size.max(1) - 1) >> LEAF_SHIFT;
        for g in first..=last {
            let (r, a, b, _) = split(g << LEAF_SHIFT);
            let Some((_, root)) = self.roots.iter_mut().find(|(k, _)| *k == r) else {
                continue;
            };
            if let Some(inner) = root[a].as_mut() {
                if inner[b].as_ref().is_some_and(|l| l[COUNT] == 0) {
                    inner[b] = None;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_segment_holding_an_address_is_found_by_its_start() {
        let mut s = SegmentIndex::default();
        for (start, seg) in [(0x3000_0000, 2), (0x1000_0000, 0), (0x2000_0000, 1)] {
            s.insert(start, seg);
        }
        assert_eq!(s.values().collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(s.at_or_before(0xfff_ffff), None);
        assert_eq!(s.at_or_before(0x1000_0000), Some((0x1000_0000, 0)));
        assert_eq!(s.at_or_before(0x2fff_ffff), Some((0x2000_0000, 1)));
        assert_eq!(s.at_or_before(usize::MAX), Some((0x3000_0000, 2)));
        s.remove(0x2000_0000);
        assert_eq!(s.at_or_before(0x2fff_ffff), Some((0x1000_0000, 0)));
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn live_blocks_are_found_at_their_address_only() {
        let mut l = LiveBlocks::default();
        let base = 0x7f00_0000_0000;
        let far = base + (1 << 41) + 5 * CHUNK * MIN_BLOCK_SIZE + 512;
        l.insert(base, 7);
        l.insert(far, 8);
        assert_eq!(l.len(), 2);
        assert_eq!((l.get(base), l.get(far)), (Some(7), Some(8)));
        // Not a block start, a neighbour, untouched ranges.
        assert_eq!(l.get(base + 256), None);
        assert_eq!(l.get(base + 512), None);
        assert_eq!(l.get(base + (1 << 30)), None);
        assert_eq!(l.get(512), None);
        l.remove(base);
        l.remove(base);
        assert_eq!((l.len(), l.get(base)), (1, None));
        // A leaf with a live block stays; an empty one goes.
        l.release(base, 1 << 42);
        assert_eq!(l.get(far), Some(8));
        l.remove(far);
        l.release(far - 512, 1 << 21);
        assert_eq!((l.len(), l.get(far)), (0, None));
        assert!(l.leaf(far).is_none() && l.leaf(base).is_none());
    }
}
