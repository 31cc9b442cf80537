//! Memory pools of the default allocator for C (`aclallocMemPool*`):
//! PyTorch's `MemPool` and `use_mem_pool`.
//!
//! ```c
//! aclallocMemPool pool;
//! aclallocMemPoolCreate(NULL, &pool);
//! aclallocMemPoolBeginUse(pool, 0);
//! void *p;
//! aclallocDefaultMalloc(&p, 1 << 20, NULL);   // from `pool`
//! aclallocMemPoolEndUse(pool, 0);
//! aclallocDefaultFree(p);                      // back to `pool`
//! aclallocMemPoolDestroy(pool);                // its memory goes back
//! ```
#![allow(non_snake_case, non_camel_case_types)]

use crate::base::boundary::ffi_boundary;
use crate::base::error::{Error, Result};
use crate::default_allocator::mem_pool::{self, MemPoolHandle, MemPoolOptions};
use crate::ffi::cann::types::*;
use crate::ffi::ext::plugin::aclallocPluggable;
use crate::ffi::ext::pool::aclallocPool;
use crate::ffi::wiring::args::{self, write_text, Out, OutSlice};
use crate::plugin::PluggableHandle;
use std::ffi::{c_char, c_void};

/// A memory pool handle, from `aclallocMemPoolCreate`.
pub type aclallocMemPool = *mut c_void;

/// How a memory pool is made. A zeroed struct is the default: segments from
/// the device, no `useOnOom`, blocks split as usual, no tag.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct aclallocMemPoolOptions {
    /// NULL: segments from the device (`aclrtMalloc`); otherwise a live
    /// `aclallocPluggable` whose alloc and free give and take the pool's
    /// segments (it cannot be destroyed while the pool holds one).
    pub allocator: aclallocPluggable,
    /// 1: when the default pool of a device is out of memory, cached blocks
    /// of this pool on that device serve the request (PyTorch's `use_on_oom`).
    pub useOnOom: i32,
    /// 1: the pool's blocks are never split (each takes a segment of its own).
    pub noSplit: i32,
    /// NULL or a NUL-terminated label of what is allocated through the pool
    /// (copied): `aclallocSleep`/`aclallocWakeUp` act on pools by tag. With
    /// `allocator` it is only a label: that memory is the allocator's to give
    /// back.
    pub tag: *const c_char,
}

fn handle(pool: aclallocMemPool) -> Result<MemPoolHandle> {
    mem_pool::lookup(pool)
}

fn flag(value: i32, param: &'static str) -> Result<bool> {
    match value {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(Error::InvalidParam {
            param,
            reason: "It must be 0 or 1",
        }),
    }
}

/// Creates a memory pool (`options` NULL: the defaults). Its caching pool on
/// a device is made the first time it serves there, configured by
/// `ACLALLOC_ALLOC_CONF` as the default pools are.
///
/// Errors: NULL `pool`, a dead `options->allocator`, a flag other than 0 or
/// 1, a tag that is not UTF-8: `ACL_ERROR_INVALID_PARAM`; `*pool` is written
/// only on success.
///
/// # Safety
/// `options` is NULL or readable, its `tag` NULL or NUL-terminated; `pool`
/// is writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocMemPoolCreate(
    options: *const aclallocMemPoolOptions,
    pool: *mut aclallocMemPool,
) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: `pool` is NULL or writable (the caller's contract); `Out::required`
        // refuses NULL.
        let out = unsafe { Out::required(pool, "pool") }?;
        // SAFETY: `options` is NULL or readable (the caller's contract).
        let given = unsafe { args::optional_input(options) };
        let mut made = MemPoolOptions::default();
        if let Some(o) = given {
            if !o.allocator.is_null() {
                made.allocator = Some(PluggableHandle::from_ptr(o.allocator).ok_or(
                    Error::InvalidParam {
                        param: "options->allocator",
                        reason: "It is not a live pluggable allocator",
                    },
                )?);
            }
            made.use_on_oom = flag(o.useOnOom, "options->useOnOom")?;
            made.no_split = flag(o.noSplit, "options->noSplit")?;
            // SAFETY: `tag` is NULL or NUL-terminated (the caller's contract).
            if let Some(tag) = unsafe { args::optional_cstr(o.tag) } {
                let tag = tag.to_str().map_err(|_| Error::InvalidParam {
                    param: "options->tag",
                    reason: "It is not UTF-8 text",
                })?;
                made.tag = Some(tag.to_owned());
            }
        }
        let created = mem_pool::create(made)?;
        out.write(created.as_ptr());
        Ok(())
    })
}

