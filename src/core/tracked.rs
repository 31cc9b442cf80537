//! The tracked-allocations adaptor: every block an allocator hands out,
//! pointer → size, owner (the stream), freed state and the user's metadata;
//! insert on alloc, mark freed on free, unknown and double frees refused
//! with what is known, exact counters ([`Stat`]).
//!
//! The books of one allocator change under one lock per allocator, which
//! also notes who is inside: a caller that finds another owner inside
//! reports it (the tracking layer's "two streams in one allocator"), and a
//! thread that is inside already gets `None` instead of a deadlock. Lookups
//! take no lock ([`Tracked::lookup`]).
//!
//! Freed blocks stay as "freed" records, so a second free is told from a
//! pointer never handed out, for as long as [`History`] says.

use super::live_table::{LiveTable, SlotRef, Words, ENTRY_WORDS};
use super::stats::Stat;
use parking_lot::{Mutex, MutexGuard};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Words of metadata a user keeps per block.
pub const META_WORDS: usize = 4;

/// What a user of the adaptor keeps per block, as words.
pub trait Meta: Copy {
    /// As words.
    fn pack(&self) -> [usize; META_WORDS];
    /// Back from words `pack` produced.
    fn unpack(words: &[usize; META_WORDS]) -> Self;
}

impl Meta for () {
    fn pack(&self) -> [usize; META_WORDS] {
        [0; META_WORDS]
    }
    fn unpack(_: &[usize; META_WORDS]) -> Self {}
}

/// How a freed block ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Freed {
    /// Who freed it (the stream; 0 when unknown).
    pub by: usize,
    /// The user's generation at the free (the tracking layer: the
    /// synchronization clock).
    pub generation: u64,
    /// The adaptor's own count of frees at this free (orders a bounded
    /// history; 0 when the history is kept until forgotten).
    seq: u64,
}

/// One block: live, or freed and remembered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block<M> {
    /// The bytes requested.
    pub size: usize,
    /// Who it was handed out to (the stream; 0 when unknown).
    pub owner: usize,
    /// `None` while live.
    pub freed: Option<Freed>,
    /// The user's metadata.
    pub meta: M,
}

impl<M> Block<M> {
    /// True while handed out and not freed.
    #[inline]
    pub fn is_live(&self) -> bool {
        self.freed.is_none()
    }
}

/// Where a block's fields sit among its words (see `Words for Block`).
mod word {
    pub(super) const SIZE: usize = 0;
    pub(super) const OWNER: usize = 1;
    /// 0 live, 1 freed.
    pub(super) const FREED: usize = 2;
    pub(super) const BY: usize = 3;
    pub(super) const GENERATION: usize = 4;
    pub(super) const SEQ: usize = 5;
    pub(super) const META: usize = 6;
}

impl<M: Meta> Words for Block<M> {
    #[inline]
    fn pack(&self) -> [usize; ENTRY_WORDS] {
        let m = self.meta.pack();
        let (tag, by, generation, seq) = match self.freed {
            None => (0, 0, 0, 0),
            Some(f) => (1, f.by, f.generation as usize, f.seq as usize),
        };
        [
            self.size, self.owner, tag, by, generation, seq, m[0], m[1], m[2], m[3],
        ]
    }
    #[inline]
    fn unpack(w: &[usize; ENTRY_WORDS]) -> Self {
        Block {
            size: w[word::SIZE],
            owner: w[word::OWNER],
            freed: (w[word::FREED] != 0).then_some(Freed {
                by: w[word::BY],
                generation: w[word::GENERATION] as u64,
                seq: w[word::SEQ] as u64,
            }),
            meta: M::unpack(&[
                w[word::META],
                w[word::META + 1],
                w[word::META + 2],
                w[word::META + 3],
            ]),
        }
    }
}

/// A slot's block read word by word (a whole copy would go through the
/// stack, and the hot paths read a few fields).
#[inline]
fn read_block<M: Meta>(slot: &SlotRef<'_>) -> Block<M> {
    Block {
        size: slot.word(word::SIZE),
        owner: slot.word(word::OWNER),
        freed: (slot.word(word::FREED) != 0).then(|| Freed {
            by: slot.word(word::BY),
            generation: slot.word(word::GENERATION) as u64,
            seq: slot.word(word::SEQ) as u64,
        }),
        meta: M::unpack(&[
            slot.word(word::META),
            slot.word(word::META + 1),
            slot.word(word::META + 2),
            slot.word(word::META + 3),
        ]),
    }
}

