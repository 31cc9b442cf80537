//! Every exported function under bad input, table-driven.
//!
//! Each case calls one export with one bad argument (NULL for each pointer
//! parameter; destroyed, never-created, foreign-kind and garbage handles; a
//! stack address that must not be written) and checks:
//! - the return code,
//! - the exact message `aclGetRecentErrMsg` then returns (and that it is NULL
//!   after a success),
//! - that nothing was written through any pointer the case passed (sentinels),
//! - that no descriptor or registration changed or leaked (the live counts and
//!   the descriptors' contents are back to what they were).
//!
//! Extending it: a new export taking a descriptor goes into
//! [`DESCRIPTOR_FUNCTIONS`], one taking a stream, context, pool or device
//! pointer into [`HANDLE_FUNCTIONS`] (one line each); a new kind of handle
//! adds a [`Kind`] and how to make a dead one in [`dead_handle`]; other cases
//! are pushed in [`all_cases`], including zero / huge sizes and out-of-range
//! ids and enums as functions that take them are added here.

use aclalloc::ffi::cann::allocator::*;
use aclalloc::ffi::cann::errmsg::aclGetRecentErrMsg;
use aclalloc::ffi::cann::types::*;
use aclalloc::global;
use std::ffi::{c_void, CStr};
use std::sync::Mutex;

const OK: aclError = 0;
const INVALID_PARAM: aclError = 100_000;

/// The tests in this file share the process-wide registry and compare its
/// counts, so they run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn recent_message() -> Option<String> {
    let text = aclGetRecentErrMsg();
    // SAFETY: a non-NULL result is a NUL-terminated string that stays valid
    // until this thread's next call.
    (!text.is_null()).then(|| {
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    })
}

// Callbacks. Distinct bodies so that no two share an address.

#[inline(never)]
unsafe extern "C" fn alloc_fn(_: aclrtAllocator, size: usize) -> *mut c_void {
    size as *mut c_void
}
#[inline(never)]
unsafe extern "C" fn free_fn(_: aclrtAllocator, _: aclrtAllocatorBlock) {}
#[inline(never)]
unsafe extern "C" fn advise_fn(
    _: aclrtAllocator,
    size: usize,
    _: aclrtAllocatorAddr,
) -> *mut c_void {
    (size + 1) as *mut c_void
}
#[inline(never)]
unsafe extern "C" fn get_addr_fn(block: aclrtAllocatorBlock) -> *mut c_void {
    block
}
// What out-parameters hold before a call: any write shows.
#[inline(never)]
unsafe extern "C" fn sentinel_alloc(_: aclrtAllocator, _: usize) -> *mut c_void {
    0x5e47 as *mut c_void
}
#[inline(never)]
unsafe extern "C" fn sentinel_free(_: aclrtAllocator, _: aclrtAllocatorBlock) {
    std::hint::black_box(1);
}
#[inline(never)]
unsafe extern "C" fn sentinel_advise(
    _: aclrtAllocator,
    _: usize,
    _: aclrtAllocatorAddr,
) -> *mut c_void {
    0x5e48 as *mut c_void
}
#[inline(never)]
unsafe extern "C" fn sentinel_get_addr(_: aclrtAllocatorBlock) -> *mut c_void {
    0x5e49 as *mut c_void
}

const SENTINEL: usize = 0x5A5A_5A5A_5A5A_5A5A;
const GUARD: u64 = 0xDEAD_BEEF_CAFE_F00D;

static OBJECT: u8 = 0;

/// Descriptors and streams in every state a case may need; torn down after it.
struct Fixture {
    /// Complete: object and all callbacks set.
    complete: aclrtAllocatorDesc,
    /// Fresh from `aclrtAllocatorCreateDesc`.
    empty: aclrtAllocatorDesc,
    /// Created, completed, registered on `orphaned`, then destroyed.
    destroyed: aclrtAllocatorDesc,
    /// Registered with `complete`.
    registered: aclrtStream,
    /// Registered with `destroyed` before it was destroyed.
    orphaned: aclrtStream,
    /// Registered with `complete`, then unregistered.
    unregistered: aclrtStream,
    /// Never registered.
    fresh: aclrtStream,
}

fn complete(desc: aclrtAllocatorDesc) {
    assert_eq!(aclrtAllocatorSetObjToDesc(desc, object()), OK);
    assert_eq!(aclrtAllocatorSetAllocFuncToDesc(desc, Some(alloc_fn)), OK);
    assert_eq!(aclrtAllocatorSetFreeFuncToDesc(desc, Some(free_fn)), OK);
    assert_eq!(
        aclrtAllocatorSetAllocAdviseFuncToDesc(desc, Some(advise_fn)),
        OK
    );
    assert_eq!(
        aclrtAllocatorSetGetAddrFromBlockFuncToDesc(desc, Some(get_addr_fn)),
        OK
    );
}

fn object() -> aclrtAllocator {
    &OBJECT as *const u8 as aclrtAllocator
}

fn stream(n: usize) -> aclrtStream {
    (0x7_0000_0000usize + n * 64) as aclrtStream
}

impl Fixture {
    fn new() -> Self {
        let complete_desc = aclrtAllocatorCreateDesc();
        complete(complete_desc);
        let empty = aclrtAllocatorCreateDesc();
        let destroyed = aclrtAllocatorCreateDesc();
        complete(destroyed);
        let f = Fixture {
            complete: complete_desc,
            empty,
            destroyed,
            registered: stream(1),
            orphaned: stream(2),
            unregistered: stream(3),
            fresh: stream(4),
        };
        assert_eq!(aclrtAllocatorRegister(f.registered, f.complete), OK);
        assert_eq!(aclrtAllocatorRegister(f.orphaned, f.destroyed), OK);
        assert_eq!(aclrtAllocatorDestroyDesc(f.destroyed), OK);
        assert_eq!(aclrtAllocatorRegister(f.unregistered, f.complete), OK);
        assert_eq!(aclrtAllocatorUnregister(f.unregistered), OK);
        assert!(!f.complete.is_null() && !f.empty.is_null());
        assert_eq!(recent_message(), None, "the fixture itself must not fail");
        f
    }

    /// What the registry and the fixture's descriptors hold, to compare
    /// before and after a case.
    fn snapshot(&self) -> String {
        let api = global();
        let desc = |d: aclrtAllocatorDesc| {
            aclalloc::DescriptorHandle::from_ptr(d).map(|h| format!("{:?}", api.descriptor(h)))
        };
        let mut streams = api.streams().entries();
        streams.sort_by_key(|(k, _)| *k);
        format!(
            "{:?} {:?} {:?} {} {:?}",
            desc(self.complete),
            desc(self.empty),
            desc(self.destroyed),
            api.live_descriptors(),
            streams
        )
    }

    fn tear_down(self) {
        for desc in [self.complete, self.empty] {
            // A case may have destroyed it already.
            let _ = aclrtAllocatorDestroyDesc(desc);
        }
        for s in [
            self.registered,
            self.orphaned,
            self.unregistered,
            self.fresh,
        ] {
            assert_eq!(aclrtAllocatorUnregister(s), OK);
        }
        let _ = recent_message();
    }
}

/// What a case may write to, prefilled so that any write shows.
struct Outputs {
    /// Passed where a handle is expected: the address of a local.
    guard: u64,
    desc: aclrtAllocatorDesc,
    obj: aclrtAllocator,
    alloc: aclrtAllocatorAllocFunc,
    free: aclrtAllocatorFreeFunc,
    advise: aclrtAllocatorAllocAdviseFunc,
    get_addr: aclrtAllocatorGetAddrFromBlockFunc,
}

impl Outputs {
    fn new() -> Self {
        Outputs {
            guard: GUARD,
            desc: SENTINEL as aclrtAllocatorDesc,
            obj: SENTINEL as aclrtAllocator,
            alloc: Some(sentinel_alloc),
            free: Some(sentinel_free),
            advise: Some(sentinel_advise),
            get_addr: Some(sentinel_get_addr),
        }
    }

    fn untouched(&self) -> bool {
        let f = |p: Option<*const ()>| p.map(|p| p as usize);
        self.guard == GUARD
            && self.desc as usize == SENTINEL
            && self.obj as usize == SENTINEL
            && f(self.alloc.map(|p| p as *const ())) == Some(sentinel_alloc as *const () as usize)
            && f(self.free.map(|p| p as *const ())) == Some(sentinel_free as *const () as usize)
            && f(self.advise.map(|p| p as *const ())) == Some(sentinel_advise as *const () as usize)
            && f(self.get_addr.map(|p| p as *const ()))
                == Some(sentinel_get_addr as *const () as usize)
    }

    /// `aclrtAllocatorGetByStream` with every out-parameter pointing here.
    fn get_by_stream(&mut self, stream: aclrtStream) -> aclError {
        // SAFETY: every out-parameter points at a field of the right type.
        unsafe {
            aclrtAllocatorGetByStream(
                stream,
                &mut self.desc,
                &mut self.obj,
                &mut self.alloc,
                &mut self.free,
                &mut self.advise,
                &mut self.get_addr,
            )
        }
    }
}

/// A bad descriptor handle.
#[derive(Clone, Copy, Debug)]
enum BadHandle {
    Null,
    Destroyed,
    /// Carries the descriptor tag but was never handed out.
    NeverCreated,
    /// Another kind's tag (a pool's, say) with a small id.
    ForeignKind,
    /// The address of a local: must not be read as a descriptor or written.
    StackAddress,
    /// A stream handle passed where a descriptor goes.
    AStream,
    One,
    AllOnes,
}

const BAD_HANDLES: &[BadHandle] = &[
    BadHandle::Null,
    BadHandle::Destroyed,
    BadHandle::NeverCreated,
    BadHandle::ForeignKind,
    BadHandle::StackAddress,
    BadHandle::AStream,
    BadHandle::One,
    BadHandle::AllOnes,
];

impl BadHandle {
    fn value(self, f: &Fixture, out: &mut Outputs) -> aclrtAllocatorDesc {
        match self {
            BadHandle::Null => std::ptr::null_mut(),
            BadHandle::Destroyed => f.destroyed,
            BadHandle::NeverCreated => ((0xACA1usize << 48) | (1 << 40)) as aclrtAllocatorDesc,
            BadHandle::ForeignKind => ((0xACA2usize << 48) | 1) as aclrtAllocatorDesc,
            BadHandle::StackAddress => &mut out.guard as *mut u64 as aclrtAllocatorDesc,
            BadHandle::AStream => f.registered,
            BadHandle::One => 1 as aclrtAllocatorDesc,
            BadHandle::AllOnes => usize::MAX as aclrtAllocatorDesc,
        }
    }

    fn message(self, function: &str) -> String {
        match self {
            BadHandle::Null => {
                format!("{function} failed because allocatorDesc cannot be a NULL pointer.")
            }
            _ => format!(
                "{function} failed. Parameter allocatorDesc is invalid. Reason: It is not a live \
                 allocator descriptor (it was destroyed, or was never returned by \
                 aclrtAllocatorCreateDesc)."
            ),
        }
    }
}

type DescriptorCall = fn(&Fixture, aclrtAllocatorDesc) -> aclError;

/// Every export that takes a descriptor, called with `desc` and otherwise
/// valid arguments.
const DESCRIPTOR_FUNCTIONS: &[(&str, DescriptorCall)] = &[
    ("aclrtAllocatorDestroyDesc", |_, d| {
        aclrtAllocatorDestroyDesc(d)
    }),
    ("aclrtAllocatorSetObjToDesc", |_, d| {
        aclrtAllocatorSetObjToDesc(d, object())
    }),
    ("aclrtAllocatorSetAllocFuncToDesc", |_, d| {
        aclrtAllocatorSetAllocFuncToDesc(d, Some(alloc_fn))
    }),
    ("aclrtAllocatorSetFreeFuncToDesc", |_, d| {
        aclrtAllocatorSetFreeFuncToDesc(d, Some(free_fn))
    }),
    ("aclrtAllocatorSetAllocAdviseFuncToDesc", |_, d| {
        aclrtAllocatorSetAllocAdviseFuncToDesc(d, Some(advise_fn))
    }),
    ("aclrtAllocatorSetGetAddrFromBlockFuncToDesc", |_, d| {
        aclrtAllocatorSetGetAddrFromBlockFuncToDesc(d, Some(get_addr_fn))
    }),
    ("aclrtAllocatorRegister", |f, d| {
        aclrtAllocatorRegister(f.fresh, d)
    }),
];

type Run = Box<dyn Fn(&Fixture, &mut Outputs) -> aclError>;
type After = Box<dyn Fn(&Fixture, &Outputs)>;

struct Case {
    name: String,
    code: aclError,
    /// The exact text `aclGetRecentErrMsg` returns after the call.
    message: Option<String>,
    run: Run,
    /// For successes: what must hold afterwards (outputs written, state changed).
    after: Option<After>,
}

fn fails(name: impl Into<String>, message: String, run: Run) -> Case {
    Case {
        name: name.into(),
        code: INVALID_PARAM,
        message: Some(message),
        run,
        after: None,
    }
}

fn succeeds(
    name: impl Into<String>,
    run: Run,
    after: impl Fn(&Fixture, &Outputs) + 'static,
) -> Case {
    Case {
        name: name.into(),
        code: OK,
        message: None,
        run,
        after: Some(Box::new(after)),
    }
}

fn null_param(function: &str, param: &str) -> String {
    format!("{function} failed because {param} cannot be a NULL pointer.")
}

