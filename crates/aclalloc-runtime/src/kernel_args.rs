//! Kernel argument lists on the host runtime (`aclrtKernelArgsInit`,
//! `...Append`, `...AppendPlaceHolder`, `...GetPlaceHolderBuffer`,
//! `...Finalize`), laid out as CANN lays them out for an AI Core kernel:
//! each appended value copied at the next 8-byte-aligned offset, each
//! placeholder an 8-byte slot; after the last argument, the placeholders'
//! data, each at the next 8-byte-aligned offset, in the order their buffers
//! were asked for. A launch copies the list and points each placeholder's
//! slot at its data in the copy (on a device: the data's device address).
//!
//! As in CANN: at most 128 arguments and 64 KiB in all; nothing can be
//! appended once a placeholder's buffer was taken, and nothing appended
//! nor taken once the list is finalized (`ACL_ERROR_RT_FEATURE_NOT_SUPPORT`).
//! There is no call to free a list: CANN hands every `aclrtKernelArgsInit`
//! of a thread the same list, so each call starts it over. Here too a
//! thread has one list from `aclrtKernelArgsInit` at a time: a new one
//! retires the thread's previous list (its handle dies, a queued launch
//! keeps its own copy), so a loop that builds a list per launch holds one
//! list, not one per launch. A list also dies with its function's binary.

use super::host::HostRuntime;
use super::kernel_binary::{self, BINARIES};
use crate::base::error::{Error, Result};
use crate::base::handles::HandleTable;
use crate::base::ids::{BinaryHandle, FunctionHandle, KernelArgsHandle, KernelParamHandle};
use std::ptr::NonNull;
use std::sync::LazyLock;

/// CANN's limits of one list.
pub(crate) const MAX_PARAMS: usize = 128;
pub(crate) const MAX_ARGS_SIZE: usize = 64 * 1024;
const ALIGN: usize = 8;

/// Memory handed to the caller (a placeholder's buffer): raw, since the
/// caller writes it while the list is shared; freed with the list.
struct RawBuffer {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: plain bytes the list owns; the caller's writes are its own affair,
// as with memory CANN hands out.
unsafe impl Send for RawBuffer {}
// SAFETY: as above; the list only reads it with a raw copy.
unsafe impl Sync for RawBuffer {}

impl RawBuffer {
    fn zeroed(len: usize) -> Result<Self> {
        let layout =
            std::alloc::Layout::from_size_align(len, ALIGN).map_err(|_| Error::BadAlloc {
                what: "a placeholder's buffer",
            })?;
        // SAFETY: `len` is not zero (checked by the caller).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        NonNull::new(ptr)
            .map(|ptr| RawBuffer { ptr, len })
            .ok_or(Error::BadAlloc {
                what: "a placeholder's buffer",
            })
    }
}

impl Drop for RawBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this layout.
        unsafe {
            std::alloc::dealloc(
                self.ptr.as_ptr(),
                std::alloc::Layout::from_size_align_unchecked(self.len, ALIGN),
            )
        }
    }
}

/// A placeholder's data: its buffer and where it goes in the list.
struct Data {
    buffer: RawBuffer,
    offset: usize,
}

struct Param {
    handle: KernelParamHandle,
    /// Where its value (or, for a placeholder, its pointer) sits.
    offset: usize,
    /// `Some` for a placeholder: its data once a buffer was taken.
    placeholder: Option<Option<Data>>,
}

/// One argument list.
pub(crate) struct Args {
    function: FunctionHandle,
    /// The appended values, placeholders' slots left zero.
    bytes: Vec<u8>,
    params: Vec<Param>,
    /// The list's size so far, placeholders' data included.
    size: usize,
    /// Buffers given for a placeholder before a later, larger request for
    /// it: kept, since the caller may still hold them.
    retired: Vec<RawBuffer>,
    got_buffer: bool,
    finalized: bool,
}

/// A list ready for a launch: the bytes the stand-in reads.
pub(crate) struct Snapshot {
    /// 8-byte words, so that the list is aligned as on the device.
    pub(crate) words: Vec<u64>,
    pub(crate) size: usize,
}

static ARGS: LazyLock<HandleTable<KernelArgsHandle, Args>> = LazyLock::new(HandleTable::new);

