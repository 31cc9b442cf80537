//! Giving cached memory back and limiting it: `aclallocPoolEmptyCache`,
//! `aclallocPoolEmptyVirtAddrCache`, `aclallocPoolTrim` and the memory limit.

#![allow(non_snake_case, non_camel_case_types)]

use super::aclallocPool;
use crate::base::boundary::ffi_boundary;
use crate::base::error::Error;
use crate::ffi::cann::types::*;
use crate::pool::{handles, Limit};

/// Returns every wholly free cached segment to the device, and unmaps every
/// page of an expandable segment that holds no live block.
#[no_mangle]
pub extern "C" fn aclallocPoolEmptyCache(pool: aclallocPool) -> aclError {
    ffi_boundary!(|| {
        handles::with(pool, |p| p.empty_cache())?;
        Ok(())
    })
}

/// Releases the address space of expandable segments that back no block
/// (torch_npu's `empty_virt_addr_cache`); their pages are unmapped first.
/// A pool with fixed segments has none: nothing happens.
#[no_mangle]
pub extern "C" fn aclallocPoolEmptyVirtAddrCache(pool: aclallocPool) -> aclError {
    ffi_boundary!(|| {
        handles::with(pool, |p| p.empty_virt_addr_cache())?;
        Ok(())
    })
}

/// Returns wholly free cached segments, largest first, then unmaps pages of
/// expandable segments that hold no live block, until at most `keepBytes`
/// stay reserved (or nothing more can go).
#[no_mangle]
pub extern "C" fn aclallocPoolTrim(pool: aclallocPool, keepBytes: usize) -> aclError {
    ffi_boundary!(|| {
        handles::with(pool, |p| p.trim(keepBytes))?;
        Ok(())
    })
}

/// Limits what the pool may reserve to `bytes` (0: no limit). Memory already
/// reserved above it stays until freed and released.
#[no_mangle]
pub extern "C" fn aclallocPoolSetMemoryLimit(pool: aclallocPool, bytes: usize) -> aclError {
    ffi_boundary!(|| {
        let limit = if bytes == 0 {
            Limit::None
        } else {
            Limit::Bytes(bytes)
        };
        handles::with(pool, |p| p.set_limit(limit))?
    })
}

/// Limits what the pool may reserve to `fraction` (0, 1] of the device's
/// memory, like `torch.npu.set_per_process_memory_fraction`.
#[no_mangle]
pub extern "C" fn aclallocPoolSetMemoryFraction(pool: aclallocPool, fraction: f64) -> aclError {
    ffi_boundary!(|| {
        handles::with(pool, |p| p.set_limit(Limit::Fraction(fraction)))?.map_err(|_| {
            Error::InvalidParam {
                param: "fraction",
                reason: "It must be in (0, 1]",
            }
        })
    })
}
