//! A mutex biased towards the thread that takes it most: while one thread
//! takes it alone, it enters and leaves with plain stores and no locked
//! instruction; another thread takes the bias away first.
//!
//! An allocator's books ([`crate::base::tracked`]) are locked twice per
//! alloc+free pair, and nearly always by one thread (the one driving its
//! stream). On the machines this library runs on, a locked instruction
//! costs 5 to 9 ns, and a lock and an unlock take one each: four per pair,
//! as much as a tracked or pluggable pair's whole budget above the user's
//! allocator.
//!
//! - **Each thread has a record** (`Record`): the biased mutex it is
//!   inside through the owner's path, written by that thread alone.
//!   Records are recycled when their thread ends, never freed, so a record
//!   a mutex still names stays valid (a new thread given it may inherit the
//!   bias, which is sound: its former thread is gone).
//! - **The owner's path** ([`BiasedMutex::lock`] when this thread's record
//!   holds the bias and names no mutex): store the mutex's address in the
//!   record, take the light side of the asymmetric fence
//!   ([`crate::base::fence`]), read `owner` again; still this record, the
//!   thread is inside. Leaving is a release store clearing the record. A
//!   thread inside one biased mutex takes any other (books nested in a
//!   user's callback) through the inner mutex.
//! - **Everyone else** takes the inner mutex, which excludes them from one
//!   another, then *revokes* the bias: clears `owner`, takes the heavy
//!   side (`membarrier`: about 0.2 µs alone, 16 µs with another thread
//!   running, on a 2-vCPU guest), and waits until the former owner's
//!   record no longer names this mutex. A Dekker pair: the owner either
//!   sees `owner` changed and takes the inner mutex instead, or is seen
//!   inside and waited for; its writes are seen through the release store
//!   that clears its record. A thread only ever stores to its own record,
//!   so a stale owner's late store harms no one (a flag shared by all
//!   owners would let it clear a newer owner's), and a mutex waits only for
//!   its own holder, so nesting two books cannot deadlock where two plain
//!   mutexes would not.
//! - **The bias is granted** at the unlock of an inner-mutex holder that
//!   took it [`BIAS_AFTER`] times in a row, doubled for every revocation so
//!   far (up to 2^[`MAX_DOUBLINGS`] times): threads taking turns pay a
//!   revocation per doubling, not per turn.
//!
//! Only mutexes made with [`BiasedMutex::new_biased`] grant the bias; the
//! others are the inner mutex plus one relaxed load per lock. Under `--cfg
//! loom` no bias is granted: the models check the mutex paths, and loom has
//! no asymmetric fence. A thread inside through the owner's path at a
//! `fork` never leaves it in the child, as a thread holding a plain mutex
//! never unlocks it there: the child then waits on that mutex.

// Under loom no bias is granted, so the threads' records go unused.
#![cfg_attr(loom, allow(dead_code))]

use super::fence;
use super::sync::statics::AtomicUsize as StaticUsize;
use super::sync::{wait_out, AtomicUsize, Mutex, MutexGuard, Ordering};
use std::cell::{Cell, UnsafeCell};
use std::ops::{Deref, DerefMut};

/// Lock-taking in a row by one thread after which it is granted the bias.
pub const BIAS_AFTER: u32 = 8;
/// Revocations after which the run a grant needs stops doubling.
pub const MAX_DOUBLINGS: u32 = 10;

/// The biased mutex one thread is inside through the owner's path (its
/// address; 0: none). Only its thread stores to it.
#[repr(align(128))]
struct Record {
    inside: StaticUsize,
}

impl Record {
    /// True if this record's thread is inside the mutex at `addr`.
    fn is_inside(&self, addr: usize, order: Ordering) -> bool {
        self.inside.load(order) == addr
    }
}

/// Records of ended threads, for the next new thread.
static FREE: parking_lot::Mutex<Vec<&'static Record>> = parking_lot::Mutex::new(Vec::new());