/// Destroys a memory pool: the handle is dead at once; the pool's memory on
/// each device goes back (to the device or its pluggable allocator) when its
/// last block is freed, at once when none is allocated. Blocks stay valid
/// until freed with `aclallocDefaultFree`. While a use of it has not ended
/// (`aclallocMemPoolEndUse`): `ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED`,
/// nothing changes.
#[no_mangle]
pub extern "C" fn aclallocMemPoolDestroy(pool: aclallocMemPool) -> aclError {
    ffi_boundary!(|| { mem_pool::destroy(handle(pool)?) })
}

/// The pool's id, unique in the process and never 0 (PyTorch's
/// `MemPool.id` is `(0, id)`).
///
/// # Safety
/// `id` must be writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocMemPoolGetId(pool: aclallocMemPool, id: *mut u64) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: the caller's contract.
        unsafe { args::write_out(id, "id", || mem_pool::id(handle(pool)?)) }
    })
}

/// PyTorch's `MemPool.use_count()`: 1 for the pool, plus each use begun
/// and not ended, on any thread.
///
/// # Safety
/// `count` must be writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocMemPoolUseCount(
    pool: aclallocMemPool,
    count: *mut u64,
) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: the caller's contract.
        unsafe {
            args::write_out(count, "count", || {
                Ok(mem_pool::use_count(handle(pool)?)? as u64)
            })
        }
    })
}

/// Begins a use of the pool on `deviceId` (PyTorch's `use_mem_pool`): until
/// the matching `aclallocMemPoolEndUse`, the calling thread's
/// `aclallocDefaultMalloc` on that device (its current device) comes from
/// the pool. Uses nest: the innermost on a device wins. Other threads and
/// launch workspaces are not routed. A bad device:
/// `ACL_ERROR_RT_INVALID_DEVICEID`.
#[no_mangle]
pub extern "C" fn aclallocMemPoolBeginUse(pool: aclallocMemPool, deviceId: i32) -> aclError {
    ffi_boundary!(|| { mem_pool::begin_use(handle(pool)?, deviceId) })
}

/// Ends the calling thread's innermost use of the pool on `deviceId`. None
/// begun on this thread: `ACL_ERROR_INVALID_PARAM`.
#[no_mangle]
pub extern "C" fn aclallocMemPoolEndUse(pool: aclallocMemPool, deviceId: i32) -> aclError {
    ffi_boundary!(|| { mem_pool::end_use(handle(pool)?, deviceId) })
}

/// The pool's segments on every device as JSON:
/// `{"version":2,"id":N,"segments":[...]}`, each segment as in
/// `aclallocPoolSnapshot`. Buffer handling as `aclallocPoolSummary`
/// (`snprintf`'s: `*length` is the full length).
///
/// # Safety
/// `buffer` is NULL (with `size` 0) or `size` writable bytes; `length` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocMemPoolSnapshot(
    pool: aclallocMemPool,
    buffer: *mut c_char,
    size: usize,
    length: *mut usize,
) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: the caller's contract.
        let buffer = unsafe { OutSlice::new(buffer, size, "buffer") }?;
        // SAFETY: the caller's contract.
        let length = unsafe { Out::optional(length) };
        let text = mem_pool::snapshot(handle(pool)?)?;
        args::write_optional(length, text.len());
        write_text(buffer, &text);
        Ok(())
    })
}

