//! CANN's kernel loading and launch (`acl_rt.h`): `aclrtBinaryLoadFromFile`,
//! `aclrtBinaryGetFunction`, the argument-list calls (`aclrtKernelArgs*`),
//! `aclrtLaunchKernelWithConfig` and `aclrtBinaryUnLoad`. On the host
//! runtime a kernel binary is a shared object of host stand-ins
//! (`aclallocKernelStandIn`: `aclallocKernel_NAME` for kernel `NAME`; see
//! `crate::runtime::kernel_binary`).
#![allow(non_snake_case, non_camel_case_types)]

use crate::base::error::{Error, Result};
use crate::base::ids::{BinaryHandle, FunctionHandle, KernelArgsHandle, KernelParamHandle};
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args;
use crate::ffi::wiring::dispatch::real_or_host;
use crate::ffi::wiring::host::host;
use std::ffi::{c_char, c_void};

/// An option of `aclrtBinaryLoadFromFile`.
pub type aclrtBinaryLoadOptionType = i32;
/// Load the kernels when first used (`isLazyLoad`): no effect on the host.
pub const ACL_RT_BINARY_LOAD_OPT_LAZY_LOAD: aclrtBinaryLoadOptionType = 1;
/// The binary's magic number (`magic`): no effect on the host.
pub const ACL_RT_BINARY_LOAD_OPT_LAZY_MAGIC: aclrtBinaryLoadOptionType = 2;
/// The binary's magic number (`magic`): no effect on the host.
pub const ACL_RT_BINARY_LOAD_OPT_MAGIC: aclrtBinaryLoadOptionType = 2;
/// How an AI CPU kernel runs (`cpuKernelMode`): no effect on the host.
pub const ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE: aclrtBinaryLoadOptionType = 3;

/// An option's value: the member its type names.
#[repr(C)]
#[derive(Clone, Copy)]
pub union aclrtBinaryLoadOptionValue {
    /// `ACL_RT_BINARY_LOAD_OPT_LAZY_LOAD`.
    pub isLazyLoad: u32,
    /// `ACL_RT_BINARY_LOAD_OPT_MAGIC`.
    pub magic: u32,
    /// `ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE`.
    pub cpuKernelMode: i32,
    /// The union's size.
    pub rsv: [u32; 4],
}

/// One option of `aclrtBinaryLoadFromFile`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct aclrtBinaryLoadOption {
    pub r#type: aclrtBinaryLoadOptionType,
    pub value: aclrtBinaryLoadOptionValue,
}

/// The options of `aclrtBinaryLoadFromFile`: `numOpt` of them at `options`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct aclrtBinaryLoadOptions {
    pub options: *mut aclrtBinaryLoadOption,
    pub numOpt: usize,
}

/// The kind of core a kernel runs on.
pub type aclrtEngineType = i32;
/// AI Core (cube).
pub const ACL_RT_ENGINE_TYPE_AIC: aclrtEngineType = 0;
/// AI Vector core.
pub const ACL_RT_ENGINE_TYPE_AIV: aclrtEngineType = 1;

/// A launch attribute of `aclrtLaunchKernelWithConfig`'s configuration;
/// the host runtime accepts each and changes nothing for it (a stand-in
/// has no cores, unified buffer, dump or profiling).
pub type aclrtLaunchKernelAttrId = i32;
/// The scheduling mode (`schemMode`).
pub const ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE: aclrtLaunchKernelAttrId = 1;
/// The dynamic unified-buffer size (`dynUBufSize`).
pub const ACL_RT_LAUNCH_KERNEL_ATTR_DYN_UBUF_SIZE: aclrtLaunchKernelAttrId = 2;
/// The core type (`engineType`).
pub const ACL_RT_LAUNCH_KERNEL_ATTR_ENGINE_TYPE: aclrtLaunchKernelAttrId = 3;
/// The first block's offset (`blockDimOffset`).
pub const ACL_RT_LAUNCH_KERNEL_ATTR_BLOCKDIM_OFFSET: aclrtLaunchKernelAttrId = 4;
/// Block task prefetch (`isBlockTaskPrefetch`).
pub const ACL_RT_LAUNCH_KERNEL_ATTR_BLOCK_TASK_PREFETCH: aclrtLaunchKernelAttrId = 5;
/// Data dump (`isDataDump`).
pub const ACL_RT_LAUNCH_KERNEL_ATTR_DATA_DUMP: aclrtLaunchKernelAttrId = 6;
/// A timeout in seconds (`timeout`).
pub const ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT: aclrtLaunchKernelAttrId = 7;
/// A timeout in microseconds (`timeoutUs`).
pub const ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US: aclrtLaunchKernelAttrId = 8;
/// Profiling of the launch (`enableProfiling`).
pub const ACL_RT_LAUNCH_KERNEL_ATTR_ENABLE_PROFILING: aclrtLaunchKernelAttrId = 9;