/// This thread's record, given back when the thread ends.
struct Mine(&'static Record);

impl Drop for Mine {
    fn drop(&mut self) {
        let _ = CURRENT.try_with(|c| c.set(None));
        FREE.lock().push(self.0);
    }
}

thread_local! {
    /// This thread's record once it has one: read on every lock, so a
    /// const-initialised thread-local without a destructor of its own.
    static CURRENT: Cell<Option<&'static Record>> = const { Cell::new(None) };
    static MINE: Mine = {
        register_fork_handler();
        let free = FREE.lock().pop();
        Mine(free.unwrap_or_else(|| {
            Box::leak(Box::new(Record {
                inside: StaticUsize::new(0),
            }))
        }))
    };
}

/// Registers [`forked_child`] once per process (children inherit it).
fn register_fork_handler() {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    REGISTERED.call_once(|| {
        // SAFETY: registers a function pointer valid for the life of the
        // process; libc keeps no pointer of ours.
        unsafe { libc::pthread_atfork(None, None, Some(forked_child)) };
    });
}

/// In a forked child, a thread that held the free list's lock at the fork
/// (starting or ending) is gone: the lock is released and the list, which
/// it may have left half changed, forgotten (its records leak).
extern "C" fn forked_child() {
    if FREE.is_locked() {
        // SAFETY: its holder was another thread, absent from the child.
        unsafe { FREE.force_unlock() };
        std::mem::forget(std::mem::take(&mut *FREE.lock()));
    }
}

/// This thread's record, as the word `owner` holds; `None` while the
/// thread-locals are being destroyed (it then never holds a bias), and
/// under loom, which grants no bias.
#[inline]
fn this_thread() -> Option<&'static Record> {
    #[cfg(loom)]
    {
        None
    }
    #[cfg(not(loom))]
    {
        CURRENT.get().or_else(first_record)
    }
}

/// This thread's record, taken now (`None` once it was given back).
#[cold]
#[inline(never)]
fn first_record() -> Option<&'static Record> {
    let mine = MINE.try_with(|m| m.0).ok()?;
    CURRENT.set(Some(mine));
    Some(mine)
}

fn word(r: &'static Record) -> usize {
    r as *const Record as usize
}

/// Who took the inner mutex lately, under it.
struct Turns {
    /// The last thread to take it (its record's word), and how many times
    /// in a row.
    last: usize,
    run: u32,
    /// Revocations so far.
    revoked: u32,
    /// The record of an owner whose bias was revoked and who was not yet
    /// seen leaving.
    former: Option<&'static Record>,
}

impl Turns {
    /// Counts a take of the mutex by `me`: true when `me` should get the
    /// bias at its unlock.
    fn count(&mut self, me: usize) -> bool {
        if self.last == me {
            self.run = self.run.saturating_add(1);
        } else {
            self.last = me;
            self.run = 1;
        }
        me != 0 && self.run >= BIAS_AFTER << self.revoked.min(MAX_DOUBLINGS)
    }
}

/// A mutex that lets one thread in without locked instructions (see the
/// module documentation).
pub struct BiasedMutex<T> {
    turns: Mutex<Turns>,
    /// The record of the thread holding the bias, or 0.
    owner: AtomicUsize,
    /// Whether a bias may be granted at all.
    biasable: bool,
    value: UnsafeCell<T>,
}

// SAFETY: `value` is reached by one guard at a time (the owner's path, or
// the inner mutex's holder after the owner left), as a `Mutex<T>` is.
unsafe impl<T: Send> Send for BiasedMutex<T> {}
// SAFETY: as for `Send`.
unsafe impl<T: Send> Sync for BiasedMutex<T> {}

impl<T: Default> Default for BiasedMutex<T> {
    fn default() -> Self {
        BiasedMutex::new(T::default())
    }
}

impl<T> BiasedMutex<T> {
    /// A mutex that never grants the bias.
    pub fn new(value: T) -> Self {
        Self::with_bias(value, false)
    }

    /// A mutex that grants the bias to a thread taking it alone.
    pub fn new_biased(value: T) -> Self {
        Self::with_bias(value, true)
    }

    fn with_bias(value: T, biasable: bool) -> Self {
        if biasable {
            fence::init();
        }
        BiasedMutex {
            turns: Mutex::new(Turns {
                last: 0,
                run: 0,
                revoked: 0,
                former: None,
            }),
            owner: AtomicUsize::new(0),
            biasable,
            value: UnsafeCell::new(value),
        }
    }

