//! Finding a block from its address without hashing: the segments in a
//! vector sorted by start (a binary search finds the one holding an
//! address), and per segment a table of its allocated blocks by 512-byte
//! offset. A table is cut into chunks of 2 MiB of the segment, made when a
//! block in them is first handed out, so a large segment costs host memory
//! only where blocks are handed out, and nothing allocates once they exist.

use super::super::block::NIL;
use super::MIN_BLOCK_SIZE;

/// Offsets (in 512-byte units) per chunk of a segment's table: 2 MiB.
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

/// The allocated blocks of every segment, by segment and offset.
#[derive(Default)]
pub(crate) struct LiveBlocks {
    /// Indexed by segment: its chunks, indexed by offset / [`CHUNK`].
    tables: Vec<Vec<Option<Box<[u32]>>>>,
    count: usize,
}

/// (chunk, slot) of the block at `offset` bytes into its segment.
#[inline]
fn position(offset: usize) -> (usize, usize) {
    let unit = offset / MIN_BLOCK_SIZE;
    (unit / CHUNK, unit % CHUNK)
}

impl LiveBlocks {
    /// How many blocks are allocated.
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// The allocated block `offset` bytes into segment `seg`, if any.
    #[inline]
    pub(crate) fn get(&self, seg: u32, offset: usize) -> Option<u32> {
        if offset % MIN_BLOCK_SIZE != 0 {
            return None;
        }
        let (chunk, slot) = position(offset);
        let idx = self
            .tables
            .get(seg as usize)?
            .get(chunk)?
            .as_ref()
            .map_or(NIL, |c| c[slot]);
        (idx != NIL).then_some(idx)
    }

    /// Records block `idx`, `offset` bytes into segment `seg`, as allocated.
    #[inline]
    pub(crate) fn insert(&mut self, seg: u32, offset: usize, idx: u32) {
        let (chunk, slot) = position(offset);
        let seg = seg as usize;
        if self.tables.len() <= seg {
            self.tables.resize_with(seg + 1, Vec::new);
        }
        let table = &mut self.tables[seg];
        if table.len() <= chunk {
            table.resize_with(chunk + 1, || None);
        }
        let c = table[chunk].get_or_insert_with(|| vec![NIL; CHUNK].into_boxed_slice());
        debug_assert_eq!(c[slot], NIL, "two allocated blocks at one address");
        c[slot] = idx;
        self.count += 1;
    }

    /// Forgets the allocated block `offset` bytes into segment `seg`.
    #[inline]
    pub(crate) fn remove(&mut self, seg: u32, offset: usize) {
        let (chunk, slot) = position(offset);
        let entry = self
            .tables
            .get_mut(seg as usize)
            .and_then(|t| t.get_mut(chunk))
            .and_then(Option::as_mut)
            .map(|c| &mut c[slot]);
        if let Some(entry) = entry.filter(|e| **e != NIL) {
            *entry = NIL;
            self.count -= 1;
        }
    }

    /// Drops the table of a released segment (whose blocks are no longer
    /// allocated), so its slot starts empty when reused.
    pub(crate) fn drop_segment(&mut self, seg: u32) {
        if let Some(t) = self.tables.get_mut(seg as usize) {
            *t = Vec::new();
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
    fn live_blocks_are_found_at_their_offset_only() {
        let mut l = LiveBlocks::default();
        let far = 5 * CHUNK * MIN_BLOCK_SIZE + 512;
        l.insert(3, 0, 7);
        l.insert(3, far, 8);
        assert_eq!(l.len(), 2);
        assert_eq!((l.get(3, 0), l.get(3, far)), (Some(7), Some(8)));
        // Not a block start, another segment, an offset never used.
        assert_eq!(l.get(3, 256), None);
        assert_eq!(l.get(2, 0), None);
        assert_eq!(l.get(3, 512), None);
        assert_eq!(l.get(3, 100 * CHUNK * MIN_BLOCK_SIZE), None);
        l.remove(3, 0);
        l.remove(3, 0);
        assert_eq!((l.len(), l.get(3, 0)), (1, None));
        l.remove(3, far);
        l.drop_segment(3);
        assert_eq!((l.len(), l.get(3, far)), (0, None));
    }
}
