//! Creating and destroying pools: `aclallocPoolCreate`,
//! `aclallocPoolCreateStreamDesc`, `aclallocPoolDestroy`.

#![allow(non_snake_case, non_camel_case_types)]

use super::aclallocPool;
use crate::base::boundary::ffi_boundary;
use crate::base::descriptor::AllocatorObj;
use crate::base::error::{Error, Result};
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args::{self, Out};
use crate::pool::{handles, Pool, PoolConfig};
use crate::registry::api::global;
use std::ffi::c_void;

use super::callbacks::*;
use super::config::aclallocPoolConfig;

/// Host memory a new pool and its descriptor take, with a margin.
const NEW_POOL_ROOM: usize = 64 << 10;

/// Creates a caching pool over the calling thread's current device
/// (`ACL_ERROR_RT_CONTEXT_NULL` without one) and a complete allocator
/// descriptor whose object is the pool and whose functions are
/// `aclallocPoolAlloc`, `aclallocPoolFree`, `aclallocPoolAllocAdvise` and
/// `aclallocPoolGetAddrFromBlock`: register it on the streams that share the
/// pool. `config` NULL: `aclallocPoolConfigInit`'s defaults. Nothing is
/// written unless the call succeeds.
///
/// # Safety
/// `config` must be NULL or point to an `aclallocPoolConfig`; `pool` and
/// `allocatorDesc` must point to writable memory of their types.
#[no_mangle]
pub unsafe extern "C" fn aclallocPoolCreate(
    config: *const aclallocPoolConfig,
    pool: *mut aclallocPool,
    allocatorDesc: *mut aclrtAllocatorDesc,
) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: the caller's contract.
        let pool_out = unsafe { Out::required(pool, "pool") }?;
        // SAFETY: the caller's contract.
        let desc_out = unsafe { Out::required(allocatorDesc, "allocatorDesc") }?;
        // SAFETY: NULL or an `aclallocPoolConfig`, the caller's contract.
        let config = match unsafe { args::optional_input(config) } {
            None => PoolConfig::default().from_env()?,
            Some(config) => PoolConfig::try_from(config)?,
        };
        let device = crate::pool::acl::AclMemory::current()?;
        // The pool's own parts are small std allocations: room first.
        if !crate::base::handles::host_has_room(NEW_POOL_ROOM) {
            return Err(Error::BadAlloc {
                what: "a caching pool",
            });
        }
        let new_pool = Pool::new(config, device)?;
        crate::history::env::start_from_env("the pool", |n| new_pool.record_history(n))?;
        let handle = handles::insert(new_pool)?;
        let desc = pool_descriptor(handle.get()).inspect_err(|_| {
            let _ = destroy(handle.get() as *mut c_void);
        })?;
        pool_out.write(handle.get() as *mut c_void);
        desc_out.write(desc.as_ptr());
        Ok(())
    })
}

/// Creates a descriptor for `stream`'s use of a pool: its object names the
/// stream (CANN's callbacks carry none), so blocks freed through it are
/// reused only for `stream`. Register it on `stream`; it stops working when
/// the pool is destroyed.
///
/// # Safety
/// `allocatorDesc` must point to writable memory for an `aclrtAllocatorDesc`.
#[no_mangle]
pub unsafe extern "C" fn aclallocPoolCreateStreamDesc(
    pool: aclallocPool,
    stream: aclrtStream,
    allocatorDesc: *mut aclrtAllocatorDesc,
) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: the caller's contract.
        let desc_out = unsafe { Out::required(allocatorDesc, "allocatorDesc") }?;
        let stream = args::stream(stream)?;
        let view = handles::insert_view(pool, stream.get())?;
        let desc = pool_descriptor(view.get())?;
        desc_out.write(desc.as_ptr());
        Ok(())
    })
}

/// A descriptor whose object is pool handle `handle` and whose callbacks are the pool's.
fn pool_descriptor(handle: usize) -> Result<crate::registry::DescriptorHandle> {
    let obj = AllocatorObj::new(handle as *mut c_void).ok_or(Error::Internal {
        reason: "a pool handle was zero",
    })?;
    let api = global();
    let desc = api.create_descriptor()?;
    api.update_descriptor(desc, |d| {
        d.obj = Some(obj);
        d.alloc = Some(aclallocPoolAlloc);
        d.free = Some(aclallocPoolFree);
        d.alloc_advise = Some(aclallocPoolAllocAdvise);
        d.get_addr_from_block = Some(aclallocPoolGetAddrFromBlock);
    })?;
    Ok(desc)
}

fn destroy(pool: aclallocPool) -> Result<()> {
    if handles::is_view(pool)? {
        return Err(Error::InvalidParam {
            param: "pool",
            reason: "It is a stream descriptor's object, not a pool (destroy the descriptor with aclrtAllocatorDestroyDesc)",
        });
    }
    handles::with(pool, |p| p.close_if_idle())?.map_err(|count| Error::StillInUse {
        what: "Blocks it handed out that were not freed",
        count,
    })?;
    handles::remove(pool)
}

/// Destroys a pool, returning its memory to the device; while blocks are
/// allocated: `ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED` (as a pluggable
/// allocator's destroy), nothing changes. Its callbacks fail from
/// now on, so unregister its streams first.
#[no_mangle]
pub extern "C" fn aclallocPoolDestroy(pool: aclallocPool) -> aclError {
    ffi_boundary!(|| destroy(pool))
}
