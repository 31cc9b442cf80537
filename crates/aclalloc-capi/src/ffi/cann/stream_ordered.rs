//! CANN's stream-ordered memory pools (`acl/acl_rt_memory_soma.h`):
//! allocations that follow a stream, without synchronizing it. On the host
//! runtime each pool is one of aclalloc's caching pools
//! (`crate::stream_ordered`); in front of a real runtime, its functions.
#![allow(non_snake_case)]

use crate::base::error::Error;
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args::{self, Out};
use crate::ffi::wiring::dispatch::real_or_host;
use crate::ffi::wiring::host::host;
use crate::ffi::wiring::ordered_tracking;
use crate::runtime::graph_memory::Release;
use crate::stream_ordered::{self, graph, AttrValue, Freed};
use std::ffi::c_void;
use std::num::NonZeroUsize;

/// The value of `stream` as the pools key blocks by: a live stream of the
/// host runtime, NULL the current context's default stream.
fn stream_value(stream: aclrtStream) -> crate::base::error::Result<NonZeroUsize> {
    let (key, _) = host().resolve_stream(args::optional_stream(stream))?;
    Ok(key.get())
}

fn pool_value(memPool: aclrtMemPool) -> crate::base::error::Result<usize> {
    NonZeroUsize::new(memPool as usize)
        .map(NonZeroUsize::get)
        .ok_or(Error::NullPointer { param: "memPool" })
}

/// Creates a memory pool on the device `poolProps` names (on the host
/// runtime it must be the current device), allocation type pinned, handle
/// type none, `maxSize` its limit (0: the device's size), `reserved` all 0.
///
/// # Safety
/// `memPool` is NULL or writable; `poolProps` is NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemPoolCreate(
    memPool: *mut aclrtMemPool,
    poolProps: *const aclrtMemPoolProps,
) -> aclError {
    real_or_host!(aclrtMemPoolCreate(memPool: *mut aclrtMemPool, poolProps: *const aclrtMemPoolProps) {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(memPool, "memPool") }?;
        // SAFETY: the caller's contract.
        let props = unsafe { args::optional_input(poolProps) }
            .ok_or(Error::NullPointer { param: "poolProps" })?;
        out.write(stream_ordered::create(&props)? as aclrtMemPool);
        Ok(())
    })
}

/// Destroys a memory pool; refused (`ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED`)
/// while blocks allocated from it are not freed, a free still queued on a
/// stream included.
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemPoolDestroy(memPool: aclrtMemPool) -> aclError {
    real_or_host!(aclrtMemPoolDestroy(memPool: aclrtMemPool), after_success {
        ordered_tracking::released(memPool, true);
    } {
        stream_ordered::destroy(pool_value(memPool)?)?;
        ordered_tracking::released(memPool, true);
        Ok(())
    })
}

/// Sets an attribute from `value`: a `uint32_t` 0 or 1 for the reuse
/// switches, a `uint64_t` for the release threshold, 0 to reset a `HIGH`
/// figure; the `CURRENT` figures are read-only.
///
/// # Safety
/// `value` is NULL or readable as the attribute's type.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemPoolSetAttr(
    memPool: aclrtMemPool,
    attr: aclrtMemPoolAttr,
    value: *mut c_void,
) -> aclError {
    real_or_host!(aclrtMemPoolSetAttr(memPool: aclrtMemPool, attr: aclrtMemPoolAttr, value: *mut c_void) {
        let pool = pool_value(memPool)?;
        if value.is_null() {
            return Err(Error::NullPointer { param: "value" });
        }
        let value = if stream_ordered::attr_is_switch(attr)? {
            // SAFETY: the caller's contract: a readable uint32_t.
            AttrValue::Switch(unsafe { value.cast::<u32>().read_unaligned() })
        } else {
            // SAFETY: the caller's contract: a readable uint64_t.
            AttrValue::Bytes(unsafe { value.cast::<u64>().read_unaligned() })
        };
        stream_ordered::set_attr(pool, attr, value)
    })
}

/// Reads an attribute into `value` (`uint32_t` or `uint64_t`, by attribute);
/// nothing is written on failure.
///
/// # Safety
/// `value` is NULL or writable as the attribute's type.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemPoolGetAttr(
    memPool: aclrtMemPool,
    attr: aclrtMemPoolAttr,
    value: *mut c_void,
) -> aclError {
    real_or_host!(aclrtMemPoolGetAttr(memPool: aclrtMemPool, attr: aclrtMemPoolAttr, value: *mut c_void) {
        let pool = pool_value(memPool)?;
        if value.is_null() {
            return Err(Error::NullPointer { param: "value" });
        }
        match stream_ordered::get_attr(pool, attr)? {
            // SAFETY: the caller's contract: a writable uint32_t.
            AttrValue::Switch(v) => unsafe { value.cast::<u32>().write_unaligned(v) },
            // SAFETY: the caller's contract: a writable uint64_t.
            AttrValue::Bytes(v) => unsafe { value.cast::<u64>().write_unaligned(v) },
        }
        Ok(())
    })
}

