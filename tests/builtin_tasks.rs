//! CANN's built-in tasks through the C ABI on the host runtime: the SDMA
//! reduce (`aclrtReduceAsync`) runs in stream order, element by element,
//! for each kind and type CANN's SoCs reduce, refusing the rest with
//! CANN's codes; the random-number task (`aclrtRandomNumAsync`) keeps its
//! distribution's range, repeats for the same seed and counter, advances
//! the counter, writes no more than its numbers, reads parameters given by
//! address when it runs, and is checked as CANN checks it.

mod common;

use common::streams::{new_stream, sync};

use aclalloc::base::error::*;
use aclalloc::ffi::cann::builtin_tasks::*;
use aclalloc::ffi::cann::device_info::*;
use aclalloc::ffi::cann::memory::*;
use aclalloc::ffi::cann::types::*;
use aclalloc::runtime::half::{f32_to_bf16, f32_to_f16};
use std::ffi::c_void;
use std::ptr::null_mut;

fn malloc(size: usize) -> *mut c_void {
    let mut p = null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(
        unsafe { aclrtMalloc(&mut p, size, ACL_MEM_MALLOC_HUGE_FIRST) },
        ACL_SUCCESS
    );
    p
}

fn upload<T: Copy>(dst: *mut c_void, values: &[T]) {
    let n = std::mem::size_of_val(values);
    // SAFETY: `n` bytes of device memory of the test's.
    let rc = unsafe { aclrtMemcpy(dst, n, values.as_ptr().cast(), n, ACL_MEMCPY_HOST_TO_DEVICE) };
    assert_eq!(rc, ACL_SUCCESS);
}

fn download<T: Copy + Default>(src: *const c_void, n: usize) -> Vec<T> {
    let mut out = vec![T::default(); n];
    let bytes = std::mem::size_of_val(&out[..]);
    // SAFETY: as above.
    let rc = unsafe {
        aclrtMemcpy(
            out.as_mut_ptr().cast(),
            bytes,
            src,
            bytes,
            ACL_MEMCPY_DEVICE_TO_HOST,
        )
    };
    assert_eq!(rc, ACL_SUCCESS);
    out
}

fn reduce(
    dst: *mut c_void,
    src: *const c_void,
    count: u64,
    kind: i32,
    ty: i32,
    s: aclrtStream,
) -> aclError {
    // SAFETY: the library checks both ranges.
    unsafe { aclrtReduceAsync(dst, src, count, kind, ty, s, null_mut()) }
}

#[test]
fn a_reduce_runs_in_stream_order_for_each_kind_and_type() {
    common::device0();
    let s = new_stream();
    let (dst, src) = (malloc(64), malloc(64));
    // The sample's sum, after a copy queued before it on the same stream.
    upload(dst, &[1.0f32, 2.0, 3.0, 4.0]);
    let input = [1.0f32, 2.0, 3.0, 4.0];
    // SAFETY: host memory the test keeps until the stream has run.
    let rc = unsafe {
        aclrtMemcpyAsync(
            src,
            16,
            input.as_ptr().cast(),
            16,
            ACL_MEMCPY_HOST_TO_DEVICE,
            s,
        )
    };
    assert_eq!(rc, ACL_SUCCESS);
    assert_eq!(
        reduce(dst, src, 16, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT, s),
        ACL_SUCCESS
    );
    sync(s);
    assert_eq!(download::<f32>(dst, 4), [2.0, 4.0, 6.0, 8.0]);

    upload(dst, &[5i16, -3, i16::MAX]);
    upload(src, &[7i16, -9, 0]);
    assert_eq!(
        reduce(dst, src, 6, ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX, ACL_INT16, s),
        ACL_SUCCESS
    );
    sync(s);
    assert_eq!(download::<i16>(dst, 3), [7, -3, i16::MAX]);

    upload(dst, &[f32_to_bf16(1.5), f32_to_bf16(-2.0)]);
    upload(src, &[f32_to_bf16(0.5), f32_to_bf16(3.0)]);
    assert_eq!(
        reduce(dst, src, 4, ACL_RT_MEMCPY_SDMA_AUTOMATIC_MIN, ACL_BF16, s),
        ACL_SUCCESS
    );
    sync(s);
    assert_eq!(
        download::<u16>(dst, 2),
        [f32_to_bf16(0.5), f32_to_bf16(-2.0)]
    );

    upload(dst, &[f32_to_f16(0.25)]);
    upload(src, &[f32_to_f16(0.5)]);
    assert_eq!(
        reduce(
            dst,
            src,
            2,
            ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM,
            ACL_FLOAT16,
            s
        ),
        ACL_SUCCESS
    );
    sync(s);
    assert_eq!(download::<u16>(dst, 1), [f32_to_f16(0.75)]);

    // Only the elements named: the next one is untouched.
    upload(dst, &[1i32, 1]);
    upload(src, &[2i32, 2]);
    assert_eq!(
        reduce(dst, src, 4, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_INT32, s),
        ACL_SUCCESS
    );
    sync(s);
    assert_eq!(download::<i32>(dst, 2), [3, 1]);
}

