//! aclalloc's default caching pool as a torch_npu pluggable allocator: the
//! functions `torch_npu.npu.NPUPluggableAllocator(path, malloc_name,
//! free_name)` loads from a shared object (with ctypes, `RTLD_LOCAL`), and
//! the ones its allocator object takes by address (`set_init_fn`, ...),
//! with torch_npu's C signatures (torch_npu `torch_npu/csrc/npu/Module.cpp`,
//! `_npu_customAllocator` and the `set_*_fn` bindings):
//!
//! ```python
//! new_alloc = torch_npu.npu.NPUPluggableAllocator(
//!     "libaclalloc.so", "aclallocTorchMalloc", "aclallocTorchFree")
//! torch_npu.npu.memory.change_current_allocator(new_alloc)
//! ```
//!
//! Each device is served by the default allocator's caching pool of that
//! device (the one `aclallocDefaultMalloc` uses while the device is
//! current, created at its first use), whatever allocator is the default:
//! these functions never go through the default allocator, so making the
//! pluggable allocator itself the default does not call back into it.
//! A pool grows on the calling thread's current device, so `device` must be
//! that device (torch_npu passes it); another device is refused (NULL, or
//! nothing done, with the reason for `aclGetRecentErrMsg`).
#![allow(non_snake_case)]

use crate::base::boundary::ffi_boundary;
use crate::base::device_port;
use crate::base::error::{Error, Result};
use crate::default_allocator::per_device;
use crate::ffi::cann::types::*;
use crate::plugin::DeviceStats;
use crate::pool::config::Limit;
use crate::pool::handles as pool_handles;
use crate::pool::Pool;
use std::ffi::c_void;

/// The calling thread's current device (0 without one, as the pools take it).
fn current_device() -> i32 {
    device_port::current_device().unwrap_or(0)
}

/// The default pool of `device`, which must be the calling thread's current
/// device (a negative `device`: the current one); created now if needed.
fn pool_for_use(device: i32) -> Result<&'static Pool> {
    if device >= 0 && device != current_device() {
        return Err(Error::InvalidParam {
            param: "device",
            reason: "It must be the calling thread's current device (the default pool of a \
                     device grows on that device)",
        });
    }
    per_device::current_pool()
}

/// The handle of the default pool of `device` if one was made (a negative
/// `device`: the current one); nothing is created.
fn existing_pool(device: i32) -> Option<*mut c_void> {
    let device = if device < 0 { current_device() } else { device };
    per_device::pools()
        .into_iter()
        .find(|&(d, _)| i64::try_from(d).ok() == Some(i64::from(device)))
        .map(|(_, handle)| handle as *mut c_void)
}

/// torch_npu's `void *malloc(size_t size, int device, aclrtStream stream)`:
/// `size` bytes from the default caching pool of `device` (the calling
/// thread's current device), kept for `stream` (NULL: no particular
/// stream). NULL on failure (out of memory, another device), with the
/// reason for `aclGetRecentErrMsg`.
#[no_mangle]
pub extern "C" fn aclallocTorchMalloc(
    size: usize,
    device: i32,
    stream: aclrtStream,
) -> *mut c_void {
    ffi_boundary!(|| {
        let pool = pool_for_use(device)?;
        let addr = if stream.is_null() {
            pool.malloc(size)?
        } else {
            pool.malloc_on(stream as usize, size)?
        };
        Ok(addr.get() as *mut c_void)
    })
}

/// torch_npu's `void free(void *ptr, size_t size, int device, aclrtStream
/// stream)`: gives `ptr` back to the default pool that holds it (its size,
/// device and stream are the pool's own records; the arguments are not
/// needed). NULL: nothing. A pointer no default pool handed out: refused
/// (recorded for `aclGetRecentErrMsg`), nothing freed.
#[no_mangle]
pub extern "C" fn aclallocTorchFree(
    ptr: *mut c_void,
    size: usize,
    device: i32,
    stream: aclrtStream,
) {
    let _ = (size, device, stream);
    ffi_boundary!(|| {
        if ptr.is_null() {
            return Ok(());
        }
        let pool = per_device::holding(ptr as usize).ok_or(Error::PoolForeignBlock)?;
        pool.free(ptr as usize)
    })
}

/// torch_npu's `void init(int device_count)` (`set_init_fn`): nothing to do,
/// each device's pool is made at its first allocation.
#[no_mangle]
pub extern "C" fn aclallocTorchInit(device_count: i32) {
    let _ = device_count;
}

