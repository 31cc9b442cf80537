//! The allocator-descriptor and register API, in safe Rust.
//!
//! [`AllocatorApi`] holds the live descriptors and the stream registrations.
//! The C functions (`aclrtAllocator*`) use the process-wide instance,
//! [`global`]; tests and embedders may make their own.
//!
//! ```
//! use aclalloc_core::base::descriptor::AllocatorObj;
//! use aclalloc_core::registry::{api::AllocatorApi, StreamKey};
//! use std::ffi::c_void;
//!
//! unsafe extern "C" fn alloc(_obj: *mut c_void, size: usize) -> *mut c_void {
//!     Box::into_raw(vec![0u8; size].into_boxed_slice()) as *mut c_void
//! }
//! unsafe extern "C" fn free(_obj: *mut c_void, _block: *mut c_void) {}
//! unsafe extern "C" fn addr(block: *mut c_void) -> *mut c_void { block }
//!
//! let api = AllocatorApi::new();
//! let mut pool = 0u8;
//! let desc = api.create_descriptor().unwrap();
//! api.update_descriptor(desc, |d| {
//!     d.obj = AllocatorObj::new(&mut pool as *mut u8 as *mut c_void);
//!     d.alloc = Some(alloc);
//!     d.free = Some(free);
//!     d.get_addr_from_block = Some(addr);
//! })
//! .unwrap();
//!
//! let mut stream_storage = 0u8;
//! let stream = StreamKey::from_ptr(&mut stream_storage as *mut u8 as *mut c_void).unwrap();
//! api.register(stream, desc).unwrap();
//! let found = api.get_by_stream(stream).unwrap();
//! assert_eq!(found.descriptor, desc);
//! api.unregister(stream).unwrap();
//! assert!(api.get_by_stream(stream).is_err());
//! ```

use super::{DescriptorHandle, Registration, StreamKey, StreamRegistry};
use crate::base::descriptor::Descriptor;
use crate::base::error::{Error, Result};
use crate::base::handles::HandleTable;
use std::sync::OnceLock;

const NOT_A_DESCRIPTOR: Error = Error::InvalidParam {
    param: "allocatorDesc",
    reason: "It is not a live allocator descriptor (it was destroyed, or was never returned by aclrtAllocatorCreateDesc)",
};

/// Live descriptors and the registrations made from them.
pub struct AllocatorApi {
    descriptors: HandleTable<DescriptorHandle, Descriptor>,
    streams: StreamRegistry,
}

impl Default for AllocatorApi {
    fn default() -> Self {
        Self::new()
    }
}

impl AllocatorApi {
    /// An API instance with no descriptors and no registrations.
    pub fn new() -> Self {
        AllocatorApi {
            descriptors: HandleTable::new(),
            streams: StreamRegistry::default(),
        }
    }

    /// `aclrtAllocatorCreateDesc`: a new, empty descriptor.
    pub fn create_descriptor(&self) -> Result<DescriptorHandle> {
        self.descriptors
            .insert(Descriptor::default())
            .map_err(|e| match e {
                Error::BadAlloc { .. } => Error::BadAlloc {
                    what: "an allocator descriptor",
                },
                other => other,
            })
    }

    /// `aclrtAllocatorDestroyDesc`. Registrations made from it stay.
    pub fn destroy_descriptor(&self, desc: DescriptorHandle) -> Result<()> {
        self.descriptors
            .remove(desc)
            .map(drop)
            .ok_or(NOT_A_DESCRIPTOR)
    }

    /// Changes a live descriptor (the `aclrtAllocatorSet*ToDesc` functions).
    pub fn update_descriptor(
        &self,
        desc: DescriptorHandle,
        change: impl FnOnce(&mut Descriptor),
    ) -> Result<()> {
        self.descriptors
            .with_mut(desc, change)
            .ok_or(NOT_A_DESCRIPTOR)
    }

    /// A copy of a live descriptor's contents.
    pub fn descriptor(&self, desc: DescriptorHandle) -> Result<Descriptor> {
        self.descriptors.with(desc, |d| *d).ok_or(NOT_A_DESCRIPTOR)
    }

    /// The number of live descriptors.
    pub fn live_descriptors(&self) -> usize {
        self.descriptors.len()
    }

    /// `aclrtAllocatorRegister`: the descriptor's current contents serve
    /// `stream` from now on; later changes to the descriptor need a new one.
    pub fn register(&self, stream: StreamKey, desc: DescriptorHandle) -> Result<()> {
        let callbacks = self.descriptor(desc)?.callbacks()?;
        let registration = Registration {
            descriptor: desc,
            callbacks,
        };
        self.streams.try_set(stream, registration).map(drop)
    }

