//! The tracked-allocations adaptor: every block an allocator hands out,
//! pointer → size, owner (the stream), freed state and the user's metadata;
//! insert on alloc, mark freed on free, unknown and double frees refused
//! with what is known, exact counters ([`Stat`]).
//!
//! The blocks are a [`Table`] whose writer lock also guards the books
//! (counters, the order of frees, the user's `X`): one lock per operation.
//! Beside it the adaptor notes who is inside: a caller that finds another
//! owner inside reports it (the tracking layer's "two streams in one
//! allocator"), and a thread that is inside already gets `None` instead of
//! a deadlock. Lookups take no lock ([`Tracked::lookup`]).
//!
//! Freed blocks stay as "freed" records, so a second free is told from a
//! pointer never handed out, for as long as [`History`] says.

use super::stats::Stat;
use super::sync::back_off;
use super::table::{Packed, Table, Writer};
use crate::base::sync::{AtomicUsize, Ordering};
use std::num::NonZeroUsize;
use std::ops::{Deref, DerefMut};
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
    /// The adaptor's count of frees at this free: orders a bounded history.
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

/// A block as words: size, owner, freed (by, generation, seq; seq is 0
/// while live, frees count from 1), the metadata.
const BLOCK_WORDS: usize = 5 + META_WORDS;

// SAFETY: `unpack` builds a block from any words (`Meta::unpack` is safe).
unsafe impl<M: Meta> Packed<BLOCK_WORDS> for Block<M> {
    #[inline]
    fn pack(&self) -> [usize; BLOCK_WORDS] {
        let m = self.meta.pack();
        let (by, generation, seq) = self
            .freed
            .map_or((0, 0, 0), |f| (f.by, f.generation as usize, f.seq as usize));
        [
            self.size, self.owner, by, generation, seq, m[0], m[1], m[2], m[3],
        ]
    }
    #[inline]
    unsafe fn unpack(w: [usize; BLOCK_WORDS]) -> Self {
        Block {
            size: w[0],
            owner: w[1],
            freed: (w[4] != 0).then_some(Freed {
                by: w[2],
                generation: w[3] as u64,
                seq: w[4] as u64,
            }),
            meta: M::unpack(&[w[5], w[6], w[7], w[8]]),
        }
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

/// What the table's lock guards beside the blocks.
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

/// How long a waiting caller spins, watching for another owner inside,
/// before it blocks.
const SPINS: u32 = 100;

/// The tracked allocations of one allocator, with `X` kept beside them
/// under the same lock.
pub struct Tracked<M: Meta, X = ()> {
    table: Table<Block<M>, BLOCK_WORDS, Books<X>>,
    /// The owner inside, or 0: what a waiting caller reports.
    inside: AtomicUsize,
    /// The thread of a full holder, or 0: its re-entry gets `None`.
    holder: AtomicUsize,
}

impl<M: Meta, X> Tracked<M, X> {
    /// Empty books, remembering freed blocks as `history` says.
    pub fn new(history: History, extra: X) -> Self {
        let recent = match history {
            History::Recent(n) => Some(n),
            History::UntilForgotten => None,
        };
        let books = Books {
            counters: Counters::default(),
            frees: 0,
            recent,
            extra,
        };
        Tracked {
            table: Table::new_biased(64, books),
            inside: AtomicUsize::new(0),
            holder: AtomicUsize::new(0),
        }
    }

    /// Enters the books for `owner` (non-zero; [`INSPECTOR`] to read or
    /// report), waiting while another caller is inside.
    /// `other_inside(current)` runs once if another owner is seen inside.
    /// `None` when this thread is inside already (a user's callback calling
    /// back in).
    #[inline]
    pub fn enter(&self, owner: usize, other_inside: impl FnOnce(usize)) -> Option<Guard<'_, M, X>> {
        self.take(owner, other_inside, true, None)
    }

    /// [`Tracked::enter`] for a caller that runs none of the user's code
    /// while inside, so never re-enters: its thread is not noted.
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
        let w = match self.table.try_write() {
            Some(w) => w,
            None => self.wait(owner, other_inside, deadline)?,
        };
        self.inside.store(owner, Ordering::Relaxed);
        if full {
            self.holder.store(this_thread(), Ordering::Relaxed);
        }
        Some(Guard {
            tracked: self,
            full,
            w,
        })
    }

