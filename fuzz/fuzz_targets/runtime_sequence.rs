//! Random sequences of host-runtime calls with operator launches, against a
//! model of devices, streams, registrations and the kernels each stream owes.
//!
//! The runtime runs on two small devices (ACLALLOC_DEVICE_COUNT=2,
//! ACLALLOC_DEVICE_MEMORY=64MiB, set before its first use); `aclInit` is
//! called once per process. Ops: `aclInit` again, `aclrtSetDevice` /
//! `aclrtResetDevice[Force]` (counted, as in CANN; the last reset destroys
//! the default context's streams), create and destroy (also forced) streams,
//! register a counting allocator (or one whose alloc or getAddrFromBlock
//! returns NULL, or a caching pool's descriptor) on live, destroyed and
//! forged streams, unregister, `aclallocLaunchKernel` on those streams and
//! on NULL (the current context's default stream), synchronize one stream
//! or the device; reserve and release address space, allocate and free
//! physical memory (on real and missing devices, and forged handles), map
//! it into reservations (inside, across the end, over other mappings),
//! unmap, and touch mapped memory; record an event on one stream and wait
//! for it on another (also with a record flag and a wait timeout); record a
//! notify on one stream and wait for it on another (also through a key
//! imported in this process), reset notifies in a batch; on a stream of its
//! own, a value write and a satisfied value wait, then a synchronize with a
//! timeout, a stop or an abort; export and import within this process (a
//! shareable handle, refused; IPC memory, seen at both addresses; an IPC
//! event, ordering the default stream); data buffers (created, updated,
//! read, destroyed and refused); `aclrtReduceAsync` and
//! `aclrtRandomNumAsync` on any stream, with kinds, types, counts,
//! offsets and flaws that must be refused, their results checked after a
//! synchronize; a model built with labels on two streams and a switch,
//! replayed with two indices (also past the list), some labels never set
//! or set twice or on an unbound stream, the handles destroyed before or
//! after the replays. Every wait follows its record, so no op can block a
//! stream for good.
//!
//! Checked: every return code and message; the kernel gets a workspace of
//! the launch's size (NULL for 0) that it can write, and for the counting
//! allocator one that allocator handed out; after a launch returns, the
//! counting allocator has had as many frees as successful allocs and the
//! pool has nothing allocated; after synchronizing (or a non-forced destroy,
//! or a reset that destroys the stream) every kernel launched on the stream
//! has run; destroyed streams are refused cleanly; the runtime's live
//! stream count and the registrations match the model. Each run ends by
//! resetting every device, which must leave no stream and no registration.
#![no_main]

#[path = "../common/messages.rs"]
mod messages;
#[path = "runtime_sequence/newer.rs"]
mod newer;

use aclalloc::ffi::cann::allocator::*;
use aclalloc::ffi::cann::errmsg::aclGetRecentErrMsg;
use aclalloc::ffi::cann::memory::aclrtMemcpy;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::cann::types::*;
use aclalloc::ffi::ext::launch::aclallocLaunchKernel;
use aclalloc::ffi::ext::pool::*;
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use std::collections::{HashMap, HashSet};
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

const OK: aclError = 0;
const INVALID_PARAM: aclError = 100_000;
const REPEAT_INITIALIZE: aclError = 100_002;
const INVALID_DEVICE: aclError = 107_001;
const CONTEXT_NULL: aclError = 107_002;
const MEMORY_ALLOCATION: aclError = 207_001;
const DEVICES: usize = 2;
const DEVICE_MIB: usize = 64;
const MIB: usize = 1 << 20;
const MAX_OPS: usize = 64;
/// Live streams per run (each is a host thread).
const MAX_STREAMS: usize = 4;
/// The counting allocator refuses larger requests.
const COUNTING_CAP: usize = MIB;
/// Lines the runtime may add on its own when device memory runs out under
/// the pool registered on a stream.
const DEVICE_LINES: [&str; 2] = ["aclrtMalloc failed", "aclallocPoolAlloc failed"];

#[derive(Arbitrary, Debug, Clone, Copy)]
enum StreamPick {
    Null,
    /// The n-th stream this run created (live or destroyed).
    Created(u8),
    Forged(u64),
}

