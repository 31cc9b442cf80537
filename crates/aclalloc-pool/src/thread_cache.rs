//! Each thread's cache of recently freed blocks, per (pool, stream), in
//! front of the shard locks (jemalloc's tcache, one level up).
//!
//! A block the shard hands out on a thread with a cache for its (pool,
//! stream) is *lent* to that cache with its statistics
//! (`crates/aclalloc-pool/src/engine/lend.rs`). Freeing it on that thread parks it, and the
//! next request of the same size there takes it back, with no lock and no
//! locked instruction: the owner sets `busy`, and a slow path that must reach
//! the cache stops the owner first (`Slot::enter`, `stop_owners`,
//! [`crate::base::fence`]). A cache belongs to one stream, so stream safety holds.
//!
//! Every pool-wide operation (statistics, snapshots, `empty_cache`, growing,
//! out-of-memory retries, a stream's end, closing) locks every shard and
//! *drains* every cache, so it sees exactly the state of a pool without
//! caches; memory in a cache never makes the pool grow. A cache given up by
//! its thread is dropped by the next drain. While the history recorder is
//! on, the caches stand aside (events are recorded in order, under a lock).

mod lists;

use super::engine::{round_size, CacheStats, Core, Loan};
use super::roundup::RoundupDivisions;
use super::Pool;
use super::{MIN_BLOCK_SIZE, STAT_ALL};
use crate::base::fence;
use crate::base::sync::statics::{AtomicBool, AtomicU32, AtomicU64};
use crate::base::sync::Ordering;
use lists::{HandedOut, Parked, PARKED_MIXED};
use parking_lot::Mutex;
use std::cell::{Cell, RefCell, UnsafeCell};
use std::sync::Arc;

/// Requests the shard serves for a cache after which the cache judges
/// whether it serves: it must have unparked a block for one in four.
const JUDGE_AFTER: u32 = 256;
/// Requests a cache that did not serve stays empty and out of the way for:
/// its requests and frees go straight to the shard, with none of its
/// bookkeeping (the working set is larger or more varied than it holds).
const BYPASS_FOR: u32 = 4096;

/// Caches one thread keeps; the least recently made one is given up.
pub(crate) const CACHES_PER_THREAD: usize = 8;

/// A pool's caches, for its slow paths to drain.
pub(crate) struct Registry {
    /// Unique for the life of the process (a pool's address is not: pools
    /// move and are made again at the same place).
    pub(crate) id: u64,
    slots: Mutex<Vec<Arc<Slot>>>,
}

/// One thread's cache of one (pool, stream).
#[repr(align(128))]
pub(crate) struct Slot {
    pool: u64,
    stream: usize,
    /// The shard of `stream`: the one whose blocks this cache keeps.
    pub(crate) shard: usize,
    divisions: RoundupDivisions,
    /// `divisions` round every size to 512 bytes only.
    plain_rounding: bool,
    /// The owner's fast path is in `state`.
    busy: AtomicBool,
    /// A slow path is in `state`, or waits for the owner to leave it.
    stop: AtomicBool,
    /// The pool dropped this cache (its stream ended, or the pool closed).
    dead: AtomicBool,
    /// The owning thread gave it up (exited, or made newer caches).
    orphaned: AtomicBool,
    /// Requests the cache stays empty for (see [`BYPASS_FOR`]); written by
    /// the owner alone, read by its fast paths without entering.
    bypass: AtomicU32,
    state: UnsafeCell<State>,
}

// SAFETY: `state` is reached by the owner's fast path (`SlotGuard`) or by a
// slow path that excluded it (`Slot::state_mut`), never by both.
unsafe impl Sync for Slot {}
// SAFETY: a `Slot` holds no thread-bound state; moving it moves `state`,
// which the same owner/slow-path rule then guards.
unsafe impl Send for Slot {}

pub(crate) struct State {
    parked: Parked,
    handed_out: HandedOut,
    stats: CacheStats,
    /// The ordering generation (`crate::registry::order`) of the latest
    /// park: no parked block was freed later. One word per cache, not per
    /// block, keeps the parked blocks' records as small as they were.
    last_park: u64,
    /// The newest handed-out block was unparked with its statistics not yet
    /// counted: parked back next, it counts as a pair (`CacheStats::pairs`),
    /// two stores or three instead of twelve or more; anything else counts
    /// it first ([`State::settle`]).
    pending: bool,
    /// (address, bytes): the headroom covers handing out the parked block
    /// at that address again for a request of up to that many bytes, as
    /// checked last. Only an unpark lowers a cache's headroom on its own
    /// (when counted: `settle`), a pair leaves it as it was, and a slow
    /// path may take it back (`state_mut`): each clears this. (0, 0): none.
    room_for: (usize, usize),
    /// Requests the shard served for this cache, and unparks, since it
    /// last judged whether it serves.
    requests: u32,
    hits: u32,
}

/// The owner's fast path is in the cache (`busy` set); dropping it leaves.
struct SlotGuard<'a>(&'a Slot);

impl Drop for SlotGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.busy.store(false, Ordering::Release);
    }
}

impl std::ops::Deref for SlotGuard<'_> {
    type Target = State;
    #[inline]
    fn deref(&self) -> &State {
        // SAFETY: `busy` is set and `stop` was clear after it (see `enter`).
        unsafe { &*self.0.state.get() }
    }
}

impl std::ops::DerefMut for SlotGuard<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut State {
        // SAFETY: as in `deref`; the owner thread holds one guard at a time.
        unsafe { &mut *self.0.state.get() }
    }
}

impl Slot {
    /// The pool's `round_size`, inlined for the usual configuration.
    #[inline]
    fn round(&self, size: usize) -> Option<usize> {
        if self.plain_rounding {
            // `round_size` without `roundup_power2_divisions`.
            size.max(1)
                .checked_next_multiple_of(MIN_BLOCK_SIZE)
                .filter(|&r| r <= isize::MAX as usize)
        } else {
            round_size(size, &self.divisions)
        }
    }

