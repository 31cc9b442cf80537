//! The functions torch_npu's pluggable allocator object takes by address
//! after creation (`allocator().set_init_fn(ptr)`, ...), with torch_npu's C
//! signatures, and where the allocator calls them. Every call goes through
//! the foreign-call trampoline: a C++ exception is an error with its what().
//!
//! - init: once, at the first use after it was set, with the device count;
//! - reset: by empty-cache (instead of the empty-cache symbol), with `true`
//!   (torch_npu's `check_error`);
//! - memory fraction: by set-memory-fraction (instead of the symbol's);
//! - base alloc: by base-allocation queries;
//! - record/erase stream: by the stream hooks, for a live block only;
//! - device stats: by device statistics (else the counters kept here);
//! - reset peak status: by a device's peak reset (after the counters').

use super::allocator::PluggableAllocator;
use super::context;
use crate::base::error::{Error, Result};
use crate::base::foreign_call::PluginFunction;
use crate::base::stats::Stat;
use crate::base::sync::Ordering;
use std::ffi::c_void;
use std::ptr::NonNull;

/// `void init(int device_count)`.
pub type InitHook = unsafe extern "C" fn(device_count: i32);
/// `void reset(bool check_error)` (torch_npu's empty cache).
pub type ResetHook = unsafe extern "C" fn(check_error: bool);
/// `void memory_fraction(double fraction, int device)`.
pub type MemoryFractionHook = unsafe extern "C" fn(fraction: f64, device: i32);
/// `void *base_alloc(void *ptr, size_t *size)`.
pub type BaseAllocHook = unsafe extern "C" fn(ptr: *mut c_void, size: *mut usize) -> *mut c_void;
/// `void record_stream(void *ptr, aclrtStream stream)` (and erase_stream).
pub type StreamHook = unsafe extern "C" fn(ptr: *mut c_void, stream: *mut c_void);
/// `DeviceStats get_device_stats(int device)`, the struct returned by value
/// (a hook built against PyTorch's older layout returns a [`DeviceStatsV1`]
/// instead; see [`DeviceStatsLayout`]).
pub type DeviceStatsHook = unsafe extern "C" fn(device: i32) -> DeviceStats;
/// `void reset_peak_status(int device)`.
pub type ResetPeakStatusHook = unsafe extern "C" fn(device: i32);

/// A device's statistics with the layout of PyTorch's
/// `c10::CachingDeviceAllocator::DeviceStats` (c10/core/CachingDeviceAllocator.h),
/// which torch_npu's `c10_npu::NPUCachingAllocator::DeviceStats` names: each
/// array is indexed all / small pool / large pool, every field is a 64-bit
/// signed integer, 976 bytes in all. A get-device-stats function returns it
/// by value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceStats {
    /// Allocations requested by client code.
    pub allocation: [Stat; 3],
    /// Segments taken from the device.
    pub segment: [Stat; 3],
    /// Active blocks.
    pub active: [Stat; 3],
    /// Inactive, split blocks.
    pub inactive_split: [Stat; 3],
    /// Bytes allocated.
    pub allocated_bytes: [Stat; 3],
    /// Bytes reserved from the device.
    pub reserved_bytes: [Stat; 3],
    /// Bytes in active blocks.
    pub active_bytes: [Stat; 3],
    /// Bytes in inactive, split blocks.
    pub inactive_split_bytes: [Stat; 3],
    /// Bytes requested by client code.
    pub requested_bytes: [Stat; 3],
    /// Failed device allocations that led to a cache flush and a retry.
    pub num_alloc_retries: i64,
    /// Out-of-memory errors.
    pub num_ooms: i64,
    /// Oversize blocks allocated from the pool.
    pub oversize_allocations: Stat,
    /// Oversize blocks that needed a device allocation.
    pub oversize_segments: Stat,
    /// Calls that synchronized every stream to free their events' blocks.
    pub num_sync_all_streams: i64,
    /// Device memory allocations (allocated and mapped).
    pub num_device_alloc: i64,
    /// Device memory deallocations (freed and unmapped).
    pub num_device_free: i64,
    /// The largest block size that may be split.
    pub max_split_size: i64,
}

