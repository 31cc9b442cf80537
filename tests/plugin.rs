//! Pluggable allocators through the C ABI, with a real plugin built from
//! `c_examples/my_plugin_allocator.c`. Each test loads its own copy of the
//! plugin (a distinct path is a distinct object with its own counters), so
//! tests running in parallel do not see each other's counts.

mod common;
mod plugin_support;

use plugin_support::{build as build_plugin, counters as plugin_counters, is_loaded};

use aclalloc::base::error::*;
use aclalloc::ffi::cann::allocator::*;
use aclalloc::ffi::ext::plugin::*;
use common::message;
use std::ffi::{c_void, CStr, CString};
use std::ptr::null_mut;

/// Taken by every test: one of them counts the process's live descriptors,
/// which the others create and destroy.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

struct Names {
    path: CString,
    alloc: CString,
    free: CString,
    init: CString,
    empty: CString,
    fraction: CString,
}

impl Names {
    fn new(path: &std::path::Path) -> Self {
        Names {
            path: CString::new(path.to_str().unwrap()).unwrap(),
            alloc: CString::new("my_malloc").unwrap(),
            free: CString::new("my_free").unwrap(),
            init: CString::new("my_init").unwrap(),
            empty: CString::new("my_empty_cache").unwrap(),
            fraction: CString::new("my_set_memory_fraction").unwrap(),
        }
    }

    fn config(&self, hooks: bool) -> aclallocPluggableConfig {
        let opt = |s: &CString| if hooks { s.as_ptr() } else { std::ptr::null() };
        aclallocPluggableConfig {
            path: self.path.as_ptr(),
            allocSymbol: self.alloc.as_ptr(),
            freeSymbol: self.free.as_ptr(),
            initSymbol: opt(&self.init),
            emptyCacheSymbol: opt(&self.empty),
            memoryFractionSymbol: opt(&self.fraction),
        }
    }
}

fn create(config: &aclallocPluggableConfig) -> Result<(*mut c_void, *mut c_void), aclError> {
    let mut plugin = null_mut();
    let mut desc = null_mut();
    match unsafe { aclallocPluggableCreate(config, &mut plugin, &mut desc) } {
        ACL_SUCCESS => Ok((plugin, desc)),
        code => {
            assert!(
                plugin.is_null() && desc.is_null(),
                "nothing written on failure"
            );
            Err(code)
        }
    }
}

fn stats(plugin: *mut c_void) -> aclallocAllocatorStats {
    let mut s = aclallocAllocatorStats::default();
    assert_eq!(
        unsafe { aclallocPluggableGetStats(plugin, &mut s) },
        ACL_SUCCESS
    );
    s
}