/// A timeout in microseconds, as two 32-bit halves.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct aclrtTimeoutUs {
    pub timeoutLow: u32,
    pub timeoutHigh: u32,
}

/// A launch attribute's value: the member its id names.
#[repr(C)]
#[derive(Clone, Copy)]
pub union aclrtLaunchKernelAttrValue {
    pub schemMode: u8,
    pub dynUBufSize: u32,
    pub engineType: aclrtEngineType,
    pub blockDimOffset: u32,
    pub isBlockTaskPrefetch: u8,
    pub isDataDump: u8,
    pub timeout: u16,
    pub timeoutUs: aclrtTimeoutUs,
    pub enableProfiling: u8,
    /// The union's size.
    pub rsv: [u32; 4],
}

/// One launch attribute.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct aclrtLaunchKernelAttr {
    pub id: aclrtLaunchKernelAttrId,
    pub value: aclrtLaunchKernelAttrValue,
}

/// The configuration of `aclrtLaunchKernelWithConfig`: `numAttrs` attributes at `attrs`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct aclrtLaunchKernelCfg {
    pub attrs: *mut aclrtLaunchKernelAttr,
    pub numAttrs: usize,
}

fn binary(handle: aclrtBinHandle) -> Result<BinaryHandle> {
    BinaryHandle::from_ptr(handle).ok_or(Error::NullPointer { param: "binHandle" })
}

fn function(handle: aclrtFuncHandle) -> Result<FunctionHandle> {
    FunctionHandle::from_ptr(handle).ok_or(Error::NullPointer {
        param: "funcHandle",
    })
}

fn kernel_args(handle: aclrtArgsHandle) -> Result<KernelArgsHandle> {
    KernelArgsHandle::from_ptr(handle).ok_or(Error::NullPointer {
        param: "argsHandle",
    })
}

/// Loads the kernel binary at `binPath` (on the host: a shared object of
/// host stand-ins, opened as a file, a bare name relative to the working
/// directory). `options` may be NULL; its options have no effect on the
/// host. A file that cannot be loaded: `ACL_ERROR_INVALID_FILE`, with the
/// loader's message.
///
/// # Safety
/// `binPath` is NULL or a NUL-terminated string; `options` is NULL or
/// readable, its `options` array of `numOpt` entries too; `binHandle` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclrtBinaryLoadFromFile(
    binPath: *const c_char,
    options: *mut aclrtBinaryLoadOptions,
    binHandle: *mut aclrtBinHandle,
) -> aclError {
    real_or_host!(aclrtBinaryLoadFromFile(binPath: *const c_char, options: *mut aclrtBinaryLoadOptions, binHandle: *mut aclrtBinHandle) {
        // SAFETY: the caller's contract.
        let path = unsafe { args::c_bytes(binPath, "binPath") }?;
        // SAFETY: the caller's contract.
        if let Some(o) = unsafe { args::optional_input(options.cast_const()) } {
            if o.numOpt > 0 && o.options.is_null() {
                return Err(Error::NullPointer { param: "options->options" });
            }
        }
        // SAFETY: the caller's contract.
        unsafe {
            args::write_out(binHandle, "binHandle", || {
                Ok(host().binary_load_from_file(path)?.as_ptr())
            })
        }
    })
}

