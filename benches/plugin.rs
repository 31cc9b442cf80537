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
    use aclalloc::ffi::plugin::{aclallocPluggableFree, aclallocPluggableMalloc};
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

// The floor of the two C paths (issue 15, row 5a): what a C-ABI call into a
// pluggable allocator cannot avoid, in the C functions' own shape. Each
// `floor_*` function is `extern "C"`, never inlined and called through a
// pointer the optimiser cannot see through (as a C caller calls the
// library), and does only this: pin the handle (`core::pin`, as the
// library), find the allocator in a direct-mapped slot (one load and
// compare of the handle, one load of the allocator, as the library), call
// the plugin, write the block out, unpin. `floor_pin_plugin` calls the
// plugin's functions through pointers loaded from memory and nothing else;
// `floor_pin_books` calls `PluggableAllocator::alloc`/`free` instead (the
// books of live blocks and the counters, and the plugin under its unwind
// guard: the Rust API) and tells the plugin the thread's current device.
// What the real C paths do beyond `floor_pin_books` (the argument checks,
// the closing flag, the panic boundary, the stream being served) is the
// part of their cost that is not unavoidable.

use aclalloc::core::pin;
use aclalloc::plugin::context;
use aclalloc::StreamKey;
use std::sync::atomic::AtomicPtr;

/// The floor's direct-mapped table, like the library's: handle, allocator.
struct FloorSlot {
    handle: AtomicUsize,
    allocator: AtomicPtr<PluggableAllocator>,
}

#[allow(clippy::declare_interior_mutable_const)] // Only as the array's initialiser.
const FLOOR_FREE: FloorSlot = FloorSlot {
    handle: AtomicUsize::new(0),
    allocator: AtomicPtr::new(std::ptr::null_mut()),
};
static FLOOR_SLOTS: [FloorSlot; 64] = [FLOOR_FREE; 64];

/// A handle with the library's shape (tag in the top bits, id below).
const FLOOR_HANDLE: usize = 0xF100_0000_0000_0007;

/// The plugin's functions as `floor_pin_plugin` finds them: loaded, then
/// called through the pointer (as the library calls a loaded plugin).
static FLOOR_ALLOC: AtomicUsize = AtomicUsize::new(0);
static FLOOR_FREE_FN: AtomicUsize = AtomicUsize::new(0);

type StubAlloc = unsafe extern "C" fn(isize, i32, *mut c_void) -> *mut c_void;
type StubFree = unsafe extern "C" fn(*mut c_void, isize, i32, *mut c_void);

/// Puts a leaked allocator over the stub plugin in its floor slot.
fn floor_allocator() -> *mut c_void {
    FLOOR_ALLOC.store(stub_alloc as StubAlloc as usize, Ordering::Relaxed);
    FLOOR_FREE_FN.store(stub_free as StubFree as usize, Ordering::Relaxed);
    let slot = &FLOOR_SLOTS[FLOOR_HANDLE & 63];
    if slot.handle.load(Ordering::Acquire) != FLOOR_HANDLE {
        let a = Box::leak(Box::new(PluggableAllocator::from_functions(functions())));
        slot.allocator.store(a, Ordering::Relaxed);
        slot.handle.store(FLOOR_HANDLE, Ordering::Release);
    }
    FLOOR_HANDLE as *mut c_void
}

/// Pinned on `handle`, `f` on its slot's allocator; `None` when it is not there.
#[inline(always)]
fn floor_pinned<R>(handle: *mut c_void, f: impl FnOnce(&PluggableAllocator) -> R) -> Option<R> {
    let key = handle as usize;
    let pin = pin::enter(key)?;
    let slot = &FLOOR_SLOTS[key & 63];
    if slot.handle.load(Ordering::Acquire) != key {
        return None;
    }
    // SAFETY: leaked, never freed.
    let r = f(unsafe { &*slot.allocator.load(Ordering::Relaxed) });
    drop(pin);
    Some(r)
}

type MallocShape = unsafe extern "C" fn(*mut c_void, *mut *mut c_void, usize, *mut c_void) -> i32;
type FreeShape = unsafe extern "C" fn(*mut c_void, *mut c_void) -> i32;

#[inline(never)]
unsafe extern "C" fn floor_plugin_malloc(
    h: *mut c_void,
    out: *mut *mut c_void,
    size: usize,
    stream: *mut c_void,
) -> i32 {
    floor_pinned(h, |_| {
        let alloc: StubAlloc = unsafe { std::mem::transmute(FLOOR_ALLOC.load(Ordering::Relaxed)) };
        let p = unsafe { alloc(size as isize, 0, stream) };
        unsafe { out.write(p) };
        0
    })
    .unwrap_or(1)
}

#[inline(never)]
unsafe extern "C" fn floor_plugin_free(h: *mut c_void, p: *mut c_void) -> i32 {
    floor_pinned(h, |_| {
        let free: StubFree = unsafe { std::mem::transmute(FLOOR_FREE_FN.load(Ordering::Relaxed)) };
        unsafe { free(p, SIZE as isize, 0, std::ptr::null_mut()) };
        0
    })
    .unwrap_or(1)
}

#[inline(never)]
unsafe extern "C" fn floor_books_malloc(
    h: *mut c_void,
    out: *mut *mut c_void,
    size: usize,
    stream: *mut c_void,
) -> i32 {
    floor_pinned(h, |a| {
        match a.alloc(size, context::current_device(), StreamKey::from_ptr(stream)) {
            Ok(p) => {
                unsafe { out.write(p.as_ptr()) };
                0
            }
            Err(_) => 1,
        }
    })
    .unwrap_or(1)
}

#[inline(never)]
unsafe extern "C" fn floor_books_free(h: *mut c_void, p: *mut c_void) -> i32 {
    floor_pinned(h, |a| match std::ptr::NonNull::new(p).map(|p| a.free(p)) {
        Some(Ok(())) => 0,
        _ => 1,
    })
    .unwrap_or(1)
}

fn floor_pair(b: Bencher, malloc: MallocShape, free: FreeShape) {
    let h = floor_allocator() as usize;
    let (malloc, free) = (black_box(malloc), black_box(free));
    b.bench(|| unsafe {
        let h = h as *mut c_void;
        let mut p = std::ptr::null_mut();
        let rc = malloc(h, &mut p, black_box(SIZE), std::ptr::null_mut());
        assert_eq!(rc, 0);
        assert_eq!(free(h, black_box(p)), 0);
    });
}

#[divan::bench(threads = [1])]
fn floor_pin_plugin(b: Bencher) {
    floor_pair(b, floor_plugin_malloc, floor_plugin_free);
}

#[divan::bench(threads = [1])]
fn floor_pin_books(b: Bencher) {
    floor_pair(b, floor_books_malloc, floor_books_free);
}
