//! The bookkeeping cost of a pluggable allocator: one alloc+free pair through
//! the plugin's own functions (the anchor), through `PluggableAllocator`
//! (live-block table and statistics), through the C functions
//! `aclallocPluggableMalloc` / `aclallocPluggableFree` (plus the boundary and
//! the handle lookup), through the descriptor callbacks a launch calls (plus
//! the handle lookup), and through the default allocator's raw functions with
//! the plugin swapped in.
//!
//!     cargo bench --bench plugin
//!
//! The "plugin" is an in-process caching stub that hands out addresses from
//! a per-thread free list, so the numbers are aclalloc's overhead, not
//! malloc's. `threads` runs the same pairs from 1 and 2 threads on one
//! allocator.

use aclalloc::default_allocator::{DefaultAllocator, Source};
use aclalloc::plugin::{published, PluggableAllocator, PluginFunctions};
use aclalloc::{global, DescriptorHandle};
use divan::{black_box, Bencher};
use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

fn main() {
    divan::main();
}

static NEXT: AtomicUsize = AtomicUsize::new(1);
thread_local! {
    static CACHED: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

unsafe extern "C" fn stub_alloc(_size: isize, _device: i32, _stream: *mut c_void) -> *mut c_void {
    let addr = CACHED
        .with(|c| c.borrow_mut().pop())
        .unwrap_or_else(|| NEXT.fetch_add(1, Ordering::Relaxed) << 12);
    addr as *mut c_void
}
unsafe extern "C" fn stub_free(ptr: *mut c_void, _size: isize, _device: i32, _stream: *mut c_void) {
    CACHED.with(|c| c.borrow_mut().push(ptr as usize));
}

fn functions() -> PluginFunctions {
    PluginFunctions {
        alloc: stub_alloc,
        free: stub_free,
        init: None,
        empty_cache: None,
        memory_fraction: None,
    }
}

const SIZE: usize = 4096;

#[divan::bench(threads = [1, 2])]
fn plugin_functions_directly(b: Bencher) {
    b.bench(|| unsafe {
        let p = stub_alloc(black_box(SIZE as isize), 0, std::ptr::null_mut());
        stub_free(black_box(p), SIZE as isize, 0, std::ptr::null_mut());
    });
}

#[divan::bench(threads = [1, 2])]
fn pluggable_allocator(b: Bencher) {
    let a = PluggableAllocator::from_functions(functions());
    b.bench(|| {
        let p = a.alloc(black_box(SIZE), 0, None).unwrap();
        a.free(black_box(p)).unwrap();
    });
}

#[divan::bench(threads = [1, 2])]
fn c_functions(b: Bencher) {
    use aclalloc::ffi::ext::plugin::{aclallocPluggableFree, aclallocPluggableMalloc};
    let (handle, _) = published::publish(PluggableAllocator::from_functions(functions())).unwrap();
    let h = handle.get();
    b.bench(|| unsafe {
        let h = h as *mut c_void;
        let mut p = std::ptr::null_mut();
        let rc = aclallocPluggableMalloc(h, &mut p, black_box(SIZE), std::ptr::null_mut());
        assert_eq!(rc, 0);
        assert_eq!(aclallocPluggableFree(h, black_box(p)), 0);
    });
}

#[divan::bench(threads = [1, 2])]
fn descriptor_callbacks(b: Bencher) {
    let (_, desc) = published::publish(PluggableAllocator::from_functions(functions())).unwrap();
    let c = global().descriptor(desc).unwrap().callbacks().unwrap();
    b.bench(|| unsafe {
        let block = (c.alloc)(c.obj.as_ptr(), black_box(SIZE));
        let addr = (c.get_addr_from_block)(block);
        black_box(addr);
        (c.free)(c.obj.as_ptr(), block);
    });
}

fn no_env() -> aclalloc::Result<aclalloc::default_allocator::choice::Choice> {
    Ok(aclalloc::default_allocator::choice::Choice::Device)
}

#[divan::bench(threads = [1, 2])]
fn default_allocator_raw(b: Bencher) {
    let (_, desc) = published::publish(PluggableAllocator::from_functions(functions())).unwrap();
    let d = DefaultAllocator::new(no_env);
    d.swap(Source::from_descriptor(DescriptorHandle::from_ptr(desc.as_ptr()).unwrap()).unwrap())
        .unwrap();
    b.bench(|| {
        let p = d.alloc(black_box(SIZE), None).unwrap();
        d.free(black_box(p)).unwrap();
    });
}