fn all_cases() -> Vec<Case> {
    let mut cases = Vec::new();

    // Every descriptor-taking function with every bad descriptor.
    for &(function, call) in DESCRIPTOR_FUNCTIONS {
        for &bad in BAD_HANDLES {
            cases.push(fails(
                format!("{function}: {bad:?} descriptor"),
                bad.message(function),
                Box::new(move |f, out| {
                    let desc = bad.value(f, out);
                    call(f, desc)
                }),
            ));
        }
    }

    // NULL for each setter's value.
    type Setter = fn(aclrtAllocatorDesc) -> aclError;
    let setters: [(&str, &str, Setter); 5] = [
        ("aclrtAllocatorSetObjToDesc", "allocator", |d| {
            aclrtAllocatorSetObjToDesc(d, std::ptr::null_mut())
        }),
        ("aclrtAllocatorSetAllocFuncToDesc", "func", |d| {
            aclrtAllocatorSetAllocFuncToDesc(d, None)
        }),
        ("aclrtAllocatorSetFreeFuncToDesc", "func", |d| {
            aclrtAllocatorSetFreeFuncToDesc(d, None)
        }),
        ("aclrtAllocatorSetAllocAdviseFuncToDesc", "func", |d| {
            aclrtAllocatorSetAllocAdviseFuncToDesc(d, None)
        }),
        ("aclrtAllocatorSetGetAddrFromBlockFuncToDesc", "func", |d| {
            aclrtAllocatorSetGetAddrFromBlockFuncToDesc(d, None)
        }),
    ];
    for (function, param, set) in setters {
        // The snapshot check proves a refused NULL does not clear the field.
        cases.push(fails(
            format!("{function}: NULL {param} on a complete descriptor"),
            null_param(function, param),
            Box::new(move |f, _| set(f.complete)),
        ));
        // Both arguments bad: the descriptor is reported, once.
        cases.push(fails(
            format!("{function}: NULL descriptor and NULL {param}"),
            null_param(function, "allocatorDesc"),
            Box::new(move |_, _| set(std::ptr::null_mut())),
        ));
    }

    // Registration.
    let register = "aclrtAllocatorRegister";
    cases.push(fails(
        "aclrtAllocatorRegister: NULL stream",
        null_param(register, "stream"),
        Box::new(|f, _| aclrtAllocatorRegister(std::ptr::null_mut(), f.complete)),
    ));
    cases.push(fails(
        "aclrtAllocatorRegister: NULL stream and NULL descriptor",
        null_param(register, "stream"),
        Box::new(|_, _| aclrtAllocatorRegister(std::ptr::null_mut(), std::ptr::null_mut())),
    ));
    type Fill = fn(aclrtAllocatorDesc);
    let partial: [(&str, Fill); 4] = [
        ("allocatorDesc->obj", |_| {}),
        ("allocatorDesc->allocFunc", |d| {
            aclrtAllocatorSetObjToDesc(d, object());
        }),
        ("allocatorDesc->freeFunc", |d| {
            aclrtAllocatorSetObjToDesc(d, object());
            aclrtAllocatorSetAllocFuncToDesc(d, Some(alloc_fn));
        }),
        ("allocatorDesc->getAddrFromBlockFunc", |d| {
            aclrtAllocatorSetObjToDesc(d, object());
            aclrtAllocatorSetAllocFuncToDesc(d, Some(alloc_fn));
            aclrtAllocatorSetFreeFuncToDesc(d, Some(free_fn));
            aclrtAllocatorSetAllocAdviseFuncToDesc(d, Some(advise_fn));
        }),
    ];
    for (missing, fill) in partial {
        // The descriptor is made and destroyed inside the run (destroying it
        // succeeds and leaves no message), so the runner's snapshot and count
        // checks prove the refused registration left nothing behind.
        cases.push(fails(
            format!("aclrtAllocatorRegister: descriptor without {missing}"),
            null_param(register, missing),
            Box::new(move |f, _| {
                let d = aclrtAllocatorCreateDesc();
                fill(d);
                let code = aclrtAllocatorRegister(f.fresh, d);
                assert_eq!(aclrtAllocatorDestroyDesc(d), OK);
                code
            }),
        ));
    }

    // Look-up: NULL for the required out-parameter, NULL or unknown streams.
    let get = "aclrtAllocatorGetByStream";
    cases.push(fails(
        "aclrtAllocatorGetByStream: NULL allocatorDesc",
        null_param(get, "allocatorDesc"),
        Box::new(|f, out| unsafe {
            aclrtAllocatorGetByStream(
                f.registered,
                std::ptr::null_mut(),
                &mut out.obj,
                &mut out.alloc,
                &mut out.free,
                &mut out.advise,
                &mut out.get_addr,
            )
        }),
    ));
    cases.push(fails(
        "aclrtAllocatorGetByStream: NULL allocatorDesc and NULL stream",
        null_param(get, "allocatorDesc"),
        Box::new(|_, out| unsafe {
            aclrtAllocatorGetByStream(
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &mut out.obj,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        }),
    ));
    cases.push(fails(
        "aclrtAllocatorGetByStream: NULL stream",
        null_param(get, "stream"),
        Box::new(|_, out| out.get_by_stream(std::ptr::null_mut())),
    ));
    let not_registered = format!(
        "{get} failed. Parameter stream is invalid. Reason: The stream is not registered with any allocator."
    );
    for (what, pick) in [
        (
            "a never-registered stream",
            (|f: &Fixture| f.fresh) as fn(&Fixture) -> aclrtStream,
        ),
        ("an unregistered stream", |f| f.unregistered),
        ("a descriptor handle as stream", |f| f.complete),
        ("a garbage stream (all ones)", |_| usize::MAX as aclrtStream),
    ] {
        cases.push(fails(
            format!("{get}: {what}"),
            not_registered.clone(),
            Box::new(move |f, out| out.get_by_stream(pick(f))),
        ));
    }
    cases.push(fails(
        "aclrtAllocatorGetByStream: the stack address of a local as stream",
        not_registered.clone(),
        Box::new(|_, out| {
            let stream = &mut out.guard as *mut u64 as aclrtStream;
            // SAFETY: the other out-parameters point at locals of their type.
            let mut desc = SENTINEL as aclrtAllocatorDesc;
            let code = unsafe {
                aclrtAllocatorGetByStream(
                    stream,
                    &mut desc,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            };
            assert_eq!(desc as usize, SENTINEL);
            code
        }),
    ));
    // Not failures, but the edges of the same contract.
    cases.push(succeeds(
        "aclrtAllocatorGetByStream: every optional out-parameter NULL",
        Box::new(|f, out| unsafe {
            aclrtAllocatorGetByStream(
                f.registered,
                &mut out.desc,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        }),
        |f, out| {
            assert_eq!(out.desc, f.complete);
            assert_eq!(out.obj as usize, SENTINEL, "a NULL-free out was written");
        },
    ));
    cases.push(succeeds(
        "aclrtAllocatorGetByStream: a stream whose descriptor was destroyed",
        Box::new(|f, out| out.get_by_stream(f.orphaned)),
        |f, out| {
            assert_eq!(
                out.desc, f.destroyed,
                "the registration outlives its descriptor"
            );
            assert_eq!(out.obj, object());
            assert_eq!(
                out.alloc.map(|p| p as usize),
                Some(alloc_fn as *const () as usize)
            );
            assert_eq!(
                out.get_addr.map(|p| p as usize),
                Some(get_addr_fn as *const () as usize)
            );
        },
    ));

    // Unregistration.
    cases.push(fails(
        "aclrtAllocatorUnregister: NULL stream",
        null_param("aclrtAllocatorUnregister", "stream"),
        Box::new(|_, _| aclrtAllocatorUnregister(std::ptr::null_mut())),
    ));
    for (what, pick) in [
        (
            "a never-registered stream",
            (|f: &Fixture| f.fresh) as fn(&Fixture) -> aclrtStream,
        ),
        ("an already unregistered stream", |f| f.unregistered),
        ("a descriptor handle as stream", |f| f.complete),
    ] {
        cases.push(succeeds(
            format!("aclrtAllocatorUnregister: {what} (a no-op)"),
            Box::new(move |f, _| aclrtAllocatorUnregister(pick(f))),
            |f, out| {
                let mut check = Outputs::new();
                assert_eq!(
                    check.get_by_stream(f.registered),
                    OK,
                    "others stay registered"
                );
                assert!(out.untouched());
            },
        ));
    }

    // Sequences that leave a handle dead.
    cases.push(fails(
        "aclrtAllocatorDestroyDesc: twice",
        BadHandle::Destroyed.message("aclrtAllocatorDestroyDesc"),
        Box::new(|_, _| {
            let d = aclrtAllocatorCreateDesc();
            assert_eq!(aclrtAllocatorDestroyDesc(d), OK);
            aclrtAllocatorDestroyDesc(d)
        }),
    ));
    cases.push(fails(
        "aclrtAllocatorRegister: a descriptor destroyed after completing it",
        BadHandle::Destroyed.message("aclrtAllocatorRegister"),
        Box::new(|f, _| {
            let d = aclrtAllocatorCreateDesc();
            complete(d);
            assert_eq!(aclrtAllocatorDestroyDesc(d), OK);
            aclrtAllocatorRegister(f.fresh, d)
        }),
    ));

    // Sleep and wake: a NULL tag list with a count.
    cases.push(fails(
        "aclallocSleep: NULL offloadTags, count 1",
        null_param("aclallocSleep", "offloadTags"),
        Box::new(|_, _| unsafe { aclalloc::ffi::ext::pool::aclallocSleep(std::ptr::null(), 1) }),
    ));
    cases.push(fails(
        "aclallocWakeUp: NULL tags, count 1",
        null_param("aclallocWakeUp", "tags"),
        Box::new(|_, _| unsafe { aclalloc::ffi::ext::pool::aclallocWakeUp(std::ptr::null(), 1) }),
    ));

    // aclGetRecentErrMsg after a success: NULL (checked by the runner), and
    // CreateDesc has no inputs to get wrong; its leaks are covered by every
    // case's count check.
    cases
}

fn run_case(case: &Case) {
    let _ = recent_message();
    let baseline = (global().live_descriptors(), global().streams().len());
    let fixture = Fixture::new();
    let mut out = Outputs::new();
    let before = fixture.snapshot();

    let code = (case.run)(&fixture, &mut out);
    let message = recent_message();

    assert_eq!(code, case.code, "{}: return code", case.name);
    assert_eq!(message, case.message, "{}: aclGetRecentErrMsg", case.name);
    assert_eq!(
        recent_message(),
        None,
        "{}: reading clears the messages",
        case.name
    );
    match &case.after {
        None => {
            assert!(
                out.untouched(),
                "{}: wrote through a pointer on failure",
                case.name
            );
            assert_eq!(
                fixture.snapshot(),
                before,
                "{}: a failed call changed state",
                case.name
            );
        }
        Some(after) => after(&fixture, &out),
    }
    assert_eq!(out.guard, GUARD, "{}: wrote to a non-handle", case.name);

    fixture.tear_down();
    assert_eq!(
        (global().live_descriptors(), global().streams().len()),
        baseline,
        "{}: leaked a descriptor or a registration",
        case.name
    );
}

#[test]
fn every_export_refuses_bad_input_cleanly() {
    let _serial = serial();
    let cases = all_cases();
    for case in &cases {
        run_case(case);
    }
    println!("bad input: {} cases passed", cases.len());
    assert!(cases.len() >= 80, "the table lost cases: {}", cases.len());
}

// Callbacks that misbehave.
//
// The core stores callbacks and hands them back; it never calls one, so what
// it must guarantee is that registering and looking them up does not depend
// on how they behave, and that a callback may call back into the API (from
// whatever thread a runtime runs it on) without deadlock. The runtime's launch
// path (`aclallocLaunchKernel`) is what calls alloc and getAddrFromBlock:
// `misbehaving_callbacks_fail_the_launch_not_the_process` runs every entry of
// MISBEHAVING through it.

#[inline(never)]
unsafe extern "C" fn alloc_returns_null(_: aclrtAllocator, _: usize) -> *mut c_void {
    std::ptr::null_mut()
}
#[inline(never)]
unsafe extern "C" fn get_addr_returns_null(_: aclrtAllocatorBlock) -> *mut c_void {
    std::ptr::null_mut()
}

/// The stream the re-entrant callback serves: a fake one for the registry
/// tests, a runtime stream for the launch test.
static OWN_STREAM: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn reentrant_stream() -> aclrtStream {
    match OWN_STREAM.load(std::sync::atomic::Ordering::SeqCst) {
        0 => stream(100),
        s => s as aclrtStream,
    }
}

/// An alloc callback that uses the whole API on the stream it serves.
unsafe extern "C" fn alloc_reenters(obj: aclrtAllocator, size: usize) -> *mut c_void {
    let own = reentrant_stream();
    let mut me = Outputs::new();
    assert_eq!(me.get_by_stream(own), OK);
    assert_eq!(me.obj, obj);
    // Re-register its own descriptor on another stream and on its own.
    assert_eq!(aclrtAllocatorRegister(stream(101), me.desc), OK);
    assert_eq!(aclrtAllocatorRegister(own, me.desc), OK);
    // Unregister the stream it is serving, then restore it.
    assert_eq!(aclrtAllocatorUnregister(own), OK);
    assert_eq!(me.get_by_stream(own), INVALID_PARAM);
    assert!(recent_message().is_some());
    assert_eq!(aclrtAllocatorRegister(own, me.desc), OK);
    // Make and drop a descriptor, and fail a call and read its message.
    let scratch = aclrtAllocatorCreateDesc();
    assert_eq!(aclrtAllocatorDestroyDesc(scratch), OK);
    assert_eq!(
        aclrtAllocatorUnregister(std::ptr::null_mut()),
        INVALID_PARAM
    );
    assert!(recent_message()
        .unwrap()
        .contains("stream cannot be a NULL pointer"));
    assert_eq!(aclrtAllocatorUnregister(stream(101)), OK);
    (0x1000 + size) as *mut c_void
}

struct Misbehaving {
    name: &'static str,
    alloc: aclrtAllocatorAllocFunc,
    get_addr: aclrtAllocatorGetAddrFromBlockFunc,
    /// `aclallocLaunchKernel` with a 64-byte workspace on a stream with this
    /// allocator: the code, whether the kernel runs, how many blocks the
    /// launch hands back to free.
    launch: (aclError, bool, usize),
}

const RT_MEMORY_ALLOCATION: aclError = 207_001;

const MISBEHAVING: &[Misbehaving] = &[
    Misbehaving {
        name: "alloc returns NULL",
        alloc: Some(alloc_returns_null),
        get_addr: Some(get_addr_fn),
        launch: (RT_MEMORY_ALLOCATION, false, 0),
    },
    Misbehaving {
        name: "getAddrFromBlock returns NULL",
        alloc: Some(alloc_fn),
        get_addr: Some(get_addr_returns_null),
        launch: (RT_MEMORY_ALLOCATION, false, 1),
    },
    Misbehaving {
        name: "alloc re-enters the API",
        alloc: Some(alloc_reenters),
        get_addr: Some(get_addr_fn),
        launch: (OK, true, 1),
    },
];

#[test]
fn misbehaving_callbacks_are_stored_and_returned_unchanged() {
    let _serial = serial();
    let baseline = (global().live_descriptors(), global().streams().len());
    for m in MISBEHAVING {
        let d = aclrtAllocatorCreateDesc();
        complete(d);
        assert_eq!(aclrtAllocatorSetAllocFuncToDesc(d, m.alloc), OK);
        assert_eq!(
            aclrtAllocatorSetGetAddrFromBlockFuncToDesc(d, m.get_addr),
            OK
        );
        assert_eq!(
            aclrtAllocatorRegister(reentrant_stream(), d),
            OK,
            "{}",
            m.name
        );
        let mut out = Outputs::new();
        assert_eq!(out.get_by_stream(reentrant_stream()), OK, "{}", m.name);
        assert_eq!(out.desc, d);
        assert_eq!(out.alloc.map(|f| f as usize), m.alloc.map(|f| f as usize));
        assert_eq!(
            out.get_addr.map(|f| f as usize),
            m.get_addr.map(|f| f as usize)
        );
        assert_eq!(aclrtAllocatorUnregister(reentrant_stream()), OK);
        assert_eq!(aclrtAllocatorDestroyDesc(d), OK);
    }
    assert_eq!(recent_message(), None);
    assert_eq!(
        (global().live_descriptors(), global().streams().len()),
        baseline
    );
}

#[test]
fn a_callback_that_reenters_the_api_does_not_deadlock() {
    let _serial = serial();
    let baseline = (global().live_descriptors(), global().streams().len());
    let d = aclrtAllocatorCreateDesc();
    complete(d);
    assert_eq!(
        aclrtAllocatorSetAllocFuncToDesc(d, Some(alloc_reenters)),
        OK
    );
    assert_eq!(aclrtAllocatorRegister(reentrant_stream(), d), OK);

    // Call it as a runtime would: look the allocator up, call alloc. On
    // another thread, so that a deadlock fails the test instead of hanging it.
    let (done, wait) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut out = Outputs::new();
        assert_eq!(out.get_by_stream(reentrant_stream()), OK);
        let alloc = out.alloc.expect("registered");
        // SAFETY: alloc_reenters, with the object it was registered with.
        let block = unsafe { alloc(out.obj, 64) };
        // And again, concurrently with this thread's own look-ups.
        let again = unsafe { alloc(out.obj, 128) };
        done.send((block as usize, again as usize)).unwrap();
    });
    let blocks = wait
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("a re-entrant callback deadlocked (or panicked)");
    assert_eq!(blocks, (0x1000 + 64, 0x1000 + 128));

    let mut out = Outputs::new();
    assert_eq!(
        out.get_by_stream(reentrant_stream()),
        OK,
        "still registered"
    );
    assert_eq!(out.desc, d);
    assert_eq!(aclrtAllocatorUnregister(reentrant_stream()), OK);
    assert_eq!(aclrtAllocatorDestroyDesc(d), OK);
    assert_eq!(
        (global().live_descriptors(), global().streams().len()),
        baseline
    );
}

static FREES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static KERNEL_RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

unsafe extern "C" fn counting_free(_: aclrtAllocator, _: aclrtAllocatorBlock) {
    FREES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
}

/// Runs on the stream's worker; the workspace may be a fake address, so it
/// only counts.
unsafe extern "C" fn counting_kernel(_: *mut c_void, _: usize, _: *mut c_void) {
    KERNEL_RUNS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
}

#[test]
fn misbehaving_callbacks_fail_the_launch_not_the_process() {
    use aclalloc::ffi::cann::runtime::*;
    use aclalloc::ffi::ext::launch::aclallocLaunchKernel;
    use std::sync::atomic::Ordering::SeqCst;
    let _serial = serial();
    unsafe {
        let init = aclInit(std::ptr::null());
        assert!(init == OK || init == 100_002, "aclInit: {init}");
        assert_eq!(aclrtSetDevice(0), OK);
        let mut rt_stream: aclrtStream = std::ptr::null_mut();
        assert_eq!(aclrtCreateStream(&mut rt_stream), OK);
        let _ = recent_message();
        let baseline = (global().live_descriptors(), global().streams().len());
        OWN_STREAM.store(rt_stream as usize, SeqCst);

        for m in MISBEHAVING {
            let (code, runs, frees) = m.launch;
            let d = aclrtAllocatorCreateDesc();
            complete(d);
            assert_eq!(aclrtAllocatorSetAllocFuncToDesc(d, m.alloc), OK);
            assert_eq!(aclrtAllocatorSetFreeFuncToDesc(d, Some(counting_free)), OK);
            assert_eq!(
                aclrtAllocatorSetGetAddrFromBlockFuncToDesc(d, m.get_addr),
                OK
            );
            assert_eq!(aclrtAllocatorRegister(rt_stream, d), OK);
            FREES.store(0, SeqCst);
            KERNEL_RUNS.store(0, SeqCst);

            // On another thread with a deadline: a deadlock fails the test.
            let (done, wait) = std::sync::mpsc::channel();
            let s = rt_stream as usize;
            std::thread::spawn(move || {
                let s = s as aclrtStream;
                let got = aclallocLaunchKernel(s, 64, Some(counting_kernel), std::ptr::null_mut());
                let message = recent_message();
                let synced = aclrtSynchronizeStream(s);
                done.send((got, message, synced)).unwrap();
            });
            let (got, message, synced) = wait
                .recv_timeout(std::time::Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("{}: the launch deadlocked or panicked", m.name));
            assert_eq!(got, code, "{}: launch code", m.name);
            assert_eq!(synced, OK, "{}: the stream survives", m.name);
            assert_eq!(
                KERNEL_RUNS.load(SeqCst),
                usize::from(runs),
                "{}: kernel runs",
                m.name
            );
            assert_eq!(FREES.load(SeqCst), frees, "{}: blocks freed", m.name);
            if code == OK {
                assert_eq!(message, None, "{}", m.name);
            } else {
                let message = message.unwrap_or_default();
                assert!(
                    message.starts_with("aclallocLaunchKernel failed") && message.contains("64"),
                    "{}: message {message:?}",
                    m.name
                );
            }
            assert_eq!(aclrtAllocatorUnregister(rt_stream), OK);
            assert_eq!(aclrtAllocatorDestroyDesc(d), OK);
        }

        OWN_STREAM.store(0, SeqCst);
        assert_eq!(
            (global().live_descriptors(), global().streams().len()),
            baseline
        );
        assert_eq!(aclrtDestroyStream(rt_stream), OK);
        let _ = recent_message();
    }
}

// The runtime's and the pool's handles (merged after the core): every export
// that takes one, with handles it never handed out or already took back. The
// contract checked is the library's general one: an error code, a message
// from that function, nothing written through any pointer, no crash. Exact
// codes and texts of these functions are pinned in their own tests
// (tests/runtime_abi.rs, tests/pool_capi.rs, c_examples/runtime_errors.c).

/// Kinds of handle the runtime and the pool hand out.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Stream,
    Context,
    Pool,
    DevicePtr,
    /// A pluggable allocator: making one needs a plugin object, which a
    /// `cargo test` run does not build, so there is no taken-back case.
    Pluggable,
    /// Physical memory from `aclrtMallocPhysical`.
    Physical,
    /// The start of a reservation from `aclrtReserveMemAddress`.
    Reservation,
    /// The start of a mapping made by `aclrtMapMem`.
    Mapping,
    /// An event from `aclrtCreateEvent`.
    Event,
    /// Host memory from `aclrtMallocHost`.
    HostPtr,
    /// A memory pool from `aclallocMemPoolCreate`.
    MemPool,
    /// A notify from `aclrtCreateNotify`.
    Notify,
    /// A kernel binary from `aclrtBinaryLoadFromFile`: loading one needs a
    /// shared object of stand-ins, which a `cargo test` run does not build
    /// here (tests/kernel_binary.rs covers unloaded ones), so there is no
    /// taken-back case; the same for its functions and argument lists.
    KernelBinary,
    /// A kernel function from `aclrtBinaryGetFunction`.
    KernelFunction,
    /// A kernel argument list from `aclrtKernelArgsInit`.
    KernelArgs,
}

