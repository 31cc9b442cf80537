//! The stream registry's own table: a stream's registration inline in its
//! slot, one cache line per stream.
//!
//! `aclrtAllocatorGetByStream` runs on every operator launch, and the
//! general [`SeqTable`](crate::core::seq_table::SeqTable) (16-byte slots
//! naming shared records) costs it a slot load, then a record load that
//! depends on it, then the table-wide layout counter checked around both.
//! Here a slot is one 64-byte line holding its own sequence counter, the key
//! and the six words, so a hit is one line, read by one chain of loads:
//!
//! - **A hit needs no table-wide check.** Each slot is a seqlock (Boehm,
//!   "Can seqlocks get along with programming language memory models?",
//!   2012: relaxed data, a release fence after the writer's odd store, an
//!   acquire fence before the reader's second load of the counter). A
//!   reader that finds its key in a slot with an even counter unchanged
//!   across the copy holds a (key, value) pair that was in the map at that
//!   moment: a registration being rewritten, a key being moved back by a
//!   removal (briefly in two slots, both true), a slot being cleared or
//!   reused for another key, all happen under the slot's counter. A table
//!   replaced by a bigger one is frozen (writers touch the current table
//!   only) and kept until the map is dropped, so a reader still in it reads
//!   the map as it was when it was replaced, a moment inside the reader's
//!   call.
//! - **A miss does.** A key can look absent while a removal moves it back
//!   past the reader, so "not found" is trusted only when the table-wide
//!   `layout` counter (odd while a writer moves or clears slots or swaps
//!   tables) did not change around the probe; [`StreamTable::get`] does
//!   that, the hit-only lookups leave a miss to it.
//!
//! Unlike `SeqTable`, equal values are not shared (each stream has its own
//! copy of its registration's six words): the line a hit reads is the
//! stream's own, and a registration is small. The table grows when a quarter
//! full, which keeps nearly every key in its home slot (the C export's hit
//! path looks there only); a hit touches one line whatever the table's size.
//! Open addressing with linear probing and backward-shift removal, as
//! `SeqTable`.

use crate::core::seq_table::{scramble, Packed, VALUE_WORDS};
use crate::core::sync::{back_off, fence, owned_load, AtomicPtr, AtomicUsize, Mutex, Ordering};
use std::marker::PhantomData;
use std::num::NonZeroUsize;

const EMPTY: usize = 0;
const INITIAL_CAPACITY: usize = 64;
/// The table grows when more than `1 / GROW_AT` of its slots would hold keys.
const GROW_AT: usize = 4;

/// One stream: its counter, key and registration in one cache line.
#[repr(C, align(64))]
struct Slot {
    /// Odd while a writer changes the slot.
    seq: AtomicUsize,
    key: AtomicUsize,
    words: [AtomicUsize; VALUE_WORDS],
}

const _: () = assert!(std::mem::size_of::<Slot>() == 64);

impl Slot {
    fn new() -> Self {
        Slot {
            seq: AtomicUsize::new(0),
            key: AtomicUsize::new(EMPTY),
            words: std::array::from_fn(|_| AtomicUsize::new(0)),
        }
    }