    fn addr(&self) -> usize {
        self as *const Self as usize
    }

    /// This thread's record, for a mutex that may grant it the bias.
    #[inline]
    fn this_thread(&self) -> Option<&'static Record> {
        if self.biasable {
            this_thread()
        } else {
            None
        }
    }

    /// Waits for the lock.
    #[inline]
    pub fn lock(&self) -> BiasedGuard<'_, T> {
        let me = self.this_thread();
        if let Some(g) = me.and_then(|r| self.enter_as_owner(r)) {
            return g;
        }
        self.lock_inner(me)
    }

    #[inline(never)]
    fn lock_inner(&self, me: Option<&'static Record>) -> BiasedGuard<'_, T> {
        let mut turns = self.turns.lock();
        self.wait_for_owner(&mut turns, true);
        self.held(me, turns)
    }

    /// The lock if no one holds it. An owner inside counts as holding it;
    /// it keeps the lock until it leaves, but loses the bias.
    #[inline]
    pub fn try_lock(&self) -> Option<BiasedGuard<'_, T>> {
        let me = self.this_thread();
        if let Some(g) = me.and_then(|r| self.enter_as_owner(r)) {
            return Some(g);
        }
        self.try_lock_inner(me)
    }

    #[inline(never)]
    fn try_lock_inner(&self, me: Option<&'static Record>) -> Option<BiasedGuard<'_, T>> {
        let mut turns = self.turns.try_lock()?;
        if !self.wait_for_owner(&mut turns, false) {
            return None;
        }
        Some(self.held(me, turns))
    }

    /// The owner's path: `None` if this thread does not hold the bias, or
    /// is inside already (a re-entry, which a `Mutex` would not allow either).
    #[inline]
    fn enter_as_owner(&self, me: &'static Record) -> Option<BiasedGuard<'_, T>> {
        // Inside another biased mutex already (books nested in a user's
        // callback), or in this one (a re-entry): the inner mutex's way.
        if self.owner.load(Ordering::Relaxed) != word(me) || me.inside.load(Ordering::Relaxed) != 0
        {
            return None;
        }
        me.inside.store(self.addr(), Ordering::Relaxed);
        fence::light();
        if self.owner.load(Ordering::Relaxed) != word(me) {
            me.inside.store(0, Ordering::Release);
            return None;
        }
        Some(BiasedGuard {
            mutex: self,
            held: Held::Owner(me),
        })
    }

    /// Under the inner mutex: takes the bias away from its owner, then
    /// waits until the owner is out (`patient`), or returns false if it is
    /// still in (the next attempt then only waits).
    #[inline]
    fn wait_for_owner(&self, turns: &mut Turns, patient: bool) -> bool {
        if self.owner.load(Ordering::Relaxed) != 0 {
            self.revoke(turns);
        }
        let Some(former) = turns.former else {
            return true;
        };
        let mut attempt = 0;
        while former.is_inside(self.addr(), Ordering::Acquire) {
            if !patient {
                return false;
            }
            wait_out(&mut attempt);
        }
        turns.former = None;
        true
    }

    #[cold]
    #[inline(never)]
    fn revoke(&self, turns: &mut Turns) {
        // Only inner-mutex holders change `owner`: a plain load and store.
        let former = self.owner.load(Ordering::Relaxed);
        self.owner.store(0, Ordering::Relaxed);
        fence::heavy();
        turns.revoked = turns.revoked.saturating_add(1);
        // SAFETY: a record's address (see `word`); records are never freed.
        turns.former = Some(unsafe { &*(former as *const Record) });
    }

    #[inline]
    fn held<'a>(
        &'a self,
        me: Option<&'static Record>,
        mut turns: MutexGuard<'a, Turns>,
    ) -> BiasedGuard<'a, T> {
        let me = me.map_or(0, word);
        let grant = turns.count(me).then_some(me);
        BiasedGuard {
            mutex: self,
            held: Held::Mutex { turns, grant },
        }
    }

    /// Revocations so far.
    #[cfg(test)]
    fn revocations(&self) -> u32 {
        self.turns.lock().revoked
    }

    /// True while some thread holds the bias.
    #[cfg(test)]
    fn is_biased(&self) -> bool {
        self.owner.load(Ordering::Relaxed) != 0
    }
}

