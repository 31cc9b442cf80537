//! A read-mostly hash table from a non-zero word to a few words of value:
//! the tracking layer (stream → tracker), the pluggable allocators'
//! callable table and every live-handle table ([`super::handles`]) are built
//! on it. (The stream registry, read on every operator launch, has its own
//! table with each value inline in its slot: `registry::StreamTable`.)
//!
//! Readers take no lock, write no shared memory and never allocate, so they do
//! not contend with each other and scale with threads. Writers serialise on a
//! mutex. The layout is chosen for the cache:
//!
//! - **Slots** are 16 bytes, a key and a value word, four to a cache line.
//!   A table grows when a quarter full: probe runs stay near one slot
//!   (1.1 on average for stream handles at any stride), since a second probe
//!   (a mispredicted branch, maybe a second line) costs more than the slot
//!   memory saved by a fuller table; 10,000 streams take 1 MiB of slots,
//!   inside a core's L2. Open addressing with
//!   linear probing; removal shifts later entries back instead of leaving
//!   tombstones, so churn never lengthens probes.
//! - **Records** hold the value's words. A slot's value word names a record
//!   (an index into its table's record array) and its generation. Records are
//!   deduplicated (many streams registered with one descriptor share one
//!   record, which stays hot in L1) and immutable while published; a retired
//!   record is reused in place, never freed while the table exists. A table
//!   has a record for every key it can hold, since each record in use is
//!   named by at least one key.
//!
//! Consistency is by sequence counters (Boehm, "Can seqlocks get along with
//! programming language memory models?", 2012): relaxed atomic data, a release
//! fence after a writer's odd store, an acquire fence before a reader's final
//! check.
//! - Each record's counter is odd while the record is being (re)written; a
//!   reader checks it equals the generation its slot named, before and after
//!   copying the words, so it never returns a torn or recycled value.
//! - A table-wide `layout` counter is odd while a writer moves slots (removal)
//!   or swaps in a bigger table; every reader checks it once at the end.
//! - Tables only double, and a replaced table (slots and records) is kept
//!   until the map is dropped, so a reader still walking it never touches
//!   freed memory; the kept ones together are smaller than the current one.

use super::sync::{back_off, fence, owned_load, AtomicPtr, AtomicUsize, Mutex, Ordering};
use std::collections::HashMap;
use std::marker::PhantomData;
use std::num::NonZeroUsize;

/// Words of value an entry holds.
pub const VALUE_WORDS: usize = 6;

/// A value the table can hold: packed into words by the writer, unpacked from
/// a consistent copy of those words by readers.
///
/// # Safety
/// `unpack` is called only with words that `pack` produced (the sequence
/// counters guarantee that), and must be sound for all of them.
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
/// Scrambles a stream handle so that every bit of it reaches the top bits a
/// table indexes by (the 64-bit finalizer of MurmurHash3).
///
/// Why not plain multiplicative (Fibonacci) hashing: stream handles are
/// addresses from a runtime's slab, at a fixed stride, and some strides
/// cluster badly under a single multiply: for 10,000 handles 0x240 bytes
/// apart in 32,768 slots, Fibonacci hashing gives probe runs of 12.2 slots on
/// average, this finalizer 1.2, as for every stride the test
/// `probe_runs_stay_short_for_handles_at_any_stride` tries.
#[doc(hidden)] // public for benches/registry.rs's floor
#[inline(always)]
pub fn scramble(key: usize) -> usize {
    let mut h = key as u64;
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h as usize
}

/// A slot's value word: record index in the high half, generation in the low.
#[derive(Clone, Copy, PartialEq, Eq)]
struct RecordRef(usize);

impl RecordRef {
    fn new(index: u32, generation: u32) -> Self {
        RecordRef(((index as usize) << 32) | generation as usize)
    }
    fn index(self) -> u32 {
        (self.0 >> 32) as u32
    }
    fn generation(self) -> u32 {
        self.0 as u32
    }
}

#[repr(C, align(16))]
struct Slot {
    key: AtomicUsize,
    value: AtomicUsize,
}

impl Slot {
    fn new() -> Self {
        Slot {
            key: AtomicUsize::new(EMPTY),
            value: AtomicUsize::new(0),
        }
    }
}