#[derive(Arbitrary, Debug, Clone, Copy, PartialEq)]
enum Kind {
    Counting,
    NullAlloc,
    NullAddr,
    Pool,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Size {
    Zero,
    Small(u16),
    Medium(u32),
    Big(u32),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Op {
    Init,
    SetDevice(u8),
    ResetDevice(u8, bool),
    CreateStream,
    DestroyStream(StreamPick, bool),
    Register(StreamPick, Kind),
    Unregister(StreamPick),
    Launch(StreamPick, Size),
    Synchronize(StreamPick),
    SynchronizeDevice,
    /// `aclrtReserveMemAddress` of n % 8 granules with these flags.
    Reserve(u8, u8),
    /// `aclrtReleaseMemAddress` of the n-th reservation of the run.
    Release(u8),
    /// `aclrtMallocPhysical` of n % 5 granules on device d % 3 - (2 does
    /// not exist).
    MallocPhysical(u8, u8),
    /// `aclrtFreePhysical` of the n-th physical handle of the run, or a
    /// forged one.
    FreePhysical(u8, Option<u64>),
    /// `aclrtMapMem` of physical handle p at granule g of reservation r.
    Map(u8, u8, u8),
    /// `aclrtUnmapMem` at granule g of reservation r.
    Unmap(u8, u8),
    /// Writes and reads back the n-th live mapping.
    Touch(u8),
    /// `aclrtMemcpy` from the host of 1 + l * 80 bytes (up to 5 MiB) at
    /// byte o * 97 of the n-th live mapping, read back by a second copy;
    /// refused when the range runs out of mapped memory. Large copies into
    /// pages nothing touched go through the memory's file.
    CopyIn(u8, u16, u16),
    /// An event recorded on the first stream and waited for by the second,
    /// which is then synchronized: the event has completed, and with it
    /// every kernel launched on the first stream before the record.
    EventOrder(StreamPick, StreamPick),
    /// A notify recorded on the first stream, waited for and cleared by the
    /// second (through a key imported here when set), which is then
    /// synchronized; reset in a batch and destroyed.
    NotifyOrder(StreamPick, StreamPick, bool),
    /// On a stream of its own: a value write and a value wait it satisfies
    /// (flag f % 5: 4 is refused), then (m % 3) a synchronize with a
    /// timeout, a stop or an abort, then a destroy.
    StreamControl(u8, u8, u8),
    /// `aclrtRecordEventWithFlag` (flag f % 3: 2 is refused) on the first
    /// stream, `aclrtStreamWaitEventWithTimeout` (t % 3 - 1 seconds: -1 is
    /// refused, 0 is no limit) on the second, which is synchronized.
    TimedEventOrder(StreamPick, StreamPick, u8, u8),
    /// Export and import within this process (k % 3): a shareable handle
    /// (its import here refused), IPC memory, an IPC event.
    ShareHere(u8),
    /// A stream-ordered pool on the current device: a block of 1 + n % 1 MiB
    /// bytes allocated on the first stream, freed on the second (or on the
    /// first when `own`), a second free refused, the second stream
    /// synchronized, the pool trimmed and destroyed.
    StreamOrdered(StreamPick, StreamPick, u32, bool),
    /// A tagged region on the current device: n % 3 + 1 buffers of 2 MiB
    /// allocated inside it with `aclrtMalloc` and written, `aclallocSleep`
    /// (offloading the tag when `offload`), the first buffer freed while
    /// asleep when `free_asleep`, `aclallocWakeUp`: offloaded contents come
    /// back; then everything is freed. A device short of memory ends the op
    /// early.
    Region(u8, bool, bool),
    /// Data buffers, the built-in reduce and random-number tasks, labels
    /// in built models (`newer.rs`).
    Newer(newer::NewerOp),
}

const GRANULE: usize = 2 << 20;
const RELATIVE_RESOURCE_NOT_CLEARED: aclError = 148_051;

/// The run's reservations, physical memory and mappings.
#[derive(Default)]
struct VmModel {
    /// (address, size, alive), in creation order.
    reservations: Vec<(usize, usize, bool)>,
    /// (handle, size, alive: not freed, live mappings).
    physical: Vec<(usize, usize, bool, usize)>,
    /// Mapping start → (size, index into `physical`).
    mappings: std::collections::BTreeMap<usize, (usize, usize)>,
}

impl VmModel {
    fn reservation_at(&self, addr: usize) -> Option<(usize, usize)> {
        self.reservations
            .iter()
            .find(|&&(a, size, alive)| alive && a <= addr && addr < a + size)
            .map(|&(a, size, _)| (a, size))
    }
}

/// What a stream's kernels report.
#[derive(Default)]
struct Channel {
    runs: AtomicUsize,
    /// Kernels that saw a wrong workspace.
    bad: AtomicUsize,
}

/// One launch's argument: the channel and the workspace size it expects.
struct LaunchArg {
    channel: Arc<Channel>,
    size: usize,
    counting: bool,
}

/// The counting allocator: blocks are `address + 1` (so getAddrFromBlock
/// must translate), and freed memory is kept until the run has synchronized
/// (CANN's executor frees a workspace as soon as the launch is enqueued).
#[derive(Default)]
struct Counting {
    allocs: usize,
    frees: usize,
    live: HashSet<usize>,
    /// Every workspace handed out this run, freed at its end.
    memory: Vec<Box<[u8]>>,
}

fn counting() -> &'static Mutex<Counting> {
    static C: OnceLock<Mutex<Counting>> = OnceLock::new();
    C.get_or_init(Default::default)
}

static OBJECT: u64 = 0;

unsafe extern "C" fn count_alloc(_: *mut c_void, size: usize) -> *mut c_void {
    if size > COUNTING_CAP {
        return std::ptr::null_mut();
    }
    let mut c = counting().lock().unwrap();
    let mut mem = vec![0u8; size].into_boxed_slice();
    let addr = mem.as_mut_ptr() as usize;
    c.memory.push(mem);
    c.allocs += 1;
    c.live.insert(addr);
    (addr + 1) as *mut c_void
}
unsafe extern "C" fn null_alloc(_: *mut c_void, _: usize) -> *mut c_void {
    std::ptr::null_mut()
}
unsafe extern "C" fn count_free(_: *mut c_void, block: *mut c_void) {
    let mut c = counting().lock().unwrap();
    assert!(c.live.remove(&(block as usize - 1)), "freed a block twice");
    c.frees += 1;
}
unsafe extern "C" fn count_addr(block: *mut c_void) -> *mut c_void {
    (block as usize - 1) as *mut c_void
}
unsafe extern "C" fn null_addr(_: *mut c_void) -> *mut c_void {
    std::ptr::null_mut()
}

unsafe extern "C" fn kernel(workspace: *mut c_void, size: usize, user: *mut c_void) {
    // SAFETY: a LaunchArg the model keeps alive until the run has synchronized.
    let arg = unsafe { &*(user as *const LaunchArg) };
    let ok = size == arg.size
        && workspace.is_null() == (size == 0)
        && (!arg.counting || size == 0 || {
            // The counting allocator handed it out (it may already be
            // "freed" in stream order, but its memory is kept).
            let c = counting().lock().unwrap();
            c.memory
                .iter()
                .any(|m| m.as_ptr() as usize == workspace as usize)
        });
    if ok && size > 0 {
        // SAFETY: a workspace of `size` bytes.
        unsafe {
            let p = workspace as *mut u8;
            p.write(0xA5);
            p.add(size - 1).write(0x5A);
        }
    }
    if !ok {
        arg.channel.bad.fetch_add(1, Ordering::Relaxed);
    }
    arg.channel.runs.fetch_add(1, Ordering::Release);
}

/// The descriptors every run may register (made once per process).
struct Descs {
    kinds: [(Kind, usize); 4],
    pool: usize,
}

fn descs() -> &'static Descs {
    static D: OnceLock<Descs> = OnceLock::new();
    D.get_or_init(|| {
        let make = |alloc: aclrtAllocatorAllocFunc,
                    get_addr: aclrtAllocatorGetAddrFromBlockFunc| {
            let d = aclrtAllocatorCreateDesc();
            assert!(!d.is_null());
            assert_eq!(
                aclrtAllocatorSetObjToDesc(d, &OBJECT as *const u64 as *mut c_void),
                OK
            );
            assert_eq!(aclrtAllocatorSetAllocFuncToDesc(d, alloc), OK);
            assert_eq!(aclrtAllocatorSetFreeFuncToDesc(d, Some(count_free)), OK);
            assert_eq!(aclrtAllocatorSetGetAddrFromBlockFuncToDesc(d, get_addr), OK);
            d as usize
        };
        assert_eq!(aclrtSetDevice(0), OK);
        let (mut pool, mut pool_desc) = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: valid out-pointers; NULL config is the defaults.
        assert_eq!(
            unsafe { aclallocPoolCreate(std::ptr::null(), &mut pool, &mut pool_desc) },
            OK
        );
        assert_eq!(aclrtResetDevice(0), OK);
        Descs {
            kinds: [
                (Kind::Counting, make(Some(count_alloc), Some(count_addr))),
                (Kind::NullAlloc, make(Some(null_alloc), Some(count_addr))),
                (Kind::NullAddr, make(Some(count_alloc), Some(null_addr))),
                (Kind::Pool, pool_desc as usize),
            ],
            pool: pool as usize,
        }
    })
}

struct StreamModel {
    handle: usize,
    alive: bool,
    /// (device, generation of its default context).
    context: (usize, usize),
    channel: Arc<Channel>,
    launched: usize,
}

#[derive(Default)]
struct Model {
    set_count: [usize; DEVICES],
    /// Bumped each time a device's default context is released.
    generation: [usize; DEVICES],
    /// (device, generation) of the thread's current context.
    current: Option<(usize, usize)>,
    streams: Vec<StreamModel>,
    /// Default streams of contexts, by (device, generation): their channel
    /// and launch count.
    defaults: HashMap<(usize, usize), (Arc<Channel>, usize)>,
    registered: HashMap<usize, Kind>,
    args: Vec<Box<LaunchArg>>,
    failed: Vec<&'static str>,
    baseline: (usize, usize),
    vm: VmModel,
}

impl Model {
    fn expect(&mut self, function: &'static str, got: aclError, want: aclError) {
        if got != want {
            // What the library said, for the finding's report.
            let text = aclGetRecentErrMsg();
            let said = if text.is_null() {
                String::from("(no message)")
            } else {
                // SAFETY: a NUL-terminated string valid until this thread's next call.
                unsafe { std::ffi::CStr::from_ptr(text) }
                    .to_string_lossy()
                    .into_owned()
            };
            panic!("{function}: returned {got}, the model expects {want}; the message:\n{said}");
        }
        if want != OK {
            self.failed.push(function);
        }
    }

    /// The messages are exactly this op's failures, newest first, apart
    /// from the device's own refusals.
    fn check_messages(&mut self) {
        messages::check(std::mem::take(&mut self.failed), &DEVICE_LINES);
    }

    /// The stream handle and its index among the run's streams.
    fn pick(&self, s: StreamPick) -> (usize, Option<usize>) {
        match s {
            StreamPick::Null => (0, None),
            StreamPick::Created(i) if self.streams.is_empty() => {
                (0xACA3usize << 48 | i as usize, None)
            }
            StreamPick::Created(i) => {
                let i = i as usize % self.streams.len();
                (self.streams[i].handle, Some(i))
            }
            StreamPick::Forged(v) => (
                v as usize,
                self.streams.iter().position(|s| s.handle == v as usize),
            ),
        }
    }

    fn current_alive(&self) -> Option<(usize, usize)> {
        self.current
            .filter(|&(d, g)| self.set_count[d] > 0 && self.generation[d] == g)
    }

