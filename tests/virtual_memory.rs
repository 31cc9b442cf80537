//! CANN's virtual-memory API through the C ABI on the host runtime, and the
//! caching pool with expandable segments on top of it (the same calls the
//! pool makes in front of a real CANN).

mod common;

use aclalloc::base::error::*;
use aclalloc::ffi::cann::memory::*;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::cann::types::*;
use aclalloc::ffi::cann::virtual_memory::*;
use aclalloc::ffi::ext::pool::*;
use common::message;
use std::ffi::c_void;
use std::ptr::null_mut;

const G: usize = 2 << 20;

/// The tests compare the device's free memory before and after: one at a
/// time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn setup() -> std::sync::MutexGuard<'static, ()> {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: a NULL configuration path is allowed.
    let rc = unsafe { aclInit(std::ptr::null()) };
    assert!(rc == ACL_SUCCESS || rc == ACL_ERROR_REPEAT_INITIALIZE);
    assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
    guard
}

fn free_bytes() -> usize {
    let (mut free, mut total) = (0, 0);
    // SAFETY: valid out-pointers.
    assert_eq!(
        unsafe { aclrtGetMemInfo(ACL_HBM_MEM, &mut free, &mut total) },
        ACL_SUCCESS
    );
    free
}

#[test]
fn reserve_malloc_map_copy_unmap_free_release() {
    let _serial = setup();
    let mut p = common::physical_prop();
    let mut g = 0usize;
    unsafe {
        assert_eq!(
            aclrtMemGetAllocationGranularity(
                &mut p,
                ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED,
                &mut g
            ),
            ACL_SUCCESS
        );
        assert_eq!(g, G);
        let mut va: *mut c_void = null_mut();
        assert_eq!(
            aclrtReserveMemAddress(&mut va, 4 * G, 0, null_mut(), 0),
            ACL_SUCCESS
        );
        assert_eq!(va as usize % G, 0);
        let before = free_bytes();
        let mut h: aclrtDrvMemHandle = null_mut();
        assert_eq!(aclrtMallocPhysical(&mut h, 2 * G, &p, 0), ACL_SUCCESS);
        assert_eq!(
            free_bytes(),
            before - 2 * G,
            "physical memory counts against the device"
        );
        let at = (va as usize + G) as *mut c_void;
        assert_eq!(aclrtMapMem(at, 2 * G, 0, h, 0), ACL_SUCCESS);
        // Mapped memory is device memory to memset/memcpy.
        assert_eq!(aclrtMemset(at, 2 * G, 0x5A, 2 * G), ACL_SUCCESS);
        let mut host = [0u8; 16];
        assert_eq!(
            aclrtMemcpy(
                host.as_mut_ptr().cast(),
                16,
                at,
                16,
                ACL_MEMCPY_DEVICE_TO_HOST
            ),
            ACL_SUCCESS
        );
        assert_eq!(host, [0x5A; 16]);
        assert_eq!(
            aclrtMemset(at, 3 * G, 0, 3 * G),
            ACL_ERROR_INVALID_PARAM,
            "past the mapping"
        );
        // Misuse: CANN's codes and a message.
        assert_eq!(
            aclrtReleaseMemAddress(va),
            ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED
        );
        assert!(message().contains("aclrtUnmapMem"), "{}", message());
        assert_eq!(
            aclrtMapMem(va, 2 * G, 0, h, 0),
            ACL_ERROR_INVALID_PARAM,
            "same handle over a live mapping"
        );
        assert!(
            message().contains("overlaps a live mapping"),
            "{}",
            message()
        );
        assert_eq!(aclrtUnmapMem(at), ACL_SUCCESS);
        assert_eq!(aclrtUnmapMem(at), ACL_ERROR_INVALID_PARAM);
        assert!(
            message().starts_with("aclrtUnmapMem failed. Parameter virPtr is invalid"),
            "{}",
            message()
        );
        assert_eq!(aclrtFreePhysical(h), ACL_SUCCESS);
        assert_eq!(free_bytes(), before);
        assert_eq!(aclrtFreePhysical(h), ACL_ERROR_INVALID_PARAM, "double free");
        assert_eq!(aclrtReleaseMemAddress(va), ACL_SUCCESS);
        assert_eq!(
            aclrtReleaseMemAddress(va),
            ACL_ERROR_INVALID_PARAM,
            "double release"
        );
    }
}