/// A device's statistics with PyTorch's older `DeviceStats` layout (before
/// `num_sync_all_streams`, `num_device_alloc` and `num_device_free`): 952
/// bytes, `max_split_size` right after `oversize_segments`. What a
/// get-device-stats function built against that layout returns.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceStatsV1 {
    /// Allocations requested by client code.
    pub allocation: [Stat; 3],
    /// Segments taken from the device.
    pub segment: [Stat; 3],
    /// Active blocks.
    pub active: [Stat; 3],
    /// Inactive, split blocks.
    pub inactive_split: [Stat; 3],
    /// Bytes allocated.
    pub allocated_bytes: [Stat; 3],
    /// Bytes reserved from the device.
    pub reserved_bytes: [Stat; 3],
    /// Bytes in active blocks.
    pub active_bytes: [Stat; 3],
    /// Bytes in inactive, split blocks.
    pub inactive_split_bytes: [Stat; 3],
    /// Bytes requested by client code.
    pub requested_bytes: [Stat; 3],
    /// Failed device allocations that led to a cache flush and a retry.
    pub num_alloc_retries: i64,
    /// Out-of-memory errors.
    pub num_ooms: i64,
    /// Oversize blocks allocated from the pool.
    pub oversize_allocations: Stat,
    /// Oversize blocks that needed a device allocation.
    pub oversize_segments: Stat,
    /// The largest block size that may be split.
    pub max_split_size: i64,
}

// The layouts, field by field (PyTorch's header: nine StatArrays of 96 bytes,
// two counters, two Stats, then the tail).
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<Stat>() == 32);
    assert!(size_of::<DeviceStats>() == 976);
    assert!(offset_of!(DeviceStats, segment) == 96);
    assert!(offset_of!(DeviceStats, requested_bytes) == 768);
    assert!(offset_of!(DeviceStats, num_alloc_retries) == 864);
    assert!(offset_of!(DeviceStats, num_ooms) == 872);
    assert!(offset_of!(DeviceStats, oversize_allocations) == 880);
    assert!(offset_of!(DeviceStats, oversize_segments) == 912);
    assert!(offset_of!(DeviceStats, num_sync_all_streams) == 944);
    assert!(offset_of!(DeviceStats, num_device_alloc) == 952);
    assert!(offset_of!(DeviceStats, num_device_free) == 960);
    assert!(offset_of!(DeviceStats, max_split_size) == 968);
    assert!(size_of::<DeviceStatsV1>() == 952);
    assert!(offset_of!(DeviceStatsV1, oversize_segments) == 912);
    assert!(offset_of!(DeviceStatsV1, max_split_size) == 944);
};

impl From<DeviceStatsV1> for DeviceStats {
    /// The older layout's figures; the three counters it lacks are 0.
    fn from(v: DeviceStatsV1) -> Self {
        DeviceStats {
            allocation: v.allocation,
            segment: v.segment,
            active: v.active,
            inactive_split: v.inactive_split,
            allocated_bytes: v.allocated_bytes,
            reserved_bytes: v.reserved_bytes,
            active_bytes: v.active_bytes,
            inactive_split_bytes: v.inactive_split_bytes,
            requested_bytes: v.requested_bytes,
            num_alloc_retries: v.num_alloc_retries,
            num_ooms: v.num_ooms,
            oversize_allocations: v.oversize_allocations,
            oversize_segments: v.oversize_segments,
            num_sync_all_streams: 0,
            num_device_alloc: 0,
            num_device_free: 0,
            max_split_size: v.max_split_size,
        }
    }
}

/// Which `DeviceStats` layout a get-device-stats function returns. The
/// function is always called with room for the current layout (976
/// bytes), so neither layout writes past the library's buffer; a function
/// built against the older one must be declared, or its last figures are
/// read from bytes it did not write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeviceStatsLayout {
    /// The current layout, [`DeviceStats`] (976 bytes): PyTorch's today.
    #[default]
    Current,
    /// PyTorch's older layout, [`DeviceStatsV1`] (952 bytes).
    V1,
}

