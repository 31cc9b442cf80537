//! Tagged regions on the host runtime, through the C ABI: memory a program
//! allocates itself inside `aclallocRegionBegin`/`End` (`aclrtMalloc`,
//! `aclrtMallocAlign32`, `aclrtMallocCached`, and `aclrtMallocPhysical` +
//! `aclrtMapMem` as torch_npu's expandable segments) sleeps and wakes with
//! `aclallocSleep`/`aclallocWakeUp`: the device gets the memory back, the
//! addresses stay, copies and sets of sleeping memory are refused naming
//! the tag, offloaded contents come back byte for byte, a wake short of
//! memory puts everything back to sleep and leaks nothing, frees work
//! asleep, and cycles do not grow.

mod common;

use aclalloc::base::error::{ACL_ERROR_RT_MEMORY_ALLOCATION, ACL_SUCCESS};
use aclalloc::ffi::cann::memory::*;
use aclalloc::ffi::cann::types::*;
use aclalloc::ffi::cann::virtual_memory::*;
use aclalloc::ffi::ext::pool::sleep::{aclallocSleep, aclallocWakeUp};
use aclalloc::ffi::ext::region::{aclallocRegionBegin, aclallocRegionEnd};
use std::ffi::{c_char, c_void, CString};
use std::sync::Mutex;

const MIB: usize = 1 << 20;
const G: usize = 2 * MIB;

/// Sleep and wake reach every region of the process: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    common::device0();
    guard
}

fn begin(tag: &str) {
    let tag = CString::new(tag).unwrap();
    // SAFETY: a NUL-terminated string.
    assert_eq!(unsafe { aclallocRegionBegin(tag.as_ptr()) }, ACL_SUCCESS);
}

fn end() {
    assert_eq!(aclallocRegionEnd(), ACL_SUCCESS);
}

fn sleep(offload: &[&str]) -> i32 {
    let tags: Vec<CString> = offload.iter().map(|t| CString::new(*t).unwrap()).collect();
    let ptrs: Vec<*const c_char> = tags.iter().map(|t| t.as_ptr()).collect();
    // SAFETY: `ptrs` holds `len` NUL-terminated strings.
    unsafe { aclallocSleep(ptrs.as_ptr(), ptrs.len()) }
}

fn wake(tags: Option<&[&str]>) -> i32 {
    let Some(tags) = tags else {
        // SAFETY: NULL with 0: every tag.
        return unsafe { aclallocWakeUp(std::ptr::null(), 0) };
    };
    let tags: Vec<CString> = tags.iter().map(|t| CString::new(*t).unwrap()).collect();
    let ptrs: Vec<*const c_char> = tags.iter().map(|t| t.as_ptr()).collect();
    // SAFETY: `ptrs` holds `len` NUL-terminated strings.
    unsafe { aclallocWakeUp(ptrs.as_ptr(), ptrs.len()) }
}

fn free_memory() -> usize {
    let (mut free, mut total) = (0, 0);
    // SAFETY: valid out-pointers.
    assert_eq!(
        unsafe { aclrtGetMemInfo(ACL_HBM_MEM, &mut free, &mut total) },
        ACL_SUCCESS
    );
    free
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 12) as u8)
        .collect()
}

fn put(dst: *mut c_void, data: &[u8]) {
    // SAFETY: `dst` is live device memory of at least `data.len()` bytes.
    let rc = unsafe {
        aclrtMemcpy(
            dst,
            data.len(),
            data.as_ptr().cast(),
            data.len(),
            ACL_MEMCPY_HOST_TO_DEVICE,
        )
    };
    assert_eq!(rc, ACL_SUCCESS, "{}", common::message());
}

fn get(src: *mut c_void, len: usize) -> Result<Vec<u8>, i32> {
    let mut out = vec![0u8; len];
    // SAFETY: `out` is writable for `len` bytes; the device side is checked.
    let rc = unsafe {
        aclrtMemcpy(
            out.as_mut_ptr().cast(),
            len,
            src,
            len,
            ACL_MEMCPY_DEVICE_TO_HOST,
        )
    };
    if rc == ACL_SUCCESS {
        Ok(out)
    } else {
        Err(rc)
    }
}

/// `aclrtMalloc` (or a variant) inside whatever region is open.
fn malloc(
    size: usize,
    f: unsafe extern "C" fn(*mut *mut c_void, usize, aclrtMemMallocPolicy) -> i32,
) -> *mut c_void {
    let mut p = std::ptr::null_mut();
    // SAFETY: a valid out-pointer.
    let rc = unsafe { f(&mut p, size, ACL_MEM_MALLOC_HUGE_FIRST) };
    assert_eq!(rc, ACL_SUCCESS, "{}", common::message());
    p
}

