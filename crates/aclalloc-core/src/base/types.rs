//! CANN's C types, spelled as `acl_base.h` and `acl_rt_allocator.h` spell them.
#![allow(non_camel_case_types, non_snake_case)]

use std::ffi::{c_int, c_void};

pub use crate::base::error::aclError;

/// A stream handle.
pub type aclrtStream = *mut c_void;
/// A data buffer (`aclCreateDataBuffer`): C holds only pointers to it. On
/// the host runtime a pointer is a number looked up among the live
/// buffers, never dereferenced.
pub struct aclDataBuffer {
    _opaque: [u8; 0],
}
/// A kernel function's handle, from `aclrtBinaryGetFunction`; on the host
/// runtime a number looked up among the live handles, never a pointer.
pub type aclrtFuncHandle = *mut c_void;
/// A loaded kernel binary's handle, from `aclrtBinaryLoadFromFile`.
pub type aclrtBinHandle = *mut c_void;
/// A kernel argument list's handle, from `aclrtKernelArgsInit`.
pub type aclrtArgsHandle = *mut c_void;
/// One argument of an argument list, from `aclrtKernelArgsAppend` or
/// `aclrtKernelArgsAppendPlaceHolder`.
pub type aclrtParamHandle = *mut c_void;
/// An allocator descriptor handle, from `aclrtAllocatorCreateDesc`.
pub type aclrtAllocatorDesc = *mut c_void;
/// The user's allocator object.
pub type aclrtAllocator = *mut c_void;
/// A block handed out by the user's allocator.
pub type aclrtAllocatorBlock = *mut c_void;
/// A device address.
pub type aclrtAllocatorAddr = *mut c_void;

/// Allocates a block of at least `size` bytes; NULL on failure.
pub type aclrtAllocatorAllocFunc =
    Option<unsafe extern "C" fn(allocator: aclrtAllocator, size: usize) -> *mut c_void>;
/// Returns a block to the allocator.
pub type aclrtAllocatorFreeFunc =
    Option<unsafe extern "C" fn(allocator: aclrtAllocator, block: aclrtAllocatorBlock)>;
/// Allocates a block of at least `size` bytes, preferably at `addr`.
pub type aclrtAllocatorAllocAdviseFunc = Option<
    unsafe extern "C" fn(
        allocator: aclrtAllocator,
        size: usize,
        addr: aclrtAllocatorAddr,
    ) -> *mut c_void,
>;
/// The device address of a block.
pub type aclrtAllocatorGetAddrFromBlockFunc =
    Option<unsafe extern "C" fn(block: aclrtAllocatorBlock) -> *mut c_void>;

/// A context handle, from `aclrtCreateContext` or `aclrtGetCurrentContext`.
pub type aclrtContext = *mut c_void;

/// The direction of a copy (`aclrtMemcpyKind` in CANN's `acl_rt.h`).
pub type aclrtMemcpyKind = c_int;
/// Host to host.
pub const ACL_MEMCPY_HOST_TO_HOST: aclrtMemcpyKind = 0;
/// Host to device.
pub const ACL_MEMCPY_HOST_TO_DEVICE: aclrtMemcpyKind = 1;
/// Device to host.
pub const ACL_MEMCPY_DEVICE_TO_HOST: aclrtMemcpyKind = 2;
/// Device to device.
pub const ACL_MEMCPY_DEVICE_TO_DEVICE: aclrtMemcpyKind = 3;
/// Whichever the addresses say.
pub const ACL_MEMCPY_DEFAULT: aclrtMemcpyKind = 4;
/// Host to device through a buffer (not supported by the host runtime).
pub const ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE: aclrtMemcpyKind = 5;
/// Within one device (not supported by the host runtime).
pub const ACL_MEMCPY_INNER_DEVICE_TO_DEVICE: aclrtMemcpyKind = 6;
/// Between devices (not supported by the host runtime).
pub const ACL_MEMCPY_INTER_DEVICE_TO_DEVICE: aclrtMemcpyKind = 7;

