//! A pluggable allocator registered on runtime streams and driven by
//! `aclallocLaunchKernel` from one thread per stream: the launch tells the
//! plugin which stream it serves, every free gets back what its alloc got,
//! and the counters balance.

mod common;
mod plugin_support;

use aclalloc::base::error::*;
use aclalloc::ffi::cann::allocator::*;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::ext::launch::aclallocLaunchKernel;
use aclalloc::ffi::ext::plugin::*;
use std::ffi::{c_void, CString};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicUsize, Ordering};

static WRITTEN: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn kernel(workspace: *mut c_void, size: usize, _: *mut c_void) {
    if size > 0 {
        unsafe { std::ptr::write_bytes(workspace as *mut u8, 0x3C, size) };
        WRITTEN.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn launches_on_four_streams_balance_and_the_plugin_sees_each_stream() {
    let so = plugin_support::build("runtime");
    let path = CString::new(so.to_str().unwrap()).unwrap();
    let config = aclallocPluggableConfig {
        path: path.as_ptr(),
        allocSymbol: c"my_malloc".as_ptr(),
        freeSymbol: c"my_free".as_ptr(),
        initSymbol: c"my_init".as_ptr(),
        emptyCacheSymbol: std::ptr::null(),
        memoryFractionSymbol: std::ptr::null(),
    };
    assert_eq!(unsafe { aclInit(std::ptr::null()) }, ACL_SUCCESS);
    assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
    let (mut plugin, mut desc) = (null_mut(), null_mut());
    assert_eq!(
        unsafe { aclallocPluggableCreate(&config, &mut plugin, &mut desc) },
        ACL_SUCCESS
    );
    let mut ctx = null_mut();
    assert_eq!(unsafe { aclrtGetCurrentContext(&mut ctx) }, ACL_SUCCESS);

    const STREAMS: usize = 4;
    const LAUNCHES: usize = 500;
    let sizes = [4096usize, 100_000, 1 << 20];
    let streams: Vec<usize> = (0..STREAMS)
        .map(|_| {
            let mut s = null_mut();
            assert_eq!(unsafe { aclrtCreateStream(&mut s) }, ACL_SUCCESS);
            assert_eq!(aclrtAllocatorRegister(s, desc), ACL_SUCCESS);
            s as usize
        })
        .collect();
    let ctx = ctx as usize;
    let threads: Vec<_> = streams
        .iter()
        .map(|&s| {
            std::thread::spawn(move || {
                assert_eq!(
                    unsafe { aclrtSetCurrentContext(ctx as *mut c_void) },
                    ACL_SUCCESS
                );
                for i in 0..LAUNCHES {
                    let rc = unsafe {
                        aclallocLaunchKernel(
                            s as *mut c_void,
                            sizes[i % 3],
                            Some(kernel),
                            null_mut(),
                        )
                    };
                    assert_eq!(rc, ACL_SUCCESS);
                }
                assert_eq!(
                    unsafe { aclrtSynchronizeStream(s as *mut c_void) },
                    ACL_SUCCESS
                );
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let total = (STREAMS * LAUNCHES) as i64;
    assert_eq!(WRITTEN.load(Ordering::SeqCst), STREAMS * LAUNCHES);
    let c = plugin_support::counters(&so);
    assert_eq!(
        (c[0], c[1], c[2], c[3]),
        (0, total, total, 0),
        "balanced, right size/device/stream"
    );
    assert_eq!(c[4], 1, "init ran once");
    // Each stream has its own cached blocks: the plugin was told the stream
    // (with NULL for every stream they would share one set).
    assert_eq!(
        c[9],
        (STREAMS * sizes.len()) as i64,
        "one block per size class per stream"
    );
    let mut s = aclallocAllocatorStats::default();
    assert_eq!(
        unsafe { aclallocPluggableGetStats(plugin, &mut s) },
        ACL_SUCCESS
    );
    assert_eq!(
        (s.allocCount, s.freeCount, s.activeCount),
        (total as u64, total as u64, 0)
    );

    // Destroying the streams drops their registrations: the plugin can go.
    for &st in &streams {
        assert_eq!(
            unsafe { aclrtDestroyStream(st as *mut c_void) },
            ACL_SUCCESS
        );
    }
    assert_eq!(aclallocPluggableDestroy(plugin), ACL_SUCCESS);
    assert_eq!(aclrtResetDevice(0), ACL_SUCCESS);
    assert_eq!(aclFinalize(), ACL_SUCCESS);
}
