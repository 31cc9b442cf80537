//! The crate's one lock-free hash table: a map from a non-zero word to a
//! small `Copy` value packed into `N` words, read without a lock, a write or
//! an allocation, written under one mutex. The stream registry, the handle
//! tables and the tracking layer keep their maps in it.
//!
//! - **A slot holds the value inline** (its own sequence counter, the key,
//!   the `N` words; 64 bytes for a six-word value), so a hit reads one slot.
//!   Each slot is a `SeqLock`: a reader that finds its key in a slot whose
//!   counter was even and unchanged across its copy holds a (key, value)
//!   pair that was in the map at that moment. Rewriting a value, moving a
//!   key back on removal (briefly in two slots, both true), clearing a slot
//!   or filling it with another key all happen under the slot's counter.
//! - **A miss is trusted only if the layout did not change.** A key can
//!   look absent while a removal moves it back past the reader, so the
//!   table-wide `layout` counter (odd while a writer moves or clears slots,
//!   or swaps arrays) must be even and unchanged around a probe that ends
//!   at an empty slot; otherwise the reader tries again.
//! - **Open addressing, linear probing, backward-shift removal** (no
//!   tombstones: churn never lengthens probe runs). The array doubles when
//!   more than `1 / GROW_AT` full, which keeps nearly every key in its home
//!   slot. A replaced array is frozen (writers change the current one only)
//!   and kept until the table is dropped, so a reader still in it never
//!   touches freed memory and reads the map as it was when replaced.
//! - **Writers serialise on one mutex**, which also guards a writer-side
//!   value `W` ([`Table::write`] gives both), so that a user's own books can
//!   change under the same lock as the map. A table made with
//!   [`Table::new_biased`] lets a thread that writes alone take it without
//!   a locked instruction ([`super::biased`]).
//!
//! Every atomic comes from `super::sync`, loom's under `--cfg loom`. The
//! models in tests/loom_registry.rs pin each ordering (each model fails when
//! its ordering is weakened):
//! - `rewrite_vs_get`: the release fence in `SeqLock::begin_write` (a
//!   reader that sees a new word also sees the counter odd);
//! - `fill_empty_vs_get`: the release store in `SeqLock::end_write` and
//!   the acquire load in `SeqLock::read_begin` (a reader that sees the
//!   finished counter sees the words under it);
//! - `backward_shift_vs_get`: the acquire fence in `SeqLock::read_retry`
//!   on the layout counter (a miss overlapping a removal is not trusted);
//! - `growth_vs_get`: the acquire load of a new array's `slots` (a reader
//!   sees it initialised). The release stores of `slots` and `mask` are
//!   also ordered by the layout counter's release fence.
//!
//! `slot_reused_for_another_key_vs_get` and `insert_and_remove_race_with_get`
//! check the protocol as a whole.

use super::biased::{BiasedGuard, BiasedMutex};
use super::error::{Error, Result};
use super::sync::{back_off, fence, owned_load, AtomicPtr, AtomicUsize, Ordering};
use std::marker::PhantomData;
use std::num::NonZeroUsize;
use std::ops::{Deref, DerefMut};

/// The value size most tables use (a registration is six words).
pub const VALUE_WORDS: usize = 6;

/// A value a [`Table`] can hold: packed into `N` words by a writer,
/// unpacked from a consistent copy of them by readers.
///
/// # Safety
/// `unpack` is called only with words `pack` produced, and must be sound
/// for all of them.
pub unsafe trait Packed<const N: usize = VALUE_WORDS>: Copy {
    /// The value as words.
    fn pack(&self) -> [usize; N];
    /// The value back from words that `pack` produced.
    ///
    /// # Safety
    /// `words` came from `pack`.
    unsafe fn unpack(words: [usize; N]) -> Self;
}

// SAFETY: every bit pattern is a valid array of words.
unsafe impl<const N: usize> Packed<N> for [usize; N] {
    fn pack(&self) -> [usize; N] {
        *self
    }
    unsafe fn unpack(words: [usize; N]) -> Self {
        words
    }
}

const EMPTY: usize = 0;
const INITIAL_CAPACITY: usize = 64;
/// An array grows when more than `1 / GROW_AT` of its slots would hold keys.
const GROW_AT: usize = 4;