#[test]
fn freeing_mapped_memory_defers_it_to_the_unmap() {
    let _serial = setup();
    let p = common::physical_prop();
    unsafe {
        let mut va: *mut c_void = null_mut();
        assert_eq!(
            aclrtReserveMemAddress(&mut va, G, 0, null_mut(), 1),
            ACL_SUCCESS
        );
        let mut h: aclrtDrvMemHandle = null_mut();
        assert_eq!(aclrtMallocPhysical(&mut h, G, &p, 0), ACL_SUCCESS);
        assert_eq!(aclrtMapMem(va, G, 0, h, 0), ACL_SUCCESS);
        (va as *mut u8).write(1);
        assert_eq!(
            aclrtFreePhysical(h),
            ACL_SUCCESS,
            "CANN: freed once unmapped"
        );
        assert_eq!(*(va as *const u8), 1, "still mapped");
        assert_eq!(
            aclrtMapMem(va, G, 0, h, 0),
            ACL_ERROR_INVALID_PARAM,
            "the handle is dead"
        );
        assert_eq!(aclrtUnmapMem(va), ACL_SUCCESS);
        assert_eq!(aclrtReleaseMemAddress(va), ACL_SUCCESS);
    }
}

#[test]
fn out_parameters_are_written_only_on_success() {
    let _serial = setup();
    let mut p = common::physical_prop();
    unsafe {
        let mut va = 0x1234 as *mut c_void;
        assert_eq!(
            aclrtReserveMemAddress(&mut va, 0, 0, null_mut(), 0),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(va as usize, 0x1234);
        let mut h = 0x1234 as aclrtDrvMemHandle;
        assert_eq!(
            aclrtMallocPhysical(&mut h, G + 1, &p, 0),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(message().contains("granularity"), "{}", message());
        assert_eq!(h as usize, 0x1234);
        assert_eq!(
            aclrtMallocPhysical(&mut h, 1 << 50, &p, 0),
            ACL_ERROR_RT_MEMORY_ALLOCATION
        );
        assert_eq!(h as usize, 0x1234);
        p.location.id = 99;
        assert_eq!(
            aclrtMallocPhysical(&mut h, G, &p, 0),
            ACL_ERROR_RT_INVALID_DEVICEID
        );
        let mut g = 7usize;
        assert_eq!(
            aclrtMemGetAllocationGranularity(&mut p, 5, &mut g),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(g, 7);
    }
}

fn expandable_pool() -> aclallocPool {
    let mut cfg: aclallocPoolConfig = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers.
    unsafe {
        assert_eq!(aclallocPoolConfigInit(&mut cfg), ACL_SUCCESS);
        cfg.expandable_segments = 1;
        let (mut pool, mut desc) = (null_mut(), null_mut());
        assert_eq!(aclallocPoolCreate(&cfg, &mut pool, &mut desc), ACL_SUCCESS);
        pool
    }
}

fn reserved(pool: aclallocPool) -> usize {
    let mut r = 0;
    // SAFETY: a valid out-pointer.
    assert_eq!(
        unsafe { aclallocPoolMemoryReserved(pool, &mut r) },
        ACL_SUCCESS
    );
    r
}

#[test]
fn the_c_pool_grows_over_the_acl_virtual_memory() {
    let _serial = setup();
    let pool = expandable_pool();
    let before = free_bytes();
    let a = aclallocPoolAlloc(pool, 3 << 20);
    assert!(!a.is_null());
    // The block is device memory: runtime copies reach it.
    assert_eq!(unsafe { aclrtMemset(a, 3 << 20, 1, 3 << 20) }, ACL_SUCCESS);
    assert_eq!(
        reserved(pool),
        2 * G,
        "two pages mapped under a 3 MiB block"
    );
    assert_eq!(
        free_bytes(),
        before - 2 * G,
        "pages come from aclrtMallocPhysical"
    );
    aclallocPoolFree(pool, a);
    assert_eq!(aclallocPoolEmptyCache(pool), ACL_SUCCESS);
    assert_eq!(reserved(pool), 0);
    assert_eq!(free_bytes(), before);
    assert_eq!(aclallocPoolEmptyVirtAddrCache(pool), ACL_SUCCESS);
    assert_eq!(aclallocPoolDestroy(pool), ACL_SUCCESS);
    assert_eq!(
        aclallocPoolEmptyVirtAddrCache(pool),
        ACL_ERROR_INVALID_PARAM
    );
}

#[test]
fn an_invalid_expandable_setting_is_refused() {
    let _serial = setup();
    let mut cfg: aclallocPoolConfig = unsafe { std::mem::zeroed() };
    unsafe {
        assert_eq!(aclallocPoolConfigInit(&mut cfg), ACL_SUCCESS);
        assert_eq!(cfg.expandable_segments, 0);
        cfg.expandable_segments = 2;
        let (mut pool, mut desc) = (null_mut(), null_mut());
        assert_eq!(
            aclallocPoolCreate(&cfg, &mut pool, &mut desc),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(
            message().contains("config->expandable_segments"),
            "{}",
            message()
        );
        assert!(pool.is_null());
    }
}
