//! The ids the layers above share: a stream as the allocator API sees it,
//! and a descriptor handle.

use std::ffi::c_void;
use std::num::NonZeroUsize;

/// A stream, identified by its (non-NULL) handle. The allocator API treats
/// streams as opaque: any non-NULL pointer is one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamKey(NonZeroUsize);

impl StreamKey {
    pub(crate) fn from_value(value: NonZeroUsize) -> Self {
        StreamKey(value)
    }

    /// The key of a non-NULL stream handle.
    pub fn from_ptr(stream: *mut c_void) -> Option<Self> {
        NonZeroUsize::new(stream as usize).map(StreamKey)
    }

    /// The stream handle.
    pub fn as_ptr(self) -> *mut c_void {
        self.0.get() as *mut c_void
    }

    /// The handle as a number.
    pub fn get(self) -> NonZeroUsize {
        self.0
    }
}

/// The handle of a descriptor, as `aclrtAllocatorCreateDesc` returned it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DescriptorHandle(NonZeroUsize);

impl DescriptorHandle {
    /// A handle from its value; whether it is live is checked elsewhere.
    pub fn from_ptr(desc: *mut c_void) -> Option<Self> {
        NonZeroUsize::new(desc as usize).map(DescriptorHandle)
    }

    pub(crate) fn from_value(value: NonZeroUsize) -> Self {
        DescriptorHandle(value)
    }

    /// The handle as C sees it.
    pub fn as_ptr(self) -> *mut c_void {
        self.0.get() as *mut c_void
    }

    /// The handle as a number.
    pub fn get(self) -> usize {
        self.0.get()
    }
}