/// The crate's hash of a key: the 64-bit finalizer of MurmurHash3, so that
/// every bit of a key reaches the low bits a table indexes by. Keys are
/// addresses at a fixed stride, which a single multiply clusters badly for
/// some strides (see the `hash_quality` test).
#[inline]
pub fn hash(key: usize) -> usize {
    let mut h = key as u64;
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h as usize
}

/// A `HashMap` keyed by a word (an address, a handle) under [`hash`]: the
/// keys are numbers the library hands out, not text a caller chooses, so
/// std's keyed SipHash buys nothing and costs most of a lookup.
pub type WordMap<V> =
    std::collections::HashMap<usize, V, std::hash::BuildHasherDefault<WordHasher>>;

/// [`WordMap`]'s hasher: [`hash`] of the one word written.
#[derive(Clone, Copy, Debug, Default)]
pub struct WordHasher(u64);

impl std::hash::Hasher for WordHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        // Only words are written (`write_usize`); any other key still hashes.
        for &b in bytes {
            self.0 = hash((self.0 as usize).rotate_left(8) ^ b as usize) as u64;
        }
    }

    #[inline]
    fn write_usize(&mut self, word: usize) {
        self.0 = hash(word ^ self.0 as usize) as u64;
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// The slot `key`'s probe run starts at in an array of `capacity` slots:
/// lets tests and models pick keys that collide.
#[doc(hidden)]
pub fn home_slot(key: NonZeroUsize, capacity: usize) -> usize {
    hash(key.get()) & (capacity.next_power_of_two().max(2) - 1)
}

/// A sequence counter (Boehm, "Can seqlocks get along with programming
/// language memory models?", 2012): odd while its one writer (the holder of
/// the table's lock) changes the data it guards, which is relaxed atomics.
pub(crate) struct SeqLock(AtomicUsize);

impl SeqLock {
    fn new() -> Self {
        SeqLock(AtomicUsize::new(0))
    }

    /// Reader: the counter before the copy (odd: a writer is in).
    #[inline]
    pub(crate) fn read_begin(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }

    /// Reader: true when the copy made since `read_begin` returned `seq`
    /// may be torn and must be thrown away.
    #[inline]
    pub(crate) fn read_retry(&self, seq: usize) -> bool {
        // Orders the copy's loads before the re-check.
        fence(Ordering::Acquire);
        seq & 1 != 0 || self.0.load(Ordering::Relaxed) != seq
    }

    /// Writer: makes the counter odd; returns what `end_write` needs.
    #[inline]
    pub(crate) fn begin_write(&self) -> usize {
        let seq = owned_load(&self.0);
        self.0.store(seq.wrapping_add(1), Ordering::Relaxed);
        // Orders the odd counter before the data stores that follow: a
        // reader that sees any of them sees the counter odd (or later).
        fence(Ordering::Release);
        seq
    }

    /// Writer: makes the counter even again, publishing the data stores.
    #[inline]
    pub(crate) fn end_write(&self, seq: usize) {
        self.0.store(seq.wrapping_add(2), Ordering::Release);
    }

    #[inline]
    fn write<R>(&self, change: impl FnOnce() -> R) -> R {
        let seq = self.begin_write();
        let result = change();
        self.end_write(seq);
        result
    }
}

#[repr(C, align(64))]
struct Slot<const N: usize> {
    seq: SeqLock,
    key: AtomicUsize,
    words: [AtomicUsize; N],
}

impl<const N: usize> Slot<N> {
    fn new() -> Self {
        Slot {
            seq: SeqLock::new(),
            key: AtomicUsize::new(EMPTY),
            words: std::array::from_fn(|_| AtomicUsize::new(0)),
        }
    }

    /// Writer: the key and words, with no counter (for an array no reader
    /// can see yet, or inside `publish`).
    #[inline]
    fn fill(&self, key: usize, words: [usize; N]) {
        self.key.store(key, Ordering::Relaxed);
        for (cell, word) in self.words.iter().zip(words) {
            cell.store(word, Ordering::Relaxed);
        }
    }

    /// Writer: makes the slot hold `key` and `words` (`EMPTY` clears it).
    #[inline]
    fn publish(&self, key: usize, words: [usize; N]) {
        self.seq.write(|| self.fill(key, words));
    }

    /// Writer: replaces the words of the key the slot holds. Every word is
    /// stored: testing each word for a change costs more than storing it to
    /// a line the writer already owns.
    #[inline]
    fn rewrite(&self, words: [usize; N]) {
        self.seq.write(|| {
            for (cell, word) in self.words.iter().zip(words) {
                cell.store(word, Ordering::Relaxed);
            }
        });
    }

    #[inline]
    fn owned_key(&self) -> usize {
        owned_load(&self.key)
    }

    #[inline]
    fn owned_words(&self) -> [usize; N] {
        std::array::from_fn(|i| owned_load(&self.words[i]))
    }
}

/// One array of slots, a power of two long.
struct Array<const N: usize> {
    mask: usize,
    slots: Box<[Slot<N>]>,
}

impl<const N: usize> Array<N> {
    /// `capacity` empty slots (rounded up to a power of two), or `None` when
    /// the host has no memory for them.
    fn try_with_capacity(capacity: usize) -> Option<Self> {
        let capacity = capacity.next_power_of_two().max(2);
        let mut slots = Vec::new();
        slots.try_reserve_exact(capacity).ok()?;
        slots.extend((0..capacity).map(|_| Slot::new()));
        Some(Array {
            mask: capacity - 1,
            slots: slots.into_boxed_slice(),
        })
    }

    #[inline]
    fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Writer: the slot holding `key`, or the empty slot it would go to.
    #[inline]
    fn locate(&self, key: usize) -> Result<usize, usize> {
        let mut index = hash(key) & self.mask;
        loop {
            match self.slots[index].owned_key() {
                EMPTY => return Err(index),
                found if found == key => return Ok(index),
                _ => index = (index + 1) & self.mask,
            }
        }
    }
}

/// What a reader loads before its probe, in one line. An array swap stores
/// `slots`, then `mask`, each with release, and readers load `mask`, then
/// `slots`, each with acquire: the slots a reader sees are at least as new
/// as its mask (arrays only grow, so its index is in bounds) and initialised.
#[repr(align(64))]
struct ReadSide<const N: usize> {
    layout: SeqLock,
    mask: AtomicUsize,
    slots: AtomicPtr<Slot<N>>,
}

/// What the table's lock guards.
struct Inner<const N: usize, W> {
    /// The array writers change.
    current: Array<N>,
    /// The arrays it replaced, frozen, kept for readers still in them.
    retired: Vec<Array<N>>,
    len: usize,
    state: W,
}

impl<const N: usize, W> Inner<N, W> {
    #[inline]
    fn current(&self) -> &Array<N> {
        &self.current
    }
}

enum Probe<const N: usize> {
    Hit([usize; N]),
    /// An empty slot ended the run: a miss if the layout did not change.
    Missing,
    /// The key's slot was being written.
    Busy,
}

/// A concurrent map from a non-zero key to a [`Packed`] value of `N` words:
/// lock-free, allocation-free reads; writes under one lock, which also
/// guards the writer-side value `W`.
pub struct Table<V, const N: usize, W = ()> {
    read: ReadSide<N>,
    write: BiasedMutex<Inner<N, W>>,
    _value: PhantomData<V>,
}

// SAFETY: values cross threads only as copies of their words, sound for
// `V: Send`; `W` is reached only through the mutex.
unsafe impl<V: Send, const N: usize, W: Send> Send for Table<V, N, W> {}
// SAFETY: as for `Send`: shared readers copy words out of atomics.
unsafe impl<V: Send, const N: usize, W: Send> Sync for Table<V, N, W> {}

impl<V: Packed<N>, const N: usize, W: Default> Default for Table<V, N, W> {
    fn default() -> Self {
        Self::new(INITIAL_CAPACITY, W::default())
    }
}

impl<V: Packed<N>, const N: usize, W: Default> Table<V, N, W> {
    /// An empty table with `capacity` slots (rounded up to a power of two)
    /// before it first grows.
    pub fn with_capacity(capacity: usize) -> Self {
        Self::new(capacity, W::default())
    }
}

impl<V: Packed<N>, const N: usize, W> Table<V, N, W> {
    /// An empty table with `capacity` slots and the writer-side `state`.
    pub fn new(capacity: usize, state: W) -> Self {
        Self::made(capacity, state, false)
    }

    /// [`Table::new`] whose writer lock is biased towards the thread that
    /// writes alone ([`crate::base::biased`]): for a table written on every
    /// operation of a hot path, most often by one thread.
    pub fn new_biased(capacity: usize, state: W) -> Self {
        Self::made(capacity, state, true)
    }

    fn made(capacity: usize, state: W, biased: bool) -> Self {
        // A table is made once, up front: no memory for it is fatal, as for
        // any std container.
        let array = Array::try_with_capacity(capacity).unwrap_or_else(|| out_of_memory::<N>());
        Table {
            read: ReadSide {
                layout: SeqLock::new(),
                mask: AtomicUsize::new(array.mask),
                slots: AtomicPtr::new(array.slots.as_ptr() as *mut Slot<N>),
            },
            write: {
                let inner = Inner {
                    current: array,
                    retired: Vec::new(),
                    len: 0,
                    state,
                };
                if biased {
                    BiasedMutex::new_biased(inner)
                } else {
                    BiasedMutex::new(inner)
                }
            },
            _value: PhantomData,
        }
    }

    /// The value for `key`, read without locking or allocating; waits out a
    /// writer in its way.
    #[inline]
    pub fn get(&self, key: NonZeroUsize) -> Option<V> {
        match self.try_get(key) {
            Some(answer) => answer,
            None => self.get_contended(key),
        }
    }

    /// `get` once a writer got in the way: out of line, so that the hit
    /// path makes no call and keeps no register for the back-off.
    #[cold]
    #[inline(never)]
    fn get_contended(&self, key: NonZeroUsize) -> Option<V> {
        let mut attempt = 0;
        loop {
            back_off(&mut attempt);
            if let Some(answer) = self.try_get(key) {
                return answer;
            }
        }
    }

    /// One lookup, which never waits: `None` when a writer was in the way
    /// (then [`Table::get`] answers). For a hot path that leaves that case
    /// to a cold one.
    #[inline]
    pub fn try_get(&self, key: NonZeroUsize) -> Option<Option<V>> {
        let layout = self.read.layout.read_begin();
        match self.probe(key.get()) {
            // SAFETY: the slot's unchanged, even counter proves the words
            // are one whole `pack` output.
            Probe::Hit(words) => Some(Some(unsafe { V::unpack(words) })),
            Probe::Missing if !self.read.layout.read_retry(layout) => Some(None),
            Probe::Missing | Probe::Busy => None,
        }
    }

    /// One walk of `key`'s probe run in the current array.
    #[inline]
    fn probe(&self, key: usize) -> Probe<N> {
        // In this order: see `ReadSide`.
        let mask = self.read.mask.load(Ordering::Acquire);
        let slots = self.read.slots.load(Ordering::Acquire);
        let mut index = hash(key) & mask;
        // An empty slot ends every run: an array is at most a quarter full
        // (with an older, smaller mask a reader indexes the first slots of a
        // newer array, at most half of which hold keys). A reader walks on
        // past that only while writers keep moving keys under it.
        loop {
            // SAFETY: `index <= mask`, `slots` has at least `mask + 1` slots
            // (`ReadSide`), and arrays live as long as the table.
            let slot = unsafe { &*slots.add(index) };
            let seq = slot.seq.read_begin();
            match slot.key.load(Ordering::Relaxed) {
                found if found == key => {
                    let words = std::array::from_fn(|i| slot.words[i].load(Ordering::Relaxed));
                    if slot.seq.read_retry(seq) {
                        return Probe::Busy;
                    }
                    return Probe::Hit(words);
                }
                EMPTY => return Probe::Missing,
                _ => index = (index + 1) & mask,
            }
        }
    }

    /// The writer's lock, with the writer-side state.
    #[inline]
    pub fn write(&self) -> Writer<'_, V, N, W> {
        Writer {
            read: &self.read,
            inner: self.write.lock(),
            _value: PhantomData,
        }
    }

    /// The writer's lock if no one holds it.
    #[inline]
    pub fn try_write(&self) -> Option<Writer<'_, V, N, W>> {
        Some(Writer {
            read: &self.read,
            inner: self.write.try_lock()?,
            _value: PhantomData,
        })
    }

    /// Sets the value for `key`, returning the one it replaces.
    pub fn insert(&self, key: NonZeroUsize, value: V) -> Option<V> {
        self.write().insert(key, value)
    }

    /// As [`Table::insert`], failing with [`Error::BadAlloc`] (the map
    /// unchanged) when the host has no memory for the table to grow.
    pub fn try_insert(&self, key: NonZeroUsize, value: V) -> Result<Option<V>> {
        self.write().try_insert(key, value)
    }

    /// Removes `key`, returning its value.
    pub fn remove(&self, key: NonZeroUsize) -> Option<V> {
        self.write().remove(key)
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.write().len()
    }

    /// True when no key is present.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every key and value (a consistent copy, taken under the lock).
    pub fn entries(&self) -> Vec<(NonZeroUsize, V)> {
        self.write().entries()
    }
}