/// A torch_npu-style expandable segment: a reservation of `pages` pages,
/// each backed by its own physical memory mapped in place.
struct Segment {
    va: *mut c_void,
    handles: Vec<aclrtDrvMemHandle>,
}

impl Segment {
    fn new(pages: usize) -> Self {
        let mut va = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        let rc = unsafe { aclrtReserveMemAddress(&mut va, pages * G, 0, std::ptr::null_mut(), 1) };
        assert_eq!(rc, ACL_SUCCESS);
        let prop = common::physical_prop();
        let handles = (0..pages)
            .map(|i| {
                let mut h: aclrtDrvMemHandle = std::ptr::null_mut();
                // SAFETY: valid pointers.
                let rc = unsafe { aclrtMallocPhysical(&mut h, G, &prop, 0) };
                assert_eq!(rc, ACL_SUCCESS, "{}", common::message());
                // SAFETY: a page of the reservation, a live handle.
                let rc = unsafe { aclrtMapMem(va.cast::<u8>().add(i * G).cast(), G, 0, h, 0) };
                assert_eq!(rc, ACL_SUCCESS, "{}", common::message());
                h
            })
            .collect();
        Segment { va, handles }
    }

    fn len(&self) -> usize {
        self.handles.len() * G
    }

    /// torch_npu's release: unmap each page, free its memory, release.
    fn release(self) {
        for (i, &h) in self.handles.iter().enumerate() {
            // SAFETY: a mapping made by `new`.
            let rc = unsafe { aclrtUnmapMem(self.va.cast::<u8>().add(i * G).cast()) };
            assert_eq!(rc, ACL_SUCCESS, "{}", common::message());
            // SAFETY: a handle made by `new`, freed once.
            assert_eq!(
                unsafe { aclrtFreePhysical(h) },
                ACL_SUCCESS,
                "{}",
                common::message()
            );
        }
        // SAFETY: the reservation made by `new`, with nothing mapped.
        let rc = unsafe { aclrtReleaseMemAddress(self.va) };
        assert_eq!(rc, ACL_SUCCESS, "{}", common::message());
    }
}

fn free(p: *mut c_void) {
    // SAFETY: live device memory, freed once.
    assert_eq!(
        unsafe { aclrtFree(p) },
        ACL_SUCCESS,
        "{}",
        common::message()
    );
}

/// A copy of sleeping memory is refused, and the message names `tag`.
fn refused_naming(p: *mut c_void, tag: &str) {
    assert!(get(p, 64).is_err(), "a copy of sleeping memory ran");
    let m = common::message();
    assert!(m.contains(&format!("\"{tag}\"")), "{m}");
    assert!(m.contains("aclrtMemcpy"), "{m}");
}

#[test]
fn offloaded_memory_wakes_with_its_contents_at_the_same_addresses() {
    let _g = serial();
    let before = free_memory();
    begin("weights");
    let a = malloc(3 * MIB + 5, aclrtMalloc);
    let b = malloc(MIB, aclrtMallocAlign32);
    let c = malloc(4096, aclrtMallocCached);
    let seg = Segment::new(3);
    end();
    let held = before - free_memory();
    assert_eq!(held, 4 * MIB + G + G + seg.len(), "rounded to pages");
    let data = [
        (a, pattern(3 * MIB + 5, 1)),
        (b, pattern(MIB, 2)),
        (c, pattern(4096, 3)),
        (seg.va, pattern(seg.len(), 4)),
    ];
    for (p, d) in &data {
        put(*p, d);
    }

    assert_eq!(sleep(&["weights"]), ACL_SUCCESS);
    assert_eq!(free_memory(), before, "every byte given back");
    for (p, _) in &data {
        refused_naming(*p, "weights");
    }
    // Sets and asynchronous calls are refused too, naming the tag.
    // SAFETY: the range is checked, never touched.
    assert_ne!(unsafe { aclrtMemset(a, 16, 0, 16) }, ACL_SUCCESS);
    assert!(common::message().contains("\"weights\""));
    // SAFETY: as above, on the default stream.
    let rc = unsafe { aclrtMemsetAsync(seg.va, 16, 0, 16, std::ptr::null_mut()) };
    assert_ne!(rc, ACL_SUCCESS);
    assert!(common::message().contains("\"weights\""));
    let host = [0u8; 16];
    // SAFETY: as above.
    let rc = unsafe {
        aclrtMemcpyAsync(
            b,
            16,
            host.as_ptr().cast(),
            16,
            ACL_MEMCPY_HOST_TO_DEVICE,
            std::ptr::null_mut(),
        )
    };
    assert_ne!(rc, ACL_SUCCESS);
    assert!(common::message().contains("\"weights\""));
    // Allocating in a sleeping tag's region is refused.
    begin("weights");
    let mut p = std::ptr::null_mut();
    // SAFETY: a valid out-pointer.
    assert_ne!(unsafe { aclrtMalloc(&mut p, MIB, 0) }, ACL_SUCCESS);
    assert!(p.is_null(), "nothing written on failure");
    assert!(common::message().contains("\"weights\" is asleep"));
    end();

    assert_eq!(wake(None), ACL_SUCCESS, "{}", common::message());
    assert_eq!(before - free_memory(), held);
    for (p, d) in &data {
        assert!(
            get(*p, d.len()).unwrap() == *d,
            "contents restored at {p:?}"
        );
    }
    free(a);
    free(b);
    free(c);
    seg.release();
    assert_eq!(free_memory(), before);
    assert_eq!(aclalloc::pool::region::bytes(), (0, 0, 0));
}