/// The function of kernel `kernelName` in a loaded binary (on the host:
/// its stand-in `aclallocKernel_<kernelName>`); the same handle for the
/// same name. A kernel the binary lacks: `ACL_ERROR_INVALID_PARAM`.
///
/// # Safety
/// `kernelName` is NULL or a NUL-terminated string; `funcHandle` is NULL or
/// writable. The binary handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtBinaryGetFunction(
    binHandle: aclrtBinHandle,
    kernelName: *const c_char,
    funcHandle: *mut aclrtFuncHandle,
) -> aclError {
    real_or_host!(aclrtBinaryGetFunction(binHandle: aclrtBinHandle, kernelName: *const c_char, funcHandle: *mut aclrtFuncHandle) {
        let bin = binary(binHandle)?;
        // SAFETY: the caller's contract.
        let name = unsafe { args::c_bytes(kernelName, "kernelName") }?;
        // SAFETY: the caller's contract.
        unsafe {
            args::write_out(funcHandle, "funcHandle", || {
                Ok(host().binary_get_function(bin, name)?.as_ptr())
            })
        }
    })
}

/// Unloads a binary: its handle, its functions' handles and their argument
/// lists die at once; launches already queued still run (the binary stays
/// mapped until they have).
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtBinaryUnLoad(binHandle: aclrtBinHandle) -> aclError {
    real_or_host!(aclrtBinaryUnLoad(binHandle: aclrtBinHandle) {
        host().binary_unload(binary(binHandle)?)
    })
}

/// A new, empty argument list for `funcHandle`, its memory the runtime's.
/// As CANN's one list per thread, which each call starts over, a thread has
/// one list from this call at a time: a new one retires the thread's
/// previous list (its handle dies; launches already queued keep their
/// copies). A list also dies with its function's binary.
///
/// # Safety
/// `argsHandle` is NULL or writable. The function handle is looked up,
/// never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtKernelArgsInit(
    funcHandle: aclrtFuncHandle,
    argsHandle: *mut aclrtArgsHandle,
) -> aclError {
    real_or_host!(aclrtKernelArgsInit(funcHandle: aclrtFuncHandle, argsHandle: *mut aclrtArgsHandle) {
        let f = function(funcHandle)?;
        // SAFETY: the caller's contract.
        unsafe {
            args::write_out(argsHandle, "argsHandle", || {
                Ok(host().kernel_args_init(f)?.as_ptr())
            })
        }
    })
}

/// Copies `paramSize` bytes at `param` (host memory) as the list's next
/// argument, at the next 8-byte-aligned offset. Refused once a
/// placeholder's buffer was taken or the list finalized
/// (`ACL_ERROR_RT_FEATURE_NOT_SUPPORT`); at most 128 arguments and 64 KiB.
///
/// # Safety
/// `param` is NULL or `paramSize` readable bytes; `paramHandle` is NULL or
/// writable. The list handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtKernelArgsAppend(
    argsHandle: aclrtArgsHandle,
    param: *mut c_void,
    paramSize: usize,
    paramHandle: *mut aclrtParamHandle,
) -> aclError {
    real_or_host!(aclrtKernelArgsAppend(argsHandle: aclrtArgsHandle, param: *mut c_void, paramSize: usize, paramHandle: *mut aclrtParamHandle) {
        let list = kernel_args(argsHandle)?;
        let value = args::address(param, "param")?;
        // SAFETY: the caller's contract.
        let out = unsafe { args::Out::required(paramHandle, "paramHandle") }?;
        // SAFETY: the caller's contract: `paramSize` readable bytes.
        let bytes = unsafe { std::slice::from_raw_parts(value.as_ptr().cast_const(), paramSize) };
        out.write(host().kernel_args_append(list, bytes)?.as_ptr());
        Ok(())
    })
}