/// A host function the bad-input cases never let run.
unsafe extern "C" fn never_called(_: *mut c_void) {
    panic!("a refused launch ran its function");
}

/// An event kept for the whole run (the cases that need a live one).
fn live_event() -> *mut c_void {
    use aclalloc::ffi::cann::events::aclrtCreateEvent;
    static EVENT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *EVENT.get_or_init(|| {
        let mut event = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        assert_eq!(unsafe { aclrtCreateEvent(&mut event) }, OK);
        event as usize
    }) as *mut c_void
}

const GRANULE: usize = 2 << 20;

/// A reservation of two granules kept for the whole run: where the
/// virtual-memory cases map (nothing stays mapped in it).
fn reservation() -> *mut c_void {
    use aclalloc::ffi::cann::virtual_memory::aclrtReserveMemAddress;
    static VA: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *VA.get_or_init(|| {
        let mut va = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        let rc =
            unsafe { aclrtReserveMemAddress(&mut va, 2 * GRANULE, 0, std::ptr::null_mut(), 0) };
        assert_eq!(rc, OK);
        va as usize
    }) as *mut c_void
}

/// An address near the end of 64 MiB of device memory allocated and freed
/// once: dead for the whole run (later allocations reuse freed ranges from
/// their start).
fn freed_device_memory() -> *mut c_void {
    use aclalloc::ffi::cann::memory::{aclrtFree, aclrtMalloc};
    static FREED: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *FREED.get_or_init(|| {
        let mut p = std::ptr::null_mut();
        // SAFETY: a valid out-pointer, then the pointer it received.
        unsafe {
            assert_eq!(aclrtMalloc(&mut p, 64 << 20, ACL_MEM_MALLOC_HUGE_FIRST), OK);
            assert_eq!(aclrtFree(p), OK);
        }
        p as usize + (63 << 20)
    }) as *mut c_void
}

fn physical_prop() -> aclrtPhysicalMemProp {
    aclrtPhysicalMemProp {
        handleType: ACL_MEM_HANDLE_TYPE_NONE,
        allocationType: ACL_MEM_ALLOCATION_TYPE_PINNED,
        memAttr: ACL_HBM_MEM_HUGE,
        location: aclrtMemLocation {
            id: 0,
            r#type: ACL_MEM_LOCATION_TYPE_DEVICE,
        },
        reserve: 0,
    }
}

type HandleCall = unsafe fn(*mut c_void, &mut Outputs) -> aclError;
type MakeHandle = Box<dyn Fn(&mut Outputs) -> Option<*mut c_void>>;

