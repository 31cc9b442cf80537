//! Labels in built models through the C ABI on the host runtime: a switch
//! reads its index from device memory at each replay and carries on after
//! the picked label (the last for an index past the list), on that label's
//! stream, and the switching stream's later tasks do not run; a switch back
//! to an earlier label loops; a label set on no stream of the model fails
//! the replay; a label is set once, on a stream bound to a model being
//! built; bad handles, counts and addresses are refused with a message.

mod common;

use common::streams::new_stream;

use aclalloc::base::error::*;
use aclalloc::ffi::cann::labels::*;
use aclalloc::ffi::cann::memory::*;
use aclalloc::ffi::cann::model_ri::*;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::cann::types::*;
use aclalloc::ffi::ext::launch::aclallocLaunchKernel;
use std::ffi::c_void;
use std::ptr::null_mut;

fn malloc(size: usize) -> *mut u8 {
    let mut p = null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(
        unsafe { aclrtMalloc(&mut p, size, ACL_MEM_MALLOC_HUGE_FIRST) },
        ACL_SUCCESS
    );
    p.cast()
}

fn write_u32(dst: *mut u8, value: u32) {
    // SAFETY: 4 bytes of device memory of the test's.
    let rc = unsafe {
        aclrtMemcpy(
            dst.cast(),
            4,
            (&value as *const u32).cast(),
            4,
            ACL_MEMCPY_HOST_TO_DEVICE,
        )
    };
    assert_eq!(rc, ACL_SUCCESS);
}

fn read<const N: usize>(src: *const u8) -> [u8; N] {
    let mut out = [0u8; N];
    // SAFETY: N bytes of device memory of the test's.
    let rc = unsafe {
        aclrtMemcpy(
            out.as_mut_ptr().cast(),
            N,
            src.cast(),
            N,
            ACL_MEMCPY_DEVICE_TO_HOST,
        )
    };
    assert_eq!(rc, ACL_SUCCESS);
    out
}

fn label() -> aclrtLabel {
    let mut l = null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { aclrtCreateLabel(&mut l) }, ACL_SUCCESS);
    l
}

fn list(labels: &mut [aclrtLabel]) -> aclrtLabelList {
    let mut l = null_mut();
    // SAFETY: the test's labels and a valid out-pointer.
    let rc = unsafe { aclrtCreateLabelList(labels.as_mut_ptr(), labels.len(), &mut l) };
    assert_eq!(rc, ACL_SUCCESS);
    l
}

fn set(dst: *mut u8, value: i32, stream: aclrtStream) {
    // SAFETY: a byte of device memory of the test's.
    assert_eq!(
        unsafe { aclrtMemsetAsync(dst.cast(), 1, value, 1, stream) },
        ACL_SUCCESS
    );
}

fn build() -> aclmdlRI {
    let mut m = null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { aclmdlRIBuildBegin(&mut m, 0) }, ACL_SUCCESS);
    m
}

fn bind(m: aclmdlRI, s: aclrtStream, flag: u32) {
    // SAFETY: a model being built and a stream of the test's.
    assert_eq!(unsafe { aclmdlRIBindStream(m, s, flag) }, ACL_SUCCESS);
}

fn finish(m: aclmdlRI, streams: &[aclrtStream]) {
    for &s in streams {
        // SAFETY: the model and its bound streams.
        assert_eq!(unsafe { aclmdlRIEndTask(m, s) }, ACL_SUCCESS);
    }
    // SAFETY: the model, being built.
    assert_eq!(unsafe { aclmdlRIBuildEnd(m, null_mut()) }, ACL_SUCCESS);
}

fn replay(m: aclmdlRI, on: aclrtStream) -> aclError {
    // SAFETY: a built model and a stream of the test's.
    assert_eq!(unsafe { aclmdlRIExecuteAsync(m, on) }, ACL_SUCCESS);
    // SAFETY: as above.
    unsafe { aclrtSynchronizeStream(on) }
}

