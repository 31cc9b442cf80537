//! `ACLALLOC_RECORD_HISTORY=N`: pools created through the C API, and the
//! default pool, record from creation. One test per binary: it sets the
//! process's environment.

mod common;

use aclalloc::base::error::{ACL_ERROR_INVALID_PARAM, ACL_SUCCESS};
use aclalloc::ffi::cann::runtime::{aclInit, aclrtSetDevice};
use aclalloc::ffi::ext::default_allocator::{
    aclallocDefaultFree, aclallocDefaultMalloc, aclallocGetDefaultAllocator,
};
use aclalloc::ffi::ext::pool::*;
use common::message;
use serde_json::Value;
use std::ptr::{null, null_mut};

fn snapshot(pool: aclallocPool) -> Value {
    let mut len = 0;
    assert_eq!(
        unsafe { aclallocPoolSnapshot(pool, null_mut(), 0, &mut len) },
        ACL_SUCCESS
    );
    let mut buf = vec![0u8; len + 1];
    assert_eq!(
        unsafe { aclallocPoolSnapshot(pool, buf.as_mut_ptr().cast(), buf.len(), null_mut()) },
        ACL_SUCCESS
    );
    serde_json::from_slice(&buf[..len]).unwrap()
}

#[test]
fn pools_record_from_creation_when_the_variable_is_set() {
    assert_eq!(unsafe { aclInit(null()) }, ACL_SUCCESS);
    assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
    let (mut pool, mut desc) = (null_mut(), null_mut());

    std::env::set_var("ACLALLOC_RECORD_HISTORY", "lots");
    assert_eq!(
        unsafe { aclallocPoolCreate(null(), &mut pool, &mut desc) },
        ACL_ERROR_INVALID_PARAM
    );
    let m = message();
    assert!(
        m.contains("ACLALLOC_RECORD_HISTORY") && m.contains("number of events"),
        "{m}"
    );
    assert!(pool.is_null(), "nothing written on failure");

    std::env::set_var("ACLALLOC_RECORD_HISTORY", "3");
    assert_eq!(
        unsafe { aclallocPoolCreate(null(), &mut pool, &mut desc) },
        ACL_SUCCESS
    );
    let b = aclallocPoolAlloc(pool, 1000);
    aclallocPoolFree(pool, b);
    let json = snapshot(pool);
    let actions: Vec<&str> = json["device_traces"][0]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["alloc", "free_requested", "free_completed"]);
    assert_eq!(json["history"]["dropped"], 1, "segment_alloc fell out of 3");
    assert_eq!(aclallocPoolDestroy(pool), ACL_SUCCESS);

    // The default pool, built at its first use.
    std::env::set_var("ACLALLOC_RECORD_HISTORY", "100");
    let mut p = null_mut();
    assert_eq!(
        unsafe { aclallocDefaultMalloc(&mut p, 5000, null_mut()) },
        ACL_SUCCESS
    );
    let mut default_pool = null_mut();
    assert_eq!(
        unsafe { aclallocGetDefaultAllocator(&mut default_pool) },
        ACL_SUCCESS
    );
    assert_eq!(aclallocDefaultFree(p), ACL_SUCCESS);
    let json = snapshot(default_pool);
    let trace = json["device_traces"][0].as_array().unwrap();
    assert_eq!(json["history"]["max_entries"], 100);
    assert!(
        trace
            .iter()
            .any(|e| e["action"] == "alloc" && e["addr"] == format!("{:#x}", p as usize)),
        "{json}"
    );
}