/// Calls a get-device-stats function with room for the current layout and
/// reads what it wrote as `layout`.
///
/// # Safety
/// `get` is a function of C signature `DeviceStats f(int)` or
/// `DeviceStatsV1 f(int)`, as `layout` says.
pub unsafe fn call_device_stats_hook(
    get: DeviceStatsHook,
    device: i32,
    layout: DeviceStatsLayout,
) -> DeviceStats {
    type Unwind = unsafe extern "C-unwind" fn(i32) -> DeviceStats;
    // SAFETY: the same signature, with unwinding allowed (a C++ exception
    // reaches the trampoline). A function of the older layout returns the
    // smaller struct through the same hidden result address (both are
    // returned in memory), into this larger room.
    let get = unsafe { std::mem::transmute::<DeviceStatsHook, Unwind>(get) };
    // SAFETY: the caller's contract.
    let written = unsafe { get(device) };
    match layout {
        DeviceStatsLayout::Current => written,
        DeviceStatsLayout::V1 => {
            // SAFETY: its first 952 bytes are the older layout's, as written.
            let older: DeviceStatsV1 = unsafe { std::ptr::read((&raw const written).cast()) };
            DeviceStats::from(older)
        }
    }
}

/// The functions set so far (None: not set).
#[derive(Clone, Copy, Default)]
pub struct Hooks {
    /// `set_init_fn`.
    pub init: Option<InitHook>,
    /// `set_reset_fn`.
    pub reset: Option<ResetHook>,
    /// `set_memory_fraction_fn`.
    pub memory_fraction: Option<MemoryFractionHook>,
    /// `set_base_alloc_fn`.
    pub base_alloc: Option<BaseAllocHook>,
    /// `set_record_stream_fn`.
    pub record_stream: Option<StreamHook>,
    /// `set_erase_stream_fn`.
    pub erase_stream: Option<StreamHook>,
    /// `set_get_device_stats_fn`.
    pub device_stats: Option<DeviceStatsHook>,
    /// `set_reset_peak_status_fn`.
    pub reset_peak_status: Option<ResetPeakStatusHook>,
    /// The layout `device_stats` returns.
    pub device_stats_layout: DeviceStatsLayout,
}

// Unwinding views of the hook types (same signatures and call ABI), so a C++
// exception may leave one into the trampoline.
type InitUnwind = unsafe extern "C-unwind" fn(i32);
type ResetUnwind = unsafe extern "C-unwind" fn(bool);
type BaseAllocUnwind = unsafe extern "C-unwind" fn(*mut c_void, *mut usize) -> *mut c_void;
type StreamUnwind = unsafe extern "C-unwind" fn(*mut c_void, *mut c_void);

impl PluggableAllocator {
    /// Changes the functions set (`f` edits them). A newly set init function
    /// is called at the next use.
    pub fn set_hooks(&self, f: impl FnOnce(&mut Hooks)) {
        let mut hooks = self.hooks.lock();
        let had_init = hooks.init.map(|h| h as usize);
        f(&mut hooks);
        if hooks.init.is_some() && hooks.init.map(|h| h as usize) != had_init {
            self.init_pending.store(true, Ordering::Release);
        }
    }

    /// The functions set now.
    pub fn hooks(&self) -> Hooks {
        *self.hooks.lock()
    }

    /// Runs a pending init function before this use (one thread runs it,
    /// the others wait for it; a call back into the allocator from inside
    /// it finds nothing pending).
    #[inline]
    pub(crate) fn init_if_pending(&self) -> Result<()> {
        if self.init_pending.load(Ordering::Acquire) {
            return self.run_pending_init();
        }
        Ok(())
    }

    #[cold]
    fn run_pending_init(&self) -> Result<()> {
        let _once = self.init_lock.lock();
        if !self.init_pending.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let Some(init) = self.hooks().init else {
            return Ok(());
        };
        // SAFETY: same signature and call ABI.
        let init = unsafe { std::mem::transmute::<InitHook, InitUnwind>(init) };
        let count = context::device_count();
        // SAFETY: the function's documented signature, called with a plain value.
        self.call(PluginFunction::Init, (), || unsafe { init(count) })
    }

