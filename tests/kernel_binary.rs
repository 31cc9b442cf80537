//! Kernel binaries on the host runtime: `aclrtBinaryLoadFromFile` opens a
//! shared object of host stand-ins (built here from
//! `c_examples/kernel_binary_kernels.c`), `aclrtBinaryGetFunction` finds
//! `aclallocKernel_NAME`, the `aclrtKernelArgs*` calls build the argument
//! list as CANN lays it out, and `aclrtLaunchKernelWithConfig` runs the
//! stand-in on the stream once per block. Handles are looked up, never
//! trusted; out-parameters are written only on success; every failure
//! leaves a message.

mod common;

use aclalloc::base::error::*;
use aclalloc::ffi::cann::kernels::*;
use aclalloc::ffi::cann::memory::*;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::cann::types::*;
use common::message;
use std::ffi::{c_void, CString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicI32, Ordering};

/// A private copy of the test kernels (a distinct path is a distinct
/// object, so a test can watch its own copy being closed).
fn kernels(name: &str) -> PathBuf {
    let dir = common::scratch(&format!("kernel-binary-{name}"));
    let so = dir.join("kernels.o");
    let status = Command::new("cc")
        .args([
            "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
        ])
        .arg("-I")
        .arg(common::root().join("include"))
        .arg(common::root().join("c_examples/kernel_binary_kernels.c"))
        .arg("-o")
        .arg(&so)
        .status()
        .expect("run cc");
    assert!(status.success(), "building the test kernels failed");
    so
}

fn is_loaded(so: &Path) -> bool {
    const RTLD_NOLOAD: i32 = 4;
    // SAFETY: RTLD_NOLOAD finds a loaded object only; nothing new runs.
    unsafe {
        libloading::os::unix::Library::open(Some(so), libloading::os::unix::RTLD_NOW | RTLD_NOLOAD)
    }
    .is_ok()
}

fn load(so: &Path) -> aclrtBinHandle {
    common::device0();
    let path = CString::new(so.to_str().unwrap()).unwrap();
    let mut bin = null_mut();
    // SAFETY: a valid path and out-pointer.
    let rc = unsafe { aclrtBinaryLoadFromFile(path.as_ptr(), null_mut(), &mut bin) };
    assert_eq!(
        rc,
        ACL_SUCCESS,
        "{}",
        common::recent_message().unwrap_or_default()
    );
    bin
}

fn function(bin: aclrtBinHandle, name: &str) -> aclrtFuncHandle {
    let name = CString::new(name).unwrap();
    let mut f = null_mut();
    // SAFETY: a valid name and out-pointer.
    assert_eq!(
        unsafe { aclrtBinaryGetFunction(bin, name.as_ptr(), &mut f) },
        ACL_SUCCESS
    );
    f
}

fn init(f: aclrtFuncHandle) -> aclrtArgsHandle {
    let mut a = null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { aclrtKernelArgsInit(f, &mut a) }, ACL_SUCCESS);
    a
}

fn append<T>(args: aclrtArgsHandle, value: &T) -> aclError {
    let mut p = null_mut();
    // SAFETY: `value` is readable for its size; a valid out-pointer.
    unsafe {
        aclrtKernelArgsAppend(
            args,
            (value as *const T).cast_mut().cast(),
            std::mem::size_of::<T>(),
            &mut p,
        )
    }
}

fn stream() -> aclrtStream {
    let mut s = null_mut();
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { aclrtCreateStream(&mut s) }, ACL_SUCCESS);
    s
}

fn sync(s: aclrtStream) {
    // SAFETY: a live stream.
    assert_eq!(unsafe { aclrtSynchronizeStream(s) }, ACL_SUCCESS);
}

const SENTINEL: *mut c_void = 0x5a5a as *mut c_void;

