//! A read-mostly hash table from stream to registration, built for a lookup on
//! every operator launch.
//!
//! - Readers take no lock and write no shared memory, so they do not contend
//!   with each other and scale with the number of threads.
//! - Each slot is one cache line: a sequence counter, the key and six value
//!   words. A reader copies the words and checks the counter did not move, so
//!   it never returns a torn value (words from two registrations).
//! - Open addressing with linear probing; removal shifts later entries back
//!   instead of leaving tombstones, so churn never degrades lookups. Moving
//!   entries (removal, growth) is guarded by a table-wide `layout` sequence
//!   counter that every reader checks once at the end.
//! - Writers serialise on a mutex. A table that grows is kept, not freed,
//!   until the whole map is dropped, so a reader still walking it never
//!   touches freed memory. Tables only double, so the kept ones together are
//!   smaller than the current one.
//!
//! The sequence-lock protocol is the one from Boehm, "Can seqlocks get along
//! with programming language memory models?" (2012): relaxed atomic data,
//! a release fence after the writer's odd store, an acquire fence before the
//! reader's second load.

use super::sync::{back_off, fence, owned_load, AtomicPtr, AtomicUsize, Mutex, Ordering};
use std::marker::PhantomData;
use std::num::NonZeroUsize;

/// Words of value a slot holds.
pub const VALUE_WORDS: usize = 6;

/// A value the table can hold: packed into words by the writer, unpacked from
/// a consistent copy of those words by readers.
///
/// # Safety
/// `unpack` is called only with words that `pack` produced (the sequence
/// counters guarantee that), and must be valid for all of them.
pub unsafe trait Packed: Copy {
    /// The value as words.
    fn pack(&self) -> [usize; VALUE_WORDS];
    /// The value back from words that `pack` produced.
    ///
    /// # Safety
    /// `words` came from `pack`.
    unsafe fn unpack(words: [usize; VALUE_WORDS]) -> Self;
}

// SAFETY: every bit pattern is a valid array of words.
unsafe impl Packed for [usize; VALUE_WORDS] {
    fn pack(&self) -> [usize; VALUE_WORDS] {
        *self
    }
    unsafe fn unpack(words: [usize; VALUE_WORDS]) -> Self {
        words
    }
}

const EMPTY: usize = 0;
const INITIAL_CAPACITY: usize = 64;
const FIBONACCI: usize = 0x9E37_79B9_7F4A_7C15;

#[repr(C, align(64))]
struct Slot {
    seq: AtomicUsize,
    key: AtomicUsize,
    words: [AtomicUsize; VALUE_WORDS],
}

enum Probe<'t> {
    Found { slot: &'t Slot, seq: usize },
    Missing,
    Busy,
}

impl Slot {
    fn new() -> Self {
        Slot {
            seq: AtomicUsize::new(0),
            key: AtomicUsize::new(EMPTY),
            words: std::array::from_fn(|_| AtomicUsize::new(0)),
        }
    }

    /// Reader side: a copy that is only trusted once the counters confirm it.
    fn load_words(&self) -> [usize; VALUE_WORDS] {
        std::array::from_fn(|i| self.words[i].load(Ordering::Relaxed))
    }

    /// Writer only: the words as they are (no one else stores to them).
    fn owned_words(&self) -> [usize; VALUE_WORDS] {
        std::array::from_fn(|i| owned_load(&self.words[i]))
    }

    /// Writer only: the key as it is.
    fn owned_key(&self) -> usize {
        owned_load(&self.key)
    }