#[test]
fn a_plugin_serves_a_registered_stream_and_its_counters_balance() {
    let _serial = serial();
    let so = build_plugin("register");
    let names = Names::new(&so);
    let (plugin, desc) = create(&names.config(true)).expect("create");
    let c = plugin_counters(&so);
    assert_eq!((c[4], c[5]), (1, 1), "init ran once with the device count");

    let mut stream_storage = 0u64;
    let stream = &mut stream_storage as *mut u64 as *mut c_void;
    assert_eq!(aclrtAllocatorRegister(stream, desc), ACL_SUCCESS);
    let (mut d, mut obj) = (null_mut(), null_mut());
    let (mut alloc, mut free, mut addr) = (None, None, None);
    let rc = unsafe {
        aclrtAllocatorGetByStream(
            stream,
            &mut d,
            &mut obj,
            &mut alloc,
            &mut free,
            null_mut(),
            &mut addr,
        )
    };
    assert_eq!(rc, ACL_SUCCESS);
    let (alloc, free, addr) = (alloc.unwrap(), free.unwrap(), addr.unwrap());

    let sizes = [0usize, 1, 4096, 3 << 20, 512];
    let blocks: Vec<*mut c_void> = sizes
        .iter()
        .map(|&n| {
            let b = unsafe { alloc(obj, n) };
            assert!(!b.is_null());
            let p = unsafe { addr(b) } as *mut u8;
            assert_eq!(p as *mut c_void, b, "a block is its device address");
            unsafe { std::ptr::write_bytes(p, 0xA5, n) };
            b
        })
        .collect();
    let s = stats(plugin);
    let total: u64 = sizes.iter().map(|&n| n as u64).sum();
    assert_eq!(s.allocatedBytesCurrent, total);
    assert_eq!(s.activeCount, sizes.len() as u64);
    assert_eq!(plugin_counters(&so)[7], total as i64, "the plugin agrees");

    // Busy: destroying now would leave blocks and a registration behind.
    assert_eq!(
        aclallocPluggableDestroy(plugin),
        ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED
    );
    assert_eq!(
        message(),
        "aclallocPluggableDestroy failed. It is still in use. Blocks it handed out that were not freed: 5."
    );

    for b in blocks {
        unsafe { free(obj, b) };
    }
    let c = plugin_counters(&so);
    assert_eq!(
        (c[0], c[1], c[2], c[3]),
        (0, 5, 5, 0),
        "balanced, every free got alloc's size"
    );
    let s = stats(plugin);
    assert_eq!((s.allocCount, s.freeCount, s.activeCount), (5, 5, 0));
    assert_eq!((s.allocatedBytesCurrent, s.allocatedBytesPeak), (0, total));

    assert_eq!(
        aclallocPluggableDestroy(plugin),
        ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED
    );
    assert!(message().ends_with("Streams registered with it (unregister them first): 1."));
    assert_eq!(aclrtAllocatorUnregister(stream), ACL_SUCCESS);
    assert_eq!(aclallocPluggableDestroy(plugin), ACL_SUCCESS);
    assert!(!is_loaded(&so), "unloaded once destroyed");
    assert_eq!(
        aclrtAllocatorDestroyDesc(desc),
        ACL_ERROR_INVALID_PARAM,
        "destroyed with it"
    );
    assert_eq!(aclallocPluggableDestroy(plugin), ACL_ERROR_INVALID_PARAM);
    // A stale copy of the callbacks fails cleanly.
    assert!(unsafe { alloc(obj, 16) }.is_null());
    assert!(message().contains("not a live pluggable allocator"));
}

#[test]
fn foreign_and_double_frees_never_reach_the_plugin() {
    let _serial = serial();
    let so = build_plugin("frees");
    let names = Names::new(&so);
    let (plugin, _desc) = create(&names.config(false)).unwrap();
    let mut p = null_mut();
    let stream = 0x5000 as *mut c_void;
    assert_eq!(
        unsafe { aclallocPluggableMalloc(plugin, &mut p, 100, stream) },
        ACL_SUCCESS
    );
    let mut on_stack = 0u8;
    let foreign = &mut on_stack as *mut u8 as *mut c_void;
    assert_eq!(
        aclallocPluggableFree(plugin, foreign),
        ACL_ERROR_INVALID_PARAM
    );
    assert_eq!(
        message(),
        "aclallocPluggableFree failed. Trying to free a pointer not allocated here."
    );
    // Inside a live block but not its start: still not allocated here.
    let inner = (p as usize + 8) as *mut c_void;
    assert_eq!(
        aclallocPluggableFree(plugin, inner),
        ACL_ERROR_INVALID_PARAM
    );
    let _ = message();
    assert_eq!(aclallocPluggableFree(plugin, p), ACL_SUCCESS);
    assert_eq!(aclallocPluggableFree(plugin, p), ACL_ERROR_INVALID_PARAM);
    let m = message();
    assert!(
        m.starts_with("aclallocPluggableFree failed. Trying to free a pointer not allocated here")
    );
    assert!(m.contains("double free"), "{m}");
    let c = plugin_counters(&so);
    assert_eq!(
        (c[1], c[2], c[3]),
        (1, 1, 0),
        "the plugin saw one alloc and one correct free"
    );
    assert_eq!(stats(plugin).refusedFreeCount, 3);
    assert_eq!(
        aclallocPluggableFree(plugin, null_mut()),
        ACL_ERROR_INVALID_PARAM
    );
    let _ = message();
    assert_eq!(aclallocPluggableDestroy(plugin), ACL_SUCCESS);
}

