//! A table from a pointer to a fixed number of words, with one writer at a
//! time and lock-free readers: the storage of [`super::tracked`].
//!
//! Writers are serialised by their caller (the owner word of the allocator
//! whose blocks these are), so a write is plain stores: no lock of its own,
//! no read-modify-write. Readers never lock and never write shared memory:
//! a table-wide sequence counter (odd while a writer changes anything) tells
//! them whether the words they copied are whole (Boehm, "Can seqlocks get
//! along with programming language memory models?", 2012: relaxed atomic
//! data, a release fence after the writer's odd store, an acquire fence
//! before the reader's final check), and they retry otherwise.
//!
//! Open addressing with linear probing; removal shifts later entries back
//! instead of leaving tombstones, so churn never lengthens probes. The table
//! doubles when half full; a replaced array is kept until the table is
//! dropped, so a reader still walking it never touches freed memory (the
//! kept ones together are smaller than the current one).

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::sync::atomic::{fence, AtomicPtr, AtomicUsize, Ordering};

/// Words of value per entry.
pub const ENTRY_WORDS: usize = 10;

/// A value the table holds, as words.
pub trait Words: Copy {
    /// The value as words.
    fn pack(&self) -> [usize; ENTRY_WORDS];
    /// The value back from words `pack` produced (readers only ever see
    /// whole `pack` outputs; the sequence counter guarantees it).
    fn unpack(words: &[usize; ENTRY_WORDS]) -> Self;
}

const EMPTY: usize = 0;
const INITIAL_CAPACITY: usize = 64;

/// Spreads a pointer's bits over the top bits the index is taken from
/// (MurmurHash3's 64-bit finalizer, shortened): allocators hand out
/// addresses at fixed strides, which a single multiplication can cluster.
#[inline(always)]
fn scramble(key: usize) -> usize {
    let mut h = key as u64;
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h as usize
}

struct Slot {
    key: AtomicUsize,
    words: [AtomicUsize; ENTRY_WORDS],
}

/// One entry's slot, as its writer sees it ([`LiveTable::slot_of`]).
pub struct SlotRef<'a> {
    slot: &'a Slot,
    seq: &'a AtomicUsize,
}

impl SlotRef<'_> {
    /// Word `i` of the value.
    #[inline(always)]
    pub fn word(&self, i: usize) -> usize {
        self.slot.words[i].load(Ordering::Relaxed)
    }

    /// Runs `change` (calls of [`SlotRef::set`]) with the table's sequence
    /// counter odd, so that readers who overlap it retry.
    #[inline(always)]
    pub fn change<R>(&self, change: impl FnOnce(&Self) -> R) -> R {
        let seq = self.seq.load(Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        let result = change(self);
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
        result
    }

    /// Sets word `i` when it is the only word of the value that changes,
    /// without touching the sequence counter: the value before and the
    /// value after are both whole, and a reader copies one or the other.
    /// Two stores fewer than [`SlotRef::change`].
    ///
    /// The store is a release: a reader that copies the new word and then
    /// runs its acquire fence also sees the counter as every earlier change
    /// left it, so one that started before an earlier change still retries.
    /// A reader that copies the old word copies the value before. The
    /// caller must know that no other word changes (it compared them).
    #[inline(always)]
    pub fn set_alone(&self, i: usize, word: usize) {
        self.slot.words[i].store(word, Ordering::Release);
    }

    /// Sets word `i` (inside [`SlotRef::change`]); a word already equal is
    /// not stored.
    #[inline(always)]
    pub fn set(&self, i: usize, word: usize) {
        if self.word(i) != word {
            self.slot.words[i].store(word, Ordering::Relaxed);
        }
    }
}

/// One array of slots; kept until the table is dropped.
struct Array {
    view: View,
    _slots: Box<[Slot]>,
}

impl Array {
    fn with_capacity(capacity: usize) -> Box<Array> {
        let capacity = capacity.next_power_of_two().max(4);
        let slots: Box<[Slot]> = (0..capacity)
            .map(|_| Slot {
                key: AtomicUsize::new(EMPTY),
                words: std::array::from_fn(|_| AtomicUsize::new(0)),
            })
            .collect();
        Box::new(Array {
            view: View {
                mask: capacity - 1,
                shift: usize::BITS - capacity.trailing_zeros(),
                base: slots.as_ptr(),
            },
            _slots: slots,
        })
    }
}

/// Where an array's slots are and how keys map to them: copied into the
/// writer's side so that a write reaches its slot with one load less.
#[derive(Clone, Copy)]
struct View {
    mask: usize,
    shift: u32,
    base: *const Slot,
}

