//! Sleep and wake of a tagged pool holding 1 GiB of live blocks (four of
//! 256 MiB), so each figure is the cost per GiB: sleep alone, wake alone,
//! with offload (the contents copied to host memory and back) and with
//! discard (the physical memory only given back and mapped again).
//!
//! Two devices: `HostMemory` (the pool's own cost: anonymous `mmap` pages)
//! and the host runtime (`AclMemory` through CANN's virtual-memory calls,
//! each page a memfd, copies through `aclrtMemcpy`). Anchor, in the same
//! run: an untagged pool freeing its blocks, `empty_cache`, and allocating
//! them again (what a program without sleep does to give memory back).
//!
//! Run: `cargo bench --bench sleep`

use aclalloc::ffi::cann::runtime::aclrtSetDevice;
use aclalloc::pool::acl::AclMemory;
use aclalloc::pool::{DeviceMemory, HostMemory, Pool, PoolConfig};
use divan::Bencher;
use std::sync::Arc;

const MIB: usize = 1 << 20;
const BLOCK: usize = 256 * MIB;
const BLOCKS: usize = 4;

fn main() {
    std::env::set_var("ACLALLOC_DEVICE_MEMORY", "8GiB");
    divan::main();
}

fn device(host_runtime: bool) -> Box<dyn DeviceMemory> {
    if host_runtime {
        assert_eq!(aclrtSetDevice(0), 0);
        Box::new(AclMemory::current().unwrap())
    } else {
        Box::new(Arc::new(HostMemory::new(8 << 30)))
    }
}

/// A pool (tagged or not) with 1 GiB of live, written blocks.
fn pool(host_runtime: bool, tag: Option<&str>) -> (Pool, Vec<usize>) {
    let config = PoolConfig {
        expandable_segments: true,
        ..PoolConfig::default()
    };
    let pool = Pool::with_device(config, device(host_runtime)).unwrap();
    pool.set_tag(tag).unwrap();
    let blocks = (0..BLOCKS)
        .map(|i| {
            let addr = pool.malloc(BLOCK).unwrap().get();
            // SAFETY: a live, mapped block of BLOCK bytes.
            unsafe { std::ptr::write_bytes(addr as *mut u8, i as u8 + 1, BLOCK) };
            addr
        })
        .collect();
    (pool, blocks)
}

const DEVICES: [bool; 2] = [false, true];

fn name(host_runtime: bool) -> &'static str {
    if host_runtime {
        "host_runtime"
    } else {
        "host_memory"
    }
}

#[divan::bench(args = DEVICES, sample_count = 10, sample_size = 1)]
fn sleep_offload(bencher: Bencher, host_runtime: bool) {
    let (pool, _) = pool(host_runtime, Some(name(host_runtime)));
    bencher
        .with_inputs(|| pool.wake().unwrap())
        .bench_local_values(|_| pool.sleep(true).unwrap());
    pool.wake().unwrap();
}

#[divan::bench(args = DEVICES, sample_count = 10, sample_size = 1)]
fn wake_offload(bencher: Bencher, host_runtime: bool) {
    let (pool, _) = pool(host_runtime, Some(name(host_runtime)));
    bencher
        .with_inputs(|| pool.sleep(true).unwrap())
        .bench_local_values(|_| pool.wake().unwrap());
}

#[divan::bench(args = DEVICES, sample_count = 10, sample_size = 1)]
fn sleep_discard(bencher: Bencher, host_runtime: bool) {
    let (pool, _) = pool(host_runtime, Some(name(host_runtime)));
    bencher
        .with_inputs(|| pool.wake().unwrap())
        .bench_local_values(|_| pool.sleep(false).unwrap());
    pool.wake().unwrap();
}

#[divan::bench(args = DEVICES, sample_count = 10, sample_size = 1)]
fn wake_discard(bencher: Bencher, host_runtime: bool) {
    let (pool, _) = pool(host_runtime, Some(name(host_runtime)));
    bencher
        .with_inputs(|| pool.sleep(false).unwrap())
        .bench_local_values(|_| pool.wake().unwrap());
}

/// The anchor: give the memory back and take it again without sleep.
#[divan::bench(args = DEVICES, sample_count = 10, sample_size = 1)]
fn anchor_free_empty_cache_malloc(bencher: Bencher, host_runtime: bool) {
    let (pool, blocks) = pool(host_runtime, None);
    let mut blocks = blocks;
    bencher.bench_local(|| {
        for &addr in &blocks {
            pool.free(addr).unwrap();
        }
        pool.empty_cache();
        for addr in blocks.iter_mut() {
            *addr = pool.malloc(BLOCK).unwrap().get();
        }
    });
}
