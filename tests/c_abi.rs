//! The allocator API through its C ABI, called from Rust as C would call it.
//! Tests in this file share the process-wide registry, so each uses streams of
//! its own.

mod common;

use aclalloc::ffi::cann::allocator::*;
use aclalloc::ffi::cann::types::*;
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

/// Each of the 32 choices of NULL and non-NULL optional out-parameters:
/// every one given is written with the registration's value, and the hit
/// path (which sends a NULL one's value to a local of its own instead of
/// branching per output) writes nothing anywhere else: the caller's other
/// slots, each preset to a sentinel, stay as they were.
#[test]
fn every_choice_of_optional_outputs_gets_exactly_what_it_asked_for() {
    let mut live = Vec::new();
    let d = complete_desc(&mut live);
    assert_eq!(
        aclrtAllocatorSetAllocAdviseFuncToDesc(d, Some(advise)),
        ACL_SUCCESS
    );
    let s = stream(7, 0);
    assert_eq!(aclrtAllocatorRegister(s, d), ACL_SUCCESS);
    let want: [usize; 5] = [
        &mut live as *mut Vec<usize> as usize,
        alloc as *const () as usize,
        free as *const () as usize,
        advise as *const () as usize,
        get_addr as *const () as usize,
    ];
    const SENTINEL: usize = 0x5EB7_1AE1;
    for mask in 0..32u32 {
        // One word per output (each is a pointer or an `Option` of a
        // function pointer, one word in C), all preset.
        let mut slots = [SENTINEL; 5];
        let mut desc = SENTINEL as aclrtAllocatorDesc;
        let base = slots.as_mut_ptr();
        let out = |i: usize| {
            if mask & (1 << i) != 0 {
                // SAFETY: `i < 5`, inside `slots`.
                unsafe { base.add(i) }
            } else {
                null_mut()
            }
        };
        // SAFETY: every non-NULL out-parameter is a word of `slots` (each
        // output type is one word) or a local.
        let rc = unsafe {
            aclrtAllocatorGetByStream(
                s,
                &mut desc,
                out(0) as *mut aclrtAllocator,
                out(1) as *mut aclrtAllocatorAllocFunc,
                out(2) as *mut aclrtAllocatorFreeFunc,
                out(3) as *mut aclrtAllocatorAllocAdviseFunc,
                out(4) as *mut aclrtAllocatorGetAddrFromBlockFunc,
            )
        };
        assert_eq!(rc, ACL_SUCCESS, "outputs {mask:05b}");
        assert_eq!(desc, d, "outputs {mask:05b}");
        for i in 0..5 {
            let expected = if mask & (1 << i) != 0 {
                want[i]
            } else {
                SENTINEL
            };
            assert_eq!(slots[i], expected, "output {i} of {mask:05b}");
        }
    }
    assert_eq!(aclrtAllocatorUnregister(s), ACL_SUCCESS);
    assert_eq!(aclrtAllocatorDestroyDesc(d), ACL_SUCCESS);
}