#[test]
fn reduces_the_host_cannot_do_or_cann_refuses_are_refused() {
    common::device0();
    let s = new_stream();
    let (dst, src) = (malloc(64), malloc(64));
    let on_host = [0u32; 4];
    let sum = ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM;
    assert_eq!(
        reduce(
            dst,
            src,
            16,
            ACL_RT_MEMCPY_SDMA_AUTOMATIC_EQUAL,
            ACL_FLOAT,
            s
        ),
        ACL_ERROR_RT_FEATURE_NOT_SUPPORT
    );
    assert!(common::message().contains("STARS"));
    assert_eq!(
        reduce(dst, src, 16, sum, ACL_UINT8, s),
        ACL_ERROR_RT_FEATURE_NOT_SUPPORT
    );
    assert_eq!(
        reduce(dst, src, 16, sum, ACL_DOUBLE, s),
        ACL_ERROR_INVALID_PARAM
    );
    assert_eq!(
        reduce(dst, src, 16, 3, ACL_FLOAT, s),
        ACL_ERROR_INVALID_PARAM
    );
    assert_eq!(
        reduce(dst, src, 6, sum, ACL_FLOAT, s),
        ACL_ERROR_INVALID_PARAM
    );
    // SAFETY: pointer arithmetic inside the allocations.
    let (dst2, src2) = unsafe {
        (
            dst.cast::<u8>().add(2).cast(),
            src.cast::<u8>().add(1).cast(),
        )
    };
    assert_eq!(
        reduce(dst2, src, 4, sum, ACL_FLOAT, s),
        ACL_ERROR_RT_ADDR_UNALIGNED
    );
    assert_eq!(
        reduce(dst, src2, 2, sum, ACL_INT16, s),
        ACL_ERROR_RT_ADDR_UNALIGNED
    );
    assert_eq!(
        reduce(dst, on_host.as_ptr().cast(), 16, sum, ACL_FLOAT, s),
        ACL_ERROR_INVALID_PARAM
    );
    assert_eq!(
        reduce(dst, src, 1 << 20, sum, ACL_FLOAT, s),
        ACL_ERROR_INVALID_PARAM
    );
    assert_eq!(
        reduce(null_mut(), src, 16, sum, ACL_FLOAT, s),
        ACL_ERROR_INVALID_PARAM
    );
    let mut reserve = 0u8;
    // SAFETY: the library refuses the call before reading anything.
    let rc = unsafe {
        aclrtReduceAsync(
            dst,
            src,
            16,
            sum,
            ACL_FLOAT,
            s,
            (&mut reserve as *mut u8).cast(),
        )
    };
    assert_eq!(rc, ACL_ERROR_INVALID_PARAM);
    sync(s);
}

fn value(bytes: &[u8]) -> aclrtRandomParaInfo {
    let mut p = aclrtRandomParaInfo {
        isAddr: 0,
        valueOrAddr: [0; 8],
        size: bytes.len() as u8,
        rsv: [0; 6],
    };
    p.valueOrAddr[..bytes.len()].copy_from_slice(bytes);
    p
}

fn at(addr: *mut c_void) -> aclrtRandomParaInfo {
    aclrtRandomParaInfo {
        isAddr: 1,
        valueOrAddr: (addr as u64).to_le_bytes(),
        size: 8,
        rsv: [0; 6],
    }
}

fn task(
    ty: i32,
    func: i32,
    first: aclrtRandomParaInfo,
    second: aclrtRandomParaInfo,
    num: aclrtRandomParaInfo,
    result: *mut c_void,
    counter: *mut c_void,
) -> aclrtRandomNumTaskInfo {
    aclrtRandomNumTaskInfo {
        dataType: ty,
        randomNumFuncParaInfo: aclrtRandomNumFuncParaInfo {
            funcType: func,
            paramInfo: aclrtRandomNumFuncParaInfoParam {
                uniformDisInfo: aclrtUniformDisInfo {
                    min: first,
                    max: second,
                },
            },
        },
        randomParaAddr: null_mut(),
        randomResultAddr: result,
        randomCounterAddr: counter,
        randomSeed: value(&42u64.to_le_bytes()),
        randomNum: num,
        rsv: [0; 8],
    }
}

fn launch(t: &aclrtRandomNumTaskInfo, s: aclrtStream) -> aclError {
    // SAFETY: a task of the test's; the library checks its addresses.
    unsafe { aclrtRandomNumAsync(t, s, null_mut()) }
}