    /// The lock is held: `None` on a re-entry; else spin a little,
    /// reporting another owner seen inside, then block.
    #[cold]
    #[inline(never)]
    fn wait(
        &self,
        owner: usize,
        other_inside: impl FnOnce(usize),
        deadline: Option<Instant>,
    ) -> Option<Writer<'_, Block<M>, BLOCK_WORDS, Books<X>>> {
        // Only this thread stores its own mark, and clears it before leaving.
        if self.holder.load(Ordering::Relaxed) == this_thread() {
            return None;
        }
        let mut report = Some(other_inside);
        let mut attempt = 0;
        loop {
            let current = self.inside.load(Ordering::Relaxed);
            if current != 0 && current != owner && current != INSPECTOR && owner != INSPECTOR {
                if let Some(report) = report.take() {
                    report(current);
                }
            }
            if let Some(w) = self.table.try_write() {
                return Some(w);
            }
            match deadline {
                Some(deadline) if Instant::now() >= deadline => return None,
                None if attempt >= SPINS => return Some(self.table.write()),
                _ => back_off(&mut attempt),
            }
        }
    }

    /// The block recorded for `ptr` (live or remembered as freed), without
    /// entering the books: lock-free.
    #[inline]
    pub fn lookup(&self, ptr: usize) -> Option<Block<M>> {
        self.table.get(NonZeroUsize::new(ptr)?)
    }
}

/// The right to change one allocator's books (see [`Tracked::enter`]).
pub struct Guard<'a, M: Meta, X> {
    tracked: &'a Tracked<M, X>,
    full: bool,
    w: Writer<'a, Block<M>, BLOCK_WORDS, Books<X>>,
}

impl<M: Meta, X> Drop for Guard<'_, M, X> {
    #[inline]
    fn drop(&mut self) {
        // Before `w` unlocks.
        if self.full {
            self.tracked.holder.store(0, Ordering::Relaxed);
        }
        self.tracked.inside.store(0, Ordering::Relaxed);
    }
}

impl<M: Meta, X> Deref for Guard<'_, M, X> {
    type Target = X;
    #[inline]
    fn deref(&self) -> &X {
        &self.w.extra
    }
}

impl<M: Meta, X> DerefMut for Guard<'_, M, X> {
    #[inline]
    fn deref_mut(&mut self) -> &mut X {
        &mut self.w.extra
    }
}

