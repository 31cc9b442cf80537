//! getAddrFromBlock through the tracking layer runs the function of the
//! allocator that holds the block *now*. The layer finds a block's
//! allocator through the calling thread's last allocation; once that block
//! was freed and another allocator (or another registration of the same
//! allocator, with another getAddrFromBlock) handed out the same address on
//! another thread, the thread's memory is stale and must not be used.
//!
//! Both user allocators below hand out one and the same block; their
//! getAddrFromBlock functions are told apart by the offset they add.

mod common;

use aclalloc::tracking::{self, Fault};
use aclalloc::{AllocatorObj, Callbacks};
use common::tracking::tracked_callbacks;
use std::ffi::c_void;

/// The user's allocator: always hands out the same block.
struct SameBlock {
    block: usize,
}

unsafe extern "C" fn same_alloc(obj: *mut c_void, _size: usize) -> *mut c_void {
    unsafe { (*(obj as *const SameBlock)).block as *mut c_void }
}
unsafe extern "C" fn same_free(_obj: *mut c_void, _block: *mut c_void) {}

const OFFSET_A: usize = 0x100;
const OFFSET_C: usize = 0x200;

unsafe extern "C" fn get_addr_a(block: *mut c_void) -> *mut c_void {
    (block as usize + OFFSET_A) as *mut c_void
}
unsafe extern "C" fn get_addr_c(block: *mut c_void) -> *mut c_void {
    (block as usize + OFFSET_C) as *mut c_void
}

type GetAddr = unsafe extern "C" fn(*mut c_void) -> *mut c_void;

/// A block address of its own for each test (the tests share the layer).
fn fresh_block() -> usize {
    Box::leak(Box::new([0u64; 8])).as_ptr() as usize
}

/// A user allocator object handing out `block`.
fn user_object(block: usize) -> usize {
    Box::leak(Box::new(SameBlock { block })) as *const SameBlock as usize
}

/// The tracking callbacks for `object` registered on `stream` with
/// `get_addr`, as a runtime gets them from `aclrtAllocatorGetByStream`.
fn tracked(stream: usize, object: usize, get_addr: GetAddr) -> Callbacks {
    let callbacks = Callbacks {
        obj: AllocatorObj::new(object as *mut c_void).unwrap(),
        alloc: same_alloc,
        free: same_free,
        alloc_advise: None,
        get_addr_from_block: get_addr,
    };
    tracked_callbacks(stream, callbacks)
}

/// The callbacks are plain values; a thread gets its own copy.
#[derive(Clone, Copy)]
struct Sendable(Callbacks);
// SAFETY: the object and functions are usable from any thread (that is the
// contract of a registered allocator).
unsafe impl Send for Sendable {}

fn alloc(c: &Callbacks) -> usize {
    unsafe { (c.alloc)(c.obj.as_ptr(), 64) as usize }
}
fn free(c: &Callbacks, block: usize) {
    unsafe { (c.free)(c.obj.as_ptr(), block as *mut c_void) }
}
fn address(c: &Callbacks, block: usize) -> usize {
    unsafe { (c.get_addr_from_block)(block as *mut c_void) as usize }
}

/// On another thread: `then` runs there (that thread's own last allocation
/// is its business, not this one's).
fn on_other_thread(then: impl FnOnce() + Send + 'static) {
    std::thread::spawn(then).join().expect("the other thread");
}

/// The faults the layer recorded about `block` being unknown.
fn unknown_block_faults(block: usize) -> Vec<Fault> {
    tracking::faults()
        .0
        .into_iter()
        .map(|e| e.fault)
        .filter(|f| matches!(f, Fault::UnknownBlock { block: b, .. } if *b == block))
        .collect()
}

/// On this thread: `x` allocated through `a`, its address (A's function),
/// and freed: this thread's last allocation is now `x` through A.
fn allocated_here_and_freed(a: &Callbacks, x: usize) {
    assert_eq!(alloc(a), x);
    assert_eq!(address(a, x), x + OFFSET_A, "A's function serves A's block");
    free(a, x);
}

/// On this thread, after `x` went to `c` elsewhere: getAddrFromBlock runs
/// the function that serves the block now (C's), the layer knows the block
/// as live, and it is freed.
fn served_by_c_here(c: &Callbacks, x: usize, why: &str) {
    assert_eq!(address(c, x), x + OFFSET_C, "{why}");
    assert_eq!(unknown_block_faults(x), vec![], "the live block is known");
    free(c, x);
}

#[test]
fn the_block_freed_here_and_handed_out_by_another_allocator_elsewhere_gets_that_allocators_address()
{
    let x = fresh_block();
    // A's record is made first: a lookup over every record meets it first.
    let a = tracked(0x61_0001, user_object(x), get_addr_a);
    let c = Sendable(tracked(0x61_0002, user_object(x), get_addr_c));

    allocated_here_and_freed(&a, x);
    on_other_thread(move || assert_eq!(alloc(&{ c }.0), x));
    served_by_c_here(&c.0, x, "A's function ran on the block C holds now");
}

