//! The two lists of a thread's cache: the blocks it parked (by size key,
//! with a cap on distinct sizes) and the blocks it handed out (found by
//! address in a compact array).

use crate::engine::Loan;

/// Up to `N` values in place (a cache's lists live inside its slot, with
/// no pointer to follow and no capacity to check beyond the caps).
struct Fixed<T: Copy, const N: usize> {
    items: [T; N],
    len: usize,
}

impl<T: Copy, const N: usize> Fixed<T, N> {
    fn new(fill: T) -> Self {
        Fixed {
            items: [fill; N],
            len: 0,
        }
    }

    #[inline]
    fn as_slice(&self) -> &[T] {
        &self.items[..self.len]
    }

    /// Appends `value`; the callers' caps keep it within `N`.
    #[inline]
    fn push(&mut self, value: T) {
        self.items[self.len] = value;
        self.len += 1;
    }

    #[inline]
    fn swap_remove(&mut self, at: usize) -> T {
        let value = self.as_slice()[at];
        self.len -= 1;
        self.items[at] = self.items[self.len];
        value
    }

    /// Removes `at`, keeping the order of the others.
    #[inline]
    fn remove(&mut self, at: usize) -> T {
        let value = self.as_slice()[at];
        // The newest, most often: no move (a call of `memmove` otherwise).
        if at + 1 < self.len {
            self.items.copy_within(at + 1..self.len, at);
        }
        self.len -= 1;
        value
    }

    /// Empties it; the values are read out of what stays in place.
    fn drain(&mut self) -> std::iter::Copied<std::slice::Iter<'_, T>> {
        let n = std::mem::take(&mut self.len);
        self.items[..n].iter().copied()
    }
}

/// What the unused entries of a list hold.
const VACANT: Loan = Loan {
    addr: 0,
    size: 0,
    idx: 0,
    kind: 0,
    split: false,
    size_key: 0,
};

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

/// The parked blocks, newest last.
pub(crate) struct Parked {
    loans: Fixed<Loan, PARKED>,
    /// The size key of every parked block, while they all have the same
    /// one (else, and when there are none, 0). Mixed keys are at most
    /// [`PARKED_MIXED`] blocks: a search scans no more than that.
    same_key: usize,
}

impl Parked {
    pub(crate) fn new() -> Self {
        Parked {
            loans: Fixed::new(VACANT),
            same_key: 0,
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.loans.len
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.loans.len == 0
    }

    pub(crate) fn iter(&self) -> std::slice::Iter<'_, Loan> {
        self.loans.as_slice().iter()
    }

    /// True when a block of size key `key` may be parked: [`PARKED_MIXED`]
    /// blocks, or [`PARKED`] when they all have that key.
    #[inline]
    pub(crate) fn has_room_for(&self, key: usize) -> bool {
        let n = self.loans.len;
        n < PARKED_MIXED || (n < PARKED && self.same_key == key)
    }

    /// Parks `loan` (its `size_key` is the key); the caller checked
    /// [`Parked::has_room_for`].
    #[inline]
    pub(crate) fn push(&mut self, loan: Loan) {
        if self.loans.len == 0 {
            self.same_key = loan.size_key;
        } else if self.same_key != loan.size_key {
            self.same_key = 0;
        }
        self.loans.push(loan);
    }

    /// The index of the newest parked block of size key `key`.
    #[inline]
    pub(crate) fn newest_of(&self, key: usize) -> Option<usize> {
        if self.same_key != 0 {
            return (self.same_key == key).then(|| self.loans.len - 1);
        }
        self.loans
            .as_slice()
            .iter()
            .rposition(|l| l.size_key == key)
    }

    #[inline]
    pub(crate) fn get(&self, at: usize) -> Loan {
        self.loans.as_slice()[at]
    }

    /// Takes parked block `at` out, keeping the order of the others.
    #[inline]
    pub(crate) fn take(&mut self, at: usize) -> Loan {
        let loan = self.loans.remove(at);
        if self.loans.len == 0 {
            self.same_key = 0;
        } else if self.same_key == 0 && self.loans.len == 1 {
            self.same_key = self.loans.items[0].size_key;
        }
        loan
    }

    /// Takes every parked block out.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = Loan> + '_ {
        self.same_key = 0;
        self.loans.drain()
    }

    /// Gives `out` the parked blocks `chosen` picks, oldest first, in one
    /// pass (taking them one by one would move the rest for each).
    pub(crate) fn take_if(&mut self, chosen: impl Fn(&Loan) -> bool, mut out: impl FnMut(Loan)) {
        let mut kept = 0;
        for at in 0..self.loans.len {
            let loan = self.loans.items[at];
            if chosen(&loan) {
                out(loan);
            } else {
                self.loans.items[kept] = loan;
                kept += 1;
            }
        }
        self.loans.len = kept;
        let rest = self.loans.as_slice();
        self.same_key = match rest.first() {
            Some(first) if rest.iter().all(|l| l.size_key == first.size_key) => first.size_key,
            _ => 0,
        };
    }
}

