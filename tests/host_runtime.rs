//! The host runtime's semantics, on private runtime instances (the stream
//! cache's keying is tested in `crates/aclalloc-runtime/src/launch_cache.rs`).

use aclalloc::runtime::config::Config;
use aclalloc::runtime::HostRuntime;
use aclalloc::{AllocatorApi, AllocatorObj, Error, StreamKey};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

fn runtime(devices: u32, memory: usize) -> HostRuntime {
    let api: &'static AllocatorApi = Box::leak(Box::new(AllocatorApi::new()));
    HostRuntime::new(
        Ok(Config {
            device_count: devices,
            device_memory: memory,
        }),
        api,
    )
}

/// A one-device runtime with device 0 current and a stream on it.
fn runtime_with_stream() -> (HostRuntime, StreamKey) {
    let rt = runtime(1, 1 << 20);
    rt.set_device(0).unwrap();
    let stream = rt.create_stream(0, 0).unwrap();
    (rt, stream)
}

/// A counting allocator whose blocks are boxes of bytes. A freed block is
/// kept, not released: blocks come back in stream order, while the kernel
/// that used one may still be pending (CANN's allocators reuse such blocks
/// only for later work on the same stream; this one never reuses them).
#[derive(Default)]
struct Counting {
    allocs: AtomicUsize,
    frees: AtomicUsize,
    refuse: AtomicBool,
    no_addr: AtomicBool,
    retired: parking_lot::Mutex<Vec<Block>>,
}

#[repr(C)]
struct Block {
    owner: *const Counting,
    bytes: Vec<u8>,
}

unsafe extern "C" fn counting_alloc(obj: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: registered with a `Counting` as its object.
    let c = unsafe { &*(obj as *const Counting) };
    if c.refuse.load(Ordering::SeqCst) {
        return std::ptr::null_mut();
    }
    c.allocs.fetch_add(1, Ordering::SeqCst);
    Box::into_raw(Box::new(Block {
        owner: c,
        bytes: vec![0; size],
    })) as *mut c_void
}

unsafe extern "C" fn counting_free(obj: *mut c_void, block: *mut c_void) {
    // SAFETY: registered with a `Counting`; blocks come from counting_alloc.
    let c = unsafe { &*(obj as *const Counting) };
    c.frees.fetch_add(1, Ordering::SeqCst);
    // SAFETY: `block` came from counting_alloc's `Box::into_raw` and is freed once.
    let block = unsafe { Box::from_raw(block as *mut Block) };
    c.retired.lock().push(*block);
}

unsafe extern "C" fn counting_addr(block: *mut c_void) -> *mut c_void {
    // SAFETY: blocks come from counting_alloc.
    let b = unsafe { &mut *(block as *mut Block) };
    // SAFETY: the owner outlives its blocks in these tests.
    if unsafe { &*b.owner }.no_addr.load(Ordering::SeqCst) {
        return std::ptr::null_mut();
    }
    b.bytes.as_mut_ptr() as *mut c_void
}

fn register(rt: &HostRuntime, stream: StreamKey, alloc: &Counting) {
    let api = rt.allocators();
    let d = api.create_descriptor().unwrap();
    api.update_descriptor(d, |d| {
        d.obj = AllocatorObj::new(alloc as *const Counting as *mut c_void);
        d.alloc = Some(counting_alloc);
        d.free = Some(counting_free);
        d.get_addr_from_block = Some(counting_addr);
    })
    .unwrap();
    api.register(stream, d).unwrap();
}

/// What a kernel saw.
#[derive(Default)]
struct Seen {
    runs: AtomicUsize,
    last_workspace: AtomicUsize,
    last_size: AtomicUsize,
    /// While set, the kernel waits (keeps later work pending).
    hold: AtomicBool,
    /// Frees its allocator had seen when the kernel started.
    frees_at_start: AtomicUsize,
    watch: AtomicUsize,
}

unsafe extern "C" fn record(workspace: *mut c_void, size: usize, seen: *mut c_void) {
    // SAFETY: the tests pass a `Seen` that outlives the stream's work.
    let seen = unsafe { &*(seen as *const Seen) };
    while seen.hold.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
    let watch = seen.watch.load(Ordering::SeqCst);
    if watch != 0 {
        // SAFETY: `watch` is a `Counting` the test keeps alive.
        let c = unsafe { &*(watch as *const Counting) };
        seen.frees_at_start
            .store(c.frees.load(Ordering::SeqCst), Ordering::SeqCst);
    }
    if size > 0 {
        // SAFETY: the workspace holds `size` bytes.
        unsafe { (workspace as *mut u8).write_bytes(0xA5, size) };
    }
    seen.last_workspace
        .store(workspace as usize, Ordering::SeqCst);
    seen.last_size.store(size, Ordering::SeqCst);
    seen.runs.fetch_add(1, Ordering::SeqCst);
}