/// Every export taking a runtime or pool handle, with otherwise valid
/// arguments. One line per export; a new kind of handle adds a `Kind`.
#[allow(unused_unsafe)] // some of these exports are safe functions, some not
const HANDLE_FUNCTIONS: &[(&str, Kind, HandleCall)] = {
    use aclalloc::ffi::cann::events::*;
    use aclalloc::ffi::cann::memory::*;
    use aclalloc::ffi::cann::runtime::*;
    use aclalloc::ffi::cann::virtual_memory::*;
    use aclalloc::ffi::ext::launch::aclallocLaunchKernel;
    use aclalloc::ffi::ext::plugin::*;
    use aclalloc::ffi::ext::pool::*;
    &[
        ("aclrtFreePhysical", Kind::Physical, |h, _| unsafe {
            aclrtFreePhysical(h)
        }),
        ("aclrtMapMem", Kind::Physical, |h, _| unsafe {
            aclrtMapMem(reservation(), GRANULE, 0, h, 0)
        }),
        ("aclrtReleaseMemAddress", Kind::Reservation, |h, _| unsafe {
            aclrtReleaseMemAddress(h)
        }),
        ("aclrtUnmapMem", Kind::Mapping, |h, _| unsafe {
            aclrtUnmapMem(h)
        }),
        (
            "aclallocPoolEmptyVirtAddrCache",
            Kind::Pool,
            |h, _| unsafe { aclallocPoolEmptyVirtAddrCache(h) },
        ),
        ("aclrtDestroyStream", Kind::Stream, |h, _| unsafe {
            aclrtDestroyStream(h)
        }),
        ("aclrtDestroyStreamForce", Kind::Stream, |h, _| unsafe {
            aclrtDestroyStreamForce(h)
        }),
        ("aclrtSynchronizeStream", Kind::Stream, |h, _| unsafe {
            aclrtSynchronizeStream(h)
        }),
        ("aclallocLaunchKernel", Kind::Stream, |h, _| unsafe {
            aclallocLaunchKernel(h, 64, Some(counting_kernel), std::ptr::null_mut())
        }),
        ("aclrtMemsetAsync", Kind::Stream, |h, out| unsafe {
            aclrtMemsetAsync(&mut out.guard as *mut u64 as *mut c_void, 8, 0, 0, h)
        }),
        ("aclrtDestroyContext", Kind::Context, |h, _| unsafe {
            aclrtDestroyContext(h)
        }),
        ("aclrtSetCurrentContext", Kind::Context, |h, _| unsafe {
            aclrtSetCurrentContext(h)
        }),
        ("aclrtFree", Kind::DevicePtr, |h, _| unsafe { aclrtFree(h) }),
        ("aclrtFreeHost", Kind::HostPtr, |h, _| unsafe {
            aclalloc::ffi::cann::host_memory::aclrtFreeHost(h)
        }),
        ("aclrtDestroyEvent", Kind::Event, |h, _| unsafe {
            aclrtDestroyEvent(h)
        }),
        ("aclrtRecordEvent", Kind::Event, |h, _| unsafe {
            aclrtRecordEvent(h, std::ptr::null_mut())
        }),
        ("aclrtRecordEvent", Kind::Stream, |h, _| unsafe {
            aclrtRecordEvent(live_event(), h)
        }),
        ("aclrtResetEvent", Kind::Event, |h, _| unsafe {
            aclrtResetEvent(h, std::ptr::null_mut())
        }),
        ("aclrtStreamWaitEvent", Kind::Event, |h, _| unsafe {
            aclrtStreamWaitEvent(std::ptr::null_mut(), h)
        }),
        ("aclrtStreamWaitEvent", Kind::Stream, |h, _| unsafe {
            aclrtStreamWaitEvent(h, live_event())
        }),
        ("aclrtStreamQuery", Kind::Stream, |h, out| unsafe {
            aclalloc::ffi::cann::stream_info::aclrtStreamQuery(
                h,
                &mut out.guard as *mut u64 as *mut i32,
            )
        }),
        ("aclrtStreamGetPriority", Kind::Stream, |h, out| unsafe {
            aclalloc::ffi::cann::stream_info::aclrtStreamGetPriority(
                h,
                &mut out.guard as *mut u64 as *mut u32,
            )
        }),
        ("aclrtStreamGetFlags", Kind::Stream, |h, out| unsafe {
            aclalloc::ffi::cann::stream_info::aclrtStreamGetFlags(
                h,
                &mut out.guard as *mut u64 as *mut u32,
            )
        }),
        ("aclrtStreamGetId", Kind::Stream, |h, out| unsafe {
            aclalloc::ffi::cann::stream_info::aclrtStreamGetId(
                h,
                &mut out.guard as *mut u64 as *mut i32,
            )
        }),
        ("aclrtSetStreamFailureMode", Kind::Stream, |h, _| unsafe {
            aclalloc::ffi::cann::stream_info::aclrtSetStreamFailureMode(h, 1)
        }),
        ("aclrtLaunchHostFunc", Kind::Stream, |h, _| unsafe {
            aclalloc::ffi::cann::stream_info::aclrtLaunchHostFunc(
                h,
                Some(never_called),
                std::ptr::null_mut(),
            )
        }),
        ("aclrtSubscribeReport", Kind::Stream, |h, _| unsafe {
            aclalloc::ffi::cann::stream_info::aclrtSubscribeReport(1, h)
        }),
        ("aclrtUnSubscribeReport", Kind::Stream, |h, _| unsafe {
            aclalloc::ffi::cann::stream_info::aclrtUnSubscribeReport(1, h)
        }),
        ("aclrtLaunchCallback", Kind::Stream, |h, _| unsafe {
            aclalloc::ffi::cann::stream_info::aclrtLaunchCallback(
                Some(never_called),
                std::ptr::null_mut(),
                1,
                h,
            )
        }),
        ("aclrtStreamAbort", Kind::Stream, |h, _| unsafe {
            aclalloc::ffi::cann::stream_control::aclrtStreamAbort(h)
        }),
        ("aclrtStreamStop", Kind::Stream, |h, _| unsafe {
            aclalloc::ffi::cann::stream_control::aclrtStreamStop(h)
        }),
        ("aclrtValueWrite", Kind::DevicePtr, |h, _| unsafe {
            aclalloc::ffi::cann::stream_control::aclrtValueWrite(h, 1, 0, std::ptr::null_mut())
        }),
        ("aclrtValueWait", Kind::DevicePtr, |h, _| unsafe {
            aclalloc::ffi::cann::stream_control::aclrtValueWait(h, 1, 0, std::ptr::null_mut())
        }),
        (
            "aclrtStreamWaitEventWithTimeout",
            Kind::Event,
            |h, _| unsafe {
                aclalloc::ffi::cann::events::aclrtStreamWaitEventWithTimeout(
                    std::ptr::null_mut(),
                    h,
                    1,
                )
            },
        ),
        ("aclrtRecordEventWithFlag", Kind::Event, |h, _| unsafe {
            aclalloc::ffi::cann::events::aclrtRecordEventWithFlag(h, std::ptr::null_mut(), 0)
        }),
        ("aclrtQueryEventStatus", Kind::Event, |h, out| unsafe {
            aclrtQueryEventStatus(h, &mut out.guard as *mut u64 as *mut i32)
        }),
        ("aclrtQueryEventWaitStatus", Kind::Event, |h, out| unsafe {
            aclrtQueryEventWaitStatus(h, &mut out.guard as *mut u64 as *mut i32)
        }),
        ("aclrtSynchronizeEvent", Kind::Event, |h, _| unsafe {
            aclrtSynchronizeEvent(h)
        }),
        (
            "aclrtSynchronizeEventWithTimeout",
            Kind::Event,
            |h, _| unsafe { aclrtSynchronizeEventWithTimeout(h, 10) },
        ),
        ("aclrtEventElapsedTime", Kind::Event, |h, out| unsafe {
            aclrtEventElapsedTime(&mut out.guard as *mut u64 as *mut f32, h, h)
        }),
        ("aclrtEventGetTimestamp", Kind::Event, |h, out| unsafe {
            aclrtEventGetTimestamp(h, &mut out.guard)
        }),
        ("aclallocPoolDestroy", Kind::Pool, |h, _| unsafe {
            aclallocPoolDestroy(h)
        }),
        ("aclallocPoolEmptyCache", Kind::Pool, |h, _| unsafe {
            aclallocPoolEmptyCache(h)
        }),
        ("aclallocPoolTrim", Kind::Pool, |h, _| unsafe {
            aclallocPoolTrim(h, 0)
        }),
        ("aclallocPoolResetPeakStats", Kind::Pool, |h, _| unsafe {
            aclallocPoolResetPeakStats(h)
        }),
        (
            "aclallocPoolResetAccumulatedStats",
            Kind::Pool,
            |h, _| unsafe { aclallocPoolResetAccumulatedStats(h) },
        ),
        ("aclallocPoolSetMemoryLimit", Kind::Pool, |h, _| unsafe {
            aclallocPoolSetMemoryLimit(h, 1 << 20)
        }),
        ("aclallocPoolSetMemoryFraction", Kind::Pool, |h, _| unsafe {
            aclallocPoolSetMemoryFraction(h, 0.5)
        }),
        ("aclallocPoolMemoryAllocated", Kind::Pool, |h, out| unsafe {
            aclallocPoolMemoryAllocated(h, &mut out.guard as *mut u64 as *mut usize)
        }),
        (
            "aclallocPoolMaxMemoryAllocated",
            Kind::Pool,
            |h, out| unsafe {
                aclallocPoolMaxMemoryAllocated(h, &mut out.guard as *mut u64 as *mut usize)
            },
        ),
        ("aclallocPoolSetTag", Kind::Pool, |h, _| unsafe {
            aclallocPoolSetTag(h, c"weights".as_ptr())
        }),
        ("aclallocPoolMemoryReserved", Kind::Pool, |h, out| unsafe {
            aclallocPoolMemoryReserved(h, &mut out.guard as *mut u64 as *mut usize)
        }),
        (
            "aclallocPoolMaxMemoryReserved",
            Kind::Pool,
            |h, out| unsafe {
                aclallocPoolMaxMemoryReserved(h, &mut out.guard as *mut u64 as *mut usize)
            },
        ),
        (
            "aclrtSynchronizeStreamWithTimeout",
            Kind::Stream,
            |h, _| unsafe { aclrtSynchronizeStreamWithTimeout(h, 100) },
        ),
        ("aclallocPluggableDestroy", Kind::Pluggable, |h, _| unsafe {
            aclallocPluggableDestroy(h)
        }),
        (
            "aclallocPluggableMalloc",
            Kind::Pluggable,
            |h, out| unsafe { aclallocPluggableMalloc(h, &mut out.desc, 64, std::ptr::null_mut()) },
        ),
        ("aclallocPluggableFree", Kind::Pluggable, |h, out| unsafe {
            aclallocPluggableFree(h, &mut out.guard as *mut u64 as *mut c_void)
        }),
        (
            "aclallocPluggableResetPeakStats",
            Kind::Pluggable,
            |h, _| unsafe { aclallocPluggableResetPeakStats(h) },
        ),
        (
            "aclallocPluggableEmptyCache",
            Kind::Pluggable,
            |h, _| unsafe { aclallocPluggableEmptyCache(h) },
        ),
        (
            "aclallocPluggableSetMemoryFraction",
            Kind::Pluggable,
            |h, _| unsafe { aclallocPluggableSetMemoryFraction(h, 0.5, 0) },
        ),
        ("aclallocPluggableSetInitFn", Kind::Pluggable, |h, _| {
            aclalloc::ffi::ext::plugin_hooks::aclallocPluggableSetInitFn(h, None)
        }),
        ("aclallocPluggableSetResetFn", Kind::Pluggable, |h, _| {
            aclalloc::ffi::ext::plugin_hooks::aclallocPluggableSetResetFn(h, None)
        }),
        (
            "aclallocPluggableSetMemoryFractionFn",
            Kind::Pluggable,
            |h, _| aclalloc::ffi::ext::plugin_hooks::aclallocPluggableSetMemoryFractionFn(h, None),
        ),
        (
            "aclallocPluggableSetBaseAllocFn",
            Kind::Pluggable,
            |h, _| aclalloc::ffi::ext::plugin_hooks::aclallocPluggableSetBaseAllocFn(h, None),
        ),
        (
            "aclallocPluggableSetRecordStreamFn",
            Kind::Pluggable,
            |h, _| aclalloc::ffi::ext::plugin_hooks::aclallocPluggableSetRecordStreamFn(h, None),
        ),
        (
            "aclallocPluggableSetEraseStreamFn",
            Kind::Pluggable,
            |h, _| aclalloc::ffi::ext::plugin_hooks::aclallocPluggableSetEraseStreamFn(h, None),
        ),
        (
            "aclallocPluggableSetGetDeviceStatsFn",
            Kind::Pluggable,
            |h, _| aclalloc::ffi::ext::plugin_hooks::aclallocPluggableSetGetDeviceStatsFn(h, None),
        ),
        (
            "aclallocPluggableSetResetPeakStatusFn",
            Kind::Pluggable,
            |h, _| aclalloc::ffi::ext::plugin_hooks::aclallocPluggableSetResetPeakStatusFn(h, None),
        ),
        (
            "aclallocPluggableGetDeviceStats",
            Kind::Pluggable,
            |h, out| unsafe {
                aclalloc::ffi::ext::plugin_hooks::aclallocPluggableGetDeviceStats(
                    h,
                    0,
                    &mut out.guard as *mut u64 as *mut _,
                )
            },
        ),
        (
            "aclallocPluggableResetPeakStatus",
            Kind::Pluggable,
            |h, _| aclalloc::ffi::ext::plugin_hooks::aclallocPluggableResetPeakStatus(h, 0),
        ),
        (
            "aclallocPluggableGetBaseAllocation",
            Kind::Pluggable,
            |h, out| unsafe {
                aclalloc::ffi::ext::plugin_hooks::aclallocPluggableGetBaseAllocation(
                    h,
                    &mut out.guard as *mut u64 as *mut c_void,
                    &mut out.desc,
                    &mut out.guard as *mut u64 as *mut usize,
                )
            },
        ),
        (
            "aclallocPluggableRecordStream",
            Kind::Pluggable,
            |h, out| {
                aclalloc::ffi::ext::plugin_hooks::aclallocPluggableRecordStream(
                    h,
                    &mut out.guard as *mut u64 as *mut c_void,
                    std::ptr::null_mut(),
                )
            },
        ),
        ("aclallocPluggableEraseStream", Kind::Pluggable, |h, out| {
            aclalloc::ffi::ext::plugin_hooks::aclallocPluggableEraseStream(
                h,
                &mut out.guard as *mut u64 as *mut c_void,
                std::ptr::null_mut(),
            )
        }),
        ("aclallocPoolGetStat", Kind::Pool, |h, out| unsafe {
            aclallocPoolGetStat(
                h,
                c"allocated_bytes.all.current".as_ptr(),
                &mut out.guard as *mut u64 as *mut i64,
            )
        }),
        ("aclallocMemPoolDestroy", Kind::MemPool, |h, _| {
            aclalloc::ffi::ext::mem_pool::aclallocMemPoolDestroy(h)
        }),
        ("aclallocMemPoolGetId", Kind::MemPool, |h, out| unsafe {
            aclalloc::ffi::ext::mem_pool::aclallocMemPoolGetId(h, &mut out.guard)
        }),
        ("aclallocMemPoolUseCount", Kind::MemPool, |h, out| unsafe {
            aclalloc::ffi::ext::mem_pool::aclallocMemPoolUseCount(h, &mut out.guard)
        }),
        ("aclallocMemPoolBeginUse", Kind::MemPool, |h, _| {
            aclalloc::ffi::ext::mem_pool::aclallocMemPoolBeginUse(h, 0)
        }),
        ("aclallocMemPoolEndUse", Kind::MemPool, |h, _| {
            aclalloc::ffi::ext::mem_pool::aclallocMemPoolEndUse(h, 0)
        }),
        ("aclallocMemPoolSnapshot", Kind::MemPool, |h, out| unsafe {
            let length = &mut out.guard as *mut u64 as *mut usize;
            aclalloc::ffi::ext::mem_pool::aclallocMemPoolSnapshot(
                h,
                std::ptr::null_mut(),
                0,
                length,
            )
        }),
        (
            "aclallocMemPoolGetDevicePool",
            Kind::MemPool,
            |h, out| unsafe {
                aclalloc::ffi::ext::mem_pool::aclallocMemPoolGetDevicePool(h, 0, &mut out.obj)
            },
        ),
        (
            "aclrtMemExportToShareableHandle",
            Kind::Physical,
            |h, out| unsafe {
                aclalloc::ffi::cann::sharing::aclrtMemExportToShareableHandle(
                    h,
                    0,
                    0,
                    &mut out.guard,
                )
            },
        ),
        (
            "aclrtMemExportToShareableHandleV2",
            Kind::Physical,
            |h, out| unsafe {
                aclalloc::ffi::cann::sharing::aclrtMemExportToShareableHandleV2(
                    h,
                    0,
                    1,
                    &mut out.guard as *mut u64 as *mut c_void,
                )
            },
        ),
        ("aclrtMemGetAccess", Kind::Mapping, |h, out| unsafe {
            let mut at = aclrtMemLocation {
                id: 0,
                r#type: ACL_MEM_LOCATION_TYPE_DEVICE,
            };
            aclalloc::ffi::cann::sharing::aclrtMemGetAccess(h, &mut at, &mut out.guard)
        }),
        // A refused export writes no key: 8 bytes of guard are enough to see it.
        (
            "aclrtIpcMemGetExportKey",
            Kind::DevicePtr,
            |h, out| unsafe {
                let key = &mut out.guard as *mut u64 as *mut std::ffi::c_char;
                aclalloc::ffi::cann::ipc_memory::aclrtIpcMemGetExportKey(h, 8, key, 65, 0)
            },
        ),
        ("aclrtDestroyNotify", Kind::Notify, |h, _| unsafe {
            aclalloc::ffi::cann::notify::aclrtDestroyNotify(h)
        }),
        ("aclrtRecordNotify", Kind::Notify, |h, _| unsafe {
            aclalloc::ffi::cann::notify::aclrtRecordNotify(h, std::ptr::null_mut())
        }),
        ("aclrtWaitAndResetNotify", Kind::Notify, |h, _| unsafe {
            aclalloc::ffi::cann::notify::aclrtWaitAndResetNotify(h, std::ptr::null_mut(), 1)
        }),
        ("aclrtGetNotifyId", Kind::Notify, |h, out| unsafe {
            aclalloc::ffi::cann::notify::aclrtGetNotifyId(h, &mut out.guard as *mut u64 as *mut u32)
        }),
        ("aclrtNotifySetImportPid", Kind::Notify, |h, _| unsafe {
            aclalloc::ffi::cann::notify::aclrtNotifySetImportPid(h, &mut 1, 1)
        }),
        ("aclrtNotifyGetExportKey", Kind::Notify, |h, out| unsafe {
            let key = &mut out.guard as *mut u64 as *mut std::ffi::c_char;
            aclalloc::ffi::cann::notify::aclrtNotifyGetExportKey(h, key, 8, 0)
        }),
        ("aclrtNotifyBatchReset", Kind::Notify, |h, _| unsafe {
            aclalloc::ffi::cann::notify::aclrtNotifyBatchReset(&mut [h] as *mut [_; 1] as *mut _, 1)
        }),
        (
            "aclrtNotifySetImportPidInterServer",
            Kind::Notify,
            |h, _| unsafe {
                let mut server = server_pid();
                aclalloc::ffi::cann::notify::aclrtNotifySetImportPidInterServer(h, &mut server, 1)
            },
        ),
        ("aclrtHostUnregister", Kind::HostPtr, |h, _| unsafe {
            aclalloc::ffi::cann::host_register::aclrtHostUnregister(h)
        }),
        (
            "aclrtHostGetDevicePointer",
            Kind::HostPtr,
            |h, out| unsafe {
                let device = &mut out.guard as *mut u64 as *mut *mut c_void;
                aclalloc::ffi::cann::host_register::aclrtHostGetDevicePointer(h, device, 0)
            },
        ),
        ("aclrtBinaryUnLoad", Kind::KernelBinary, |h, _| unsafe {
            aclalloc::ffi::cann::kernels::aclrtBinaryUnLoad(h)
        }),
        (
            "aclrtBinaryGetFunction",
            Kind::KernelBinary,
            |h, out| unsafe {
                let f = &mut out.guard as *mut u64 as *mut *mut c_void;
                aclalloc::ffi::cann::kernels::aclrtBinaryGetFunction(h, c"add_custom".as_ptr(), f)
            },
        ),
        (
            "aclrtKernelArgsInit",
            Kind::KernelFunction,
            |h, out| unsafe {
                let args = &mut out.guard as *mut u64 as *mut *mut c_void;
                aclalloc::ffi::cann::kernels::aclrtKernelArgsInit(h, args)
            },
        ),
        (
            "aclrtLaunchKernelWithConfig",
            Kind::KernelFunction,
            |h, _| unsafe {
                use aclalloc::ffi::cann::kernels::*;
                let (stream, cfg) = (std::ptr::null_mut(), std::ptr::null_mut());
                aclrtLaunchKernelWithConfig(h, 1, stream, cfg, h, std::ptr::null_mut())
            },
        ),
        ("aclrtKernelArgsAppend", Kind::KernelArgs, |h, out| unsafe {
            let mut value = 7u64;
            let param = &mut out.guard as *mut u64 as *mut *mut c_void;
            let value = (&raw mut value).cast();
            aclalloc::ffi::cann::kernels::aclrtKernelArgsAppend(h, value, 8, param)
        }),
        (
            "aclrtKernelArgsAppendPlaceHolder",
            Kind::KernelArgs,
            |h, out| unsafe {
                let param = &mut out.guard as *mut u64 as *mut *mut c_void;
                aclalloc::ffi::cann::kernels::aclrtKernelArgsAppendPlaceHolder(h, param)
            },
        ),
        (
            "aclrtKernelArgsGetPlaceHolderBuffer",
            Kind::KernelArgs,
            |h, out| unsafe {
                let buffer = &mut out.guard as *mut u64 as *mut *mut c_void;
                let param = 1 as *mut c_void;
                aclalloc::ffi::cann::kernels::aclrtKernelArgsGetPlaceHolderBuffer(
                    h, param, 8, buffer,
                )
            },
        ),
        ("aclrtKernelArgsFinalize", Kind::KernelArgs, |h, _| unsafe {
            aclalloc::ffi::cann::kernels::aclrtKernelArgsFinalize(h)
        }),
        ("aclrtIpcGetEventHandle", Kind::Event, |h, out| unsafe {
            ipc_event_handle(out, h)
        }),
        ("aclrtSetStreamAttribute", Kind::Stream, |h, _| unsafe {
            use aclalloc::ffi::cann::stream_attribute::*;
            let mut v = aclrtStreamAttrValue { userCustomTag: 1 };
            aclrtSetStreamAttribute(h, ACL_STREAM_ATTR_USER_CUSTOM_TAG, &mut v)
        }),
        ("aclrtGetStreamAttribute", Kind::Stream, |h, out| unsafe {
            use aclalloc::ffi::cann::stream_attribute::*;
            let value = &mut out.guard as *mut u64 as *mut aclrtStreamAttrValue;
            aclrtGetStreamAttribute(h, ACL_STREAM_ATTR_FAILURE_MODE, value)
        }),
    ]
};