#[test]
fn a_missing_file_or_symbol_is_reported_with_the_loaders_text_and_leaves_nothing() {
    let _serial = serial();
    let so = build_plugin("missing");
    let names = Names::new(&so);
    let live_before = aclalloc::global().live_descriptors();

    let missing = CString::new(so.with_file_name("no_such_plugin.so").to_str().unwrap()).unwrap();
    let mut config = names.config(false);
    config.path = missing.as_ptr();
    assert_eq!(create(&config), Err(ACL_ERROR_INVALID_FILE));
    let m = message();
    assert!(
        m.starts_with("aclallocPluggableCreate failed. The allocator library cannot be loaded: ")
    );
    assert!(
        m.contains("no_such_plugin.so") && m.contains("No such file"),
        "{m}"
    );

    let wrong = CString::new("no_such_malloc").unwrap();
    let mut config = names.config(true);
    config.allocSymbol = wrong.as_ptr();
    assert_eq!(create(&config), Err(ACL_ERROR_FILE_MISSING_ATTR));
    let m = message();
    assert!(
        m.contains("allocSymbol") && m.contains("no_such_malloc"),
        "{m}"
    );
    assert!(m.contains("undefined symbol"), "the loader's text: {m}");

    let mut config = names.config(true);
    config.emptyCacheSymbol = wrong.as_ptr();
    assert_eq!(create(&config), Err(ACL_ERROR_FILE_MISSING_ATTR));
    assert!(message().contains("emptyCacheSymbol"));

    assert!(!is_loaded(&so), "nothing stays loaded");
    assert_eq!(plugin_counters_if_loaded(&so), None, "init never ran");
    assert_eq!(
        aclalloc::global().live_descriptors(),
        live_before,
        "no descriptor left"
    );

    let mut config = names.config(false);
    config.freeSymbol = std::ptr::null();
    assert_eq!(create(&config), Err(ACL_ERROR_INVALID_PARAM));
    assert_eq!(
        message(),
        "aclallocPluggableCreate failed because config->freeSymbol cannot be a NULL pointer."
    );
    assert_eq!(
        unsafe { aclallocPluggableCreate(std::ptr::null(), null_mut(), null_mut()) },
        ACL_ERROR_INVALID_PARAM
    );
    let _ = message();
}

fn plugin_counters_if_loaded(so: &std::path::Path) -> Option<[i64; 10]> {
    is_loaded(so).then(|| plugin_counters(so))
}

#[test]
fn null_from_the_plugin_is_a_memory_allocation_error_and_hooks_are_called() {
    let _serial = serial();
    let so = build_plugin("null");
    let names = Names::new(&so);
    let (plugin, desc) = create(&names.config(true)).unwrap();
    let mut p = 0x1 as *mut c_void;
    let huge = 2usize << 30;
    assert_eq!(
        unsafe { aclallocPluggableMalloc(plugin, &mut p, huge, null_mut()) },
        ACL_ERROR_RT_MEMORY_ALLOCATION
    );
    assert_eq!(p, 0x1 as *mut c_void, "untouched on failure");
    assert_eq!(
        message(),
        format!("aclallocPluggableMalloc failed. The pluggable allocator returned NULL for {huge} bytes on device 0.")
    );
    // The same through the descriptor: NULL block and a message.
    let d = aclalloc::global()
        .descriptor(aclalloc::DescriptorHandle::from_ptr(desc).unwrap())
        .unwrap()
        .callbacks()
        .unwrap();
    assert!(unsafe { (d.alloc)(d.obj.as_ptr(), huge) }.is_null());
    assert!(message().contains("returned NULL"));
    assert_eq!(stats(plugin).failedAllocCount, 2);

    // Memory fraction reaches the plugin: half of its 1 GiB limit.
    assert_eq!(
        aclallocPluggableSetMemoryFraction(plugin, 0.5, 0),
        ACL_SUCCESS
    );
    assert_eq!(
        unsafe { aclallocPluggableMalloc(plugin, &mut p, 600 << 20, null_mut()) },
        ACL_ERROR_RT_MEMORY_ALLOCATION
    );
    let _ = message();
    assert_eq!(
        aclallocPluggableSetMemoryFraction(plugin, 0.0, 0),
        ACL_ERROR_INVALID_PARAM
    );
    let _ = message();
    assert_eq!(aclallocPluggableEmptyCache(plugin), ACL_SUCCESS);
    assert_eq!(plugin_counters(&so)[6], 1);

    // Peaks reset to the current value.
    assert_eq!(
        unsafe { aclallocPluggableMalloc(plugin, &mut p, 1000, null_mut()) },
        ACL_SUCCESS
    );
    assert_eq!(aclallocPluggableFree(plugin, p), ACL_SUCCESS);
    assert_eq!(stats(plugin).allocatedBytesPeak, 1000);
    assert_eq!(aclallocPluggableResetPeakStats(plugin), ACL_SUCCESS);
    assert_eq!(stats(plugin).allocatedBytesPeak, 0);
    assert_eq!(aclallocPluggableDestroy(plugin), ACL_SUCCESS);
}