impl View {
    #[inline(always)]
    fn home(&self, key: usize) -> usize {
        scramble(key) >> self.shift
    }

    #[inline(always)]
    fn slot(&self, index: usize) -> &Slot {
        // SAFETY: masked, so below the number of slots (a power of two) of
        // an array the table keeps until drop.
        unsafe { &*self.base.add(index & self.mask) }
    }

    /// The slot holding `key`, or the empty slot it would go to. The array
    /// is never more than half full, so an empty slot ends every run.
    ///
    /// A reader racing a writer may see slots from different moments; the
    /// bound keeps its walk finite (the sequence check then makes it retry).
    #[inline(always)]
    fn locate(&self, key: usize) -> Result<usize, usize> {
        let mut index = self.home(key);
        for _ in 0..=self.mask {
            match self.slot(index).key.load(Ordering::Relaxed) {
                EMPTY => return Err(index & self.mask),
                found if found == key => return Ok(index & self.mask),
                _ => index += 1,
            }
        }
        Err(index & self.mask)
    }

    #[inline(always)]
    fn read(&self, index: usize) -> [usize; ENTRY_WORDS] {
        let slot = self.slot(index);
        std::array::from_fn(|i| slot.words[i].load(Ordering::Relaxed))
    }

    #[inline(always)]
    fn write(&self, index: usize, words: &[usize; ENTRY_WORDS]) {
        let slot = self.slot(index);
        for (to, &w) in slot.words.iter().zip(words) {
            to.store(w, Ordering::Relaxed);
        }
    }

    /// Stores only the words that differ from `old`: a free changes four
    /// words of ten, and every store still buffered when the caller's next
    /// compare-exchange runs delays it.
    #[inline(always)]
    fn rewrite(&self, index: usize, old: &[usize; ENTRY_WORDS], words: &[usize; ENTRY_WORDS]) {
        let slot = self.slot(index);
        for ((to, &w), &was) in slot.words.iter().zip(words).zip(old) {
            if w != was {
                to.store(w, Ordering::Relaxed);
            }
        }
    }
}

struct WriterSide {
    /// The current array's view.
    view: View,
    /// Every array ever current; the last one is current.
    #[allow(clippy::vec_box)]
    arrays: Vec<Box<Array>>,
    len: usize,
}

/// Pointer → `V`, one writer at a time, lock-free readers.
///
/// The writer methods are `unsafe`: their caller must be the only writer
/// while they run (the adaptor holds the allocator's owner word).
pub struct LiveTable<V: Words> {
    /// Odd while a writer changes the table.
    seq: AtomicUsize,
    current: AtomicPtr<Array>,
    writer: UnsafeCell<WriterSide>,
    _value: PhantomData<V>,
}

// SAFETY: readers only touch atomics and arrays kept until drop (a `View`'s
// pointer names one of them); the writer
// side is only reached by the one writer the callers of the `unsafe` methods
// guarantee.
unsafe impl<V: Words + Send> Send for LiveTable<V> {}
// SAFETY: as for `Send`: shared readers only touch atomics; writes need the
// one writer the `unsafe` methods' callers guarantee.
unsafe impl<V: Words + Send> Sync for LiveTable<V> {}

impl<V: Words> Default for LiveTable<V> {
    fn default() -> Self {
        Self::with_capacity(INITIAL_CAPACITY)
    }
}

impl<V: Words> LiveTable<V> {
    /// An empty table with `capacity` slots before it first grows.
    pub fn with_capacity(capacity: usize) -> Self {
        let mut array = Array::with_capacity(capacity);
        let current: *mut Array = &mut *array;
        LiveTable {
            seq: AtomicUsize::new(0),
            current: AtomicPtr::new(current),
            writer: UnsafeCell::new(WriterSide {
                view: array.view,
                arrays: vec![array],
                len: 0,
            }),
            _value: PhantomData,
        }
    }