    /// Writes through the slot's own sequence counter: for changes that move
    /// nothing (insert into an empty slot, replace in place). Writer only.
    fn publish(&self, key: usize, words: &[usize; VALUE_WORDS]) {
        let seq = owned_load(&self.seq);
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        self.store_raw(key, words);
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// Plain stores: for a table nobody reads yet, or under the layout counter.
    fn store_raw(&self, key: usize, words: &[usize; VALUE_WORDS]) {
        for (cell, word) in self.words.iter().zip(words) {
            cell.store(*word, Ordering::Relaxed);
        }
        self.key.store(key, Ordering::Relaxed);
    }
}

/// The slot a key's probe run starts at, in a table of `mask + 1` slots.
#[inline]
fn home(key: usize, shift: u32, mask: usize) -> usize {
    // Fibonacci hashing: stream handles are aligned addresses, so the low
    // bits alone would cluster.
    key.wrapping_mul(FIBONACCI).checked_shr(shift).unwrap_or(0) & mask
}

/// The slot `key`'s probe run starts at in a table of `capacity` slots (a
/// power of two). Lets tests and models pick keys that collide, to exercise
/// probe runs, wrap-around and backward-shift removal.
#[doc(hidden)]
pub fn home_slot(key: NonZeroUsize, capacity: usize) -> usize {
    let capacity = capacity.next_power_of_two().max(2);
    home(
        key.get(),
        usize::BITS - capacity.trailing_zeros(),
        capacity - 1,
    )
}

struct Table {
    mask: usize,
    shift: u32,
    slots: Box<[Slot]>,
}

impl Table {
    fn with_capacity(capacity: usize) -> Box<Table> {
        let capacity = capacity.next_power_of_two().max(2);
        Box::new(Table {
            mask: capacity - 1,
            shift: usize::BITS - capacity.trailing_zeros(),
            slots: (0..capacity).map(|_| Slot::new()).collect(),
        })
    }

    fn capacity(&self) -> usize {
        self.mask + 1
    }

    #[inline]
    fn home(&self, key: usize) -> usize {
        home(key, self.shift, self.mask)
    }

    #[inline]
    fn probe(&self, key: usize) -> Probe<'_> {
        let mut index = self.home(key);
        for _ in 0..self.capacity() {
            let slot = &self.slots[index];
            let seq = slot.seq.load(Ordering::Acquire);
            if seq & 1 == 1 {
                return Probe::Busy;
            }
            match slot.key.load(Ordering::Relaxed) {
                EMPTY => return Probe::Missing,
                found if found == key => return Probe::Found { slot, seq },
                _ => index = (index + 1) & self.mask,
            }
        }
        Probe::Missing
    }

    /// Writer only: the slot holding `key`, or the empty slot it would go to.
    fn locate(&self, key: usize) -> Result<usize, usize> {
        let mut index = self.home(key);
        loop {
            match self.slots[index].owned_key() {
                EMPTY => return Err(index),
                found if found == key => return Ok(index),
                _ => index = (index + 1) & self.mask,
            }
        }
    }
}

#[repr(align(64))]
struct ReadSide {
    /// Odd while a writer moves entries or swaps tables.
    layout: AtomicUsize,
    current: AtomicPtr<Table>,
}

struct WriteSide {
    /// Every table ever current; the last one is current. Boxed so that a
    /// table's address, which readers hold, survives the Vec growing.
    #[allow(clippy::vec_box)]
    tables: Vec<Box<Table>>,
    len: usize,
}

/// A concurrent map from a non-zero key to a [`Packed`] value: lock-free,
/// allocation-free reads; serialised writes.
pub struct SeqTable<V> {
    read: ReadSide,
    write: Mutex<WriteSide>,
    _value: PhantomData<V>,
}

// SAFETY: values cross threads only as copies of their words; `V: Send`
// makes handing those copies to another thread sound.
unsafe impl<V: Packed + Send> Send for SeqTable<V> {}
unsafe impl<V: Packed + Send> Sync for SeqTable<V> {}

impl<V: Packed> Default for SeqTable<V> {
    fn default() -> Self {
        Self::with_capacity(INITIAL_CAPACITY)
    }
}

