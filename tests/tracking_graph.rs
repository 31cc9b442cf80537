//! The tracking layer and captured models: a workspace a model holds for its
//! replays is no leak when its stream goes (the model gives it back when
//! destroyed), and a free of it while the model still holds it is reported
//! as `free-of-block-a-graph-holds`, with the model and the stack that
//! allocated it.

mod common;

use aclalloc::base::error::*;
use aclalloc::ffi::cann::allocator::*;
use aclalloc::ffi::cann::model_ri::*;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::cann::types::*;
use aclalloc::ffi::ext::launch::aclallocLaunchKernel;
use aclalloc::tracking::{self, events::Fault};
use std::ffi::c_void;
use std::ptr::{null, null_mut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Blocks the allocator handed out; it never gives them to libc before the
/// end of the test, so a free of a held block cannot turn into a real
/// double free when the model frees it again.
static BLOCKS: Mutex<Vec<usize>> = Mutex::new(Vec::new());
static FREES: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn alloc(_: aclrtAllocator, size: usize) -> *mut c_void {
    // SAFETY: plain heap memory, given back at the end of the test.
    let p = unsafe { libc::malloc(size) };
    BLOCKS.lock().unwrap().push(p as usize);
    p
}
unsafe extern "C" fn free(_: aclrtAllocator, _: aclrtAllocatorBlock) {
    FREES.fetch_add(1, Ordering::SeqCst);
}
unsafe extern "C" fn block_addr(block: aclrtAllocatorBlock) -> *mut c_void {
    block
}
unsafe extern "C" fn kernel(_: *mut c_void, _: usize, _: *mut c_void) {}

fn graph_faults() -> Vec<(Fault, aclalloc::history::stacks::StackId)> {
    let (events, _) = tracking::faults();
    events
        .into_iter()
        .filter(|e| matches!(e.fault, Fault::FreedWhileGraphHolds { .. }))
        .map(|e| (e.fault, e.stack))
        .collect()
}

fn leaks() -> usize {
    let (events, _) = tracking::faults();
    events
        .iter()
        .filter(|e| matches!(e.fault, Fault::Leak { .. }))
        .count()
}

/// A stream with the allocator registered, capturing one launch with a
/// workspace; the model.
fn captured(s: &mut aclrtStream) -> aclmdlRI {
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { aclrtCreateStream(s) }, ACL_SUCCESS);
    let desc = common::descriptor(
        0x2000 as *mut c_void,
        Some(alloc),
        Some(free),
        Some(block_addr),
    );
    assert_eq!(aclrtAllocatorRegister(*s, desc), ACL_SUCCESS);
    let mut model = null_mut();
    // SAFETY: valid handles and out-pointer; the kernel does nothing.
    unsafe {
        assert_eq!(
            aclmdlRICaptureBegin(*s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED),
            ACL_SUCCESS
        );
        assert_eq!(
            aclallocLaunchKernel(*s, 4096, Some(kernel), null_mut()),
            ACL_SUCCESS
        );
        assert_eq!(aclmdlRICaptureEnd(*s, &mut model), ACL_SUCCESS);
    }
    model
}

#[test]
fn a_workspace_freed_while_a_model_holds_it_is_reported_with_its_stack() {
    // SAFETY: a NULL configuration path is allowed.
    let rc = unsafe { aclInit(null()) };
    assert!(rc == ACL_SUCCESS || rc == ACL_ERROR_REPEAT_INITIALIZE);
    assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
    tracking::set_stack_depth(16);
    tracking::set_enabled(true);

    // Held, and the stream destroyed first: no leak, no fault.
    let mut s = null_mut();
    let model = captured(&mut s);
    let leaks_before = leaks();
    // SAFETY: a stream of this test.
    assert_eq!(unsafe { aclrtDestroyStream(s) }, ACL_SUCCESS);
    assert_eq!(leaks(), leaks_before, "the model still holds the workspace");
    let frees = FREES.load(Ordering::SeqCst);
    // SAFETY: a model of this test.
    assert_eq!(unsafe { aclmdlRIDestroy(model) }, ACL_SUCCESS);
    assert_eq!(FREES.load(Ordering::SeqCst), frees + 1);
    assert!(graph_faults().is_empty());

    // The program frees the workspace through the stream's allocator while
    // the model holds it.
    let model = captured(&mut s);
    let block = *BLOCKS
        .lock()
        .unwrap()
        .last()
        .expect("the capture took a workspace");
    let (mut desc, mut obj) = (null_mut(), null_mut());
    let mut free_fn: aclrtAllocatorFreeFunc = None;
    // SAFETY: valid out-pointers; the outputs not wanted are NULL.
    let rc = unsafe {
        aclrtAllocatorGetByStream(
            s,
            &mut desc,
            &mut obj,
            null_mut(),
            &mut free_fn,
            null_mut(),
            null_mut(),
        )
    };
    assert_eq!(rc, ACL_SUCCESS);
    // SAFETY: the stream's (tracked) free with its object and a block it handed out.
    unsafe { free_fn.expect("a free function")(obj, block as *mut c_void) };
    let faults = graph_faults();
    assert_eq!(faults.len(), 1, "{faults:?}");
    let (fault, stack) = faults[0];
    match fault {
        Fault::FreedWhileGraphHolds {
            block: b,
            size,
            model: m,
            ..
        } => {
            assert_eq!(b, block);
            assert_eq!(size, 4096);
            assert_eq!(m, model as usize);
        }
        other => panic!("{other:?}"),
    }
    assert_ne!(
        stack,
        aclalloc::history::stacks::NO_STACK,
        "where it came from"
    );
    let report = tracking::report_text();
    assert!(report.contains("free-of-block-a-graph-holds"), "{report}");
    assert!(report.contains("aclallocLaunchKernel"), "{report}");

    // SAFETY: handles of this test.
    unsafe {
        assert_eq!(aclmdlRIDestroy(model), ACL_SUCCESS);
        assert_eq!(aclrtDestroyStream(s), ACL_SUCCESS);
    }
    assert_eq!(graph_faults().len(), 1, "reported once");
    tracking::set_enabled(false);
    for b in BLOCKS.lock().unwrap().drain(..) {
        // SAFETY: each from `alloc`'s malloc, freed once here.
        unsafe { libc::free(b as *mut c_void) };
    }
}