    /// Writer only: makes the slot hold `key` and `words` (`EMPTY` clears
    /// it), under its counter.
    fn publish(&self, key: usize, words: [usize; VALUE_WORDS]) {
        let seq = owned_load(&self.seq);
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        // Orders the odd counter before the stores below: a reader that
        // sees any of them also sees the counter odd (or later) at its
        // second load.
        fence(Ordering::Release);
        self.key.store(key, Ordering::Relaxed);
        for (cell, word) in self.words.iter().zip(words) {
            cell.store(word, Ordering::Relaxed);
        }
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// Writer only, for a table not yet published: no counter needed.
    fn fill_unpublished(&self, key: usize, words: [usize; VALUE_WORDS]) {
        self.key.store(key, Ordering::Relaxed);
        for (cell, word) in self.words.iter().zip(words) {
            cell.store(word, Ordering::Relaxed);
        }
    }

    /// Writer only: the words as they are.
    fn owned_words(&self) -> [usize; VALUE_WORDS] {
        std::array::from_fn(|i| owned_load(&self.words[i]))
    }

    /// Reader: the slot's words if it holds `key`, confirmed whole by its
    /// counter.
    #[inline(always)]
    fn read(&self, key: usize) -> Read {
        let seq = self.seq.load(Ordering::Acquire);
        let differs = self.key_xor(key);
        if differs != 0 {
            return Read::Holds(differs ^ key);
        }
        let words = self.load_words();
        fence(Ordering::Acquire);
        if seq & 1 != 0 || self.seq.load(Ordering::Relaxed) != seq {
            return Read::Busy;
        }
        Read::Hit(words)
    }

    /// Reader side: the slot's key xor `key` (zero when the slot holds
    /// `key`), a relaxed load.
    #[cfg(not(all(target_arch = "x86_64", not(loom), not(miri))))]
    #[inline(always)]
    fn key_xor(&self, key: usize) -> usize {
        self.key.load(Ordering::Relaxed) ^ key
    }

    /// Reader side, on x86-64: the slot's key xor `key`, the load folded
    /// into the `xor` so that the key read takes no register of its own:
    /// the C export's hit has the six arguments, the seventh, the slot's
    /// address and its counter live here, and one register more is one the
    /// export must save and restore. An opaque read, equivalent to a
    /// relaxed load (the compiler does not fold an atomic load into an
    /// arithmetic instruction), like `load_words`.
    #[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
    #[inline(always)]
    fn key_xor(&self, mut key: usize) -> usize {
        const _: () = assert!(std::mem::offset_of!(Slot, key) == 8);
        // SAFETY: reads the slot's key word (offset 8, checked above, live
        // and aligned); writes nothing but the register it is given.
        unsafe {
            std::arch::asm!(
                "xor {k}, qword ptr [{p} + 8]",
                p = in(reg) self as *const Slot,
                k = inout(reg) key,
                options(nostack, readonly),
            );
        }
        key
    }

    /// Reader side: a copy that is only trusted once the counter confirms it.
    #[cfg(not(all(target_arch = "x86_64", not(loom), not(miri))))]
    #[inline(always)]
    fn load_words(&self) -> [usize; VALUE_WORDS] {
        std::array::from_fn(|i| self.words[i].load(Ordering::Relaxed))
    }

    /// Reader side, on x86-64: the six words as three aligned 16-byte loads
    /// into vector registers, which are all caller-saved, so that the C
    /// export's hit (six words, five out-pointers live at once) saves no
    /// general register for them. Inline assembly because a plain vector
    /// read racing with a writer's atomic stores would be a data race in
    /// Rust's model; the assembly is an opaque read, equivalent to six
    /// relaxed loads (x86 does not tear an aligned 8-byte part of a vector
    /// load), ordered before the caller's acquire fence and counter
    /// re-check, which discard any copy a writer touched.
    #[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
    #[inline(always)]
    fn load_words(&self) -> [usize; VALUE_WORDS] {
        use std::arch::x86_64::__m128i;
        const _: () = assert!(std::mem::offset_of!(Slot, words) == 16);
        let (a, b, c): (__m128i, __m128i, __m128i);
        // SAFETY: reads the 48 bytes of `self.words` (offset 16 in the
        // 64-byte-aligned slot, checked above, so each load is aligned to
        // 16), which are live; writes nothing but the three output registers.
        unsafe {
            std::arch::asm!(
                "movdqa {a}, xmmword ptr [{p} + 16]",
                "movdqa {b}, xmmword ptr [{p} + 32]",
                "movdqa {c}, xmmword ptr [{p} + 48]",
                p = in(reg) self as *const Slot,
                a = out(xmm_reg) a,
                b = out(xmm_reg) b,
                c = out(xmm_reg) c,
                options(nostack, readonly, preserves_flags),
            );
            std::mem::transmute::<[__m128i; 3], [usize; VALUE_WORDS]>([a, b, c])
        }
    }
}

/// The slot a key's probe run starts at in a table of `capacity` slots (a
/// power of two). Lets tests and models pick keys that collide.
#[doc(hidden)]
#[inline]
pub fn home_slot(key: NonZeroUsize, capacity: usize) -> usize {
    scramble(key.get()) & (capacity.next_power_of_two().max(2) - 1)
}

struct Table {
    mask: usize,
    slots: Box<[Slot]>,
}

impl Table {
    fn with_capacity(capacity: usize) -> Table {
        let capacity = capacity.next_power_of_two().max(2);
        Table {
            mask: capacity - 1,
            slots: (0..capacity).map(|_| Slot::new()).collect(),
        }
    }

    fn capacity(&self) -> usize {
        self.mask + 1
    }