fn ptr<T>(x: &T) -> *mut c_void {
    x as *const T as *mut c_void
}

#[test]
fn a_current_context_destroyed_by_another_thread_is_no_longer_current() {
    // The thread's cached device (`context::RESOLVED`) must not outlive the
    // context: the default allocator picks its pool by it.
    let rt = Arc::new(runtime(2, 1 << 20));
    rt.set_device(0).unwrap();
    let ctx = rt.create_context(1).unwrap();
    assert_eq!(rt.current_device(), Ok(1));
    assert_eq!(rt.current_device(), Ok(1), "served from the thread's cache");
    let other = Arc::clone(&rt);
    std::thread::spawn(move || other.destroy_context(ctx).unwrap())
        .join()
        .unwrap();
    assert_eq!(rt.current_device(), Err(Error::NoContext));
    let again = rt.create_context(0).unwrap();
    assert_ne!(again, ctx);
    assert_eq!(rt.current_device(), Ok(0));
}

#[test]
fn contexts_own_their_streams_and_a_forced_reset_releases_them() {
    let rt = runtime(1, 1 << 20);
    let ctx = rt.create_context(0).unwrap();
    assert_eq!(rt.current_context().unwrap(), (ctx, 0));
    let s1 = rt.create_stream(0, 0).unwrap();
    let s2 = rt.create_stream(7, 0x3F).unwrap();
    assert_eq!(rt.live_streams(), 2);
    rt.destroy_context(ctx).unwrap();
    assert_eq!(rt.live_streams(), 0);
    assert!(rt.synchronize_stream(Some(s1)).is_err());
    assert!(rt.destroy_stream(s2, false).is_err());

    let ctx = rt.create_context(0).unwrap();
    rt.create_stream(0, 0).unwrap();
    rt.reset_device(0, true).unwrap();
    assert_eq!(rt.live_streams(), 0);
    assert!(rt.set_current_context(ctx).is_err());
}

#[test]
fn the_default_stream_serves_null_and_goes_with_its_context() {
    let rt = runtime(1, 1 << 20);
    rt.set_device(0).unwrap();
    let seen = Seen::default();
    rt.launch(None, 64, record, ptr(&seen)).unwrap();
    rt.synchronize_stream(None).unwrap();
    assert_eq!(seen.runs.load(Ordering::SeqCst), 1);
    let (key, _) = rt.resolve_stream(None).unwrap();
    assert!(matches!(
        rt.destroy_stream(key, false),
        Err(Error::InvalidParam { .. })
    ));
    rt.reset_device(0, false).unwrap();
    assert_eq!(rt.live_streams(), 0);
}

#[test]
fn launches_take_workspaces_from_the_registration_in_force_at_launch() {
    let (rt, stream) = runtime_with_stream();
    let (a, b) = (Counting::default(), Counting::default());
    register(&rt, stream, &a);

    let first = Seen::default();
    first.hold.store(true, Ordering::SeqCst);
    first
        .watch
        .store(&a as *const Counting as usize, Ordering::SeqCst);
    rt.launch(Some(stream), 1000, record, ptr(&first)).unwrap();
    // Enqueued and not run yet, but the block is already back: stream order.
    assert_eq!(a.allocs.load(Ordering::SeqCst), 1);
    assert_eq!(a.frees.load(Ordering::SeqCst), 1);

    register(&rt, stream, &b); // re-registered while work is pending
    let second = Seen::default();
    rt.launch(Some(stream), 3000, record, ptr(&second)).unwrap();
    first.hold.store(false, Ordering::SeqCst);
    rt.synchronize_stream(Some(stream)).unwrap();

    assert_eq!(first.frees_at_start.load(Ordering::SeqCst), 1);
    assert_eq!(first.last_size.load(Ordering::SeqCst), 1000);
    assert_eq!(second.last_size.load(Ordering::SeqCst), 3000);
    assert_eq!(
        (
            a.allocs.load(Ordering::SeqCst),
            b.allocs.load(Ordering::SeqCst)
        ),
        (1, 1)
    );
    assert_eq!(b.frees.load(Ordering::SeqCst), 1);
}