    /// Every kernel launched on `i` has run.
    fn settled(channel: &Channel, launched: usize) {
        assert_eq!(
            channel.runs.load(Ordering::Acquire),
            launched,
            "a launched kernel did not run"
        );
        assert_eq!(
            channel.bad.load(Ordering::Relaxed),
            0,
            "a kernel saw a wrong workspace"
        );
    }

    /// The default context of `device` is released: its streams are
    /// destroyed after their pending work.
    fn release_context(&mut self, device: usize) {
        let ctx = (device, self.generation[device]);
        for s in &mut self.streams {
            if s.alive && s.context == ctx {
                s.alive = false;
                Self::settled(&s.channel, s.launched);
                self.registered.remove(&s.handle);
            }
        }
        if let Some((ch, n)) = self.defaults.remove(&ctx) {
            Self::settled(&ch, n);
        }
        self.generation[device] += 1;
    }

    fn apply(&mut self, op: Op) {
        match op {
            Op::Init => {
                // SAFETY: NULL is a valid config path.
                let rc = unsafe { aclInit(std::ptr::null()) };
                self.expect("aclInit", rc, REPEAT_INITIALIZE);
            }
            Op::SetDevice(d) => {
                let id = d as i32 % 4 - 1;
                let rc = aclrtSetDevice(id);
                if (0..DEVICES as i32).contains(&id) {
                    self.expect("aclrtSetDevice", rc, OK);
                    let d = id as usize;
                    self.set_count[d] += 1;
                    self.current = Some((d, self.generation[d]));
                } else {
                    self.expect("aclrtSetDevice", rc, INVALID_DEVICE);
                }
            }
            Op::ResetDevice(d, force) => {
                let id = d as i32 % 4 - 1;
                let rc = if force {
                    aclrtResetDeviceForce(id)
                } else {
                    aclrtResetDevice(id)
                };
                let function = if force {
                    "aclrtResetDeviceForce"
                } else {
                    "aclrtResetDevice"
                };
                if !(0..DEVICES as i32).contains(&id) {
                    return self.expect(function, rc, INVALID_DEVICE);
                }
                self.expect(function, rc, OK);
                let d = id as usize;
                if self.set_count[d] > 0 {
                    self.set_count[d] = if force { 0 } else { self.set_count[d] - 1 };
                    if self.set_count[d] == 0 {
                        self.release_context(d);
                    }
                }
            }
            Op::CreateStream => {
                if self.streams.iter().filter(|s| s.alive).count() >= MAX_STREAMS {
                    return;
                }
                let mut stream = std::ptr::null_mut();
                // SAFETY: a valid out-pointer.
                let rc = unsafe { aclrtCreateStream(&mut stream) };
                match self.current_alive() {
                    Some(ctx) => {
                        self.expect("aclrtCreateStream", rc, OK);
                        assert!(
                            self.streams.iter().all(|s| s.handle != stream as usize),
                            "reused"
                        );
                        self.streams.push(StreamModel {
                            handle: stream as usize,
                            alive: true,
                            context: ctx,
                            channel: Arc::default(),
                            launched: 0,
                        });
                    }
                    None => {
                        self.expect("aclrtCreateStream", rc, CONTEXT_NULL);
                        assert!(stream.is_null());
                    }
                }
            }
            Op::DestroyStream(s, force) => {
                let (handle, i) = self.pick(s);
                // SAFETY: the host runtime looks the handle up.
                let rc = unsafe {
                    if force {
                        aclrtDestroyStreamForce(handle as *mut c_void)
                    } else {
                        aclrtDestroyStream(handle as *mut c_void)
                    }
                };
                let function = if force {
                    "aclrtDestroyStreamForce"
                } else {
                    "aclrtDestroyStream"
                };
                match i.filter(|&i| self.streams[i].alive) {
                    Some(i) => {
                        self.expect(function, rc, OK);
                        let st = &mut self.streams[i];
                        st.alive = false;
                        if force {
                            // The call returned without waiting; the queued
                            // work still runs, and the device's synchronize
                            // waits for it (and drops the registration).
                            assert_eq!(aclrtSynchronizeDevice(), OK);
                        }
                        Self::settled(&st.channel, st.launched);
                        self.registered.remove(&handle);
                    }
                    None => self.expect(function, rc, INVALID_PARAM),
                }
            }
            Op::Register(s, kind) => {
                let (handle, _) = self.pick(s);
                let desc = descs().kinds.iter().find(|k| k.0 == kind).unwrap().1;
                let rc = aclrtAllocatorRegister(handle as *mut c_void, desc as *mut c_void);
                // A value of the runtime's stream range names a live stream
                // or is refused. Default streams, whose handles the model
                // does not hold, are asked of the runtime.
                let dead = handle >> 48 == 0xACA3
                    && handle & ((1 << 48) - 1) != 0
                    && !self.streams.iter().any(|s| s.handle == handle && s.alive)
                    && aclalloc::StreamKey::from_ptr(handle as *mut c_void).is_some_and(|k| {
                        aclalloc::ffi::wiring::host::host()
                            .check_stream_value(k)
                            .is_err()
                    });
                if handle == 0 || dead {
                    self.expect("aclrtAllocatorRegister", rc, INVALID_PARAM);
                } else {
                    self.expect("aclrtAllocatorRegister", rc, OK);
                    self.registered.insert(handle, kind);
                }
            }
            Op::Unregister(s) => {
                let (handle, _) = self.pick(s);
                let rc = aclrtAllocatorUnregister(handle as *mut c_void);
                let want = if handle == 0 { INVALID_PARAM } else { OK };
                self.expect("aclrtAllocatorUnregister", rc, want);
                self.registered.remove(&handle);
            }
            Op::Launch(s, size) => self.launch(s, size),
            Op::Synchronize(s) => {
                let (handle, i) = self.pick(s);
                // SAFETY: the host runtime looks the handle up.
                let rc = unsafe { aclrtSynchronizeStream(handle as *mut c_void) };
                if handle == 0 {
                    match self.current_alive() {
                        Some(ctx) => {
                            self.expect("aclrtSynchronizeStream", rc, OK);
                            if let Some((ch, n)) = self.defaults.get(&ctx) {
                                Self::settled(ch, *n);
                            } else {
                                // The sync made the default stream.
                                self.defaults.insert(ctx, (Arc::default(), 0));
                            }
                        }
                        None => self.expect("aclrtSynchronizeStream", rc, CONTEXT_NULL),
                    }
                    return;
                }
                match i.filter(|&i| self.streams[i].alive) {
                    Some(i) => {
                        self.expect("aclrtSynchronizeStream", rc, OK);
                        Self::settled(&self.streams[i].channel, self.streams[i].launched);
                    }
                    None => self.expect("aclrtSynchronizeStream", rc, INVALID_PARAM),
                }
            }
            Op::SynchronizeDevice => self.synchronize_device(),
            Op::EventOrder(a, b) => self.event_order(a, b),
            Op::NotifyOrder(a, b, by_key) => self.notify_order(a, b, by_key),
            Op::StreamControl(f, v, m) => self.stream_control(f, v, m),
            Op::TimedEventOrder(a, b, f, t) => self.timed_event_order(a, b, f, t),
            Op::ShareHere(k) => self.share_here(k),
            Op::StreamOrdered(a, b, n, own) => self.stream_ordered(a, b, n, own),
            Op::Region(n, offload, free_asleep) => self.region(n, offload, free_asleep),
            Op::Newer(op) => self.newer(op),
            Op::Reserve(..)
            | Op::Release(_)
            | Op::MallocPhysical(..)
            | Op::FreePhysical(..)
            | Op::Map(..)
            | Op::Unmap(..)
            | Op::Touch(_)
            | Op::CopyIn(..) => self.virtual_memory(op),
        }
    }

    /// Whether `handle` (0: the current context's default stream) names a
    /// stream the runtime must accept.
    fn accepts(&self, handle: usize, i: Option<usize>) -> bool {
        if handle == 0 {
            self.current_alive().is_some()
        } else {
            i.is_some_and(|i| self.streams[i].alive)
        }
    }