#[test]
fn the_block_freed_on_another_thread_and_handed_out_by_another_allocator_gets_that_allocators_address(
) {
    let x = fresh_block();
    let a = Sendable(tracked(0x62_0001, user_object(x), get_addr_a));
    let c = Sendable(tracked(0x62_0002, user_object(x), get_addr_c));

    assert_eq!(alloc(&a.0), x);
    on_other_thread(move || {
        let (a, c) = ({ a }.0, { c }.0);
        free(&a, x);
        assert_eq!(alloc(&c), x);
    });

    served_by_c_here(&c.0, x, "A's function ran on the block C holds now");
}

#[test]
fn the_same_allocator_registered_again_with_another_get_addr_serves_its_block_with_that_one() {
    let x = fresh_block();
    let object = user_object(x);
    let first = tracked(0x63_0001, object, get_addr_a);
    let second = Sendable(tracked(0x63_0002, object, get_addr_c));

    allocated_here_and_freed(&first, x);
    on_other_thread(move || assert_eq!(alloc(&{ second }.0), x));
    served_by_c_here(
        &second.0,
        x,
        "the block came from the second registration: its function serves it",
    );
}

#[test]
fn the_block_this_thread_just_allocated_still_gets_its_allocators_address() {
    // The common path the thread's memory is for: alloc, then the address,
    // with another allocator handing out the same address in between
    // elsewhere being impossible while the block is live.
    let x = fresh_block();
    let y = fresh_block();
    let a = tracked(0x64_0001, user_object(x), get_addr_a);
    let c = tracked(0x64_0002, user_object(y), get_addr_c);
    for _ in 0..3 {
        assert_eq!(alloc(&a), x);
        assert_eq!(address(&a, x), x + OFFSET_A);
        assert_eq!(alloc(&c), y);
        assert_eq!(address(&c, y), y + OFFSET_C);
        // The older block is not the thread's last: found by lookup.
        assert_eq!(address(&a, x), x + OFFSET_A);
        free(&a, x);
        free(&c, y);
    }
    assert_eq!(unknown_block_faults(x), vec![]);
    assert_eq!(unknown_block_faults(y), vec![]);
}

const OFFSET_FAILING: usize = 0x300;

unsafe extern "C" fn get_addr_failing(block: *mut c_void) -> *mut c_void {
    (block as usize + OFFSET_FAILING) as *mut c_void
}

#[test]
fn null_after_a_failed_alloc_goes_to_the_function_of_the_allocator_that_failed() {
    // NULL belongs to no allocator's records: passed through, it goes to
    // the function of the allocator this thread just asked, not to the
    // newest registration's (here C's, registered after).
    let failing = tracked(0x65_0001, user_object(0), get_addr_failing);
    let _newer = tracked(0x65_0002, user_object(fresh_block()), get_addr_c);
    assert_eq!(alloc(&failing), 0, "this allocator hands out nothing");
    assert_eq!(address(&failing, 0), OFFSET_FAILING);
}

/// A launch with two workspaces asks for the first one's address after the
/// second alloc: the first block is not the thread's last allocation, and
/// the search of the records (lock-free) finds the allocator that holds it,
/// with that registration's function, whether the thread's last
/// allocation came from another allocator or from the same record.
#[test]
fn the_first_of_two_workspaces_gets_its_own_allocators_address() {
    let (x, y) = (fresh_block(), fresh_block());
    let a = tracked(0x63_0001, user_object(x), get_addr_a);
    let c = tracked(0x63_0002, user_object(y), get_addr_c);

    // Another allocator's block is the last allocation.
    assert_eq!(alloc(&a), x);
    assert_eq!(alloc(&c), y);
    assert_eq!(
        address(&a, x),
        x + OFFSET_A,
        "found past the last allocation"
    );
    assert_eq!(address(&c, y), y + OFFSET_C);
    assert_eq!(unknown_block_faults(x), vec![]);
    free(&c, y);
    free(&a, x);

    // The same allocator object serves both (two registrations of it with
    // different functions): its record holds both blocks.
    let object = Box::leak(Box::new(SameBlock { block: x })) as *mut SameBlock;
    let first = tracked(0x63_0003, object as usize, get_addr_a);
    let second = tracked(0x63_0004, object as usize, get_addr_c);
    assert_eq!(alloc(&first), x);
    // SAFETY: only this thread uses the object.
    unsafe { (*object).block = y };
    assert_eq!(alloc(&second), y);
    assert_eq!(
        address(&first, x),
        x + OFFSET_A,
        "the function that served x"
    );
    assert_eq!(address(&second, y), y + OFFSET_C);
    assert_eq!(unknown_block_faults(x), vec![]);
    assert_eq!(unknown_block_faults(y), vec![]);
    free(&second, y);
    free(&first, x);
}