#[test]
fn allocator_failures_enqueue_nothing() {
    let (rt, stream) = runtime_with_stream();
    let c = Counting::default();
    register(&rt, stream, &c);
    let seen = Seen::default();

    c.refuse.store(true, Ordering::SeqCst);
    assert_eq!(
        rt.launch(Some(stream), 100, record, ptr(&seen)),
        Err(Error::WorkspaceAlloc {
            stream: stream.get().get(),
            size: 100
        })
    );
    c.refuse.store(false, Ordering::SeqCst);
    c.no_addr.store(true, Ordering::SeqCst);
    assert_eq!(
        rt.launch(Some(stream), 200, record, ptr(&seen)),
        Err(Error::WorkspaceAddr {
            stream: stream.get().get(),
            size: 200
        })
    );
    assert_eq!(c.frees.load(Ordering::SeqCst), 1, "the block went back");
    rt.synchronize_stream(Some(stream)).unwrap();
    assert_eq!(seen.runs.load(Ordering::SeqCst), 0);
}

#[test]
fn zero_size_workspaces_take_nothing() {
    let (rt, stream) = runtime_with_stream();
    let c = Counting::default();
    register(&rt, stream, &c);
    let seen = Seen::default();
    seen.last_workspace.store(1, Ordering::SeqCst);
    rt.launch(Some(stream), 0, record, ptr(&seen)).unwrap();
    rt.synchronize_stream(Some(stream)).unwrap();
    assert_eq!(seen.runs.load(Ordering::SeqCst), 1);
    assert_eq!(seen.last_workspace.load(Ordering::SeqCst), 0);
    assert_eq!(c.allocs.load(Ordering::SeqCst), 0);
}

#[test]
fn without_a_registration_device_memory_serves_until_the_kernel_has_run() {
    let (rt, stream) = runtime_with_stream();
    let memory = Arc::clone(rt.device(0).unwrap().memory());
    let seen = Seen::default();
    seen.hold.store(true, Ordering::SeqCst);
    rt.launch(Some(stream), 5000, record, ptr(&seen)).unwrap();
    assert_eq!(
        memory.live_allocations(),
        1,
        "held while the kernel is pending"
    );
    seen.hold.store(false, Ordering::SeqCst);
    rt.synchronize_stream(Some(stream)).unwrap();
    assert_eq!(seen.last_size.load(Ordering::SeqCst), 5000);
    assert_ne!(seen.last_workspace.load(Ordering::SeqCst), 0);
    assert_eq!(memory.live_allocations(), 0);

    assert!(matches!(
        rt.launch(Some(stream), 2 << 20, record, ptr(&seen)),
        Err(Error::DeviceMemoryExhausted { device: 0, .. })
    ));
}

#[test]
fn destroying_a_stream_drops_its_registration_and_waits_for_its_work() {
    let (rt, stream) = runtime_with_stream();
    let c = Counting::default();
    register(&rt, stream, &c);
    let seen = Seen::default();
    for _ in 0..100 {
        rt.launch(Some(stream), 16, record, ptr(&seen)).unwrap();
    }
    rt.destroy_stream(stream, false).unwrap();
    assert_eq!(seen.runs.load(Ordering::SeqCst), 100);
    assert!(rt.allocators().get_by_stream(stream).is_err());
    assert!(rt.launch(Some(stream), 16, record, ptr(&seen)).is_err());
}

#[test]
fn free_waits_for_queued_work_on_the_memory() {
    let (rt, stream) = runtime_with_stream();
    let dev = rt.malloc(4096).unwrap();
    let seen = Seen::default();
    seen.hold.store(true, Ordering::SeqCst);
    rt.launch(Some(stream), 0, record, ptr(&seen)).unwrap();
    rt.memset_async(dev, 4096, 7, 4096, Some(stream)).unwrap();
    let release = std::thread::scope(|s| {
        let addr = dev.as_ptr() as usize;
        let rt = &rt;
        let h = s.spawn(move || rt.free(addr as *mut u8));
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!h.is_finished(), "free waits for the pending memset");
        seen.hold.store(false, Ordering::SeqCst);
        h.join().unwrap()
    });
    release.unwrap();
    assert_eq!(rt.device(0).unwrap().memory().live_allocations(), 0);
}