/// The slot a key's probe run starts at in a table of `capacity` slots (a
/// power of two). Lets tests and models pick keys that collide, to exercise
/// probe runs, wrap-around and backward-shift removal.
#[doc(hidden)]
#[inline]
pub fn home_slot(key: NonZeroUsize, capacity: usize) -> usize {
    // Table::home's arithmetic, without building a table (under loom every
    // table is model state); a unit test keeps the two equal.
    let capacity = capacity.next_power_of_two().max(2);
    scramble(key.get()) & (capacity - 1)
}

struct Table {
    mask: usize,
    slots: Box<[Slot]>,
    records: Box<[Record]>,
}

enum Probe {
    Found(RecordRef),
    Missing,
}

/// A reader's walk of the probe run of `key`, from `index` (its home slot)
/// over the `mask + 1` slots at `slots`. The first slot is tested before any
/// index arithmetic, since a key is nearly always in its home slot.
#[inline(always)]
fn probe(slots: *const Slot, mask: usize, mut index: usize, key: usize) -> Probe {
    // The table is never full (it grows at a quarter), so an empty slot ends
    // every probe run; the bound only guards against a broken invariant.
    let mut left = mask;
    loop {
        // SAFETY: `index <= mask`, and `slots` holds at least `mask + 1`
        // slots of a table that lives as long as the map (`ReadSide`).
        let slot = unsafe { &*slots.add(index) };
        match slot.key.load(Ordering::Acquire) {
            EMPTY => return Probe::Missing,
            found if found == key => {
                return Probe::Found(RecordRef(slot.value.load(Ordering::Acquire)))
            }
            _ if left == 0 => return Probe::Missing,
            _ => {
                left -= 1;
                index = (index + 1) & mask;
            }
        }
    }
}

impl Table {
    fn with_capacity(capacity: usize) -> Box<Table> {
        let capacity = capacity.next_power_of_two().max(2);
        Box::new(Table {
            mask: capacity - 1,
            slots: (0..capacity).map(|_| Slot::new()).collect(),
            // At most a quarter of the slots hold keys, each record in use is
            // named by a key, and `insert` takes its new record before it
            // drops the old one or grows: one more than a quarter is always
            // enough.
            records: (0..capacity / 4 + 1).map(|_| Record::new()).collect(),
        })
    }

    fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// The low bits of the scrambled key (every bit of `scramble`'s output
    /// depends on every bit of the key). Low bits and not high ones: a
    /// reader then needs the mask alone, not a shift count too, and a
    /// variable shift on x86 takes `rcx`, the register of one of the C
    /// export's arguments (one more register than its hit path has without
    /// saving any).
    #[inline]
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

    /// Writer only: fills an empty slot (value first, so a reader that sees
    /// the key sees its value).
    fn fill(&self, index: usize, key: usize, value: RecordRef) {
        self.slots[index].value.store(value.0, Ordering::Relaxed);
        self.slots[index].key.store(key, Ordering::Release);
    }
}

#[repr(C, align(64))]
struct Record {
    /// Odd while being written; otherwise the generation slots refer to.
    seq: AtomicUsize,
    words: [AtomicUsize; VALUE_WORDS],
}

impl Record {
    fn new() -> Self {
        Record {
            seq: AtomicUsize::new(1), // not yet published
            words: std::array::from_fn(|_| AtomicUsize::new(0)),
        }
    }

    /// Reader side: a copy that is only trusted once the counter confirms it.
    #[inline]
    fn load_words(&self) -> [usize; VALUE_WORDS] {
        std::array::from_fn(|i| self.words[i].load(Ordering::Relaxed))
    }

    /// Writer only: the words as they are (no one else stores to them).
    fn owned_words(&self) -> [usize; VALUE_WORDS] {
        std::array::from_fn(|i| owned_load(&self.words[i]))
    }
}

/// What a reader loads before its probe, in one cache line: the layout
/// counter and the current table's shape and arrays, each its own word, so
/// that no load waits for another (a pointer to the table would put one
/// more dependent load in front of every lookup).
///
/// A table swap (`grow`) stores `records`, then `slots`, then `mask`, each
/// with release, and readers load them in the opposite order, each with
/// acquire (a pointer must also carry the construction of what it names: a
/// relaxed load of `records` was a data race with the new records'
/// initialisation, found by tests/loom_registry.rs). Tables only grow, and
/// indices stay valid in bigger tables, so every mix a reader can see is in
/// bounds: a `mask` implies `slots` at least that new, and `slots` implies
/// `records` at least that new. Which mix it saw does not matter beyond
/// that: the swap happens with `layout` odd, so the reader's final check
/// throws the result away.
#[repr(align(64))]
struct ReadSide {
    /// Odd while a writer moves slots or swaps tables.
    layout: AtomicUsize,
    /// `capacity - 1` of the current table.
    mask: AtomicUsize,
    /// The current table's slots.
    slots: AtomicPtr<Slot>,
    /// The current table's records.
    records: AtomicPtr<Record>,
}