/// torch_npu's `void reset(bool check_error)` (`set_reset_fn`, called by
/// `empty_cache`): every default pool gives its cached, unused segments
/// back to the device.
#[no_mangle]
pub extern "C" fn aclallocTorchReset(check_error: bool) {
    let _ = check_error;
    ffi_boundary!(|| {
        for (_, handle) in per_device::pools() {
            pool_handles::with(handle as *mut c_void, |pool| pool.empty_cache())?;
        }
        Ok(())
    })
}

/// torch_npu's `void memory_fraction(double fraction, int device)`
/// (`set_memory_fraction_fn`): limits the default pool of `device` to
/// `fraction` (in (0, 1]) of the device's memory. `device` must be the
/// current device or one whose pool exists; otherwise, or with a fraction
/// out of range, nothing changes (the reason is recorded).
#[no_mangle]
pub extern "C" fn aclallocTorchSetMemoryFraction(fraction: f64, device: i32) {
    ffi_boundary!(|| {
        let limit = Limit::Fraction(fraction);
        match existing_pool(device) {
            Some(handle) => pool_handles::with(handle, |pool| pool.set_limit(limit))?,
            None => pool_for_use(device)?.set_limit(limit),
        }
    })
}

/// torch_npu's `void *base_alloc(void *ptr, size_t *size)`
/// (`set_base_alloc_fn`): the start of the pool segment `ptr` lies in, its
/// size written to `*size`. A pointer in no default pool's segment: NULL,
/// `*size` untouched.
///
/// # Safety
/// `size` must be NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocTorchBaseAlloc(ptr: *mut c_void, size: *mut usize) -> *mut c_void {
    ffi_boundary!(|| {
        let addr = ptr as usize;
        let pool = per_device::holding(addr).ok_or(Error::PoolForeignBlock)?;
        let segment = pool
            .segments()
            .into_iter()
            .find(|s| (s.address..s.address + s.total_size).contains(&addr))
            .ok_or(Error::PoolForeignBlock)?;
        if !size.is_null() {
            // SAFETY: `size` is writable (the caller's contract), not NULL.
            unsafe { size.write(segment.total_size) };
        }
        Ok(segment.address as *mut c_void)
    })
}

/// The default pool's statistics in PyTorch's `DeviceStats` layout.
fn device_stats(pool: &Pool) -> DeviceStats {
    let s = pool.stats();
    DeviceStats {
        allocation: s.allocation,
        segment: s.segment,
        active: s.active,
        inactive_split: s.inactive_split,
        allocated_bytes: s.allocated_bytes,
        reserved_bytes: s.reserved_bytes,
        active_bytes: s.active_bytes,
        inactive_split_bytes: s.inactive_split_bytes,
        requested_bytes: s.requested_bytes,
        num_alloc_retries: s.num_alloc_retries,
        num_ooms: s.num_ooms,
        oversize_allocations: s.oversize_allocations,
        oversize_segments: s.oversize_segments,
        num_sync_all_streams: 0,
        num_device_alloc: s.num_device_alloc,
        num_device_free: s.num_device_free,
        max_split_size: s.max_split_size,
    }
}

/// torch_npu's `DeviceStats get_device_stats(int device)`
/// (`set_get_device_stats_fn`): the statistics of the default pool of
/// `device` in PyTorch's current `DeviceStats` layout
/// (`aclallocPluggableDeviceStats`, 976 bytes), returned by value; all 0
/// when the device has no pool yet.
#[no_mangle]
pub extern "C" fn aclallocTorchGetDeviceStats(device: i32) -> DeviceStats {
    let mut stats = DeviceStats::default();
    let _: aclError = ffi_boundary!(|| {
        if let Some(handle) = existing_pool(device) {
            stats = pool_handles::with(handle, device_stats)?;
        }
        Ok(())
    });
    stats
}

/// torch_npu's `void reset_peak_status(int device)`
/// (`set_reset_peak_status_fn`): restarts the peaks of the default pool of
/// `device` (nothing when it has none).
#[no_mangle]
pub extern "C" fn aclallocTorchResetPeakStatus(device: i32) {
    ffi_boundary!(|| {
        match existing_pool(device) {
            Some(handle) => pool_handles::with(handle, Pool::reset_peak_stats),
            None => Ok(()),
        }
    })
}