    fn event_order(&mut self, a: StreamPick, b: StreamPick) {
        use aclalloc::ffi::cann::events::*;
        let mut event = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        let rc = unsafe { aclrtCreateEvent(&mut event) };
        if self.current_alive().is_none() {
            self.expect("aclrtCreateEvent", rc, CONTEXT_NULL);
            return;
        }
        self.expect("aclrtCreateEvent", rc, OK);
        let ((ha, ia), (hb, ib)) = (self.pick(a), self.pick(b));
        let (a_ok, b_ok) = (self.accepts(ha, ia), self.accepts(hb, ib));
        if ha == 0 || hb == 0 {
            // NULL is the default stream, made by its first use.
            let ctx = self.current_alive().expect("checked above");
            self.defaults
                .entry(ctx)
                .or_insert_with(|| (Arc::default(), 0));
        }
        // SAFETY: the host runtime looks the handles up.
        let rc = unsafe { aclrtRecordEvent(event, ha as *mut c_void) };
        self.expect(
            "aclrtRecordEvent",
            rc,
            if a_ok { OK } else { INVALID_PARAM },
        );
        // SAFETY: as above.
        let rc = unsafe { aclrtStreamWaitEvent(hb as *mut c_void, event) };
        self.expect(
            "aclrtStreamWaitEvent",
            rc,
            if b_ok { OK } else { INVALID_PARAM },
        );
        if a_ok && b_ok {
            // SAFETY: as above.
            let rc = unsafe { aclrtSynchronizeStream(hb as *mut c_void) };
            self.expect("aclrtSynchronizeStream", rc, OK);
            self.record_ran(event, ha, ia);
        }
        // SAFETY: a live event.
        let rc = unsafe { aclrtDestroyEvent(event) };
        self.expect("aclrtDestroyEvent", rc, OK);
    }

    /// After a waiting stream was synchronized: the event's record on the
    /// stream `(handle, index)` has run, and so has everything launched on
    /// it before the record.
    fn record_ran(&mut self, event: *mut c_void, handle: usize, index: Option<usize>) {
        use aclalloc::ffi::cann::events::*;
        let mut status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
        // SAFETY: a live event, a valid out-pointer.
        let rc = unsafe { aclrtQueryEventStatus(event, &mut status) };
        self.expect("aclrtQueryEventStatus", rc, OK);
        assert_eq!(
            status, ACL_EVENT_RECORDED_STATUS_COMPLETE,
            "the waiter went first"
        );
        self.launched_before_ran(handle, index);
    }

    /// Everything launched on the stream `(handle, index)` so far has run.
    fn launched_before_ran(&self, handle: usize, index: Option<usize>) {
        if let Some(i) = index.filter(|_| handle != 0) {
            Self::settled(&self.streams[i].channel, self.streams[i].launched);
        }
    }

    /// The model's default stream of the current context exists once a
    /// NULL stream among `handles` has been used.
    fn touch_default(&mut self, handles: &[usize]) {
        if handles.contains(&0) {
            if let Some(ctx) = self.current_alive() {
                self.defaults
                    .entry(ctx)
                    .or_insert_with(|| (Arc::default(), 0));
            }
        }
    }

    fn notify_order(&mut self, a: StreamPick, b: StreamPick, by_key: bool) {
        use aclalloc::ffi::cann::notify::*;
        let mut n = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        let rc = unsafe { aclrtCreateNotify(&mut n, ACL_NOTIFY_DEFAULT as u64) };
        if self.current_alive().is_none() {
            return self.expect("aclrtCreateNotify", rc, CONTEXT_NULL);
        }
        self.expect("aclrtCreateNotify", rc, OK);
        let waited = if by_key {
            let mut key = [0 as std::ffi::c_char; 65];
            // SAFETY: a live notify, a 65-byte buffer.
            let rc = unsafe {
                aclrtNotifyGetExportKey(
                    n,
                    key.as_mut_ptr(),
                    key.len(),
                    ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION,
                )
            };
            self.expect("aclrtNotifyGetExportKey", rc, OK);
            let mut m = std::ptr::null_mut();
            // SAFETY: a valid out-pointer and key.
            let rc = unsafe { aclrtNotifyImportByKey(&mut m, key.as_ptr(), 0) };
            self.expect("aclrtNotifyImportByKey", rc, OK);
            m
        } else {
            n
        };
        let ((ha, ia), (hb, ib)) = (self.pick(a), self.pick(b));
        let (a_ok, b_ok) = (self.accepts(ha, ia), self.accepts(hb, ib));
        self.touch_default(&[ha]);
        // SAFETY: the host runtime looks the handles up.
        let rc = unsafe { aclrtRecordNotify(n, ha as *mut c_void) };
        self.expect(
            "aclrtRecordNotify",
            rc,
            if a_ok { OK } else { INVALID_PARAM },
        );
        // A wait with no record before it would hold its stream for good.
        if a_ok || !b_ok {
            self.touch_default(&[hb]);
            // SAFETY: as above.
            let rc = unsafe { aclrtWaitAndResetNotify(waited, hb as *mut c_void, 0) };
            self.expect(
                "aclrtWaitAndResetNotify",
                rc,
                if b_ok { OK } else { INVALID_PARAM },
            );
        }
        if a_ok && b_ok {
            // SAFETY: as above.
            let rc = unsafe { aclrtSynchronizeStream(hb as *mut c_void) };
            self.expect("aclrtSynchronizeStream", rc, OK);
            // The record ran, after everything launched on `a` before it.
            self.launched_before_ran(ha, ia);
        }
        let mut both = [n, waited];
        // SAFETY: two live notifies.
        let rc = unsafe { aclrtNotifyBatchReset(both.as_mut_ptr(), both.len()) };
        self.expect("aclrtNotifyBatchReset", rc, OK);
        if by_key {
            // SAFETY: a live notify.
            let rc = unsafe { aclrtDestroyNotify(waited) };
            self.expect("aclrtDestroyNotify", rc, OK);
        }
        // SAFETY: a live notify, then a dead one.
        unsafe {
            self.expect("aclrtDestroyNotify", aclrtDestroyNotify(n), OK);
            self.expect("aclrtDestroyNotify", aclrtDestroyNotify(n), INVALID_PARAM);
        }
    }

    fn stream_control(&mut self, flag: u8, value: u8, how: u8) {
        use aclalloc::ffi::cann::memory::*;
        use aclalloc::ffi::cann::stream_control::*;
        if self.current_alive().is_none() {
            return;
        }
        let mut s = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        let rc = unsafe { aclrtCreateStream(&mut s) };
        self.expect("aclrtCreateStream", rc, OK);
        let mut word = std::ptr::null_mut();
        // SAFETY: a valid out-pointer. The device may be full (its refusal
        // is one of the lines the check skips).
        if unsafe { aclrtMalloc(&mut word, 8, ACL_MEM_MALLOC_HUGE_FIRST) } != OK {
            // SAFETY: a live stream.
            let rc = unsafe { aclrtDestroyStream(s) };
            return self.expect("aclrtDestroyStream", rc, OK);
        }
        let value = u64::from(value) + 1;
        let flag = u32::from(flag % 5);
        // SAFETY: 8 bytes of device memory and a live stream.
        unsafe {
            self.expect("aclrtMemset", aclrtMemset(word, 8, 0, 8), OK);
            let rc = aclrtValueWrite(word, value, 0, s);
            self.expect("aclrtValueWrite", rc, OK);
            // The word holds `value` (at most 256) when the wait runs: each
            // of GEQ, EQ, AND and NOR holds.
            let rc = aclrtValueWait(word, value, flag, s);
            self.expect(
                "aclrtValueWait",
                rc,
                if flag <= ACL_STREAM_WAIT_VALUE_NOR {
                    OK
                } else {
                    INVALID_PARAM
                },
            );
            match how % 3 {
                0 => {
                    let rc = aclrtSynchronizeStreamWithTimeout(s, 60_000);
                    self.expect("aclrtSynchronizeStreamWithTimeout", rc, OK);
                    assert_eq!((word as *const u64).read_volatile(), value, "value write");
                }
                1 => {
                    self.expect("aclrtStreamStop", aclrtStreamStop(s), OK);
                    // The stop may have caught the write before it ran (it
                    // then never runs) and the wait after it is kept: set
                    // the word as another agent would, or the wait (and the
                    // destroy that waits for it) would never end.
                    (word as *mut u64).write_volatile(value);
                }
                _ => self.expect("aclrtStreamAbort", aclrtStreamAbort(s), OK),
            }
            self.expect("aclrtDestroyStream", aclrtDestroyStream(s), OK);
            self.expect("aclrtFree", aclrtFree(word), OK);
        }
    }