/// Unregistering every third of thousands of streams moves later keys of
/// their probe runs back (backward-shift removal); every stream left must
/// still read back its own registration, the removed ones must miss and
/// write nothing, and re-registering them with another descriptor must win.
#[test]
fn unregistering_some_of_thousands_keeps_the_others_and_the_last_registration_wins() {
    const STREAMS: usize = 3000;
    let (mut live_a, mut live_b): (Vec<usize>, Vec<usize>) = (Vec::new(), Vec::new());
    let da = complete_desc(&mut live_a);
    let db = complete_desc(&mut live_b);
    for i in 0..STREAMS {
        assert_eq!(aclrtAllocatorRegister(stream(8, i), da), ACL_SUCCESS);
    }
    for i in (0..STREAMS).step_by(3) {
        assert_eq!(aclrtAllocatorUnregister(stream(8, i)), ACL_SUCCESS);
    }
    for i in 0..STREAMS {
        let (rc, desc) = desc_only(stream(8, i));
        if i % 3 == 0 {
            assert_eq!(rc, ACL_ERROR_INVALID_PARAM, "stream {i}");
            assert!(desc.is_null(), "stream {i}: nothing written on a miss");
        } else {
            assert_eq!((rc, desc), (ACL_SUCCESS, da), "stream {i}");
        }
    }
    let _ = recent_message();
    for i in (0..STREAMS).step_by(3) {
        assert_eq!(aclrtAllocatorRegister(stream(8, i), db), ACL_SUCCESS);
    }
    for i in 0..STREAMS {
        let (rc, o) = all_outputs(stream(8, i));
        let (want_desc, want_obj) = if i % 3 == 0 {
            (db, &mut live_b as *mut Vec<usize>)
        } else {
            (da, &mut live_a as *mut Vec<usize>)
        };
        assert_eq!(rc, ACL_SUCCESS, "stream {i}");
        assert_eq!(o.desc, want_desc, "stream {i}");
        assert_eq!(o.obj, want_obj as *mut c_void, "stream {i}");
    }
    for i in 0..STREAMS {
        assert_eq!(aclrtAllocatorUnregister(stream(8, i)), ACL_SUCCESS);
    }
    assert_eq!(aclrtAllocatorDestroyDesc(da), ACL_SUCCESS);
    assert_eq!(aclrtAllocatorDestroyDesc(db), ACL_SUCCESS);
}

/// Lookups through the C export while another thread re-registers the
/// looked-up streams (slots rewritten in place), and registers and
/// unregisters others around them (growth, keys moved back): every answer
/// is one whole registration, its descriptor and object from the same one,
/// and a stream that stays registered is never reported missing.
#[test]
fn lookups_racing_registrations_see_whole_registrations() {
    const WATCHED: usize = 64;
    const CHURN: usize = 2000;
    let (mut live_a, mut live_b): (Vec<usize>, Vec<usize>) = (Vec::new(), Vec::new());
    let obj_a = &mut live_a as *mut Vec<usize> as usize;
    let obj_b = &mut live_b as *mut Vec<usize> as usize;
    let da = complete_desc(obj_a as *mut Vec<usize>) as usize;
    let db = complete_desc(obj_b as *mut Vec<usize>) as usize;
    for i in 0..WATCHED {
        assert_eq!(
            aclrtAllocatorRegister(stream(9, i), da as aclrtAllocatorDesc),
            ACL_SUCCESS
        );
    }
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for round in 0..20 {
                let d = if round % 2 == 0 { db } else { da };
                for i in 0..WATCHED {
                    aclrtAllocatorRegister(stream(9, i), d as aclrtAllocatorDesc);
                }
                for i in 0..CHURN {
                    aclrtAllocatorRegister(stream(10, i), d as aclrtAllocatorDesc);
                }
                for i in 0..CHURN {
                    aclrtAllocatorUnregister(stream(10, i));
                }
            }
            done.store(true, std::sync::atomic::Ordering::Release);
        });
        let mut lookups = 0usize;
        while !done.load(std::sync::atomic::Ordering::Acquire) || lookups < 10_000 {
            let i = lookups % WATCHED;
            let (rc, o) = all_outputs(stream(9, i));
            assert_eq!(rc, ACL_SUCCESS, "stream {i} was reported missing");
            let pair = (o.desc as usize, o.obj as usize);
            assert!(
                pair == (da, obj_a) || pair == (db, obj_b),
                "stream {i}: descriptor and object of different registrations: {pair:x?}"
            );
            lookups += 1;
        }
    });
    for i in 0..WATCHED {
        assert_eq!(aclrtAllocatorUnregister(stream(9, i)), ACL_SUCCESS);
    }
    assert_eq!(
        aclrtAllocatorDestroyDesc(da as aclrtAllocatorDesc),
        ACL_SUCCESS
    );
    assert_eq!(
        aclrtAllocatorDestroyDesc(db as aclrtAllocatorDesc),
        ACL_SUCCESS
    );
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
