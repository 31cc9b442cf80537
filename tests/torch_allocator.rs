//! aclalloc's default caching pool as a torch_npu pluggable allocator, through
//! the C ABI: `aclallocTorchMalloc`/`aclallocTorchFree` with torch_npu's
//! signatures and the functions its allocator object takes by address. Its
//! own process: the default pools are process-wide.

use aclalloc::base::error::*;
use aclalloc::ffi::cann::errmsg::aclGetRecentErrMsg;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::ext::torch_allocator::*;
use std::ffi::{c_void, CStr};
use std::ptr::null_mut;

fn recent() -> String {
    // SAFETY: the library's message, a C string or NULL.
    let p = aclGetRecentErrMsg();
    if p.is_null() {
        return String::new();
    }
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

#[test]
fn the_default_pool_serves_torch_npu_s_malloc_and_free_with_its_statistics() {
    assert_eq!(unsafe { aclInit(std::ptr::null()) }, ACL_SUCCESS);
    assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
    aclallocTorchInit(2);
    let before = aclallocTorchGetDeviceStats(0);

    let p = aclallocTorchMalloc(4096, 0, null_mut());
    assert!(!p.is_null(), "{}", recent());
    let mut stream = null_mut();
    assert_eq!(unsafe { aclrtCreateStream(&mut stream) }, ACL_SUCCESS);
    let q = aclallocTorchMalloc(1000, -1, stream);
    assert!(!q.is_null(), "{}", recent());
    // SAFETY: 4096 writable bytes of host-runtime device memory.
    unsafe { std::ptr::write_bytes(p as *mut u8, 0xAB, 4096) };

    let s = aclallocTorchGetDeviceStats(0);
    assert_eq!(s.allocation[0].current, before.allocation[0].current + 2);
    assert_eq!(
        s.requested_bytes[0].current,
        before.requested_bytes[0].current + 5096
    );
    assert!(s.allocated_bytes[0].current >= before.allocated_bytes[0].current + 5096);
    assert!(s.reserved_bytes[0].current >= s.allocated_bytes[0].current);
    assert!(s.num_device_alloc >= 1, "segments from the device: {s:?}");
    assert_eq!(
        aclallocTorchGetDeviceStats(1),
        Default::default(),
        "no pool"
    );

    let mut size = 0usize;
    // SAFETY: `size` is writable.
    let base = unsafe { aclallocTorchBaseAlloc(p, &mut size) } as usize;
    assert!(
        base <= p as usize && p as usize + 4096 <= base + size,
        "{base:#x} {size}"
    );
    let foreign = 0x10 as *mut c_void;
    // SAFETY: as above.
    assert!(unsafe { aclallocTorchBaseAlloc(foreign, &mut size) }.is_null());

    // Another device than the current one: refused, with the reason.
    assert!(aclallocTorchMalloc(64, 1, null_mut()).is_null());
    assert!(recent().contains("device"));

    aclallocTorchFree(p, 4096, 0, null_mut());
    aclallocTorchFree(q, 1000, 0, stream);
    aclallocTorchFree(null_mut(), 0, 0, null_mut());
    aclallocTorchFree(foreign, 8, 0, null_mut());
    assert!(!recent().is_empty(), "a foreign pointer is refused");
    let s = aclallocTorchGetDeviceStats(0);
    assert_eq!(s.allocation[0].current, before.allocation[0].current);
    assert_eq!(s.allocation[0].freed, before.allocation[0].freed + 2);

    aclallocTorchResetPeakStatus(0);
    let s = aclallocTorchGetDeviceStats(0);
    assert_eq!(s.allocated_bytes[0].peak, s.allocated_bytes[0].current);
    aclallocTorchReset(true);
    let s = aclallocTorchGetDeviceStats(0);
    assert_eq!(s.reserved_bytes[0].current, 0, "the cache went back: {s:?}");

    // A memory fraction bounds the pool of the device.
    aclallocTorchSetMemoryFraction(1e-9, 0);
    assert!(aclallocTorchMalloc(8 << 20, 0, null_mut()).is_null());
    aclallocTorchSetMemoryFraction(1.0, 0);
    let r = aclallocTorchMalloc(8 << 20, 0, null_mut());
    assert!(!r.is_null(), "{}", recent());
    aclallocTorchFree(r, 8 << 20, 0, null_mut());
    assert_eq!(unsafe { aclrtDestroyStream(stream) }, ACL_SUCCESS);
}
