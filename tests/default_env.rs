//! The default allocator chosen by `ACLALLOC_DEFAULT_ALLOCATOR`. One test
//! per binary: the variable is read once, at the default allocator's first use.

mod common;
mod plugin_support;

use aclalloc::base::error::*;
use aclalloc::ffi::cann::errmsg::aclGetRecentErrMsg;
use aclalloc::ffi::ext::default_allocator::*;
use std::ffi::{c_void, CStr};
use std::ptr::null_mut;

#[test]
fn a_plugin_named_in_the_environment_serves_the_default_allocator() {
    // An invalid value first: allocations fail and nothing is frozen.
    std::env::set_var("ACLALLOC_DEFAULT_ALLOCATOR", "plugin:only-a-path.so");
    let mut p = null_mut();
    assert_eq!(
        unsafe { aclallocDefaultMalloc(&mut p, 8, null_mut()) },
        ACL_ERROR_INVALID_PARAM
    );
    let m = unsafe { CStr::from_ptr(aclGetRecentErrMsg()) }
        .to_string_lossy()
        .into_owned();
    assert!(
        m.ends_with("failed. Environment variable ACLALLOC_DEFAULT_ALLOCATOR is invalid. Reason: the value \"plugin:only-a-path.so\" is not accepted; accepted: pool, device or plugin:PATH:ALLOC_SYMBOL:FREE_SYMBOL."),
        "{m}"
    );
    assert!(aclallocGetDefaultAllocatorName().is_null());

    let so = plugin_support::build("default-env");
    std::env::set_var(
        "ACLALLOC_DEFAULT_ALLOCATOR",
        format!("plugin:{}:my_malloc:my_free", so.display()),
    );
    let name = unsafe { CStr::from_ptr(aclallocGetDefaultAllocatorName()) };
    assert_eq!(name.to_str().unwrap(), "plugin");
    assert!(
        !plugin_support::is_loaded(&so),
        "nothing is loaded before the first use"
    );
    let stream = 0x4400 as *mut c_void;
    assert_eq!(
        unsafe { aclallocDefaultMalloc(&mut p, 4096, stream) },
        ACL_SUCCESS
    );
    assert_eq!(plugin_support::counters(&so)[..2], [1, 1]);
    assert_eq!(aclallocDefaultFree(p), ACL_SUCCESS);
    let c = plugin_support::counters(&so);
    assert_eq!((c[0], c[2], c[3]), (0, 1, 0));
    let desc = aclalloc::ffi::cann::allocator::aclrtAllocatorCreateDesc();
    assert_eq!(
        aclallocSetDefaultAllocator(desc),
        ACL_ERROR_INVALID_PARAM,
        "incomplete descriptor"
    );
    let _ = aclGetRecentErrMsg();
}