    fn timed_event_order(&mut self, a: StreamPick, b: StreamPick, flag: u8, timeout: u8) {
        use aclalloc::ffi::cann::events::*;
        let mut event = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        let rc = unsafe { aclrtCreateEvent(&mut event) };
        if self.current_alive().is_none() {
            return self.expect("aclrtCreateEvent", rc, CONTEXT_NULL);
        }
        self.expect("aclrtCreateEvent", rc, OK);
        let ((ha, ia), (hb, ib)) = (self.pick(a), self.pick(b));
        let (a_ok, b_ok) = (self.accepts(ha, ia), self.accepts(hb, ib));
        let flag = u32::from(flag % 3);
        let timeout = i32::from(timeout % 3) - 1;
        // A refused flag or timeout is seen before the stream is.
        if flag <= ACL_EVENT_RECORD_EXTERNAL {
            self.touch_default(&[ha]);
        }
        if timeout >= 0 {
            self.touch_default(&[hb]);
        }
        // SAFETY: the host runtime looks the handles up.
        let rc = unsafe { aclrtRecordEventWithFlag(event, ha as *mut c_void, flag) };
        let recorded = a_ok && flag <= ACL_EVENT_RECORD_EXTERNAL;
        let want = if recorded { OK } else { INVALID_PARAM };
        self.expect("aclrtRecordEventWithFlag", rc, want);
        // SAFETY: as above.
        let rc = unsafe { aclrtStreamWaitEventWithTimeout(hb as *mut c_void, event, timeout) };
        let waited = b_ok && timeout >= 0;
        let want = if waited { OK } else { INVALID_PARAM };
        self.expect("aclrtStreamWaitEventWithTimeout", rc, want);
        if waited {
            // SAFETY: as above.
            let rc = unsafe { aclrtSynchronizeStream(hb as *mut c_void) };
            self.expect("aclrtSynchronizeStream", rc, OK);
            if recorded {
                self.record_ran(event, ha, ia);
            }
        }
        // SAFETY: a live event.
        let rc = unsafe { aclrtDestroyEvent(event) };
        self.expect("aclrtDestroyEvent", rc, OK);
    }

    fn stream_ordered(&mut self, a: StreamPick, b: StreamPick, n: u32, own: bool) {
        use aclalloc::ffi::cann::stream_ordered::*;
        use aclalloc::ffi::cann::types::*;
        let mut props = aclrtMemPoolProps {
            allocType: ACL_MEM_ALLOCATION_TYPE_PINNED,
            handleType: ACL_MEM_HANDLE_TYPE_NONE,
            location: aclrtMemLocation {
                id: 0,
                r#type: ACL_MEM_LOCATION_TYPE_DEVICE,
            },
            maxSize: 0,
            reserved: [0; 32],
        };
        let mut pool = std::ptr::null_mut();
        let Some((device, _)) = self.current_alive() else {
            // SAFETY: valid pointers.
            let rc = unsafe { aclrtMemPoolCreate(&mut pool, &props) };
            return self.expect("aclrtMemPoolCreate", rc, CONTEXT_NULL);
        };
        props.location.id = device as u32;
        // SAFETY: valid pointers.
        let rc = unsafe { aclrtMemPoolCreate(&mut pool, &props) };
        self.expect("aclrtMemPoolCreate", rc, OK);
        let ((ha, ia), (hb, ib)) = (self.pick(a), self.pick(b));
        let (ha, ia, hb, ib) = if own {
            (ha, ia, ha, ia)
        } else {
            (ha, ia, hb, ib)
        };
        // Only streams the runtime accepts: the refusals are the runtime
        // ops' to check.
        if !self.accepts(ha, ia) || !self.accepts(hb, ib) {
            // SAFETY: a live pool.
            let rc = unsafe { aclrtMemPoolDestroy(pool) };
            return self.expect("aclrtMemPoolDestroy", rc, OK);
        }
        // A NULL stream makes the context's default stream when a call
        // resolves it: the allocation's now, the free's below.
        self.touch_default(&[ha]);
        let size = 1 + n as usize % MIB;
        let mut ptr = std::ptr::null_mut();
        // SAFETY: a valid out-pointer, a live pool and stream.
        let rc = unsafe { aclrtMemPoolMallocAsync(&mut ptr, size, pool, ha as *mut c_void) };
        if rc == MEMORY_ALLOCATION {
            // The device is full of what other ops hold (the model does not
            // count device memory): a clean refusal, and nothing written.
            assert!(ptr.is_null());
            self.failed.push("aclrtMemPoolMallocAsync");
            // SAFETY: a live pool with nothing allocated.
            let rc = unsafe { aclrtMemPoolDestroy(pool) };
            return self.expect("aclrtMemPoolDestroy", rc, OK);
        }
        self.expect("aclrtMemPoolMallocAsync", rc, OK);
        self.touch_default(&[hb]);
        let mut used = 0u64;
        let attr = ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT;
        // SAFETY: room for a uint64_t.
        let rc = unsafe { aclrtMemPoolGetAttr(pool, attr, (&mut used as *mut u64).cast()) };
        self.expect("aclrtMemPoolGetAttr", rc, OK);
        assert!(used as usize >= size, "{used} bytes in use after {size}");
        // SAFETY: the block and live streams; the second free is refused.
        unsafe {
            let rc = aclrtMemPoolFreeAsync(ptr, hb as *mut c_void);
            self.expect("aclrtMemPoolFreeAsync", rc, OK);
            let rc = aclrtMemPoolFreeAsync(ptr, hb as *mut c_void);
            self.expect("aclrtMemPoolFreeAsync", rc, INVALID_PARAM);
            // The free has run once the freeing stream is synchronized.
            let rc = aclrtSynchronizeStream(hb as *mut c_void);
            self.expect("aclrtSynchronizeStream", rc, OK);
            if let Some(i) = ib {
                Self::settled(&self.streams[i].channel, self.streams[i].launched);
            }
            let rc = aclrtMemPoolGetAttr(pool, attr, (&mut used as *mut u64).cast());
            self.expect("aclrtMemPoolGetAttr", rc, OK);
            assert_eq!(used, 0, "nothing in use after the free ran");
            self.expect("aclrtMemPoolTrimTo", aclrtMemPoolTrimTo(pool, 0), OK);
            self.expect("aclrtMemPoolDestroy", aclrtMemPoolDestroy(pool), OK);
        }
    }

    fn share_here(&mut self, kind: u8) {
        let Some((device, _)) = self.current_alive() else {
            return;
        };
        match kind % 3 {
            0 => self.share_physical(device),
            1 => self.share_ipc_memory(),
            _ => self.share_ipc_event(),
        }
    }