/// A handle of `kind` that was handed out and taken back, where this test
/// can make one.
unsafe fn dead_handle(kind: Kind) -> Option<*mut c_void> {
    use aclalloc::ffi::cann::memory::*;
    use aclalloc::ffi::cann::runtime::*;
    use aclalloc::ffi::ext::pool::*;
    let mut h: *mut c_void = std::ptr::null_mut();
    unsafe {
        match kind {
            Kind::Stream => {
                assert_eq!(aclrtCreateStream(&mut h), OK);
                assert_eq!(aclrtDestroyStream(h), OK);
            }
            Kind::Context => {
                let mut current = std::ptr::null_mut();
                assert_eq!(aclrtGetCurrentContext(&mut current), OK);
                assert_eq!(aclrtCreateContext(&mut h, 0), OK);
                assert_eq!(aclrtDestroyContext(h), OK);
                assert_eq!(aclrtSetCurrentContext(current), OK);
            }
            Kind::DevicePtr => {
                assert_eq!(aclrtMalloc(&mut h, 256, ACL_MEM_MALLOC_HUGE_FIRST), OK);
                assert_eq!(aclrtFree(h), OK);
            }
            Kind::Pool => {
                let mut config = std::mem::zeroed();
                assert_eq!(aclallocPoolConfigInit(&mut config), OK);
                let mut desc = std::ptr::null_mut();
                assert_eq!(aclallocPoolCreate(&config, &mut h, &mut desc), OK);
                assert_eq!(aclallocPoolDestroy(h), OK);
                // The pool's descriptor is the caller's to destroy.
                assert_eq!(aclrtAllocatorDestroyDesc(desc), OK);
            }
            Kind::Pluggable | Kind::KernelBinary | Kind::KernelFunction | Kind::KernelArgs => {
                return None
            }
            Kind::MemPool => {
                use aclalloc::ffi::ext::mem_pool::*;
                assert_eq!(aclallocMemPoolCreate(std::ptr::null(), &mut h), OK);
                assert_eq!(aclallocMemPoolDestroy(h), OK);
            }
            Kind::Event => {
                use aclalloc::ffi::cann::events::*;
                assert_eq!(aclrtCreateEvent(&mut h), OK);
                assert_eq!(aclrtDestroyEvent(h), OK);
            }
            Kind::HostPtr => {
                use aclalloc::ffi::cann::host_memory::*;
                assert_eq!(aclrtMallocHost(&mut h, 256), OK);
                assert_eq!(aclrtFreeHost(h), OK);
            }
            Kind::Physical => {
                use aclalloc::ffi::cann::virtual_memory::*;
                assert_eq!(
                    aclrtMallocPhysical(&mut h, GRANULE, &physical_prop(), 0),
                    OK
                );
                assert_eq!(aclrtFreePhysical(h), OK);
            }
            Kind::Reservation => {
                use aclalloc::ffi::cann::virtual_memory::*;
                assert_eq!(
                    aclrtReserveMemAddress(&mut h, GRANULE, 0, std::ptr::null_mut(), 0),
                    OK
                );
                assert_eq!(aclrtReleaseMemAddress(h), OK);
            }
            Kind::Mapping => {
                use aclalloc::ffi::cann::virtual_memory::*;
                let mut physical = std::ptr::null_mut();
                assert_eq!(
                    aclrtMallocPhysical(&mut physical, GRANULE, &physical_prop(), 0),
                    OK
                );
                h = reservation();
                assert_eq!(aclrtMapMem(h, GRANULE, 0, physical, 0), OK);
                assert_eq!(aclrtUnmapMem(h), OK);
                assert_eq!(aclrtFreePhysical(physical), OK);
            }
            Kind::Notify => {
                use aclalloc::ffi::cann::notify::*;
                assert_eq!(aclrtCreateNotify(&mut h, 0), OK);
                assert_eq!(aclrtDestroyNotify(h), OK);
            }
        }
    }
    assert!(!h.is_null());
    Some(h)
}

#[test]
fn runtime_and_pool_exports_refuse_handles_they_do_not_own() {
    use aclalloc::ffi::cann::runtime::*;
    let _serial = serial();
    let mut cases = 0;
    unsafe {
        let init = aclInit(std::ptr::null());
        assert!(init == OK || init == 100_002, "aclInit: {init}");
        assert_eq!(aclrtSetDevice(0), OK);
        let _ = recent_message();
        let live_descriptor = aclrtAllocatorCreateDesc();
        let baseline = (global().live_descriptors(), global().streams().len());
        for &(function, kind, call) in HANDLE_FUNCTIONS {
            let bad: [(&str, MakeHandle); 5] = [
                ("taken back", Box::new(move |_| dead_handle(kind))),
                (
                    "a stack address",
                    Box::new(|out| Some(&mut out.guard as *mut u64 as *mut c_void)),
                ),
                (
                    "a live descriptor",
                    Box::new(move |_| Some(live_descriptor)),
                ),
                ("one", Box::new(|_| Some(1 as *mut c_void))),
                ("all ones", Box::new(|_| Some(usize::MAX as *mut c_void))),
            ];
            for (what, make) in bad.iter() {
                let mut out = Outputs::new();
                let Some(handle) = make(&mut out) else {
                    continue;
                };
                let _ = recent_message();
                let code = call(handle, &mut out);
                let message = recent_message();
                let name = format!("{function}: {what} {kind:?}");
                assert_ne!(code, OK, "{name}: accepted");
                let message = message.unwrap_or_else(|| panic!("{name}: failed without a message"));
                assert!(
                    message.starts_with(&format!("{function} failed")),
                    "{name}: {message}"
                );
                assert!(out.untouched(), "{name}: wrote through a pointer");
                assert_eq!(
                    (global().live_descriptors(), global().streams().len()),
                    baseline,
                    "{name}: changed the registry"
                );
                cases += 1;
            }
        }
        assert_eq!(aclrtAllocatorDestroyDesc(live_descriptor), OK);
        let _ = recent_message();
    }
    println!("runtime, pool and plugin handles: {cases} cases passed");
    let without_taken_back = HANDLE_FUNCTIONS
        .iter()
        .filter(|(_, kind, _)| {
            matches!(
                kind,
                Kind::Pluggable | Kind::KernelBinary | Kind::KernelFunction | Kind::KernelArgs
            )
        })
        .count();
    assert_eq!(cases, HANDLE_FUNCTIONS.len() * 5 - without_taken_back);
}

/// Host memory from `aclrtMallocHost`, freed (kept for the whole run).
fn freed_host_memory() -> *mut c_void {
    use aclalloc::ffi::cann::host_memory::*;
    static FREED: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *FREED.get_or_init(|| {
        let mut h = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; the memory is freed at once.
        unsafe {
            assert_eq!(aclrtMallocHost(&mut h, 64), OK);
            assert_eq!(aclrtFreeHost(h), OK);
        }
        h as usize
    }) as *mut c_void
}

/// `aclrtMapMem` of one granule of physical memory kept for the whole run,
/// with the given arguments.
unsafe fn map_fresh(va: *mut c_void, size: usize, offset: usize, flags: u64) -> aclError {
    use aclalloc::ffi::cann::virtual_memory::*;
    static PHYSICAL: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let h = *PHYSICAL.get_or_init(|| {
        let mut h = std::ptr::null_mut();
        // SAFETY: valid pointers.
        assert_eq!(
            unsafe { aclrtMallocPhysical(&mut h, GRANULE, &physical_prop(), 0) },
            OK
        );
        h as usize
    });
    // SAFETY: the arguments are what the case tests.
    unsafe { aclrtMapMem(va, size, offset, h as *mut c_void, flags) }
}

