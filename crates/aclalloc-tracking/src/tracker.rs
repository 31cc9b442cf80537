//! The tracking objects handed out in place of the user's allocator, and the
//! process-wide table of them.
//!
//! A [`TrackObj`] stands for one registration on one stream (the callbacks
//! are not told the stream). They are interned by (stream, registration) and
//! never freed, since a runtime may keep the pointer. A destroyed stream's
//! objects become spares that the next stream registering the same allocator
//! reuses with one atomic store of the stream word, so a service making a
//! stream per request keeps only as many objects as streams alive at once.

use super::history;
use super::owner::AllocState;
use crate::base::sync::statics::{AtomicI32, AtomicPtr, AtomicUsize};
use crate::base::sync::Ordering;
use crate::base::table::{Packed, Table, VALUE_WORDS};
use crate::registry::{Registration, StreamKey};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Mutex, OnceLock};

/// The getAddrFromBlock of the newest registration, for blocks no record
/// knows (the tracking one must still return what the user's would).
pub(crate) static FALLBACK_GET_ADDR: crate::base::sync::statics::AtomicUsize =
    crate::base::sync::statics::AtomicUsize::new(0);

/// The allocator object the tracking callbacks receive.
pub struct TrackObj {
    /// The stream (a non-zero handle); changes only when a destroyed
    /// stream's object is reused for a new stream.
    stream: AtomicUsize,
    pub(crate) registration: Registration,
    pub(crate) state: &'static AllocState,
    /// The stream's device as the history records it; `UNKNOWN_DEVICE` until
    /// the first recorded allocation (asking earlier would be a call the
    /// program did not make).
    device: AtomicI32,
}

const UNKNOWN_DEVICE: i32 = -1;

impl TrackObj {
    /// The stream this object serves.
    #[inline]
    pub(crate) fn stream(&self) -> StreamKey {
        StreamKey::from_ptr(self.stream.load(Ordering::Relaxed) as *mut c_void)
            .expect("a tracking object's stream is never NULL")
    }

    /// The device to record this allocation under: 0 while the history is off,
    /// else the calling thread's current device the first time, remembered.
    #[inline]
    pub(crate) fn device_for_history(&self) -> i32 {
        if !history::is_recording() {
            return 0;
        }
        match self.device.load(Ordering::Relaxed) {
            UNKNOWN_DEVICE => self.learn_device(),
            d => d,
        }
    }

    #[cold]
    #[inline(never)]
    fn learn_device(&self) -> i32 {
        let d = crate::base::device_port::port()
            .current_device()
            .filter(|&d| d >= 0)
            .unwrap_or(0);
        self.device.store(d, Ordering::Relaxed);
        d
    }

    fn serves(&self, registration: &Registration) -> bool {
        self.registration.descriptor == registration.descriptor
            && self.registration.callbacks.same_as(&registration.callbacks)
    }
}

/// A stream's current tracking object, as one word in a [`Table`].
#[derive(Clone, Copy)]
struct TrackRef(&'static TrackObj);

// SAFETY: the first word is the address of a leaked `TrackObj` (never freed),
// and `unpack` only sees words `pack` produced.
unsafe impl Packed<1> for TrackRef {
    fn pack(&self) -> [usize; 1] {
        [self.0 as *const TrackObj as usize]
    }
    unsafe fn unpack([object]: [usize; 1]) -> Self {
        // SAFETY: see the impl.
        TrackRef(unsafe { &*(object as *const TrackObj) })
    }
}

// SAFETY: a `TrackObj` is immutable after creation but for its atomic
// stream word; its state is Sync.
unsafe impl Send for TrackRef {}

type InternKey = (usize, [usize; VALUE_WORDS]);

#[derive(Default)]
struct Slow {
    objects: HashMap<InternKey, &'static TrackObj>,
    /// Objects of destroyed streams, by registration, for reuse.
    spare: HashMap<[usize; VALUE_WORDS], Vec<&'static TrackObj>>,
    states: HashMap<usize, &'static AllocState>,
    /// The last node of `Tracker::records` (`None` while empty): appended to under this lock.
    last: Option<&'static RecordNode>,
}

/// One node of the list of allocator records; leaked, like the records.
struct RecordNode {
    state: &'static AllocState,
    /// The next (newer) node, or null.
    next: AtomicPtr<RecordNode>,
}

/// Every allocator record, oldest first: an append-only linked list of leaked
/// nodes, so getAddrFromBlock's fallback search takes no lock and allocates
/// nothing. One writer (under the tracker's lock) appends with a release
/// store; readers follow acquire loads and at worst miss a node appended
/// meanwhile, for an allocator they could not have been asked about.
pub(crate) struct Records {
    first: AtomicPtr<RecordNode>,
}

impl Records {
    /// The records, oldest first, without locking.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &'static AllocState> + '_ {
        let mut next = self.first.load(Ordering::Acquire);
        std::iter::from_fn(move || {
            // SAFETY: a non-null link names a leaked node, never freed.
            let node: &'static RecordNode = unsafe { next.as_ref() }?;
            next = node.next.load(Ordering::Acquire);
            Some(node.state)
        })
    }
}