/// The caching pool (`aclallocPool`) of the memory pool on `deviceId`, for
/// its statistics (`aclallocPoolGetStats`, ...); NULL when the memory pool
/// has not served on that device. Do not destroy it: the memory pool does.
///
/// # Safety
/// `devicePool` must be writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocMemPoolGetDevicePool(
    pool: aclallocMemPool,
    deviceId: i32,
    devicePool: *mut aclallocPool,
) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: the caller's contract.
        unsafe {
            args::write_out(devicePool, "devicePool", || {
                Ok(mem_pool::device_pool(handle(pool)?, deviceId)?
                    .map_or(std::ptr::null_mut(), |h| h as *mut c_void))
            })
        }
    })
}

/// The caching pools (`aclallocPool`) of every memory pool on `deviceId`,
/// including destroyed memory pools whose blocks are not all freed: what a
/// device's statistics add to its default pool's (PyTorch counts every pool
/// of a device). Writes at most `capacity` handles to `pools` (NULL when
/// `capacity` is 0) and the full count to `*count`.
///
/// # Safety
/// `pools` is NULL or `capacity` writable handles; `count` is writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocMemPoolListDevicePools(
    deviceId: i32,
    pools: *mut aclallocPool,
    capacity: usize,
    count: *mut usize,
) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: the caller's contract.
        let out = unsafe { OutSlice::new(pools, capacity, "pools") }?;
        // SAFETY: the caller's contract.
        let count = unsafe { Out::required(count, "count") }?;
        let handles = mem_pool::device_pools(deviceId)?;
        count.write(handles.len());
        out.fill(handles.into_iter().map(|h| h as *mut c_void));
        Ok(())
    })
}

/// Makes the pool serve every allocation of the default allocator on
/// `stream` and `deviceId`, from any thread, until
/// `aclallocMemPoolEndAllocateToPool`: torch_npu's `beginAllocateToPool`
/// with a filter that picks the capturing stream. Raw allocations naming
/// the stream (`aclallocDefaultMalloc`) and the workspaces of launches on it
/// that no registered allocator serves come from the pool. A model captured
/// on the stream meanwhile holds a use of the pool until it is destroyed,
/// so several models can share one pool; once no route and no model uses
/// it, the pool gives its free memory back to the device (a failed or
/// abandoned capture included). Counts as a use of the pool (it cannot be
/// destroyed until the route ends).
///
/// Errors: NULL `stream`, a stream already routed on that device:
/// `ACL_ERROR_INVALID_PARAM`; a bad device: `ACL_ERROR_RT_INVALID_DEVICEID`.
#[no_mangle]
pub extern "C" fn aclallocMemPoolBeginAllocateToPool(
    pool: aclallocMemPool,
    deviceId: i32,
    stream: aclrtStream,
) -> aclError {
    ffi_boundary!(|| {
        let stream = args::stream(stream)?;
        mem_pool::begin_allocate_to_pool(handle(pool)?, deviceId, stream.get().get())
    })
}

/// Ends the route `aclallocMemPoolBeginAllocateToPool` began (torch_npu's
/// `endAllocateToPool`); the pool gives its free memory back if no captured
/// model uses it. A stream not routed to the pool on that device:
/// `ACL_ERROR_INVALID_PARAM`.
#[no_mangle]
pub extern "C" fn aclallocMemPoolEndAllocateToPool(
    pool: aclallocMemPool,
    deviceId: i32,
    stream: aclrtStream,
) -> aclError {
    ffi_boundary!(|| {
        let stream = args::stream(stream)?;
        mem_pool::end_allocate_to_pool(handle(pool)?, deviceId, stream.get().get())
    })
}

/// How many captured models hold memory of the pool now (each a use that
/// ends when the model is destroyed or its capture fails).
///
/// # Safety
/// `count` must be writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocMemPoolGraphCount(
    pool: aclallocMemPool,
    count: *mut u64,
) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: the caller's contract.
        unsafe {
            args::write_out(count, "count", || {
                Ok(mem_pool::graph_count(handle(pool)?)? as u64)
            })
        }
    })
}