    fn home(&self, key: usize) -> usize {
        scramble(key) & self.mask
    }

    /// Writer only: the slot holding `key`, or the empty slot it would go to.
    fn locate(&self, key: usize) -> Result<usize, usize> {
        let mut index = self.home(key);
        loop {
            match owned_load(&self.slots[index].key) {
                EMPTY => return Err(index),
                found if found == key => return Ok(index),
                _ => index = (index + 1) & self.mask,
            }
        }
    }
}

/// What a reader loads before its probe, in one line. A table swap stores
/// `slots`, then `mask`, each with release, and readers load `mask`, then
/// `slots`, each with acquire: the slots a reader sees are at least as new
/// as the mask, so its index is in bounds (tables only grow), and the
/// acquire carries the new slots' initialisation.
#[repr(align(64))]
struct ReadSide {
    /// Odd while a writer moves or clears slots or swaps tables.
    layout: AtomicUsize,
    /// `capacity - 1` of the current table.
    mask: AtomicUsize,
    /// The current table's slots.
    slots: AtomicPtr<Slot>,
}

/// What only writers touch, under the mutex.
struct WriteSide {
    /// Every table ever current; the last one is current.
    tables: Vec<Table>,
    len: usize,
}

impl WriteSide {
    fn current(&self) -> &Table {
        self.tables.last().expect("there is always a current table")
    }
}

/// What a reader found in one slot.
enum Read {
    /// The key's words, whole.
    Hit([usize; VALUE_WORDS]),
    /// The slot holds the key, but a writer is changing it.
    Busy,
    /// The slot holds another key, or none (`EMPTY`), as one load saw it.
    Holds(usize),
}

/// How a probe run ended.
enum Probe {
    Hit([usize; VALUE_WORDS]),
    /// An empty slot ended the run (a miss, if the layout did not change).
    Missing,
    /// The key's slot was being written.
    Busy,
}

/// A concurrent map from a non-zero key to a [`Packed`] value, each entry
/// inline in one cache line: lock-free, allocation-free reads; serialised
/// writes. The stream registry's table.
pub struct StreamTable<V> {
    read: ReadSide,
    write: Mutex<WriteSide>,
    _value: PhantomData<V>,
}

// SAFETY: values cross threads only as copies of their words; `V: Send`
// makes handing those copies to another thread sound.
unsafe impl<V: Packed + Send> Send for StreamTable<V> {}
// SAFETY: a shared reader copies words out of atomics (the read side and
// the slots); the write side is behind its `Mutex`.
unsafe impl<V: Packed + Send> Sync for StreamTable<V> {}

impl<V: Packed> Default for StreamTable<V> {
    fn default() -> Self {
        Self::with_capacity(INITIAL_CAPACITY)
    }
}

impl<V: Packed> StreamTable<V> {
    /// An empty map with `capacity` slots (rounded up to a power of two)
    /// before it first grows (when a quarter full).
    pub fn with_capacity(capacity: usize) -> Self {
        let table = Table::with_capacity(capacity);
        StreamTable {
            read: ReadSide {
                layout: AtomicUsize::new(0),
                mask: AtomicUsize::new(table.mask),
                slots: AtomicPtr::new(table.slots.as_ptr() as *mut Slot),
            },
            write: Mutex::new(WriteSide {
                tables: vec![table],
                len: 0,
            }),
            _value: PhantomData,
        }
    }

    /// The current table's mask and slots, in the order `ReadSide` needs.
    #[inline(always)]
    fn shape(&self) -> (usize, *const Slot) {
        let mask = self.read.mask.load(Ordering::Acquire);
        let slots = self.read.slots.load(Ordering::Acquire);
        (mask, slots)
    }

    /// The value for `key` if it is in its home slot and no writer is
    /// changing that slot; `None` otherwise (then [`StreamTable::get`]).
    /// One line read, no table-wide check (see the module's comment).
    #[inline(always)]
    pub fn hit_at_home(&self, key: NonZeroUsize) -> Option<V> {
        let key = key.get();
        // The hash before the table's shape: the two words it loads then
        // hold no register while the hash is computed.
        let hash = scramble(key);
        let (mask, slots) = self.shape();
        // SAFETY: the index is at most `mask`, and `slots` holds at least
        // `mask + 1` slots of a table that lives as long as `self`
        // (`ReadSide`).
        let slot = unsafe { &*one_register(slots.add(hash & mask)) };
        match slot.read(key) {
            // SAFETY: the unchanged, even counter proves the words are one
            // whole `pack` output.
            Read::Hit(words) => Some(unsafe { V::unpack(words) }),
            Read::Busy | Read::Holds(_) => None,
        }
    }

