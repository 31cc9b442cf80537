//! The two lists of a thread's cache: the blocks it parked (by size key,
//! with a cap on distinct sizes) and the blocks it handed out (found by
//! address in a compact array).

use crate::pool::engine::Loan;

/// Blocks of one size one cache keeps parked: a working set of this many
/// same-sized blocks (a layer's batch of tensors) cycles without a lock.
pub(crate) const PARKED: usize = 64;
/// Blocks one cache keeps parked when they are of several sizes. Parked
/// blocks are withheld from the shard's best fit, which then places worse:
/// random sizes need more device memory with more of them parked.
pub(crate) const PARKED_MIXED: usize = 8;
/// Blocks of one size one cache hands out and can take back without a lock.
pub(crate) const HANDED_OUT: usize = 64;
/// Blocks one cache hands out when they are of several sizes: each may
/// park when freed (see [`PARKED_MIXED`]).
pub(crate) const HANDED_OUT_MIXED: usize = 16;

/// The parked blocks, newest last, and how many there are of each size key.
pub(crate) struct Parked {
    loans: Vec<Loan>,
    /// (size key, parked blocks of that key), one entry per key in `loans`.
    sizes: Vec<(usize, u32)>,
}

impl Parked {
    pub(crate) fn new() -> Self {
        Parked {
            loans: Vec::with_capacity(PARKED),
            sizes: Vec::with_capacity(PARKED_MIXED),
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.loans.len()
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.loans.is_empty()
    }

    pub(crate) fn iter(&self) -> std::slice::Iter<'_, Loan> {
        self.loans.iter()
    }

    /// True when a block of size key `key` may be parked: [`PARKED_MIXED`]
    /// blocks, or [`PARKED`] when they all have that key.
    #[inline]
    pub(crate) fn has_room_for(&self, key: usize) -> bool {
        let n = self.loans.len();
        n < PARKED_MIXED || (n < PARKED && matches!(self.sizes[..], [(k, _)] if k == key))
    }

    /// Parks `loan` (its `size_key` is the key); the caller checked
    /// [`Parked::has_room_for`].
    #[inline]
    pub(crate) fn push(&mut self, loan: Loan) {
        match self.sizes.iter_mut().find(|(k, _)| *k == loan.size_key) {
            Some((_, n)) => *n += 1,
            None => self.sizes.push((loan.size_key, 1)),
        }
        self.loans.push(loan);
    }

    /// The index of the newest parked block of size key `key`.
    #[inline]
    pub(crate) fn newest_of(&self, key: usize) -> Option<usize> {
        if !self.sizes.iter().any(|&(k, _)| k == key) {
            return None;
        }
        self.loans.iter().rposition(|l| l.size_key == key)
    }

    #[inline]
    pub(crate) fn get(&self, at: usize) -> Loan {
        self.loans[at]
    }

    /// Takes parked block `at` out, keeping the order of the others.
    #[inline]
    pub(crate) fn take(&mut self, at: usize) -> Loan {
        let loan = if at + 1 == self.loans.len() {
            self.loans.pop().expect("`at` is an index of `loans`")
        } else {
            self.loans.remove(at)
        };
        if let Some(i) = self.sizes.iter().position(|&(k, _)| k == loan.size_key) {
            self.sizes[i].1 -= 1;
            if self.sizes[i].1 == 0 {
                self.sizes.swap_remove(i);
            }
        }
        loan
    }

    /// Takes every parked block out.
    pub(crate) fn drain(&mut self) -> std::vec::Drain<'_, Loan> {
        self.sizes.clear();
        self.loans.drain(..)
    }
}

/// The blocks a cache handed out, with their addresses in an array of their
/// own: a free of a block the cache did not hand out (most frees, once more
/// blocks are live than the cache holds) reads 8 bytes per entry, not a loan.
pub(crate) struct HandedOut {
    addrs: Vec<usize>,
    loans: Vec<Loan>,
    /// The block size of every loan, while they all have the same one (else 0).
    same_size: usize,
}

impl HandedOut {
    pub(crate) fn new() -> Self {
        HandedOut {
            addrs: Vec::with_capacity(HANDED_OUT),
            loans: Vec::with_capacity(HANDED_OUT),
            same_size: 0,
        }
    }

    /// True when a block of `size` bytes may be handed out: [`HANDED_OUT_MIXED`]
    /// blocks, or [`HANDED_OUT`] when they all have that size.
    #[inline]
    pub(crate) fn admits(&self, size: usize) -> bool {
        let n = self.loans.len();
        n < HANDED_OUT_MIXED || (n < HANDED_OUT && self.same_size == size)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.loans.len()
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.loans.is_empty()
    }