#[test]
fn a_switch_picks_its_label_at_each_replay_and_the_switching_stream_stops() {
    common::device0();
    let (head, first, second, exec) = (new_stream(), new_stream(), new_stream(), new_stream());
    let index = malloc(4);
    let out = malloc(4);
    let mut labels = [label(), label()];
    let labels_list = list(&mut labels);
    let m = build();
    bind(m, head, ACL_MODEL_STREAM_FLAG_HEAD);
    bind(m, first, ACL_MODEL_STREAM_FLAG_DEFAULT);
    bind(m, second, ACL_MODEL_STREAM_FLAG_DEFAULT);
    set(out, 0x11, head);
    // SAFETY: device memory, a live list and a bound stream.
    let rc = unsafe { aclrtSwitchLabelByIndex(index.cast(), 2, labels_list, head) };
    assert_eq!(rc, ACL_SUCCESS);
    // Never runs: the switch carries on elsewhere.
    // SAFETY: as above.
    set(unsafe { out.add(1) }, 0xEE, head);
    // SAFETY: live labels and bound streams.
    unsafe {
        assert_eq!(aclrtSetLabel(labels[0], first), ACL_SUCCESS);
        set(out.add(2), 0xA0, first);
        assert_eq!(aclrtSetLabel(labels[1], second), ACL_SUCCESS);
        set(out.add(3), 0xB1, second);
    }
    finish(m, &[head, first, second]);
    // The handles go; the model keeps what it uses.
    // SAFETY: live handles of the test's.
    unsafe {
        assert_eq!(aclrtDestroyLabelList(labels_list), ACL_SUCCESS);
        assert_eq!(aclrtDestroyLabel(labels[0]), ACL_SUCCESS);
        assert_eq!(aclrtDestroyLabel(labels[1]), ACL_SUCCESS);
    }
    for (picked, expect) in [
        (0, [0x11, 0, 0xA0, 0]),
        (1, [0x11, 0, 0, 0xB1]),
        // Past the last label: the last.
        (7, [0x11, 0, 0, 0xB1]),
        (0, [0x11, 0, 0xA0, 0]),
    ] {
        write_u32(out, 0);
        write_u32(index, picked);
        assert_eq!(replay(m, exec), ACL_SUCCESS);
        assert_eq!(read::<4>(out), expect, "index {picked}");
    }
    // SAFETY: the test's model.
    assert_eq!(unsafe { aclmdlRIDestroy(m) }, ACL_SUCCESS);
}

/// The loop's body: counts its runs in the first word and picks label 0
/// (run again) until the count reaches 5, then label 1 (leave).
unsafe extern "C" fn count_and_pick(_: *mut c_void, _: usize, words: *mut c_void) {
    let words = words.cast::<u32>();
    // SAFETY: two words of device memory of the test's, on the stream's worker.
    unsafe {
        *words += 1;
        *words.add(1) = u32::from(*words >= 5);
    }
}

#[test]
fn a_switch_back_to_an_earlier_label_loops() {
    common::device0();
    let (head, exec) = (new_stream(), new_stream());
    let words = malloc(8);
    let mut labels = [label(), label()];
    let labels_list = list(&mut labels);
    let m = build();
    bind(m, head, ACL_MODEL_STREAM_FLAG_HEAD);
    // SAFETY: live labels, device memory and a bound stream.
    unsafe {
        assert_eq!(aclrtSetLabel(labels[0], head), ACL_SUCCESS);
        let rc = aclallocLaunchKernel(head, 0, Some(count_and_pick), words.cast());
        assert_eq!(rc, ACL_SUCCESS);
        let rc = aclrtSwitchLabelByIndex(words.add(4).cast(), 2, labels_list, head);
        assert_eq!(rc, ACL_SUCCESS);
        assert_eq!(aclrtSetLabel(labels[1], head), ACL_SUCCESS);
    }
    finish(m, &[head]);
    write_u32(words, 0);
    assert_eq!(replay(m, exec), ACL_SUCCESS);
    assert_eq!(u32::from_le_bytes(read::<4>(words)), 5);
    // SAFETY: the test's handles.
    unsafe {
        assert_eq!(aclmdlRIDestroy(m), ACL_SUCCESS);
        assert_eq!(aclrtDestroyLabelList(labels_list), ACL_SUCCESS);
        assert_eq!(aclrtDestroyLabel(labels[0]), ACL_SUCCESS);
        assert_eq!(aclrtDestroyLabel(labels[1]), ACL_SUCCESS);
    }
}