thread_local! {
    /// The calling thread's list from `aclrtKernelArgsInit`, and its binary.
    static THREAD_LIST: std::cell::Cell<Option<(BinaryHandle, KernelArgsHandle)>> =
        const { std::cell::Cell::new(None) };
}
/// A parameter handle names its list and its index there.
static PARAMS: LazyLock<HandleTable<KernelParamHandle, (KernelArgsHandle, usize)>> =
    LazyLock::new(HandleTable::new);

const NOT_ARGS: Error = Error::InvalidParam {
    param: "argsHandle",
    reason: "It is not a live argument list (it was not returned by aclrtKernelArgsInit, or its binary was unloaded)",
};
const NOT_A_PARAM: Error = Error::InvalidParam {
    param: "paramHandle",
    reason: "It is not a live argument of this list (it was not returned by aclrtKernelArgsAppend or aclrtKernelArgsAppendPlaceHolder for it)",
};
const FINALIZED: Error = Error::FeatureNotSupported {
    what: "Appending and getting placeholder buffer after finalization is not supported",
};
const AFTER_BUFFER: Error = Error::FeatureNotSupported {
    what: "Appending placeholder or common parameter after getting placeholder buffer is not supported",
};

fn aligned(offset: usize) -> usize {
    offset.next_multiple_of(ALIGN)
}

/// Drops `handle` and its parameters (its binary was unloaded).
pub(crate) fn forget(handle: KernelArgsHandle) {
    if let Some(args) = ARGS.remove(handle) {
        for p in &args.params {
            PARAMS.remove(p.handle);
        }
    }
}

impl Args {
    /// Room for one more argument of `size` bytes at the next aligned offset.
    fn reserve(&self, size: usize) -> Result<usize> {
        if self.finalized {
            return Err(FINALIZED);
        }
        if self.got_buffer {
            return Err(AFTER_BUFFER);
        }
        if self.params.len() >= MAX_PARAMS {
            return Err(Error::InvalidParam {
                param: "argsHandle",
                reason: "The list already holds 128 arguments, CANN's limit",
            });
        }
        let offset = aligned(self.size);
        if offset + size > MAX_ARGS_SIZE {
            return Err(Error::InvalidParam {
                param: "paramSize",
                reason: "The argument list would exceed 64 KiB, CANN's limit",
            });
        }
        Ok(offset)
    }
}

impl HostRuntime {
    /// `aclrtKernelArgsInit`: an empty list for `function`.
    pub fn kernel_args_init(&self, function: FunctionHandle) -> Result<KernelArgsHandle> {
        let binary = kernel_binary::function(function)?.binary;
        let handle = ARGS.insert(Args {
            function,
            bytes: Vec::new(),
            params: Vec::new(),
            size: 0,
            retired: Vec::new(),
            got_buffer: false,
            finalized: false,
        })?;
        // The list dies with its binary; one unloaded meanwhile takes it now.
        let kept = BINARIES.with_mut(binary, |b| b.args.push(handle));
        if kept.is_none() {
            forget(handle);
            return Err(kernel_binary::NOT_A_FUNCTION);
        }
        if let Some((old_binary, old)) = THREAD_LIST.with(|l| l.replace(Some((binary, handle)))) {
            forget(old);
            BINARIES.with_mut(old_binary, |b| b.args.retain(|&a| a != old));
        }
        Ok(handle)
    }

    /// `aclrtKernelArgsAppend`: copies `value` as the next argument.
    pub fn kernel_args_append(
        &self,
        args: KernelArgsHandle,
        value: &[u8],
    ) -> Result<KernelParamHandle> {
        if value.is_empty() {
            return Err(Error::InvalidParam {
                param: "paramSize",
                reason: "It must be greater than 0",
            });
        }
        self.append(args, value.len(), Some(value))
    }

    /// `aclrtKernelArgsAppendPlaceHolder`: an 8-byte slot for a pointer to
    /// data given later (`aclrtKernelArgsGetPlaceHolderBuffer`).
    pub fn kernel_args_append_placeholder(
        &self,
        args: KernelArgsHandle,
    ) -> Result<KernelParamHandle> {
        self.append(args, ALIGN, None)
    }