    pub(crate) fn iter(&self) -> std::slice::Iter<'_, Loan> {
        self.loans.iter()
    }

    /// The index of the block at `addr`, newest first.
    #[inline]
    pub(crate) fn position(&self, addr: usize) -> Option<usize> {
        self.addrs.iter().rposition(|&a| a == addr)
    }

    #[inline]
    pub(crate) fn get(&self, at: usize) -> Loan {
        self.loans[at]
    }

    #[inline]
    pub(crate) fn push(&mut self, loan: Loan) {
        if self.loans.is_empty() {
            self.same_size = loan.size;
        } else if self.same_size != loan.size {
            self.same_size = 0;
        }
        self.addrs.push(loan.addr);
        self.loans.push(loan);
    }

    #[inline]
    pub(crate) fn swap_remove(&mut self, at: usize) -> Loan {
        self.addrs.swap_remove(at);
        let loan = self.loans.swap_remove(at);
        if self.same_size == 0 && self.loans.len() <= 1 {
            // Mixed sizes no longer: at most one block is left.
            self.same_size = self.loans.first().map_or(0, |l| l.size);
        }
        loan
    }

    /// Takes every handed-out block out.
    pub(crate) fn drain(&mut self) -> std::vec::Drain<'_, Loan> {
        self.addrs.clear();
        self.same_size = 0;
        self.loans.drain(..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loan(addr: usize, size_key: usize) -> Loan {
        Loan {
            addr,
            size: size_key,
            idx: 0,
            kind: 1,
            split: false,
            size_key,
        }
    }

    #[test]
    fn blocks_of_several_sizes_park_up_to_the_mixed_cap_newest_first() {
        let mut p = Parked::new();
        for i in 0..PARKED_MIXED {
            let key = 512 * (i % 3 + 1);
            assert!(p.has_room_for(key));
            p.push(loan(0x1000 * (i + 1), key));
        }
        assert!(!p.has_room_for(512) && !p.has_room_for(4096));
        let newest_512 = 0x1000 * ((PARKED_MIXED - 1) / 3 * 3 + 1);
        assert_eq!(p.newest_of(512).map(|at| p.get(at).addr), Some(newest_512));
        assert_eq!(p.newest_of(4096), None);
        assert_eq!(p.take(p.newest_of(512).unwrap()).addr, newest_512);
        assert!(p.has_room_for(4096));
        assert_eq!(p.drain().count(), PARKED_MIXED - 1);
        assert!(p.is_empty() && p.newest_of(1024).is_none() && p.has_room_for(4096));
    }

    #[test]
    fn blocks_of_one_size_park_up_to_the_larger_cap() {
        let mut p = Parked::new();
        for i in 0..PARKED {
            assert!(p.has_room_for(4096));
            p.push(loan(0x1000 * (i + 1), 4096));
            // Past the mixed cap, only that size.
            assert_eq!(p.has_room_for(512), i + 1 < PARKED_MIXED);
        }
        assert!(!p.has_room_for(4096));
        assert_eq!(p.len(), PARKED);
        // Emptied of that size: the sizes entry goes with its last block.
        while let Some(at) = p.newest_of(4096) {
            p.take(at);
        }
        assert!(p.is_empty() && p.has_room_for(512));
    }

    #[test]
    fn handed_out_blocks_are_found_by_address_only() {
        let mut h = HandedOut::new();
        h.push(loan(0x1000, 512));
        h.push(loan(0x2000, 512));
        h.push(loan(0x3000, 1024));
        assert_eq!(h.position(0x2000), Some(1));
        assert_eq!(h.position(0x2200), None);
        assert_eq!(h.swap_remove(0).addr, 0x1000);
        // The last one moved into the hole, with its address.
        assert_eq!(h.position(0x3000), Some(0));
        assert_eq!(h.get(0).size_key, 1024);
        assert_eq!(h.position(0x1000), None);
        assert_eq!(h.len(), 2);
        assert_eq!(h.drain().count(), 2);
        assert!(h.is_empty() && h.position(0x2000).is_none());
    }

    #[test]
    fn blocks_of_one_size_are_handed_out_up_to_the_larger_cap() {
        let mut h = HandedOut::new();
        for i in 0..HANDED_OUT {
            assert!(h.admits(4096));
            h.push(loan(0x1000 * (i + 1), 4096));
            assert_eq!(h.admits(512), i + 1 < HANDED_OUT_MIXED);
        }
        assert!(!h.admits(4096));
        // One block of another size: back to the mixed cap until it goes.
        let other = h.swap_remove(0);
        h.push(loan(0x9_0000, 512));
        assert!(!h.admits(4096) && !h.admits(512));
        h.swap_remove(h.position(0x9_0000).unwrap());
        // Still counted as mixed until one block is left.
        assert!(!h.admits(4096));
        while h.len() > 1 {
            h.swap_remove(0);
        }
        for i in 1..HANDED_OUT_MIXED {
            h.push(loan(0x10_0000 * i, 4096));
        }
        assert!(h.admits(4096) && !h.admits(512));
        h.push(other);
        assert_eq!(h.len(), HANDED_OUT_MIXED + 1);
    }
}