    fn share_physical(&mut self, device: usize) {
        use aclalloc::ffi::cann::sharing::*;
        use aclalloc::ffi::cann::virtual_memory::*;
        let prop = aclrtPhysicalMemProp {
            handleType: ACL_MEM_HANDLE_TYPE_NONE,
            allocationType: ACL_MEM_ALLOCATION_TYPE_PINNED,
            memAttr: ACL_HBM_MEM_HUGE,
            location: aclrtMemLocation {
                id: device as u32,
                r#type: ACL_MEM_LOCATION_TYPE_DEVICE,
            },
            reserve: 0,
        };
        let mut h = std::ptr::null_mut();
        // SAFETY: valid pointers.
        let rc = unsafe { aclrtMallocPhysical(&mut h, GRANULE, &prop, 0) };
        if rc != OK {
            // The device's memory is shared with the rest of the run.
            return self.expect("aclrtMallocPhysical", rc, MEMORY_ALLOCATION);
        }
        let (mut shared, mut again, mut imported) = (0u64, 0u64, std::ptr::null_mut());
        // SAFETY: a live handle, valid out-pointers.
        unsafe {
            let rc = aclrtMemExportToShareableHandle(h, ACL_MEM_HANDLE_TYPE_NONE, 1, &mut shared);
            self.expect("aclrtMemExportToShareableHandle", rc, OK);
            let rc = aclrtMemExportToShareableHandle(h, ACL_MEM_HANDLE_TYPE_NONE, 1, &mut again);
            self.expect("aclrtMemExportToShareableHandle", rc, INVALID_PARAM);
            let rc = aclrtMemImportFromShareableHandle(shared, device as i32, &mut imported);
            self.expect("aclrtMemImportFromShareableHandle", rc, INVALID_PARAM);
            self.expect("aclrtFreePhysical", aclrtFreePhysical(h), OK);
        }
        assert_eq!(
            (again, imported),
            (0, std::ptr::null_mut()),
            "written on failure"
        );
    }

    fn share_ipc_memory(&mut self) {
        use aclalloc::ffi::cann::ipc_memory::*;
        use aclalloc::ffi::cann::memory::*;
        const SIZE: usize = 2 * 4096;
        let mut p = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; a refusal is one of the skipped lines.
        if unsafe { aclrtMalloc(&mut p, SIZE, ACL_MEM_MALLOC_HUGE_FIRST) } != OK {
            return;
        }
        let mut key = [0 as std::ffi::c_char; 65];
        let mut q = std::ptr::null_mut();
        // SAFETY: device memory is host memory on the host runtime; valid
        // out-pointers; `q` is the same memory mapped again.
        unsafe {
            p.cast::<u8>().write(0x42);
            let rc = aclrtIpcMemGetExportKey(
                p,
                SIZE,
                key.as_mut_ptr(),
                key.len(),
                ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION,
            );
            self.expect("aclrtIpcMemGetExportKey", rc, OK);
            let rc = aclrtIpcMemImportByKey(&mut q, key.as_ptr(), 0);
            self.expect("aclrtIpcMemImportByKey", rc, OK);
            assert_ne!(p, q, "imported at an address of its own");
            assert_eq!(
                q.cast::<u8>().read_volatile(),
                0x42,
                "the export's contents"
            );
            q.cast::<u8>().add(SIZE - 1).write_volatile(0x24);
            assert_eq!(
                p.cast::<u8>().add(SIZE - 1).read_volatile(),
                0x24,
                "the same pages"
            );
            // The import's close, the export's, then nothing is left.
            self.expect("aclrtIpcMemClose", aclrtIpcMemClose(key.as_ptr()), OK);
            self.expect("aclrtIpcMemClose", aclrtIpcMemClose(key.as_ptr()), OK);
            let rc = aclrtIpcMemClose(key.as_ptr());
            self.expect("aclrtIpcMemClose", rc, INVALID_PARAM);
            self.expect("aclrtFree", aclrtFree(p), OK);
        }
    }

    fn share_ipc_event(&mut self) {
        use aclalloc::ffi::cann::events::*;
        use aclalloc::ffi::cann::ipc_events::*;
        self.touch_default(&[0]);
        let (mut e, mut opened) = (std::ptr::null_mut(), std::ptr::null_mut());
        let mut h = aclrtIpcEventHandle { reserved: [0; 64] };
        let null = std::ptr::null_mut();
        // SAFETY: valid out-pointers; live handles; NULL is the default stream.
        unsafe {
            let rc = aclrtCreateEventExWithFlag(&mut e, ACL_EVENT_IPC);
            self.expect("aclrtCreateEventExWithFlag", rc, OK);
            self.expect(
                "aclrtIpcGetEventHandle",
                aclrtIpcGetEventHandle(e, &mut h),
                OK,
            );
            let rc = aclrtIpcOpenEventHandle(h, &mut opened);
            self.expect("aclrtIpcOpenEventHandle", rc, OK);
            self.expect("aclrtRecordEvent", aclrtRecordEvent(e, null), OK);
            let rc = aclrtStreamWaitEvent(null, opened);
            self.expect("aclrtStreamWaitEvent", rc, OK);
            self.expect("aclrtSynchronizeEvent", aclrtSynchronizeEvent(opened), OK);
            self.record_ran(opened, 0, None);
            self.expect("aclrtDestroyEvent", aclrtDestroyEvent(opened), OK);
            self.expect("aclrtDestroyEvent", aclrtDestroyEvent(e), OK);
            let mut again = std::ptr::null_mut();
            let rc = aclrtIpcOpenEventHandle(h, &mut again);
            self.expect("aclrtIpcOpenEventHandle", rc, INVALID_PARAM);
            assert!(again.is_null(), "written on failure");
        }
    }