    /// The owner's fast path: the cache, unless a slow path is in it or about to
    /// be. A plain store of `busy`, a compiler barrier and a load of `stop`,
    /// against the slow path's `stop`, `membarrier`, `busy` ([`crate::base::fence`]).
    #[inline]
    fn enter(&self) -> Option<SlotGuard<'_>> {
        self.busy.store(true, Ordering::Relaxed);
        fence::light();
        if self.stop.load(Ordering::Acquire) {
            self.busy.store(false, Ordering::Release);
            return None;
        }
        Some(SlotGuard(self))
    }

    /// The state, for a slow path holding the slot's shard lock that has
    /// stopped the owner or runs on the owner's thread outside its fast path.
    ///
    /// # Safety
    /// As above: no one else reaches the state while the result lives.
    #[allow(clippy::mut_from_ref)]
    unsafe fn state_mut(&self) -> &mut State {
        // SAFETY: the caller's contract.
        let st = unsafe { &mut *self.state.get() };
        // Slow paths read and move the statistics: counted in full first.
        st.settle();
        st.room_for = (0, 0);
        st
    }
}

/// Keeps the owners of `slots` out of their fast paths: sets every `stop`,
/// one heavy barrier, then waits for each owner to leave. Callers hold every
/// slot's shard lock and call [`resume_owners`] when done.
fn stop_owners<'a>(slots: impl Iterator<Item = &'a Arc<Slot>> + Clone) {
    for slot in slots.clone() {
        slot.stop.store(true, Ordering::Relaxed);
    }
    fence::heavy();
    for slot in slots {
        let mut spins = 0u32;
        while slot.busy.load(Ordering::Acquire) {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

fn resume_owners<'a>(slots: impl Iterator<Item = &'a Arc<Slot>>) {
    for slot in slots {
        slot.stop.store(false, Ordering::Release);
    }
}

impl State {
    /// Counts the statistics of the pending unpark, if any (see `pending`).
    /// Its room was checked when it was unparked, and nothing changed the
    /// statistics since.
    #[inline]
    fn settle(&mut self) {
        if !std::mem::take(&mut self.pending) {
            return;
        }
        self.room_for = (0, 0);
        let loan = self.handed_out.newest();
        let (bytes, req) = (loan.size as i64, loan.size_key as i64);
        let s = &mut self.stats;
        for i in [STAT_ALL, loan.kind as usize] {
            s.allocation[i].increase(1);
            s.allocated_bytes[i].increase(bytes);
            s.requested_bytes[i].increase(req);
            if loan.split {
                s.inactive_split[i].decrease(1);
                s.inactive_split_bytes[i].decrease(bytes);
            }
        }
    }

    /// Parks back the block of the pending unpark (newest handed out, at
    /// `at`): `current` and the headroom are as before the unpark, so only
    /// the totals change, and only the pair's count.
    #[inline]
    fn park_pair(&mut self, at: usize, slot: &Slot) -> bool {
        let loan = self.handed_out.get(at);
        let key = slot.round(loan.size_key).unwrap_or(loan.size);
        // Its size key was parked just before: most often the room is its.
        if !self.parked.has_room_for(key) {
            return false;
        }
        self.pending = false;
        let (bytes, k) = (loan.size as i64, loan.kind as usize);
        let p = &mut self.stats.pairs;
        p.count[k] += 1;
        p.bytes[k] += bytes;
        p.requested[k] += loan.size_key as i64;
        if loan.split {
            p.split_count[k] += 1;
            p.split_bytes[k] += bytes;
        }
        self.handed_out.swap_remove(at);
        self.parked.push(Loan {
            size_key: key,
            ..loan
        });
        self.last_park = crate::registry::order::generation();
        true
    }

    /// Counts a request the shard serves for this cache (`slot`'s, whose
    /// shard `core` is, locked). False: the cache stands aside for it,
    /// because it stands aside already or because it unparked too few of
    /// the last [`JUDGE_AFTER`] requests; then it gives everything back.
    fn judge(&mut self, slot: &Slot, core: &mut Core) -> bool {
        let bypass = slot.bypass.load(Ordering::Relaxed);
        if bypass != 0 {
            slot.bypass.store(bypass - 1, Ordering::Relaxed);
            return false;
        }
        self.requests += 1;
        if self.requests < JUDGE_AFTER {
            return true;
        }
        let serves = self.hits >= self.requests / 4;
        self.requests = 0;
        self.hits = 0;
        if serves {
            return true;
        }
        self.drain_into(core);
        slot.bypass.store(BYPASS_FOR, Ordering::Relaxed);
        false
    }

    /// Gives every block and the statistics back to `core` (the slot's shard, locked).
    fn drain_into(&mut self, core: &mut Core) {
        for loan in self.handed_out.drain() {
            core.take_back_handed_out(loan, &mut self.stats);
        }
        for loan in self.parked.drain() {
            core.take_back_parked(loan, &mut self.stats, self.last_park);
        }
        core.absorb(&mut self.stats);
    }

    /// Gives `core` (the slot's shard, locked) the parked blocks of statistics
    /// index `kind`, so they can merge; the rest stay.
    fn drain_parked_of(&mut self, core: &mut Core, kind: u8) -> bool {
        let before = self.parked.len();
        let stats = &mut self.stats;
        let last_park = self.last_park;
        self.parked.take_if(
            |l| l.kind == kind,
            |loan| core.take_back_parked(loan, stats, last_park),
        );
        self.parked.len() != before
    }

    /// Gives `core` (the slot's shard, locked) the parked blocks when more
    /// than a few of one size leave no room for a block of size key `key`:
    /// the working set moved on (the next layer's shapes), and they would
    /// otherwise keep it out of the cache while their size is not asked for.
    fn make_room_for(&mut self, core: &mut Core, key: usize) {
        if self.parked.len() > PARKED_MIXED && self.parked.newest_of(key).is_none() {
            for loan in self.parked.drain() {
                core.take_back_parked(loan, &mut self.stats, self.last_park);
            }
        }
    }

    /// The headroom the cache keeps: enough to unpark every parked block and
    /// park every handed-out one.
    fn headroom_kept(&self) -> [[i64; 3]; 5] {
        let mut keep = [[0; 3]; 5];
        for l in self.parked.iter() {
            for i in [STAT_ALL, l.kind as usize] {
                keep[0][i] += 1;
                keep[1][i] += l.size as i64;
                keep[2][i] += l.size_key as i64;
            }
        }
        for l in self.handed_out.iter().filter(|l| l.split) {
            for i in [STAT_ALL, l.kind as usize] {
                keep[3][i] += 1;
                keep[4][i] += l.size as i64;
            }
        }
        keep
    }

    /// Parks handed-out block `at` if the cache has the room and the
    /// headroom for what parking raises.
    #[inline]
    fn park(&mut self, at: usize, slot: &Slot) -> bool {
        if self.pending && at + 1 == self.handed_out.len() {
            return self.park_pair(at, slot);
        }
        self.settle();
        let loan = self.handed_out.get(at);
        let size = loan.size as i64;
        let s = &mut self.stats;
        let k = loan.kind as usize;
        let key = slot.round(loan.size_key).unwrap_or(loan.size);
        if !self.parked.has_room_for(key)
            || (loan.split
                && !(s.inactive_split[STAT_ALL].room(1)
                    && s.inactive_split[k].room(1)
                    && s.inactive_split_bytes[STAT_ALL].room(size)
                    && s.inactive_split_bytes[k].room(size)))
        {
            return false;
        }
        let req = loan.size_key as i64;
        for i in [STAT_ALL, k] {
            s.allocation[i].decrease(1);
            s.allocated_bytes[i].decrease(size);
            s.requested_bytes[i].decrease(req);
            if loan.split {
                s.inactive_split[i].increase(1);
                s.inactive_split_bytes[i].increase(size);
            }
        }
        self.handed_out.swap_remove(at);
        self.parked.push(Loan {
            size_key: key,
            ..loan
        });
        self.last_park = crate::registry::order::generation();
        true
    }

    /// The newest parked block for a request rounded to `rounded` bytes.
    #[inline]
    fn parked_for(&self, rounded: usize) -> Option<Loan> {
        self.parked.newest_of(rounded).map(|at| self.parked.get(at))
    }

    /// Hands out the newest parked block for a request of `size` bytes
    /// (`rounded`), if there is one and the headroom for it.
    #[inline]
    fn unpark(&mut self, size: usize, rounded: usize) -> Option<usize> {
        self.settle();
        let at = self.parked.newest_of(rounded)?;
        let loan = self.parked.get(at);
        if !self.handed_out.admits(loan.size) {
            return None;
        }
        let (known, up_to) = self.room_for;
        if known != loan.addr || size > up_to {
            let (bytes, req) = (loan.size as i64, size as i64);
            let s = &self.stats;
            let k = loan.kind as usize;
            let room = [STAT_ALL, k].iter().all(|&i| {
                s.allocation[i].room(1)
                    && s.allocated_bytes[i].room(bytes)
                    && s.requested_bytes[i].room(req)
            });
            if !room {
                return None;
            }
            self.room_for = (loan.addr, size);
        }
        // Counted when parked back (a pair) or by `settle`.
        self.pending = true;
        self.hits = self.hits.wrapping_add(1);
        self.parked.take(at);
        self.handed_out.push(Loan {
            size_key: size,
            ..loan
        });
        Some(loan.addr)
    }
}

/// This thread's caches, newest last, and the one it used last.
struct ThreadCaches {
    slots: RefCell<Vec<Arc<Slot>>>,
    /// Null, or one of `slots` (which keeps it alive): every change to `slots` clears it first.
    last: Cell<*const Slot>,
}

impl ThreadCaches {
    /// The cache used last, if it is of pool `pool` (and `stream`, if given).
    #[inline]
    fn last(&self, pool: u64, stream: Option<usize>) -> Option<&Slot> {
        // SAFETY: `last` is null or a slot that `slots` holds (see above).
        unsafe { self.last.get().as_ref() }.filter(|s| {
            s.pool == pool
                && match stream {
                    Some(st) => s.stream == st,
                    None => true,
                }
        })
    }
}

impl Drop for ThreadCaches {
    fn drop(&mut self) {
        self.last.set(std::ptr::null());
        for slot in self.slots.get_mut().drain(..) {
            slot.orphaned.store(true, Ordering::Release);
        }
    }
}

thread_local! {
    static CACHES: ThreadCaches = const {
        ThreadCaches {
            slots: RefCell::new(Vec::new()),
            last: Cell::new(std::ptr::null()),
        }
    };
}

static NEXT_POOL_ID: AtomicU64 = AtomicU64::new(1);

/// What the fast free found.
pub(crate) enum FastFree {
    /// Parked.
    Done,
    /// Not a block this thread's caches handed out.
    Miss,
    /// Handed out by this thread's cache of `shard`, but it cannot park it
    /// now: the slow path takes it back and frees it in the shard.
    Slow { shard: usize },
}

impl Registry {
    pub(crate) fn new() -> Self {
        fence::init();
        Registry {
            id: NEXT_POOL_ID.fetch_add(1, Ordering::Relaxed),
            slots: Mutex::new(Vec::new()),
        }
    }
}

/// This thread's cache of (`pool`, `stream`), if it has one.
#[inline]
fn find(caches: &[Arc<Slot>], pool: u64, stream: usize) -> Option<&Arc<Slot>> {
    caches
        .iter()
        .rev()
        .find(|s| s.pool == pool && s.stream == stream)
}

impl Pool {
    /// The fast path of [`Pool::malloc_on`]: a block parked in this thread's cache of the stream.
    #[inline]
    pub(super) fn cache_malloc(&self, stream: usize, size: usize) -> Option<usize> {
        CACHES
            .try_with(|c| {
                let slot = match c.last(self.caches.id, Some(stream)) {
                    Some(slot) => slot,
                    None => {
                        let caches = c.slots.try_borrow().ok()?;
                        let found = Arc::as_ptr(find(&caches, self.caches.id, stream)?);
                        c.last.set(found);
                        // SAFETY: held by `slots`, which nothing changes
                        // until this call returns.
                        unsafe { &*found }
                    }
                };
                if slot.bypass.load(Ordering::Relaxed) != 0 {
                    return None;
                }
                let rounded = slot.round(size)?;
                let mut g = slot.enter()?;
                if g.parked.is_empty() || self.history.is_on() {
                    return None;
                }
                g.unpark(size, rounded)
            })
            .ok()
            .flatten()
    }

    /// The fast path of [`Pool::free`]: parks `addr` if one of this
    /// thread's caches handed it out (with `stream`, only the cache of that
    /// stream).
    #[inline]
    pub(super) fn cache_free(&self, addr: usize, stream: Option<usize>) -> FastFree {
        // `None`: not a block `slot` handed out.
        let try_slot = |slot: &Slot| -> Option<FastFree> {
            // Empty while it stands aside.
            if slot.bypass.load(Ordering::Relaxed) != 0 {
                return None;
            }
            let Some(mut g) = slot.enter() else {
                // A slow path is in it: it may hold this block.
                return Some(FastFree::Slow { shard: slot.shard });
            };
            let at = g.handed_out.position(addr)?;
            if !self.history.is_on() && g.park(at, slot) {
                return Some(FastFree::Done);
            }
            Some(FastFree::Slow { shard: slot.shard })
        };
        CACHES
            .try_with(|c| {
                let last = c.last(self.caches.id, stream);
                if let Some(found) = last.and_then(try_slot) {
                    return found;
                }
                let Ok(caches) = c.slots.try_borrow() else {
                    return FastFree::Miss;
                };
                let last = last.map_or(std::ptr::null(), |s| s as *const Slot);
                caches
                    .iter()
                    .rev()
                    .filter(|s| {
                        s.pool == self.caches.id
                            && stream.map_or(true, |st| s.stream == st)
                            && !std::ptr::eq(Arc::as_ptr(s), last)
                    })
                    .find_map(|s| try_slot(s))
                    .unwrap_or(FastFree::Miss)
            })
            .unwrap_or(FastFree::Miss)
    }

    /// Under shard `shard`'s lock, right after `core` handed out `addr` for
    /// `stream`: lends it to this thread's cache of the stream (made on first
    /// use), so its free and the next request of its size skip the lock.
    pub(super) fn lend_to_cache(&self, core: &mut Core, shard: usize, stream: usize, addr: usize) {
        if core.closed || self.history.is_on() {
            return;
        }
        let _ = CACHES.try_with(|c| {
            let Ok(mut caches) = c.slots.try_borrow_mut() else {
                return;
            };
            let id = self.caches.id;
            // An index, not a clone of the `Arc`: no locked instruction per lend.
            let at = match caches.iter().rposition(|s| {
                s.pool == id && s.stream == stream && !s.dead.load(Ordering::Relaxed)
            }) {
                Some(at) => at,
                None => {
                    // `slots` changes: dropped caches go, a new one comes.
                    c.last.set(std::ptr::null());
                    caches.retain(|s| !s.dead.load(Ordering::Relaxed));
                    let slot = Arc::new(Slot {
                        pool: self.caches.id,
                        stream,
                        shard,
                        divisions: core.config.roundup_power2_divisions,
                        plain_rounding: core.config.roundup_power2_divisions
                            == RoundupDivisions::default(),
                        busy: AtomicBool::new(false),
                        stop: AtomicBool::new(false),
                        dead: AtomicBool::new(false),
                        orphaned: AtomicBool::new(false),
                        bypass: AtomicU32::new(0),
                        state: UnsafeCell::new(State {
                            parked: Parked::new(),
                            handed_out: HandedOut::new(),
                            stats: CacheStats::default(),
                            last_park: 0,
                            pending: false,
                            room_for: (0, 0),
                            requests: 0,
                            hits: 0,
                        }),
                    });
                    if caches.len() >= CACHES_PER_THREAD {
                        let old = caches.remove(0);
                        old.orphaned.store(true, Ordering::Release);
                    }
                    self.caches.slots.lock().push(slot.clone());
                    caches.push(slot);
                    caches.len() - 1
                }
            };
            let slot = &caches[at];
            // SAFETY: this thread owns the slot and is not in its fast path;
            // the shard's lock keeps every slow path out.
            let st = unsafe { slot.state_mut() };
            if !st.judge(slot, core) {
                return;
            }
            // Full of blocks of several sizes: no look-up of a block it refuses.
            if !st.handed_out.admits_some() {
                return;
            }
            // Past the mixed cap only blocks of the size all others have.
            let State {
                handed_out, stats, ..
            } = st;
            let admit = |size| {
                handed_out
                    .admits(size)
                    .then(|| handed_out.all_of_size(size))
            };
            if let Some(loan) = core.lend(addr, stats, admit) {
                handed_out.push(loan);
            }
        });
    }

    /// Under shard `shard`'s lock, before the shard serves a request of
    /// `size` bytes on `stream` that this thread's cache missed: a block
    /// parked there for it that only lacked headroom, given the headroom from
    /// the shard and handed out (it stays lent).
    pub(super) fn unpark_with_headroom(
        &self,
        core: &mut Core,
        stream: usize,
        size: usize,
    ) -> Option<usize> {
        if self.history.is_on() {
            return None;
        }
        CACHES
            .try_with(|c| {
                let caches = c.slots.try_borrow().ok()?;
                let slot = find(&caches, self.caches.id, stream)?;
                if slot.dead.load(Ordering::Relaxed) || slot.bypass.load(Ordering::Relaxed) != 0 {
                    return None;
                }
                let rounded = slot.round(size)?;
                // SAFETY: this thread owns the slot and is not in its fast
                // path; the shard's lock keeps every slow path out.
                let st = unsafe { slot.state_mut() };
                st.make_room_for(core, rounded);
                let loan = st.parked_for(rounded)?;
                if !st.handed_out.admits(loan.size)
                    || !core.top_up(&mut st.stats, loan.kind as usize, loan.size, size)
                {
                    return None;
                }
                st.unpark(size, rounded)
            })
            .ok()
            .flatten()
    }

    /// Under shard `shard`'s lock, when it cannot serve a request alone:
    /// gives it what this thread's caches of the shard hold, so the request
    /// does not take the pool-wide path: their headroom beyond what their
    /// blocks may need, then all of it (a parked block then takes headroom
    /// back through [`Pool::unpark_with_headroom`]), then their blocks too
    /// (so they can merge). True if any came back.
    pub(super) fn reclaim_from_own_caches(
        &self,
        core: &mut Core,
        shard: usize,
        level: Reclaim,
    ) -> bool {
        CACHES
            .try_with(|c| {
                let Ok(caches) = c.slots.try_borrow() else {
                    return false;
                };
                let mut any = false;
                for slot in caches.iter().filter(|s| {
                    s.pool == self.caches.id && s.shard == shard && !s.dead.load(Ordering::Relaxed)
                }) {
                    // SAFETY: this thread owns the slot and is not in its fast
                    // path; the shard's lock keeps every slow path out.
                    let st = unsafe { slot.state_mut() };
                    match level {
                        Reclaim::Spare => {
                            let keep = st.headroom_kept();
                            any |= core.reclaim_headroom(&mut st.stats, &keep);
                        }
                        Reclaim::Headroom => {
                            // What unparking needs comes back through
                            // `unpark_with_headroom`; parking's stays.
                            let mut keep = st.headroom_kept();
                            keep[..3].fill([0; 3]);
                            any |= core.reclaim_headroom(&mut st.stats, &keep);
                        }
                        Reclaim::AllHeadroom => {
                            any |= core.reclaim_headroom(&mut st.stats, &[[0; 3]; 5]);
                        }
                        Reclaim::Parked(kind) => {
                            any |= st.drain_parked_of(core, kind);
                        }
                        Reclaim::Blocks => {
                            any |= !(st.parked.is_empty() && st.handed_out.is_empty());
                            st.drain_into(core);
                        }
                    }
                }
                any
            })
            .unwrap_or(false)
    }

    /// Frees `addr`, lent to a cache of shard `shard`, in the shard; the
    /// shard's answer when no cache has it handed out (taken back by a
    /// drain meanwhile, or parked: `Lent`).
    pub(super) fn free_lent(&self, shard: usize, addr: usize) -> super::engine::Freed {
        let mut core = self.shards[shard].0.lock();
        // Most often this thread's own cache, whose owner need not be stopped.
        let own = CACHES.try_with(|c| {
            let caches = c.slots.try_borrow().ok()?;
            caches
                .iter()
                .filter(|s| s.pool == self.caches.id && s.shard == shard)
                .find_map(|slot| {
                    // SAFETY: this thread owns the slot and is not in its
                    // fast path; the shard's lock keeps every slow path out.
                    let st = unsafe { slot.state_mut() };
                    let at = st.handed_out.position(addr)?;
                    let loan = st.handed_out.get(at);
                    let key = slot.round(loan.size_key).unwrap_or(loan.size);
                    st.make_room_for(&mut core, key);
                    // It could not park for lack of headroom: the shard may have it.
                    if !self.history.is_on()
                        && (!loan.split
                            || core.top_up_split(&mut st.stats, loan.kind as usize, loan.size))
                        && st.park(at, slot)
                    {
                        return Some(super::engine::Freed::Done);
                    }
                    let loan = st.handed_out.swap_remove(at);
                    core.take_back_handed_out(loan, &mut st.stats);
                    Some(core.free(addr, true))
                })
        });
        if let Ok(Some(freed)) = own {
            return freed;
        }
        let slots = self.caches.slots.lock();
        let mine = slots.iter().filter(|s| s.shard == shard);
        stop_owners(mine.clone());
        let mut found = None;
        for slot in mine.clone() {
            // SAFETY: its owner is stopped and this shard's lock is held.
            let st = unsafe { slot.state_mut() };
            if let Some(at) = st.handed_out.position(addr) {
                let loan = st.handed_out.swap_remove(at);
                core.take_back_handed_out(loan, &mut st.stats);
                found = Some(core.free(addr, true));
                break;
            }
        }
        resume_owners(mine);
        // In no cache: a drain took the loan back after the shard answered
        // `Lent`, so it is a plain block of the shard now (still `Lent`:
        // parked, a double free).
        found.unwrap_or_else(|| core.free(addr, true))
    }

    /// The stream of block `addr` of shard `shard` if a thread's cache
    /// holds it handed out (`None`: parked, or in no cache). The shard's lock
    /// is not held: the owners are stopped while their caches are read.
    pub(super) fn lent_stream(&self, shard: usize, addr: usize) -> Option<usize> {
        let _core = self.shards[shard].0.lock();
        let slots = self.caches.slots.lock();
        let mine = slots.iter().filter(|s| s.shard == shard);
        stop_owners(mine.clone());
        let found = mine.clone().find_map(|slot| {
            // SAFETY: its owner is stopped and this shard's lock is held.
            let st = unsafe { slot.state_mut() };
            st.handed_out.position(addr).map(|_| slot.stream)
        });
        resume_owners(mine);
        found
    }

    /// Drains every cache into its shard (all of them locked) and drops
    /// the caches no thread uses any more, and those `retire` names.
    pub(super) fn drain_caches(
        &self,
        shards: &mut [crate::base::biased::BiasedGuard<'_, Core>],
        retire: Retire,
    ) {
        let mut slots = self.caches.slots.lock();
        if slots.is_empty() {
            return;
        }
        stop_owners(slots.iter());
        for slot in slots.iter() {
            // SAFETY: its owner is stopped and every shard's lock is held.
            unsafe { slot.state_mut() }.drain_into(&mut shards[slot.shard]);
        }
        resume_owners(slots.iter());
        slots.retain(|slot| {
            let gone = match retire {
                Retire::None => false,
                Retire::Stream(s) => slot.stream == s,
                Retire::All => true,
            };
            if gone {
                slot.dead.store(true, Ordering::Relaxed);
            }
            !gone && !slot.orphaned.load(Ordering::Acquire)
        });
    }
}

/// How much [`Pool::reclaim_from_own_caches`] takes back.
#[derive(Clone, Copy)]
pub(crate) enum Reclaim {
    /// Headroom the cache's blocks cannot need.
    Spare,
    /// All headroom but what parking needs.
    Headroom,
    /// All headroom (parking takes back what it needs through
    /// `Core::top_up_split`).
    AllHeadroom,
    /// Parked blocks of one statistics index (small or large pool).
    Parked(u8),
    /// Headroom and blocks.
    Blocks,
}

/// Which caches a drain also drops for good.
#[derive(Clone, Copy)]
pub(crate) enum Retire {
    None,
    /// Those of a destroyed stream.
    Stream(usize),
    /// All (the pool closes).
    All,
}

#[cfg(test)]
mod tests {
    use super::{BYPASS_FOR, JUDGE_AFTER};
    use crate::base::sync::Ordering;
    use crate::{HostMemory, Pool, PoolConfig, STAT_ALL};

    fn pool() -> Pool {
        Pool::new(PoolConfig::default(), HostMemory::new(1 << 30)).unwrap()
    }

    #[test]
    fn a_pair_is_served_by_the_cache_and_counted_exactly() {
        let pool = pool();
        let a = pool.malloc_on(7, 4000).unwrap().get();
        pool.free(a).unwrap();
        let b = pool.malloc_on(7, 4000).unwrap().get();
        // Parked by the free, handed out again without the shard.
        assert_eq!(a, b);
        let parked = pool.caches.slots.lock()[0].clone();
        // SAFETY: single thread, not in a fast path; read only.
        assert_eq!(unsafe { parked.state_mut() }.handed_out.len(), 1);
        pool.free(b).unwrap();
        // Drains the thread caches.
        let s = pool.stats();
        // SAFETY: single thread, not in a fast path; read only (as above).
        assert_eq!(unsafe { parked.state_mut() }.parked.len(), 0);
        assert_eq!(s.allocation[STAT_ALL].current, 0);
        assert_eq!(s.allocation[STAT_ALL].allocated, 2);
        assert_eq!(s.allocation[STAT_ALL].freed, 2);
        assert_eq!(s.allocation[STAT_ALL].peak, 1);
        assert_eq!(s.requested_bytes[STAT_ALL].allocated, 8000);
        // The freed block and the rest of its segment, unmerged (binned).
        assert_eq!(s.inactive_split[STAT_ALL].current, 2);
        assert!(pool.free(b).is_err(), "a double free after a drain");
        pool.check_invariants().unwrap();
    }

    #[test]
    fn pairs_and_a_pending_unpark_count_as_a_pool_without_caches() {
        // With the recorder on, the caches stand aside: the reference.
        let (cached, plain) = (pool(), pool());
        plain.record_history(1 << 16).unwrap();
        let both = |f: &dyn Fn(&Pool)| {
            f(&cached);
            f(&plain);
        };
        let same = |at: &str| assert_eq!(cached.stats(), plain.stats(), "{at}");
        // Split small blocks and an unsplit large one.
        for size in [4000, 3000, 12 << 20] {
            both(&|p| {
                for _ in 0..20 {
                    let a = p.malloc_on(7, size).unwrap().get();
                    p.free(a).unwrap();
                }
            });
            same("after pairs");
            // A pending unpark read by the statistics, then freed.
            both(&|p| {
                let a = p.malloc_on(7, size).unwrap().get();
                p.free(a).unwrap();
                let b = p.malloc_on(7, size).unwrap().get();
                assert_eq!(p.stats().allocation[STAT_ALL].current, 1);
                p.free(b).unwrap();
            });
            same("after a read while pending");
            // A pending unpark followed by another request and frees out of order.
            both(&|p| {
                let a = p.malloc_on(7, size).unwrap().get();
                let b = p.malloc_on(7, size + 512).unwrap().get();
                p.free(a).unwrap();
                let c = p.malloc_on(7, size).unwrap().get();
                p.free(b).unwrap();
                p.free(c).unwrap();
            });
            same("after interleaved requests");
        }
        cached.check_invariants().unwrap();
    }

    #[test]
    fn a_random_mix_of_pairs_and_live_blocks_counts_as_a_pool_without_caches() {
        let (cached, plain) = (pool(), pool());
        plain.record_history(1 << 16).unwrap();
        let sizes = [512, 4000, 4096, 40_000, 700_000, 3 << 20, 12 << 20];
        let (mut live_c, mut live_p) = (Vec::new(), Vec::new());
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for step in 0..4000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let r = (x >> 33) as usize;
            let size = sizes[r % sizes.len()] - (r / 7) % 3 * 100;
            match (r >> 8) % 4 {
                // A pair, most often of the size just freed.
                0 | 1 => {
                    for p in [&cached, &plain] {
                        let a = p.malloc_on(7, size).unwrap().get();
                        p.free(a).unwrap();
                    }
                }
                2 if live_c.len() < 40 => {
                    live_c.push(cached.malloc_on(7, size).unwrap().get());
                    live_p.push(plain.malloc_on(7, size).unwrap().get());
                }
                _ if !live_c.is_empty() => {
                    let at = r % live_c.len();
                    cached.free(live_c.swap_remove(at)).unwrap();
                    plain.free(live_p.swap_remove(at)).unwrap();
                }
                _ => {}
            }
            if step % 97 == 0 {
                // Parked blocks do not merge: `inactive_split` may differ.
                let (c, p) = (cached.stats(), plain.stats());
                assert_eq!(c.allocation, p.allocation, "step {step}");
                assert_eq!(c.allocated_bytes, p.allocated_bytes, "step {step}");
                assert_eq!(c.requested_bytes, p.requested_bytes, "step {step}");
                cached.check_invariants().unwrap();
            }
            if step % 1000 == 999 {
                cached.reset_peak_stats();
                plain.reset_peak_stats();
            }
        }
        cached.check_invariants().unwrap();
    }

    #[test]
    fn headroom_taken_back_from_a_cache_is_checked_again_at_the_next_unpark() {
        let pool = pool();
        // A peak of bytes the shard keeps as headroom; the count's goes to the cache.
        let x = pool.malloc_on(7, 400_000).unwrap().get();
        pool.free(x).unwrap();
        let a = pool.malloc_on(7, 4000).unwrap().get();
        pool.free(a).unwrap();
        // Pairs: the cache knows its headroom covers this block.
        for _ in 0..3 {
            let b = pool.malloc_on(7, 4000).unwrap().get();
            assert_eq!(b, a);
            pool.free(b).unwrap();
        }
        // Served by the shard, with the headroom the cache kept for the parked block.
        let other = pool.malloc_on(7, 40_000).unwrap().get();
        // Two blocks live: a new peak, which the cache cannot take alone.
        let b = pool.malloc_on(7, 4000).unwrap().get();
        let s = pool.stats();
        assert_eq!(s.allocation[STAT_ALL].current, 2);
        assert_eq!(s.allocation[STAT_ALL].peak, 2);
        assert_eq!(s.allocated_bytes[STAT_ALL].current, 4096 + 40_448);
        pool.free(b).unwrap();
        pool.free(other).unwrap();
        pool.check_invariants().unwrap();
    }

    #[test]
    fn alternating_sizes_stay_parked_with_exact_peaks() {
        let pool = pool();
        let sizes = [4000, 40_000, 400_000];
        for round in 0..4 {
            for &size in &sizes {
                let a = pool.malloc_on(7, size).unwrap().get();
                pool.free(a).unwrap();
            }
            if round == 0 {
                continue;
            }
            let slot = pool.caches.slots.lock()[0].clone();
            // SAFETY: single thread, not in a fast path; read only.
            let st = unsafe { slot.state_mut() };
            // One block per size: no size pushed another out.
            let mut parked: Vec<usize> = st.parked.iter().map(|l| l.size_key).collect();
            parked.sort_unstable();
            assert_eq!(parked, [4096, 40_448, 400_384], "round {round}");
        }
        let s = pool.stats();
        assert_eq!(s.allocation[STAT_ALL].peak, 1);
        assert_eq!(s.allocated_bytes[STAT_ALL].peak, 400_384);
        assert_eq!(s.allocation[STAT_ALL].allocated, 12);
        assert_eq!(s.requested_bytes[STAT_ALL].freed, 4 * 444_000);
        assert_eq!(s.num_device_alloc, 1);
        pool.check_invariants().unwrap();
    }

    #[test]
    fn a_batch_of_one_size_cycles_through_the_cache_with_exact_statistics() {
        let pool = pool();
        // The first batch raises the peaks: the pool-wide path serves it.
        let warm: Vec<usize> = (0..64)
            .map(|_| pool.malloc_on(7, 4000).unwrap().get())
            .collect();
        warm.into_iter().for_each(|b| pool.free(b).unwrap());
        let mut first: Vec<usize> = Vec::new();
        for round in 0..3 {
            let mut blocks: Vec<usize> = (0..64)
                .map(|_| pool.malloc_on(7, 4000).unwrap().get())
                .collect();
            let slot = pool.caches.slots.lock()[0].clone();
            // SAFETY: single thread, not in a fast path; read only.
            let st = unsafe { slot.state_mut() };
            assert_eq!(
                (st.handed_out.len(), st.parked.len()),
                (64, 0),
                "round {round}"
            );
            for i in (0..64).map(|i| (i * 37 + 11) % 64) {
                pool.free(blocks[i]).unwrap();
            }
            // SAFETY: as above.
            let st = unsafe { slot.state_mut() };
            assert_eq!(
                (st.handed_out.len(), st.parked.len()),
                (0, 64),
                "round {round}"
            );
            blocks.sort_unstable();
            if round == 0 {
                first = blocks;
            } else {
                assert_eq!(blocks, first, "the same blocks come back");
            }
        }
        let s = pool.stats();
        assert_eq!(s.allocation[STAT_ALL].peak, 64);
        assert_eq!(s.allocation[STAT_ALL].allocated, 4 * 64);
        assert_eq!(s.allocation[STAT_ALL].current, 0);
        assert_eq!(s.requested_bytes[STAT_ALL].freed, 4 * 64 * 4000);
        assert_eq!(s.allocated_bytes[STAT_ALL].peak, 64 * 4096);
        assert_eq!(s.num_device_alloc, 1);
        pool.check_invariants().unwrap();
    }

    #[test]
    fn the_parked_blocks_follow_a_batch_of_another_size() {
        let pool = pool();
        let batch = |size: usize| {
            let blocks: Vec<usize> = (0..64)
                .map(|_| pool.malloc_on(7, size).unwrap().get())
                .collect();
            blocks.into_iter().for_each(|b| pool.free(b).unwrap());
        };
        // Warm: both sizes, until the peaks are reached and the shard has
        // the headroom to lend.
        for _ in 0..2 {
            batch(4000);
            batch(40_000);
        }
        // Each size twice: the second batch is served by the cache (one
        // that never serves stands aside, see below).
        for (round, (size, key)) in [(4000, 4096), (40_000, 40_448), (4000, 4096)]
            .into_iter()
            .enumerate()
        {
            batch(size);
            batch(size);
            let slot = pool.caches.slots.lock()[0].clone();
            // SAFETY: single thread, not in a fast path; read only.
            let st = unsafe { slot.state_mut() };
            assert_eq!(st.parked.len(), 64, "round {round}");
            assert!(st.parked.iter().all(|l| l.size_key == key), "round {round}");
        }
        let s = pool.stats();
        assert_eq!(s.allocation[STAT_ALL].peak, 64);
        assert_eq!(s.allocation[STAT_ALL].allocated, 10 * 64);
        assert_eq!(s.allocation[STAT_ALL].current, 0);
        assert_eq!(
            s.requested_bytes[STAT_ALL].allocated,
            64 * (6 * 4000 + 4 * 40_000)
        );
        assert_eq!(s.allocated_bytes[STAT_ALL].peak, 64 * 40_448);
        pool.check_invariants().unwrap();
    }

    #[test]
    fn a_cache_that_never_serves_stands_aside_then_tries_again() {
        let pool = pool();
        let sizes = [4000, 40_000];
        let batch = |size: usize| {
            let blocks: Vec<usize> = (0..64)
                .map(|_| pool.malloc_on(7, size).unwrap().get())
                .collect();
            blocks.into_iter().for_each(|b| pool.free(b).unwrap());
        };
        let state = || {
            let slot = pool.caches.slots.lock()[0].clone();
            let bypass = slot.bypass.load(Ordering::Relaxed);
            // SAFETY: single thread, not in a fast path; read only.
            let st = unsafe { slot.state_mut() };
            (bypass, st.parked.len() + st.handed_out.len())
        };
        // Sizes alternate batch by batch: nothing parked is asked for again.
        let batches = (JUDGE_AFTER as usize).div_ceil(64) + 2;
        for i in 0..batches {
            batch(sizes[i % 2]);
        }
        let (bypass, held) = state();
        assert!(
            bypass > 0 && held == 0,
            "stands aside empty: {bypass} {held}"
        );
        // Until it has let BYPASS_FOR requests by, then it lends again: a
        // batch of one size is cached once more.
        for _ in 0..(BYPASS_FOR as usize).div_ceil(64) + 1 {
            batch(sizes[0]);
        }
        let (bypass, held) = state();
        assert_eq!((bypass, held), (0, 64), "serves again");
        let s = pool.stats();
        let n = (batches + (BYPASS_FOR as usize).div_ceil(64) + 1) as i64;
        assert_eq!(s.allocation[STAT_ALL].allocated, 64 * n);
        assert_eq!(s.allocation[STAT_ALL].current, 0);
        assert_eq!(s.allocation[STAT_ALL].peak, 64);
        pool.check_invariants().unwrap();
    }

    #[test]
    fn blocks_of_several_sizes_are_lent_and_parked_up_to_the_mixed_caps() {
        let pool = pool();
        let batch = || -> Vec<usize> {
            (0..40)
                .map(|i| pool.malloc_on(7, [4000, 40_000][i % 2]).unwrap().get())
                .collect()
        };
        // The first batch raises the peaks: the pool-wide path serves it.
        batch().into_iter().for_each(|b| pool.free(b).unwrap());
        let blocks = batch();
        let slot = pool.caches.slots.lock()[0].clone();
        // SAFETY: single thread, not in a fast path; read only.
        assert_eq!(unsafe { slot.state_mut() }.handed_out.len(), 16);
        for &b in &blocks {
            pool.free(b).unwrap();
        }
        // SAFETY: as above.
        assert_eq!(unsafe { slot.state_mut() }.parked.len(), 8);
        let s = pool.stats();
        assert_eq!(s.allocation[STAT_ALL].peak, 40);
        assert_eq!(s.allocation[STAT_ALL].current, 0);
        assert_eq!(s.requested_bytes[STAT_ALL].allocated, 2 * 20 * 44_000);
        pool.check_invariants().unwrap();
    }

    #[test]
    fn a_parked_block_is_a_double_free_and_a_foreign_thread_may_free_a_lent_one() {
        let pool = pool();
        let a = pool.malloc_on(7, 4000).unwrap().get();
        pool.free(a).unwrap(); // parked
        assert_eq!(pool.free(a), Err(crate::base::error::Error::PoolDoubleFree));
        let b = pool.malloc_on(7, 4000).unwrap().get(); // lent to this thread
        std::thread::scope(|s| {
            s.spawn(|| pool.free(b).unwrap());
        });
        assert_eq!(pool.free(b), Err(crate::base::error::Error::PoolDoubleFree));
        assert_eq!(pool.stats().allocation[STAT_ALL].current, 0);
        pool.check_invariants().unwrap();
    }

    #[test]
    fn an_exited_threads_cache_and_a_destroyed_streams_cache_are_given_back() {
        let pool = pool();
        let stream = 0x1000;
        std::thread::scope(|s| {
            // Joined: a scope's end does not wait for thread-local destructors.
            s.spawn(|| {
                let a = pool.malloc_on(stream, 4000).unwrap().get();
                pool.free(a).unwrap();
                let b = pool.malloc_on(stream, 4000).unwrap().get();
                pool.free(b).unwrap(); // parked when the thread exits
            })
            .join()
            .unwrap();
        });
        assert!(pool.caches.slots.lock()[0]
            .orphaned
            .load(crate::base::sync::Ordering::Acquire));
        // The next pool-wide operation takes the block back and drops the
        // cache; the stream's end gives its segment back.
        assert_eq!(pool.forget_stream(stream), 2 << 20);
        assert!(pool.caches.slots.lock().is_empty());
        assert_eq!(pool.memory_reserved(), 0);

        // This thread's cache of a stream that ends.
        let a = pool.malloc_on(stream, 4000).unwrap().get();
        pool.free(a).unwrap();
        let b = pool.malloc_on(stream, 4000).unwrap().get();
        pool.free(b).unwrap(); // parked
        assert_eq!(pool.forget_stream(stream), 2 << 20);
        assert!(pool.caches.slots.lock().is_empty(), "the cache is dropped");
        // A new stream at the same handle starts afresh, with a new cache
        // (the dropped one, still in this thread's list, is not used again).
        let c = pool.malloc_on(stream, 4000).unwrap().get();
        pool.free(c).unwrap();
        let d = pool.malloc_on(stream, 4000).unwrap().get();
        pool.free(d).unwrap();
        let e = pool.malloc_on(stream, 4000).unwrap().get();
        assert_eq!(e, d, "parked in the new cache");
        assert_eq!(pool.caches.slots.lock().len(), 1);
        pool.free(e).unwrap();
        pool.check_invariants().unwrap();
        let s = pool.stats();
        assert_eq!(s.allocation[STAT_ALL].freed, 7);
        assert_eq!(s.allocation[STAT_ALL].current, 0);
    }

    #[test]
    fn with_the_recorder_on_every_event_is_recorded() {
        let pool = pool();
        let a = pool.malloc_on(7, 4000).unwrap().get();
        pool.free(a).unwrap();
        let b = pool.malloc_on(7, 4000).unwrap().get(); // lent
        pool.record_history(100).unwrap();
        pool.free(b).unwrap();
        let c = pool.malloc_on(7, 4000).unwrap().get();
        pool.free(c).unwrap();
        use crate::history::Action::{Alloc, FreeCompleted, FreeRequested};
        let actions: Vec<_> = pool.history().events.iter().map(|e| e.action).collect();
        let free = [FreeRequested, FreeCompleted];
        assert_eq!(actions, [&free[..], &[Alloc], &free[..]].concat());
        pool.check_invariants().unwrap();
    }
}