/// Allocates `size` bytes from `memPool` for work queued on `stream` after
/// this call, at once and without synchronizing: a block freed on `stream`
/// is reused first, then memory other streams freed once `stream` is
/// ordered after their frees, then the pool grows.
///
/// # Safety
/// `ptr` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemPoolMallocAsync(
    ptr: *mut *mut c_void,
    size: usize,
    memPool: aclrtMemPool,
    stream: aclrtStream,
) -> aclError {
    real_or_host!(aclrtMemPoolMallocAsync(ptr: *mut *mut c_void, size: usize, memPool: aclrtMemPool, stream: aclrtStream), after_success {
        // SAFETY: the runtime succeeded, so `ptr` was writable and now holds the address.
        let address = unsafe { ptr.read() };
        ordered_tracking::allocated(memPool, address, size, stream);
    } {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(ptr, "ptr") }?;
        let pool = pool_value(memPool)?;
        let key = stream_value(stream)?;
        let capturing = host().capturing_model(args::optional_stream(key.get() as aclrtStream))?;
        if let Some(model) = capturing {
            return malloc_in_capture(out, memPool, model, key, size);
        }
        let addr = stream_ordered::malloc_async(pool, key, size)?;
        out.write(addr.get() as *mut c_void);
        ordered_tracking::allocated(memPool, addr.get() as *mut c_void, size, key.get() as aclrtStream);
        Ok(())
    })
}

/// `aclrtMemPoolMallocAsync` on a stream capturing into `model`: the block
/// is the model's (`stream_ordered::graph`), given back when it goes.
fn malloc_in_capture(
    out: Out<*mut c_void>,
    memPool: aclrtMemPool,
    model: usize,
    key: NonZeroUsize,
    size: usize,
) -> crate::base::error::Result<()> {
    let pool = pool_value(memPool)?;
    let stream = args::optional_stream(key.get() as aclrtStream);
    let got = graph::malloc(model, pool, key, size, || {
        stream_ordered::malloc_async(pool, key, size)
    })?;
    if got.first {
        let release = Release::new(Box::new(move || {
            graph::release(model, |addr, stream| {
                ordered_tracking::freed(addr as *mut c_void, stream as aclrtStream)
            })
        }));
        // The capture checked above cannot have ended on this thread; one
        // another thread ended meanwhile gives the block back at once.
        host().hold_in_capture(stream, release)?;
    }
    out.write(got.addr.get() as *mut c_void);
    if got.new_block {
        ordered_tracking::allocated(
            memPool,
            got.addr.get() as *mut c_void,
            size,
            key.get() as aclrtStream,
        );
    }
    Ok(())
}

/// Gives a block back to its pool when `stream` reaches this call: at once
/// on the stream it was allocated on (only that stream's later work can
/// get it), queued on any other stream. A second free, or an address no
/// pool handed out, is refused.
///
/// # Safety
/// None for the host runtime: the address and the stream are looked up,
/// never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemPoolFreeAsync(ptr: *mut c_void, stream: aclrtStream) -> aclError {
    real_or_host!(aclrtMemPoolFreeAsync(ptr: *mut c_void, stream: aclrtStream), after_success {
        ordered_tracking::freed(ptr, stream);
    } {
        let addr = NonZeroUsize::new(ptr as usize).ok_or(Error::NullPointer { param: "ptr" })?;
        let key = stream_value(stream)?;
        let capturing = host().capturing_model(args::optional_stream(key.get() as aclrtStream))?;
        if graph::free(addr.get(), key, capturing)? {
            // A block of this capture: free for its later allocations, still the model's.
            return Ok(());
        }
        match stream_ordered::free_async(addr, key)? {
            Freed::Now => {}
            Freed::WhenReached(token) => {
                let queued = host().launch_host_func(
                    args::optional_stream(stream),
                    complete_free,
                    token as *mut c_void,
                );
                queued.inspect_err(|_| stream_ordered::undo_free(token))?;
            }
        }
        ordered_tracking::freed(ptr, key.get() as aclrtStream);
        Ok(())
    })
}

/// Runs on the freeing stream when it reaches an `aclrtMemPoolFreeAsync`.
unsafe extern "C" fn complete_free(token: *mut c_void) {
    crate::base::boundary::ffi_boundary!(|| -> crate::base::error::Result<()> {
        stream_ordered::complete_free(token as usize);
        Ok(())
    })
}

/// Gives the pool's free memory back to the device until at most
/// `minBytesToKeep` bytes stay reserved; memory in use stays. It takes
/// priority over the release threshold.
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtMemPoolTrimTo(
    memPool: aclrtMemPool,
    minBytesToKeep: usize,
) -> aclError {
    real_or_host!(aclrtMemPoolTrimTo(memPool: aclrtMemPool, minBytesToKeep: usize), after_success {
        ordered_tracking::released(memPool, false);
    } {
        stream_ordered::trim_to(pool_value(memPool)?, minBytesToKeep)?;
        ordered_tracking::released(memPool, false);
        Ok(())
    })
}
