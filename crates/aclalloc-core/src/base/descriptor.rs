//! An allocator descriptor: the user's allocator object and its callbacks, as
//! `aclrtAllocatorSet*ToDesc` fill it in, and the complete set a registration
//! keeps.

use super::error::{Error, Result};
use std::ffi::c_void;
use std::ptr::NonNull;

/// `void *alloc(aclrtAllocator allocator, size_t size)`: returns a block.
pub type AllocFn = unsafe extern "C" fn(allocator: *mut c_void, size: usize) -> *mut c_void;
/// `void free(aclrtAllocator allocator, aclrtAllocatorBlock block)`.
pub type FreeFn = unsafe extern "C" fn(allocator: *mut c_void, block: *mut c_void);
/// `void *allocAdvise(aclrtAllocator allocator, size_t size, aclrtAllocatorAddr addr)`:
/// a block, preferably at `addr`.
pub type AllocAdviseFn =
    unsafe extern "C" fn(allocator: *mut c_void, size: usize, addr: *mut c_void) -> *mut c_void;
/// `void *getAddrFromBlock(aclrtAllocatorBlock block)`: the device address of a block.
pub type GetAddrFromBlockFn = unsafe extern "C" fn(block: *mut c_void) -> *mut c_void;

/// The user's allocator object (`aclrtAllocator`). The library never looks
/// behind it; it only hands it back to the callbacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AllocatorObj(NonNull<c_void>);

// SAFETY: the pointer is an opaque token that this library never dereferences;
// whether the object behind it may be used from several threads is the
// allocator's own contract, as in CANN.
unsafe impl Send for AllocatorObj {}
// SAFETY: sharing `&AllocatorObj` only copies the token (as for `Send`).
unsafe impl Sync for AllocatorObj {}

impl AllocatorObj {
    /// Wraps a non-NULL allocator object pointer.
    pub fn new(ptr: *mut c_void) -> Option<Self> {
        NonNull::new(ptr).map(AllocatorObj)
    }

    /// Wraps a pointer known to be non-NULL.
    ///
    /// # Safety
    /// `ptr` is not NULL.
    #[inline]
    pub(crate) unsafe fn new_unchecked(ptr: *mut c_void) -> Self {
        // SAFETY: the caller's contract.
        AllocatorObj(unsafe { NonNull::new_unchecked(ptr) })
    }

    /// The pointer as the callbacks receive it.
    pub fn as_ptr(self) -> *mut c_void {
        self.0.as_ptr()
    }
}

/// A descriptor being filled in. A new one holds nothing; every field is set
/// separately, as with CANN's setters.
#[derive(Clone, Copy, Debug, Default)]
pub struct Descriptor {
    /// `aclrtAllocatorSetObjToDesc`.
    pub obj: Option<AllocatorObj>,
    /// `aclrtAllocatorSetAllocFuncToDesc`.
    pub alloc: Option<AllocFn>,
    /// `aclrtAllocatorSetFreeFuncToDesc`.
    pub free: Option<FreeFn>,
    /// `aclrtAllocatorSetAllocAdviseFuncToDesc` (optional for registration).
    pub alloc_advise: Option<AllocAdviseFn>,
    /// `aclrtAllocatorSetGetAddrFromBlockFuncToDesc`.
    pub get_addr_from_block: Option<GetAddrFromBlockFn>,
}

impl Descriptor {
    /// The callbacks a registration needs, or the first missing one, named as
    /// CANN's messages name it.
    pub fn callbacks(&self) -> Result<Callbacks> {
        let missing = |field| Error::NullPointer { param: field };
        Ok(Callbacks {
            obj: self.obj.ok_or(missing("allocatorDesc->obj"))?,
            alloc: self.alloc.ok_or(missing("allocatorDesc->allocFunc"))?,
            free: self.free.ok_or(missing("allocatorDesc->freeFunc"))?,
            alloc_advise: self.alloc_advise,
            get_addr_from_block: self
                .get_addr_from_block
                .ok_or(missing("allocatorDesc->getAddrFromBlockFunc"))?,
        })
    }
}

/// A complete allocator: everything a stream needs to take memory from it.
#[derive(Clone, Copy, Debug)]
pub struct Callbacks {
    /// Passed back as the first argument of `alloc`, `free` and `alloc_advise`.
    pub obj: AllocatorObj,
    /// Allocates a block.
    pub alloc: AllocFn,
    /// Returns a block.
    pub free: FreeFn,
    /// Allocates a block near a suggested address, when the allocator offers it.
    pub alloc_advise: Option<AllocAdviseFn>,
    /// Maps a block to its device address.
    pub get_addr_from_block: GetAddrFromBlockFn,
}

impl Callbacks {
    /// True when both hold the same object and the same functions: the
    /// identity CANN's `GetByStream` hands back.
    pub fn same_as(&self, other: &Callbacks) -> bool {
        self.obj == other.obj
            && self.alloc as usize == other.alloc as usize
            && self.free as usize == other.free as usize
            && self.alloc_advise.map(|f| f as usize) == other.alloc_advise.map(|f| f as usize)
            && self.get_addr_from_block as usize == other.get_addr_from_block as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Never inlined: identity is compared, so the addresses must be stable.
    #[inline(never)]
    unsafe extern "C" fn alloc(_: *mut c_void, _: usize) -> *mut c_void {
        std::ptr::null_mut()
    }
    #[inline(never)]
    unsafe extern "C" fn free(_: *mut c_void, _: *mut c_void) {}
    #[inline(never)]
    unsafe extern "C" fn get_addr(b: *mut c_void) -> *mut c_void {
        b
    }

    #[test]
    fn a_new_descriptor_is_empty_and_names_the_first_missing_field() {
        let mut d = Descriptor::default();
        assert!(d.obj.is_none() && d.alloc.is_none() && d.alloc_advise.is_none());
        let mut obj = 0u8;
        let missing = |d: &Descriptor| match d.callbacks() {
            Err(Error::NullPointer { param }) => param,
            other => panic!("expected a missing field, got {other:?}"),
        };
        assert_eq!(missing(&d), "allocatorDesc->obj");
        d.obj = AllocatorObj::new(&mut obj as *mut u8 as *mut c_void);
        assert_eq!(missing(&d), "allocatorDesc->allocFunc");
        d.alloc = Some(alloc);
        assert_eq!(missing(&d), "allocatorDesc->freeFunc");
        d.free = Some(free);
        assert_eq!(missing(&d), "allocatorDesc->getAddrFromBlockFunc");
        d.get_addr_from_block = Some(get_addr);
        let c = d.callbacks().expect("complete without allocAdvise");
        assert!(c.alloc_advise.is_none());
        assert!(c.same_as(&d.callbacks().unwrap()));
    }
}
