//! The allocator API through its C ABI, called from Rust as C would call it.
//! Tests in this file share the process-wide registry, so each uses streams of
//! its own.

mod common;

use aclalloc::ffi::allocator::*;
use aclalloc::ffi::types::*;
use common::recent_message;
use std::ffi::c_void;
use std::ptr::null_mut;

const ACL_SUCCESS: aclError = 0;
const ACL_ERROR_INVALID_PARAM: aclError = 100000;

/// A distinct, never-dereferenced stream handle per test and index.
fn stream(test: usize, index: usize) -> aclrtStream {
    ((test << 20) | (index << 4) | 0x1000_0000) as aclrtStream
}

#[inline(never)]
unsafe extern "C" fn alloc(obj: *mut c_void, size: usize) -> *mut c_void {
    (*(obj as *mut Vec<usize>)).push(size);
    Box::into_raw(vec![0u8; size.max(1)].into_boxed_slice()) as *mut u8 as *mut c_void
}
#[inline(never)]
unsafe extern "C" fn free(obj: *mut c_void, _block: *mut c_void) {
    (*(obj as *mut Vec<usize>)).pop();
}
#[inline(never)]
unsafe extern "C" fn get_addr(block: *mut c_void) -> *mut c_void {
    block
}
#[inline(never)]
unsafe extern "C" fn advise(obj: *mut c_void, size: usize, _addr: *mut c_void) -> *mut c_void {
    alloc(obj, size)
}

fn complete_desc(obj: *mut Vec<usize>) -> aclrtAllocatorDesc {
    let d = aclrtAllocatorCreateDesc();
    assert!(!d.is_null());
    assert_eq!(
        aclrtAllocatorSetObjToDesc(d, obj as *mut c_void),
        ACL_SUCCESS
    );
    assert_eq!(
        aclrtAllocatorSetAllocFuncToDesc(d, Some(alloc)),
        ACL_SUCCESS
    );
    assert_eq!(aclrtAllocatorSetFreeFuncToDesc(d, Some(free)), ACL_SUCCESS);
    assert_eq!(
        aclrtAllocatorSetGetAddrFromBlockFuncToDesc(d, Some(get_addr)),
        ACL_SUCCESS
    );
    d
}

#[test]
fn the_callbacks_handed_back_serve_a_workspace() {
    let mut live: Vec<usize> = Vec::new();
    let d = complete_desc(&mut live);
    assert_eq!(
        aclrtAllocatorSetAllocAdviseFuncToDesc(d, Some(advise)),
        ACL_SUCCESS
    );
    let s = stream(1, 0);
    assert_eq!(aclrtAllocatorRegister(s, d), ACL_SUCCESS);

    let (
        rc,
        Outputs {
            desc,
            obj,
            a,
            f,
            adv,
            g,
        },
    ) = all_outputs(s);
    assert_eq!(rc, ACL_SUCCESS);
    assert_eq!(desc, d);
    assert_eq!(obj, &mut live as *mut Vec<usize> as *mut c_void);
    assert!(adv.is_some());
    unsafe {
        let block = a.unwrap()(obj, 4096);
        let addr = g.unwrap()(block) as *mut u8;
        addr.write_bytes(0x5A, 4096);
        assert_eq!(*addr.add(4095), 0x5A);
        assert_eq!(live, [4096]);
        f.unwrap()(obj, block);
        drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
            block as *mut u8,
            4096,
        )));
    }
    assert!(live.is_empty());
    assert_eq!(aclrtAllocatorUnregister(s), ACL_SUCCESS);
    assert_eq!(aclrtAllocatorDestroyDesc(d), ACL_SUCCESS);
}

#[test]
fn failures_write_nothing_and_leave_a_message() {
    let _ = recent_message();
    let s = stream(2, 0);
    let sentinel = 0xDEAD_BEEF_usize as *mut c_void;
    let mut desc = sentinel;
    let mut obj = sentinel;
    let rc = unsafe {
        aclrtAllocatorGetByStream(
            s,
            &mut desc,
            &mut obj,
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut(),
        )
    };
    assert_eq!(rc, ACL_ERROR_INVALID_PARAM);
    assert_eq!(
        (desc, obj),
        (sentinel, sentinel),
        "nothing written on failure"
    );
    assert_eq!(
        recent_message().as_deref(),
        Some("aclrtAllocatorGetByStream failed. Parameter stream is invalid. Reason: The stream is not registered with any allocator.")
    );
    assert_eq!(recent_message(), None, "reading clears");
}

#[test]
fn forged_and_destroyed_descriptors_are_refused_without_being_touched() {
    let mut not_a_desc = [0x11u8; 64];
    let forged = not_a_desc.as_mut_ptr() as aclrtAllocatorDesc;
    assert_eq!(aclrtAllocatorDestroyDesc(forged), ACL_ERROR_INVALID_PARAM);
    assert_eq!(
        aclrtAllocatorSetAllocFuncToDesc(forged, Some(alloc)),
        ACL_ERROR_INVALID_PARAM
    );
    assert_eq!(
        aclrtAllocatorRegister(stream(3, 0), forged),
        ACL_ERROR_INVALID_PARAM
    );
    assert_eq!(not_a_desc, [0x11u8; 64]);
    let text = recent_message().unwrap();
    assert_eq!(
        text.lines().count(),
        3,
        "three failures, newest first: {text}"
    );
    assert!(text
        .lines()
        .next()
        .unwrap()
        .starts_with("aclrtAllocatorRegister failed. Parameter allocatorDesc is invalid."));

    let mut live = Vec::new();
    let d = complete_desc(&mut live);
    assert_eq!(aclrtAllocatorDestroyDesc(d), ACL_SUCCESS);
    assert_eq!(aclrtAllocatorDestroyDesc(d), ACL_ERROR_INVALID_PARAM);
    assert_eq!(
        aclrtAllocatorRegister(stream(3, 1), d),
        ACL_ERROR_INVALID_PARAM
    );
    let _ = recent_message();
}