    /// The value for `key` if one probe run finds it and no writer is
    /// changing its slot; `None` otherwise (then [`StreamTable::get`]).
    #[inline(always)]
    pub fn hit(&self, key: NonZeroUsize) -> Option<V> {
        let key = key.get();
        let (mask, slots) = self.shape();
        match probe(slots, mask, key) {
            // SAFETY: as in `hit_at_home`.
            Probe::Hit(words) => Some(unsafe { V::unpack(words) }),
            Probe::Missing | Probe::Busy => None,
        }
    }

    /// The value for `key`, read without locking or allocating; waits out
    /// a writer in its way.
    #[inline]
    pub fn get(&self, key: NonZeroUsize) -> Option<V> {
        let key = key.get();
        let mut attempt = 0;
        loop {
            let layout = self.read.layout.load(Ordering::Acquire);
            if layout & 1 == 0 {
                let (mask, slots) = self.shape();
                match probe(slots, mask, key) {
                    // SAFETY: as in `hit_at_home`.
                    Probe::Hit(words) => return Some(unsafe { V::unpack(words) }),
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
        match write.current().locate(key) {
            Ok(index) => {
                let slot = &write.current().slots[index];
                // SAFETY: published words came from `pack`.
                let old = unsafe { V::unpack(slot.owned_words()) };
                slot.publish(key, words);
                Some(old)
            }
            Err(mut index) => {
                if (write.len + 1) * GROW_AT > write.current().capacity() {
                    self.grow(&mut write);
                    index = match write.current().locate(key) {
                        Ok(found) | Err(found) => found,
                    };
                }
                // Into an empty slot: no key moves, so no layout change (a
                // reader that saw the slot empty read the map before this).
                write.current().slots[index].publish(key, words);
                write.len += 1;
                None
            }
        }
    }

    /// Removes `key`, returning its value.
    pub fn remove(&self, key: NonZeroUsize) -> Option<V> {
        let key = key.get();
        let mut write = self.write.lock();
        let table = write.current();
        let index = table.locate(key).ok()?;
        // SAFETY: published words came from `pack`.
        let old = unsafe { V::unpack(table.slots[index].owned_words()) };
        self.change_layout(|| {
            // Backward-shift deletion: pull later members of the probe run
            // into the hole so every key stays reachable from its home slot.
            let mut hole = index;
            let mut next = (index + 1) & table.mask;
            loop {
                let moving = owned_load(&table.slots[next].key);
                if moving == EMPTY {
                    break;
                }
                let home = table.home(moving);
                if next.wrapping_sub(home) & table.mask >= next.wrapping_sub(hole) & table.mask {
                    table.slots[hole].publish(moving, table.slots[next].owned_words());
                    hole = next;
                }
                next = (next + 1) & table.mask;
            }
            table.slots[hole].publish(EMPTY, [0; VALUE_WORDS]);
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
        write
            .current()
            .slots
            .iter()
            .filter_map(|slot| {
                let key = NonZeroUsize::new(owned_load(&slot.key))?;
                // SAFETY: published words came from `pack`.
                Some((key, unsafe { V::unpack(slot.owned_words()) }))
            })
            .collect()
    }

    fn grow(&self, write: &mut WriteSide) {
        let old = write.current();
        let bigger = Table::with_capacity(old.capacity() * 2);
        for slot in old.slots.iter() {
            let key = owned_load(&slot.key);
            if key != EMPTY {
                let index = match bigger.locate(key) {
                    Ok(found) | Err(found) => found,
                };
                bigger.slots[index].fill_unpublished(key, slot.owned_words());
            }
        }
        let mask = bigger.mask;
        let slots = bigger.slots.as_ptr() as *mut Slot;
        // The boxed slots stay where they are when the table moves.
        write.tables.push(bigger);
        // In this order: see `ReadSide`. From here on the old table is
        // frozen: writers change the current table only.
        self.change_layout(|| {
            self.read.slots.store(slots, Ordering::Release);
            self.read.mask.store(mask, Ordering::Release);
        });
    }

    /// Runs `moves` with the layout counter odd, so that a reader's miss
    /// that overlaps it is not trusted.
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

/// `slot`, computed into one register. Without this the compiler keeps the
/// slots' address and the index apart for its addressing modes, one more
/// register live across the slot's loads, which the C export's hit path
/// then saves and restores (docs/BENCHMARKS.md, row 3, fifth pass).
/// (`nomem` is right: the block does not dereference the pointer, it only
/// passes the address through.)
#[inline(always)]
#[allow(clippy::pointers_in_nomem_asm_block)]
fn one_register(slot: *const Slot) -> *const Slot {
    #[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
    {
        let mut slot = slot;
        // SAFETY: an empty assembly block: it reads and writes nothing but
        // the register it is given back unchanged.
        unsafe {
            std::arch::asm!("/* {0} */", inout(reg) slot, options(pure, nomem, nostack, preserves_flags));
        }
        slot
    }
    #[cfg(not(all(target_arch = "x86_64", not(loom), not(miri))))]
    slot
}

/// A reader's walk of `key`'s probe run over the `mask + 1` slots at
/// `slots`, from its home slot.
#[inline(always)]
fn probe(slots: *const Slot, mask: usize, key: usize) -> Probe {
    let mut index = scramble(key) & mask;
    // The table is never full (it grows at a quarter), so an empty slot ends
    // every probe run; the bound only guards against a broken invariant.
    let mut left = mask;
    loop {
        // SAFETY: `index <= mask`, and `slots` holds at least `mask + 1`
        // slots of a table that lives as long as the map (`ReadSide`).
        let slot = unsafe { &*slots.add(index) };
        match slot.read(key) {
            Read::Hit(words) => return Probe::Hit(words),
            Read::Busy => return Probe::Busy,
            Read::Holds(EMPTY) => return Probe::Missing,
            Read::Holds(_) if left == 0 => return Probe::Missing,
            Read::Holds(_) => {}
        }
        left -= 1;
        index = (index + 1) & mask;
    }
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
        let table = StreamTable::<Words>::default();
        assert_eq!(table.get(key(8)), None);
        assert_eq!(table.hit(key(8)), None);
        assert_eq!(table.insert(key(8), [1; 6]), None);
        assert_eq!(table.get(key(8)), Some([1; 6]));
        assert_eq!(table.insert(key(8), [2; 6]), Some([1; 6]));
        assert_eq!(table.get(key(8)), Some([2; 6]));
        assert_eq!(table.hit_at_home(key(8)), Some([2; 6]));
        assert_eq!(table.len(), 1);
        assert_eq!(table.remove(key(8)), Some([2; 6]));
        assert_eq!(table.remove(key(8)), None);
        assert_eq!(table.get(key(8)), None);
        assert_eq!(table.hit_at_home(key(8)), None);
        assert!(table.is_empty());
    }

    #[test]
    fn hit_at_home_answers_only_home_slots_and_hit_the_rest() {
        let table = StreamTable::<Words>::with_capacity(64);
        let home = home_slot(key(8), 64);
        let same_home: Vec<usize> = (1..100_000)
            .map(|i| i * 8)
            .filter(|&k| home_slot(key(k), 64) == home)
            .take(3)
            .collect();
        for &k in &same_home {
            table.insert(key(k), [k; 6]);
        }
        assert_eq!(
            table.hit_at_home(key(same_home[0])),
            Some([same_home[0]; 6])
        );
        for &k in &same_home[1..] {
            assert_eq!(table.hit_at_home(key(k)), None);
            assert_eq!(table.hit(key(k)), Some([k; 6]));
            assert_eq!(table.get(key(k)), Some([k; 6]));
        }
        // Removing the first shifts the second back into the home slot.
        table.remove(key(same_home[0]));
        assert_eq!(table.hit_at_home(key(same_home[0])), None);
        assert_eq!(
            table.hit_at_home(key(same_home[1])),
            Some([same_home[1]; 6])
        );
    }

    #[test]
    fn home_slot_is_where_probes_start() {
        for capacity in [2, 4, 8, 64, 1024] {
            let table = Table::with_capacity(capacity);
            for k in (1..2000).map(|i| i * 8) {
                assert_eq!(home_slot(key(k), capacity), table.home(k));
            }
        }
    }

    #[test]
    fn growth_and_backward_shift_keep_every_key_reachable() {
        let table = StreamTable::<Words>::with_capacity(2);
        let keys: Vec<usize> = (1..=3000).map(|i| i * 64).collect();
        for &k in &keys {
            table.insert(key(k), [k; 6]);
        }
        for &k in &keys {
            assert_eq!(table.get(key(k)), Some([k; 6]));
            assert_eq!(table.hit(key(k)), Some([k; 6]));
        }
        for &k in keys.iter().step_by(3) {
            assert_eq!(table.remove(key(k)), Some([k; 6]));
        }
        for (i, &k) in keys.iter().enumerate() {
            let want = if i % 3 == 0 { None } else { Some([k; 6]) };
            assert_eq!(table.get(key(k)), want, "key {k}");
            assert_eq!(table.hit(key(k)), want, "key {k}");
        }
        assert_eq!(table.len(), 2000);
        assert_eq!(table.entries().len(), 2000);
        // A quarter full at most.
        assert!(table.write.lock().current().capacity() >= 4 * 3000);
    }

    #[test]
    fn removal_in_a_full_cluster_that_wraps_around() {
        let table = StreamTable::<Words>::with_capacity(16);
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

    #[test]
    fn a_slot_is_one_aligned_line() {
        let table = StreamTable::<Words>::with_capacity(64);
        let (_, slots) = table.shape();
        assert_eq!(slots as usize % 64, 0);
        assert_eq!(std::mem::align_of::<Slot>(), 64);
    }
}

#[cfg(all(test, not(loom)))]
mod hash_quality {
    use super::*;

    /// Mean probe run and share of keys in their home slot when `keys` are
    /// inserted by linear probing over `slots` slots with `home`.
    fn runs(home: impl Fn(usize) -> usize, slots: usize, keys: &[usize]) -> (f64, f64) {
        let mut taken = vec![false; slots];
        let (mut total, mut at_home) = (0, 0);
        for &k in keys {
            let mut i = home(k) & (slots - 1);
            let mut run = 1;
            while taken[i] {
                i = (i + 1) & (slots - 1);
                run += 1;
            }
            taken[i] = true;
            total += run;
            at_home += (run == 1) as usize;
        }
        (
            total as f64 / keys.len() as f64,
            at_home as f64 / keys.len() as f64,
        )
    }

    /// A cheaper hash, one multiply and one xor-shift, measured against
    /// `scramble` and not used: some strides keep fewer keys at home.
    fn fold(k: usize) -> usize {
        let h = k.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        h ^ (h >> 32)
    }

    /// The C export's first test looks at the home slot only; a key further
    /// on costs a tail call into the probing path. With 10,000 streams in
    /// the table they make (65,536 slots), at least nine in ten must be at
    /// home, for runtime-like handles at any stride and for addresses from
    /// the heap (blocks of several sizes from the global allocator).
    ///
    ///     cargo test --release --lib home_slots -- --nocapture
    #[test]
    fn home_slots_hold_nine_in_ten_streams_at_any_stride_and_from_the_heap() {
        const SLOTS: usize = 65536;
        const STREAMS: usize = 10_000;
        let strides = [
            8usize, 16, 24, 0x40, 0x100, 0x240, 0x300, 0x5a0, 0x1000, 0x1238, 0x10000,
        ];
        let mut sets: Vec<(String, Vec<usize>)> = strides
            .iter()
            .map(|&s| {
                let keys = (0..STREAMS).map(|i| 0x5555_0000_0000 + i * s).collect();
                (format!("stride {s:#x}"), keys)
            })
            .collect();
        let mut heap = Vec::new();
        for size in [64usize, 0x240, 4096, 100_000] {
            let blocks: Vec<Box<[u8]>> = (0..STREAMS)
                .map(|_| vec![0u8; size].into_boxed_slice())
                .collect();
            let keys = blocks.iter().map(|b| b.as_ptr() as usize).collect();
            sets.push((format!("heap blocks of {size:#x} bytes"), keys));
            heap.push(blocks);
        }
        for (name, keys) in &sets {
            let (mean, at_home) = runs(scramble, SLOTS, keys);
            let (fold_mean, fold_at_home) = runs(fold, SLOTS, keys);
            println!(
                "{name}: scramble mean run {mean:.3}, at home {at_home:.3}; \
                 one multiply: {fold_mean:.3}, {fold_at_home:.3}"
            );
            assert!(mean < 1.2, "{name}: mean probe run {mean:.3}");
            assert!(at_home >= 0.9, "{name}: {at_home:.3} at home");
        }
    }
}