    /// `aclrtAllocatorGetByStream`: the registration in force for `stream`.
    #[inline]
    pub fn get_by_stream(&self, stream: StreamKey) -> Result<Registration> {
        self.streams.get(stream).ok_or(Error::StreamNotRegistered)
    }

    /// `aclrtAllocatorUnregister`: drops the registration of `stream`, if any, and returns it.
    pub fn unregister(&self, stream: StreamKey) -> Result<Option<Registration>> {
        Ok(self.streams.remove(stream))
    }

    /// The stream → registration map itself.
    pub fn streams(&self) -> &StreamRegistry {
        &self.streams
    }
}

static GLOBAL: OnceLock<AllocatorApi> = OnceLock::new();

/// The process-wide instance behind the C functions.
pub fn global() -> &'static AllocatorApi {
    GLOBAL.get_or_init(AllocatorApi::new)
}

/// The process-wide instance if it is built (one load, no call); `None`
/// before the first export that needs it has run.
#[inline]
pub fn initialised() -> Option<&'static AllocatorApi> {
    GLOBAL.get()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::descriptor::AllocatorObj;
    use std::ffi::c_void;

    #[inline(never)] // a stable address: identity is compared
    unsafe extern "C" fn alloc_a(_: *mut c_void, _: usize) -> *mut c_void {
        std::ptr::null_mut()
    }
    #[inline(never)] // a stable address: identity is compared
    unsafe extern "C" fn alloc_b(_: *mut c_void, _: usize) -> *mut c_void {
        std::ptr::dangling_mut()
    }
    #[inline(never)] // a stable address: identity is compared
    unsafe extern "C" fn free(_: *mut c_void, _: *mut c_void) {}
    #[inline(never)] // a stable address: identity is compared
    unsafe extern "C" fn get_addr(b: *mut c_void) -> *mut c_void {
        b
    }

    fn stream(n: usize) -> StreamKey {
        StreamKey::from_ptr((n * 8) as *mut c_void).unwrap()
    }

    fn complete(api: &AllocatorApi, obj: usize) -> DescriptorHandle {
        let d = api.create_descriptor().unwrap();
        api.update_descriptor(d, |d| {
            d.obj = AllocatorObj::new(obj as *mut c_void);
            d.alloc = Some(alloc_a);
            d.free = Some(free);
            d.get_addr_from_block = Some(get_addr);
        })
        .unwrap();
        d
    }

    #[test]
    fn register_copies_the_descriptor_and_the_last_registration_wins() {
        let api = AllocatorApi::new();
        let d1 = complete(&api, 0x100);
        let d2 = complete(&api, 0x200);
        api.register(stream(1), d1).unwrap();
        api.update_descriptor(d1, |d| d.alloc = Some(alloc_b))
            .unwrap();
        let r = api.get_by_stream(stream(1)).unwrap();
        assert_eq!(
            r.callbacks.alloc as usize, alloc_a as *const () as usize,
            "a copy was taken"
        );
        api.register(stream(1), d2).unwrap();
        let r = api.get_by_stream(stream(1)).unwrap();
        assert_eq!(r.descriptor, d2);
        assert_eq!(r.callbacks.obj.as_ptr() as usize, 0x200);
    }

    #[test]
    fn destroyed_descriptors_are_refused_but_their_registrations_stay() {
        let api = AllocatorApi::new();
        let d = complete(&api, 0x100);
        api.register(stream(2), d).unwrap();
        api.destroy_descriptor(d).unwrap();
        assert_eq!(api.destroy_descriptor(d), Err(NOT_A_DESCRIPTOR));
        assert_eq!(api.update_descriptor(d, |_| ()), Err(NOT_A_DESCRIPTOR));
        assert_eq!(api.register(stream(3), d), Err(NOT_A_DESCRIPTOR));
        assert_eq!(api.get_by_stream(stream(2)).unwrap().descriptor, d);
        assert_eq!(api.live_descriptors(), 0);
    }

    #[test]
    fn an_incomplete_descriptor_registers_nothing() {
        let api = AllocatorApi::new();
        let d = api.create_descriptor().unwrap();
        assert_eq!(
            api.register(stream(4), d),
            Err(Error::NullPointer {
                param: "allocatorDesc->obj"
            })
        );
        assert_eq!(
            api.get_by_stream(stream(4)).unwrap_err(),
            Error::StreamNotRegistered
        );
        assert!(api.streams().is_empty());
    }

    #[test]
    fn unregister_is_a_no_op_for_unknown_streams() {
        let api = AllocatorApi::new();
        assert!(api.unregister(stream(5)).unwrap().is_none());
        let d = complete(&api, 0x100);
        api.register(stream(5), d).unwrap();
        assert!(api.unregister(stream(5)).unwrap().is_some());
        assert!(api.get_by_stream(stream(5)).is_err());
    }
}
