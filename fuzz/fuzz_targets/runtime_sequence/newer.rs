//! The target's ops for the newer exports: data buffers, the built-in
//! reduce and random-number tasks, and labels in built models. Each op
//! makes what it uses and destroys it before it returns.

use super::*;
use aclalloc::ffi::cann::builtin_tasks::*;
use aclalloc::ffi::cann::data_buffer::*;
use aclalloc::ffi::cann::kernels::*;
use aclalloc::ffi::cann::labels::*;
use aclalloc::ffi::cann::memory::*;
use aclalloc::ffi::cann::model_ri::*;
use aclalloc::runtime::half::{bf16_to_f32, f16_to_f32};

const FEATURE_NOT_SUPPORT: aclError = 207_000;
const ADDR_UNALIGNED: aclError = 107_008;
const STREAM_MODEL: aclError = 107_005;
const INTERNAL_ERROR: aclError = 507_000;

// aclDataType values the ops draw from.
const FLOAT: i32 = 0;
const FLOAT16: i32 = 1;
const INT8: i32 = 2;
const INT32: i32 = 3;
const UINT8: i32 = 4;
const UINT32: i32 = 8;
const INT64: i32 = 9;
const UINT64: i32 = 10;
const DOUBLE: i32 = 11;
const BF16: i32 = 27;

/// Bytes of each buffer a reduce or random-number op allocates.
const BUFFER: usize = 64;
const RESULT: usize = 1024;

/// The ops' inputs.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub(crate) enum NewerOp {
    /// A data buffer over (addr, size); `how % 3`: updated, read as is,
    /// or (2) made over a size past 32 bits; destroyed, then refused.
    DataBuffer(u64, u32, u8),
    /// `aclrtReduceAsync` on a stream: kind, type, count and dst offset
    /// mostly valid (SUM, MAX, MIN; fp32, int32, int8, bf16; whole elements
    /// within the buffers; aligned), else (the top bits set) kinds 9 and
    /// 13, uint8 and double, a count of any byte length to 80, an offset
    /// of 1 or 2.
    Reduce(StreamPick, u8, u8, u8, u8),
    /// `aclrtRandomNumAsync` on a stream: function f % 5 (4: none), type
    /// t % 9 (int8 and double: refused), n % 300 numbers (more than the
    /// 1 KiB result holds: refused), a flaw w % 8 (4: a parameter by
    /// address; 5 to 7: refused; else none).
    RandomNum(StreamPick, u8, u8, u16, u8),
    /// A model with n % 3 + 1 labels on two bound streams, a switch among
    /// them, replayed with indices a and b; a flaw w % 8 (1: the handles
    /// destroyed before the replays; 2 to 5: refused calls beside; 5: the
    /// last label never set; else none).
    Labels(u8, u8, u8, u8),
    /// The kernel binary built from `c_examples/kernel_binary_kernels.c`
    /// (once per process, with `cc`; without one the op does nothing):
    /// loaded, its `blocks` kernel launched with b % 9 blocks (0: refused)
    /// on a stream through an argument list, the blocks' marks checked
    /// after a synchronize; a flaw w % 6: 1 a kernel the binary lacks
    /// (refused), 2 the binary unloaded before the synchronize (the queued
    /// launch still runs), 3 a launch after the unload (refused), else none.
    KernelBinary(StreamPick, u8, u8),
}

/// The kernel binary's path, built at the first use.
fn kernel_binary() -> Option<&'static std::ffi::CStr> {
    static PATH: OnceLock<Option<std::ffi::CString>> = OnceLock::new();
    PATH.get_or_init(|| {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let out =
            std::env::temp_dir().join(format!("aclalloc-fuzz-kernels-{}.so", std::process::id()));
        let built = std::process::Command::new("cc")
            .args(["-shared", "-fPIC", "-O1", "-I"])
            .arg(root.join("include"))
            .arg(root.join("c_examples/kernel_binary_kernels.c"))
            .arg("-o")
            .arg(&out)
            .status()
            .is_ok_and(|s| s.success());
        built
            .then(|| std::ffi::CString::new(out.to_str()?).ok())
            .flatten()
    })
    .as_deref()
}