/// How device memory is allocated (`aclrtMemMallocPolicy`); on the host every
/// policy gives page-aligned, lazily backed memory.
pub type aclrtMemMallocPolicy = c_int;
/// Huge pages first, normal pages if none are left.
pub const ACL_MEM_MALLOC_HUGE_FIRST: aclrtMemMallocPolicy = 0;
/// Huge pages only.
pub const ACL_MEM_MALLOC_HUGE_ONLY: aclrtMemMallocPolicy = 1;
/// Normal pages only.
pub const ACL_MEM_MALLOC_NORMAL_ONLY: aclrtMemMallocPolicy = 2;
/// Huge pages first, for peer-to-peer use.
pub const ACL_MEM_MALLOC_HUGE_FIRST_P2P: aclrtMemMallocPolicy = 3;
/// Huge pages only, for peer-to-peer use.
pub const ACL_MEM_MALLOC_HUGE_ONLY_P2P: aclrtMemMallocPolicy = 4;
/// Normal pages only, for peer-to-peer use.
pub const ACL_MEM_MALLOC_NORMAL_ONLY_P2P: aclrtMemMallocPolicy = 5;
/// 1 GiB huge pages only.
pub const ACL_MEM_MALLOC_HUGE1G_ONLY: aclrtMemMallocPolicy = 6;
/// 1 GiB huge pages only, for peer-to-peer use.
pub const ACL_MEM_MALLOC_HUGE1G_ONLY_P2P: aclrtMemMallocPolicy = 7;
/// Low-bandwidth memory (a flag to combine with a policy).
pub const ACL_MEM_TYPE_LOW_BAND_WIDTH: aclrtMemMallocPolicy = 0x0100;
/// High-bandwidth memory (a flag to combine with a policy).
pub const ACL_MEM_TYPE_HIGH_BAND_WIDTH: aclrtMemMallocPolicy = 0x1000;
/// Read-only from user space (a flag to combine with a policy).
pub const ACL_MEM_ACCESS_USER_SPACE_READONLY: aclrtMemMallocPolicy = 0x100000;

/// Which memory `aclrtGetMemInfo` reports (`aclrtMemAttr`); on the host every
/// value reports the device's one memory.
pub type aclrtMemAttr = c_int;
/// DDR memory.
pub const ACL_DDR_MEM: aclrtMemAttr = 0;
/// HBM memory.
pub const ACL_HBM_MEM: aclrtMemAttr = 1;
/// DDR memory, huge pages.
pub const ACL_DDR_MEM_HUGE: aclrtMemAttr = 2;
/// DDR memory, normal pages.
pub const ACL_DDR_MEM_NORMAL: aclrtMemAttr = 3;
/// HBM memory, huge pages.
pub const ACL_HBM_MEM_HUGE: aclrtMemAttr = 4;
/// HBM memory, normal pages.
pub const ACL_HBM_MEM_NORMAL: aclrtMemAttr = 5;
/// DDR memory, peer-to-peer, huge pages.
pub const ACL_DDR_MEM_P2P_HUGE: aclrtMemAttr = 6;
/// DDR memory, peer-to-peer, normal pages.
pub const ACL_DDR_MEM_P2P_NORMAL: aclrtMemAttr = 7;
/// HBM memory, peer-to-peer, huge pages.
pub const ACL_HBM_MEM_P2P_HUGE: aclrtMemAttr = 8;
/// HBM memory, peer-to-peer, normal pages.
pub const ACL_HBM_MEM_P2P_NORMAL: aclrtMemAttr = 9;
/// HBM memory, 1 GiB pages.
pub const ACL_HBM_MEM_HUGE1G: aclrtMemAttr = 10;
/// HBM memory, peer-to-peer, 1 GiB pages.
pub const ACL_HBM_MEM_P2P_HUGE1G: aclrtMemAttr = 11;
/// Memory, normal pages.
pub const ACL_MEM_NORMAL: aclrtMemAttr = 12;
/// Memory, huge pages.
pub const ACL_MEM_HUGE: aclrtMemAttr = 13;
/// Memory, 1 GiB pages.
pub const ACL_MEM_HUGE1G: aclrtMemAttr = 14;
/// Memory, peer-to-peer, normal pages.
pub const ACL_MEM_P2P_NORMAL: aclrtMemAttr = 15;
/// Memory, peer-to-peer, huge pages.
pub const ACL_MEM_P2P_HUGE: aclrtMemAttr = 16;
/// Memory, peer-to-peer, 1 GiB pages.
pub const ACL_MEM_P2P_HUGE1G: aclrtMemAttr = 17;

