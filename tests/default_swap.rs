//! The default allocator swapped from C (`aclallocSetDefaultAllocator`, like
//! PyTorch's `change_current_allocator`) to a pluggable allocator, used
//! through the raw functions, then refused a second swap. One test: the
//! default allocator is process-wide and this binary is its own process.

mod common;
mod plugin_support;

use aclalloc::base::error::*;
use aclalloc::ffi::ext::default_allocator::*;
use aclalloc::ffi::ext::plugin::*;
use common::message;
use std::ffi::{c_void, CStr, CString};
use std::ptr::null_mut;

fn name() -> String {
    let p = aclallocGetDefaultAllocatorName();
    assert!(!p.is_null());
    unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_owned()
}

#[test]
fn swap_before_use_then_use_then_swap_fails() {
    std::env::remove_var("ACLALLOC_DEFAULT_ALLOCATOR");
    assert_eq!(name(), "pool", "the documented default");

    let so = plugin_support::build("default-swap");
    let path = CString::new(so.to_str().unwrap()).unwrap();
    let config = aclallocPluggableConfig {
        path: path.as_ptr(),
        allocSymbol: c"my_malloc".as_ptr(),
        freeSymbol: c"my_free".as_ptr(),
        initSymbol: std::ptr::null(),
        emptyCacheSymbol: std::ptr::null(),
        memoryFractionSymbol: std::ptr::null(),
    };
    let (mut plugin, mut desc) = (null_mut(), null_mut());
    assert_eq!(
        unsafe { aclallocPluggableCreate(&config, &mut plugin, &mut desc) },
        ACL_SUCCESS
    );

    // A bad descriptor is refused and changes nothing.
    assert_eq!(
        aclallocSetDefaultAllocator(null_mut()),
        ACL_ERROR_INVALID_PARAM
    );
    let _ = message();
    assert_eq!(aclallocSetDefaultAllocator(desc), ACL_SUCCESS);
    assert_eq!(name(), "plugin");
    assert_eq!(
        aclallocPluggableDestroy(plugin),
        ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED
    );
    assert!(message().ends_with("It is the default allocator: 1."));

    // Raw alloc/free (caching_allocator_alloc / _delete) reach the plugin,
    // with the stream; free gives the plugin back what alloc gave it.
    let stream = 0x9900 as *mut c_void;
    let mut ptrs = Vec::new();
    for size in [0usize, 100, 1 << 20] {
        let mut p = null_mut();
        assert_eq!(
            unsafe { aclallocDefaultMalloc(&mut p, size, stream) },
            ACL_SUCCESS
        );
        ptrs.push(p);
    }
    assert_eq!(plugin_support::counters(&so)[0], 3);
    let mut s = aclallocAllocatorStats::default();
    assert_eq!(
        unsafe { aclallocPluggableGetStats(plugin, &mut s) },
        ACL_SUCCESS
    );
    assert_eq!(s.allocatedBytesCurrent, 100 + (1 << 20));

    // Now in use: swapping fails, and says why.
    let other = aclalloc::ffi::cann::allocator::aclrtAllocatorCreateDesc();
    assert_eq!(
        aclallocSetDefaultAllocator(desc),
        ACL_ERROR_REPEAT_INITIALIZE
    );
    assert_eq!(
        message(),
        "aclallocSetDefaultAllocator failed. can't swap an already initialized allocator."
    );
    assert_eq!(name(), "plugin");

    let mut on_stack = 0u8;
    assert_eq!(
        aclallocDefaultFree(&mut on_stack as *mut u8 as *mut c_void),
        ACL_ERROR_INVALID_PARAM
    );
    assert_eq!(
        message(),
        "aclallocDefaultFree failed. Trying to free a pointer not allocated here."
    );
    for &p in &ptrs {
        assert_eq!(aclallocDefaultFree(p), ACL_SUCCESS);
    }
    assert_eq!(aclallocDefaultFree(ptrs[1]), ACL_ERROR_INVALID_PARAM);
    assert!(message().contains("double free"));
    let c = plugin_support::counters(&so);
    assert_eq!(
        (c[0], c[1], c[2], c[3]),
        (0, 3, 3, 0),
        "balanced, right sizes and streams"
    );
    let mut d = aclallocAllocatorStats::default();
    assert_eq!(unsafe { aclallocDefaultGetStats(&mut d) }, ACL_SUCCESS);
    assert_eq!((d.allocCount, d.freeCount, d.refusedFreeCount), (3, 3, 2));
    assert_eq!(
        aclalloc::ffi::cann::allocator::aclrtAllocatorDestroyDesc(other),
        ACL_SUCCESS
    );
}