impl Model {
    pub(crate) fn newer(&mut self, op: NewerOp) {
        match op {
            NewerOp::DataBuffer(addr, size, how) => self.data_buffer(addr, size, how),
            NewerOp::Reduce(s, k, t, n, o) => self.reduce(s, k, t, n, o),
            NewerOp::RandomNum(s, f, t, n, w) => self.random_num(s, f, t, n, w),
            NewerOp::Labels(n, a, b, w) => self.labels(n, a, b, w),
            NewerOp::KernelBinary(s, b, w) => self.kernel_binary(s, b, w),
        }
    }

    fn data_buffer(&mut self, addr: u64, size: u32, how: u8) {
        let (addr, mut size) = (addr as usize, size as usize);
        if how % 3 == 2 {
            size += 1 << 32;
        }
        // SAFETY (every call): the library keeps the numbers, never reads them.
        unsafe {
            let b = aclCreateDataBuffer(addr as *mut c_void, size);
            assert!(!b.is_null(), "aclCreateDataBuffer");
            let (addr, size) = if how % 3 == 0 {
                let (a, s) = (addr ^ 0x1000, size / 2);
                let rc = aclUpdateDataBuffer(b, a as *mut c_void, s);
                self.expect("aclUpdateDataBuffer", rc, OK);
                (a, s)
            } else {
                (addr, size)
            };
            assert_eq!(aclGetDataBufferAddr(b) as usize, addr);
            assert_eq!(aclGetDataBufferSizeV2(b), size);
            assert_eq!(aclGetDataBufferSize(b), size as u32, "truncated to 32 bits");
            self.expect("aclDestroyDataBuffer", aclDestroyDataBuffer(b), OK);
            self.expect(
                "aclDestroyDataBuffer",
                aclDestroyDataBuffer(b),
                INVALID_PARAM,
            );
            assert!(aclGetDataBufferAddr(b).is_null());
            self.failed.push("aclGetDataBufferAddr");
            assert_eq!(aclGetDataBufferSize(b), 0);
            self.failed.push("aclGetDataBufferSize");
            let rc = aclUpdateDataBuffer(b, std::ptr::null_mut(), 0);
            self.expect("aclUpdateDataBuffer", rc, INVALID_PARAM);
        }
    }

    /// Device memory of `size` bytes filled with `fill`, or None when the
    /// op cannot run (no current context, or the device is full: its
    /// refusal is one of the lines the check skips).
    fn device_buffer(&mut self, size: usize, fill: &[u8]) -> Option<*mut c_void> {
        self.current_alive()?;
        let mut p = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        if unsafe { aclrtMalloc(&mut p, size, ACL_MEM_MALLOC_HUGE_FIRST) } != OK {
            return None;
        }
        let bytes: Vec<u8> = fill.iter().copied().cycle().take(size).collect();
        // SAFETY: `size` bytes of device memory.
        let rc = unsafe {
            aclrtMemcpy(
                p,
                size,
                bytes.as_ptr().cast(),
                size,
                ACL_MEMCPY_HOST_TO_DEVICE,
            )
        };
        self.expect("aclrtMemcpy", rc, OK);
        Some(p)
    }

    fn free(&mut self, p: *mut c_void) {
        // SAFETY: device memory of this op's.
        let rc = unsafe { aclrtFree(p) };
        self.expect("aclrtFree", rc, OK);
    }

    fn download(&mut self, p: *const c_void, n: usize) -> Vec<u8> {
        let mut out = vec![0u8; n];
        // SAFETY: `n` bytes of device memory of this op's.
        let rc =
            unsafe { aclrtMemcpy(out.as_mut_ptr().cast(), n, p, n, ACL_MEMCPY_DEVICE_TO_HOST) };
        self.expect("aclrtMemcpy", rc, OK);
        out
    }