#[test]
fn hooks_that_were_not_named_are_handled_as_documented() {
    let _serial = serial();
    let so = build_plugin("nohooks");
    let names = Names::new(&so);
    let (plugin, _) = create(&names.config(false)).unwrap();
    assert_eq!(plugin_counters(&so)[4], 0, "no init named, none called");
    assert_eq!(aclallocPluggableEmptyCache(plugin), ACL_SUCCESS);
    assert_eq!(
        aclallocPluggableSetMemoryFraction(plugin, 0.5, 0),
        ACL_ERROR_API_NOT_SUPPORT
    );
    assert!(message().contains("memoryFractionSymbol"));
    assert_eq!(aclallocPluggableDestroy(plugin), ACL_SUCCESS);
    // Handles of other kinds and forged values are refused.
    let mut s = aclallocAllocatorStats::default();
    let desc = aclrtAllocatorCreateDesc();
    assert_eq!(
        unsafe { aclallocPluggableGetStats(desc, &mut s) },
        ACL_ERROR_INVALID_PARAM
    );
    assert_eq!(
        unsafe { aclallocPluggableGetStats(0x1234 as *mut c_void, &mut s) },
        ACL_ERROR_INVALID_PARAM
    );
    let _ = message();
    assert_eq!(aclrtAllocatorDestroyDesc(desc), ACL_SUCCESS);
}