    /// The value for `key` (non-zero), read without locking or writing: a
    /// reader concurrent with a writer retries until it copies whole words.
    #[inline]
    pub fn get(&self, key: usize) -> Option<V> {
        let mut attempt = 0u32;
        loop {
            let seq = self.seq.load(Ordering::Acquire);
            if seq & 1 == 0 {
                // SAFETY: `current` names an array the table keeps until drop.
                let array = unsafe { &*self.current.load(Ordering::Acquire) }.view;
                let words = array.locate(key).ok().map(|i| array.read(i));
                fence(Ordering::Acquire);
                if self.seq.load(Ordering::Relaxed) == seq {
                    return words.map(|w| V::unpack(&w));
                }
            }
            attempt += 1;
            if attempt < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// # Safety (every `unsafe` method below)
    /// The caller is the only writer for the duration of the call (it holds
    /// the lock that serialises writers of this table).
    // The writer side is an `UnsafeCell` reached by one writer at a time.
    #[allow(clippy::mut_from_ref)]
    #[inline(always)]
    unsafe fn side(&self) -> &mut WriterSide {
        // SAFETY: the caller's contract: one writer at a time.
        unsafe { &mut *self.writer.get() }
    }

    /// The writer's view of the current array.
    ///
    /// # Safety
    /// The caller is the table's only writer for the duration of the call (it holds what serialises the writers, see [`LiveTable`]).
    #[inline(always)]
    unsafe fn array(&self) -> View {
        // SAFETY: the caller's contract.
        unsafe { self.side() }.view
    }

    /// Runs `change` with the sequence counter odd, so that readers who
    /// overlap it retry.
    #[inline(always)]
    fn changing<R>(&self, change: impl FnOnce() -> R) -> R {
        let seq = self.seq.load(Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        let result = change();
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
        result
    }

    /// The writer's handle on `key`'s slot, for word-level reads and
    /// writes (the hot paths change a few words of ten: building whole
    /// copies on the stack costs stores that the caller's next
    /// compare-exchange waits for).
    ///
    /// # Safety
    /// The caller is the table's only writer for the duration of the call (it holds what serialises the writers, see [`LiveTable`]); the handle is used before any
    /// other write to the table.
    #[inline(always)]
    pub unsafe fn slot_of(&self, key: usize) -> Option<SlotRef<'_>> {
        // SAFETY: this function's contract (the caller is the only writer) is what `array`
        // requires.
        let array = unsafe { self.array() };
        let index = array.locate(key).ok()?;
        Some(SlotRef {
            // SAFETY: a slot of an array the table keeps until drop.
            slot: unsafe { &*(array.slot(index) as *const Slot) },
            seq: &self.seq,
        })
    }

    /// The number of entries.
    ///
    /// # Safety
    /// The caller is the table's only writer for the duration of the call (it holds what serialises the writers, see [`LiveTable`]).
    #[inline(always)]
    pub unsafe fn entry_count(&self) -> usize {
        // SAFETY: the caller's contract.
        unsafe { self.side() }.len
    }

    /// The writer's read of `key`.
    ///
    /// # Safety
    /// The caller is the table's only writer for the duration of the call (it holds what serialises the writers, see [`LiveTable`]).
    #[inline(always)]
    pub unsafe fn get_owned(&self, key: usize) -> Option<V> {
        // SAFETY: this function's contract (the caller is the only writer) is what `array`
        // requires.
        let array = unsafe { self.array() };
        array.locate(key).ok().map(|i| V::unpack(&array.read(i)))
    }

    /// Sets the value of `key` (non-zero), returning the one it replaces.
    ///
    /// # Safety
    /// The caller is the table's only writer for the duration of the call (it holds what serialises the writers, see [`LiveTable`]).
    #[inline(always)]
    pub unsafe fn put(&self, key: usize, value: &V) -> Option<V> {
        let words = value.pack();
        // SAFETY: this function's contract (the caller is the only writer) is what `array`
        // requires.
        let array = unsafe { self.array() };
        match array.locate(key) {
            Ok(index) => {
                let old = array.read(index);
                self.changing(|| array.rewrite(index, &old, &words));
                Some(V::unpack(&old))
            }
            Err(index) => {
                // SAFETY: the caller's contract.
                let side = unsafe { self.side() };
                if (side.len + 1) * 2 > array.mask + 1 {
                    // SAFETY: the caller's contract.
                    unsafe { self.grow() };
                    // SAFETY: the caller is still the only writer; `grow` just published the
                    // bigger array, read it anew.
                    let array = unsafe { self.array() };
                    let index = array.locate(key).unwrap_or_else(|empty| empty);
                    self.changing(|| fill(&array, index, key, &words));
                } else {
                    self.changing(|| fill(&array, index, key, &words));
                }
                // SAFETY: the caller's contract.
                unsafe { self.side() }.len += 1;
                None
            }
        }
    }

    /// Removes `key`, returning its value.
    ///
    /// # Safety
    /// The caller is the table's only writer for the duration of the call (it holds what serialises the writers, see [`LiveTable`]).
    #[inline]
    pub unsafe fn remove(&self, key: usize) -> Option<V> {
        // SAFETY: this function's contract (the caller is the only writer) is what `array`
        // requires.
        let array = unsafe { self.array() };
        let index = array.locate(key).ok()?;
        let old = V::unpack(&array.read(index));
        self.changing(|| remove_at(&array, index));
        // SAFETY: the caller's contract.
        unsafe { self.side() }.len -= 1;
        Some(old)
    }

    /// Keeps the entries for which `keep` is true; `keep` may change them.
    ///
    /// # Safety
    /// The caller is the table's only writer for the duration of the call (it holds what serialises the writers, see [`LiveTable`]).
    pub unsafe fn retain(&self, mut keep: impl FnMut(usize, &mut V) -> bool) {
        // SAFETY: the caller's contract (each call below is a write).
        for (key, mut value) in unsafe { self.entries() } {
            if keep(key, &mut value) {
                // SAFETY: as above.
                unsafe { self.put(key, &value) };
            } else {
                // SAFETY: as above.
                unsafe { self.remove(key) };
            }
        }
    }

    /// Every entry, in table order.
    ///
    /// # Safety
    /// The caller is the table's only writer for the duration of the call (it holds what serialises the writers, see [`LiveTable`]).
    pub unsafe fn entries(&self) -> Vec<(usize, V)> {
        // SAFETY: this function's contract (the caller is the only writer) is what `array`
        // requires.
        let array = unsafe { self.array() };
        (0..=array.mask)
            .filter_map(|i| match array.slot(i).key.load(Ordering::Relaxed) {
                EMPTY => None,
                key => Some((key, V::unpack(&array.read(i)))),
            })
            .collect()
    }

    #[cold]
    unsafe fn grow(&self) {
        // SAFETY: `grow` is called only from `put`, whose caller is the only writer.
        let old = unsafe { self.array() };
        let bigger = Array::with_capacity((old.mask + 1) * 2);
        let old = &old;
        for i in 0..=old.mask {
            let key = old.slot(i).key.load(Ordering::Relaxed);
            if key != EMPTY {
                let index = bigger.view.locate(key).unwrap_or_else(|empty| empty);
                fill(&bigger.view, index, key, &old.read(i));
            }
        }
        let pointer = &*bigger as *const Array as *mut Array;
        // SAFETY: the caller's contract.
        let side = unsafe { self.side() };
        side.view = bigger.view;
        side.arrays.push(bigger);
        self.changing(|| self.current.store(pointer, Ordering::Release));
    }
}

/// Fills an empty slot.
#[inline(always)]
fn fill(array: &View, index: usize, key: usize, words: &[usize; ENTRY_WORDS]) {
    array.write(index, words);
    array.slot(index).key.store(key, Ordering::Relaxed);
}

/// Backward-shift deletion: later members of the probe run move into the
/// hole, so every key stays reachable from its home slot.
fn remove_at(array: &View, index: usize) {
    let mask = array.mask;
    let mut hole = index;
    let mut next = (index + 1) & mask;
    loop {
        let moving = array.slot(next).key.load(Ordering::Relaxed);
        if moving == EMPTY {
            break;
        }
        let home = array.home(moving) & mask;
        if next.wrapping_sub(home) & mask >= next.wrapping_sub(hole) & mask {
            let words = array.read(next);
            array.write(hole, &words);
            array.slot(hole).key.store(moving, Ordering::Relaxed);
            hole = next;
        }
        next = (next + 1) & mask;
    }
    array.slot(hole).key.store(EMPTY, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct V(usize);
    impl Words for V {
        fn pack(&self) -> [usize; ENTRY_WORDS] {
            [self.0; ENTRY_WORDS]
        }
        fn unpack(words: &[usize; ENTRY_WORDS]) -> Self {
            V(words[0])
        }
    }

    #[test]
    fn growth_and_backward_shift_keep_every_key_reachable() {
        let t = LiveTable::<V>::with_capacity(4);
        let keys: Vec<usize> = (1..=3000).map(|i| i * 512).collect();
        // SAFETY: this test's thread is the table's only user, so the only writer.
        unsafe {
            for &k in &keys {
                assert_eq!(t.put(k, &V(k)), None);
            }
            for &k in keys.iter().step_by(3) {
                assert_eq!(t.remove(k), Some(V(k)));
            }
            for (i, &k) in keys.iter().enumerate() {
                let want = (i % 3 != 0).then_some(V(k));
                assert_eq!(t.get(k), want, "key {k}");
                assert_eq!(t.get_owned(k), want);
            }
            assert_eq!(t.entries().len(), 2000);
            t.retain(|k, v| {
                v.0 += 1;
                k % 1024 == 0
            });
            assert!(t
                .entries()
                .iter()
                .all(|&(k, v)| k % 1024 == 0 && v.0 == k + 1));
        }
    }
}