    /// Synchronizes the stream an op queued work on: everything launched
    /// on it before has run too.
    fn settle(&mut self, handle: usize, index: Option<usize>) {
        // SAFETY: a stream the runtime accepted.
        let rc = unsafe { aclrtSynchronizeStream(handle as *mut c_void) };
        self.expect("aclrtSynchronizeStream", rc, OK);
        self.launched_before_ran(handle, index);
    }

    fn reduce(&mut self, s: StreamPick, kind: u8, ty: u8, count: u8, offset: u8) {
        // Valid choices mostly, so that the reduces that run are common.
        let kind = if kind & 0xC0 == 0xC0 {
            [9, 13][usize::from(kind & 1)]
        } else {
            10 + i32::from(kind % 3)
        };
        let ty = if ty & 0xC0 == 0xC0 {
            [UINT8, DOUBLE][usize::from(ty & 1)]
        } else {
            [FLOAT, INT32, INT8, BF16][usize::from(ty % 4)]
        };
        let offset = if offset & 0xC0 == 0xC0 {
            usize::from(offset % 2) + 1
        } else {
            0
        };
        // One and two in the type, element after element.
        let (size, one, two): (usize, &[u8], &[u8]) = match ty {
            FLOAT => (4, &[0, 0, 0x80, 0x3F], &[0, 0, 0, 0x40]),
            INT32 => (4, &[1, 0, 0, 0], &[2, 0, 0, 0]),
            BF16 => (2, &[0x80, 0x3F], &[0, 0x40]),
            _ => (1, &[1], &[2]),
        };
        let count = if count & 0xC0 == 0xC0 {
            usize::from(count % 80)
        } else {
            usize::from(count % 17) * size
        };
        let Some(dst) = self.device_buffer(BUFFER, one) else {
            return;
        };
        let Some(src) = self.device_buffer(BUFFER, two) else {
            return self.free(dst);
        };
        let (handle, index) = self.pick(s);
        let accepted = self.accepts(handle, index);
        // The library's order: type, kind, count, alignment, ranges, stream.
        let want = if ty == DOUBLE {
            INVALID_PARAM
        } else if ty == UINT8 {
            FEATURE_NOT_SUPPORT
        } else if kind == 9 {
            INVALID_PARAM
        } else if kind == 13 {
            FEATURE_NOT_SUPPORT
        } else if count % size != 0 {
            INVALID_PARAM
        } else if offset % size != 0 {
            ADDR_UNALIGNED
        } else if offset + count > BUFFER || !accepted {
            INVALID_PARAM
        } else {
            OK
        };
        if want == OK {
            self.touch_default(&[handle]);
        }
        // SAFETY: the library checks both ranges and the stream.
        let rc = unsafe {
            aclrtReduceAsync(
                dst.cast::<u8>().add(offset).cast(),
                src,
                count as u64,
                kind,
                ty,
                handle as *mut c_void,
                std::ptr::null_mut(),
            )
        };
        self.expect("aclrtReduceAsync", rc, want);
        if want == OK {
            self.settle(handle, index);
            let out = self.download(dst, BUFFER);
            let result: &[u8] = match kind {
                10 => match ty {
                    FLOAT => &[0, 0, 0x40, 0x40],
                    INT32 => &[3, 0, 0, 0],
                    BF16 => &[0x40, 0x40],
                    _ => &[3],
                },
                11 => two,
                _ => one,
            };
            for (i, element) in out.chunks_exact(size).enumerate() {
                let at = i * size;
                let reduced = at >= offset && at < offset + count;
                assert_eq!(
                    element,
                    if reduced { result } else { one },
                    "reduce at byte {at}"
                );
            }
        }
        self.free(src);
        self.free(dst);
    }