#[test]
fn discarded_memory_wakes_fresh_and_usable() {
    let _g = serial();
    begin("kv");
    let a = malloc(G, aclrtMalloc);
    let seg = Segment::new(1);
    end();
    put(a, &pattern(G, 9));
    put(seg.va, &pattern(G, 8));
    assert_eq!(sleep(&[]), ACL_SUCCESS);
    refused_naming(a, "kv");
    assert_eq!(
        aclalloc::pool::region::bytes(),
        (0, 2 * G, 0),
        "no copy kept"
    );
    assert_eq!(wake(Some(&["kv"])), ACL_SUCCESS);
    // Fresh memory: the host runtime's is zero; writable and readable.
    assert!(get(a, G).unwrap().iter().all(|&x| x == 0));
    assert!(get(seg.va, G).unwrap().iter().all(|&x| x == 0));
    put(a, &pattern(G, 7));
    assert_eq!(get(a, G).unwrap(), pattern(G, 7));
    free(a);
    seg.release();
}

#[test]
fn regions_nest_per_thread_and_an_unmatched_end_is_refused() {
    let _g = serial();
    assert_ne!(aclallocRegionEnd(), ACL_SUCCESS);
    let m = common::message();
    assert!(m.starts_with("aclallocRegionEnd failed"), "{m}");
    assert!(m.contains("aclallocRegionBegin"), "{m}");
    // SAFETY: NULL is refused before use.
    assert_ne!(
        unsafe { aclallocRegionBegin(std::ptr::null()) },
        ACL_SUCCESS
    );
    assert!(common::message().contains("tag"));

    begin("outer");
    let outer = malloc(MIB, aclrtMalloc);
    begin("inner");
    let inner = malloc(MIB, aclrtMalloc);
    // Another thread has no region open: its memory is plain.
    let plain = std::thread::spawn(|| {
        common::device0();
        malloc(MIB, aclrtMalloc) as usize
    })
    .join()
    .unwrap() as *mut c_void;
    end();
    let outer2 = malloc(MIB, aclrtMalloc);
    end();
    let after = malloc(MIB, aclrtMalloc);
    for (p, seed) in [(outer, 1), (inner, 2), (plain, 3), (outer2, 4), (after, 5)] {
        put(p, &pattern(MIB, seed));
    }

    // Offload the outer tag only; wake the inner tag only.
    assert_eq!(sleep(&["outer"]), ACL_SUCCESS);
    refused_naming(outer, "outer");
    refused_naming(outer2, "outer");
    refused_naming(inner, "inner");
    assert_eq!(get(plain, MIB).unwrap(), pattern(MIB, 3), "not a region's");
    assert_eq!(get(after, MIB).unwrap(), pattern(MIB, 5), "not a region's");
    assert_eq!(wake(Some(&["inner"])), ACL_SUCCESS);
    assert!(
        get(inner, MIB).unwrap().iter().all(|&x| x == 0),
        "discarded"
    );
    refused_naming(outer, "outer");
    assert_eq!(wake(None), ACL_SUCCESS);
    assert_eq!(get(outer, MIB).unwrap(), pattern(MIB, 1));
    assert_eq!(get(outer2, MIB).unwrap(), pattern(MIB, 4));
    for p in [outer, inner, plain, outer2, after] {
        free(p);
    }
}