#[test]
fn a_switch_to_a_label_set_in_no_stream_of_the_model_fails_the_replay() {
    common::device0();
    let (head, exec) = (new_stream(), new_stream());
    let index = malloc(4);
    let mut labels = [label()];
    let labels_list = list(&mut labels);
    let m = build();
    bind(m, head, ACL_MODEL_STREAM_FLAG_HEAD);
    // SAFETY: device memory, a live list and a bound stream.
    let rc = unsafe { aclrtSwitchLabelByIndex(index.cast(), 1, labels_list, head) };
    assert_eq!(rc, ACL_SUCCESS);
    finish(m, &[head]);
    write_u32(index, 0);
    assert_eq!(replay(m, exec), ACL_ERROR_RT_INTERNAL_ERROR);
    // SAFETY: the test's handles.
    unsafe {
        assert_eq!(aclmdlRIDestroy(m), ACL_SUCCESS);
        assert_eq!(aclrtDestroyLabelList(labels_list), ACL_SUCCESS);
        assert_eq!(aclrtDestroyLabel(labels[0]), ACL_SUCCESS);
    }
}

#[test]
fn bad_labels_lists_streams_and_addresses_are_refused() {
    common::device0();
    let (bound, free_stream) = (new_stream(), new_stream());
    let index = malloc(4);
    let mut on_host = 0u32;
    let l = label();
    let m = build();
    bind(m, bound, ACL_MODEL_STREAM_FLAG_HEAD);
    // SAFETY: every call is given live handles, NULL, or stale handles,
    // which the library looks up and never dereferences.
    unsafe {
        // Not on a stream bound to a model being built.
        assert_eq!(aclrtSetLabel(l, free_stream), ACL_ERROR_RT_STREAM_MODEL);
        assert!(common::message().contains("not bound to a model"));
        assert_eq!(aclrtSetLabel(l, bound), ACL_SUCCESS);
        // Set once.
        assert_eq!(aclrtSetLabel(l, bound), ACL_ERROR_RT_INTERNAL_ERROR);
        assert!(common::message().contains("cannot be set repeatedly"));

        let mut none = null_mut();
        let mut labels = [l];
        assert_eq!(
            aclrtCreateLabelList(labels.as_mut_ptr(), 0, &mut none),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtCreateLabelList(labels.as_mut_ptr(), 70_000, &mut none),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtCreateLabelList(null_mut(), 1, &mut none),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtCreateLabelList(labels.as_mut_ptr(), 1, null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(none.is_null(), "out-parameters are written only on success");
        let labels_list = list(&mut labels);

        // maxValue from 1 to the list's length; the index in device memory.
        assert_eq!(
            aclrtSwitchLabelByIndex(index.cast(), 0, labels_list, bound),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtSwitchLabelByIndex(index.cast(), 2, labels_list, bound),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(common::message().contains("maxValue"));
        let host = (&mut on_host as *mut u32).cast();
        assert_eq!(
            aclrtSwitchLabelByIndex(host, 1, labels_list, bound),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtSwitchLabelByIndex(index.cast(), 1, labels_list, free_stream),
            ACL_ERROR_RT_STREAM_MODEL
        );
        assert_eq!(
            aclrtSwitchLabelByIndex(index.cast(), 1, labels_list, bound),
            ACL_SUCCESS
        );

        finish(m, &[bound]);
        assert_eq!(aclmdlRIDestroy(m), ACL_SUCCESS);
        assert_eq!(aclrtDestroyLabelList(labels_list), ACL_SUCCESS);
        assert_eq!(aclrtDestroyLabelList(labels_list), ACL_ERROR_INVALID_PARAM);
        assert!(common::message().contains("not a live label list"));
        assert_eq!(aclrtDestroyLabel(l), ACL_SUCCESS);
        // A destroyed label is refused everywhere.
        assert_eq!(aclrtDestroyLabel(l), ACL_ERROR_INVALID_PARAM);
        assert!(common::message().contains("not a live label"));
        assert_eq!(aclrtSetLabel(l, bound), ACL_ERROR_INVALID_PARAM);
        assert_eq!(
            aclrtCreateLabelList(labels.as_mut_ptr(), 1, &mut none),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(aclrtDestroyLabel(null_mut()), ACL_ERROR_INVALID_PARAM);
        assert_eq!(aclrtCreateLabel(null_mut()), ACL_ERROR_INVALID_PARAM);
        let forged = 0x1234 as aclrtLabel;
        assert_eq!(aclrtDestroyLabel(forged), ACL_ERROR_INVALID_PARAM);
    }
}