/// The table's lock, held: changes the map and reaches the writer-side
/// state (`Deref` to `W`).
pub struct Writer<'a, V, const N: usize, W> {
    read: &'a ReadSide<N>,
    inner: BiasedGuard<'a, Inner<N, W>>,
    _value: PhantomData<V>,
}

impl<V, const N: usize, W> Deref for Writer<'_, V, N, W> {
    type Target = W;
    #[inline]
    fn deref(&self) -> &W {
        &self.inner.state
    }
}

impl<V, const N: usize, W> DerefMut for Writer<'_, V, N, W> {
    #[inline]
    fn deref_mut(&mut self) -> &mut W {
        &mut self.inner.state
    }
}

impl<V: Packed<N>, const N: usize, W> Writer<'_, V, N, W> {
    /// The value for `key`.
    #[inline]
    pub fn get(&self, key: NonZeroUsize) -> Option<V> {
        let array = self.inner.current();
        let index = array.locate(key.get()).ok()?;
        // SAFETY: published words came from `pack`.
        Some(unsafe { V::unpack(array.slots[index].owned_words()) })
    }

    /// Sets the value for `key`, returning the one it replaces; no memory
    /// to grow is fatal (as for std containers).
    #[inline]
    pub fn insert(&mut self, key: NonZeroUsize, value: V) -> Option<V> {
        self.try_insert(key, value)
            .unwrap_or_else(|_| out_of_memory::<N>())
    }

    /// As [`Writer::insert`], failing with [`Error::BadAlloc`] (the map
    /// unchanged) when the host has no memory for the table to grow.
    #[inline]
    pub fn try_insert(&mut self, key: NonZeroUsize, value: V) -> Result<Option<V>> {
        let (key, words) = (key.get(), value.pack());
        let inner = &mut *self.inner;
        match inner.current().locate(key) {
            Ok(index) => {
                let slot = &inner.current().slots[index];
                // SAFETY: published words came from `pack`.
                let old = unsafe { V::unpack(slot.owned_words()) };
                slot.publish(key, words);
                Ok(Some(old))
            }
            Err(mut index) => {
                if (inner.len + 1) * GROW_AT > inner.current().capacity() {
                    grow(self.read, inner)?;
                    index = inner.current().locate(key).unwrap_or_else(|empty| empty);
                }
                // Into an empty slot: no key moves, so the layout stays (a
                // reader that saw the slot empty read the map before this).
                inner.current().slots[index].publish(key, words);
                inner.len += 1;
                Ok(None)
            }
        }
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: NonZeroUsize) -> Option<V> {
        let key = key.get();
        let inner = &mut *self.inner;
        let array = inner.current();
        let index = array.locate(key).ok()?;
        // SAFETY: published words came from `pack`.
        let old = unsafe { V::unpack(array.slots[index].owned_words()) };
        self.read.layout.write(|| {
            // Backward shift: pull later members of the run into the hole so
            // every key stays reachable from its home slot.
            let (mask, mut hole) = (array.mask, index);
            let mut next = (index + 1) & mask;
            loop {
                let moving = array.slots[next].owned_key();
                if moving == EMPTY {
                    break;
                }
                let home = hash(moving) & mask;
                if next.wrapping_sub(home) & mask >= next.wrapping_sub(hole) & mask {
                    array.slots[hole].publish(moving, array.slots[next].owned_words());
                    hole = next;
                }
                next = (next + 1) & mask;
            }
            array.slots[hole].publish(EMPTY, [0; N]);
        });
        inner.len -= 1;
        Some(old)
    }

    /// Changes the value of `key` in place; `None` (and no call) when
    /// `key` is absent. The key is not stored again.
    #[inline]
    pub fn update<R>(&mut self, key: NonZeroUsize, change: impl FnOnce(&mut V) -> R) -> Option<R> {
        let array = self.inner.current();
        let index = array.locate(key.get()).ok()?;
        let slot = &array.slots[index];
        // SAFETY: published words came from `pack`.
        let mut value = unsafe { V::unpack(slot.owned_words()) };
        let result = change(&mut value);
        slot.rewrite(value.pack());
        Some(result)
    }

    /// Removes every key for which `keep` is false.
    pub fn retain(&mut self, mut keep: impl FnMut(NonZeroUsize, &V) -> bool) {
        for (key, value) in self.entries() {
            if !keep(key, &value) {
                self.remove(key);
            }
        }
    }

    /// Every key and value.
    pub fn entries(&self) -> Vec<(NonZeroUsize, V)> {
        let slots = self.inner.current().slots.iter();
        slots
            .filter_map(|slot| {
                let key = NonZeroUsize::new(slot.owned_key())?;
                // SAFETY: published words came from `pack`.
                Some((key, unsafe { V::unpack(slot.owned_words()) }))
            })
            .collect()
    }

    /// The number of keys.
    #[inline]
    pub fn len(&self) -> usize {
        self.inner.len
    }

    /// True when no key is present.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

