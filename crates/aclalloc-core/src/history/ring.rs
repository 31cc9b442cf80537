//! A bounded ring of copyable items, preallocated once: pushing never
//! allocates, and once full overwrites the oldest item, counted as dropped.

use std::collections::TryReserveError;

/// At most `capacity` items, oldest first; older ones are overwritten.
pub struct Ring<T: Copy> {
    items: Vec<T>,
    capacity: usize,
    /// Index of the oldest item once the ring is full.
    head: usize,
    dropped: u64,
}

impl<T: Copy> Ring<T> {
    /// An empty ring of `capacity` items, its memory taken now. Fails (and
    /// takes nothing) when that memory cannot be had, rather than aborting.
    pub fn with_capacity(capacity: usize) -> Result<Self, TryReserveError> {
        let mut items = Vec::new();
        items.try_reserve_exact(capacity)?;
        Ok(Ring {
            items,
            capacity,
            head: 0,
            dropped: 0,
        })
    }

    /// Appends `item`, overwriting the oldest one when full. Never
    /// allocates. A ring of capacity 0 drops everything.
    #[inline]
    pub fn push(&mut self, item: T) {
        if self.items.len() < self.capacity {
            self.items.push(item); // within the reserved capacity
        } else if self.capacity == 0 {
            self.dropped += 1;
        } else {
            self.items[self.head] = item;
            self.head = (self.head + 1) % self.capacity;
            self.dropped += 1;
        }
    }

    /// The items, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        let (newer, older) = self.items.split_at(self.head);
        older.iter().chain(newer.iter())
    }

    /// How many items it holds.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True when it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The most it holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// How many items were overwritten (or refused by a ring of capacity 0).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contents(r: &Ring<u32>) -> Vec<u32> {
        r.iter().copied().collect()
    }

    #[test]
    fn keeps_the_newest_items_in_order_and_counts_the_rest() {
        let mut r = Ring::with_capacity(3).unwrap();
        assert!(r.is_empty());
        r.push(1);
        r.push(2);
        assert_eq!(contents(&r), [1, 2]);
        assert_eq!(r.dropped(), 0);
        for i in 3..=7 {
            r.push(i);
        }
        assert_eq!(contents(&r), [5, 6, 7]);
        assert_eq!((r.dropped(), r.len(), r.capacity()), (4, 3, 3));
    }

    #[test]
    fn pushing_never_reallocates() {
        let mut r = Ring::with_capacity(5).unwrap();
        let buffer = r.items.as_ptr();
        for i in 0..100u32 {
            r.push(i);
            assert_eq!(r.items.as_ptr(), buffer);
        }
        assert_eq!(contents(&r), [95, 96, 97, 98, 99]);
        assert_eq!(r.dropped(), 95);
    }

    #[test]
    fn a_ring_of_nothing_drops_everything() {
        let mut r = Ring::with_capacity(0).unwrap();
        r.push(1u32);
        assert!(r.is_empty());
        assert_eq!(r.dropped(), 1);
    }

    #[test]
    fn an_impossible_size_is_refused_not_aborted() {
        assert!(Ring::<[u64; 8]>::with_capacity(usize::MAX / 2).is_err());
    }
}