#[test]
fn memory_is_freed_while_asleep_and_handles_stay_valid() {
    let _g = serial();
    let before = free_memory();
    begin("frees");
    let a = malloc(5 * MIB, aclrtMalloc);
    let seg = Segment::new(2);
    end();
    assert_eq!(sleep(&["frees"]), ACL_SUCCESS);
    // The reservation holds sleeping mappings: not released yet.
    // SAFETY: looked up, refused.
    assert_ne!(unsafe { aclrtReleaseMemAddress(seg.va) }, ACL_SUCCESS);
    assert!(common::message().contains("Sleeping region memory"));
    // Mapping sleeping memory elsewhere is refused, naming the tag.
    let mut other = std::ptr::null_mut();
    // SAFETY: a valid out-pointer.
    let rc = unsafe { aclrtReserveMemAddress(&mut other, G, 0, std::ptr::null_mut(), 0) };
    assert_eq!(rc, ACL_SUCCESS);
    // SAFETY: looked up, refused.
    assert_ne!(
        unsafe { aclrtMapMem(other, G, 0, seg.handles[0], 0) },
        ACL_SUCCESS
    );
    // SAFETY: the reservation just made, nothing mapped.
    assert_eq!(unsafe { aclrtReleaseMemAddress(other) }, ACL_SUCCESS);

    free(a);
    // SAFETY: freed already.
    assert_ne!(
        unsafe { aclrtFree(a) },
        ACL_SUCCESS,
        "a double free is refused"
    );
    let handles = seg.handles.clone();
    seg.release();
    // SAFETY: freed already: refused.
    assert_ne!(unsafe { aclrtFreePhysical(handles[0]) }, ACL_SUCCESS);
    assert_eq!(free_memory(), before);
    assert_eq!(wake(None), ACL_SUCCESS);
    assert_eq!(free_memory(), before, "nothing to wake");
    assert_eq!(aclalloc::pool::region::bytes(), (0, 0, 0));

    // A handle whose mapping went while asleep gets fresh memory at wake
    // and can be mapped again.
    begin("remap");
    let seg = Segment::new(1);
    end();
    assert_eq!(sleep(&["remap"]), ACL_SUCCESS);
    // SAFETY: a mapping of `seg`.
    assert_eq!(unsafe { aclrtUnmapMem(seg.va) }, ACL_SUCCESS);
    assert_eq!(wake(None), ACL_SUCCESS);
    // SAFETY: the page and handle of `seg`, unmapped.
    assert_eq!(
        unsafe { aclrtMapMem(seg.va, G, 0, seg.handles[0], 0) },
        ACL_SUCCESS
    );
    put(seg.va, &pattern(G, 6));
    assert_eq!(get(seg.va, G).unwrap(), pattern(G, 6));
    seg.release();
    assert_eq!(free_memory(), before);
}

/// Out of memory inside a region: the code and message are the export's
/// the program called, each of the three naming itself, with the device's
/// own refusal underneath.
#[test]
fn a_region_short_of_memory_fails_in_the_name_of_the_export_called() {
    let _serial = serial();
    begin("too_big");
    let exports: [(
        &str,
        unsafe extern "C" fn(*mut *mut c_void, usize, aclrtMemMallocPolicy) -> i32,
    ); 3] = [
        ("aclrtMalloc", aclrtMalloc),
        ("aclrtMallocAlign32", aclrtMallocAlign32),
        ("aclrtMallocCached", aclrtMallocCached),
    ];
    let _ = common::recent_message();
    for (name, f) in exports {
        let mut p = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        let rc = unsafe { f(&mut p, free_memory() + G, ACL_MEM_MALLOC_HUGE_FIRST) };
        assert_eq!(rc, ACL_ERROR_RT_MEMORY_ALLOCATION);
        assert!(p.is_null(), "the out-parameter is written only on success");
        let message = common::message();
        let newest = message.lines().next().unwrap();
        assert!(
            newest.starts_with(&format!("{name} failed.")) && newest.contains("out of memory"),
            "{message}"
        );
        assert!(
            message
                .lines()
                .skip(1)
                .all(|l| l.starts_with("aclrtMallocPhysical failed.")),
            "{message}"
        );
    }
    end();
}