enum Held<'a> {
    /// Through the owner's path, with this record.
    Owner(&'static Record),
    /// Through the inner mutex (held until the guard drops); `grant`: the
    /// bias goes to this record at unlock.
    Mutex {
        turns: MutexGuard<'a, Turns>,
        grant: Option<usize>,
    },
}

/// Holds a [`BiasedMutex`]; dropping it unlocks.
pub struct BiasedGuard<'a, T> {
    mutex: &'a BiasedMutex<T>,
    held: Held<'a>,
}

impl<T> Drop for BiasedGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        match &mut self.held {
            Held::Owner(me) => me.inside.store(0, Ordering::Release),
            Held::Mutex { turns, grant } => {
                if let Some(me) = grant.take() {
                    debug_assert!(turns.former.is_none());
                    // Before the inner mutex unlocks: its next holder revokes it.
                    self.mutex.owner.store(me, Ordering::Relaxed);
                }
            }
        }
    }
}
impl<T> Deref for BiasedGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard is the one way in (see `BiasedMutex`'s `Sync`).
        unsafe { &*self.mutex.value.get() }
    }
}

impl<T> DerefMut for BiasedGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes it the only reference.
        unsafe { &mut *self.mutex.value.get() }
    }
}

impl<T> BiasedGuard<'_, T> {
    /// True if this guard entered through the owner's path.
    pub fn is_owners(&self) -> bool {
        matches!(self.held, Held::Owner(..))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_thread_alone_is_granted_the_bias_and_keeps_it() {
        let m = BiasedMutex::new_biased(0u64);
        for i in 0..BIAS_AFTER {
            let mut g = m.lock();
            assert!(!g.is_owners(), "take {i} goes through the mutex");
            *g += 1;
        }
        assert!(m.is_biased());
        for _ in 0..100 {
            let mut g = m.lock();
            assert!(g.is_owners());
            *g += 1;
        }
        assert_eq!(*m.lock(), u64::from(BIAS_AFTER) + 100);
        assert_eq!(m.revocations(), 0);
    }

    #[test]
    fn an_unbiased_mutex_never_grants_it() {
        let m = BiasedMutex::new(0u64);
        for _ in 0..100 {
            assert!(!m.lock().is_owners());
        }
        assert!(!m.is_biased());
    }

    #[test]
    fn the_owner_inside_holds_the_lock_and_does_not_reenter() {
        let m = BiasedMutex::new_biased(());
        for _ in 0..BIAS_AFTER {
            drop(m.lock());
        }
        let g = m.lock();
        assert!(g.is_owners());
        std::thread::scope(|s| {
            s.spawn(|| assert!(m.try_lock().is_none(), "another thread waits"));
        });
        assert!(!m.is_biased(), "the other thread's attempt took the bias");
        assert!(m.try_lock().is_none(), "a re-entry is refused");
        drop(g);
        assert!(!m.lock().is_owners());
        assert_eq!(m.revocations(), 1);
    }

    #[test]
    fn another_thread_revokes_and_runs_needed_to_regain_it_double() {
        let m = BiasedMutex::new_biased(());
        for _ in 0..BIAS_AFTER {
            drop(m.lock());
        }
        assert!(m.is_biased());
        std::thread::scope(|s| {
            s.spawn(|| assert!(!m.lock().is_owners()));
        });
        assert!(!m.is_biased());
        for i in 0..2 * BIAS_AFTER {
            assert!(!m.lock().is_owners(), "take {i}");
        }
        assert!(m.lock().is_owners());
    }

    /// Two threads increment in turns of varying length: no increment is
    /// lost and no pair is seen torn, whichever path each took; both paths
    /// were taken, and revocations stay few.
    #[test]
    fn threads_taking_turns_lose_no_update() {
        const EACH: u64 = 200_000;
        let m = BiasedMutex::new_biased((0u64, 0u64));
        let owners = std::sync::atomic::AtomicU64::new(0);
        let start = std::sync::Barrier::new(2);
        std::thread::scope(|s| {
            for t in 0..2u64 {
                let (m, owners, start) = (&m, &owners, &start);
                s.spawn(move || {
                    start.wait();
                    for i in 0..EACH {
                        let mut g = m.lock();
                        if g.is_owners() {
                            owners.fetch_add(1, Ordering::Relaxed);
                        }
                        // Two fields written apart: a torn pair shows a race.
                        g.0 += 1;
                        std::hint::black_box(&mut *g);
                        assert_eq!(g.0, g.1 + 1);
                        g.1 += 1;
                        drop(g);
                        if (i + t * 500) % 1000 == 0 {
                            std::thread::yield_now();
                        }
                    }
                });
            }
        });
        assert_eq!(*m.lock(), (2 * EACH, 2 * EACH));
        let (owners, revoked) = (owners.into_inner(), m.revocations());
        eprintln!(
            "owner's path {owners} of {}, revocations {revoked}",
            2 * EACH
        );
        assert!(owners > 0);
        assert!(revoked <= 200, "{revoked}");
    }

    /// Many fresh mutexes, each biased to one thread that keeps taking it
    /// while another revokes: the two are never inside at once.
    #[test]
    fn a_revocation_racing_the_owners_path_never_lets_both_in() {
        const ROUNDS: usize = 300;
        const TAKES: u64 = 2_000;
        for _ in 0..ROUNDS {
            let m = BiasedMutex::new_biased((0u64, 0u64));
            let (biased, ended) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
            std::thread::scope(|s| {
                s.spawn(|| {
                    for _ in 0..BIAS_AFTER {
                        let mut g = m.lock();
                        g.0 += 1;
                        g.1 += 1;
                    }
                    assert!(m.is_biased());
                    biased.wait();
                    for _ in 0..TAKES {
                        let mut g = m.lock();
                        g.0 += 1;
                        std::hint::black_box(&mut *g);
                        assert_eq!(g.0, g.1 + 1, "the other thread is inside");
                        g.1 += 1;
                    }
                    // Alive until the other is done: a thread started after
                    // this one ended would get its record, and with it the bias.
                    ended.wait();
                });
                s.spawn(|| {
                    biased.wait();
                    let mut g = m.lock();
                    assert!(!g.is_owners());
                    g.0 += 1;
                    std::hint::black_box(&mut *g);
                    assert_eq!(g.0, g.1 + 1, "the owner is inside");
                    g.1 += 1;
                    drop(g);
                    ended.wait();
                });
            });
            let total = u64::from(BIAS_AFTER) + TAKES + 1;
            assert_eq!(*m.lock(), (total, total));
            // The other thread's, and the last lock's above if the owner
            // regained the bias after it.
            let revoked = m.revocations();
            assert!((1..=2).contains(&revoked), "{revoked}");
        }
    }

    /// The free list's lock held at a fork (here by the forking thread, as
    /// a thread starting or ending would hold it): a thread the child
    /// starts still gets a record and takes a biased mutex.
    #[test]
    fn a_forked_child_starts_threads_though_the_free_list_was_locked() {
        let m = BiasedMutex::new_biased(0u64);
        drop(m.lock());
        let held = FREE.lock();
        // SAFETY: the child calls only what the test needs, then `_exit`s.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let ok = std::thread::spawn(move || {
                for _ in 0..2 * BIAS_AFTER {
                    *m.lock() += 1;
                }
                *m.lock()
            })
            .join()
            .is_ok_and(|n| n == 2 * u64::from(BIAS_AFTER));
            // SAFETY: ends the child without running the parent's exit code.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        drop(held);
        assert!(pid > 0, "fork failed");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut status = 0;
        loop {
            // SAFETY: waits for our own child.
            let done = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if done == pid {
                break;
            }
            if std::time::Instant::now() > deadline {
                // SAFETY: ends our own child.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                panic!("the child hung on the free list's lock");
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "{status}"
        );
    }

    #[test]
    fn try_lock_from_another_thread_serialises_with_the_owner() {
        const EACH: u64 = 100_000;
        let m = BiasedMutex::new_biased(0u64);
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..EACH {
                    *m.lock() += 1;
                }
            });
            s.spawn(|| {
                let mut done = 0;
                while done < EACH / 10 {
                    if let Some(mut g) = m.try_lock() {
                        *g += 1;
                        done += 1;
                    }
                }
            });
        });
        assert_eq!(*m.lock(), EACH + EACH / 10);
    }
}