/// The counters of one allocator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Live blocks (`allocation` in PyTorch's keys).
    pub allocation: Stat,
    /// Bytes in live blocks (`allocated_bytes`).
    pub allocated_bytes: Stat,
    /// Allocations that failed (the allocator returned NULL).
    pub failed_allocs: u64,
    /// Frees refused: unknown pointers and double frees.
    pub refused_frees: u64,
}

impl Counters {
    /// Peaks restart from the current values.
    pub fn reset_peaks(&mut self) {
        self.allocation.peak = self.allocation.current;
        self.allocated_bytes.peak = self.allocated_bytes.current;
    }
}

/// How long freed blocks are remembered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum History {
    /// At most `n` frees, the most recent: past `n`, the older half of
    /// them is forgotten at once.
    Recent(usize),
    /// Until the user forgets them ([`Guard::forget_freed`], [`Guard::retain`]).
    UntilForgotten,
}

/// Why a free was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused<M> {
    /// Freed already; the block as its first free left it.
    DoubleFree(Block<M>),
    /// Never handed out here (or freed so long ago it was forgotten).
    Unknown,
}

struct Books<X> {
    counters: Counters,
    frees: u64,
    /// For `History::Recent(n)`: `n`.
    recent: Option<usize>,
    extra: X,
}

/// The owner of a hold that is not a caller's use of the allocator (an
/// address lookup, a report): it never counts as a second owner.
pub const INSPECTOR: usize = usize::MAX;

/// This thread's mark: non-zero, unique among live threads.
#[inline]
fn this_thread() -> usize {
    thread_local! {
        static MARK: u8 = const { 0 };
    }
    MARK.with(|mark| mark as *const u8 as usize)
}

/// The tracked allocations of one allocator, with `X` kept beside them
/// under the same lock.
pub struct Tracked<M: Meta, X = ()> {
    /// Serialises the books and the table's writers.
    books: Mutex<Books<X>>,
    /// The owner inside, or 0: what a waiting caller reports.
    inside: AtomicUsize,
    /// The thread of a full holder, or 0: a re-entry gets `None`.
    holder: AtomicUsize,
    table: LiveTable<Block<M>>,
}

impl<M: Meta, X> Tracked<M, X> {
    /// Empty books, remembering freed blocks as `history` says.
    pub fn new(history: History, extra: X) -> Self {
        let recent = match history {
            History::Recent(n) => Some(n),
            History::UntilForgotten => None,
        };
        Tracked {
            books: Mutex::new(Books {
                counters: Counters::default(),
                frees: 0,
                recent,
                extra,
            }),
            inside: AtomicUsize::new(0),
            holder: AtomicUsize::new(0),
            table: LiveTable::default(),
        }
    }

