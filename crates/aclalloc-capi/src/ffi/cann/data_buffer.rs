//! CANN's data buffers (`acl_base.h`): an address and a size wrapped for
//! the functions that take buffers. In front of a real CANN they are the
//! real runtime's (its other functions read them); on the host runtime,
//! `crate::runtime::data_buffer`.
#![allow(non_snake_case)]

use crate::base::error::{Error, Result};
use crate::base::ids::DataBufferHandle;
use crate::ffi::cann::types::*;
use crate::ffi::wiring::dispatch::real_or_host;
use crate::runtime::data_buffer;
use std::ffi::c_void;

fn buffer(dataBuffer: *const aclDataBuffer) -> Result<DataBufferHandle> {
    DataBufferHandle::from_ptr(dataBuffer as *mut c_void).ok_or(Error::NullPointer {
        param: "dataBuffer",
    })
}

/// A data buffer naming `size` bytes at `data` (the memory stays the
/// caller's: allocate it with `aclrtMalloc`, free it with `aclrtFree`);
/// NULL on failure.
///
/// # Safety
/// None for the host runtime: `data` is kept as a number, never read.
#[no_mangle]
pub unsafe extern "C" fn aclCreateDataBuffer(data: *mut c_void, size: usize) -> *mut aclDataBuffer {
    real_or_host!(aclCreateDataBuffer(data: *mut c_void, size: usize) -> *mut aclDataBuffer {
        data_buffer::create(data as usize, size).map(|h| h.as_ptr().cast())
    })
}

/// Destroys the buffer, not the memory it names.
///
/// # Safety
/// None for the host runtime: the buffer is looked up, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn aclDestroyDataBuffer(dataBuffer: *const aclDataBuffer) -> aclError {
    real_or_host!(aclDestroyDataBuffer(dataBuffer: *const aclDataBuffer) {
        data_buffer::destroy(buffer(dataBuffer)?)
    })
}

/// The buffer names `size` bytes at `data` from now on (the memory it named
/// before stays the caller's to free).
///
/// # Safety
/// None for the host runtime: the buffer is looked up, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn aclUpdateDataBuffer(
    dataBuffer: *mut aclDataBuffer,
    data: *mut c_void,
    size: usize,
) -> aclError {
    real_or_host!(aclUpdateDataBuffer(dataBuffer: *mut aclDataBuffer, data: *mut c_void, size: usize) {
        data_buffer::update(buffer(dataBuffer)?, data as usize, size)
    })
}

/// The address the buffer names; NULL for NULL or a buffer that is not live.
///
/// # Safety
/// None for the host runtime: the buffer is looked up, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn aclGetDataBufferAddr(dataBuffer: *const aclDataBuffer) -> *mut c_void {
    real_or_host!(aclGetDataBufferAddr(dataBuffer: *const aclDataBuffer) -> *mut c_void {
        data_buffer::get(buffer(dataBuffer)?).map(|(addr, _)| addr as *mut c_void)
    })
}

/// The size in bytes the buffer names; 0 for NULL or a buffer that is not live.
///
/// # Safety
/// None for the host runtime: the buffer is looked up, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn aclGetDataBufferSizeV2(dataBuffer: *const aclDataBuffer) -> usize {
    real_or_host!(aclGetDataBufferSizeV2(dataBuffer: *const aclDataBuffer) -> usize {
        data_buffer::get(buffer(dataBuffer)?).map(|(_, size)| size)
    })
}

/// The size in bytes the buffer names, as 32 bits (truncated, as CANN's
/// is); 0 for NULL or a buffer that is not live. Deprecated by CANN for
/// `aclGetDataBufferSizeV2`, which programs should call instead.
///
/// # Safety
/// None for the host runtime: the buffer is looked up, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn aclGetDataBufferSize(dataBuffer: *const aclDataBuffer) -> u32 {
    real_or_host!(aclGetDataBufferSize(dataBuffer: *const aclDataBuffer) -> u32 {
        match buffer(dataBuffer).and_then(data_buffer::get) {
            Ok((_, size)) => Ok(size as u32),
            Err(e) => {
                // CANN's 0 for a failure, where other 32-bit results (ids)
                // fail as u32::MAX: the message is recorded here instead.
                crate::base::errlog::record("aclGetDataBufferSize", e);
                Ok(0)
            }
        }
    })
}