#[test]
fn concurrent_use_from_several_threads_balances() {
    let _serial = serial();
    let so = build_plugin("threads");
    let names = Names::new(&so);
    let (plugin, _) = create(&names.config(false)).unwrap();
    let plugin_addr = plugin as usize;
    let threads: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                let plugin = plugin_addr as *mut c_void;
                let stream = ((t + 1) * 0x100) as *mut c_void;
                let mut held = Vec::new();
                for i in 0..2000usize {
                    let mut p = null_mut();
                    let size = (i * 37 + t * 11) % 70_000;
                    assert_eq!(
                        unsafe { aclallocPluggableMalloc(plugin, &mut p, size, stream) },
                        ACL_SUCCESS
                    );
                    held.push(p);
                    if i % 3 == 0 {
                        for p in held.drain(..) {
                            assert_eq!(aclallocPluggableFree(plugin, p), ACL_SUCCESS);
                        }
                    }
                }
                for p in held {
                    assert_eq!(aclallocPluggableFree(plugin, p), ACL_SUCCESS);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let c = plugin_counters(&so);
    assert_eq!((c[0], c[1], c[2], c[3]), (0, 8000, 8000, 0));
    let s = stats(plugin);
    assert_eq!(
        (s.allocCount, s.freeCount, s.allocatedBytesCurrent),
        (8000, 8000, 0)
    );
    assert!(s.activePeak >= 1);
    assert_eq!(aclallocPluggableDestroy(plugin), ACL_SUCCESS);
}

#[test]
fn the_plugin_receives_the_stream_and_reuses_blocks_only_on_it() {
    let _serial = serial();
    let so = build_plugin("streams");
    let names = Names::new(&so);
    let (plugin, _) = create(&names.config(true)).unwrap();
    let (a, b) = (0xA000 as *mut c_void, 0xB000 as *mut c_void);
    let mut p = null_mut();
    assert_eq!(
        unsafe { aclallocPluggableMalloc(plugin, &mut p, 3000, a) },
        ACL_SUCCESS
    );
    assert_eq!(aclallocPluggableFree(plugin, p), ACL_SUCCESS);
    let first = p;
    // Another stream does not get stream a's cached block.
    assert_eq!(
        unsafe { aclallocPluggableMalloc(plugin, &mut p, 3000, b) },
        ACL_SUCCESS
    );
    assert_ne!(p, first);
    assert_eq!(aclallocPluggableFree(plugin, p), ACL_SUCCESS);
    // Stream a does, for the same size class.
    assert_eq!(
        unsafe { aclallocPluggableMalloc(plugin, &mut p, 4000, a) },
        ACL_SUCCESS
    );
    assert_eq!(p, first);
    assert_eq!(aclallocPluggableFree(plugin, p), ACL_SUCCESS);
    let c = plugin_counters(&so);
    assert_eq!((c[1], c[2], c[3], c[8], c[9]), (3, 3, 0, 2, 2));
    assert_eq!(aclallocPluggableEmptyCache(plugin), ACL_SUCCESS);
    assert_eq!(
        plugin_counters(&so)[8],
        0,
        "the cache went back to the system"
    );
    assert_eq!(aclallocPluggableDestroy(plugin), ACL_SUCCESS);
}

/// Builds `tests/plugin_support/witness_plugin.c`, which writes to `log`
/// when its empty-cache hook runs and when it is unloaded.
fn build_witness(name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = common::scratch(&format!("plugin-{name}"));
    let so = dir.join("libwitness.so");
    let log = dir.join("witness.log");
    let status = std::process::Command::new("cc")
        .args([
            "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
        ])
        .arg(format!("-DWITNESS_PATH={:?}", log.to_str().unwrap()))
        .arg(common::root().join("tests/plugin_support/witness_plugin.c"))
        .arg("-o")
        .arg(&so)
        .status()
        .expect("run cc");
    assert!(status.success(), "building the witness plugin failed");
    (so, log)
}

fn witness_config(path: &CStr, empty_cache: Option<&CStr>) -> aclallocPluggableConfig {
    aclallocPluggableConfig {
        path: path.as_ptr(),
        allocSymbol: c"witness_malloc".as_ptr(),
        freeSymbol: c"witness_free".as_ptr(),
        initSymbol: std::ptr::null(),
        emptyCacheSymbol: empty_cache.map_or(std::ptr::null(), CStr::as_ptr),
        memoryFractionSymbol: std::ptr::null(),
    }
}

#[test]
fn destroy_empties_the_plugins_cache_before_unloading_it() {
    let _serial = serial();
    let (so, log) = build_witness("witness");
    let path = CString::new(so.to_str().unwrap()).unwrap();
    let read = || std::fs::read_to_string(&log).unwrap_or_default();

    let (plugin, _) = create(&witness_config(&path, Some(c"witness_empty_cache"))).unwrap();
    let mut p = null_mut();
    assert_eq!(
        unsafe { aclallocPluggableMalloc(plugin, &mut p, 4096, null_mut()) },
        ACL_SUCCESS
    );
    assert_eq!(aclallocPluggableFree(plugin, p), ACL_SUCCESS);
    assert_eq!(read(), "", "nothing emptied or unloaded while in use");
    assert_eq!(aclallocPluggableDestroy(plugin), ACL_SUCCESS);
    assert!(!is_loaded(&so), "unloaded by destroy");
    assert_eq!(read(), "empty_cache\nunloaded\n");

    // Without an empty-cache hook named, destroy just unloads.
    std::fs::remove_file(&log).unwrap();
    let (plugin, _) = create(&witness_config(&path, None)).unwrap();
    assert_eq!(aclallocPluggableDestroy(plugin), ACL_SUCCESS);
    assert_eq!(read(), "unloaded\n");

    // A refused destroy empties nothing: the allocator is still in use.
    std::fs::remove_file(&log).unwrap();
    let (plugin, _) = create(&witness_config(&path, Some(c"witness_empty_cache"))).unwrap();
    assert_eq!(
        unsafe { aclallocPluggableMalloc(plugin, &mut p, 64, null_mut()) },
        ACL_SUCCESS
    );
    assert_eq!(
        aclallocPluggableDestroy(plugin),
        ACL_ERROR_RELATIVE_RESOURCE_NOT_CLEARED
    );
    let _ = message();
    assert_eq!(read(), "");
    assert_eq!(aclallocPluggableFree(plugin, p), ACL_SUCCESS);
    assert_eq!(aclallocPluggableDestroy(plugin), ACL_SUCCESS);
    assert_eq!(read(), "empty_cache\nunloaded\n");
}