/// A host function queued before a wake that frees region memory: the wake
/// lets queued work run before it holds the regions' records (the copies
/// restoring the contents wait for queued work, and the free needs the
/// records), so neither waits for the other.
#[test]
fn a_wake_lets_queued_work_that_frees_region_memory_run_first() {
    use aclalloc::ffi::cann::stream_info::aclrtLaunchHostFunc;
    unsafe extern "C" fn pause(_: *mut c_void) {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    unsafe extern "C" fn free_it(p: *mut c_void) {
        // SAFETY: region memory this test made, freed here only.
        assert_eq!(unsafe { aclrtFree(p) }, ACL_SUCCESS);
    }
    let _serial = serial();
    begin("queued");
    let kept = malloc(2 * MIB, aclrtMalloc);
    let freed = malloc(2 * MIB, aclrtMalloc);
    end();
    put(kept, &pattern(2 * MIB, 9));
    assert_eq!(sleep(&["queued"]), ACL_SUCCESS);
    let stream = common::streams::new_stream();
    // SAFETY: both functions take what they are given; `freed` is live.
    unsafe {
        assert_eq!(
            aclrtLaunchHostFunc(stream, Some(pause), std::ptr::null_mut()),
            0
        );
        assert_eq!(aclrtLaunchHostFunc(stream, Some(free_it), freed), 0);
    }
    let (done, waited) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        common::device0();
        done.send(wake(None)).unwrap();
    });
    let rc = waited
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the wake and the queued free waited for each other");
    assert_eq!(rc, ACL_SUCCESS, "{}", common::message());
    common::streams::sync(stream);
    assert_eq!(get(kept, 2 * MIB), Ok(pattern(2 * MIB, 9)));
    common::streams::destroy(stream);
    free(kept);
}

#[test]
fn a_wake_short_of_memory_puts_everything_back_to_sleep() {
    let _g = serial();
    let before = free_memory();
    begin("oom");
    let a = malloc(8 * MIB, aclrtMalloc);
    let b = malloc(8 * MIB, aclrtMalloc);
    let seg = Segment::new(2);
    end();
    let data = [
        (a, pattern(8 * MIB, 1)),
        (b, pattern(8 * MIB, 2)),
        (seg.va, pattern(4 * MIB, 3)),
    ];
    for (p, d) in &data {
        put(*p, d);
    }
    assert_eq!(sleep(&["oom"]), ACL_SUCCESS);
    // Leave room for any one of them but not for all (20 MiB).
    let hog_size = free_memory() - 14 * MIB;
    let hog = malloc(hog_size, aclrtMalloc);
    let room = free_memory();
    assert_ne!(wake(None), ACL_SUCCESS);
    let m = common::message();
    assert!(m.starts_with("aclallocWakeUp failed"), "{m}");
    assert_eq!(free_memory(), room, "the pages woken were given back");
    for (p, _) in &data {
        refused_naming(*p, "oom");
    }
    let (awake, asleep, offloaded) = aclalloc::pool::region::bytes();
    assert_eq!((awake, asleep, offloaded), (0, 20 * MIB, 20 * MIB));
    // Allocating in the tag's region is still refused: it sleeps.
    free(hog);
    assert_eq!(wake(Some(&["oom"])), ACL_SUCCESS, "{}", common::message());
    for (p, d) in &data {
        assert!(
            get(*p, d.len()).unwrap() == *d,
            "contents kept through the rollback"
        );
    }
    free(a);
    free(b);
    seg.release();
    assert_eq!(free_memory(), before);
}

/// Live mappings and open descriptors of the process: a leaked host copy or
/// physical memory (a memfd on the host runtime) shows in one of them.
fn process_resources() -> (usize, usize) {
    let maps = std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .count();
    let fds = std::fs::read_dir("/proc/self/fd").unwrap().count();
    (maps, fds)
}

#[test]
fn a_hundred_cycles_leave_no_growth() {
    let _g = serial();
    begin("cycles");
    let a = malloc(3 * MIB, aclrtMalloc);
    let seg = Segment::new(2);
    end();
    let mut first = None;
    for cycle in 0..100 {
        put(a, &pattern(3 * MIB, cycle as u8));
        put(seg.va, &pattern(4 * MIB, cycle as u8 + 1));
        let offload = cycle % 2 == 0;
        assert_eq!(sleep(if offload { &["cycles"] } else { &[] }), ACL_SUCCESS);
        assert_eq!(wake(None), ACL_SUCCESS);
        if offload {
            assert_eq!(get(a, 3 * MIB).unwrap(), pattern(3 * MIB, cycle as u8));
            assert_eq!(
                get(seg.va, 4 * MIB).unwrap(),
                pattern(4 * MIB, cycle as u8 + 1)
            );
        }
        let now = (
            free_memory(),
            aclalloc::pool::region::bytes(),
            process_resources(),
        );
        match &first {
            None => first = Some(now),
            Some(f) => assert_eq!(&now, f, "cycle {cycle}: growth"),
        }
    }
    free(a);
    seg.release();
}