    /// Enters the books for `owner` (non-zero; [`INSPECTOR`] to read or
    /// report), waiting while another caller is inside. `other_inside(current)`
    /// runs once if another owner is seen inside; `None` when this thread is
    /// inside already (a user callback calling back in).
    #[inline]
    pub fn enter(&self, owner: usize, other_inside: impl FnOnce(usize)) -> Option<Guard<'_, M, X>> {
        self.take(owner, other_inside, true, None)
    }

    /// [`Tracked::enter`] for a caller that runs none of the user's code
    /// while inside, so cannot re-enter: its thread is not noted.
    #[inline]
    pub fn enter_brief(
        &self,
        owner: usize,
        other_inside: impl FnOnce(usize),
    ) -> Option<Guard<'_, M, X>> {
        self.take(owner, other_inside, false, None)
    }

    /// Enters as the inspector, waiting at most `patience`.
    pub fn enter_with_patience(&self, patience: Duration) -> Option<Guard<'_, M, X>> {
        self.take(INSPECTOR, |_| {}, true, Some(Instant::now() + patience))
    }

    #[inline]
    fn take(
        &self,
        owner: usize,
        other_inside: impl FnOnce(usize),
        full: bool,
        deadline: Option<Instant>,
    ) -> Option<Guard<'_, M, X>> {
        debug_assert_ne!(owner, 0);
        let books = match self.books.try_lock() {
            Some(books) => books,
            None => self.wait(owner, other_inside, deadline)?,
        };
        self.inside.store(owner, Ordering::Relaxed);
        if full {
            self.holder.store(this_thread(), Ordering::Relaxed);
        }
        Some(Guard {
            tracked: self,
            full,
            books,
        })
    }

    /// The lock is taken: `None` on a re-entry, else report another owner
    /// seen inside while spinning briefly, then block.
    #[cold]
    #[inline(never)]
    fn wait(
        &self,
        owner: usize,
        other_inside: impl FnOnce(usize),
        deadline: Option<Instant>,
    ) -> Option<MutexGuard<'_, Books<X>>> {
        if self.holder.load(Ordering::Relaxed) == this_thread() {
            return None;
        }
        let mut report = Some(other_inside);
        for _ in 0..SPINS {
            let current = self.inside.load(Ordering::Relaxed);
            if current != 0 && current != owner && current != INSPECTOR && owner != INSPECTOR {
                if let Some(report) = report.take() {
                    report(current);
                }
            }
            if let Some(books) = self.books.try_lock() {
                return Some(books);
            }
            std::hint::spin_loop();
        }
        match deadline {
            Some(deadline) => self.books.try_lock_until(deadline),
            None => Some(self.books.lock()),
        }
    }

    /// The block recorded for `ptr` (live or remembered as freed), without
    /// entering the books: lock-free.
    #[inline]
    pub fn lookup(&self, ptr: usize) -> Option<Block<M>> {
        if ptr == 0 {
            return None;
        }
        self.table.get(ptr)
    }
}

/// How long a waiting caller spins, watching for another owner, before it
/// blocks.
const SPINS: u32 = 100;

/// The right to change one allocator's books (see [`Tracked::enter`]).
pub struct Guard<'a, M: Meta, X> {
    tracked: &'a Tracked<M, X>,
    full: bool,
    books: MutexGuard<'a, Books<X>>,
}

impl<M: Meta, X> Drop for Guard<'_, M, X> {
    #[inline]
    fn drop(&mut self) {
        // Cleared before `books` unlocks.
        if self.full {
            self.tracked.holder.store(0, Ordering::Relaxed);
        }
        self.tracked.inside.store(0, Ordering::Relaxed);
    }
}

impl<M: Meta, X> Deref for Guard<'_, M, X> {
    type Target = X;
    fn deref(&self) -> &X {
        &self.books.extra
    }
}

impl<M: Meta, X> DerefMut for Guard<'_, M, X> {
    fn deref_mut(&mut self) -> &mut X {
        &mut self.books.extra
    }
}

