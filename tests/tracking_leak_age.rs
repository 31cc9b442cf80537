//! The age a leak report shows. Block times come from the clock thread's
//! word, not from a clock read per alloc (`tracking::LEAK_AGE_BOUND` says
//! how far behind it may be): the age shown must stay within that bound of
//! the real age, also for a thread that allocates rarely (its stamp must
//! not be the time of its previous allocation).

mod common;

use aclalloc::registry::DescriptorHandle;
use aclalloc::tracking::{self, Fault, LeakSeen};
use aclalloc::{AllocatorObj, Callbacks, Registration, StreamKey};
use common::tracking::tracked_callbacks;
use std::ffi::c_void;
use std::time::{Duration, Instant};

/// The user's allocator: a fresh block per alloc, never reused.
unsafe extern "C" fn fresh_alloc(_obj: *mut c_void, _size: usize) -> *mut c_void {
    Box::leak(Box::new([0u64; 8])).as_mut_ptr() as *mut c_void
}
unsafe extern "C" fn fresh_free(_obj: *mut c_void, _block: *mut c_void) {}
unsafe extern "C" fn same_address(block: *mut c_void) -> *mut c_void {
    block
}

/// The clock thread's wake-up delay, which the bound leaves out: generous,
/// for a loaded test machine. Far below the gap between the two allocations
/// below, so a stamp taken from the earlier one still fails.
const WAKE_UP_SLACK: Duration = Duration::from_millis(150);

/// The coarse clock's own tick (at most 10 ms on Linux): the report's
/// reading of it may be that much behind.
const TICK: Duration = Duration::from_millis(10);

#[test]
fn a_rarely_allocating_threads_leak_shows_its_age_within_the_bound() {
    const STREAM: usize = 0x71_0001;
    let object = Box::leak(Box::new(0u64)) as *mut u64 as *mut c_void;
    let user = Callbacks {
        obj: AllocatorObj::new(object).unwrap(),
        alloc: fresh_alloc,
        free: fresh_free,
        alloc_advise: None,
        get_addr_from_block: same_address,
    };
    let c = tracked_callbacks(STREAM, user);
    struct Sendable(Callbacks);
    // SAFETY: the allocator above is usable from any thread.
    unsafe impl Send for Sendable {}
    let c = Sendable(c);

    // One thread allocates once, sleeps, allocates once more.
    let (first, second) = std::thread::spawn(move || {
        let c = { c }.0;
        let timed_alloc = || {
            let before = Instant::now();
            let block = unsafe { (c.alloc)(c.obj.as_ptr(), 64) } as usize;
            (block, before, Instant::now())
        };
        let first = timed_alloc();
        std::thread::sleep(Duration::from_millis(600));
        let second = timed_alloc();
        (first, second)
    })
    .join()
    .unwrap();
    std::thread::sleep(Duration::from_millis(200));

    let registration = Registration {
        descriptor: DescriptorHandle::from_ptr(STREAM as *mut c_void).unwrap(),
        callbacks: user,
    };
    let stream = StreamKey::from_ptr(STREAM as *mut c_void).unwrap();
    let report_before = Instant::now();
    tracking::registration_ended(stream, Some(&registration), LeakSeen::Unregister);
    let report_after = Instant::now();

    let ages: Vec<(usize, u64)> = tracking::faults()
        .0
        .into_iter()
        .filter_map(|e| match e.fault {
            Fault::Leak {
                allocator,
                block,
                age_ns,
                ..
            } if allocator == object as usize => Some((block, age_ns)),
            _ => None,
        })
        .collect();
    assert_eq!(ages.len(), 2, "both blocks leaked: {ages:?}");
    for (block, before, after) in [first, second] {
        let age = Duration::from_nanos(ages.iter().find(|(b, _)| *b == block).unwrap().1);
        // The real age lies between these two.
        let least = report_before - after;
        let most = report_after - before;
        assert!(
            age + TICK >= least,
            "block {block:#x}: shown {age:?}, really at least {least:?}"
        );
        assert!(
            age <= most + tracking::LEAK_AGE_BOUND + WAKE_UP_SLACK,
            "block {block:#x}: shown {age:?}, really at most {most:?} (bound {:?})",
            tracking::LEAK_AGE_BOUND
        );
    }
}