    /// The virtual-memory ops against [`VmModel`].
    fn virtual_memory(&mut self, op: Op) {
        use aclalloc::ffi::cann::virtual_memory::*;
        let prop = |device: u32| aclrtPhysicalMemProp {
            handleType: ACL_MEM_HANDLE_TYPE_NONE,
            allocationType: ACL_MEM_ALLOCATION_TYPE_PINNED,
            memAttr: ACL_HBM_MEM_HUGE,
            location: aclrtMemLocation {
                id: device,
                r#type: ACL_MEM_LOCATION_TYPE_DEVICE,
            },
            reserve: 0,
        };
        let vm = &mut self.vm;
        let res_addr = |vm: &VmModel, r: u8, g: u8| {
            if vm.reservations.is_empty() {
                GRANULE * (1 + g as usize)
            } else {
                vm.reservations[r as usize % vm.reservations.len()].0 + (g as usize % 8) * GRANULE
            }
        };
        match op {
            Op::Reserve(n, flags) => {
                let size = (n as usize % 8) * GRANULE;
                let flags = (flags % 4) as u64;
                let mut va = std::ptr::null_mut();
                // SAFETY: a valid out-pointer.
                let rc = unsafe {
                    aclrtReserveMemAddress(&mut va, size, 0, std::ptr::null_mut(), flags)
                };
                let want = if size == 0 || flags > 2 {
                    INVALID_PARAM
                } else {
                    OK
                };
                if rc == OK {
                    assert_eq!(va as usize % GRANULE, 0, "reservation alignment");
                    self.vm.reservations.push((va as usize, size, true));
                }
                self.expect("aclrtReserveMemAddress", rc, want);
            }
            Op::Release(n) => {
                let addr = res_addr(vm, n, 0);
                let live = vm
                    .reservations
                    .iter()
                    .position(|&(a, _, alive)| alive && a == addr);
                let want = match live {
                    None => INVALID_PARAM,
                    Some(i) => {
                        let (a, size, _) = vm.reservations[i];
                        if vm.mappings.range(a..a + size).next().is_some() {
                            RELATIVE_RESOURCE_NOT_CLEARED
                        } else {
                            vm.reservations[i].2 = false;
                            OK
                        }
                    }
                };
                // SAFETY: the address is looked up.
                let rc = unsafe { aclrtReleaseMemAddress(addr as *mut c_void) };
                self.expect("aclrtReleaseMemAddress", rc, want);
            }
            Op::MallocPhysical(n, d) => {
                if vm.physical.iter().filter(|p| p.2 || p.3 > 0).count() >= 8 {
                    return;
                }
                let size = (n as usize % 5) * GRANULE;
                let device = (d % 3) as u32;
                let mut h = std::ptr::null_mut();
                // SAFETY: valid pointers.
                let rc = unsafe { aclrtMallocPhysical(&mut h, size, &prop(device), 0) };
                if size == 0 {
                    return self.expect("aclrtMallocPhysical", rc, INVALID_PARAM);
                }
                if device as usize >= DEVICES {
                    return self.expect("aclrtMallocPhysical", rc, INVALID_DEVICE);
                }
                // The device's memory is shared with the pool and the
                // default allocator: either outcome.
                assert!(
                    rc == OK || rc == MEMORY_ALLOCATION,
                    "aclrtMallocPhysical: {rc}"
                );
                if rc == OK {
                    vm.physical.push((h as usize, size, true, 0));
                } else {
                    self.failed.push("aclrtMallocPhysical");
                }
            }
            Op::FreePhysical(n, forged) => {
                let (handle, index) = match (forged, vm.physical.is_empty()) {
                    (Some(v), _) => (
                        v as usize,
                        vm.physical.iter().position(|p| p.0 == v as usize),
                    ),
                    (None, true) => return,
                    (None, false) => {
                        let i = n as usize % vm.physical.len();
                        (vm.physical[i].0, Some(i))
                    }
                };
                let want = match index {
                    Some(i) if vm.physical[i].2 => {
                        vm.physical[i].2 = false;
                        OK
                    }
                    _ => INVALID_PARAM,
                };
                // SAFETY: the handle is looked up.
                let rc = unsafe { aclrtFreePhysical(handle as *mut c_void) };
                self.expect("aclrtFreePhysical", rc, want);
            }
            Op::Map(r, g, p) => {
                if vm.physical.is_empty() {
                    return;
                }
                let va = res_addr(vm, r, g);
                let pi = p as usize % vm.physical.len();
                let (handle, size, alive, _) = vm.physical[pi];
                let fits = vm
                    .reservation_at(va)
                    .is_some_and(|(a, rsize)| va + size <= a + rsize);
                let overlaps = vm
                    .mappings
                    .range(..va + size)
                    .next_back()
                    .is_some_and(|(&m, &(msize, _))| m + msize > va);
                let want = if alive && fits && !overlaps {
                    OK
                } else {
                    INVALID_PARAM
                };
                // SAFETY: the arguments are looked up.
                let rc =
                    unsafe { aclrtMapMem(va as *mut c_void, size, 0, handle as *mut c_void, 0) };
                if rc == OK {
                    vm.mappings.insert(va, (size, pi));
                    vm.physical[pi].3 += 1;
                }
                self.expect("aclrtMapMem", rc, want);
            }
            Op::Unmap(r, g) => {
                let va = res_addr(vm, r, g);
                let want = match vm.mappings.remove(&va) {
                    Some((_, pi)) => {
                        vm.physical[pi].3 -= 1;
                        OK
                    }
                    None => INVALID_PARAM,
                };
                // SAFETY: the address is looked up; nothing queued uses it.
                let rc = unsafe { aclrtUnmapMem(va as *mut c_void) };
                self.expect("aclrtUnmapMem", rc, want);
            }
            Op::Touch(n) => {
                if vm.mappings.is_empty() {
                    return;
                }
                let (&va, &(size, _)) = vm
                    .mappings
                    .iter()
                    .nth(n as usize % vm.mappings.len())
                    .unwrap();
                // SAFETY: a live read-write mapping of `size` bytes.
                unsafe {
                    let p = va as *mut u8;
                    p.write(n);
                    p.add(size - 1).write(!n);
                    assert_eq!((*p, *p.add(size - 1)), (n, !n), "mapped memory");
                }
            }
            Op::CopyIn(n, o, l) => self.copy_in(n, o, l),
            _ => unreachable!(),
        }
    }

