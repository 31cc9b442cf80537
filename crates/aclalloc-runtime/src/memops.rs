//! Memory calls: `aclrtMalloc[Align32]`, `aclrtFree`, `aclrtMemcpy[Async]`,
//! `aclrtMemset[Async]`, `aclrtGetMemInfo`.
//!
//! Every address is checked against the device records before use: device
//! ranges must be live device memory; an address no record knows of is a
//! host pointer, the caller's to vouch for, as in CANN.

use super::host::HostRuntime;
use super::memory::{Lookup, NOT_ALLOCATED};
use super::stream_worker::Task;
use crate::base::error::{Error, Result};
use crate::registry::StreamKey;
use std::ptr::NonNull;

/// `aclrtMemcpyKind` values the host runtime implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyKind {
    /// `ACL_MEMCPY_HOST_TO_HOST`.
    HostToHost,
    /// `ACL_MEMCPY_HOST_TO_DEVICE`.
    HostToDevice,
    /// `ACL_MEMCPY_DEVICE_TO_HOST`.
    DeviceToHost,
    /// `ACL_MEMCPY_DEVICE_TO_DEVICE`.
    DeviceToDevice,
    /// `ACL_MEMCPY_DEFAULT`: whichever the addresses say.
    Default,
}

impl CopyKind {
    /// The kind from CANN's `aclrtMemcpyKind` value.
    pub fn from_acl(kind: i32) -> Result<Self> {
        Ok(match kind {
            0 => CopyKind::HostToHost,
            1 => CopyKind::HostToDevice,
            2 => CopyKind::DeviceToHost,
            3 => CopyKind::DeviceToDevice,
            4 => CopyKind::Default,
            _ => {
                let reason = match kind {
                    5..=7 => "The host runtime supports ACL_MEMCPY_HOST_TO_HOST, _HOST_TO_DEVICE, _DEVICE_TO_HOST, _DEVICE_TO_DEVICE and _DEFAULT only",
                    _ => "It is not an aclrtMemcpyKind value",
                };
                return Err(Error::InvalidParam {
                    param: "kind",
                    reason,
                });
            }
        })
    }

    fn device_dst(self) -> bool {
        matches!(self, CopyKind::HostToDevice | CopyKind::DeviceToDevice)
    }

    fn device_src(self) -> bool {
        matches!(self, CopyKind::DeviceToHost | CopyKind::DeviceToDevice)
    }
}

/// The highest `aclrtMemAttr` value (`ACL_MEM_P2P_HUGE1G`).
pub(super) const MAX_MEM_ATTR: i32 = 17;

impl HostRuntime {
    /// `aclrtMalloc` / `aclrtMallocAlign32` on the current context's device.
    /// Every allocation is page-aligned; the policy changes nothing on the host.
    pub fn malloc(&self, size: usize) -> Result<NonNull<u8>> {
        let (_, device) = self.current_context()?;
        self.device(device as i32)?.memory().alloc(size)
    }

    /// `aclrtFree`: waits for the pending work of every stream (so no queued
    /// copy or kernel touches freed memory, as `cudaFree` does), then frees.
    pub fn free(&self, ptr: *mut u8) -> Result<()> {
        let device = self
            .devices()?
            .iter()
            .find(|d| d.memory().owns(ptr))
            .ok_or(NOT_ALLOCATED)?;
        self.synchronize_all()?;
        device.memory().free(ptr)
    }

    /// Decides from the device records alone whether `[ptr, ptr + len)` may
    /// be touched: live device memory, or (unless `required`) memory no
    /// device record knows of, which is the caller's. Freed or unmapped
    /// device addresses, and ranges running off an allocation, are refused.
    pub(crate) fn check_device_range(
        &self,
        ptr: *const u8,
        len: usize,
        param: &'static str,
        required: bool,
    ) -> Result<()> {
        // Memory mapped with aclrtMapMem is device memory too.
        let mut found = super::virtual_memory::virtual_memory().lookup(ptr as usize, len);
        // A runtime whose configuration is invalid refuses, as every device call does.
        self.devices()?;
        // The host heap first: memory from aclrtMallocHost serves every copy
        // kind, as CANN's pinned memory does; then each device's.
        for heap in self.heaps.iter() {
            if found != Lookup::Outside {
                break;
            }
            found = heap.lookup(ptr, len);
        }
        let reason = match found {
            Lookup::Inside => return Ok(()),
            Lookup::Outside if !required => return Ok(()),
            Lookup::Outside => "It is not device memory from aclrtMalloc",
            Lookup::Overruns => "The range runs past the end of its device allocation",
            // A sleeping pool's memory says so, naming the pool's tag.
            Lookup::Dead => crate::base::asleep::find(ptr as usize).unwrap_or(
                "It is device address space with no live memory (freed, or reserved and not mapped)",
            ),
        };
        Err(Error::InvalidAddress {
            param,
            addr: ptr as usize,
            len,
            reason,
        })
    }

    fn check_copy(
        &self,
        dst: *mut u8,
        dest_max: usize,
        src: *const u8,
        count: usize,
        kind: i32,
    ) -> Result<()> {
        let kind = CopyKind::from_acl(kind)?;
        if count > dest_max {
            return Err(Error::InvalidParam {
                param: "count",
                reason: "It is greater than destMax",
            });
        }
        // Host sides are checked too: a dead device address is never the host's.
        self.check_device_range(dst, count, "dst", kind.device_dst())?;
        self.check_device_range(src, count, "src", kind.device_src())
    }