impl<V: Packed> SeqTable<V> {
    /// An empty map with room for `capacity` slots before it first grows
    /// (it grows when half full).
    pub fn with_capacity(capacity: usize) -> Self {
        let mut table = Table::with_capacity(capacity);
        let current: *mut Table = &mut *table;
        SeqTable {
            read: ReadSide {
                layout: AtomicUsize::new(0),
                current: AtomicPtr::new(current),
            },
            write: Mutex::new(WriteSide {
                tables: vec![table],
                len: 0,
            }),
            _value: PhantomData,
        }
    }

    /// The value for `key`, read without locking or allocating.
    #[inline]
    pub fn get(&self, key: NonZeroUsize) -> Option<V> {
        let key = key.get();
        let mut attempt = 0;
        loop {
            let layout = self.read.layout.load(Ordering::Acquire);
            if layout & 1 == 0 {
                // SAFETY: `current` always points at a table in `tables`, and
                // tables are only freed when `self` is dropped.
                let table = unsafe { &*self.read.current.load(Ordering::Acquire) };
                match table.probe(key) {
                    Probe::Found { slot, seq } => {
                        let words = slot.load_words();
                        fence(Ordering::Acquire);
                        if slot.seq.load(Ordering::Relaxed) == seq
                            && self.read.layout.load(Ordering::Relaxed) == layout
                        {
                            // SAFETY: the unchanged counters prove the words are
                            // one whole `pack` output.
                            return Some(unsafe { V::unpack(words) });
                        }
                    }
                    Probe::Missing => {
                        fence(Ordering::Acquire);
                        if self.read.layout.load(Ordering::Relaxed) == layout {
                            return None;
                        }
                    }
                    Probe::Busy => {}
                }
            }
            back_off(&mut attempt);
        }
    }

    /// Sets the value for `key`, returning the one it replaces.
    pub fn insert(&self, key: NonZeroUsize, value: V) -> Option<V> {
        let key = key.get();
        let words = value.pack();
        let mut write = self.write.lock();
        let table = self.current(&write);
        match table.locate(key) {
            Ok(index) => {
                let slot = &table.slots[index];
                // SAFETY: the writer lock is held, so the words are whole.
                let old = unsafe { V::unpack(slot.owned_words()) };
                slot.publish(key, &words);
                Some(old)
            }
            Err(mut index) => {
                if (write.len + 1) * 2 > table.capacity() {
                    self.grow(&mut write);
                    index = match self.current(&write).locate(key) {
                        Ok(found) | Err(found) => found,
                    };
                }
                self.current(&write).slots[index].publish(key, &words);
                write.len += 1;
                None
            }
        }
    }

    /// Removes `key`, returning its value.
    pub fn remove(&self, key: NonZeroUsize) -> Option<V> {
        let key = key.get();
        let mut write = self.write.lock();
        let table = self.current(&write);
        let index = table.locate(key).ok()?;
        // SAFETY: the writer lock is held, so the words are whole.
        let old = unsafe { V::unpack(table.slots[index].owned_words()) };
        self.change_layout(|| {
            // Backward-shift deletion: pull later members of the probe run
            // into the hole so every key stays reachable from its home slot.
            let mut hole = index;
            let mut next = (index + 1) & table.mask;
            loop {
                let moving = table.slots[next].owned_key();
                if moving == EMPTY {
                    break;
                }
                let home = table.home(moving);
                if next.wrapping_sub(home) & table.mask >= next.wrapping_sub(hole) & table.mask {
                    let words = table.slots[next].owned_words();
                    table.slots[hole].store_raw(moving, &words);
                    hole = next;
                }
                next = (next + 1) & table.mask;
            }
            table.slots[hole].store_raw(EMPTY, &[0; VALUE_WORDS]);
        });
        write.len -= 1;
        Some(old)
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.write.lock().len
    }

    /// True when no key is present.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every key and value, taken under the writer lock (a consistent copy).
    pub fn entries(&self) -> Vec<(NonZeroUsize, V)> {
        let write = self.write.lock();
        let table = self.current(&write);
        table
            .slots
            .iter()
            .filter_map(|slot| {
                let key = NonZeroUsize::new(slot.owned_key())?;
                // SAFETY: the writer lock is held, so the words are whole.
                Some((key, unsafe { V::unpack(slot.owned_words()) }))
            })
            .collect()
    }