/// What only writers touch, under the mutex.
struct WriteSide {
    /// Every table ever current; the last one is current. Boxed so that a
    /// table's address, which readers hold, survives the Vec growing.
    #[allow(clippy::vec_box)]
    tables: Vec<Box<Table>>,
    len: usize,
    /// Published records by content, for sharing.
    by_words: HashMap<[usize; VALUE_WORDS], RecordRef>,
    /// How many slots name each record.
    uses: Vec<u32>,
    /// Records no slot names, ready for reuse.
    free: Vec<u32>,
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
// SAFETY: a shared reader copies words out of atomics (the read side);
// the write side is behind its `Mutex`.
unsafe impl<V: Packed + Send> Sync for SeqTable<V> {}

impl<V: Packed> Default for SeqTable<V> {
    fn default() -> Self {
        Self::with_capacity(INITIAL_CAPACITY)
    }
}

impl<V: Packed> SeqTable<V> {
    /// An empty map with room for `capacity` slots before it first grows
    /// (it grows when a quarter full).
    pub fn with_capacity(capacity: usize) -> Self {
        let table = Table::with_capacity(capacity);
        SeqTable {
            read: ReadSide {
                layout: AtomicUsize::new(0),
                mask: AtomicUsize::new(table.mask),
                slots: AtomicPtr::new(table.slots.as_ptr() as *mut Slot),
                records: AtomicPtr::new(table.records.as_ptr() as *mut Record),
            },
            write: Mutex::new(WriteSide {
                tables: vec![table],
                len: 0,
                by_words: HashMap::new(),
                uses: Vec::new(),
                free: Vec::new(),
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
            if let Some(found) = self.try_get(key) {
                return found;
            }
            back_off(&mut attempt);
        }
    }

    /// One attempt: `None` when a writer got in the way.
    #[inline(always)]
    fn try_get(&self, key: usize) -> Option<Option<V>> {
        let layout = self.read.layout.load(Ordering::Acquire);
        if layout & 1 == 1 {
            return None;
        }
        // In this order: see `ReadSide`.
        let mask = self.read.mask.load(Ordering::Acquire);
        let slots = self.read.slots.load(Ordering::Acquire);
        let home = scramble(key) & mask;
        let found = probe(slots, mask, home, key);
        let words = match found {
            Probe::Missing => None,
            Probe::Found(reference) => {
                // Loaded after the probe (still after `slots`, as `ReadSide`
                // needs): it does not wait for the probe (a load from the
                // line already read), and no register holds it during the
                // probe.
                let records = self.read.records.load(Ordering::Acquire);
                // SAFETY: `records` belongs to a table at least as new as the
                // one `slots` belongs to (`ReadSide`), and tables are only
                // freed when `self` is dropped. Every value word a table's
                // slots ever hold names one of that table's records: writers
                // fill and move slots of the current table only, with
                // references taken from its records (`acquire_record`) or
                // copied from a smaller table (`grow`), and a slot's initial
                // word names record 0; a bigger table has at least the same
                // records. So no bounds check on this path.
                let record = unsafe { &*records.add(reference.index() as usize) };
                if record.seq.load(Ordering::Acquire) as u32 != reference.generation() {
                    return None;
                }
                let words = record.load_words();
                fence(Ordering::Acquire);
                if record.seq.load(Ordering::Relaxed) as u32 != reference.generation() {
                    return None;
                }
                Some(words)
            }
        };
        if words.is_none() {
            fence(Ordering::Acquire);
        }
        if self.read.layout.load(Ordering::Relaxed) != layout {
            return None;
        }
        // SAFETY: the unchanged record counter proves the words are one whole
        // `pack` output.
        Some(words.map(|w| unsafe { V::unpack(w) }))
    }

    /// Sets the value for `key`, returning the one it replaces.
    pub fn insert(&self, key: NonZeroUsize, value: V) -> Option<V> {
        let key = key.get();
        let words = value.pack();
        let mut write = self.write.lock();
        let new = self.acquire_record(&mut write, words);
        let table = current(&write);
        match table.locate(key) {
            Ok(index) => {
                let old = RecordRef(owned_load(&table.slots[index].value));
                table.slots[index].value.store(new.0, Ordering::Release);
                Some(self.release_record(&mut write, old))
            }
            Err(mut index) => {
                if (write.len + 1) * 4 > table.capacity() {
                    self.grow(&mut write);
                    index = match current(&write).locate(key) {
                        Ok(found) | Err(found) => found,
                    };
                }
                current(&write).fill(index, key, new);
                write.len += 1;
                None
            }
        }
    }

    /// Removes `key`, returning its value.
    pub fn remove(&self, key: NonZeroUsize) -> Option<V> {
        let key = key.get();
        let mut write = self.write.lock();
        let table = current(&write);
        let index = table.locate(key).ok()?;
        let old = RecordRef(owned_load(&table.slots[index].value));
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
                    let value = owned_load(&table.slots[next].value);
                    table.slots[hole].value.store(value, Ordering::Relaxed);
                    table.slots[hole].key.store(moving, Ordering::Relaxed);
                    hole = next;
                }
                next = (next + 1) & table.mask;
            }
            table.slots[hole].key.store(EMPTY, Ordering::Relaxed);
        });
        write.len -= 1;
        Some(self.release_record(&mut write, old))
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
        current(&write)
            .slots
            .iter()
            .filter_map(|slot| {
                let key = NonZeroUsize::new(owned_load(&slot.key))?;
                let value = RecordRef(owned_load(&slot.value));
                Some((key, self.value_of(&write, value)))
            })
            .collect()
    }

    /// Writer only: the value a published record holds.
    fn value_of(&self, write: &WriteSide, reference: RecordRef) -> V {
        let record = &current(write).records[reference.index() as usize];
        // SAFETY: published records change only under the writer lock, which
        // the caller holds.
        unsafe { V::unpack(record.owned_words()) }
    }

    /// Writer only: a published record holding `words`, shared if one exists.
    fn acquire_record(&self, write: &mut WriteSide, words: [usize; VALUE_WORDS]) -> RecordRef {
        if let Some(&shared) = write.by_words.get(&words) {
            write.uses[shared.index() as usize] += 1;
            return shared;
        }
        let index = match write.free.pop() {
            Some(index) => index,
            None => self.new_record_index(write),
        };
        let record = &current(write).records[index as usize];
        // The counter is odd while unpublished; write, then publish.
        let odd = owned_load(&record.seq);
        // A recycled record was made odd by whichever writer retired it, maybe
        // on another thread. This thread's release fence, before its word
        // stores, is what makes a reader that sees any new word also see that
        // odd counter (found by tests/loom_registry.rs: without it a reader
        // still holding the old generation could accept half-rewritten words).
        fence(Ordering::Release);
        for (cell, word) in record.words.iter().zip(words) {
            cell.store(word, Ordering::Relaxed);
        }
        let generation = odd.wrapping_add(1);
        record.seq.store(generation, Ordering::Release);
        let reference = RecordRef::new(index, generation as u32);
        write.uses[index as usize] = 1;
        write.by_words.insert(words, reference);
        reference
    }

    /// Writer only: one slot fewer names `reference`; the record is retired
    /// when none does. Returns the value it held.
    fn release_record(&self, write: &mut WriteSide, reference: RecordRef) -> V {
        let value = self.value_of(write, reference);
        let index = reference.index();
        write.uses[index as usize] -= 1;
        if write.uses[index as usize] == 0 {
            write.by_words.remove(&value.pack());
            let record = &current(write).records[index as usize];
            // Odd from now on: readers still holding this generation retry.
            let seq = owned_load(&record.seq);
            record.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
            fence(Ordering::Release);
            write.free.push(index);
        }
        value
    }

    fn new_record_index(&self, write: &mut WriteSide) -> u32 {
        let index = write.uses.len();
        assert!(
            index < current(write).records.len(),
            "a table has a record for every key it can hold"
        );
        write.uses.push(0);
        index as u32
    }

    fn grow(&self, write: &mut WriteSide) {
        let old = current(write);
        let bigger = Table::with_capacity(old.capacity() * 2);
        for slot in old.slots.iter() {
            let key = owned_load(&slot.key);
            if key != EMPTY {
                let index = match bigger.locate(key) {
                    Ok(found) | Err(found) => found,
                };
                bigger.fill(index, key, RecordRef(owned_load(&slot.value)));
            }
        }
        // Same indices and generations, so the slots' value words stay valid.
        for (from, to) in old.records.iter().zip(bigger.records.iter()) {
            to.seq.store(owned_load(&from.seq), Ordering::Relaxed);
            for (a, b) in from.words.iter().zip(&to.words) {
                b.store(owned_load(a), Ordering::Relaxed);
            }
        }
        let mask = bigger.mask;
        let slots = bigger.slots.as_ptr() as *mut Slot;
        let records = bigger.records.as_ptr() as *mut Record;
        // The boxed arrays stay where they are when the box moves.
        write.tables.push(bigger);
        // In this order: see `ReadSide`.
        self.change_layout(|| {
            self.read.records.store(records, Ordering::Release);
            self.read.slots.store(slots, Ordering::Release);
            self.read.mask.store(mask, Ordering::Release);
        });
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

fn current(write: &WriteSide) -> &Table {
    write
        .tables
        .last()
        .expect("there is always a current table")
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
    fn home_slot_is_where_probes_start() {
        for capacity in [2, 4, 8, 64, 1024] {
            let table = Table::with_capacity(capacity);
            for k in (1..2000).map(|i| i * 8) {
                assert_eq!(home_slot(key(k), capacity), table.home(k) & table.mask);
            }
        }
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

    /// Mean probe-run length when `keys` are inserted with `home`, by linear
    /// probing over `slots` slots.
    fn mean_probe_run(home: impl Fn(usize) -> usize, slots: usize, keys: &[usize]) -> f64 {
        let mut taken = vec![false; slots];
        let mut total = 0;
        for &k in keys {
            let mut i = home(k);
            let mut run = 1;
            while taken[i] {
                i = (i + 1) & (slots - 1);
                run += 1;
            }
            taken[i] = true;
            total += run;
        }
        total as f64 / keys.len() as f64
    }

    /// Stream handles come from a runtime's slab at a fixed stride. Indexed by
    /// a bare multiplicative (Fibonacci) hash, some strides clustered into
    /// long probe runs (0x240: over 12 slots per key when the table grew at
    /// half, 32,768 slots for 10,000 keys); the scrambled hash must
    /// keep every stride near the ideal for a table under a quarter full.
    ///
    ///     cargo test --release --lib probe_runs -- --nocapture
    #[test]
    fn probe_runs_stay_short_for_handles_at_any_stride() {
        const SLOTS: usize = 65536;
        const STREAMS: usize = 10_000;
        let table = Table::with_capacity(SLOTS);
        let shift = usize::BITS - SLOTS.trailing_zeros();
        let fibonacci = |k: usize| k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift;
        for stride in [
            8, 16, 24, 0x40, 0x100, 0x240, 0x300, 0x5a0, 0x1000, 0x1238, 0x10000,
        ] {
            let keys: Vec<usize> = (0..STREAMS)
                .map(|i| 0x5555_0000_0000 + i * stride)
                .collect();
            let scrambled = mean_probe_run(|k| table.home(k), SLOTS, &keys);
            let multiplicative = mean_probe_run(fibonacci, SLOTS, &keys);
            println!(
                "stride {stride:#x}: scrambled {scrambled:.2}, multiplicative {multiplicative:.2}"
            );
            assert!(
                scrambled < 1.2,
                "stride {stride:#x}: mean probe run {scrambled:.2}"
            );
        }
    }

    #[test]
    fn equal_values_share_one_record_and_records_are_recycled() {
        let table = SeqTable::<[usize; VALUE_WORDS]>::default();
        for k in 1..=100 {
            table.insert(key(k * 8), [7; 6]);
        }
        assert_eq!(table.write.lock().by_words.len(), 1, "one shared record");
        for k in 1..=100 {
            table.insert(key(k * 8), [k + 1000; 6]);
        }
        {
            let write = table.write.lock();
            assert_eq!(write.by_words.len(), 100);
            assert_eq!(
                write.uses.len(),
                101,
                "the shared record was retired, not leaked"
            );
            assert_eq!(write.free.len(), 1);
        }
        for k in 1..=100 {
            assert_eq!(table.remove(key(k * 8)), Some([k + 1000; 6]));
        }
        let write = table.write.lock();
        assert!(write.by_words.is_empty());
        assert_eq!(write.free.len(), 101, "every record is free for reuse");
        drop(write);
        table.insert(key(8), [9; 6]);
        assert_eq!(
            table.write.lock().uses.len(),
            101,
            "a freed record was reused"
        );
        assert_eq!(table.get(key(8)), Some([9; 6]));
    }
}