impl<M: Meta, X> Guard<'_, M, X> {
    #[inline]
    fn books(&mut self) -> &mut Books<X> {
        &mut self.books
    }

    #[inline]
    fn table(&self) -> &LiveTable<Block<M>> {
        &self.tracked.table
    }

    /// Records a block just handed out. A pointer that is live already is
    /// refused with its record, and nothing changes.
    #[inline]
    pub fn insert(
        &mut self,
        ptr: usize,
        size: usize,
        owner: usize,
        meta: M,
    ) -> Result<(), Block<M>> {
        let tracked = self.tracked;
        // SAFETY: the guard holds the lock, which serialises the table's
        // writers (so for every table access below).
        match unsafe { tracked.table.slot_of(ptr) } {
            Some(slot) => {
                if slot.word(word::FREED) == 0 {
                    return Err(read_block(&slot));
                }
                // A freed block handed out again (a caching allocator's
                // every call): when only the mark changes, it goes alone.
                let m = meta.pack();
                let same = (slot.word(word::SIZE) == size)
                    & (slot.word(word::OWNER) == owner)
                    & (slot.word(word::META) == m[0])
                    & (slot.word(word::META + 1) == m[1])
                    & (slot.word(word::META + 2) == m[2])
                    & (slot.word(word::META + 3) == m[3]);
                if same {
                    slot.set_alone(word::FREED, 0);
                } else {
                    slot.change(|s| {
                        s.set(word::SIZE, size);
                        s.set(word::OWNER, owner);
                        s.set(word::FREED, 0);
                        for (i, &w) in m.iter().enumerate() {
                            s.set(word::META + i, w);
                        }
                    });
                }
            }
            None => {
                let block = Block {
                    size,
                    owner,
                    freed: None,
                    meta,
                };
                // SAFETY: as above.
                unsafe { self.table().put(ptr, &block) };
            }
        }
        self.count_alloc(size);
        Ok(())
    }

    /// Records a block just handed out, replacing a live record of the same
    /// pointer (a broken allocator handed it out twice): the old one counts
    /// as freed. Returns the replaced live record.
    #[inline]
    pub fn replace(&mut self, ptr: usize, size: usize, owner: usize, meta: M) -> Option<Block<M>> {
        match self.insert(ptr, size, owner, meta) {
            Ok(()) => None,
            Err(old) => {
                // As words: a value of `M` passed out of line goes by
                // address, stored on every call for this rare one.
                let [m0, m1, m2, m3] = meta.pack();
                Some(self.replace_live(ptr, old, size, owner, m0, m1, m2, m3))
            }
        }
    }

    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn replace_live(
        &mut self,
        ptr: usize,
        old: Block<M>,
        size: usize,
        owner: usize,
        m0: usize,
        m1: usize,
        m2: usize,
        m3: usize,
    ) -> Block<M> {
        let block = Block {
            size,
            owner,
            freed: None,
            meta: M::unpack(&[m0, m1, m2, m3]),
        };
        // SAFETY: the guard holds the lock.
        unsafe { self.table().put(ptr, &block) };
        let c = &mut self.books().counters;
        c.allocation.decrease(1);
        c.allocated_bytes.decrease(old.size as i64);
        self.count_alloc(size);
        old
    }

    #[inline]
    fn count_alloc(&mut self, size: usize) {
        let c = &mut self.books().counters;
        c.allocation.increase(1);
        c.allocated_bytes.increase(size as i64);
    }

    /// Marks `ptr` freed by `by` at the user's `generation`, returning its
    /// record as it was live. An unknown pointer or a second free is
    /// refused (and counted) with what is known.
    #[inline]
    pub fn free(&mut self, ptr: usize, by: usize, generation: u64) -> Result<Block<M>, Refused<M>> {
        let tracked = self.tracked;
        // SAFETY: the guard holds the lock, which serialises the table's
        // writers.
        let Some(slot) = (unsafe { tracked.table.slot_of(ptr) }) else {
            return Err(self.refuse(Refused::Unknown));
        };
        if slot.word(word::FREED) != 0 {
            let first = read_block(&slot);
            return Err(self.refuse(Refused::DoubleFree(first)));
        }
        // Read field by field: a whole copy would go through the stack.
        let live = Block {
            size: slot.word(word::SIZE),
            owner: slot.word(word::OWNER),
            freed: None,
            meta: M::unpack(&[
                slot.word(word::META),
                slot.word(word::META + 1),
                slot.word(word::META + 2),
                slot.word(word::META + 3),
            ]),
        };
        let books = self.books();
        // The order of frees only matters to a bounded history (it forgets
        // the oldest); a history kept until forgotten skips the store.
        let recent = books.recent.is_some();
        let seq = books.frees + 1;
        // The freed fields keep the last free's values while the block is
        // live; when this free leaves them as they are (the same stream,
        // no synchronization since, no bounded history), only the mark
        // changes and goes alone, without the sequence counter's stores.
        let same = !recent
            & (slot.word(word::BY) == by)
            & (slot.word(word::GENERATION) == generation as usize);
        if same {
            slot.set_alone(word::FREED, 1);
        } else {
            slot.change(|s| {
                s.set(word::FREED, 1);
                s.set(word::BY, by);
                s.set(word::GENERATION, generation as usize);
                if recent {
                    s.set(word::SEQ, seq as usize);
                }
            });
        }
        if recent {
            books.frees = seq;
        }
        books.counters.allocation.decrease(1);
        books.counters.allocated_bytes.decrease(live.size as i64);
        if let Some(limit) = books.recent {
            if self.freed_count() > limit {
                self.forget_oldest();
            }
        }
        Ok(live)
    }

    #[cold]
    fn refuse(&mut self, refused: Refused<M>) -> Refused<M> {
        self.books().counters.refused_frees += 1;
        refused
    }

    /// More freed blocks are remembered than the history keeps: the older
    /// half of the history goes, in one pass over the table (so the pass
    /// costs a few slot reads per free, amortised; an allocator that reuses
    /// its addresses keeps few freed records and never gets here).
    #[cold]
    #[inline(never)]
    fn forget_oldest(&mut self) {
        let books = self.books();
        let limit = books.recent.unwrap_or(0);
        let keep_from = books.frees.saturating_sub((limit / 2) as u64);
        self.retain(|_, b| b.freed.is_some_and(|f| f.seq > keep_from));
    }

    /// Counts an allocation that failed.
    #[inline]
    pub fn count_failure(&mut self) {
        self.books().counters.failed_allocs += 1;
    }

    /// The record of `ptr`.
    #[inline]
    pub fn get(&self, ptr: usize) -> Option<Block<M>> {
        // SAFETY: the guard holds the lock.
        let slot = unsafe { self.tracked.table.slot_of(ptr) }?;
        Some(read_block(&slot))
    }

    /// Changes the user's metadata of `ptr` (live or freed); false when
    /// there is no record. Only the words that change are written.
    #[inline]
    pub fn update_meta(&mut self, ptr: usize, change: impl FnOnce(&mut M)) -> bool {
        // SAFETY: the guard holds the lock.
        let Some(slot) = (unsafe { self.tracked.table.slot_of(ptr) }) else {
            return false;
        };
        let old = [
            slot.word(word::META),
            slot.word(word::META + 1),
            slot.word(word::META + 2),
            slot.word(word::META + 3),
        ];
        let mut meta = M::unpack(&old);
        change(&mut meta);
        let new = meta.pack();
        // No comparison of the two arrays here: they sit on the stack just
        // stored word by word, and a vector compare of them stalls on store
        // forwarding; `set` compares each word with the slot's instead.
        slot.change(|s| {
            for (i, &w) in new.iter().enumerate() {
                s.set(word::META + i, w);
            }
        });
        true
    }

    /// Reads `ptr`'s record and, if `change` returns new metadata for it,
    /// writes that (one probe for both). Returns the record as it was read.
    #[inline]
    pub fn read_and_update(
        &mut self,
        ptr: usize,
        change: impl FnOnce(&Block<M>) -> Option<M>,
    ) -> Option<Block<M>> {
        // SAFETY: the guard holds the lock.
        let slot = unsafe { self.tracked.table.slot_of(ptr) }?;
        let block = read_block(&slot);
        if let Some(meta) = change(&block) {
            let new = meta.pack();
            slot.change(|s| {
                for (i, &w) in new.iter().enumerate() {
                    s.set(word::META + i, w);
                }
            });
        }
        Some(block)
    }

    /// Forgets a freed block (it can no longer be told from an unknown
    /// pointer); a live one stays.
    pub fn forget_freed(&mut self, ptr: usize) -> bool {
        if self.get(ptr).is_some_and(|b| !b.is_live()) {
            // SAFETY: the guard holds the lock.
            unsafe { self.table().remove(ptr) };
            return true;
        }
        false
    }

    /// Keeps the records for which `keep` is true (it may change their
    /// metadata). Dropping a live record is not allowed: live blocks always
    /// stay, whatever `keep` says, so the counters stay exact.
    pub fn retain(&mut self, mut keep: impl FnMut(usize, &mut Block<M>) -> bool) {
        // SAFETY: the guard holds the lock.
        unsafe {
            self.table().retain(|ptr, block| {
                let live = block.is_live();
                let kept = keep(ptr, block) || live;
                // The callback may not turn a record live or freed.
                block.freed = if live { None } else { block.freed };
                kept
            })
        };
    }

    /// Every record (live and freed), in no particular order.
    pub fn records(&self) -> Vec<(usize, Block<M>)> {
        // SAFETY: the guard holds the lock.
        unsafe { self.table().entries() }
    }

    /// Every live record, in no particular order.
    pub fn live(&self) -> Vec<(usize, Block<M>)> {
        let mut all = self.records();
        all.retain(|(_, b)| b.is_live());
        all
    }

    /// Freed blocks remembered.
    #[inline]
    pub fn freed_count(&mut self) -> usize {
        // Every record is live or freed, and the live ones are counted:
        // no count of its own to keep on every alloc and free.
        // SAFETY: the guard holds the lock.
        let records = unsafe { self.table().entry_count() };
        records.saturating_sub(self.books().counters.allocation.current as usize)
    }

    /// Live blocks now.
    #[inline]
    pub fn live_count(&mut self) -> usize {
        self.books().counters.allocation.current as usize
    }

    /// The counters.
    #[inline]
    pub fn counters(&mut self) -> Counters {
        self.books().counters
    }

    /// The counters, to change (peak resets). `allocation.current` must
    /// stay as it is: it is the books' count of live records (the freed
    /// count is derived from it).
    #[inline]
    pub fn counters_mut(&mut self) -> &mut Counters {
        &mut self.books().counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn books(history: History) -> Tracked<(), ()> {
        Tracked::new(history, ())
    }

    #[test]
    fn counters_follow_allocs_and_frees_and_refusals_say_why() {
        let t = books(History::Recent(4));
        let mut g = t.enter(1, |_| {}).unwrap();
        g.insert(0x1000, 100, 7, ()).unwrap();
        g.insert(0x2000, 50, 7, ()).unwrap();
        assert_eq!(g.insert(0x1000, 8, 7, ()).unwrap_err().size, 100);
        assert_eq!(g.free(0x1000, 9, 3).unwrap().size, 100);
        let c = g.counters();
        assert_eq!((c.allocation.current, c.allocation.peak), (1, 2));
        assert_eq!(
            (c.allocated_bytes.current, c.allocated_bytes.peak),
            (50, 150)
        );
        assert_eq!(
            (c.allocated_bytes.allocated, c.allocated_bytes.freed),
            (150, 100)
        );
        match g.free(0x1000, 5, 4) {
            Err(Refused::DoubleFree(b)) => {
                assert_eq!(b.size, 100);
                assert_eq!(b.freed.map(|f| (f.by, f.generation)), Some((9, 3)));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(g.free(0x3000, 5, 4), Err(Refused::Unknown));
        assert_eq!(g.counters().refused_frees, 2);
        drop(g);
        assert!(t.lookup(0x1000).is_some_and(|b| !b.is_live()));
        assert!(t.lookup(0x2000).is_some_and(|b| b.is_live()));
        assert_eq!(t.lookup(0x3000), None);
    }

    #[test]
    fn the_recent_history_is_bounded_and_reuse_makes_a_block_live_again() {
        let t = books(History::Recent(3));
        let mut g = t.enter(1, |_| {}).unwrap();
        for i in 1..=10 {
            g.insert(i * 16, 1, 0, ()).unwrap();
            g.free(i * 16, 0, 0).unwrap();
        }
        let kept = g.freed_count();
        assert!((1..=3).contains(&kept), "{kept}");
        assert_eq!(g.free(16, 0, 0), Err(Refused::Unknown), "forgotten");
        assert!(matches!(g.free(160, 0, 0), Err(Refused::DoubleFree(_))));
        g.insert(160, 2, 0, ()).unwrap();
        assert_eq!(g.freed_count(), kept - 1);
        assert_eq!(g.free(160, 0, 0).unwrap().size, 2);
        let zero = books(History::Recent(0));
        let mut g = zero.enter(1, |_| {}).unwrap();
        g.insert(16, 1, 0, ()).unwrap();
        g.free(16, 0, 0).unwrap();
        assert_eq!(g.freed_count(), 0);
        assert!(g.records().is_empty());
    }

    #[test]
    fn replace_counts_the_old_record_as_freed_and_retain_keeps_live_blocks() {
        let t = books(History::UntilForgotten);
        let mut g = t.enter(1, |_| {}).unwrap();
        g.insert(16, 10, 0, ()).unwrap();
        assert_eq!(g.replace(16, 30, 0, ()).map(|b| b.size), Some(10));
        let c = g.counters();
        assert_eq!(
            (c.allocated_bytes.current, c.allocated_bytes.allocated),
            (30, 40)
        );
        g.insert(32, 5, 0, ()).unwrap();
        g.free(32, 0, 0).unwrap();
        g.insert(48, 5, 0, ()).unwrap();
        g.free(48, 0, 0).unwrap();
        assert_eq!(g.freed_count(), 2);
        g.retain(|_, _| false);
        assert_eq!(g.freed_count(), 0);
        assert_eq!(g.records().len(), 1, "the live block stays");
        assert!(g.forget_freed(16).eq(&false));
    }
}