    fn current<'w>(&self, write: &'w WriteSide) -> &'w Table {
        write
            .tables
            .last()
            .expect("there is always a current table")
    }

    fn grow(&self, write: &mut WriteSide) {
        let old = self.current(write);
        let bigger = Table::with_capacity(old.capacity() * 2);
        for slot in old.slots.iter() {
            let key = slot.owned_key();
            if key != EMPTY {
                let index = match bigger.locate(key) {
                    Ok(found) | Err(found) => found,
                };
                bigger.slots[index].store_raw(key, &slot.owned_words());
            }
        }
        let pointer = &*bigger as *const Table as *mut Table;
        write.tables.push(bigger);
        self.change_layout(|| self.read.current.store(pointer, Ordering::Release));
    }

    /// Runs `moves` with the layout counter odd, so that readers who overlap
    /// it retry.
    fn change_layout(&self, moves: impl FnOnce()) {
        let layout = owned_load(&self.read.layout);
        self.read
            .layout
            .store(layout.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        moves();
        self.read
            .layout
            .store(layout.wrapping_add(2), Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn key(k: usize) -> NonZeroUsize {
        NonZeroUsize::new(k).unwrap()
    }

    #[test]
    fn insert_get_replace_remove() {
        let table = SeqTable::<[usize; VALUE_WORDS]>::default();
        assert_eq!(table.get(key(8)), None);
        assert_eq!(table.insert(key(8), [1; 6]), None);
        assert_eq!(table.get(key(8)), Some([1; 6]));
        assert_eq!(table.insert(key(8), [2; 6]), Some([1; 6]));
        assert_eq!(table.get(key(8)), Some([2; 6]));
        assert_eq!(table.len(), 1);
        assert_eq!(table.remove(key(8)), Some([2; 6]));
        assert_eq!(table.remove(key(8)), None);
        assert_eq!(table.get(key(8)), None);
        assert!(table.is_empty());
    }

    #[test]
    fn growth_and_backward_shift_keep_every_key_reachable() {
        // A tiny table forces long probe runs, wrap-around and several growths.
        let table = SeqTable::<[usize; VALUE_WORDS]>::with_capacity(2);
        let keys: Vec<usize> = (1..=3000).map(|i| i * 64).collect();
        for &k in &keys {
            table.insert(key(k), [k; 6]);
        }
        for &k in &keys {
            assert_eq!(table.get(key(k)), Some([k; 6]));
        }
        // Remove every third key; all others must still be found.
        for &k in keys.iter().step_by(3) {
            assert_eq!(table.remove(key(k)), Some([k; 6]));
        }
        for (i, &k) in keys.iter().enumerate() {
            let want = if i % 3 == 0 { None } else { Some([k; 6]) };
            assert_eq!(table.get(key(k)), want, "key {k}");
        }
        assert_eq!(table.len(), 2000);
        assert_eq!(table.entries().len(), 2000);
    }

    #[test]
    fn removal_in_a_full_cluster_that_wraps_around() {
        // Keys that all hash to the same home slot in a small table.
        let table = SeqTable::<[usize; VALUE_WORDS]>::with_capacity(16);
        let probe = Table::with_capacity(16);
        let home = probe.home(1);
        let same_home: Vec<usize> = (1..100_000)
            .filter(|&k| probe.home(k) == home)
            .take(7)
            .collect();
        for &k in &same_home {
            table.insert(key(k), [k; 6]);
        }
        for (i, &k) in same_home.iter().enumerate() {
            assert_eq!(table.remove(key(k)), Some([k; 6]));
            for &rest in &same_home[i + 1..] {
                assert_eq!(table.get(key(rest)), Some([rest; 6]));
            }
        }
    }
}
