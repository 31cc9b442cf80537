//! Random sequences of C API calls against a model of what each must do.
//!
//! Each input is a list of calls on the exported functions, with NULL,
//! destroyed, forged and live descriptors, NULL and arbitrary streams, and
//! any mix of NULL out-parameters. A small model (maps of live descriptors
//! and registrations) predicts every return code, every output, the messages
//! `aclGetRecentErrMsg` must hold, and the library's live counts; any
//! difference, panic or sanitizer report is a finding. Every run ends by
//! destroying and unregistering what it made, so runs do not leak into each
//! other. A new export gets an `Op` variant and its rule in `Model::apply`.
#![no_main]

use aclalloc::ffi::cann::allocator::*;
use aclalloc::ffi::cann::errmsg::aclGetRecentErrMsg;
use aclalloc::ffi::cann::types::*;
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use std::collections::HashMap;
use std::ffi::{c_void, CStr};

const OK: aclError = 0;
const INVALID_PARAM: aclError = 100_000;
/// The error log keeps this many messages between reads (crates/aclalloc-core/src/base/errlog.rs).
const LOG_CAPACITY: usize = 16;

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Desc {
    Null,
    /// The n-th descriptor this run created (live or destroyed).
    Created(u8),
    /// Any value at all.
    Forged(u64),
    /// A forged value with the descriptor tag, near real ids.
    Tagged(u16),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Stream {
    Null,
    Small(u8),
    Raw(u64),
}

/// Which value a setter passes: `None` is NULL.
type Pick = Option<u8>;

#[derive(Arbitrary, Debug)]
enum Op {
    Create,
    Destroy(Desc),
    SetObj(Desc, Pick),
    SetAlloc(Desc, Pick),
    SetFree(Desc, Pick),
    SetAdvise(Desc, Pick),
    SetGetAddr(Desc, Pick),
    Register(Stream, Desc),
    /// Bit i set: out-parameter i is NULL.
    GetByStream(Stream, u8),
    Unregister(Stream),
    ReadMessages,
}

macro_rules! distinct_fns {
    ($($name:ident: fn($($arg:ident: $ty:ty),*) -> $ret:ty = $body:expr;)*) => {
        $(#[inline(never)] unsafe extern "C" fn $name($($arg: $ty),*) -> $ret { $(let _ = $arg;)* $body })*
    };
}
distinct_fns! {
    alloc0: fn(o: *mut c_void, s: usize) -> *mut c_void = std::ptr::without_provenance_mut(s);
    alloc1: fn(o: *mut c_void, s: usize) -> *mut c_void = std::ptr::without_provenance_mut(s + 1);
    alloc2: fn(o: *mut c_void, s: usize) -> *mut c_void = std::ptr::without_provenance_mut(s + 2);
    free0: fn(o: *mut c_void, b: *mut c_void) -> () = { std::hint::black_box(0); };
    free1: fn(o: *mut c_void, b: *mut c_void) -> () = { std::hint::black_box(1); };
    free2: fn(o: *mut c_void, b: *mut c_void) -> () = { std::hint::black_box(2); };
    advise0: fn(o: *mut c_void, s: usize, a: *mut c_void) -> *mut c_void = std::ptr::without_provenance_mut(s + 3);
    advise1: fn(o: *mut c_void, s: usize, a: *mut c_void) -> *mut c_void = std::ptr::without_provenance_mut(s + 4);
    advise2: fn(o: *mut c_void, s: usize, a: *mut c_void) -> *mut c_void = std::ptr::without_provenance_mut(s + 5);
    addr0: fn(b: *mut c_void) -> *mut c_void = std::ptr::without_provenance_mut(6);
    addr1: fn(b: *mut c_void) -> *mut c_void = std::ptr::without_provenance_mut(7);
    addr2: fn(b: *mut c_void) -> *mut c_void = std::ptr::without_provenance_mut(8);
}
type AllocF = unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void;
type FreeF = unsafe extern "C" fn(*mut c_void, *mut c_void);
type AdviseF = unsafe extern "C" fn(*mut c_void, usize, *mut c_void) -> *mut c_void;
type AddrF = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
const ALLOCS: [AllocF; 3] = [alloc0, alloc1, alloc2];
const FREES: [FreeF; 3] = [free0, free1, free2];
const ADVISES: [AdviseF; 3] = [advise0, advise1, advise2];
const ADDRS: [AddrF; 3] = [addr0, addr1, addr2];
static OBJECTS: [u64; 3] = [0; 3];

fn object(i: u8) -> *mut c_void {
    &OBJECTS[i as usize % 3] as *const u64 as *mut c_void
}

/// A descriptor's fields, as addresses (0 is unset).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Fields {
    obj: usize,
    alloc: usize,
    free: usize,
    advise: usize,
    get_addr: usize,
}

#[derive(Default)]
struct Model {
    /// Every descriptor this run created, in order.
    created: Vec<usize>,
    live: HashMap<usize, Fields>,
    /// Stream → (descriptor, the fields it had when registered).
    streams: HashMap<usize, (usize, Fields)>,
    /// Functions that failed since the last read, oldest first.
    failed: Vec<&'static str>,
    baseline: (usize, usize),
}

impl Model {
    fn desc(&self, d: Desc) -> usize {
        match d {
            Desc::Null => 0,
            Desc::Created(i) if self.created.is_empty() => i as usize,
            Desc::Created(i) => self.created[i as usize % self.created.len()],
            Desc::Forged(v) => v as usize,
            Desc::Tagged(id) => (0xACA1usize << 48) | id as usize,
        }
    }

    fn stream(s: Stream) -> usize {
        match s {
            Stream::Null => 0,
            Stream::Small(i) => 0x1000 + (i as usize % 8) * 64,
            Stream::Raw(v) => v as usize,
        }
    }

    /// Checks a call's code against the model's prediction (`Err` names the
    /// failing function).
    fn expect(&mut self, function: &'static str, got: aclError, want: Result<(), ()>) {
        match want {
            Ok(()) => assert_eq!(got, OK, "{function} should succeed"),
            Err(()) => {
                assert_eq!(got, INVALID_PARAM, "{function} should fail");
                self.failed.push(function);
            }
        }
    }

    /// A setter: NULL descriptor, then NULL value, then a dead descriptor.
    fn set(
        &mut self,
        function: &'static str,
        d: Desc,
        value: usize,
        call: impl FnOnce(*mut c_void) -> aclError,
        field: impl FnOnce(&mut Fields) -> &mut usize,
    ) {
        let handle = self.desc(d);
        let got = call(handle as *mut c_void);
        let want = if handle == 0 || value == 0 {
            Err(())
        } else if let Some(fields) = self.live.get_mut(&handle) {
            *field(fields) = value;
            Ok(())
        } else {
            Err(())
        };
        self.expect(function, got, want);
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Create => {
                let d = aclrtAllocatorCreateDesc() as usize;
                assert_ne!(d, 0);
                assert!(
                    !self.live.contains_key(&d) && !self.created.contains(&d),
                    "handle reused"
                );
                self.created.push(d);
                self.live.insert(d, Fields::default());
            }
            Op::Destroy(d) => {
                let handle = self.desc(d);
                let got = aclrtAllocatorDestroyDesc(handle as *mut c_void);
                let want = self.live.remove(&handle).map(drop).ok_or(());
                self.expect("aclrtAllocatorDestroyDesc", got, want);
            }
            Op::SetObj(d, pick) => {
                let value = pick.map_or(std::ptr::null_mut(), object);
                self.set(
                    "aclrtAllocatorSetObjToDesc",
                    d,
                    value as usize,
                    |h| aclrtAllocatorSetObjToDesc(h, value),
                    |f| &mut f.obj,
                );
            }
            Op::SetAlloc(d, pick) => {
                let value = pick.map(|i| ALLOCS[i as usize % 3]);
                self.set(
                    "aclrtAllocatorSetAllocFuncToDesc",
                    d,
                    value.map_or(0, |f| f as usize),
                    |h| aclrtAllocatorSetAllocFuncToDesc(h, value),
                    |f| &mut f.alloc,
                );
            }
            Op::SetFree(d, pick) => {
                let value = pick.map(|i| FREES[i as usize % 3]);
                self.set(
                    "aclrtAllocatorSetFreeFuncToDesc",
                    d,
                    value.map_or(0, |f| f as usize),
                    |h| aclrtAllocatorSetFreeFuncToDesc(h, value),
                    |f| &mut f.free,
                );
            }
            Op::SetAdvise(d, pick) => {
                let value = pick.map(|i| ADVISES[i as usize % 3]);
                self.set(
                    "aclrtAllocatorSetAllocAdviseFuncToDesc",
                    d,
                    value.map_or(0, |f| f as usize),
                    |h| aclrtAllocatorSetAllocAdviseFuncToDesc(h, value),
                    |f| &mut f.advise,
                );
            }
            Op::SetGetAddr(d, pick) => {
                let value = pick.map(|i| ADDRS[i as usize % 3]);
                self.set(
                    "aclrtAllocatorSetGetAddrFromBlockFuncToDesc",
                    d,
                    value.map_or(0, |f| f as usize),
                    |h| aclrtAllocatorSetGetAddrFromBlockFuncToDesc(h, value),
                    |f| &mut f.get_addr,
                );
            }
            Op::Register(s, d) => {
                let (stream, handle) = (Self::stream(s), self.desc(d));
                let got = aclrtAllocatorRegister(stream as *mut c_void, handle as *mut c_void);
                let want = match self.live.get(&handle) {
                    Some(f)
                        if stream != 0
                            && f.obj != 0
                            && f.alloc != 0
                            && f.free != 0
                            && f.get_addr != 0 =>
                    {
                        self.streams.insert(stream, (handle, *f));
                        Ok(())
                    }
                    _ => Err(()),
                };
                self.expect("aclrtAllocatorRegister", got, want);
            }
            Op::GetByStream(s, nulls) => self.get_by_stream(Self::stream(s), nulls),
            Op::Unregister(s) => {
                let stream = Self::stream(s);
                let got = aclrtAllocatorUnregister(stream as *mut c_void);
                self.streams.remove(&stream);
                self.expect(
                    "aclrtAllocatorUnregister",
                    got,
                    if stream == 0 { Err(()) } else { Ok(()) },
                );
            }
            Op::ReadMessages => self.read_messages(),
        }
        let (descriptors, streams) = self.baseline;
        assert_eq!(
            aclalloc::global().live_descriptors(),
            descriptors + self.live.len(),
            "descriptor count"
        );
        assert_eq!(
            aclalloc::global().streams().len(),
            streams + self.streams.len(),
            "registration count"
        );
    }

    fn get_by_stream(&mut self, stream: usize, nulls: u8) {
        const SENTINEL: usize = 0x5A5A_5A5A;
        let mut desc = SENTINEL as *mut c_void;
        let mut obj = SENTINEL as *mut c_void;
        let mut alloc: aclrtAllocatorAllocFunc = Some(alloc0);
        let mut free: aclrtAllocatorFreeFunc = Some(free0);
        let mut advise: aclrtAllocatorAllocAdviseFunc = Some(advise0);
        let mut get_addr: aclrtAllocatorGetAddrFromBlockFunc = Some(addr0);
        fn out<T>(place: &mut T, null: bool) -> *mut T {
            if null {
                std::ptr::null_mut()
            } else {
                place
            }
        }
        let null = |i: u8| nulls & (1 << i) != 0;
        // SAFETY: each out-parameter is NULL or points at a local of its type.
        let got = unsafe {
            aclrtAllocatorGetByStream(
                stream as *mut c_void,
                out(&mut desc, null(0)),
                out(&mut obj, null(1)),
                out(&mut alloc, null(2)),
                out(&mut free, null(3)),
                out(&mut advise, null(4)),
                out(&mut get_addr, null(5)),
            )
        };
        let fnaddr = |p: Option<usize>| p.unwrap_or(0);
        let found = if null(0) || stream == 0 {
            None
        } else {
            self.streams.get(&stream).copied()
        };
        match found {
            Some((handle, f)) => {
                self.expect("aclrtAllocatorGetByStream", got, Ok(()));
                let pick = |i: u8, real: usize, want: usize, sentinel: usize| {
                    assert_eq!(
                        real,
                        if null(i) { sentinel } else { want },
                        "GetByStream output {i}"
                    );
                };
                pick(0, desc as usize, handle, SENTINEL);
                pick(1, obj as usize, f.obj, SENTINEL);
                pick(
                    2,
                    fnaddr(alloc.map(|p| p as usize)),
                    f.alloc,
                    (alloc0 as AllocF) as usize,
                );
                pick(
                    3,
                    fnaddr(free.map(|p| p as usize)),
                    f.free,
                    (free0 as FreeF) as usize,
                );
                pick(
                    4,
                    fnaddr(advise.map(|p| p as usize)),
                    f.advise,
                    (advise0 as AdviseF) as usize,
                );
                pick(
                    5,
                    fnaddr(get_addr.map(|p| p as usize)),
                    f.get_addr,
                    (addr0 as AddrF) as usize,
                );
            }
            None => {
                self.expect("aclrtAllocatorGetByStream", got, Err(()));
                assert_eq!(
                    (desc as usize, obj as usize),
                    (SENTINEL, SENTINEL),
                    "written on failure"
                );
                assert_eq!(
                    fnaddr(alloc.map(|p| p as usize)),
                    (alloc0 as AllocF) as usize
                );
                assert_eq!(fnaddr(free.map(|p| p as usize)), (free0 as FreeF) as usize);
                assert_eq!(
                    fnaddr(advise.map(|p| p as usize)),
                    (advise0 as AdviseF) as usize
                );
                assert_eq!(
                    fnaddr(get_addr.map(|p| p as usize)),
                    (addr0 as AddrF) as usize
                );
            }
        }
    }

    /// The messages are exactly the failures since the last read, newest
    /// first, at most LOG_CAPACITY of them plus a line counting the rest.
    fn read_messages(&mut self) {
        let text = aclGetRecentErrMsg();
        let failed = std::mem::take(&mut self.failed);
        if failed.is_empty() {
            assert!(text.is_null(), "a message without a failure");
            return;
        }
        assert!(!text.is_null(), "{} failures left no message", failed.len());
        // SAFETY: a NUL-terminated string, valid until this thread's next read.
        let text = unsafe { CStr::from_ptr(text) }.to_str().expect("UTF-8");
        let lines: Vec<&str> = text.lines().collect();
        let kept = failed.len().min(LOG_CAPACITY);
        assert_eq!(
            lines.len(),
            kept + usize::from(failed.len() > LOG_CAPACITY),
            "{text}"
        );
        if failed.len() > LOG_CAPACITY {
            let note = format!(
                "({} earlier failures were not kept)",
                failed.len() - LOG_CAPACITY
            );
            assert_eq!(lines[kept], note);
        }
        for (line, function) in lines[..kept].iter().zip(failed.iter().rev()) {
            assert!(
                line.starts_with(&format!("{function} failed")) && line.ends_with('.'),
                "message {line:?} is not from {function}"
            );
        }
    }

    /// Leaves the library as the run found it.
    fn clean_up(&mut self) {
        for (&d, _) in self.live.iter() {
            assert_eq!(aclrtAllocatorDestroyDesc(d as *mut c_void), OK);
        }
        for (&s, _) in self.streams.iter() {
            assert_eq!(aclrtAllocatorUnregister(s as *mut c_void), OK);
        }
        self.live.clear();
        self.streams.clear();
        self.read_messages();
        assert_eq!(
            (
                aclalloc::global().live_descriptors(),
                aclalloc::global().streams().len()
            ),
            self.baseline,
            "a run leaked"
        );
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let _ = aclGetRecentErrMsg();
    let mut model = Model {
        baseline: (
            aclalloc::global().live_descriptors(),
            aclalloc::global().streams().len(),
        ),
        ..Model::default()
    };
    for op in &ops {
        model.apply(op);
    }
    model.clean_up();
});
