//! The device a pluggable allocator is told about follows the calling
//! thread's current device through every way it changes, although the
//! device port keeps it per thread (base::device_port::current_device):
//! aclrtSetDevice, aclrtCreateContext, aclrtSetCurrentContext, and a
//! context destroyed by another thread while it is current here.

use aclalloc::base::error::*;
use aclalloc::ffi::cann::runtime::*;
use aclalloc::ffi::ext::plugin::*;
use aclalloc::plugin::{published, PluggableAllocator, PluginFunctions};
use std::ffi::c_void;
use std::sync::atomic::{AtomicI32, Ordering};

static ALLOC_DEVICE: AtomicI32 = AtomicI32::new(-1);
static FREE_DEVICE: AtomicI32 = AtomicI32::new(-1);
static BLOCK: [u8; 64] = [0; 64];

unsafe extern "C" fn record_alloc(_size: isize, device: i32, _stream: *mut c_void) -> *mut c_void {
    ALLOC_DEVICE.store(device, Ordering::SeqCst);
    BLOCK.as_ptr() as *mut c_void
}
unsafe extern "C" fn record_free(_ptr: *mut c_void, _size: isize, device: i32, _: *mut c_void) {
    FREE_DEVICE.store(device, Ordering::SeqCst);
}

/// One alloc+free pair through the C functions; the device the plugin got.
fn device_told(plugin: *mut c_void) -> i32 {
    let mut p = std::ptr::null_mut();
    let rc = unsafe { aclallocPluggableMalloc(plugin, &mut p, 64, std::ptr::null_mut()) };
    assert_eq!(rc, ACL_SUCCESS);
    let device = ALLOC_DEVICE.load(Ordering::SeqCst);
    assert_eq!(aclallocPluggableFree(plugin, p), ACL_SUCCESS);
    assert_eq!(
        FREE_DEVICE.load(Ordering::SeqCst),
        device,
        "free gets alloc's"
    );
    device
}

fn current_context() -> usize {
    let mut ctx = std::ptr::null_mut();
    assert_eq!(unsafe { aclrtGetCurrentContext(&mut ctx) }, ACL_SUCCESS);
    ctx as usize
}

#[test]
fn the_plugin_is_told_the_current_device_after_each_change() {
    std::env::set_var("ACLALLOC_DEVICE_COUNT", "2");
    assert_eq!(unsafe { aclInit(std::ptr::null()) }, ACL_SUCCESS);
    let (handle, _) = published::publish(PluggableAllocator::from_functions(PluginFunctions {
        alloc: record_alloc,
        free: record_free,
        init: None,
        empty_cache: None,
        memory_fraction: None,
    }))
    .unwrap();
    let plugin = handle.as_ptr();

    assert_eq!(device_told(plugin), 0, "no current context: device 0");
    assert_eq!(aclrtSetDevice(1), ACL_SUCCESS);
    assert_eq!(device_told(plugin), 1);
    assert_eq!(device_told(plugin), 1, "asked again, the same");
    let default_of_1 = current_context();
    assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
    assert_eq!(device_told(plugin), 0, "aclrtSetDevice");
    let default_of_0 = current_context();

    let mut made = std::ptr::null_mut();
    assert_eq!(unsafe { aclrtCreateContext(&mut made, 1) }, ACL_SUCCESS);
    assert_eq!(
        device_told(plugin),
        1,
        "aclrtCreateContext makes it current"
    );
    assert_eq!(
        unsafe { aclrtSetCurrentContext(default_of_0 as *mut c_void) },
        ACL_SUCCESS
    );
    assert_eq!(device_told(plugin), 0, "aclrtSetCurrentContext");
    assert_eq!(unsafe { aclrtSetCurrentContext(made) }, ACL_SUCCESS);
    assert_eq!(device_told(plugin), 1);

    // Another thread destroys the context current here: this thread has no
    // current context any more, and the plugin is told device 0.
    let made = made as usize;
    std::thread::spawn(move || {
        assert_eq!(
            unsafe { aclrtDestroyContext(made as *mut c_void) },
            ACL_SUCCESS
        );
    })
    .join()
    .unwrap();
    assert_eq!(
        device_told(plugin),
        0,
        "its context was destroyed elsewhere"
    );

    // Another thread's changes do not move this thread's device.
    assert_eq!(
        unsafe { aclrtSetCurrentContext(default_of_1 as *mut c_void) },
        ACL_SUCCESS
    );
    assert_eq!(device_told(plugin), 1);
    std::thread::spawn(move || {
        assert_eq!(device_told_elsewhere(handle.get()), 0);
        assert_eq!(aclrtSetDevice(0), ACL_SUCCESS);
        assert_eq!(device_told_elsewhere(handle.get()), 0);
    })
    .join()
    .unwrap();
    assert_eq!(device_told(plugin), 1, "another thread's SetDevice");

    assert!(published::destroy(handle, |_| false).is_ok());
}

fn device_told_elsewhere(handle: usize) -> i32 {
    device_told(handle as *mut c_void)
}