/// `aclrtCreateStreamWithConfig` flag (accepted, no effect on the host).
pub const ACL_STREAM_FAST_LAUNCH: u32 = 0x0000_0001;
/// `aclrtCreateStreamWithConfig` flag (accepted, no effect on the host).
pub const ACL_STREAM_FAST_SYNC: u32 = 0x0000_0002;
/// `aclrtCreateStreamWithConfig` flag (accepted, no effect on the host).
pub const ACL_STREAM_PERSISTENT: u32 = 0x0000_0004;
/// `aclrtCreateStreamWithConfig` flag (accepted, no effect on the host).
pub const ACL_STREAM_HUGE: u32 = 0x0000_0008;
/// `aclrtCreateStreamWithConfig` flag (accepted, no effect on the host).
pub const ACL_STREAM_CPU_SCHEDULE: u32 = 0x0000_0010;
/// `aclrtCreateStreamWithConfig` flag (accepted, no effect on the host).
pub const ACL_STREAM_DEVICE_USE_ONLY: u32 = 0x0000_0020;

/// A host "kernel" for `aclallocLaunchKernel`, run on the stream's worker
/// with the workspace (NULL when its size is 0), its size and `userData`.
pub type aclallocKernelFunc =
    Option<unsafe extern "C" fn(workspace: *mut c_void, size: usize, userData: *mut c_void)>;

/// Which block of a launch a host stand-in of a kernel runs
/// ([`aclallocKernelStandIn`]): the stand-in is called once per block, in
/// order, as the device runs the kernel once per AI Core.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct aclallocKernelBlock {
    /// This block's index, from 0 (AscendC's `GetBlockIdx()`).
    pub blockIdx: u32,
    /// The launch's `numBlocks` (AscendC's `GetBlockNum()`).
    pub numBlocks: u32,
}

/// The host stand-in of kernel `NAME` in a kernel binary for the host
/// runtime: a shared object that exports it as `aclallocKernel_NAME`
/// (C linkage), found by `aclrtBinaryGetFunction(bin, "NAME", ...)` and
/// run by `aclrtLaunchKernelWithConfig` on the stream's worker, once per
/// block. `args` is the argument list as CANN lays it out for the kernel:
/// each appended value at the next 8-byte-aligned offset, each placeholder
/// an 8-byte pointer to its data; `argsSize` its size in bytes. The list
/// is the launch's own copy, valid for the call.
pub type aclallocKernelStandIn = Option<
    unsafe extern "C" fn(args: *mut c_void, argsSize: usize, block: *const aclallocKernelBlock),
>;
// ---- Virtual memory (`acl_rt.h`: aclrtReserveMemAddress and friends) ----

/// A physical memory handle from `aclrtMallocPhysical`; on the host runtime
/// a number looked up among the live handles, never a pointer.
pub type aclrtDrvMemHandle = *mut c_void;

/// Where memory lives (`aclrtMemLocationType`).
pub type aclrtMemLocationType = c_int;
/// Host memory (reserved by CANN; refused by the host runtime).
pub const ACL_MEM_LOCATION_TYPE_HOST: aclrtMemLocationType = 0;
/// Device memory.
pub const ACL_MEM_LOCATION_TYPE_DEVICE: aclrtMemLocationType = 1;
/// Unregistered memory.
pub const ACL_MEM_LOCATION_TYPE_UNREGISTERED: aclrtMemLocationType = 2;
/// Managed memory.
pub const ACL_MEM_LOCATION_TYPE_MANAGED: aclrtMemLocationType = 3;
/// Host memory of a NUMA node.
pub const ACL_MEM_LOCATION_TYPE_HOST_NUMA: aclrtMemLocationType = 4;

/// The kind of handle physical memory can be exported as (`aclrtMemHandleType`).
pub type aclrtMemHandleType = c_int;
/// Not exportable.
pub const ACL_MEM_HANDLE_TYPE_NONE: aclrtMemHandleType = 0;
/// A POSIX file descriptor.
pub const ACL_MEM_HANDLE_TYPE_POSIX: aclrtMemHandleType = 2;

/// How physical memory is allocated (`aclrtMemAllocationType`).
pub type aclrtMemAllocationType = c_int;
/// Pinned memory, the only type.
pub const ACL_MEM_ALLOCATION_TYPE_PINNED: aclrtMemAllocationType = 0;

