//! The host runtime through its C ABI: codes, out-parameters, messages, and
//! launches that consume a registered allocator.

mod common;

use aclalloc::base::error::*;
use aclalloc::ffi::cann::allocator::*;
use aclalloc::ffi::cann::memory::*;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::cann::types::*;
use aclalloc::ffi::ext::launch::aclallocLaunchKernel;
use common::recent_message;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A bump allocator over one buffer that starts over when every block is back.
struct Bump {
    base: *mut u8,
    capacity: usize,
    used: AtomicUsize,
    live: AtomicUsize,
    allocs: AtomicUsize,
    frees: AtomicUsize,
}

unsafe extern "C" fn bump_alloc(obj: *mut c_void, size: usize) -> *mut c_void {
    let b = unsafe { &*(obj as *const Bump) };
    let at = b.used.fetch_add(size, Ordering::SeqCst);
    if at + size > b.capacity {
        return std::ptr::null_mut();
    }
    b.live.fetch_add(1, Ordering::SeqCst);
    b.allocs.fetch_add(1, Ordering::SeqCst);
    unsafe { b.base.add(at) as *mut c_void }
}

unsafe extern "C" fn bump_free(obj: *mut c_void, _block: *mut c_void) {
    let b = unsafe { &*(obj as *const Bump) };
    b.frees.fetch_add(1, Ordering::SeqCst);
    if b.live.fetch_sub(1, Ordering::SeqCst) == 1 {
        b.used.store(0, Ordering::SeqCst);
    }
}

unsafe extern "C" fn identity(block: *mut c_void) -> *mut c_void {
    block
}

static KERNEL_BYTES: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn fill(workspace: *mut c_void, size: usize, _: *mut c_void) {
    if size > 0 {
        unsafe { (workspace as *mut u8).write_bytes(0x3C, size) };
    }
    KERNEL_BYTES.fetch_add(size, Ordering::SeqCst);
}

