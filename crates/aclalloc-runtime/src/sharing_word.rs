//! Words of shared memory that streams of several processes set and wait
//! for: one page of a `memfd`, mapped in each process that holds it, whose
//! 32-bit words are slept on with a shared (not `PRIVATE`) futex. Notifies
//! use one word, IPC events three.

use crate::base::error::{Error, Result};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The size of the file and of its mapping.
pub(crate) const PAGE: usize = 4096;
/// The longest a waiter sleeps before it looks again: a wake-up lost to a
/// race between its check and its sleep costs one slice.
const SLICE: Duration = Duration::from_millis(100);

/// One mapped page of shared words.
pub(crate) struct SharedPage {
    base: *const AtomicU32,
    fd: Arc<OwnedFd>,
}

// SAFETY: the words are atomics in a mapping that lives as long as the
// page; the descriptor is shared read-only.
unsafe impl Send for SharedPage {}
// SAFETY: as above.
unsafe impl Sync for SharedPage {}

impl SharedPage {
    /// A new page of zeroed words.
    pub(crate) fn create(name: &std::ffi::CStr) -> Result<Self> {
        Self::map(Arc::new(super::sharing::memfd(name, PAGE)?))
    }

    /// Maps `fd`, a file at least one page long (this process's or one
    /// received from another).
    pub(crate) fn map(fd: Arc<OwnedFd>) -> Result<Self> {
        // SAFETY: a new shared mapping of a file at least one page long.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::Failure {
                reason: "The host refused to map a page of shared memory",
            });
        }
        Ok(SharedPage { base: p.cast(), fd })
    }

    /// The file, to export.
    pub(crate) fn fd(&self) -> &Arc<OwnedFd> {
        &self.fd
    }

    /// Word `i` of the page.
    pub(crate) fn word(&self, i: usize) -> &AtomicU32 {
        assert!(i < PAGE / 4, "a word inside the page");
        // SAFETY: mapped for the page's life, page-aligned, `i` inside it.
        unsafe { &*self.base.add(i) }
    }

    /// Wakes every thread of every process sleeping on word `i`.
    pub(crate) fn wake(&self, i: usize) {
        let word: *const AtomicU32 = self.word(i);
        // SAFETY: a futex wake on a word of shared memory (not PRIVATE: the
        // waiter may be another process).
        unsafe { libc::syscall(libc::SYS_futex, word, libc::FUTEX_WAKE, i32::MAX) };
    }

    /// Sleeps on word `i` until `done()` holds, `give_up()` holds (checked
    /// once a slice) or `timeout` runs out (`None`: no limit). True when
    /// `done()` held; `give_up()` counts as done.
    pub(crate) fn wait(
        &self,
        i: usize,
        timeout: Option<Duration>,
        mut done: impl FnMut(u32) -> bool,
        mut give_up: impl FnMut() -> bool,
    ) -> bool {
        let deadline = timeout.map(|t| Instant::now() + t);
        let word = self.word(i);
        loop {
            let seen = word.load(std::sync::atomic::Ordering::Acquire);
            if done(seen) {
                return true;
            }
            if give_up() {
                return true;
            }
            let slice = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => left.min(SLICE),
                    _ => return false,
                },
                None => SLICE,
            };
            let ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: slice.as_nanos() as libc::c_long,
            };
            let at: *const AtomicU32 = word;
            // SAFETY: a futex wait on a word of shared memory while it still
            // holds `seen`, bounded by `ts`.
            unsafe { libc::syscall(libc::SYS_futex, at, libc::FUTEX_WAIT, seen, &ts) };
        }
    }
}

impl Drop for SharedPage {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unused from now on.
        unsafe { libc::munmap(self.base.cast_mut().cast(), PAGE) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn two_mappings_share_their_words_and_a_wait_times_out_or_gives_up() {
        let a = SharedPage::create(c"t").unwrap();
        let b = SharedPage::map(Arc::clone(a.fd())).unwrap();
        assert!(!b.wait(1, Some(Duration::from_millis(1)), |v| v == 7, || false));
        a.word(1).store(7, Ordering::Release);
        a.wake(1);
        assert!(b.wait(1, None, |v| v == 7, || false));
        assert_eq!(b.word(0).load(Ordering::Acquire), 0);
        assert!(b.wait(0, None, |v| v == 1, || true), "gave up");
    }
}