    fn random_num(&mut self, s: StreamPick, func: u8, ty: u8, num: u16, flaw: u8) {
        let func = i32::from(func % 5);
        let ty = [
            FLOAT, FLOAT16, BF16, INT32, INT64, UINT32, UINT64, INT8, DOUBLE,
        ][usize::from(ty % 9)];
        let num = u64::from(num % 300);
        let flaw = flaw % 8;
        let Some(result) = self.device_buffer(RESULT, &[0xAA]) else {
            return;
        };
        let Some(counter) = self.device_buffer(16, &[0]) else {
            return self.free(result);
        };
        let size = match ty {
            FLOAT16 | BF16 => 2,
            FLOAT | INT32 | UINT32 => 4,
            INT64 | UINT64 => 8,
            _ => 0,
        };
        let float = matches!(ty, FLOAT | FLOAT16 | BF16);
        let value = |bytes: &[u8]| {
            let mut p = aclrtRandomParaInfo {
                isAddr: 0,
                valueOrAddr: [0; 8],
                size: bytes.len() as u8,
                rsv: [0; 6],
            };
            p.valueOrAddr[..bytes.len()].copy_from_slice(bytes);
            p
        };
        // Uniform: [1, 2) for floats, [-3, 7) or [1, 100) for integers;
        // normal: mean 5, stddev 0; dropout: ratio 0 (every bit kept).
        let (first, second): (Vec<u8>, Vec<u8>) = match (func, ty) {
            (1, FLOAT) => (1f32.to_le_bytes().into(), 2f32.to_le_bytes().into()),
            (1, FLOAT16) => (vec![0x00, 0x3C], vec![0x00, 0x40]),
            (1, BF16) => (vec![0x80, 0x3F], vec![0x00, 0x40]),
            (1, INT32) => ((-3i32).to_le_bytes().into(), 7i32.to_le_bytes().into()),
            (1, INT64) => ((-3i64).to_le_bytes().into(), 7i64.to_le_bytes().into()),
            (1, UINT32) => (1u32.to_le_bytes().into(), 100u32.to_le_bytes().into()),
            (1, UINT64) => (1u64.to_le_bytes().into(), 100u64.to_le_bytes().into()),
            (2 | 3, FLOAT) => (5f32.to_le_bytes().into(), 0f32.to_le_bytes().into()),
            (2 | 3, FLOAT16) => (vec![0x00, 0x45], vec![0, 0]),
            (2 | 3, BF16) => (vec![0xA0, 0x40], vec![0, 0]),
            (0, _) if float => (vec![0; size], vec![0; size]),
            _ => (vec![0; size.max(1)], vec![0; size.max(1)]),
        };
        let param_at = if flaw == 4 {
            self.device_buffer(8, &first)
        } else {
            None
        };
        let mut task = aclrtRandomNumTaskInfo {
            dataType: ty,
            randomNumFuncParaInfo: aclrtRandomNumFuncParaInfo {
                funcType: func,
                paramInfo: aclrtRandomNumFuncParaInfoParam {
                    uniformDisInfo: aclrtUniformDisInfo {
                        min: value(&first),
                        max: value(&second),
                    },
                },
            },
            randomParaAddr: std::ptr::null_mut(),
            randomResultAddr: result,
            randomCounterAddr: counter,
            randomSeed: value(&7u64.to_le_bytes()),
            randomNum: value(&num.to_le_bytes()),
            rsv: [0; 8],
        };
        match flaw {
            7 => task.randomSeed.isAddr = 2,
            4 => {
                if let Some(at) = param_at {
                    task.randomNumFuncParaInfo.paramInfo.uniformDisInfo.min = aclrtRandomParaInfo {
                        isAddr: 1,
                        valueOrAddr: (at as u64).to_le_bytes(),
                        size: 8,
                        rsv: [0; 6],
                    };
                }
            }
            5 => task.randomNum.size = 0,
            6 => task.randomCounterAddr = std::ptr::null_mut(),
            _ => {}
        }
        let (handle, index) = self.pick(s);
        let bytes = if func == 0 {
            num.div_ceil(8)
        } else {
            num * size as u64
        };
        let want = if size == 0 || func == 4 || (func != 1 && !float) || matches!(flaw, 5..=7) {
            INVALID_PARAM
        } else if bytes > RESULT as u64 || !self.accepts(handle, index) {
            INVALID_PARAM
        } else {
            OK
        };
        if want == OK {
            self.touch_default(&[handle]);
        }
        // SAFETY: a task of this op's; the library checks its addresses.
        let rc = unsafe { aclrtRandomNumAsync(&task, handle as *mut c_void, std::ptr::null_mut()) };
        self.expect("aclrtRandomNumAsync", rc, want);
        if want == OK {
            self.settle(handle, index);
            let out = self.download(result, RESULT);
            let n = num as usize;
            if func == 0 {
                for (i, &byte) in out[..n.div_ceil(8)].iter().enumerate() {
                    let bits = (n - i * 8).min(8);
                    assert_eq!(u32::from(byte), (1u32 << bits) - 1, "dropout byte {i}");
                }
            } else {
                for e in out[..n * size].chunks_exact(size) {
                    let float_of = |e: &[u8]| match ty {
                        FLOAT16 => f16_to_f32(u16::from_le_bytes([e[0], e[1]])),
                        BF16 => bf16_to_f32(u16::from_le_bytes([e[0], e[1]])),
                        _ => f32::from_le_bytes([e[0], e[1], e[2], e[3]]),
                    };
                    let ok = match (func, ty) {
                        (1, FLOAT) => (1.0..2.0).contains(&float_of(e)),
                        (1, FLOAT16 | BF16) => (1.0..=2.0).contains(&float_of(e)),
                        (1, INT32) => (-3..7).contains(&i32::from_le_bytes(e.try_into().unwrap())),
                        (1, INT64) => (-3..7).contains(&i64::from_le_bytes(e.try_into().unwrap())),
                        (1, UINT32) => {
                            (1..100).contains(&u32::from_le_bytes(e.try_into().unwrap()))
                        }
                        (1, _) => (1..100).contains(&u64::from_le_bytes(e.try_into().unwrap())),
                        _ => float_of(e) == 5.0,
                    };
                    assert!(ok, "random number {e:?} of function {func}, type {ty}");
                }
            }
            let written = usize::try_from(bytes).unwrap();
            assert!(
                out[written..].iter().all(|&b| b == 0xAA),
                "written past the numbers"
            );
        }
        if let Some(at) = param_at {
            self.free(at);
        }
        self.free(counter);
        self.free(result);
    }