/// Sizes, ids and enum values out of range, in the runtime's exports: the
/// documented code, a message from that function, nothing written.
#[test]
fn runtime_sizes_ids_and_enums_out_of_range() {
    use aclalloc::ffi::cann::memory::*;
    use aclalloc::ffi::cann::runtime::*;
    use aclalloc::ffi::cann::virtual_memory::*;
    const INVALID_DEVICE: aclError = 107_001;
    const API_NOT_SUPPORT: aclError = 200_001;
    const EVENT_NOT_COMPLETE: aclError = 507_006;
    type SizeCall = unsafe fn(&mut Outputs, *mut c_void) -> aclError;
    let cases: &[(&str, &str, aclError, SizeCall)] = &[
        ("aclrtMalloc", "size 0", INVALID_PARAM, |out, _| unsafe {
            aclrtMalloc(&mut out.desc, 0, ACL_MEM_MALLOC_HUGE_FIRST)
        }),
        (
            "aclrtMalloc",
            "size SIZE_MAX",
            RT_MEMORY_ALLOCATION,
            |out, _| unsafe { aclrtMalloc(&mut out.desc, usize::MAX, ACL_MEM_MALLOC_HUGE_FIRST) },
        ),
        (
            "aclrtMalloc",
            "size beyond the device",
            RT_MEMORY_ALLOCATION,
            |out, _| unsafe { aclrtMalloc(&mut out.desc, 1 << 62, ACL_MEM_MALLOC_HUGE_FIRST) },
        ),
        ("aclrtSetDevice", "device -1", INVALID_DEVICE, |_, _| {
            aclrtSetDevice(-1)
        }),
        ("aclrtSetDevice", "device 2^30", INVALID_DEVICE, |_, _| {
            aclrtSetDevice(1 << 30)
        }),
        (
            "aclrtCreateContext",
            "device -1",
            INVALID_DEVICE,
            |out, _| unsafe { aclrtCreateContext(&mut out.obj, -1) },
        ),
        (
            "aclrtMemset",
            "count above maxCount",
            INVALID_PARAM,
            |_, dev| unsafe { aclrtMemset(dev, 64, 0, 65) },
        ),
        (
            "aclrtMemset",
            "count SIZE_MAX",
            INVALID_PARAM,
            |_, dev| unsafe { aclrtMemset(dev, usize::MAX, 0, usize::MAX) },
        ),
        (
            "aclrtMemcpy",
            "count above destMax",
            INVALID_PARAM,
            |_, dev| unsafe {
                let src = [0u8; 128];
                aclrtMemcpy(
                    dev,
                    64,
                    src.as_ptr() as *const c_void,
                    65,
                    ACL_MEMCPY_HOST_TO_DEVICE,
                )
            },
        ),
        (
            "aclrtMemcpy",
            "device range past the allocation",
            INVALID_PARAM,
            |_, dev| unsafe {
                let src = [0u8; 128];
                aclrtMemcpy(
                    dev,
                    128,
                    src.as_ptr() as *const c_void,
                    128,
                    ACL_MEMCPY_HOST_TO_DEVICE,
                )
            },
        ),
        ("aclrtMemcpy", "kind 99", INVALID_PARAM, |_, dev| unsafe {
            let src = [0u8; 8];
            aclrtMemcpy(dev, 64, src.as_ptr() as *const c_void, 8, 99)
        }),
        // Addresses the device records know as dead: refused in every kind,
        // never touched (an ACL_MEMCPY_DEFAULT copy used to fault).
        (
            "aclrtMemcpy",
            "DEFAULT into a reserved range with nothing mapped",
            INVALID_PARAM,
            |_, dev| unsafe { aclrtMemcpy(reservation(), 64, dev, 64, ACL_MEMCPY_DEFAULT) },
        ),
        (
            "aclrtMemcpy",
            "DEFAULT from a reserved range with nothing mapped",
            INVALID_PARAM,
            |out, _| unsafe {
                let dst = &mut out.guard as *mut u64 as *mut c_void;
                aclrtMemcpy(dst, 8, reservation(), 8, ACL_MEMCPY_DEFAULT)
            },
        ),
        (
            "aclrtMemcpy",
            "DEFAULT into freed device memory",
            INVALID_PARAM,
            |_, dev| unsafe { aclrtMemcpy(freed_device_memory(), 64, dev, 64, ACL_MEMCPY_DEFAULT) },
        ),
        (
            "aclrtMemcpy",
            "DEFAULT from freed device memory",
            INVALID_PARAM,
            |out, _| unsafe {
                let dst = &mut out.guard as *mut u64 as *mut c_void;
                aclrtMemcpy(dst, 8, freed_device_memory(), 8, ACL_MEMCPY_DEFAULT)
            },
        ),
        (
            "aclrtMemcpy",
            "HOST_TO_DEVICE from freed device memory",
            INVALID_PARAM,
            |_, dev| unsafe {
                aclrtMemcpy(
                    dev,
                    64,
                    freed_device_memory(),
                    64,
                    ACL_MEMCPY_HOST_TO_DEVICE,
                )
            },
        ),
        (
            "aclrtMemcpyAsync",
            "DEFAULT into a reserved range with nothing mapped",
            INVALID_PARAM,
            |_, dev| unsafe {
                aclrtMemcpyAsync(
                    reservation(),
                    64,
                    dev,
                    64,
                    ACL_MEMCPY_DEFAULT,
                    std::ptr::null_mut(),
                )
            },
        ),
        (
            "aclrtMemset",
            "freed device memory",
            INVALID_PARAM,
            |_, _| unsafe { aclrtMemset(freed_device_memory(), 64, 0, 64) },
        ),
        (
            "aclrtMemsetAsync",
            "a reserved range with nothing mapped",
            INVALID_PARAM,
            |_, _| unsafe { aclrtMemsetAsync(reservation(), 64, 0, 64, std::ptr::null_mut()) },
        ),
        (
            "aclrtReserveMemAddress",
            "size 0",
            INVALID_PARAM,
            |out, _| unsafe {
                aclrtReserveMemAddress(&mut out.desc, 0, 0, std::ptr::null_mut(), 0)
            },
        ),
        (
            "aclrtReserveMemAddress",
            "size SIZE_MAX",
            RT_MEMORY_ALLOCATION,
            |out, _| unsafe {
                aclrtReserveMemAddress(&mut out.desc, usize::MAX, 0, std::ptr::null_mut(), 0)
            },
        ),
        (
            "aclrtReserveMemAddress",
            "alignment 3",
            INVALID_PARAM,
            |out, _| unsafe {
                aclrtReserveMemAddress(&mut out.desc, GRANULE, 3, std::ptr::null_mut(), 0)
            },
        ),
        (
            "aclrtReserveMemAddress",
            "flags 7",
            INVALID_PARAM,
            |out, _| unsafe {
                aclrtReserveMemAddress(&mut out.desc, GRANULE, 0, std::ptr::null_mut(), 7)
            },
        ),
        (
            "aclrtReserveMemAddress",
            "expectPtr unaligned",
            INVALID_PARAM,
            |out, _| unsafe {
                aclrtReserveMemAddress(&mut out.desc, GRANULE, 0, 0x1000 as *mut c_void, 0)
            },
        ),
        (
            "aclrtReserveMemAddress",
            "expectPtr in use",
            INVALID_PARAM,
            |out, _| unsafe { aclrtReserveMemAddress(&mut out.desc, GRANULE, 0, reservation(), 0) },
        ),
        (
            "aclrtMallocPhysical",
            "size 0",
            INVALID_PARAM,
            |out, _| unsafe { aclrtMallocPhysical(&mut out.desc, 0, &physical_prop(), 0) },
        ),
        (
            "aclrtMallocPhysical",
            "size not a multiple of the granularity",
            INVALID_PARAM,
            |out, _| unsafe {
                aclrtMallocPhysical(&mut out.desc, GRANULE + 512, &physical_prop(), 0)
            },
        ),
        (
            "aclrtMallocPhysical",
            "size beyond the device",
            RT_MEMORY_ALLOCATION,
            |out, _| unsafe { aclrtMallocPhysical(&mut out.desc, 1 << 50, &physical_prop(), 0) },
        ),
        (
            "aclrtMallocPhysical",
            "flags 1",
            INVALID_PARAM,
            |out, _| unsafe { aclrtMallocPhysical(&mut out.desc, GRANULE, &physical_prop(), 1) },
        ),
        (
            "aclrtMallocPhysical",
            "device 99",
            INVALID_DEVICE,
            |out, _| unsafe {
                let mut prop = physical_prop();
                prop.location.id = 99;
                aclrtMallocPhysical(&mut out.desc, GRANULE, &prop, 0)
            },
        ),
        (
            "aclrtMallocPhysical",
            "location type host",
            INVALID_PARAM,
            |out, _| unsafe {
                let mut prop = physical_prop();
                prop.location.r#type = ACL_MEM_LOCATION_TYPE_HOST;
                aclrtMallocPhysical(&mut out.desc, GRANULE, &prop, 0)
            },
        ),
        (
            "aclrtMallocPhysical",
            "memAttr 99",
            INVALID_PARAM,
            |out, _| unsafe {
                let mut prop = physical_prop();
                prop.memAttr = 99;
                aclrtMallocPhysical(&mut out.desc, GRANULE, &prop, 0)
            },
        ),
        (
            "aclrtMemGetAllocationGranularity",
            "option 99",
            INVALID_PARAM,
            |out, _| unsafe {
                aclrtMemGetAllocationGranularity(
                    &mut physical_prop(),
                    99,
                    &mut out.guard as *mut u64 as *mut usize,
                )
            },
        ),
        (
            "aclrtMapMem",
            "virPtr unaligned",
            INVALID_PARAM,
            |_, _| unsafe {
                map_fresh(
                    (reservation() as usize + 4096) as *mut c_void,
                    GRANULE,
                    0,
                    0,
                )
            },
        ),
        (
            "aclrtMapMem",
            "outside any reservation",
            INVALID_PARAM,
            |_, dev| unsafe { map_fresh(dev, GRANULE, 0, 0) },
        ),
        (
            "aclrtMapMem",
            "past the reservation's end",
            INVALID_PARAM,
            |_, _| unsafe {
                map_fresh(
                    (reservation() as usize + 2 * GRANULE) as *mut c_void,
                    GRANULE,
                    0,
                    0,
                )
            },
        ),
        (
            "aclrtMapMem",
            "size not the physical size",
            INVALID_PARAM,
            |_, _| unsafe { map_fresh(reservation(), 2 * GRANULE, 0, 0) },
        ),
        (
            "aclrtMapMem",
            "offset 2 MiB",
            INVALID_PARAM,
            |_, _| unsafe { map_fresh(reservation(), GRANULE, GRANULE, 0) },
        ),
        ("aclrtMapMem", "flags 1", INVALID_PARAM, |_, _| unsafe {
            map_fresh(reservation(), GRANULE, 0, 1)
        }),
        ("aclrtMapMem", "virPtr NULL", INVALID_PARAM, |_, _| unsafe {
            map_fresh(std::ptr::null_mut(), GRANULE, 0, 0)
        }),
        ("aclrtMapMem", "handle NULL", INVALID_PARAM, |_, _| unsafe {
            aclrtMapMem(reservation(), GRANULE, 0, std::ptr::null_mut(), 0)
        }),
        (
            "aclrtReserveMemAddress",
            "virPtr NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclrtReserveMemAddress(std::ptr::null_mut(), GRANULE, 0, std::ptr::null_mut(), 0)
            },
        ),
        (
            "aclrtMallocPhysical",
            "handle NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclrtMallocPhysical(std::ptr::null_mut(), GRANULE, &physical_prop(), 0)
            },
        ),
        (
            "aclrtMallocPhysical",
            "prop NULL",
            INVALID_PARAM,
            |out, _| unsafe { aclrtMallocPhysical(&mut out.desc, GRANULE, std::ptr::null(), 0) },
        ),
        (
            "aclrtMemGetAllocationGranularity",
            "prop NULL",
            INVALID_PARAM,
            |out, _| unsafe {
                aclrtMemGetAllocationGranularity(
                    std::ptr::null_mut(),
                    0,
                    &mut out.guard as *mut u64 as *mut usize,
                )
            },
        ),
        (
            "aclrtMemGetAllocationGranularity",
            "granularity NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclrtMemGetAllocationGranularity(&mut physical_prop(), 0, std::ptr::null_mut())
            },
        ),
        (
            "aclrtReleaseMemAddress",
            "virPtr NULL",
            INVALID_PARAM,
            |_, _| unsafe { aclrtReleaseMemAddress(std::ptr::null_mut()) },
        ),
        (
            "aclrtUnmapMem",
            "virPtr NULL",
            INVALID_PARAM,
            |_, _| unsafe { aclrtUnmapMem(std::ptr::null_mut()) },
        ),
        (
            "aclrtUnmapMem",
            "inside a reservation, nothing mapped",
            INVALID_PARAM,
            |_, _| unsafe { aclrtUnmapMem(reservation()) },
        ),
        (
            "aclrtFreePhysical",
            "handle NULL",
            INVALID_PARAM,
            |_, _| unsafe { aclrtFreePhysical(std::ptr::null_mut()) },
        ),
        (
            "aclrtMallocHost",
            "size 0",
            INVALID_PARAM,
            |out, _| unsafe { aclalloc::ffi::cann::host_memory::aclrtMallocHost(&mut out.desc, 0) },
        ),
        (
            "aclrtMallocHost",
            "hostPtr NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::host_memory::aclrtMallocHost(std::ptr::null_mut(), 64)
            },
        ),
        (
            "aclallocHostMemoryGetStats",
            "stats NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::ext::host_memory_stats::aclallocHostMemoryGetStats(
                    std::ptr::null_mut(),
                )
            },
        ),
        (
            "aclrtFreeHost",
            "hostPtr NULL",
            INVALID_PARAM,
            |_, _| unsafe { aclalloc::ffi::cann::host_memory::aclrtFreeHost(std::ptr::null_mut()) },
        ),
        (
            "aclrtFreeHost",
            "device memory",
            INVALID_PARAM,
            |_, dev| unsafe { aclalloc::ffi::cann::host_memory::aclrtFreeHost(dev) },
        ),
        (
            "aclrtMemcpy",
            "HOST_TO_DEVICE from freed host memory",
            INVALID_PARAM,
            |_, dev| unsafe {
                aclrtMemcpy(dev, 64, freed_host_memory(), 64, ACL_MEMCPY_HOST_TO_DEVICE)
            },
        ),
        (
            "aclrtCreateEvent",
            "event NULL",
            INVALID_PARAM,
            |_, _| unsafe { aclalloc::ffi::cann::events::aclrtCreateEvent(std::ptr::null_mut()) },
        ),
        (
            "aclrtCreateEventWithFlag",
            "flag 0x100",
            INVALID_PARAM,
            |out, _| unsafe {
                aclalloc::ffi::cann::events::aclrtCreateEventWithFlag(&mut out.desc, 0x100)
            },
        ),
        (
            "aclrtCreateEventExWithFlag",
            "flag ACL_EVENT_EXTERNAL",
            INVALID_PARAM,
            |out, _| unsafe {
                aclalloc::ffi::cann::events::aclrtCreateEventExWithFlag(&mut out.desc, 0x20)
            },
        ),
        (
            "aclrtCreateEventWithFlag",
            "flag ACL_EVENT_IPC | ACL_EVENT_SYNC",
            INVALID_PARAM,
            |out, _| unsafe {
                aclalloc::ffi::cann::events::aclrtCreateEventWithFlag(&mut out.desc, 0x41)
            },
        ),
        (
            "aclrtSynchronizeEventWithTimeout",
            "timeout -2",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::events::aclrtSynchronizeEventWithTimeout(live_event(), -2)
            },
        ),
        (
            "aclrtSynchronizeEventWithTimeout",
            "timeout 0",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::events::aclrtSynchronizeEventWithTimeout(live_event(), 0)
            },
        ),
        (
            "aclrtQueryEventStatus",
            "status NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::events::aclrtQueryEventStatus(
                    live_event(),
                    std::ptr::null_mut(),
                )
            },
        ),
        (
            "aclrtEventGetTimestamp",
            "never recorded",
            EVENT_NOT_COMPLETE,
            |out, _| unsafe {
                aclalloc::ffi::cann::events::aclrtEventGetTimestamp(live_event(), &mut out.guard)
            },
        ),
        (
            "aclrtEventElapsedTime",
            "never recorded",
            EVENT_NOT_COMPLETE,
            |out, _| unsafe {
                aclalloc::ffi::cann::events::aclrtEventElapsedTime(
                    &mut out.guard as *mut u64 as *mut f32,
                    live_event(),
                    live_event(),
                )
            },
        ),
        (
            "aclrtEventElapsedTime",
            "ms NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::events::aclrtEventElapsedTime(
                    std::ptr::null_mut(),
                    live_event(),
                    live_event(),
                )
            },
        ),
        (
            "aclrtStreamQuery",
            "status NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::stream_info::aclrtStreamQuery(
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            },
        ),
        (
            "aclrtStreamGetId",
            "streamId NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::stream_info::aclrtStreamGetId(
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            },
        ),
        (
            "aclrtSetStreamFailureMode",
            "mode 2",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::stream_info::aclrtSetStreamFailureMode(std::ptr::null_mut(), 2)
            },
        ),
        (
            "aclrtDeviceGetStreamPriorityRange",
            "leastPriority NULL",
            INVALID_PARAM,
            |out, _| unsafe {
                aclalloc::ffi::cann::stream_info::aclrtDeviceGetStreamPriorityRange(
                    std::ptr::null_mut(),
                    &mut out.guard as *mut u64 as *mut i32,
                )
            },
        ),
        (
            "aclrtLaunchHostFunc",
            "fn NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::stream_info::aclrtLaunchHostFunc(
                    std::ptr::null_mut(),
                    None,
                    std::ptr::null_mut(),
                )
            },
        ),
        (
            "aclrtStreamAbort",
            "stream NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::stream_control::aclrtStreamAbort(std::ptr::null_mut())
            },
        ),
        (
            "aclrtStreamStop",
            "stream NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::stream_control::aclrtStreamStop(std::ptr::null_mut())
            },
        ),
        (
            "aclrtValueWrite",
            "devAddr NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::stream_control::aclrtValueWrite(
                    std::ptr::null_mut(),
                    1,
                    0,
                    std::ptr::null_mut(),
                )
            },
        ),
        ("aclrtValueWait", "flag 4", INVALID_PARAM, |out, _| unsafe {
            aclalloc::ffi::cann::stream_control::aclrtValueWait(
                &mut out.guard as *mut u64 as *mut c_void,
                1,
                4,
                std::ptr::null_mut(),
            )
        }),
        (
            "aclrtRegStreamStateCallback",
            "regName NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::stream_control::aclrtRegStreamStateCallback(
                    std::ptr::null(),
                    None,
                    std::ptr::null_mut(),
                )
            },
        ),
        (
            "aclrtSetStreamConfigOpt",
            "handle never handed out",
            INVALID_PARAM,
            |out, _| unsafe {
                aclalloc::ffi::cann::stream_control::aclrtSetStreamConfigOpt(
                    &mut out.guard as *mut u64 as *mut _,
                    2,
                    &out.guard as *const u64 as *const c_void,
                    4,
                )
            },
        ),
        (
            "aclrtDestroyStreamConfigHandle",
            "handle NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::stream_control::aclrtDestroyStreamConfigHandle(
                    std::ptr::null_mut(),
                )
            },
        ),
        (
            "aclrtCreateStreamV2",
            "handle never handed out",
            INVALID_PARAM,
            |out, _| unsafe {
                aclalloc::ffi::cann::stream_control::aclrtCreateStreamV2(
                    &mut out.desc as *mut _,
                    &out.guard as *const u64 as *const _,
                )
            },
        ),
        (
            "aclallocFailCurrentTask",
            "outside a task",
            INVALID_PARAM,
            |_, _| {
                aclalloc::ffi::ext::task_failure::aclallocFailCurrentTask(
                    aclalloc::base::error::ACL_ERROR_RT_VECTOR_CORE_EXCEPTION,
                )
            },
        ),
        (
            "aclrtStreamWaitEventWithTimeout",
            "timeout -1",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::events::aclrtStreamWaitEventWithTimeout(
                    std::ptr::null_mut(),
                    live_event(),
                    -1,
                )
            },
        ),
        (
            "aclrtRecordEventWithFlag",
            "flag 2",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::events::aclrtRecordEventWithFlag(
                    live_event(),
                    std::ptr::null_mut(),
                    2,
                )
            },
        ),
        (
            "aclrtLaunchCallback",
            "blockType 2",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::stream_info::aclrtLaunchCallback(
                    Some(never_called),
                    std::ptr::null_mut(),
                    2,
                    std::ptr::null_mut(),
                )
            },
        ),
        ("aclrtProcessReport", "timeout 0", INVALID_PARAM, |_, _| {
            aclalloc::ffi::cann::stream_info::aclrtProcessReport(0)
        }),
        (
            "aclrtProcessReport",
            "not subscribed",
            INVALID_PARAM,
            |_, _| aclalloc::ffi::cann::stream_info::aclrtProcessReport(1),
        ),
        (
            "aclrtGetResInCurrentThread",
            "type 7",
            INVALID_PARAM,
            |out, _| unsafe {
                aclalloc::ffi::cann::device_info::aclrtGetResInCurrentThread(
                    7,
                    &mut out.guard as *mut u64 as *mut u32,
                )
            },
        ),
        (
            "aclrtGetResInCurrentThread",
            "value NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::device_info::aclrtGetResInCurrentThread(
                    0,
                    std::ptr::null_mut(),
                )
            },
        ),
        (
            "aclrtGetErrorVerbose",
            "errorInfo NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::device_info::aclrtGetErrorVerbose(0, std::ptr::null_mut())
            },
        ),
        (
            "aclrtGetDeviceInfo",
            "device 2^30",
            INVALID_DEVICE,
            |out, _| unsafe {
                aclalloc::ffi::cann::device_info::aclrtGetDeviceInfo(
                    1 << 30,
                    301,
                    &mut out.guard as *mut u64 as *mut i64,
                )
            },
        ),
        (
            "aclrtGetDeviceInfo",
            "attr 999",
            API_NOT_SUPPORT,
            |out, _| unsafe {
                aclalloc::ffi::cann::device_info::aclrtGetDeviceInfo(
                    0,
                    999,
                    &mut out.guard as *mut u64 as *mut i64,
                )
            },
        ),
        (
            "aclrtGetDeviceInfo",
            "value NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::device_info::aclrtGetDeviceInfo(0, 301, std::ptr::null_mut())
            },
        ),
        (
            "aclrtGetRunMode",
            "runMode NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::device_info::aclrtGetRunMode(std::ptr::null_mut())
            },
        ),
        (
            "aclsysGetVersionStr",
            "pkgName NULL",
            INVALID_PARAM,
            |out, _| unsafe {
                aclalloc::ffi::cann::device_info::aclsysGetVersionStr(
                    std::ptr::null_mut(),
                    &mut out.guard as *mut u64 as *mut std::ffi::c_char,
                )
            },
        ),
        (
            "aclsysGetVersionNum",
            "versionNum NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::device_info::aclsysGetVersionNum(
                    c"runtime".as_ptr().cast_mut(),
                    std::ptr::null_mut(),
                )
            },
        ),
        (
            "aclrtCtxGetCurrentDefaultStream",
            "stream NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::device_info::aclrtCtxGetCurrentDefaultStream(
                    std::ptr::null_mut(),
                )
            },
        ),
        (
            "aclrtDeviceCanAccessPeer",
            "peer device -1",
            INVALID_DEVICE,
            |out, _| unsafe {
                aclalloc::ffi::cann::device_info::aclrtDeviceCanAccessPeer(
                    &mut out.guard as *mut u64 as *mut i32,
                    0,
                    -1,
                )
            },
        ),
        (
            "aclrtDeviceCanAccessPeer",
            "canAccessPeer NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::device_info::aclrtDeviceCanAccessPeer(
                    std::ptr::null_mut(),
                    0,
                    0,
                )
            },
        ),
        (
            "aclrtDeviceEnablePeerAccess",
            "flags 1",
            INVALID_PARAM,
            |_, _| aclalloc::ffi::cann::device_info::aclrtDeviceEnablePeerAccess(0, 1),
        ),
        (
            "aclrtDeviceDisablePeerAccess",
            "device 2^30",
            INVALID_DEVICE,
            |_, _| aclalloc::ffi::cann::device_info::aclrtDeviceDisablePeerAccess(1 << 30),
        ),
        // Sharing, IPC memory, notifies and IPC events.
        (
            "aclrtIpcGetEventHandle",
            "an event without ACL_EVENT_IPC",
            INVALID_PARAM,
            |out, _| unsafe { ipc_event_handle(out, live_event()) },
        ),
        (
            "aclrtIpcGetEventHandle",
            "handle NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::ipc_events::aclrtIpcGetEventHandle(
                    live_event(),
                    std::ptr::null_mut(),
                )
            },
        ),
        (
            "aclrtIpcOpenEventHandle",
            "a made-up handle",
            INVALID_PARAM,
            |out, _| unsafe {
                use aclalloc::ffi::cann::ipc_events::*;
                let mut h = aclrtIpcEventHandle {
                    reserved: [0x5a; 64],
                };
                h.reserved[..8].copy_from_slice(&b"aclaIPCE".map(|b| b as std::ffi::c_char));
                h.reserved[16..].fill(0);
                aclrtIpcOpenEventHandle(h, &mut out.desc)
            },
        ),
        (
            "aclrtIpcOpenEventHandle",
            "a zeroed handle",
            INVALID_PARAM,
            |out, _| unsafe {
                use aclalloc::ffi::cann::ipc_events::*;
                aclrtIpcOpenEventHandle(aclrtIpcEventHandle { reserved: [0; 64] }, &mut out.desc)
            },
        ),
        (
            "aclrtIpcOpenEventHandle",
            "event NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                use aclalloc::ffi::cann::ipc_events::*;
                aclrtIpcOpenEventHandle(
                    aclrtIpcEventHandle { reserved: [0; 64] },
                    std::ptr::null_mut(),
                )
            },
        ),
        (
            "aclrtCreateEventExWithFlag",
            "flag ACL_EVENT_IPC | ACL_EVENT_TIME_LINE",
            INVALID_PARAM,
            |out, _| unsafe {
                aclalloc::ffi::cann::events::aclrtCreateEventExWithFlag(&mut out.desc, 0x48)
            },
        ),
        (
            "aclrtCreateNotify",
            "notify NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::notify::aclrtCreateNotify(std::ptr::null_mut(), 0)
            },
        ),
        (
            "aclrtCreateNotify",
            "flag 2",
            INVALID_PARAM,
            |out, _| unsafe { aclalloc::ffi::cann::notify::aclrtCreateNotify(&mut out.desc, 2) },
        ),
        (
            "aclrtNotifyGetExportKey",
            "flags 1",
            INVALID_PARAM,
            |out, _| unsafe {
                let key = &mut out.guard as *mut u64 as *mut std::ffi::c_char;
                aclalloc::ffi::cann::notify::aclrtNotifyGetExportKey(live_notify(), key, 8, 1)
            },
        ),
        (
            "aclrtNotifyImportByKey",
            "notify NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::notify::aclrtNotifyImportByKey(
                    std::ptr::null_mut(),
                    c"aclalloc-0000040000000001".as_ptr(),
                    0,
                )
            },
        ),
        (
            "aclrtNotifyImportByKey",
            "key NULL",
            INVALID_PARAM,
            |out, _| unsafe {
                aclalloc::ffi::cann::notify::aclrtNotifyImportByKey(
                    &mut out.desc,
                    std::ptr::null(),
                    0,
                )
            },
        ),
        (
            "aclrtNotifyImportByKey",
            "a made-up key",
            INVALID_PARAM,
            |out, _| unsafe {
                aclalloc::ffi::cann::notify::aclrtNotifyImportByKey(
                    &mut out.desc,
                    c"aclalloc-0000040000000001".as_ptr(),
                    0,
                )
            },
        ),
        (
            "aclrtNotifyImportByKey",
            "flags 1",
            INVALID_PARAM,
            |out, _| unsafe {
                aclalloc::ffi::cann::notify::aclrtNotifyImportByKey(
                    &mut out.desc,
                    c"aclalloc-0000040000000001".as_ptr(),
                    1,
                )
            },
        ),
        (
            "aclrtNotifyBatchReset",
            "notifies NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::notify::aclrtNotifyBatchReset(std::ptr::null_mut(), 1)
            },
        ),
        (
            "aclrtNotifyBatchReset",
            "num 0",
            INVALID_PARAM,
            |_, _| unsafe {
                let mut list = [live_notify()];
                aclalloc::ffi::cann::notify::aclrtNotifyBatchReset(list.as_mut_ptr(), 0)
            },
        ),
        (
            "aclrtNotifySetImportPidInterServer",
            "serverPids NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::notify::aclrtNotifySetImportPidInterServer(
                    live_notify(),
                    std::ptr::null_mut(),
                    1,
                )
            },
        ),
        (
            "aclrtNotifySetImportPidInterServer",
            "another server",
            API_NOT_SUPPORT,
            |_, _| unsafe {
                let mut server = server_pid();
                aclalloc::ffi::cann::notify::aclrtNotifySetImportPidInterServer(
                    live_notify(),
                    &mut server,
                    1,
                )
            },
        ),
        (
            "aclrtIpcMemGetExportKey",
            "size 0",
            INVALID_PARAM,
            |out, dev| unsafe {
                let key = &mut out.guard as *mut u64 as *mut std::ffi::c_char;
                aclalloc::ffi::cann::ipc_memory::aclrtIpcMemGetExportKey(dev, 0, key, 8, 0)
            },
        ),
        (
            "aclrtIpcMemGetExportKey",
            "flags 2",
            INVALID_PARAM,
            |out, dev| unsafe {
                let key = &mut out.guard as *mut u64 as *mut std::ffi::c_char;
                aclalloc::ffi::cann::ipc_memory::aclrtIpcMemGetExportKey(dev, 8, key, 8, 2)
            },
        ),
        (
            "aclrtIpcMemGetExportKey",
            "key NULL",
            INVALID_PARAM,
            |_, dev| unsafe {
                aclalloc::ffi::cann::ipc_memory::aclrtIpcMemGetExportKey(
                    dev,
                    8,
                    std::ptr::null_mut(),
                    65,
                    0,
                )
            },
        ),
        (
            "aclrtIpcMemSetImportPid",
            "key NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::ipc_memory::aclrtIpcMemSetImportPid(
                    std::ptr::null(),
                    &mut 1,
                    1,
                )
            },
        ),
        (
            "aclrtIpcMemSetImportPid",
            "pid NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::ipc_memory::aclrtIpcMemSetImportPid(
                    c"aclalloc-0000040000000001".as_ptr(),
                    std::ptr::null_mut(),
                    1,
                )
            },
        ),
        (
            "aclrtIpcMemSetImportPid",
            "num 0",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::ipc_memory::aclrtIpcMemSetImportPid(
                    c"aclalloc-0000040000000001".as_ptr(),
                    &mut 1,
                    0,
                )
            },
        ),
        (
            "aclrtIpcMemSetImportPid",
            "a key not exported here",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::ipc_memory::aclrtIpcMemSetImportPid(
                    c"aclalloc-0000040000000001".as_ptr(),
                    &mut 1,
                    1,
                )
            },
        ),
        (
            "aclrtIpcMemImportByKey",
            "devPtr NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::ipc_memory::aclrtIpcMemImportByKey(
                    std::ptr::null_mut(),
                    c"aclalloc-0000040000000001".as_ptr(),
                    0,
                )
            },
        ),
        (
            "aclrtIpcMemImportByKey",
            "key NULL",
            INVALID_PARAM,
            |out, _| unsafe {
                aclalloc::ffi::cann::ipc_memory::aclrtIpcMemImportByKey(
                    &mut out.desc,
                    std::ptr::null(),
                    0,
                )
            },
        ),
        (
            "aclrtIpcMemImportByKey",
            "a made-up key",
            INVALID_PARAM,
            |out, _| unsafe {
                aclalloc::ffi::cann::ipc_memory::aclrtIpcMemImportByKey(
                    &mut out.desc,
                    c"aclalloc-0000040000000001".as_ptr(),
                    0,
                )
            },
        ),
        (
            "aclrtIpcMemImportByKey",
            "flags 2",
            INVALID_PARAM,
            |out, _| unsafe {
                aclalloc::ffi::cann::ipc_memory::aclrtIpcMemImportByKey(
                    &mut out.desc,
                    c"aclalloc-0000040000000001".as_ptr(),
                    2,
                )
            },
        ),
        (
            "aclrtIpcMemClose",
            "key NULL",
            INVALID_PARAM,
            |_, _| unsafe { aclalloc::ffi::cann::ipc_memory::aclrtIpcMemClose(std::ptr::null()) },
        ),
        (
            "aclrtIpcMemClose",
            "a made-up key",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::ipc_memory::aclrtIpcMemClose(
                    c"aclalloc-0000040000000001".as_ptr(),
                )
            },
        ),
        (
            "aclrtIpcMemSetAttr",
            "key NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::ipc_memory::aclrtIpcMemSetAttr(std::ptr::null(), 0, 0)
            },
        ),
        (
            "aclrtIpcMemSetAttr",
            "a key not exported here",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::ipc_memory::aclrtIpcMemSetAttr(
                    c"aclalloc-0000040000000001".as_ptr(),
                    0,
                    0,
                )
            },
        ),
        (
            "aclrtIpcMemSetAttr",
            "type 1",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::ipc_memory::aclrtIpcMemSetAttr(
                    c"aclalloc-0000040000000001".as_ptr(),
                    1,
                    0,
                )
            },
        ),
        (
            "aclrtIpcMemSetAttr",
            "attr 4",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::ipc_memory::aclrtIpcMemSetAttr(
                    c"aclalloc-0000040000000001".as_ptr(),
                    0,
                    4,
                )
            },
        ),
        (
            "aclrtIpcMemImportPidInterServer",
            "serverPids NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::ipc_memory::aclrtIpcMemImportPidInterServer(
                    c"aclalloc-0000040000000001".as_ptr(),
                    std::ptr::null_mut(),
                    1,
                )
            },
        ),
        (
            "aclrtIpcMemImportPidInterServer",
            "num 0",
            INVALID_PARAM,
            |_, _| unsafe {
                let mut server = server_pid();
                aclalloc::ffi::cann::ipc_memory::aclrtIpcMemImportPidInterServer(
                    c"aclalloc-0000040000000001".as_ptr(),
                    &mut server,
                    0,
                )
            },
        ),
        (
            "aclrtMemImportFromShareableHandle",
            "a made-up handle",
            INVALID_PARAM,
            |out, _| unsafe {
                aclalloc::ffi::cann::sharing::aclrtMemImportFromShareableHandle(
                    (1 << 42) | 1,
                    0,
                    &mut out.desc,
                )
            },
        ),
        (
            "aclrtMemImportFromShareableHandle",
            "handle NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::sharing::aclrtMemImportFromShareableHandle(
                    (1 << 42) | 1,
                    0,
                    std::ptr::null_mut(),
                )
            },
        ),
        (
            "aclrtMemImportFromShareableHandle",
            "device -1",
            INVALID_DEVICE,
            |out, _| unsafe {
                aclalloc::ffi::cann::sharing::aclrtMemImportFromShareableHandle(
                    (1 << 42) | 1,
                    -1,
                    &mut out.desc,
                )
            },
        ),
        (
            "aclrtMemImportFromShareableHandleV2",
            "shareableHandle NULL",
            INVALID_PARAM,
            |out, _| unsafe {
                aclalloc::ffi::cann::sharing::aclrtMemImportFromShareableHandleV2(
                    std::ptr::null_mut(),
                    1,
                    0,
                    &mut out.desc,
                )
            },
        ),
        (
            "aclrtMemSetPidToShareableHandle",
            "a made-up handle",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::sharing::aclrtMemSetPidToShareableHandle(
                    (1 << 42) | 1,
                    &mut 1,
                    1,
                )
            },
        ),
        (
            "aclrtMemSetPidToShareableHandle",
            "pid NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::sharing::aclrtMemSetPidToShareableHandle(
                    (1 << 42) | 1,
                    std::ptr::null_mut(),
                    1,
                )
            },
        ),
        (
            "aclrtMemSetPidToShareableHandle",
            "pidNum 0",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::sharing::aclrtMemSetPidToShareableHandle(
                    (1 << 42) | 1,
                    &mut 1,
                    0,
                )
            },
        ),
        (
            "aclrtMemSetAccess",
            "desc NULL",
            INVALID_PARAM,
            |_, dev| unsafe {
                aclalloc::ffi::cann::sharing::aclrtMemSetAccess(dev, 64, std::ptr::null_mut(), 1)
            },
        ),
        (
            "aclrtDeviceGetBareTgid",
            "pid NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::sharing::aclrtDeviceGetBareTgid(std::ptr::null_mut())
            },
        ),
        (
            "aclrtSetStreamAttribute",
            "value NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::stream_attribute::aclrtSetStreamAttribute(
                    std::ptr::null_mut(),
                    3,
                    std::ptr::null_mut(),
                )
            },
        ),
        (
            "aclrtSetStreamAttribute",
            "stmAttrType 9",
            INVALID_PARAM,
            |_, _| unsafe {
                use aclalloc::ffi::cann::stream_attribute::*;
                let mut v = aclrtStreamAttrValue { reserve: [0; 4] };
                aclrtSetStreamAttribute(std::ptr::null_mut(), 9, &mut v)
            },
        ),
        (
            "aclrtSetStreamAttribute",
            "the default stream's failure mode",
            INVALID_PARAM,
            |_, _| unsafe {
                use aclalloc::ffi::cann::stream_attribute::*;
                let mut v = aclrtStreamAttrValue { failureMode: 1 };
                aclrtSetStreamAttribute(std::ptr::null_mut(), ACL_STREAM_ATTR_FAILURE_MODE, &mut v)
            },
        ),
        (
            "aclrtGetStreamAttribute",
            "value NULL",
            INVALID_PARAM,
            |_, _| unsafe {
                aclalloc::ffi::cann::stream_attribute::aclrtGetStreamAttribute(
                    std::ptr::null_mut(),
                    1,
                    std::ptr::null_mut(),
                )
            },
        ),
        (
            "aclrtGetStreamAttribute",
            "stmAttrType 0",
            INVALID_PARAM,
            |out, _| unsafe {
                let value = &mut out.guard as *mut u64
                    as *mut aclalloc::ffi::cann::stream_attribute::aclrtStreamAttrValue;
                aclalloc::ffi::cann::stream_attribute::aclrtGetStreamAttribute(
                    std::ptr::null_mut(),
                    0,
                    value,
                )
            },
        ),
        (
            "aclrtMemset",
            "a read-only static array",
            INVALID_PARAM,
            |_, _| unsafe {
                static READ_ONLY: [u8; 64] = [1; 64];
                aclrtMemset(READ_ONLY.as_ptr() as *mut c_void, 64, 0, 64)
            },
        ),
        (
            "aclrtMemset",
            "a PROT_READ mapping",
            INVALID_PARAM,
            |_, _| unsafe { aclrtMemset(read_only_page(), 64, 0, 64) },
        ),
        (
            "aclrtMemset",
            "an unmapped range",
            INVALID_PARAM,
            |_, _| unsafe { aclrtMemset(UNMAPPED, 64, 0, 64) },
        ),
    ];
    let _serial = serial();
    unsafe {
        let init = aclInit(std::ptr::null());
        assert!(init == OK || init == 100_002, "aclInit: {init}");
        assert_eq!(aclrtSetDevice(0), OK);
        let mut dev = std::ptr::null_mut();
        assert_eq!(aclrtMalloc(&mut dev, 64, ACL_MEM_MALLOC_HUGE_FIRST), OK);
        let _ = recent_message();
        for &(function, what, code, call) in cases {
            let mut out = Outputs::new();
            let got = call(&mut out, dev);
            let message = recent_message();
            assert_eq!(got, code, "{function}: {what}");
            let message = message.unwrap_or_else(|| panic!("{function}: {what}: no message"));
            assert!(
                message.starts_with(&format!("{function} failed")),
                "{function}: {what}: {message}"
            );
            assert!(
                out.untouched(),
                "{function}: {what}: wrote an out-parameter"
            );
        }
        assert_eq!(aclrtFree(dev), OK);
    }
    println!("runtime sizes, ids and enums: {} cases passed", cases.len());
}