const NO_ROOM_TO_GROW: Error = Error::BadAlloc {
    what: "a larger array for a lock-free table",
};

/// Ends the process as the std containers do when the host has no memory.
#[cold]
fn out_of_memory<const N: usize>() -> ! {
    std::alloc::handle_alloc_error(std::alloc::Layout::new::<Slot<N>>())
}

/// Writer: swaps in an array twice the size, holding the same keys; with no
/// memory for it, fails and leaves the table as it was.
#[cold]
#[inline(never)]
fn grow<const N: usize, W>(read: &ReadSide<N>, inner: &mut Inner<N, W>) -> Result<()> {
    inner.retired.try_reserve(1).map_err(|_| NO_ROOM_TO_GROW)?;
    let old = inner.current();
    let bigger = Array::<N>::try_with_capacity(old.capacity() * 2).ok_or(NO_ROOM_TO_GROW)?;
    for slot in old.slots.iter() {
        let key = slot.owned_key();
        if key != EMPTY {
            let index = bigger.locate(key).unwrap_or_else(|empty| empty);
            bigger.slots[index].fill(key, slot.owned_words());
        }
    }
    let (mask, slots) = (bigger.mask, bigger.slots.as_ptr() as *mut Slot<N>);
    // The boxed slots stay where they are when the arrays move.
    let old = std::mem::replace(&mut inner.current, bigger);
    inner.retired.push(old);
    // In this order: see `ReadSide`. From here on the old array is frozen.
    read.layout.write(|| {
        read.slots.store(slots, Ordering::Release);
        read.mask.store(mask, Ordering::Release);
    });
    Ok(())
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn key(k: usize) -> NonZeroUsize {
        NonZeroUsize::new(k).unwrap()
    }

    type Words = [usize; VALUE_WORDS];

    #[test]
    fn insert_get_replace_remove() {
        let table = Table::<Words, 6>::default();
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
    fn a_six_word_slot_is_one_aligned_line() {
        assert_eq!(std::mem::size_of::<Slot<6>>(), 64);
        assert_eq!(std::mem::align_of::<Slot<1>>(), 64);
    }

    #[test]
    fn writer_state_update_retain_and_try_write() {
        let table = Table::<[usize; 1], 1, Vec<usize>>::new(4, Vec::new());
        {
            let mut w = table.write();
            for k in 1..=10 {
                w.insert(key(k), [k]);
                w.push(k);
            }
            assert!(table.try_write().is_none(), "the lock is held");
            assert_eq!(w.update(key(3), |v| v[0] = 30), Some(()));
            assert_eq!(w.update(key(11), |v| v[0] = 0), None);
            w.retain(|k, _| k.get() % 2 == 1);
            assert_eq!(w.get(key(3)), Some([30]));
            assert_eq!(w.len(), 5);
        }
        assert_eq!(table.try_write().map(|w| w.len()), Some(5));
        assert_eq!(table.write().as_slice(), &(1..=10).collect::<Vec<_>>()[..]);
        assert_eq!(table.get(key(3)), Some([30]));
        assert_eq!(table.get(key(4)), None);
    }

    /// `update` stores the words only: a reader racing with it still finds
    /// the key and sees each value whole (all six words equal).
    #[test]
    fn updates_are_seen_whole_and_keep_the_key() {
        let table = Table::<Words, 6>::default();
        table.insert(key(64), [0; 6]);
        let done = crate::base::sync::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                for i in 1..=20_000 {
                    let mut w = table.write();
                    assert_eq!(w.update(key(64), |v| *v = [i; 6]), Some(()));
                }
                done.store(true, Ordering::Relaxed);
            });
            let mut last = 0;
            while !done.load(Ordering::Relaxed) {
                let v = table.get(key(64)).expect("the key stays");
                assert!(v.iter().all(|&w| w == v[0]), "torn: {v:?}");
                assert!(v[0] >= last, "went back");
                last = v[0];
            }
        });
        assert_eq!(table.get(key(64)), Some([20_000; 6]));
    }

    #[test]
    fn growth_and_backward_shift_keep_every_key_reachable() {
        let table = Table::<Words, 6>::with_capacity(2);
        let keys: Vec<usize> = (1..=3000).map(|i| i * 64).collect();
        for &k in &keys {
            table.insert(key(k), [k; 6]);
        }
        for &k in keys.iter().step_by(3) {
            assert_eq!(table.remove(key(k)), Some([k; 6]));
        }
        for (i, &k) in keys.iter().enumerate() {
            let want = (i % 3 != 0).then_some([k; 6]);
            assert_eq!(table.get(key(k)), want, "key {k}");
        }
        assert_eq!(table.len(), 2000);
        assert_eq!(table.entries().len(), 2000);
        assert!(table.write.lock().current().capacity() >= GROW_AT * 3000);
    }

    #[test]
    fn removal_in_a_full_cluster_that_wraps_around() {
        let table = Table::<Words, 6>::with_capacity(16);
        // Home in the last slot: the run wraps around to the first.
        let same_home: Vec<usize> = (1..100_000)
            .filter(|&k| home_slot(key(k), 16) == 15)
            .take(3)
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

    /// With 10,000 keys in 65,536 slots, at least nine in ten keys must be
    /// in their home slot and the mean probe run under 1.2, for
    /// runtime-like handles at any stride and for heap addresses (a single
    /// multiply gives runs of 12 at stride 0x240).
    #[test]
    fn hash_quality() {
        const SLOTS: usize = 65536;
        const KEYS: usize = 10_000;
        let mut sets: Vec<Vec<usize>> = [
            8, 16, 24, 0x40, 0x100, 0x240, 0x300, 0x5a0, 0x1000, 0x1238, 0x10000,
        ]
        .iter()
        .map(|&s| (0..KEYS).map(|i| 0x5555_0000_0000 + i * s).collect())
        .collect();
        let mut heap = Vec::new();
        for size in [64usize, 0x240, 4096, 100_000] {
            let blocks: Vec<Box<[u8]>> = (0..KEYS).map(|_| vec![0u8; size].into()).collect();
            sets.push(blocks.iter().map(|b| b.as_ptr() as usize).collect());
            heap.push(blocks);
        }
        for keys in &sets {
            let mut taken = vec![false; SLOTS];
            let (mut total, mut at_home) = (0, 0);
            for &k in keys {
                let (mut i, mut run) = (hash(k) & (SLOTS - 1), 1);
                while taken[i] {
                    i = (i + 1) & (SLOTS - 1);
                    run += 1;
                }
                taken[i] = true;
                total += run;
                at_home += (run == 1) as usize;
            }
            let mean = total as f64 / KEYS as f64;
            assert!(mean < 1.2, "mean probe run {mean:.3}");
            assert!(at_home * 10 >= KEYS * 9, "{at_home} at home");
        }
    }
}