#[test]
fn copies_check_device_ranges_by_kind() {
    let rt = runtime(1, 1 << 20);
    rt.set_device(0).unwrap();
    let dev = rt.malloc(64).unwrap();
    let mut host = [1u8; 64];
    let h = std::ptr::NonNull::new(host.as_mut_ptr()).unwrap();
    // SAFETY: host ranges are 64 bytes of `host`; device ranges are checked by the runtime.
    unsafe {
        rt.memcpy(dev, 64, h, 64, 1).unwrap();
        assert!(rt.memcpy(h, 64, h, 64, 1).is_err(), "H2D needs device dst");
        assert!(rt.memcpy(h, 64, dev, 65, 2).is_err(), "count > destMax");
        assert!(
            rt.memcpy(h, 128, dev, 65, 2).is_err(),
            "past the allocation"
        );
        rt.memcpy(h, 64, h, 64, 0).unwrap();
        rt.memcpy(h, 64, dev, 64, 4).unwrap();
        assert!(rt.memcpy(dev, 64, h, 64, 5).is_err(), "unsupported kind");
    }
    rt.memset(dev, 64, 9, 32).unwrap();
    // SAFETY: as above.
    unsafe { rt.memcpy(h, 64, dev, 64, 2).unwrap() };
    assert!(host[..32].iter().all(|&b| b == 9) && host[32..].iter().all(|&b| b == 1));
    assert_eq!(rt.mem_info(1).unwrap(), ((1 << 20) - 4096, 1 << 20));
}

#[test]
fn launches_racing_a_destroy_either_run_or_fail_cleanly() {
    for _ in 0..20 {
        let rt = runtime(1, 1 << 20);
        rt.set_device(0).unwrap();
        let (ctx, _) = rt.current_context().unwrap();
        let stream = rt.create_stream(0, 0).unwrap();
        let seen = Seen::default();
        let launched = std::thread::scope(|s| {
            let launcher = s.spawn(|| {
                rt.set_current_context(ctx).unwrap();
                let mut ok = 0;
                while rt.launch(Some(stream), 64, record, ptr(&seen)).is_ok() {
                    ok += 1;
                }
                ok
            });
            std::thread::sleep(std::time::Duration::from_micros(300));
            rt.destroy_stream(stream, false).unwrap();
            launcher.join().unwrap()
        });
        assert_eq!(
            seen.runs.load(Ordering::SeqCst),
            launched,
            "every accepted launch ran before destroy returned"
        );
        assert_eq!(rt.device(0).unwrap().memory().live_allocations(), 0);
    }
}

#[test]
fn a_stream_this_thread_resolved_before_is_refused_once_destroyed_elsewhere() {
    let rt = runtime(1, 1 << 20);
    rt.set_device(0).unwrap();
    let (ctx, _) = rt.current_context().unwrap();
    let stream = rt.create_stream(0, 0).unwrap();
    let seen = Seen::default();
    // Twice: the second resolve is served by this thread's cache.
    rt.launch(Some(stream), 64, record, ptr(&seen)).unwrap();
    let (_, resolved) = rt.resolve_stream(Some(stream)).unwrap();
    let weak = Arc::downgrade(&resolved);
    drop(resolved);
    std::thread::scope(|s| {
        s.spawn(|| {
            rt.set_current_context(ctx).unwrap();
            rt.destroy_stream(stream, false).unwrap();
        });
    });
    assert!(
        weak.upgrade().is_none(),
        "nothing (this thread's cache included) keeps a destroyed stream alive"
    );
    assert!(matches!(
        rt.resolve_stream(Some(stream)),
        Err(Error::InvalidParam {
            param: "stream",
            ..
        })
    ));
    assert!(matches!(
        rt.launch(Some(stream), 64, record, ptr(&seen)),
        Err(Error::InvalidParam {
            param: "stream",
            ..
        })
    ));
    assert_eq!(seen.runs.load(Ordering::SeqCst), 1);
}

#[test]
fn a_closed_stream_still_referenced_is_not_served_from_the_cache() {
    let rt = runtime(1, 1 << 20);
    rt.set_device(0).unwrap();
    let stream = rt.create_stream(0, 0).unwrap();
    let (_, held) = rt.resolve_stream(Some(stream)).unwrap();
    rt.destroy_stream(stream, false).unwrap();
    // `held` keeps the stream alive, so only its closed flag tells.
    assert!(held.is_closed());
    assert!(rt.resolve_stream(Some(stream)).is_err());
}

