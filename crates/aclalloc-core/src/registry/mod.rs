//! Which allocator serves which stream.
//!
//! [`StreamRegistry`] maps a stream to the [`Registration`] in force for it.
//! Lookups are on the launch path of every operator, so the map is a
//! [`Table`]: lock-free, allocation-free reads that never see a torn
//! entry, each stream's registration inline in its own cache line.

pub mod api;
pub mod observer;
pub mod order;

use crate::base::descriptor::GetAddrFromBlockFn;
use crate::base::descriptor::{AllocAdviseFn, AllocFn, AllocatorObj, Callbacks, FreeFn};
use crate::base::handles::Handle;
pub use crate::base::ids::{DescriptorHandle, StreamKey};
pub use crate::base::table::{Packed, Table, VALUE_WORDS};
use std::ffi::c_void;
use std::num::NonZeroUsize;

/// What `aclrtAllocatorRegister` recorded for a stream: the descriptor it was
/// given and a copy of that descriptor's contents at that moment.
#[derive(Clone, Copy, Debug)]
pub struct Registration {
    /// The descriptor that was registered (it may have been destroyed since).
    pub descriptor: DescriptorHandle,
    /// The allocator it held.
    pub callbacks: Callbacks,
}

// SAFETY: `unpack` only sees words produced by `pack`, where every function
// word came from a function pointer and the required ones are non-zero.
unsafe impl Packed for Registration {
    #[inline]
    fn pack(&self) -> [usize; VALUE_WORDS] {
        let c = &self.callbacks;
        [
            self.descriptor.get(),
            c.obj.as_ptr() as usize,
            c.alloc as usize,
            c.free as usize,
            c.alloc_advise.map_or(0, |f| f as usize),
            c.get_addr_from_block as usize,
        ]
    }

    #[inline]
    unsafe fn unpack(w: [usize; VALUE_WORDS]) -> Self {
        debug_assert!(w[0] != 0 && w[1] != 0 && w[2] != 0 && w[3] != 0 && w[5] != 0);
        // SAFETY: the words came from `pack`: words 0, 1, 2, 3 and 5 are
        // non-zero (a handle, an object, three function pointers), word 4 a
        // function pointer or zero, and `Option<fn>` has a zero niche. This
        // runs on every lookup, so it converts without re-checking.
        unsafe {
            Registration {
                descriptor: DescriptorHandle::from_value(NonZeroUsize::new_unchecked(w[0])),
                callbacks: Callbacks {
                    obj: AllocatorObj::new_unchecked(w[1] as *mut c_void),
                    alloc: std::mem::transmute::<usize, AllocFn>(w[2]),
                    free: std::mem::transmute::<usize, FreeFn>(w[3]),
                    alloc_advise: std::mem::transmute::<usize, Option<AllocAdviseFn>>(w[4]),
                    get_addr_from_block: std::mem::transmute::<usize, GetAddrFromBlockFn>(w[5]),
                },
            }
        }
    }
}

/// The stream → registration map.
#[derive(Default)]
pub struct StreamRegistry {
    table: Table<Registration, VALUE_WORDS>,
}

impl StreamRegistry {
    /// The registration in force for `stream`.
    #[inline]
    pub fn get(&self, stream: StreamKey) -> Option<Registration> {
        self.table.get(stream.get())
    }

    /// The registration of `stream` if a lookup that never waits finds it;
    /// `None` when it has none or a writer was in the way.
    #[inline]
    pub fn get_if_hit(&self, stream: StreamKey) -> Option<Registration> {
        self.table.try_get(stream.get()).flatten()
    }

    /// Makes `registration` the one in force for `stream`, returning the one it replaces.
    pub fn set(&self, stream: StreamKey, registration: Registration) -> Option<Registration> {
        self.table.insert(stream.get(), registration)
    }

    /// As [`StreamRegistry::set`], failing with [`crate::base::error::Error::BadAlloc`]
    /// (nothing changed) when the host has no memory for the map to grow.
    pub fn try_set(
        &self,
        stream: StreamKey,
        registration: Registration,
    ) -> crate::base::error::Result<Option<Registration>> {
        self.table
            .try_insert(stream.get(), registration)
            .map_err(|_| crate::base::error::Error::BadAlloc {
                what: "a stream's registration (the registration table could not grow)",
            })
    }

    /// Drops the registration of `stream`, returning it.
    pub fn remove(&self, stream: StreamKey) -> Option<Registration> {
        self.table.remove(stream.get())
    }

    /// The number of streams with a registration.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// True when no stream has a registration.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Every stream and its registration.
    pub fn entries(&self) -> Vec<(StreamKey, Registration)> {
        self.table
            .entries()
            .into_iter()
            .map(|(k, v)| (StreamKey::from_value(k), v))
            .collect()
    }
}
