//! Which threads are inside a call of a published pluggable allocator, so
//! that destroy can wait for every call that may still use what it frees
//! (the allocator's entry, the plugin's code).
//!
//! Each thread keeps a record of its own: how deep it is in calls, and how
//! many times it left the outermost one. Only the thread writes them, with
//! plain stores, so a call takes no locked instruction. A call stores its
//! depth, then looks the allocator up; destroy takes the allocator out of
//! reach (out of the table, or marked closing), then reads the depths. The
//! two sides are a Dekker pair over [`fence`]: either the call sees the
//! allocator gone, or destroy sees the call and waits until its thread
//! leaves the outermost call it was in.

use crate::base::fence;
use crate::base::sync::statics::AtomicUsize as StaticUsize;
use crate::base::sync::{AtomicU64, AtomicUsize, Mutex, Ordering};
use std::sync::{Arc, OnceLock};

/// One thread's record.
#[derive(Default)]
struct Presence {
    /// Calls this thread is inside (nested when a plugin calls back in).
    depth: AtomicUsize,
    /// Times it left its outermost call.
    exits: AtomicU64,
}

/// Every thread's record since its first call. A record whose thread is
/// gone (the list holds its only reference) is dropped at the next thread's
/// first call.
fn threads() -> &'static Mutex<Vec<Arc<Presence>>> {
    static THREADS: OnceLock<Mutex<Vec<Arc<Presence>>>> = OnceLock::new();
    THREADS.get_or_init(|| Mutex::new(Vec::new()))
}

/// Calls made by threads whose record is gone (inside their thread-local
/// destructors): rare, so a shared counter.
static UNRECORDED: StaticUsize = StaticUsize::new(0);

thread_local! {
    static MINE: Arc<Presence> = {
        fence::init();
        register_fork_handler();
        let mine = Arc::new(Presence::default());
        let mut all = threads().lock();
        all.retain(|p| Arc::strong_count(p) > 1);
        all.push(mine.clone());
        mine
    };
}

/// Registers [`forked_child`] once per process (children inherit it).
fn register_fork_handler() {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    REGISTERED.call_once(|| {
        // SAFETY: registers a function pointer that stays valid for the
        // life of the process; no pointer of ours is kept by libc.
        unsafe { libc::pthread_atfork(None, None, Some(forked_child)) };
    });
}

/// In a forked child only the forking thread goes on: the calls the other
/// threads were inside never return there, so they are forgotten, or a
/// destroy in the child would wait for them forever. Atomic operations and
/// a walk of the list only; if another thread held the list's lock at the
/// fork (adding or dropping a record, so the list may be half changed), the
/// lock is released and the records left as they are.
extern "C" fn forked_child() {
    UNRECORDED.store(0, Ordering::Relaxed);
    let all = threads();
    #[cfg(not(loom))]
    if all.is_locked() {
        // SAFETY: its holder was another thread, absent from the child.
        unsafe { all.force_unlock() };
        return;
    }
    let mine = MINE.try_with(Arc::as_ptr).ok();
    for p in all.lock().iter() {
        if Some(Arc::as_ptr(p)) != mine {
            p.depth.store(0, Ordering::Relaxed);
        }
    }
}

/// A call in progress on this thread; it ends when dropped.
pub(crate) struct Inside(Option<*const Presence>);

/// Marks this thread as inside a call, before it looks up what it calls.
#[inline]
pub(crate) fn enter() -> Inside {
    match MINE.try_with(|p| {
        let depth = p.depth.load(Ordering::Relaxed);
        p.depth.store(depth + 1, Ordering::Relaxed);
        Arc::as_ptr(p)
    }) {
        Ok(p) => {
            // The depth is visible before the look-up reads (see the module).
            fence::light();
            Inside(Some(p))
        }
        Err(_) => {
            UNRECORDED.fetch_add(1, Ordering::SeqCst);
            Inside(None)
        }
    }
}

impl Drop for Inside {
    #[inline]
    fn drop(&mut self) {
        let Some(p) = self.0 else {
            UNRECORDED.fetch_sub(1, Ordering::Release);
            return;
        };
        // SAFETY: the thread's own record, which its thread-local keeps
        // alive while a call made on it is in progress (this guard is not
        // `Send`: the raw pointer keeps it on the thread).
        let p = unsafe { &*p };
        let depth = p.depth.load(Ordering::Relaxed);
        if depth == 1 {
            // Release: what the call did with the allocator comes before a
            // destroy that sees this.
            let exits = p.exits.load(Ordering::Relaxed);
            p.exits.store(exits + 1, Ordering::Release);
        }
        p.depth.store(depth - 1, Ordering::Release);
    }
}

/// True when this thread is inside a call.
pub(crate) fn is_inside() -> bool {
    MINE.try_with(|p| p.depth.load(Ordering::Relaxed) > 0)
        .unwrap_or(false)
}