    fn new_stream(&mut self) -> *mut c_void {
        let mut s = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        let rc = unsafe { aclrtCreateStream(&mut s) };
        self.expect("aclrtCreateStream", rc, OK);
        s
    }

    fn labels(&mut self, n: u8, a: u8, b: u8, flaw: u8) {
        let n = usize::from(n % 3) + 1;
        let flaw = flaw % 8;
        let Some(index) = self.device_buffer(4, &[0]) else {
            return;
        };
        let Some(out) = self.device_buffer(8, &[0]) else {
            return self.free(index);
        };
        let (head, second, exec) = (self.new_stream(), self.new_stream(), self.new_stream());
        // Label k is set on the head stream (even k) or the second (odd).
        let on = |k: usize| if k % 2 == 0 { head } else { second };
        // SAFETY (every call): live handles of this op's, device memory and
        // valid out-pointers; refused handles are looked up, never read.
        unsafe {
            let mut labels = vec![std::ptr::null_mut(); n];
            for l in &mut labels {
                self.expect("aclrtCreateLabel", aclrtCreateLabel(l), OK);
            }
            let mut list = std::ptr::null_mut();
            if flaw == 2 {
                let rc = aclrtCreateLabelList(labels.as_mut_ptr(), 0, &mut list);
                self.expect("aclrtCreateLabelList", rc, INVALID_PARAM);
            }
            let rc = aclrtCreateLabelList(labels.as_mut_ptr(), n, &mut list);
            self.expect("aclrtCreateLabelList", rc, OK);
            let mut m = std::ptr::null_mut();
            self.expect("aclmdlRIBuildBegin", aclmdlRIBuildBegin(&mut m, 0), OK);
            let rc = aclmdlRIBindStream(m, head, ACL_MODEL_STREAM_FLAG_HEAD);
            self.expect("aclmdlRIBindStream", rc, OK);
            let rc = aclmdlRIBindStream(m, second, ACL_MODEL_STREAM_FLAG_DEFAULT);
            self.expect("aclmdlRIBindStream", rc, OK);
            let marker = |k: usize| out.cast::<u8>().add(k).cast::<c_void>();
            let rc = aclrtMemsetAsync(marker(6), 1, 0x66, 1, head);
            self.expect("aclrtMemsetAsync", rc, OK);
            if flaw == 3 {
                let rc = aclrtSwitchLabelByIndex(index, n as u32 + 1, list, head);
                self.expect("aclrtSwitchLabelByIndex", rc, INVALID_PARAM);
            }
            let rc = aclrtSwitchLabelByIndex(index, n as u32, list, head);
            self.expect("aclrtSwitchLabelByIndex", rc, OK);
            // Never runs: the switch carries on elsewhere.
            let rc = aclrtMemsetAsync(marker(7), 1, 0xEE, 1, head);
            self.expect("aclrtMemsetAsync", rc, OK);
            // Flaw 5: the last label is never set; a switch to it fails.
            let set = if flaw == 5 { n - 1 } else { n };
            for (k, &l) in labels.iter().enumerate().take(set) {
                if flaw == 4 && k == 0 {
                    self.expect("aclrtSetLabel", aclrtSetLabel(l, exec), STREAM_MODEL);
                }
                self.expect("aclrtSetLabel", aclrtSetLabel(l, on(k)), OK);
                if flaw == 4 && k == 0 {
                    self.expect("aclrtSetLabel", aclrtSetLabel(l, on(k)), INTERNAL_ERROR);
                }
                let rc = aclrtMemsetAsync(marker(k), 1, 0x10 + k as i32, 1, on(k));
                self.expect("aclrtMemsetAsync", rc, OK);
            }
            self.expect("aclmdlRIEndTask", aclmdlRIEndTask(m, head), OK);
            self.expect("aclmdlRIEndTask", aclmdlRIEndTask(m, second), OK);
            self.expect(
                "aclmdlRIBuildEnd",
                aclmdlRIBuildEnd(m, std::ptr::null_mut()),
                OK,
            );
            // The handles may go first: the model keeps what it uses.
            let early = flaw == 1;
            if early {
                self.destroy_labels(&labels, list);
            }
            for picked in [u32::from(a), u32::from(b)] {
                let rc = aclrtMemcpy(
                    out,
                    8,
                    [0u8; 8].as_ptr().cast(),
                    8,
                    ACL_MEMCPY_HOST_TO_DEVICE,
                );
                self.expect("aclrtMemcpy", rc, OK);
                let rc = aclrtMemcpy(
                    index,
                    4,
                    picked.to_le_bytes().as_ptr().cast(),
                    4,
                    ACL_MEMCPY_HOST_TO_DEVICE,
                );
                self.expect("aclrtMemcpy", rc, OK);
                self.expect("aclmdlRIExecuteAsync", aclmdlRIExecuteAsync(m, exec), OK);
                let p = (picked as usize).min(n - 1);
                let fails = p >= set;
                let rc = aclrtSynchronizeStream(exec);
                self.expect(
                    "aclrtSynchronizeStream",
                    rc,
                    if fails { INTERNAL_ERROR } else { OK },
                );
                let got = self.download(out, 8);
                let mut want = [0u8; 8];
                want[6] = 0x66;
                if !fails {
                    for k in (p..set).filter(|k| k % 2 == p % 2) {
                        want[k] = 0x10 + k as u8;
                    }
                }
                assert_eq!(got, want, "labels: {n}, picked {picked}");
            }
            self.expect("aclmdlRIDestroy", aclmdlRIDestroy(m), OK);
            if !early {
                self.destroy_labels(&labels, list);
            }
            for s in [head, second, exec] {
                self.expect("aclrtDestroyStream", aclrtDestroyStream(s), OK);
            }
        }
        self.free(out);
        self.free(index);
    }