/// Which granularity `aclrtMemGetAllocationGranularity` reports (`aclrtMemGranularityOptions`).
pub type aclrtMemGranularityOptions = c_int;
/// The smallest size physical memory and mappings may have.
pub const ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM: aclrtMemGranularityOptions = 0;
/// The size recommended for performance.
pub const ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED: aclrtMemGranularityOptions = 1;
/// Not a valid option.
pub const ACL_RT_MEM_ALLOC_GRANULARITY_UNDEF: aclrtMemGranularityOptions = 0xFFFF;

/// A device or host location (`aclrtMemLocation`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct aclrtMemLocation {
    /// The device id (for `ACL_MEM_LOCATION_TYPE_DEVICE`).
    pub id: u32,
    /// An `aclrtMemLocationType`.
    pub r#type: aclrtMemLocationType,
}

/// A stream-ordered memory pool (`aclrtMemPool`, `acl/acl_rt_memory_soma.h`).
pub type aclrtMemPool = *mut c_void;

/// An attribute of a stream-ordered memory pool (`aclrtMemPoolAttr`).
pub type aclrtMemPoolAttr = c_int;
/// `uint32_t`, 1 or 0: a stream reuses what another stream freed once it
/// waited on an event recorded after the free.
pub const ACL_RT_MEM_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES: aclrtMemPoolAttr = 0x1;
/// `uint32_t`, 1 or 0: a stream reuses what another stream freed once that
/// free has run.
pub const ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC: aclrtMemPoolAttr = 0x2;
/// `uint32_t`, 1 or 0: the runtime may make a stream wait for the stream
/// that freed a block, to reuse it.
pub const ACL_RT_MEM_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES: aclrtMemPoolAttr = 0x3;
/// `uint64_t`, default 0: free memory the pool keeps at a synchronize.
pub const ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD: aclrtMemPoolAttr = 0x4;
/// `uint64_t`, read-only: memory the pool holds from the device.
pub const ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT: aclrtMemPoolAttr = 0x5;
/// `uint64_t`: the peak of the above; only 0 may be written (a reset).
pub const ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_HIGH: aclrtMemPoolAttr = 0x6;
/// `uint64_t`, read-only: memory allocated from the pool and not freed.
pub const ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT: aclrtMemPoolAttr = 0x7;
/// `uint64_t`: the peak of the above; only 0 may be written (a reset).
pub const ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH: aclrtMemPoolAttr = 0x8;

/// How `aclrtMemPoolCreate` makes a pool (`aclrtMemPoolProps`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct aclrtMemPoolProps {
    /// An `aclrtMemAllocationType`: `ACL_MEM_ALLOCATION_TYPE_PINNED`.
    pub allocType: aclrtMemAllocationType,
    /// An `aclrtMemHandleType`: `ACL_MEM_HANDLE_TYPE_NONE`.
    pub handleType: aclrtMemHandleType,
    /// A device (`ACL_MEM_LOCATION_TYPE_DEVICE` and its id).
    pub location: aclrtMemLocation,
    /// The most the pool may hold from the device (0: the device's size).
    pub maxSize: usize,
    /// Reserved: every byte 0.
    pub reserved: [u8; 32],
}

// CANN's layout (acl_rt_memory_soma.h): four 4-byte fields, size_t, 32 bytes.
const _: () = {
    assert!(std::mem::offset_of!(aclrtMemPoolProps, handleType) == 4);
    assert!(std::mem::offset_of!(aclrtMemPoolProps, location) == 8);
    assert!(std::mem::offset_of!(aclrtMemPoolProps, maxSize) == 16);
    assert!(std::mem::offset_of!(aclrtMemPoolProps, reserved) == 24);
    assert!(std::mem::size_of::<aclrtMemPoolProps>() == 56);
};

/// What physical memory `aclrtMallocPhysical` allocates (`aclrtPhysicalMemProp`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct aclrtPhysicalMemProp {
    /// An `aclrtMemHandleType`.
    pub handleType: aclrtMemHandleType,
    /// An `aclrtMemAllocationType`.
    pub allocationType: aclrtMemAllocationType,
    /// An `aclrtMemAttr` (every value is the same memory on the host).
    pub memAttr: aclrtMemAttr,
    /// Where the memory lives.
    pub location: aclrtMemLocation,
    /// Reserved.
    pub reserve: u64,
}