    /// The reset function set with `set_reset_fn`, called with `true`; false
    /// when none is set.
    pub(crate) fn reset_hook(&self) -> Result<bool> {
        let Some(reset) = self.hooks().reset else {
            return Ok(false);
        };
        self.init_if_pending()?;
        // SAFETY: same signature and call ABI.
        let reset = unsafe { std::mem::transmute::<ResetHook, ResetUnwind>(reset) };
        // SAFETY: the function's documented signature.
        self.call(PluginFunction::Reset, (), || unsafe { reset(true) })?;
        Ok(true)
    }

    /// The allocation `ptr` belongs to and its size: the base-allocation
    /// function's answer, or without one, a live block's own start and size.
    /// A pointer that is not a live block's start is refused without one.
    pub fn base_allocation(&self, ptr: NonNull<c_void>) -> Result<(*mut c_void, usize)> {
        self.init_if_pending()?;
        let Some(base_alloc) = self.hooks().base_alloc else {
            let block = self.block(ptr).ok_or(Error::ForeignPointer)?;
            return Ok((ptr.as_ptr(), block.size));
        };
        // SAFETY: same signature and call ABI.
        let base_alloc =
            unsafe { std::mem::transmute::<BaseAllocHook, BaseAllocUnwind>(base_alloc) };
        let mut size = 0usize;
        let size_out = &raw mut size;
        // SAFETY: the function's documented signature; `size_out` is a
        // writable local for the length of the call.
        let base = self.call(PluginFunction::BaseAlloc, std::ptr::null_mut(), || unsafe {
            base_alloc(ptr.as_ptr(), size_out)
        })?;
        if base.is_null() {
            return Err(Error::ForeignPointer);
        }
        Ok((base, size))
    }

    /// Tells the record-stream (`erase` false) or erase-stream function that
    /// `stream` (an `aclrtStream`'s address) uses the live block `ptr`;
    /// without one, nothing to tell.
    pub fn stream_hook(&self, ptr: NonNull<c_void>, stream: usize, erase: bool) -> Result<()> {
        self.block(ptr).ok_or(Error::ForeignPointer)?;
        self.init_if_pending()?;
        let hooks = self.hooks();
        let (hook, function) = if erase {
            (hooks.erase_stream, PluginFunction::EraseStream)
        } else {
            (hooks.record_stream, PluginFunction::RecordStream)
        };
        let Some(hook) = hook else {
            return Ok(());
        };
        // SAFETY: same signature and call ABI.
        let hook = unsafe { std::mem::transmute::<StreamHook, StreamUnwind>(hook) };
        // SAFETY: the function's documented signature, with plain values.
        self.call(function, (), || unsafe {
            hook(ptr.as_ptr(), stream as *mut c_void)
        })
    }

    /// `device`'s statistics: the get-device-stats function's, or without
    /// one the counters kept here (allocations and their bytes, as active
    /// blocks and bytes too, and out-of-memory errors; the rest zero).
    pub fn device_stats(&self, device: i32) -> Result<DeviceStats> {
        self.init_if_pending()?;
        let hooks = self.hooks();
        let Some(get) = hooks.device_stats else {
            return Ok(self.counted_stats());
        };
        let layout = hooks.device_stats_layout;
        // SAFETY: the function's documented signature (either layout), with
        // a plain value; it is given room for the larger layout.
        self.call(
            PluginFunction::DeviceStats,
            DeviceStats::default(),
            || unsafe { call_device_stats_hook(get, device, layout) },
        )
    }

    fn counted_stats(&self) -> DeviceStats {
        let s = self.stats();
        let signed = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let count = Stat {
            current: signed(s.active_count),
            peak: signed(s.active_peak),
            allocated: signed(s.alloc_count),
            freed: signed(s.free_count),
        };
        let bytes = Stat {
            current: signed(s.allocated_bytes_current),
            peak: signed(s.allocated_bytes_peak),
            allocated: signed(s.allocated_bytes_total),
            freed: signed(s.freed_bytes_total),
        };
        let all = |stat: Stat| [stat, Stat::default(), Stat::default()];
        DeviceStats {
            allocation: all(count),
            active: all(count),
            allocated_bytes: all(bytes),
            active_bytes: all(bytes),
            requested_bytes: all(bytes),
            num_ooms: signed(s.failed_alloc_count),
            ..DeviceStats::default()
        }
    }