/// Appends a placeholder: an argument whose value is a pointer to data the
/// runtime holds (`aclrtKernelArgsGetPlaceHolderBuffer`), set at launch.
///
/// # Safety
/// `paramHandle` is NULL or writable. The list handle is looked up, never
/// trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtKernelArgsAppendPlaceHolder(
    argsHandle: aclrtArgsHandle,
    paramHandle: *mut aclrtParamHandle,
) -> aclError {
    real_or_host!(aclrtKernelArgsAppendPlaceHolder(argsHandle: aclrtArgsHandle, paramHandle: *mut aclrtParamHandle) {
        let list = kernel_args(argsHandle)?;
        // SAFETY: the caller's contract.
        unsafe {
            args::write_out(paramHandle, "paramHandle", || {
                Ok(host().kernel_args_append_placeholder(list)?.as_ptr())
            })
        }
    })
}

/// The buffer of `dataSize` bytes (zeroed) behind a placeholder, which the
/// caller fills; each launch copies it. Owned by the runtime, valid until
/// the function's binary is unloaded.
///
/// # Safety
/// `bufferAddr` is NULL or writable. The handles are looked up, never
/// trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtKernelArgsGetPlaceHolderBuffer(
    argsHandle: aclrtArgsHandle,
    paramHandle: aclrtParamHandle,
    dataSize: usize,
    bufferAddr: *mut *mut c_void,
) -> aclError {
    real_or_host!(aclrtKernelArgsGetPlaceHolderBuffer(argsHandle: aclrtArgsHandle, paramHandle: aclrtParamHandle, dataSize: usize, bufferAddr: *mut *mut c_void) {
        let list = kernel_args(argsHandle)?;
        let param = KernelParamHandle::from_ptr(paramHandle)
            .ok_or(Error::NullPointer { param: "paramHandle" })?;
        // SAFETY: the caller's contract.
        unsafe {
            args::write_out(bufferAddr, "bufferAddr", || {
                Ok(host()
                    .kernel_args_placeholder_buffer(list, param, dataSize)?
                    .as_ptr()
                    .cast())
            })
        }
    })
}

/// Marks the list complete: nothing more can be appended nor taken.
///
/// # Safety
/// None for the host runtime: the handle is looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtKernelArgsFinalize(argsHandle: aclrtArgsHandle) -> aclError {
    real_or_host!(aclrtKernelArgsFinalize(argsHandle: aclrtArgsHandle) {
        host().kernel_args_finalize(kernel_args(argsHandle)?)
    })
}

/// Launches `funcHandle` on `stream` (NULL: the default stream) over
/// `numBlocks` blocks with the argument list as it is now; returns at once.
/// On the host the stand-in runs on the stream's worker once per block.
/// `cfg` may be NULL; its attributes have no effect on the host. `reserve`
/// must be NULL, as CANN says.
///
/// # Safety
/// `cfg` is NULL or readable. The handles are looked up, never trusted.
#[no_mangle]
pub unsafe extern "C" fn aclrtLaunchKernelWithConfig(
    funcHandle: aclrtFuncHandle,
    numBlocks: u32,
    stream: aclrtStream,
    cfg: *mut aclrtLaunchKernelCfg,
    argsHandle: aclrtArgsHandle,
    reserve: *mut c_void,
) -> aclError {
    real_or_host!(aclrtLaunchKernelWithConfig(funcHandle: aclrtFuncHandle, numBlocks: u32, stream: aclrtStream, cfg: *mut aclrtLaunchKernelCfg, argsHandle: aclrtArgsHandle, reserve: *mut c_void) {
        let f = function(funcHandle)?;
        let list = kernel_args(argsHandle)?;
        // SAFETY: the caller's contract.
        if let Some(c) = unsafe { args::optional_input(cfg.cast_const()) } {
            if c.numAttrs > 0 && c.attrs.is_null() {
                return Err(Error::NullPointer { param: "cfg->attrs" });
            }
        }
        if !reserve.is_null() {
            return Err(Error::InvalidParam { param: "reserve", reason: "It must be NULL" });
        }
        host().launch_kernel_with_config(f, numBlocks, args::optional_stream(stream), list)
    })
}