/// The blocks a cache handed out, with their addresses in an array of their
/// own: a free of a block the cache did not hand out (most frees, once more
/// blocks are live than the cache holds) reads 8 bytes per entry, not a loan.
pub(crate) struct HandedOut {
    addrs: Fixed<usize, HANDED_OUT>,
    loans: Fixed<Loan, HANDED_OUT>,
    /// The block size of every loan, while they all have the same one (else 0).
    same_size: usize,
}

impl HandedOut {
    pub(crate) fn new() -> Self {
        HandedOut {
            addrs: Fixed::new(0),
            loans: Fixed::new(VACANT),
            same_size: 0,
        }
    }

    /// True when a block of `size` bytes may be handed out: [`HANDED_OUT_MIXED`]
    /// blocks, or [`HANDED_OUT`] when they all have that size.
    #[inline]
    pub(crate) fn admits(&self, size: usize) -> bool {
        let n = self.loans.len;
        n < HANDED_OUT_MIXED || (n < HANDED_OUT && self.same_size == size)
    }

    /// True when a block of some size may be handed out (see [`Self::admits`]).
    #[inline]
    pub(crate) fn admits_some(&self) -> bool {
        let n = self.loans.len;
        n < HANDED_OUT_MIXED || (n < HANDED_OUT && self.same_size != 0)
    }

    /// True when there are blocks and all have `size` bytes.
    #[inline]
    pub(crate) fn all_of_size(&self, size: usize) -> bool {
        self.loans.len > 0 && self.same_size == size
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.loans.len
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.loans.len == 0
    }

    pub(crate) fn iter(&self) -> std::slice::Iter<'_, Loan> {
        self.loans.as_slice().iter()
    }

    /// The block handed out last; there is one.
    #[inline]
    pub(crate) fn newest(&self) -> Loan {
        self.get(self.loans.len - 1)
    }

    /// The index of the block at `addr`, newest first.
    #[inline]
    pub(crate) fn position(&self, addr: usize) -> Option<usize> {
        self.addrs.as_slice().iter().rposition(|&a| a == addr)
    }

    #[inline]
    pub(crate) fn get(&self, at: usize) -> Loan {
        self.loans.as_slice()[at]
    }

    #[inline]
    pub(crate) fn push(&mut self, loan: Loan) {
        if self.loans.len == 0 {
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
        if self.same_size == 0 && self.loans.len <= 1 {
            // Mixed sizes no longer: at most one block is left.
            self.same_size = self.loans.as_slice().first().map_or(0, |l| l.size);
        }
        loan
    }

    /// Takes every handed-out block out.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = Loan> + '_ {
        self.addrs.len = 0;
        self.same_size = 0;
        self.loans.drain()
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
        // Only the 1024s (i = 1, 4, 7) left after taking the others: one size again.
        p.take_if(|l| l.size_key != 1024, |_| {});
        let left: Vec<usize> = p.iter().map(|l| l.addr).collect();
        assert_eq!(left, [0x2000, 0x5000, 0x8000]);
        assert_eq!(p.newest_of(1024), Some(2));
        p.push(loan(0xA_0000, 1536));
        assert_eq!(p.newest_of(1024), Some(2));
        assert_eq!(p.drain().count(), 4);
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
        // Every other one taken out at once, in order; the rest keep theirs.
        let mut out = Vec::new();
        p.take_if(|l| l.addr / 0x1000 % 2 == 0, |l| out.push(l.addr));
        let expected: Vec<usize> = (1..=PARKED)
            .filter(|i| i % 2 == 0)
            .map(|i| 0x1000 * i)
            .collect();
        assert_eq!(out, expected);
        assert_eq!(p.len(), PARKED / 2);
        assert_eq!(p.get(0).addr, 0x1000);
        assert!(p.has_room_for(4096) && !p.has_room_for(512));
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
        assert!(!h.admits(4096) && h.all_of_size(4096) && !h.all_of_size(512));
        assert!(!h.admits_some());
        // One block of another size: back to the mixed cap until it goes.
        let other = h.swap_remove(0);
        h.push(loan(0x9_0000, 512));
        assert!(!h.admits(4096) && !h.admits(512) && !h.admits_some());
        h.swap_remove(h.position(0x9_0000).unwrap());
        // Still counted as mixed until one block is left.
        assert!(!h.admits(4096));
        while h.len() > 1 {
            h.swap_remove(0);
        }
        for i in 1..HANDED_OUT_MIXED {
            h.push(loan(0x10_0000 * i, 4096));
        }
        assert!(h.admits(4096) && !h.admits(512) && h.admits_some());
        h.push(other);
        assert_eq!(h.len(), HANDED_OUT_MIXED + 1);
    }
}