    fn append(
        &self,
        args: KernelArgsHandle,
        size: usize,
        value: Option<&[u8]>,
    ) -> Result<KernelParamHandle> {
        // The handle is made first: its table's lock is never taken under
        // the list's.
        let param = PARAMS.insert((args, usize::MAX))?;
        let added = ARGS.with_mut(args, |a| {
            let offset = a.reserve(size)?;
            a.bytes.resize(offset, 0);
            match value {
                Some(v) => a.bytes.extend_from_slice(v),
                None => a.bytes.resize(offset + size, 0),
            }
            a.size = offset + size;
            a.params.push(Param {
                handle: param,
                offset,
                placeholder: value.is_none().then_some(None),
            });
            Ok(a.params.len() - 1)
        });
        match added {
            Some(Ok(index)) => {
                PARAMS.with_mut(param, |p| p.1 = index);
                Ok(param)
            }
            Some(Err(e)) => {
                PARAMS.remove(param);
                Err(e)
            }
            None => {
                PARAMS.remove(param);
                Err(NOT_ARGS)
            }
        }
    }

    /// `aclrtKernelArgsGetPlaceHolderBuffer`: `size` bytes (zeroed) the
    /// caller fills with the placeholder's data; valid while the list lives.
    pub fn kernel_args_placeholder_buffer(
        &self,
        args: KernelArgsHandle,
        param: KernelParamHandle,
        size: usize,
    ) -> Result<NonNull<u8>> {
        if size == 0 {
            return Err(Error::InvalidParam {
                param: "dataSize",
                reason: "It must be greater than 0",
            });
        }
        let (owner, index) = PARAMS.with(param, |p| *p).ok_or(NOT_A_PARAM)?;
        if owner != args || index == usize::MAX {
            return Err(NOT_A_PARAM);
        }
        ARGS.with_mut(args, |a| {
            if a.finalized {
                return Err(FINALIZED);
            }
            let offset = aligned(a.size);
            if offset + size > MAX_ARGS_SIZE {
                return Err(Error::InvalidParam {
                    param: "dataSize",
                    reason: "The argument list would exceed 64 KiB, CANN's limit",
                });
            }
            let slot = match &mut a.params[index].placeholder {
                Some(slot) => slot,
                None => {
                    return Err(Error::InvalidParam {
                        param: "paramHandle",
                        reason: "It is not a placeholder (aclrtKernelArgsAppend made it)",
                    })
                }
            };
            let buffer = RawBuffer::zeroed(size)?;
            let ptr = buffer.ptr;
            if let Some(old) = slot.replace(Data { buffer, offset }) {
                a.retired.push(old.buffer);
            }
            a.size = offset + size;
            a.got_buffer = true;
            Ok(ptr)
        })
        .ok_or(NOT_ARGS)?
    }

    /// `aclrtKernelArgsFinalize`: the list is complete.
    pub fn kernel_args_finalize(&self, args: KernelArgsHandle) -> Result<()> {
        ARGS.with_mut(args, |a| a.finalized = true).ok_or(NOT_ARGS)
    }
}

/// The list of `args` as the stand-in of `function` reads it, placeholders
/// pointing into the copy.
pub(crate) fn snapshot(args: KernelArgsHandle, function: FunctionHandle) -> Result<Snapshot> {
    ARGS.with(args, |a| {
        if a.function != function {
            return Err(Error::InvalidParam {
                param: "argsHandle",
                reason: "It was made by aclrtKernelArgsInit for another function",
            });
        }
        let mut words = vec![0u64; a.size.div_ceil(ALIGN)];
        let base = words.as_mut_ptr().cast::<u8>();
        // SAFETY: `words` holds `a.size` bytes at least, and `bytes` ends
        // before the placeholders' data.
        unsafe { std::ptr::copy_nonoverlapping(a.bytes.as_ptr(), base, a.bytes.len()) };
        for p in &a.params {
            if let Some(Some(data)) = &p.placeholder {
                // SAFETY: the data's range was reserved inside `a.size`; the
                // buffer is the list's own, of `len` bytes; the slot is 8
                // bytes at an aligned offset inside `bytes`.
                unsafe {
                    let at = base.add(data.offset);
                    std::ptr::copy_nonoverlapping(data.buffer.ptr.as_ptr(), at, data.buffer.len);
                    base.add(p.offset).cast::<u64>().write(at as u64);
                }
            }
        }
        Ok(Snapshot {
            words,
            size: a.size,
        })
    })
    .ok_or(NOT_ARGS)?
}