#[test]
fn random_numbers_keep_their_range_repeat_for_a_seed_and_advance_the_counter() {
    common::device0();
    let s = new_stream();
    let (result, counter) = (malloc(4096), malloc(16));
    upload(counter, &[0u8; 16]);
    let uniform = task(
        ACL_INT32,
        ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS,
        value(&1i32.to_le_bytes()),
        value(&100i32.to_le_bytes()),
        value(&128u64.to_le_bytes()),
        result,
        counter,
    );
    assert_eq!(launch(&uniform, s), ACL_SUCCESS);
    sync(s);
    let first: Vec<i32> = download(result, 128);
    assert!(first.iter().all(|v| (1..100).contains(v)), "{first:?}");
    let advanced: Vec<u8> = download(counter, 16);
    assert_ne!(advanced, [0u8; 16], "the counter moves on");
    // The next task continues the sequence; the same counter repeats it.
    assert_eq!(launch(&uniform, s), ACL_SUCCESS);
    sync(s);
    assert_ne!(download::<i32>(result, 128), first);
    upload(counter, &[0u8; 16]);
    assert_eq!(launch(&uniform, s), ACL_SUCCESS);
    sync(s);
    assert_eq!(download::<i32>(result, 128), first);

    // A dropout bitmask of 20 numbers is 3 bytes: the fourth stays.
    upload(result, &[0xAAu8; 8]);
    let mut dropout = task(
        ACL_FLOAT,
        ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK,
        value(&0.5f32.to_le_bytes()),
        value(&[]),
        value(&20u64.to_le_bytes()),
        result,
        counter,
    );
    assert_eq!(launch(&dropout, s), ACL_SUCCESS);
    sync(s);
    let mask: Vec<u8> = download(result, 4);
    assert_eq!(mask[2] & 0xF0, 0, "bits past the numbers are 0");
    assert_eq!(mask[3], 0xAA);
    // A ratio of 1 drops everything, 0 keeps everything.
    dropout
        .randomNumFuncParaInfo
        .paramInfo
        .dropoutBitmaskInfo
        .dropoutRation = value(&1.0f32.to_le_bytes());
    assert_eq!(launch(&dropout, s), ACL_SUCCESS);
    sync(s);
    assert_eq!(download::<u8>(result, 3), [0, 0, 0]);

    // Parameters by address are read when the task runs.
    let params = malloc(16);
    upload(params, &[3.0f32, 0.0, 0.0, 0.0]);
    let num = malloc(8);
    upload(num, &[16u64]);
    let normal = task(
        ACL_FLOAT,
        ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS,
        at(params),
        value(&0.0f32.to_le_bytes()),
        at(num),
        result,
        counter,
    );
    assert_eq!(launch(&normal, s), ACL_SUCCESS);
    sync(s);
    assert_eq!(download::<f32>(result, 16), [3.0; 16], "mean 3, stddev 0");
}

#[test]
fn random_number_tasks_are_checked_as_cann_checks_them() {
    common::device0();
    let s = new_stream();
    let (result, counter) = (malloc(256), malloc(16));
    let good = || {
        task(
            ACL_FLOAT,
            ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS,
            value(&0.0f32.to_le_bytes()),
            value(&1.0f32.to_le_bytes()),
            value(&8u64.to_le_bytes()),
            result,
            counter,
        )
    };
    assert_eq!(launch(&good(), s), ACL_SUCCESS);
    let mut t = good();
    t.dataType = ACL_INT32;
    assert_eq!(
        launch(&t, s),
        ACL_ERROR_INVALID_PARAM,
        "normal numbers are floats"
    );
    let mut t = good();
    t.dataType = ACL_INT8;
    assert_eq!(launch(&t, s), ACL_ERROR_INVALID_PARAM);
    let mut t = good();
    t.randomNumFuncParaInfo.funcType = 4;
    assert_eq!(launch(&t, s), ACL_ERROR_INVALID_PARAM);
    let mut t = good();
    t.randomSeed.isAddr = 2;
    assert_eq!(launch(&t, s), ACL_ERROR_INVALID_PARAM);
    let mut t = good();
    t.randomNum.size = 0;
    assert_eq!(launch(&t, s), ACL_ERROR_INVALID_PARAM);
    let mut t = good();
    t.randomNumFuncParaInfo.paramInfo.normalDisInfo.stddev.size = 8;
    assert_eq!(
        launch(&t, s),
        ACL_ERROR_INVALID_PARAM,
        "a float's value is 4 bytes at most"
    );
    let mut t = good();
    t.randomCounterAddr = null_mut();
    assert_eq!(launch(&t, s), ACL_ERROR_INVALID_PARAM);
    let mut t = good();
    t.randomNum = value(&1_000_000u64.to_le_bytes());
    assert_eq!(
        launch(&t, s),
        ACL_ERROR_INVALID_PARAM,
        "the result is too small"
    );
    let mut on_host = [0u8; 64];
    let mut t = good();
    t.randomResultAddr = on_host.as_mut_ptr().cast();
    assert_eq!(launch(&t, s), ACL_ERROR_INVALID_PARAM);
    let mut t = good();
    t.randomNumFuncParaInfo.paramInfo.normalDisInfo.mean = at(on_host.as_mut_ptr().cast());
    assert_eq!(launch(&t, s), ACL_ERROR_INVALID_PARAM);
    // SAFETY: NULL is refused before anything is read.
    assert_eq!(
        unsafe { aclrtRandomNumAsync(std::ptr::null(), s, null_mut()) },
        ACL_ERROR_INVALID_PARAM
    );
    let mut reserve = 0u8;
    // SAFETY: refused before the task is queued.
    let rc = unsafe { aclrtRandomNumAsync(&good(), s, (&mut reserve as *mut u8).cast()) };
    assert_eq!(rc, ACL_ERROR_INVALID_PARAM);
    sync(s);
}