impl<M: Meta, X> Guard<'_, M, X> {
    /// Records a block just handed out at `ptr` (non-zero). A pointer that
    /// is live already is refused with its record, and nothing changes.
    #[inline]
    pub fn insert(
        &mut self,
        ptr: usize,
        size: usize,
        owner: usize,
        meta: M,
    ) -> Result<(), Block<M>> {
        let Some(key) = NonZeroUsize::new(ptr) else {
            return Ok(());
        };
        let new = Block {
            size,
            owner,
            freed: None,
            meta,
        };
        // A freed record handed out again (a caching allocator's usual
        // case) is rewritten in place: one probe.
        let reused = self.w.update(key, |b| {
            let live = b.is_live();
            if !live {
                *b = new;
            }
            live
        });
        match reused {
            Some(true) => return Err(self.w.get(key).expect("just found")),
            Some(false) => {}
            None => {
                self.w.insert(key, new);
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
        let old = self.insert(ptr, size, owner, meta).err()?;
        Some(self.replace_live(ptr, old, size, owner, meta))
    }

    #[cold]
    fn replace_live(
        &mut self,
        ptr: usize,
        old: Block<M>,
        size: usize,
        owner: usize,
        meta: M,
    ) -> Block<M> {
        let key = NonZeroUsize::new(ptr).expect("a live record has a non-zero key");
        self.w.insert(
            key,
            Block {
                size,
                owner,
                freed: None,
                meta,
            },
        );
        let c = &mut self.w.counters;
        c.allocation.decrease(1);
        c.allocated_bytes.decrease(old.size as i64);
        self.count_alloc(size);
        old
    }

    #[inline]
    fn count_alloc(&mut self, size: usize) {
        let c = &mut self.w.counters;
        c.allocation.increase(1);
        c.allocated_bytes.increase(size as i64);
    }

    /// Marks `ptr` freed by `by` at the user's `generation`, returning its
    /// record as it was live. An unknown pointer or a second free is
    /// refused (and counted) with what is known.
    #[inline]
    pub fn free(&mut self, ptr: usize, by: usize, generation: u64) -> Result<Block<M>, Refused<M>> {
        let seq = self.w.frees + 1;
        let freed = Freed {
            by,
            generation,
            seq,
        };
        let found = NonZeroUsize::new(ptr).and_then(|key| {
            self.w.update(key, |b| {
                let was = *b;
                if was.is_live() {
                    b.freed = Some(freed);
                }
                was
            })
        });
        let live = match found {
            Some(b) if b.is_live() => b,
            Some(first) => return Err(self.refuse(Refused::DoubleFree(first))),
            None => return Err(self.refuse(Refused::Unknown)),
        };
        let books = &mut *self.w;
        books.frees = seq;
        books.counters.allocation.decrease(1);
        books.counters.allocated_bytes.decrease(live.size as i64);
        if let Some(limit) = books.recent {
            if self.freed_count() > limit {
                self.forget_oldest(limit);
            }
        }
        Ok(live)
    }

    #[cold]
    fn refuse(&mut self, refused: Refused<M>) -> Refused<M> {
        self.w.counters.refused_frees += 1;
        refused
    }

    /// More freed blocks are remembered than the history keeps: the older
    /// half goes, in one pass (a few slot reads per free, amortised).
    #[cold]
    #[inline(never)]
    fn forget_oldest(&mut self, limit: usize) {
        let keep_from = self.w.frees.saturating_sub((limit / 2) as u64);
        self.retain(|_, b| b.freed.is_some_and(|f| f.seq > keep_from));
    }

    /// Counts an allocation that failed.
    #[inline]
    pub fn count_failure(&mut self) {
        self.w.counters.failed_allocs += 1;
    }

    /// The record of `ptr`.
    #[inline]
    pub fn get(&self, ptr: usize) -> Option<Block<M>> {
        self.w.get(NonZeroUsize::new(ptr)?)
    }

    /// Changes the user's metadata of `ptr` (live or freed); false when
    /// there is no record.
    #[inline]
    pub fn update_meta(&mut self, ptr: usize, change: impl FnOnce(&mut M)) -> bool {
        NonZeroUsize::new(ptr)
            .and_then(|key| self.w.update(key, |b| change(&mut b.meta)))
            .is_some()
    }

    /// Reads `ptr`'s record and, if `change` returns new metadata for it,
    /// writes that (one probe). Returns the record as it was read.
    #[inline]
    pub fn read_and_update(
        &mut self,
        ptr: usize,
        change: impl FnOnce(&Block<M>) -> Option<M>,
    ) -> Option<Block<M>> {
        self.w.update(NonZeroUsize::new(ptr)?, |b| {
            let read = *b;
            if let Some(meta) = change(&read) {
                b.meta = meta;
            }
            read
        })
    }

    /// Forgets a freed block (it can no longer be told from an unknown
    /// pointer); a live one stays.
    pub fn forget_freed(&mut self, ptr: usize) -> bool {
        match NonZeroUsize::new(ptr) {
            Some(key) if self.w.get(key).is_some_and(|b| !b.is_live()) => {
                self.w.remove(key);
                true
            }
            _ => false,
        }
    }

    /// Keeps the records for which `keep` is true. Live records always
    /// stay, whatever `keep` says, so the counters stay exact.
    pub fn retain(&mut self, mut keep: impl FnMut(usize, &Block<M>) -> bool) {
        self.w.retain(|key, b| b.is_live() || keep(key.get(), b));
    }

    /// Every record (live and freed), in no particular order.
    pub fn records(&self) -> Vec<(usize, Block<M>)> {
        let all = self.w.entries().into_iter();
        all.map(|(key, b)| (key.get(), b)).collect()
    }

    /// Every live record, in no particular order.
    pub fn live(&self) -> Vec<(usize, Block<M>)> {
        let mut all = self.records();
        all.retain(|(_, b)| b.is_live());
        all
    }

    /// Freed blocks remembered.
    #[inline]
    pub fn freed_count(&self) -> usize {
        // Every record is live or freed, and the live ones are counted.
        let live = self.w.counters.allocation.current as usize;
        self.w.len().saturating_sub(live)
    }

    /// Live blocks now.
    #[inline]
    pub fn live_count(&self) -> usize {
        self.w.counters.allocation.current as usize
    }

    /// The counters.
    #[inline]
    pub fn counters(&self) -> Counters {
        self.w.counters
    }

    /// The counters, to change (peak resets). `allocation.current` must
    /// stay as it is: the freed count is derived from it.
    #[inline]
    pub fn counters_mut(&mut self) -> &mut Counters {
        &mut self.w.counters
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
    fn a_second_owner_is_reported_once_and_waits_and_reentry_is_refused() {
        let t = books(History::UntilForgotten);
        let g = t.enter(0x10, |_| unreachable!()).unwrap();
        assert!(t.enter(0x10, |_| {}).is_none(), "re-entry");
        assert!(t.enter_with_patience(Duration::from_secs(60)).is_none());
        let seen = AtomicUsize::new(0);
        std::thread::scope(|s| {
            s.spawn(|| {
                let patience = Duration::from_millis(5);
                assert!(t.enter_with_patience(patience).is_none(), "busy");
                let _g = t.enter(0x20, |current| {
                    seen.fetch_add(current, Ordering::SeqCst);
                });
            });
            while seen.load(Ordering::SeqCst) == 0 {
                std::thread::yield_now();
            }
            drop(g);
        });
        assert_eq!(seen.load(Ordering::SeqCst), 0x10, "reported once");
        assert!(t.enter_with_patience(Duration::from_millis(5)).is_some());
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
