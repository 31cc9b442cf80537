//! Sleep and wake of a tagged region holding 1 GiB of the program's own
//! device memory (four `aclrtMalloc` buffers of 256 MiB made inside
//! `aclallocRegionBegin`/`End`, written), on the host runtime, so each
//! figure is the cost per GiB of one sleep followed by one wake
//! (`aclallocSleep` + `aclallocWakeUp`): with offload (the contents copied
//! to host memory and back) and with discard (the memory written again,
//! untimed, before each sample); and, with offload, sleep alone and wake
//! alone (the other step untimed between samples).
//!
//! Anchor, in the same run: copying the same bytes to fresh host memory
//! (a new anonymous mapping, filled from the device memory with
//! `aclrtMemcpy`, then unmapped), what a program keeping its own copy pays.
//! The budget: offloaded sleep+wake within 1.5x the anchor.
//!
//! Thirty samples each: on a virtual machine that hands freed pages back to
//! its host, touching fresh memory costs about twice as much in some
//! samples as in others, whichever step happens to touch them.
//!
//! Run: `cargo bench --bench region`

use aclalloc::ffi::cann::memory::{aclrtFree, aclrtMalloc, aclrtMemcpy};
use aclalloc::ffi::cann::runtime::aclrtSetDevice;
use aclalloc::ffi::cann::types::{ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEM_MALLOC_HUGE_FIRST};
use aclalloc::ffi::ext::pool::sleep::{aclallocSleep, aclallocWakeUp};
use aclalloc::ffi::ext::region::{aclallocRegionBegin, aclallocRegionEnd};
use divan::Bencher;
use std::ffi::c_void;

const MIB: usize = 1 << 20;
const BUFFER: usize = 256 * MIB;
const BUFFERS: usize = 4;

fn main() {
    std::env::set_var("ACLALLOC_DEVICE_MEMORY", "8GiB");
    divan::main();
}

/// 1 GiB of written memory of the region tagged `tag`; freed when dropped.
struct Region(Vec<*mut c_void>);

impl Region {
    fn new(tag: &std::ffi::CStr) -> Self {
        assert_eq!(aclrtSetDevice(0), 0);
        // SAFETY: a NUL-terminated tag.
        assert_eq!(unsafe { aclallocRegionBegin(tag.as_ptr()) }, 0);
        let buffers = (0..BUFFERS)
            .map(|_| {
                let mut p = std::ptr::null_mut();
                // SAFETY: a valid out-pointer.
                assert_eq!(
                    unsafe { aclrtMalloc(&mut p, BUFFER, ACL_MEM_MALLOC_HUGE_FIRST) },
                    0
                );
                p
            })
            .collect();
        assert_eq!(aclallocRegionEnd(), 0);
        let region = Region(buffers);
        region.write();
        region
    }

    /// Writes every byte (the region must be awake).
    fn write(&self) {
        for (i, &p) in self.0.iter().enumerate() {
            // SAFETY: BUFFER bytes of mapped device memory (host memory on the host runtime).
            unsafe { std::ptr::write_bytes(p.cast::<u8>(), i as u8 + 1, BUFFER) };
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        for &p in &self.0 {
            // SAFETY: memory of this region, freed once.
            assert_eq!(unsafe { aclrtFree(p) }, 0);
        }
    }
}

fn sleep_wake(offload: &[*const std::ffi::c_char]) {
    // SAFETY: `offload` holds NUL-terminated tags.
    assert_eq!(unsafe { aclallocSleep(offload.as_ptr(), offload.len()) }, 0);
    // SAFETY: NULL with 0: every tag.
    assert_eq!(unsafe { aclallocWakeUp(std::ptr::null(), 0) }, 0);
}

#[divan::bench(sample_count = 30, sample_size = 1)]
fn sleep_wake_offload(bencher: Bencher) {
    let tag = c"bench_offload";
    let _region = Region::new(tag);
    let offload = [tag.as_ptr()];
    bencher.bench_local(|| sleep_wake(&offload));
}

/// Discard: the memory is written again before each sample (untimed), so
/// each sleep gives back 1 GiB of used memory, as a program's would be.
#[divan::bench(sample_count = 30, sample_size = 1)]
fn sleep_wake_discard(bencher: Bencher) {
    let region = Region::new(c"bench_discard");
    bencher
        .with_inputs(|| region.write())
        .bench_local_values(|()| sleep_wake(&[]));
}

/// The anchor: the same 1 GiB copied to fresh host memory.
#[divan::bench(sample_count = 30, sample_size = 1)]
fn anchor_copy_to_fresh_host_memory(bencher: Bencher) {
    let region = Region::new(c"bench_anchor");
    bencher.bench_local(|| {
        for &p in &region.0 {
            // SAFETY: a fresh private mapping at the kernel's choice.
            let host = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    BUFFER,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            assert_ne!(host, libc::MAP_FAILED);
            // SAFETY: `host` is writable for BUFFER bytes; `p` is BUFFER bytes of device memory.
            let rc = unsafe { aclrtMemcpy(host, BUFFER, p, BUFFER, ACL_MEMCPY_DEVICE_TO_HOST) };
            assert_eq!(rc, 0);
            // SAFETY: the mapping made above, unmapped once.
            unsafe { libc::munmap(host, BUFFER) };
        }
    });
}

/// Sleep alone, with offload (the wake runs untimed between samples).
#[divan::bench(sample_count = 30, sample_size = 1)]
fn sleep_offload(bencher: Bencher) {
    let tag = c"bench_sleep";
    let _region = Region::new(tag);
    let offload = [tag.as_ptr()];
    bencher
        // SAFETY: NULL with 0: every tag.
        .with_inputs(|| assert_eq!(unsafe { aclallocWakeUp(std::ptr::null(), 0) }, 0))
        // SAFETY: `offload` holds a NUL-terminated tag.
        .bench_local_values(|()| assert_eq!(unsafe { aclallocSleep(offload.as_ptr(), 1) }, 0));
    // SAFETY: as above.
    assert_eq!(unsafe { aclallocWakeUp(std::ptr::null(), 0) }, 0);
}

/// Wake alone, after an offloading sleep (the sleep runs untimed).
#[divan::bench(sample_count = 30, sample_size = 1)]
fn wake_offload(bencher: Bencher) {
    let tag = c"bench_wake";
    let _region = Region::new(tag);
    let offload = [tag.as_ptr()];
    bencher
        // SAFETY: `offload` holds a NUL-terminated tag.
        .with_inputs(|| assert_eq!(unsafe { aclallocSleep(offload.as_ptr(), 1) }, 0))
        // SAFETY: NULL with 0: every tag.
        .bench_local_values(|()| assert_eq!(unsafe { aclallocWakeUp(std::ptr::null(), 0) }, 0));
}