    fn kernel_binary(&mut self, s: StreamPick, blocks: u8, flaw: u8) {
        let (blocks, flaw) = (u32::from(blocks % 9), flaw % 6);
        let Some(path) = kernel_binary() else {
            return;
        };
        let Some(seen) = self.device_buffer(BUFFER, &[0]) else {
            return;
        };
        let (handle, index) = self.pick(s);
        let want = if blocks > 0 && self.accepts(handle, index) {
            OK
        } else {
            INVALID_PARAM
        };
        if want == OK {
            self.touch_default(&[handle]);
        }
        // SAFETY (every call): a path, live handles of this op's (dead ones
        // once unloaded, which the library looks up), device memory and
        // valid out-pointers.
        unsafe {
            let mut bin = std::ptr::null_mut();
            let rc = aclrtBinaryLoadFromFile(path.as_ptr(), std::ptr::null_mut(), &mut bin);
            self.expect("aclrtBinaryLoadFromFile", rc, OK);
            let mut f = std::ptr::null_mut();
            if flaw == 1 {
                let rc = aclrtBinaryGetFunction(bin, c"missing".as_ptr(), &mut f);
                self.expect("aclrtBinaryGetFunction", rc, INVALID_PARAM);
            }
            let rc = aclrtBinaryGetFunction(bin, c"blocks".as_ptr(), &mut f);
            self.expect("aclrtBinaryGetFunction", rc, OK);
            let mut args = std::ptr::null_mut();
            self.expect("aclrtKernelArgsInit", aclrtKernelArgsInit(f, &mut args), OK);
            let mut pointer = seen;
            let mut param = std::ptr::null_mut();
            let rc = aclrtKernelArgsAppend(args, (&raw mut pointer).cast(), 8, &mut param);
            self.expect("aclrtKernelArgsAppend", rc, OK);
            self.expect("aclrtKernelArgsFinalize", aclrtKernelArgsFinalize(args), OK);
            let launch = |f, args| {
                aclrtLaunchKernelWithConfig(
                    f,
                    blocks,
                    handle as *mut c_void,
                    std::ptr::null_mut(),
                    args,
                    std::ptr::null_mut(),
                )
            };
            self.expect("aclrtLaunchKernelWithConfig", launch(f, args), want);
            let early = flaw == 2;
            if early {
                self.expect("aclrtBinaryUnLoad", aclrtBinaryUnLoad(bin), OK);
            }
            if want == OK {
                self.settle(handle, index);
                let words: Vec<u32> = self
                    .download(seen, BUFFER)
                    .chunks_exact(4)
                    .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
                    .collect();
                for (b, &w) in words.iter().enumerate() {
                    let b = b as u32;
                    let mark = if b < blocks { blocks * 1000 + b + 1 } else { 0 };
                    assert_eq!(w, mark, "block {b} of {blocks}");
                }
            }
            if !early {
                self.expect("aclrtBinaryUnLoad", aclrtBinaryUnLoad(bin), OK);
            }
            if flaw == 3 {
                self.expect(
                    "aclrtLaunchKernelWithConfig",
                    launch(f, args),
                    INVALID_PARAM,
                );
            }
            self.expect("aclrtBinaryUnLoad", aclrtBinaryUnLoad(bin), INVALID_PARAM);
        }
        self.free(seen);
    }

    fn destroy_labels(&mut self, labels: &[*mut c_void], list: *mut c_void) {
        // SAFETY: live handles of the op's, then dead ones, looked up.
        unsafe {
            self.expect("aclrtDestroyLabelList", aclrtDestroyLabelList(list), OK);
            self.expect(
                "aclrtDestroyLabelList",
                aclrtDestroyLabelList(list),
                INVALID_PARAM,
            );
            for &l in labels {
                self.expect("aclrtDestroyLabel", aclrtDestroyLabel(l), OK);
            }
            let rc = aclrtDestroyLabel(labels[0]);
            self.expect("aclrtDestroyLabel", rc, INVALID_PARAM);
        }
    }
}