#[test]
fn launchers_on_their_own_streams_race_destroys_cleanly() {
    let rt = runtime(1, 1 << 20);
    rt.set_device(0).unwrap();
    let (ctx, _) = rt.current_context().unwrap();
    let streams: Vec<StreamKey> = (0..6).map(|_| rt.create_stream(0, 0).unwrap()).collect();
    let seen = Seen::default();
    let launched = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for pair in streams.chunks(2) {
            let (rt, seen, launched) = (&rt, &seen, &launched);
            s.spawn(move || {
                rt.set_current_context(ctx).unwrap();
                // Alternate between two streams until both are gone (no
                // workspace: this is about finding the stream).
                let mut live = 2;
                while live > 0 {
                    live = 0;
                    for &stream in pair {
                        match rt.launch(Some(stream), 0, record, ptr(seen)) {
                            Ok(()) => {
                                launched.fetch_add(1, Ordering::SeqCst);
                                live += 1;
                            }
                            Err(e) => assert!(
                                matches!(
                                    e,
                                    Error::InvalidParam {
                                        param: "stream",
                                        ..
                                    }
                                ),
                                "{e:?}"
                            ),
                        }
                    }
                }
            });
        }
        std::thread::sleep(std::time::Duration::from_micros(500));
        for &stream in &streams {
            rt.destroy_stream(stream, false).unwrap();
        }
    });
    assert_eq!(
        seen.runs.load(Ordering::SeqCst),
        launched.load(Ordering::SeqCst),
        "every accepted launch ran before its stream's destroy returned"
    );
    assert_eq!(rt.live_streams(), 0);
}

/// Two streams' kernels: A's destroys stream B, B's synchronizes A.
struct DestroyCycle {
    rt: HostRuntime,
    a: StreamKey,
    b: StreamKey,
    a_destroying: AtomicBool,
    a_result: parking_lot::Mutex<Option<Result<(), Error>>>,
    b_result: parking_lot::Mutex<Option<Result<(), Error>>>,
}

unsafe extern "C" fn destroy_b(_: *mut c_void, _: usize, cycle: *mut c_void) {
    // SAFETY: the test passes a leaked DestroyCycle.
    let cycle = unsafe { &*(cycle as *const DestroyCycle) };
    cycle.a_destroying.store(true, Ordering::SeqCst);
    *cycle.a_result.lock() = Some(cycle.rt.destroy_stream(cycle.b, false));
}

unsafe extern "C" fn synchronize_a_while_destroyed(_: *mut c_void, _: usize, cycle: *mut c_void) {
    // SAFETY: the test passes a leaked DestroyCycle.
    let cycle = unsafe { &*(cycle as *const DestroyCycle) };
    while !cycle.a_destroying.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
    // A's kernel is inside (or about to be inside) the destroy, waiting for
    // this kernel's stream to finish.
    std::thread::sleep(std::time::Duration::from_millis(50));
    *cycle.b_result.lock() = Some(cycle.rt.synchronize_stream(Some(cycle.a)));
}

#[test]
fn a_kernel_destroying_a_stream_is_in_the_wait_for_graph() {
    // Before the destroy was recorded, B's synchronize was allowed: A's
    // kernel waited for B's worker to finish, B's kernel for A's.
    let rt = runtime(1, 1 << 20);
    rt.set_device(0).unwrap();
    let (a, b) = (
        rt.create_stream(0, 0).unwrap(),
        rt.create_stream(0, 0).unwrap(),
    );
    let cycle: &'static DestroyCycle = Box::leak(Box::new(DestroyCycle {
        rt,
        a,
        b,
        a_destroying: AtomicBool::new(false),
        a_result: parking_lot::Mutex::new(None),
        b_result: parking_lot::Mutex::new(None),
    }));
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let data = cycle as *const DestroyCycle as *mut c_void;
        let rt = &cycle.rt;
        rt.launch(Some(b), 0, synchronize_a_while_destroyed, data)
            .unwrap();
        rt.launch(Some(a), 0, destroy_b, data).unwrap();
        rt.synchronize_stream(Some(a)).unwrap();
        let _ = done.send(());
    });
    finished
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the two kernels deadlocked: the destroy was not in the wait-for graph");
    let b_result = *cycle.b_result.lock();
    let a_result = *cycle.a_result.lock();
    // Whichever wait came second is refused; the other goes through.
    match (a_result, b_result) {
        (Some(Ok(())), Some(Err(e))) | (Some(Err(e)), Some(Ok(()))) => {
            assert!(
                matches!(e, Error::InvalidParam { param: "stream", reason }
                    if reason.contains("the two would wait for each other forever")),
                "{e:?}"
            )
        }
        other => panic!("expected exactly one refusal, got {other:?}"),
    }
    if a_result == Some(Ok(())) {
        assert_eq!(cycle.rt.live_streams(), 1, "B was destroyed");
    } else {
        // Refused before anything was torn down: B still works.
        cycle.rt.synchronize_stream(Some(b)).unwrap();
        cycle.rt.destroy_stream(b, false).unwrap();
    }
    cycle.rt.destroy_stream(a, false).unwrap();
}