    fn copy_in(&mut self, n: u8, o: u16, l: u16) {
        let vm = &self.vm;
        let Some((&va, &(size, _))) = vm
            .mappings
            .iter()
            .nth(n as usize % vm.mappings.len().max(1))
        else {
            return;
        };
        let (start, len) = (va + o as usize * 97 % size, 1 + l as usize * 80);
        // Mapped all the way: adjacent mappings of one reservation count.
        let mut at = start;
        while at < start + len {
            match vm.mappings.range(..=at).next_back() {
                Some((&m, &(msize, _))) if at < m + msize => at = m + msize,
                _ => break,
            }
        }
        let covered = at >= start + len;
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + n as usize) as u8).collect();
        let dst = start as *mut c_void;
        // SAFETY: `data` holds `len` bytes; the runtime checks the device side.
        let rc = unsafe {
            aclrtMemcpy(dst, len, data.as_ptr().cast(), len, ACL_MEMCPY_HOST_TO_DEVICE)
        };
        if !covered {
            // Past the mapped memory: refused.
            self.expect("aclrtMemcpy", rc, INVALID_PARAM);
            return;
        }
        self.expect("aclrtMemcpy", rc, OK);
        let mut back = vec![0u8; len];
        // SAFETY: as above, the other way.
        let rc = unsafe {
            aclrtMemcpy(back.as_mut_ptr().cast(), len, dst, len, ACL_MEMCPY_DEVICE_TO_HOST)
        };
        self.expect("aclrtMemcpy", rc, OK);
        assert!(back == data, "mapped memory holds what was copied in");
    }

    fn region(&mut self, n: u8, offload: bool, free_asleep: bool) {
        use aclalloc::ffi::cann::memory::{aclrtFree, aclrtMalloc};
        use aclalloc::ffi::ext::pool::sleep::{aclallocSleep, aclallocWakeUp};
        use aclalloc::ffi::ext::region::{aclallocRegionBegin, aclallocRegionEnd};
        if self.current_alive().is_none() {
            return;
        }
        const SIZE: usize = 2 * MIB;
        let tag = c"fuzz_region";
        // SAFETY: a NUL-terminated tag.
        self.expect("aclallocRegionBegin", unsafe { aclallocRegionBegin(tag.as_ptr()) }, OK);
        let mut buffers = Vec::new();
        for i in 0..n % 3 + 1 {
            let mut p = std::ptr::null_mut();
            // SAFETY: a valid out-pointer.
            match unsafe { aclrtMalloc(&mut p, SIZE, ACL_MEM_MALLOC_HUGE_FIRST) } {
                OK => buffers.push((p, vec![i ^ n; SIZE])),
                // Region memory is physical memory: the device's refusal
                // of it is the older line, under `aclrtMalloc`'s own.
                MEMORY_ALLOCATION => {
                    self.failed.push("aclrtMallocPhysical");
                    break;
                }
                rc => self.expect("aclrtMalloc", rc, OK),
            }
        }
        self.expect("aclallocRegionEnd", aclallocRegionEnd(), OK);
        for (p, data) in &buffers {
            // SAFETY: `data` holds SIZE bytes; `p` is SIZE bytes of device memory.
            let rc = unsafe { aclrtMemcpy(*p, SIZE, data.as_ptr().cast(), SIZE, ACL_MEMCPY_HOST_TO_DEVICE) };
            self.expect("aclrtMemcpy", rc, OK);
        }
        let tags = [tag.as_ptr()];
        let offloaded = if offload { &tags[..] } else { &[][..] };
        // SAFETY: `offloaded` holds NUL-terminated tags.
        let rc = unsafe { aclallocSleep(offloaded.as_ptr(), offloaded.len()) };
        self.expect("aclallocSleep", rc, OK);
        if free_asleep && !buffers.is_empty() {
            let (p, _) = buffers.remove(0);
            // SAFETY: region memory of this op, freed once.
            self.expect("aclrtFree", unsafe { aclrtFree(p) }, OK);
        }
        // SAFETY: NULL with 0: every tag.
        let awake = match unsafe { aclallocWakeUp(std::ptr::null(), 0) } {
            OK => true,
            // What sleep gave back may have gone to other streams' work:
            // everything stays asleep, and is freed asleep below.
            MEMORY_ALLOCATION => {
                self.failed.push("aclallocWakeUp");
                false
            }
            rc => {
                self.expect("aclallocWakeUp", rc, OK);
                true
            }
        };
        for (p, data) in &buffers {
            if awake && offload {
                let mut back = vec![0u8; SIZE];
                // SAFETY: as above, the other way.
                let rc = unsafe { aclrtMemcpy(back.as_mut_ptr().cast(), SIZE, *p, SIZE, ACL_MEMCPY_DEVICE_TO_HOST) };
                self.expect("aclrtMemcpy", rc, OK);
                assert!(&back == data, "offloaded region memory woke with its contents");
            }
            // SAFETY: region memory of this op, freed once, asleep or awake.
            self.expect("aclrtFree", unsafe { aclrtFree(*p) }, OK);
        }
        if !awake {
            // Nothing of the tag is left: this wake only marks it awake.
            // SAFETY: as above.
            let rc = unsafe { aclallocWakeUp(std::ptr::null(), 0) };
            self.expect("aclallocWakeUp", rc, OK);
        }
    }

    /// Unmaps, frees and releases everything the run made.
    fn clean_up_virtual_memory(&mut self) {
        use aclalloc::ffi::cann::virtual_memory::*;
        let vm = std::mem::take(&mut self.vm);
        for &va in vm.mappings.keys() {
            // SAFETY: a live mapping.
            assert_eq!(unsafe { aclrtUnmapMem(va as *mut c_void) }, OK);
        }
        for &(h, _, alive, _) in &vm.physical {
            if alive {
                // SAFETY: a live handle.
                assert_eq!(unsafe { aclrtFreePhysical(h as *mut c_void) }, OK);
            }
        }
        for &(a, _, alive) in &vm.reservations {
            if alive {
                // SAFETY: a live reservation, nothing mapped.
                assert_eq!(unsafe { aclrtReleaseMemAddress(a as *mut c_void) }, OK);
            }
        }
    }

    fn synchronize_device(&mut self) {
        let rc = aclrtSynchronizeDevice();
        self.expect("aclrtSynchronizeDevice", rc, OK);
        for s in self.streams.iter().filter(|s| s.alive) {
            Self::settled(&s.channel, s.launched);
        }
        for (ch, n) in self.defaults.values() {
            Self::settled(ch, *n);
        }
    }

    fn launch(&mut self, s: StreamPick, size: Size) {
        let size = match size {
            Size::Zero => 0,
            Size::Small(v) => v as usize + 1,
            Size::Medium(v) => v as usize % (2 * MIB) + 1,
            Size::Big(v) => v as usize % (80 * MIB) + 1,
        };
        let (handle, i) = self.pick(s);
        // Where the launch goes: a live stream of the run, or the current
        // context's default stream; None: refused.
        let target = if handle == 0 {
            self.current_alive().map(|ctx| {
                let (ch, _) = self
                    .defaults
                    .entry(ctx)
                    .or_insert_with(|| (Arc::default(), 0));
                (Arc::clone(ch), None)
            })
        } else {
            i.filter(|&i| self.streams[i].alive)
                .map(|i| (Arc::clone(&self.streams[i].channel), Some(i)))
        };
        let kind = if handle == 0 {
            None
        } else {
            self.registered.get(&handle).copied()
        };
        let calls_counting = matches!(kind, Some(Kind::Counting | Kind::NullAddr));
        let arg = Box::new(LaunchArg {
            channel: target
                .as_ref()
                .map_or_else(Arc::default, |t| Arc::clone(&t.0)),
            size,
            counting: kind == Some(Kind::Counting),
        });
        let (allocs, frees) = {
            let c = counting().lock().unwrap();
            (c.allocs, c.frees)
        };
        // SAFETY: the kernel is safe on any thread; the argument lives until
        // the run has synchronized.
        let rc = unsafe {
            aclallocLaunchKernel(
                handle as *mut c_void,
                size,
                Some(kernel),
                &*arg as *const LaunchArg as *mut c_void,
            )
        };
        self.args.push(arg);
        let Some((_, index)) = target else {
            let want = if handle == 0 {
                CONTEXT_NULL
            } else {
                INVALID_PARAM
            };
            return self.expect("aclallocLaunchKernel", rc, want);
        };
        let want = match (size, kind) {
            (0, _) => Some(OK),
            (_, Some(Kind::Counting)) if size <= COUNTING_CAP => Some(OK),
            (_, Some(Kind::Counting | Kind::NullAlloc | Kind::NullAddr)) => Some(MEMORY_ALLOCATION),
            (_, _) if size > DEVICE_MIB * MIB => Some(MEMORY_ALLOCATION),
            // The pool and the default allocator share small devices with
            // cached memory: either outcome.
            _ => None,
        };
        let rc_ok = match want {
            Some(w) => {
                self.expect("aclallocLaunchKernel", rc, w);
                w == OK
            }
            None => {
                assert!(
                    rc == OK || rc == MEMORY_ALLOCATION,
                    "aclallocLaunchKernel: {rc}"
                );
                if rc != OK {
                    self.failed.push("aclallocLaunchKernel");
                }
                rc == OK
            }
        };
        let c = counting().lock().unwrap();
        if calls_counting && size > 0 && size <= COUNTING_CAP {
            assert_eq!(
                (c.allocs, c.frees),
                (allocs + 1, frees + 1),
                "one alloc, one free"
            );
        } else {
            assert_eq!(
                (c.allocs, c.frees),
                (allocs, frees),
                "the counting allocator was called"
            );
        }
        assert!(
            c.live.is_empty(),
            "a workspace was not freed after the launch"
        );
        drop(c);
        if kind == Some(Kind::Pool) {
            let mut bytes = usize::MAX;
            // SAFETY: a valid out-pointer.
            let rc =
                unsafe { aclallocPoolMemoryAllocated(descs().pool as *mut c_void, &mut bytes) };
            assert_eq!((rc, bytes), (OK, 0), "the pool still holds the workspace");
        }
        if rc_ok {
            match index {
                Some(i) => self.streams[i].launched += 1,
                None => {
                    let ctx = self.current_alive().unwrap();
                    self.defaults.get_mut(&ctx).unwrap().1 += 1;
                }
            }
        }
    }

    fn check_counts(&self) {
        let live = self.streams.iter().filter(|s| s.alive).count() + self.defaults.len();
        assert_eq!(
            aclalloc::ffi::wiring::host::host().live_streams(),
            self.baseline.0 + live,
            "live streams"
        );
        assert_eq!(
            aclalloc::global().streams().len(),
            self.baseline.1 + self.registered.len(),
            "registrations"
        );
    }

    fn clean_up(&mut self) {
        self.clean_up_virtual_memory();
        for d in 0..DEVICES {
            assert_eq!(aclrtResetDeviceForce(d as i32), OK);
            if self.set_count[d] > 0 {
                self.set_count[d] = 0;
                self.release_context(d);
            }
        }
        for &s in self.registered.keys() {
            assert_eq!(aclrtAllocatorUnregister(s as *mut c_void), OK);
        }
        self.registered.clear();
        self.check_messages();
        self.check_counts();
        assert_eq!(aclallocPoolEmptyCache(descs().pool as *mut c_void), OK);
        // Every kernel has run: the workspaces can go.
        let mut c = counting().lock().unwrap();
        assert_eq!(c.allocs, c.frees);
        *c = Counting::default();
    }
}

fn setup() {
    // Before the runtime's first use: two small devices.
    std::env::set_var("ACLALLOC_DEVICE_MEMORY", format!("{DEVICE_MIB}MiB"));
    std::env::set_var("ACLALLOC_DEVICE_COUNT", DEVICES.to_string());
    std::env::remove_var("ACLALLOC_ALLOC_CONF");
    // SAFETY: NULL is a valid config path.
    assert_eq!(unsafe { aclInit(std::ptr::null()) }, OK);
    descs();
    let _ = aclGetRecentErrMsg();
}

fuzz_target!(init: setup(), |ops: Vec<Op>| {
    let _ = aclGetRecentErrMsg();
    let mut model = Model {
        baseline: (
            aclalloc::ffi::wiring::host::host().live_streams(),
            aclalloc::global().streams().len(),
        ),
        ..Model::default()
    };
    for &op in ops.iter().take(MAX_OPS) {
        model.apply(op);
        model.check_messages();
        model.check_counts();
    }
    model.clean_up();
});