#[test]
fn a_program_runs_launches_on_its_registered_allocator_through_the_c_abi() {
    unsafe {
        assert_eq!(aclInit(std::ptr::null()), ACL_SUCCESS);
        assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
        let mut device = -1;
        assert_eq!(aclrtGetDevice(&mut device), ACL_SUCCESS);
        assert_eq!(device, 0);
        let mut stream: aclrtStream = std::ptr::null_mut();
        assert_eq!(aclrtCreateStream(&mut stream), ACL_SUCCESS);
        assert_eq!((stream as usize) >> 48, 0xACA3, "a tagged handle");

        // CANN's runtime allocates with its default policy when the policy is
        // not an aclrtMemMallocPolicy value, so a program that does that runs
        // on CANN; it must run here too.
        for policy in [99, -1, 8, ACL_MEM_MALLOC_HUGE_FIRST | 0x200] {
            let mut p: *mut c_void = std::ptr::null_mut();
            assert_eq!(
                aclrtMalloc(&mut p, 4096, policy),
                ACL_SUCCESS,
                "policy {policy}"
            );
            assert!(!p.is_null());
            assert_eq!(aclrtFree(p), ACL_SUCCESS);
        }

        let mut base: *mut c_void = std::ptr::null_mut();
        assert_eq!(
            aclrtMalloc(&mut base, 1 << 20, ACL_MEM_MALLOC_HUGE_FIRST),
            ACL_SUCCESS
        );
        let bump = Bump {
            base: base as *mut u8,
            capacity: 1 << 20,
            used: AtomicUsize::new(0),
            live: AtomicUsize::new(0),
            allocs: AtomicUsize::new(0),
            frees: AtomicUsize::new(0),
        };
        let desc = aclrtAllocatorCreateDesc();
        assert_eq!(
            aclrtAllocatorSetObjToDesc(desc, &bump as *const Bump as *mut c_void),
            0
        );
        assert_eq!(aclrtAllocatorSetAllocFuncToDesc(desc, Some(bump_alloc)), 0);
        assert_eq!(aclrtAllocatorSetFreeFuncToDesc(desc, Some(bump_free)), 0);
        assert_eq!(
            aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, Some(identity)),
            0
        );
        assert_eq!(aclrtAllocatorRegister(stream, desc), ACL_SUCCESS);

        let mut want = 0;
        for i in 0..1000usize {
            let size = [0, 1, 4096, 300_000, 77][i % 5];
            want += size;
            assert_eq!(
                aclallocLaunchKernel(stream, size, Some(fill), std::ptr::null_mut()),
                ACL_SUCCESS
            );
        }
        assert_eq!(aclrtSynchronizeStream(stream), ACL_SUCCESS);
        assert_eq!(KERNEL_BYTES.load(Ordering::SeqCst), want);
        assert_eq!(bump.allocs.load(Ordering::SeqCst), 800);
        assert_eq!(bump.frees.load(Ordering::SeqCst), 800);
        assert_eq!(recent_message(), None);

        assert_eq!(
            aclallocLaunchKernel(stream, 2 << 20, Some(fill), std::ptr::null_mut()),
            ACL_ERROR_RT_MEMORY_ALLOCATION
        );
        assert_eq!(
            recent_message().as_deref(),
            Some(
                format!(
                    "aclallocLaunchKernel failed. The allocator of stream {:#x} returned NULL from alloc for a workspace of 2097152 bytes.",
                    stream as usize
                )
                .as_str()
            )
        );

        assert_eq!(aclrtDestroyStream(stream), ACL_SUCCESS);
        let mut found: aclrtAllocatorDesc = std::ptr::null_mut();
        let null = std::ptr::null_mut();
        assert_eq!(
            aclrtAllocatorGetByStream(
                stream,
                &mut found,
                null,
                null.cast(),
                null.cast(),
                null.cast(),
                null.cast()
            ),
            ACL_ERROR_INVALID_PARAM,
            "destroying the stream dropped its registration"
        );
        assert!(found.is_null());
        let _ = recent_message();
        assert_eq!(aclrtFree(base), ACL_SUCCESS);
        assert_eq!(aclrtFree(base), ACL_ERROR_INVALID_PARAM);
        assert!(recent_message()
            .unwrap()
            .contains("or it was already freed"));
        assert_eq!(aclrtAllocatorDestroyDesc(desc), ACL_SUCCESS);
        assert_eq!(aclrtResetDevice(0), ACL_SUCCESS);
        assert_eq!(aclFinalize(), ACL_SUCCESS);
        assert_eq!(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE);
        assert_eq!(
            recent_message().as_deref(),
            Some("aclFinalize failed. ACL is not initialized (aclInit was not called, or aclFinalize was already called).")
        );
    }
}

/// The allocator API keeps accepting any non-NULL pointer as a stream, as the
/// conformance suite requires; only running work needs a real stream.
#[test]
fn streams_not_made_by_the_runtime_stay_acceptable_to_the_allocator_api() {
    static OBJ: u8 = 0;
    let mut storage = 0u64;
    let foreign = &mut storage as *mut u64 as aclrtStream;
    let desc = aclrtAllocatorCreateDesc();
    assert_eq!(
        aclrtAllocatorSetObjToDesc(desc, &OBJ as *const u8 as *mut c_void),
        0
    );
    assert_eq!(aclrtAllocatorSetAllocFuncToDesc(desc, Some(bump_alloc)), 0);
    assert_eq!(aclrtAllocatorSetFreeFuncToDesc(desc, Some(bump_free)), 0);
    assert_eq!(
        aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, Some(identity)),
        0
    );
    assert_eq!(aclrtAllocatorRegister(foreign, desc), ACL_SUCCESS);
    unsafe {
        assert_eq!(
            aclallocLaunchKernel(foreign, 16, Some(fill), std::ptr::null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(aclrtSynchronizeStream(foreign), ACL_ERROR_INVALID_PARAM);
    }
    let messages = recent_message().unwrap();
    assert!(messages.starts_with("aclrtSynchronizeStream failed. Parameter stream is invalid."));
    assert!(messages.contains("\naclallocLaunchKernel failed. Parameter stream is invalid."));
    assert_eq!(aclrtAllocatorUnregister(foreign), ACL_SUCCESS);
    assert_eq!(aclrtAllocatorDestroyDesc(desc), ACL_SUCCESS);
}