/// A notify kept for the whole run (the cases that need a live one).
fn live_notify() -> *mut c_void {
    use aclalloc::ffi::cann::notify::aclrtCreateNotify;
    static NOTIFY: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *NOTIFY.get_or_init(|| {
        let mut n = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        assert_eq!(unsafe { aclrtCreateNotify(&mut n, 0) }, OK);
        n as usize
    }) as *mut c_void
}

/// `aclrtIpcGetEventHandle` of `event` into a handle of its own: a write
/// to it shows as a write to `out`.
unsafe fn ipc_event_handle(out: &mut Outputs, event: *mut c_void) -> aclError {
    use aclalloc::ffi::cann::ipc_events::*;
    let mut h = aclrtIpcEventHandle { reserved: [0; 64] };
    // SAFETY: a valid out-pointer.
    let rc = unsafe { aclrtIpcGetEventHandle(event, &mut h) };
    if h.reserved.iter().any(|&b| b != 0) {
        out.guard = 0;
    }
    rc
}

/// One pid of another server, for the inter-server whitelists.
fn server_pid() -> aclalloc::ffi::cann::ipc_memory::aclrtServerPid {
    static PID: i32 = 1;
    aclalloc::ffi::cann::ipc_memory::aclrtServerPid {
        sdid: 1,
        // Only read by the calls.
        pid: &PID as *const i32 as *mut i32,
        num: 1,
    }
}

/// A page mapped read-only for the whole run.
fn read_only_page() -> *mut c_void {
    static PAGE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: a fresh anonymous mapping; nothing else refers to it.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        p as usize
    }) as *mut c_void
}

/// An address below the kernel's `mmap_min_addr` (64 KiB by default): no
/// mapping can ever cover it, unlike an unmapped hole another thread's
/// mmap could fill.
const UNMAPPED: *mut c_void = 0x1000 as *mut c_void;