    /// Restarts the peaks kept here, then calls the reset-peak function (if
    /// set) for `device`.
    pub fn reset_peak_status(&self, device: i32) -> Result<()> {
        self.reset_peak_stats();
        self.init_if_pending()?;
        let Some(reset) = self.hooks().reset_peak_status else {
            return Ok(());
        };
        // SAFETY: same signature and call ABI.
        let reset = unsafe { std::mem::transmute::<ResetPeakStatusHook, InitUnwind>(reset) };
        // SAFETY: the function's documented signature, with a plain value.
        self.call(PluginFunction::ResetPeakStatus, (), || unsafe {
            reset(device)
        })
    }

    /// The memory-fraction function set with `set_memory_fraction_fn`, if any.
    pub(crate) fn memory_fraction_hook(&self) -> Option<MemoryFractionHook> {
        self.hooks().memory_fraction
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::sync::AtomicUsize;
    use crate::PluginFunctions;

    static NEXT: AtomicUsize = AtomicUsize::new(0x6000_0000);
    unsafe extern "C" fn alloc(size: isize, _: i32, _: *mut c_void) -> *mut c_void {
        NEXT.fetch_add(size.max(64) as usize, Ordering::SeqCst) as *mut c_void
    }
    unsafe extern "C" fn free(_: *mut c_void, _: isize, _: i32, _: *mut c_void) {}

    fn allocator() -> PluggableAllocator {
        PluggableAllocator::from_functions(PluginFunctions {
            alloc,
            free,
            init: None,
            empty_cache: None,
            memory_fraction: None,
        })
    }

    static INITS: AtomicUsize = AtomicUsize::new(0);
    static INIT_COUNT_SEEN: AtomicUsize = AtomicUsize::new(0);
    unsafe extern "C" fn init(device_count: i32) {
        INITS.fetch_add(1, Ordering::SeqCst);
        INIT_COUNT_SEEN.store(device_count as usize, Ordering::SeqCst);
    }

    #[test]
    fn an_init_function_set_by_address_runs_once_before_the_first_use() {
        let a = allocator();
        a.set_hooks(|h| h.init = Some(init));
        assert_eq!(INITS.load(Ordering::SeqCst), 0, "not at set time");
        let p = a.alloc(64, 0, None).unwrap();
        let q = a.alloc(64, 0, None).unwrap();
        assert_eq!(INITS.load(Ordering::SeqCst), 1);
        assert_eq!(
            INIT_COUNT_SEEN.load(Ordering::SeqCst),
            context::device_count() as usize
        );
        a.set_hooks(|h| h.init = Some(init));
        a.free(p).unwrap();
        a.free(q).unwrap();
        assert_eq!(
            INITS.load(Ordering::SeqCst),
            1,
            "the same function again: not rerun"
        );
    }

    static RESETS: AtomicUsize = AtomicUsize::new(0);
    unsafe extern "C" fn reset(check_error: bool) {
        RESETS.fetch_add(if check_error { 1 } else { 100 }, Ordering::SeqCst);
    }
    static FRACTION_DEVICE: AtomicUsize = AtomicUsize::new(0);
    unsafe extern "C" fn fraction(value: f64, device: i32) {
        assert_eq!(value, 0.25);
        FRACTION_DEVICE.store(device as usize + 1, Ordering::SeqCst);
    }

    static DROP_INITS: AtomicUsize = AtomicUsize::new(0);
    unsafe extern "C" fn init_counted(_: i32) {
        DROP_INITS.fetch_add(1, Ordering::SeqCst);
    }
    static DROP_RESETS: AtomicUsize = AtomicUsize::new(0);
    unsafe extern "C" fn reset_counted(_: bool) {
        DROP_RESETS.fetch_add(1, Ordering::SeqCst);
    }

    #[test]
    fn a_dropped_allocator_resets_but_never_runs_an_init_it_never_needed() {
        let a = allocator();
        a.set_hooks(|h| {
            h.init = Some(init_counted);
            h.reset = Some(reset_counted);
        });
        drop(a);
        assert_eq!(DROP_RESETS.load(Ordering::SeqCst), 1);
        assert_eq!(DROP_INITS.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn reset_and_memory_fraction_functions_serve_empty_cache_and_the_limit() {
        let a = allocator();
        a.empty_cache().unwrap();
        assert!(matches!(
            a.set_memory_fraction(0.25, 2),
            Err(Error::NotSupported { .. })
        ));
        a.set_hooks(|h| {
            h.reset = Some(reset);
            h.memory_fraction = Some(fraction);
        });
        a.empty_cache().unwrap();
        assert_eq!(RESETS.load(Ordering::SeqCst), 1, "called with true");
        a.set_memory_fraction(0.25, 2).unwrap();
        assert_eq!(FRACTION_DEVICE.load(Ordering::SeqCst), 3);
        a.set_hooks(|h| h.reset = None);
        a.empty_cache().unwrap();
        assert_eq!(RESETS.load(Ordering::SeqCst), 1, "unset: not called");
    }

    unsafe extern "C" fn base_alloc(ptr: *mut c_void, size: *mut usize) -> *mut c_void {
        if ptr as usize & 1 == 1 {
            return std::ptr::null_mut();
        }
        // SAFETY: the allocator passes a writable size.
        unsafe { *size = 1 << 20 };
        (ptr as usize & !0xFFFF) as *mut c_void
    }

    #[test]
    fn base_allocation_is_the_function_s_answer_or_the_live_block() {
        let a = allocator();
        let p = a.alloc(300, 0, None).unwrap();
        assert_eq!(a.base_allocation(p), Ok((p.as_ptr(), 300)));
        let odd = NonNull::new(0x1235 as *mut c_void).unwrap();
        assert_eq!(a.base_allocation(odd), Err(Error::ForeignPointer));
        a.set_hooks(|h| h.base_alloc = Some(base_alloc));
        let base = (p.as_ptr() as usize & !0xFFFF) as *mut c_void;
        assert_eq!(a.base_allocation(p), Ok((base, 1 << 20)));
        assert_eq!(
            a.base_allocation(odd),
            Err(Error::ForeignPointer),
            "NULL answer"
        );
        a.free(p).unwrap();
    }

    static RECORDED: AtomicUsize = AtomicUsize::new(0);
    static ERASED: AtomicUsize = AtomicUsize::new(0);
    unsafe extern "C" fn record(ptr: *mut c_void, stream: *mut c_void) {
        RECORDED.store(ptr as usize ^ stream as usize, Ordering::SeqCst);
    }
    unsafe extern "C" fn erase(ptr: *mut c_void, stream: *mut c_void) {
        ERASED.store(ptr as usize ^ stream as usize, Ordering::SeqCst);
    }

    #[test]
    fn stream_functions_hear_of_live_blocks_only() {
        let a = allocator();
        let p = a.alloc(64, 0, None).unwrap();
        a.stream_hook(p, 0x40, false).unwrap();
        a.set_hooks(|h| {
            h.record_stream = Some(record);
            h.erase_stream = Some(erase);
        });
        a.stream_hook(p, 0x40, false).unwrap();
        assert_eq!(RECORDED.load(Ordering::SeqCst), p.as_ptr() as usize ^ 0x40);
        a.stream_hook(p, 0x80, true).unwrap();
        assert_eq!(ERASED.load(Ordering::SeqCst), p.as_ptr() as usize ^ 0x80);
        a.free(p).unwrap();
        assert_eq!(a.stream_hook(p, 0x40, false), Err(Error::ForeignPointer));
        assert_eq!(
            RECORDED.load(Ordering::SeqCst),
            p.as_ptr() as usize ^ 0x40,
            "not called for a freed block"
        );
    }

    unsafe extern "C" fn device_stats(device: i32) -> DeviceStats {
        let mut s = DeviceStats {
            num_alloc_retries: 7,
            max_split_size: i64::MAX,
            ..DeviceStats::default()
        };
        s.reserved_bytes[2].peak = 1 << 30;
        s.oversize_segments.freed = i64::from(device);
        s
    }
    static PEAK_RESETS: AtomicUsize = AtomicUsize::new(0);
    unsafe extern "C" fn reset_peak(device: i32) {
        PEAK_RESETS.store(device as usize + 1, Ordering::SeqCst);
    }

    unsafe extern "C" fn device_stats_v1(device: i32) -> DeviceStatsV1 {
        let mut s = DeviceStatsV1 {
            num_ooms: 4,
            max_split_size: 1 << 20,
            ..DeviceStatsV1::default()
        };
        s.requested_bytes[1].freed = i64::from(device);
        s
    }
    unsafe extern "C" fn device_stats_current(device: i32) -> DeviceStats {
        DeviceStats {
            num_sync_all_streams: 1,
            num_device_alloc: 2,
            num_device_free: i64::from(device),
            max_split_size: -1,
            ..DeviceStats::default()
        }
    }

    #[test]
    fn either_layout_is_read_right_as_declared() {
        // SAFETY: the older layout's function, given where the hook type is
        // taken (the library calls it with room for the larger layout).
        let v1 = unsafe {
            std::mem::transmute::<unsafe extern "C" fn(i32) -> DeviceStatsV1, DeviceStatsHook>(
                device_stats_v1,
            )
        };
        {
            let layout = DeviceStatsLayout::V1;
            // SAFETY: a function of the older layout's signature.
            let s = unsafe { call_device_stats_hook(v1, 9, layout) };
            assert_eq!((s.num_ooms, s.max_split_size), (4, 1 << 20), "{layout:?}");
            assert_eq!(s.requested_bytes[1].freed, 9);
            let tail = (
                s.num_sync_all_streams,
                s.num_device_alloc,
                s.num_device_free,
            );
            assert_eq!(tail, (0, 0, 0), "{layout:?}");
        }
        {
            let layout = DeviceStatsLayout::Current;
            // SAFETY: a function of the current layout's signature.
            let s = unsafe { call_device_stats_hook(device_stats_current, 6, layout) };
            let tail = (
                s.num_sync_all_streams,
                s.num_device_alloc,
                s.num_device_free,
            );
            assert_eq!((tail, s.max_split_size), ((1, 2, 6), -1), "{layout:?}");
        }
        let a = allocator();
        a.set_hooks(|h| {
            h.device_stats = Some(v1);
            h.device_stats_layout = DeviceStatsLayout::V1;
        });
        assert_eq!(a.device_stats(0).unwrap().max_split_size, 1 << 20);
        a.set_hooks(|h| h.device_stats_layout = DeviceStatsLayout::Current);
        a.set_hooks(|h| h.device_stats = Some(device_stats_current));
        assert_eq!(a.device_stats(3).unwrap().num_device_free, 3);
    }

    #[test]
    fn device_stats_come_from_the_function_or_the_counters_and_peaks_reset_both() {
        let a = allocator();
        let p = a.alloc(1000, 0, None).unwrap();
        let counted = a.device_stats(0).unwrap();
        assert_eq!(counted.allocation[0].current, 1);
        assert_eq!(counted.allocated_bytes[0].peak, 1000);
        assert_eq!(counted.active_bytes[0], counted.allocated_bytes[0]);
        assert_eq!(counted.segment, [Stat::default(); 3]);
        a.free(p).unwrap();
        a.reset_peak_status(3).unwrap();
        assert_eq!(a.device_stats(0).unwrap().allocated_bytes[0].peak, 0);
        a.set_hooks(|h| {
            h.device_stats = Some(device_stats);
            h.reset_peak_status = Some(reset_peak);
        });
        let given = a.device_stats(5).unwrap();
        assert_eq!(given.num_alloc_retries, 7);
        assert_eq!(given.max_split_size, i64::MAX);
        assert_eq!(given.reserved_bytes[2].peak, 1 << 30);
        assert_eq!(given.oversize_segments.freed, 5, "the device passed on");
        a.reset_peak_status(3).unwrap();
        assert_eq!(PEAK_RESETS.load(Ordering::SeqCst), 4);
    }
}