/// Returns once every call that was in progress when it began has returned.
/// The caller took what it frees out of reach of new calls first. Never
/// called inside a call (it would wait for itself).
pub(crate) fn wait_for_calls_inside() {
    // Pairs with `enter`'s light fence.
    fence::heavy();
    let busy: Vec<(Arc<Presence>, u64)> = threads()
        .lock()
        .iter()
        .filter(|p| p.depth.load(Ordering::Acquire) > 0)
        .map(|p| (p.clone(), p.exits.load(Ordering::Acquire)))
        .collect();
    for (p, exits) in busy {
        wait_until(|| {
            p.depth.load(Ordering::Acquire) == 0 || p.exits.load(Ordering::Acquire) != exits
        });
    }
    wait_until(|| UNRECORDED.load(Ordering::Acquire) == 0);
}

/// Polls `done`, yielding at first, then asleep: a plugin may take long.
fn wait_until(mut done: impl FnMut() -> bool) {
    let mut attempt = 0;
    while !done() {
        crate::base::sync::wait_out(&mut attempt);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::sync::AtomicBool;
    use std::time::{Duration, Instant};

    #[test]
    fn nested_calls_count_as_one_until_the_outermost_returns() {
        assert!(!is_inside());
        let outer = enter();
        let inner = enter();
        assert!(is_inside());
        drop(inner);
        assert!(is_inside(), "still inside the outer call");
        drop(outer);
        assert!(!is_inside());
    }

    #[test]
    fn a_wait_returns_only_after_a_call_in_progress_leaves() {
        let (entered, release, left) = (
            AtomicBool::new(false),
            AtomicBool::new(false),
            AtomicBool::new(false),
        );
        std::thread::scope(|s| {
            s.spawn(|| {
                let call = enter();
                entered.store(true, Ordering::Release);
                while !release.load(Ordering::Acquire) {
                    std::thread::yield_now();
                }
                left.store(true, Ordering::Release);
                drop(call);
            });
            while !entered.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(50));
                release.store(true, Ordering::Release);
            });
            let start = Instant::now();
            wait_for_calls_inside();
            assert!(left.load(Ordering::Acquire), "the wait returned first");
            assert!(start.elapsed() >= Duration::from_millis(40));
        });
    }

    #[test]
    fn a_thread_that_keeps_calling_does_not_hold_a_wait_back() {
        let (stop, started) = (AtomicBool::new(false), AtomicBool::new(false));
        std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(Ordering::Acquire) {
                    let _call = enter();
                    started.store(true, Ordering::Release);
                    std::hint::spin_loop();
                }
            });
            while !started.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            for _ in 0..100 {
                wait_for_calls_inside();
            }
            stop.store(true, Ordering::Release);
        });
    }

    #[test]
    fn a_forked_child_does_not_wait_for_calls_of_threads_it_lacks() {
        let (entered, release) = (AtomicBool::new(false), AtomicBool::new(false));
        std::thread::scope(|s| {
            s.spawn(|| {
                let _call = enter();
                entered.store(true, Ordering::Release);
                while !release.load(Ordering::Acquire) {
                    std::thread::yield_now();
                }
            });
            while !entered.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            // SAFETY: the child only waits and exits with `_exit`.
            let child = unsafe { libc::fork() };
            if child == 0 {
                wait_for_calls_inside();
                // SAFETY: ends the child without running the parent's handlers.
                unsafe { libc::_exit(0) };
            }
            // Waited for before any assertion, so a failure cannot leave
            // the helper thread (and the scope) waiting.
            let outcome = wait_for_child(child);
            release.store(true, Ordering::Release);
            assert_eq!(
                outcome,
                Some(0),
                "the child waited for a call of a thread it does not have"
            );
        });
    }

    /// The exit status of `child`, or `None` if it ran 20 s (then killed).
    fn wait_for_child(child: libc::pid_t) -> Option<i32> {
        assert!(child > 0, "fork failed");
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut status = 0;
        loop {
            // SAFETY: `status` is writable; `child` is ours.
            if unsafe { libc::waitpid(child, &mut status, libc::WNOHANG) } == child {
                return libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
            }
            if Instant::now() > deadline {
                // SAFETY: our child; reaped right after.
                unsafe {
                    libc::kill(child, libc::SIGKILL);
                    libc::waitpid(child, &mut status, 0);
                }
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn records_of_threads_that_ended_are_dropped() {
        let ended: Vec<std::sync::Weak<Presence>> = (0..8)
            .map(|_| {
                std::thread::spawn(|| {
                    drop(enter());
                    MINE.with(Arc::downgrade)
                })
                .join()
                .unwrap()
            })
            .collect();
        // A new thread's first call drops them.
        std::thread::spawn(|| drop(enter())).join().unwrap();
        assert!(ended.iter().all(|w| w.upgrade().is_none()));
    }
}