    /// A fill's range: device memory (live, as [`check_device_range`]
    /// decides), or host memory, which must be mapped writable in this
    /// process: CANN decides host or device by the address, and a host
    /// range nobody can write is refused instead of faulting in the fill.
    ///
    /// [`check_device_range`]: HostRuntime::check_device_range
    fn check_set(&self, dst: *mut u8, max_count: usize, count: usize) -> Result<()> {
        if count > max_count {
            return Err(Error::InvalidParam {
                param: "count",
                reason: "It is greater than maxCount",
            });
        }
        let device = self.check_device_range(dst, count, "devPtr", true);
        // Refused as device memory: freed or overrun device memory stays
        // refused; an address no device record knows of is the host's.
        if device.is_err() && self.check_device_range(dst, count, "devPtr", false).is_ok() {
            if super::host_ranges::writable(dst as usize, count) {
                return Ok(());
            }
            return Err(Error::InvalidAddress {
                param: "devPtr",
                addr: dst as usize,
                len: count,
                reason: "It is neither device memory nor host memory this process may write (not mapped, or read-only)",
            });
        }
        device
    }

    /// `aclrtMemcpy`: a synchronous copy, after every stream's queued work
    /// unless host to host; the ranges may overlap.
    ///
    /// # Safety
    /// Host-side ranges must be valid for `count` bytes.
    pub unsafe fn memcpy(
        &self,
        dst: NonNull<u8>,
        dest_max: usize,
        src: NonNull<u8>,
        count: usize,
        kind: i32,
    ) -> Result<()> {
        self.check_copy(dst.as_ptr(), dest_max, src.as_ptr(), count, kind)?;
        super::capture::refuse_if_capturing()?;
        // Ordered after the work already queued on every stream, as CANN's
        // synchronous copies are (a kernel's output is read after it ran).
        if kind != 0 {
            self.after_queued_work()?;
        }
        // SAFETY: device ranges were checked, host ranges are the caller's.
        unsafe { super::device_copy::copy(dst.as_ptr(), src.as_ptr(), count) };
        Ok(())
    }

    /// Waits for every stream's queued work before a synchronous copy or
    /// set, as CANN orders them. Called from a kernel, the call is part of
    /// that kernel, already ordered by its stream: waiting for the others
    /// could wait for a stream that waits for this one.
    fn after_queued_work(&self) -> Result<()> {
        if super::stream_worker::on_any_worker() {
            return Ok(());
        }
        self.synchronize_all()
    }

    /// `aclrtMemset`: fills device memory, or host memory mapped writable in
    /// this process, with the low byte of `value`, at once: as CANN's
    /// reference says, it synchronizes neither the device nor any stream
    /// (work queued on the memory is the caller's to order).
    pub fn memset(
        &self,
        dst: NonNull<u8>,
        max_count: usize,
        value: i32,
        count: usize,
    ) -> Result<()> {
        self.check_set(dst.as_ptr(), max_count, count)?;
        super::capture::refuse_if_capturing()?;
        // SAFETY: the range lies inside a live device allocation, or in
        // host mappings this process may write (the caller's memory).
        unsafe { dst.as_ptr().write_bytes(value as u8, count) };
        Ok(())
    }

    /// `aclrtMemcpyAsync`: the copy runs on `stream` in order.
    ///
    /// # Safety
    /// Host-side ranges must stay valid for `count` bytes until the stream
    /// has run the copy.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn memcpy_async(
        &self,
        dst: NonNull<u8>,
        dest_max: usize,
        src: NonNull<u8>,
        count: usize,
        kind: i32,
        stream: Option<StreamKey>,
    ) -> Result<()> {
        self.check_copy(dst.as_ptr(), dest_max, src.as_ptr(), count, kind)?;
        let (_, stream) = self.resolve_stream(stream)?;
        stream.enqueue(Task::Copy {
            dst: dst.as_ptr(),
            src: src.as_ptr(),
            count,
        })
    }

    /// `aclrtMemsetAsync`: the fill runs on `stream` in order; the range is
    /// checked as `aclrtMemset`'s (host memory must stay mapped until the
    /// stream has run the fill).
    pub fn memset_async(
        &self,
        dst: NonNull<u8>,
        max_count: usize,
        value: i32,
        count: usize,
        stream: Option<StreamKey>,
    ) -> Result<()> {
        self.check_set(dst.as_ptr(), max_count, count)?;
        let (_, stream) = self.resolve_stream(stream)?;
        stream.enqueue(Task::Set {
            dst: dst.as_ptr(),
            value: value as u8,
            count,
        })
    }

    /// `aclrtGetMemInfo`: (free, total) bytes of the current context's
    /// device. Every `aclrtMemAttr` describes the same memory on the host.
    pub fn mem_info(&self, attr: i32) -> Result<(usize, usize)> {
        if !(0..=MAX_MEM_ATTR).contains(&attr) {
            return Err(Error::InvalidParam {
                param: "attr",
                reason: "It is not an aclrtMemAttr value",
            });
        }
        let (_, device) = self.current_context()?;
        let memory = self.device(device as i32)?.memory();
        Ok((memory.capacity() - memory.used(), memory.capacity()))
    }
}