#[test]
fn an_unset_alloc_advise_reads_back_as_null() {
    let mut live = Vec::new();
    let d = complete_desc(&mut live);
    let s = stream(4, 0);
    assert_eq!(aclrtAllocatorRegister(s, d), ACL_SUCCESS);
    let mut desc = null_mut();
    let mut adv: aclrtAllocatorAllocAdviseFunc = Some(advise);
    let rc = unsafe {
        aclrtAllocatorGetByStream(
            s,
            &mut desc,
            null_mut(),
            null_mut(),
            null_mut(),
            &mut adv,
            null_mut(),
        )
    };
    assert_eq!(rc, ACL_SUCCESS);
    assert!(adv.is_none());
    aclrtAllocatorUnregister(s);
    aclrtAllocatorDestroyDesc(d);
}

#[test]
fn the_rust_api_and_the_c_abi_share_one_registry() {
    let mut live = Vec::new();
    let d = complete_desc(&mut live);
    let s = stream(5, 0);
    assert_eq!(aclrtAllocatorRegister(s, d), ACL_SUCCESS);
    let key = aclalloc::StreamKey::from_ptr(s).unwrap();
    let found = aclalloc::global().get_by_stream(key).unwrap();
    assert_eq!(found.descriptor.as_ptr(), d);
    aclalloc::global().unregister(key).unwrap();
    let (rc, _) = desc_only(s);
    assert_eq!(rc, ACL_ERROR_INVALID_PARAM);
    let _ = recent_message();
    aclrtAllocatorDestroyDesc(d);
}

/// Thousands of streams: about one key in eleven is not in its home slot
/// and is answered by the export's probing path rather than its first test;
/// every one must read back its own registration, all six outputs, and an
/// unregistered neighbour must still miss.
#[test]
fn every_stream_of_thousands_reads_back_its_own_registration() {
    const STREAMS: usize = 3000;
    let (mut live_a, mut live_b): (Vec<usize>, Vec<usize>) = (Vec::new(), Vec::new());
    let da = complete_desc(&mut live_a);
    let db = complete_desc(&mut live_b);
    assert_eq!(
        aclrtAllocatorSetAllocAdviseFuncToDesc(db, Some(advise)),
        ACL_SUCCESS
    );
    let pick = |i: usize| if i % 2 == 0 { da } else { db };
    for i in 0..STREAMS {
        assert_eq!(aclrtAllocatorRegister(stream(6, i), pick(i)), ACL_SUCCESS);
    }
    for i in 0..STREAMS {
        let (
            rc,
            Outputs {
                desc,
                obj,
                a,
                f,
                adv,
                g,
            },
        ) = all_outputs(stream(6, i));
        assert_eq!(rc, ACL_SUCCESS, "stream {i}");
        assert_eq!(desc, pick(i), "stream {i}");
        let want_obj = if i % 2 == 0 {
            &mut live_a as *mut Vec<usize>
        } else {
            &mut live_b as *mut Vec<usize>
        };
        assert_eq!(obj, want_obj as *mut c_void, "stream {i}");
        assert_eq!(
            a.map(|p| p as usize),
            Some(alloc as *const () as usize),
            "stream {i}"
        );
        assert_eq!(
            f.map(|p| p as usize),
            Some(free as *const () as usize),
            "stream {i}"
        );
        assert_eq!(adv.is_some(), i % 2 == 1, "stream {i}");
        assert_eq!(
            g.map(|p| p as usize),
            Some(get_addr as *const () as usize),
            "stream {i}"
        );
    }
    let (rc, desc) = desc_only(stream(6, STREAMS));
    assert_eq!(rc, ACL_ERROR_INVALID_PARAM);
    assert!(desc.is_null(), "nothing written on a miss");
    for i in 0..STREAMS {
        assert_eq!(aclrtAllocatorUnregister(stream(6, i)), ACL_SUCCESS);
    }
    assert_eq!(aclrtAllocatorDestroyDesc(da), ACL_SUCCESS);
    assert_eq!(aclrtAllocatorDestroyDesc(db), ACL_SUCCESS);
}

/// Every output of `aclrtAllocatorGetByStream`, each NULL/None before the
/// call.
struct Outputs {
    desc: aclrtAllocatorDesc,
    obj: aclrtAllocator,
    a: aclrtAllocatorAllocFunc,
    f: aclrtAllocatorFreeFunc,
    adv: aclrtAllocatorAllocAdviseFunc,
    g: aclrtAllocatorGetAddrFromBlockFunc,
}

/// `aclrtAllocatorGetByStream(s)` asking for all six outputs.
fn all_outputs(s: aclrtStream) -> (aclError, Outputs) {
    let mut o = Outputs {
        desc: null_mut(),
        obj: null_mut(),
        a: None,
        f: None,
        adv: None,
        g: None,
    };
    // SAFETY: every out-parameter is a field of a local.
    let rc = unsafe {
        aclrtAllocatorGetByStream(
            s,
            &mut o.desc,
            &mut o.obj,
            &mut o.a,
            &mut o.f,
            &mut o.adv,
            &mut o.g,
        )
    };
    (rc, o)
}

/// `aclrtAllocatorGetByStream(s)` asking for the required output only.
fn desc_only(s: aclrtStream) -> (aclError, aclrtAllocatorDesc) {
    let mut desc = null_mut();
    // SAFETY: the one out-parameter is a local.
    let rc = unsafe {
        aclrtAllocatorGetByStream(
            s,
            &mut desc,
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut(),
        )
    };
    (rc, desc)
}
