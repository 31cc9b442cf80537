//! The tracking record of one allocator object: the shared
//! tracked-allocations adaptor ([`crate::base::tracked`]) with the tracking
//! layer's metadata per block and its own books beside it.
//!
//! One [`AllocState`] exists per user allocator object, shared by every
//! stream and registration that uses it. The adaptor's lock notes the
//! stream inside: another stream found inside *is* the "two streams in one
//! allocator at once" hazard (CANN's allocator contract forbids it while
//! the user's callback runs, which it does inside). Lookups take no lock.

use super::events::{record, Fault};
use super::state::{Inner, TrackMeta};
use crate::base::tracked::{Guard, History, Tracked};
use std::ops::{Deref, DerefMut};

/// The owner of a record taken for something other than a stream's call
/// into the allocator (an address lookup, a report): it never counts as a
/// second stream.
pub(crate) const NOT_A_STREAM: usize = crate::base::tracked::INSPECTOR;

/// How long a report waits for an allocator that another thread is inside.
pub(crate) const REPORT_PATIENCE: std::time::Duration = std::time::Duration::from_millis(200);

/// The tracking record of one user allocator object.
pub(crate) struct AllocState {
    /// The user's allocator object.
    pub(crate) allocator: usize,
    pub(crate) books: Tracked<TrackMeta, Inner>,
}

/// Exclusive access to an allocator's record.
pub(crate) struct Inside<'a> {
    pub(crate) g: Guard<'a, TrackMeta, Inner>,
}

impl Deref for Inside<'_> {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.g
    }
}

impl DerefMut for Inside<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        &mut self.g
    }
}

impl AllocState {
    pub(crate) fn new(allocator: usize) -> Self {
        AllocState {
            allocator,
            // Freed blocks stay until the tracking layer prunes them: it
            // needs them for its cross-stream checks (see `state`).
            books: Tracked::new(History::UntilForgotten, Inner::default()),
        }
    }

    /// Takes the record for `stream` ([`NOT_A_STREAM`] for anything but a
    /// call into the allocator); another stream found inside is reported.
    /// Returns `None` when this thread already holds it: a user callback
    /// that calls back into the same allocator is passed through untracked
    /// rather than deadlocking.
    #[inline]
    pub(crate) fn enter(&self, stream: usize) -> Option<Inside<'_>> {
        let allocator = self.allocator;
        // `move`: a closure of references would make the caller store the
        // two words on its stack on every entry, for a report that is rare.
        let g = self.books.enter(stream, move |current| {
            record(Fault::ConcurrentUse {
                allocator,
                stream,
                other_stream: current,
            })
        })?;
        Some(Inside { g })
    }

    /// Takes the record as [`NOT_A_STREAM`] for bookkeeping that calls none
    /// of the user's code while inside (recording an address).
    #[inline]
    pub(crate) fn enter_brief(&self) -> Option<Inside<'_>> {
        let g = self.books.enter_brief(NOT_A_STREAM, |_| {})?;
        Some(Inside { g })
    }

    /// Takes the record for reading it out (reports, statistics), waiting
    /// at most `patience`: a report at exit must not hang on a thread that
    /// is stuck inside a user's allocator.
    pub(crate) fn enter_for_report(&self, patience: std::time::Duration) -> Option<Inside<'_>> {
        Some(Inside {
            g: self.books.enter_with_patience(patience)?,
        })
    }

    /// True when `block` is live here and was handed out through a
    /// registration whose getAddrFromBlock is `get_addr`: lock-free.
    #[inline]
    pub(crate) fn serves(&self, block: usize, get_addr: usize) -> bool {
        self.books
            .lookup(block)
            .is_some_and(|b| b.is_live() && b.meta.get_addr() == get_addr)
    }

    /// The getAddrFromBlock of the registration that handed `block` out,
    /// when it is live here: lock-free.
    #[inline]
    pub(crate) fn live_get_addr(&self, block: usize) -> Option<usize> {
        match self.record_get_addr(block) {
            Some((true, get_addr)) => Some(get_addr),
            _ => None,
        }
    }

    /// Whether `block` is live here and the getAddrFromBlock of the
    /// registration that handed it out, when it has a record (live or
    /// remembered freed): lock-free, one probe.
    #[inline]
    pub(crate) fn record_get_addr(&self, block: usize) -> Option<(bool, usize)> {
        self.books
            .lookup(block)
            .map(|b| (b.is_live(), b.meta.get_addr()))
    }
}