pub(crate) struct Tracker {
    by_stream: Table<TrackRef, 1>,
    records: Records,
    /// Its own lock, not the table's: `create` waits for an allocator's
    /// record under it, and a thread inside that allocator may still
    /// unregister a stream (`forget_stream`).
    slow: Mutex<Slow>,
}

pub(crate) fn tracker() -> &'static Tracker {
    static TRACKER: OnceLock<Tracker> = OnceLock::new();
    TRACKER.get_or_init(|| Tracker {
        by_stream: Table::default(),
        records: Records {
            first: AtomicPtr::new(std::ptr::null_mut()),
        },
        slow: Mutex::new(Slow::default()),
    })
}

impl Tracker {
    fn slow(&self) -> std::sync::MutexGuard<'_, Slow> {
        self.slow.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The tracking object for `registration` on `stream`: a lock-free,
    /// allocation-free lookup once it exists.
    #[inline]
    pub(crate) fn object(
        &self,
        stream: StreamKey,
        registration: &Registration,
    ) -> &'static TrackObj {
        if let Some(TrackRef(t)) = self.by_stream.get(stream.get()) {
            if t.serves(registration) {
                return t;
            }
        }
        self.create(stream, registration)
    }

    #[cold]
    #[inline(never)]
    fn create(&self, stream: StreamKey, registration: &Registration) -> &'static TrackObj {
        // Before the first tracked alloc: block stamps come from the clock
        // thread's word (see `clock`).
        aclalloc_core::history::clock::ensure_ticker();
        let mut slow = self.slow();
        let key = (stream.get().get(), registration.pack());
        let object = match slow.objects.get(&key) {
            Some(&t) => t,
            None => {
                let allocator = registration.callbacks.obj.as_ptr() as usize;
                let state = match slow.states.get(&allocator) {
                    Some(&s) => s,
                    None => {
                        let s: &'static AllocState =
                            Box::leak(Box::new(AllocState::new(allocator)));
                        slow.states.insert(allocator, s);
                        self.append(&mut slow, s);
                        s
                    }
                };
                if let Some(mut inside) = state.enter(super::owner::NOT_A_STREAM) {
                    inside.note_stream(stream.get().get());
                }
                let reused = slow.spare.get_mut(&registration.pack()).and_then(Vec::pop);
                let t: &'static TrackObj = match reused {
                    Some(t) => {
                        t.stream.store(stream.get().get(), Ordering::Relaxed);
                        // The new stream may be on another device.
                        t.device.store(UNKNOWN_DEVICE, Ordering::Relaxed);
                        t
                    }
                    None => Box::leak(Box::new(TrackObj {
                        stream: AtomicUsize::new(stream.get().get()),
                        registration: *registration,
                        state,
                        device: AtomicI32::new(UNKNOWN_DEVICE),
                    })),
                };
                slow.objects.insert(key, t);
                FALLBACK_GET_ADDR.store(
                    registration.callbacks.get_addr_from_block as usize,
                    crate::base::sync::Ordering::Release,
                );
                t
            }
        };
        self.by_stream.insert(stream.get(), TrackRef(object));
        object
    }

    /// The record of a user allocator object, if it was ever tracked.
    pub(crate) fn state_of(&self, allocator: usize) -> Option<&'static AllocState> {
        self.slow().states.get(&allocator).copied()
    }

    /// Appends `state` to [`Tracker::records`]; `slow` is the tracker's
    /// lock, held, which makes this the list's only writer.
    fn append(&self, slow: &mut Slow, state: &'static AllocState) {
        let node: &'static RecordNode = Box::leak(Box::new(RecordNode {
            state,
            next: AtomicPtr::new(std::ptr::null_mut()),
        }));
        let link = match slow.last {
            Some(last) => &last.next,
            None => &self.records.first,
        };
        // Release: a reader that loads the link sees the node's fields.
        link.store(
            node as *const RecordNode as *mut RecordNode,
            Ordering::Release,
        );
        slow.last = Some(node);
    }

    /// Every allocator record, oldest first, read without locking.
    pub(crate) fn records(&self) -> &Records {
        &self.records
    }

    /// Every allocator record, oldest first.
    pub(crate) fn states(&self) -> Vec<&'static AllocState> {
        self.records.iter().collect()
    }

    /// Forgets which tracking object serves `stream` (its registration ended).
    pub(crate) fn forget_stream(&self, stream: StreamKey) {
        self.by_stream.remove(stream.get());
    }

    /// `stream` was destroyed: its objects become spares, and the allocator
    /// records list it no more (they count it among destroyed streams).
    pub(crate) fn stream_destroyed(&self, stream: StreamKey) {
        self.by_stream.remove(stream.get());
        let mut slow = self.slow();
        let slow = &mut *slow;
        let mut freed = Vec::new();
        slow.objects.retain(|&(s, reg), t| {
            let mine = s == stream.get().get();
            if mine {
                freed.push((reg, *t));
            }
            !mine
        });
        for (reg, t) in freed {
            if let Some(mut inside) = t.state.enter(super::owner::NOT_A_STREAM) {
                inside.stream_ended(stream.get().get());
            }
            slow.spare.entry(reg).or_default().push(t);
        }
    }
}