#[test]
fn handles_are_looked_up_and_out_parameters_are_left_alone_on_failure() {
    let so = kernels("handles");
    let bin = load(&so);
    let scale = function(bin, "scale");
    let args = init(scale);
    let name = CString::new("scale").unwrap();
    let bogus = [0x1234usize as *mut c_void, scale, args, bin];

    let mut out = SENTINEL;
    // SAFETY (every call below): the out-pointers are valid; the handles
    // are looked up, never dereferenced.
    unsafe {
        assert_eq!(
            aclrtBinaryLoadFromFile(std::ptr::null(), null_mut(), &mut out),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(message().contains("binPath"), "{}", message());
        let missing = CString::new("/nonexistent/kernels.o").unwrap();
        assert_eq!(
            aclrtBinaryLoadFromFile(missing.as_ptr(), null_mut(), &mut out),
            ACL_ERROR_INVALID_FILE
        );
        assert!(
            message().contains("/nonexistent/kernels.o"),
            "{}",
            message()
        );
        assert_eq!(out, SENTINEL);

        for (i, &b) in bogus.iter().enumerate() {
            if b == bin {
                continue;
            }
            assert_eq!(
                aclrtBinaryGetFunction(b, name.as_ptr(), &mut out),
                ACL_ERROR_INVALID_PARAM,
                "binary {i}"
            );
            assert!(message().contains("binHandle"), "{}", message());
            assert_eq!(aclrtBinaryUnLoad(b), ACL_ERROR_INVALID_PARAM);
        }
        assert_eq!(
            aclrtBinaryGetFunction(null_mut(), name.as_ptr(), &mut out),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtBinaryGetFunction(bin, std::ptr::null(), &mut out),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(message().contains("kernelName"), "{}", message());
        assert_eq!(
            aclrtBinaryGetFunction(bin, name.as_ptr(), null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        let absent = CString::new("absent").unwrap();
        assert_eq!(
            aclrtBinaryGetFunction(bin, absent.as_ptr(), &mut out),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(message().contains("aclallocKernel_absent"), "{}", message());

        for &f in &[bogus[0], args, bin, null_mut()] {
            assert_eq!(aclrtKernelArgsInit(f, &mut out), ACL_ERROR_INVALID_PARAM);
            assert!(message().contains("funcHandle"), "{}", message());
            assert_eq!(
                aclrtLaunchKernelWithConfig(f, 1, null_mut(), null_mut(), args, null_mut()),
                ACL_ERROR_INVALID_PARAM
            );
        }
        let value = 7u32;
        for &a in &[bogus[0], scale, bin, null_mut()] {
            assert_eq!(append(a, &value), ACL_ERROR_INVALID_PARAM);
            assert!(message().contains("argsHandle"), "{}", message());
            assert_eq!(
                aclrtKernelArgsAppendPlaceHolder(a, &mut out),
                ACL_ERROR_INVALID_PARAM
            );
            assert_eq!(aclrtKernelArgsFinalize(a), ACL_ERROR_INVALID_PARAM);
            assert_eq!(
                aclrtLaunchKernelWithConfig(scale, 1, null_mut(), null_mut(), a, null_mut()),
                ACL_ERROR_INVALID_PARAM
            );
        }
        assert_eq!(out, SENTINEL, "nothing written on failure");
        assert_eq!(
            aclrtKernelArgsAppend(args, null_mut(), 4, &mut out),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(message().contains("param"), "{}", message());
        assert_eq!(
            aclrtKernelArgsAppend(args, (&raw const value).cast_mut().cast(), 0, &mut out),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(message().contains("paramSize"), "{}", message());
        assert_eq!(
            aclrtKernelArgsAppend(args, (&raw const value).cast_mut().cast(), 4, null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(out, SENTINEL);
        // A launch's reserved argument must be NULL, as CANN says.
        assert_eq!(
            aclrtLaunchKernelWithConfig(scale, 1, null_mut(), null_mut(), args, SENTINEL),
            ACL_ERROR_INVALID_PARAM
        );
        // The same name gives the same function.
        assert_eq!(function(bin, "scale"), scale);
        assert_eq!(aclrtBinaryUnLoad(bin), ACL_SUCCESS);
    }
}

#[test]
fn placeholders_follow_canns_rules() {
    let so = kernels("placeholders");
    let bin = load(&so);
    let scale = function(bin, "scale");
    let blocks = function(bin, "blocks");
    // Another thread's list: a thread has one list from
    // aclrtKernelArgsInit at a time.
    let blocks_raw = blocks as usize;
    let (other, ph_other) = std::thread::spawn(move || {
        let other = init(blocks_raw as aclrtFuncHandle);
        let mut ph = null_mut();
        // SAFETY: a valid out-pointer.
        let rc = unsafe { aclrtKernelArgsAppendPlaceHolder(other, &mut ph) };
        assert_eq!(rc, ACL_SUCCESS);
        (other as usize, ph as usize)
    })
    .join()
    .unwrap();
    let (other, ph_other) = (other as aclrtArgsHandle, ph_other as aclrtParamHandle);
    let args = init(scale);
    let ptr = 0usize;
    // SAFETY (every call below): valid out-pointers; handles looked up.
    unsafe {
        assert_eq!(append(args, &ptr), ACL_SUCCESS);
        let mut value_param = null_mut();
        assert_eq!(
            aclrtKernelArgsAppend(
                args,
                (&raw const ptr).cast_mut().cast(),
                8,
                &mut value_param
            ),
            ACL_SUCCESS
        );
        let mut ph = SENTINEL;
        assert_eq!(aclrtKernelArgsAppendPlaceHolder(args, &mut ph), ACL_SUCCESS);
        assert_ne!(ph, SENTINEL);

        let mut buffer = SENTINEL;
        // Not a placeholder; another list's; no size; no out-pointer.
        assert_eq!(
            aclrtKernelArgsGetPlaceHolderBuffer(args, value_param, 4, &mut buffer),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(message().contains("not a placeholder"), "{}", message());
        assert_eq!(
            aclrtKernelArgsGetPlaceHolderBuffer(args, ph_other, 4, &mut buffer),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(message().contains("paramHandle"), "{}", message());
        assert_eq!(
            aclrtKernelArgsGetPlaceHolderBuffer(args, 0x77 as *mut c_void, 4, &mut buffer),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtKernelArgsGetPlaceHolderBuffer(args, ph, 0, &mut buffer),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(message().contains("dataSize"), "{}", message());
        assert_eq!(
            aclrtKernelArgsGetPlaceHolderBuffer(args, ph, 4, null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(buffer, SENTINEL);
        // More than 64 KiB in all.
        assert_eq!(
            aclrtKernelArgsGetPlaceHolderBuffer(args, ph, 64 * 1024, &mut buffer),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(message().contains("64 KiB"), "{}", message());

        assert_eq!(
            aclrtKernelArgsGetPlaceHolderBuffer(args, ph, 16, &mut buffer),
            ACL_SUCCESS
        );
        assert_eq!(
            std::slice::from_raw_parts(buffer.cast::<u8>(), 16),
            &[0u8; 16],
            "a placeholder's buffer starts zeroed"
        );
        // Nothing appended once a buffer was taken.
        assert_eq!(append(args, &ptr), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        assert!(
            message().contains("after getting placeholder buffer"),
            "{}",
            message()
        );
        let mut ph2 = null_mut();
        assert_eq!(
            aclrtKernelArgsAppendPlaceHolder(args, &mut ph2),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        );
        // Nothing appended nor taken once finalized.
        assert_eq!(aclrtKernelArgsFinalize(other), ACL_SUCCESS);
        assert_eq!(append(other, &ptr), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
        assert!(message().contains("after finalization"), "{}", message());
        assert_eq!(
            aclrtKernelArgsGetPlaceHolderBuffer(other, ph_other, 4, &mut buffer),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        );

        // At most 128 arguments (this list retires `args`).
        let many = init(blocks);
        for i in 0..128 {
            assert_eq!(append(many, &ptr), ACL_SUCCESS, "argument {i}");
        }
        assert_eq!(append(many, &ptr), ACL_ERROR_INVALID_PARAM);
        assert!(message().contains("128"), "{}", message());
        assert_eq!(aclrtKernelArgsFinalize(args), ACL_ERROR_INVALID_PARAM);
        assert_eq!(aclrtBinaryUnLoad(bin), ACL_SUCCESS);
        // The lists died with their binary.
        assert_eq!(aclrtKernelArgsFinalize(many), ACL_ERROR_INVALID_PARAM);
        assert_eq!(aclrtKernelArgsFinalize(other), ACL_ERROR_INVALID_PARAM);
        assert_eq!(
            aclrtKernelArgsGetPlaceHolderBuffer(other, ph_other, 4, &mut buffer),
            ACL_ERROR_INVALID_PARAM
        );
    }
}

#[test]
fn a_launch_computes_with_its_arguments_on_every_block() {
    let so = kernels("computes");
    let bin = load(&so);
    let scale = function(bin, "scale");
    let s = stream();
    const N: usize = 1001;
    let mut x: *mut f32 = null_mut();
    let mut y: *mut f32 = null_mut();
    // SAFETY (every call below): valid pointers; device memory is host
    // memory on the host runtime.
    unsafe {
        assert_eq!(
            aclrtMalloc((&raw mut x).cast(), N * 4, ACL_MEM_MALLOC_HUGE_FIRST),
            ACL_SUCCESS
        );
        assert_eq!(
            aclrtMalloc((&raw mut y).cast(), N * 4, ACL_MEM_MALLOC_HUGE_FIRST),
            ACL_SUCCESS
        );
        for i in 0..N {
            *x.add(i) = i as f32;
        }
        let args = init(scale);
        let n = N as u32;
        assert_eq!(append(args, &x), ACL_SUCCESS);
        assert_eq!(append(args, &y), ACL_SUCCESS);
        assert_eq!(append(args, &n), ACL_SUCCESS);
        let mut ph = null_mut();
        assert_eq!(aclrtKernelArgsAppendPlaceHolder(args, &mut ph), ACL_SUCCESS);
        let mut factor: *mut c_void = null_mut();
        assert_eq!(
            aclrtKernelArgsGetPlaceHolderBuffer(args, ph, 4, &mut factor),
            ACL_SUCCESS
        );
        assert_eq!(aclrtKernelArgsFinalize(args), ACL_SUCCESS);
        *factor.cast::<f32>() = 3.0;
        assert_eq!(
            aclrtLaunchKernelWithConfig(scale, 3, s, null_mut(), args, null_mut()),
            ACL_SUCCESS
        );
        // Each launch copies the list: this value is the next launch's.
        *factor.cast::<f32>() = -1.0;
        sync(s);
        for i in 0..N {
            assert_eq!(*y.add(i), i as f32 * 3.0, "element {i}");
        }
        assert_eq!(
            aclrtLaunchKernelWithConfig(scale, 1, s, null_mut(), args, null_mut()),
            ACL_SUCCESS
        );
        sync(s);
        assert_eq!(*y.add(N - 1), -((N - 1) as f32));

        // Each block runs once, told its index and the count; a launch
        // configuration with attributes is accepted.
        let blocks = function(bin, "blocks");
        let mut seen: *mut u32 = null_mut();
        assert_eq!(
            aclrtMalloc((&raw mut seen).cast(), 5 * 4, ACL_MEM_MALLOC_HUGE_FIRST),
            ACL_SUCCESS
        );
        let list = init(blocks);
        assert_eq!(append(list, &seen), ACL_SUCCESS);
        let mut attr = aclrtLaunchKernelAttr {
            id: ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT,
            value: aclrtLaunchKernelAttrValue { timeout: 5 },
        };
        let mut cfg = aclrtLaunchKernelCfg {
            attrs: &mut attr,
            numAttrs: 1,
        };
        assert_eq!(
            aclrtLaunchKernelWithConfig(blocks, 5, s, &mut cfg, list, null_mut()),
            ACL_SUCCESS
        );
        sync(s);
        for b in 0..5u32 {
            assert_eq!(*seen.add(b as usize), 5000 + b + 1, "block {b}");
        }
        assert_eq!(aclrtBinaryUnLoad(bin), ACL_SUCCESS);
        assert_eq!(aclrtFree(seen.cast()), ACL_SUCCESS);
        assert_eq!(aclrtFree(x.cast()), ACL_SUCCESS);
        assert_eq!(aclrtFree(y.cast()), ACL_SUCCESS);
        assert_eq!(aclrtDestroyStream(s), ACL_SUCCESS);
    }
}

#[test]
fn unload_with_launches_queued_keeps_the_binary_until_they_ran() {
    let so = kernels("unload");
    let bin = load(&so);
    assert!(is_loaded(&so));
    let wait_for = function(bin, "wait_for");
    let s = stream();
    let go = AtomicI32::new(0);
    let mut done = 0i32;
    let go_ptr = &raw const go;
    let done_ptr = &raw mut done;
    let args = init(wait_for);
    assert_eq!(append(args, &go_ptr), ACL_SUCCESS);
    assert_eq!(append(args, &done_ptr), ACL_SUCCESS);
    // SAFETY (every call below): handles looked up; the kernel's pointers
    // outlive the launches (the stream is synchronized below).
    unsafe {
        for _ in 0..3 {
            assert_eq!(
                aclrtLaunchKernelWithConfig(wait_for, 1, s, null_mut(), args, null_mut()),
                ACL_SUCCESS
            );
        }
        assert_eq!(aclrtBinaryUnLoad(bin), ACL_SUCCESS);
        // The handles died at once ...
        let mut f = SENTINEL;
        let name = CString::new("wait_for").unwrap();
        assert_eq!(
            aclrtBinaryGetFunction(bin, name.as_ptr(), &mut f),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtLaunchKernelWithConfig(wait_for, 1, s, null_mut(), args, null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert!(message().contains("funcHandle"), "{}", message());
        assert_eq!(aclrtKernelArgsFinalize(args), ACL_ERROR_INVALID_PARAM);
        // ... and the object stays mapped for the queued launches.
        assert!(is_loaded(&so), "unloaded under queued launches");
        go.store(1, Ordering::SeqCst);
        sync(s);
        assert_eq!(std::ptr::read_volatile(done_ptr), 3);
        assert!(!is_loaded(&so), "closed once the launches ran");
        assert_eq!(aclrtDestroyStream(s), ACL_SUCCESS);
    }
}

#[test]
fn a_thread_has_one_list_from_init_at_a_time() {
    let so = kernels("one-list");
    let bin = load(&so);
    let blocks = function(bin, "blocks");
    let s = stream();
    let mut seen: *mut u32 = null_mut();
    // SAFETY (every call below): valid pointers; handles looked up.
    unsafe {
        assert_eq!(
            aclrtMalloc((&raw mut seen).cast(), 4, ACL_MEM_MALLOC_HUGE_FIRST),
            ACL_SUCCESS
        );
        // A list per launch, as a serving loop may build them: each Init
        // retires the thread's previous list, as CANN starts its one
        // per-thread list over; a queued launch keeps its own copy.
        let mut previous = null_mut();
        for round in 0..1000 {
            let list = init(blocks);
            assert_eq!(append(list, &seen), ACL_SUCCESS);
            assert_eq!(
                aclrtLaunchKernelWithConfig(blocks, 1, s, null_mut(), list, null_mut()),
                ACL_SUCCESS
            );
            if round > 0 {
                assert_ne!(list, previous);
                assert_eq!(aclrtKernelArgsFinalize(previous), ACL_ERROR_INVALID_PARAM);
                assert!(message().contains("argsHandle"), "{}", message());
            }
            previous = list;
        }
        sync(s);
        assert_eq!(*seen, 1000 + 1);
        assert_eq!(aclrtKernelArgsFinalize(previous), ACL_SUCCESS);
        assert_eq!(aclrtBinaryUnLoad(bin), ACL_SUCCESS);
        assert_eq!(aclrtFree(seen.cast()), ACL_SUCCESS);
        assert_eq!(aclrtDestroyStream(s), ACL_SUCCESS);
    }
}
