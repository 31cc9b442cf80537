//! Stress: threads re-registering, unregistering and looking up at once, for
//! a bounded number of operations, checking that every entry read is whole.
//!
//! The loom model (tests/loom_registry.rs) proves the protocol on tiny
//! tables; this runs the shipped code on real threads and real memory
//! ordering, through growth from a 2-slot table and through the C functions.

use aclalloc::base::table::{Table, VALUE_WORDS};
use aclalloc::ffi::cann::allocator::*;
use aclalloc::{aclError, global};
use std::ffi::c_void;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

const WRITERS: usize = 2;
const READERS: usize = 2;
const KEYS: usize = 96;
const WRITES_PER_WRITER: usize = 60_000;

/// Six copies of `key << 20 | generation`: any mix of two writes, or of two
/// keys, is visible.
fn value(key: usize, generation: usize) -> [usize; VALUE_WORDS] {
    [key << 20 | generation; VALUE_WORDS]
}

#[test]
fn table_readers_never_see_a_torn_or_foreign_entry() {
    let table = Table::<[usize; VALUE_WORDS], VALUE_WORDS>::with_capacity(2);
    let done = AtomicBool::new(false);
    let reads = AtomicUsize::new(0);
    let key = |i: usize| NonZeroUsize::new((i + 1) * 64).unwrap();
    std::thread::scope(|s| {
        let mut writers = Vec::new();
        for writer in 0..WRITERS {
            let table = &table;
            writers.push(s.spawn(move || {
                // Each key has one writer, so its generations only grow.
                let mine: Vec<usize> = (0..KEYS).filter(|i| i % WRITERS == writer).collect();
                let mut generation = vec![0usize; KEYS];
                for op in 0..WRITES_PER_WRITER {
                    let i = mine[op * 7 % mine.len()];
                    if op % 5 == 4 {
                        table.remove(key(i));
                    } else {
                        generation[i] += 1;
                        table.insert(key(i), value(key(i).get(), generation[i]));
                    }
                }
            }));
        }
        for reader in 0..READERS {
            let (table, done, reads) = (&table, &done, &reads);
            s.spawn(move || {
                let mut last_seen = vec![0usize; KEYS];
                let mut n = 0;
                while !done.load(Ordering::Relaxed) {
                    for i in (0..KEYS).map(|j| (j * 5 + reader) % KEYS) {
                        n += 1;
                        let Some(words) = table.get(key(i)) else {
                            continue;
                        };
                        assert!(words.iter().all(|w| *w == words[0]), "torn: {words:x?}");
                        assert_eq!(words[0] >> 20, key(i).get(), "another key's entry");
                        let generation = words[0] & 0xF_FFFF;
                        assert!(generation >= last_seen[i], "key {i} went back in time");
                        last_seen[i] = generation;
                    }
                }
                reads.fetch_add(n, Ordering::Relaxed);
            });
        }
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Relaxed);
    });
    println!(
        "{} writes, {} reads, {} keys left",
        WRITERS * WRITES_PER_WRITER,
        reads.load(Ordering::Relaxed),
        table.len()
    );
    // Whatever is left is whole and findable.
    for (k, words) in table.entries() {
        assert_eq!(table.get(k), Some(words));
        assert_eq!(words[0] >> 20, k.get());
    }
}

// The same through the C functions, on the process-wide registry.

#[inline(never)]
unsafe extern "C" fn alloc(_: *mut c_void, _: usize) -> *mut c_void {
    std::ptr::null_mut()
}
#[inline(never)]
unsafe extern "C" fn free(_: *mut c_void, _: *mut c_void) {}
#[inline(never)]
unsafe extern "C" fn get_addr(block: *mut c_void) -> *mut c_void {
    block
}

const DESCRIPTORS: usize = 4;
const STREAMS: usize = 16;
const C_OPS_PER_WRITER: usize = 30_000;

static OBJECTS: [AtomicUsize; DESCRIPTORS] = [const { AtomicUsize::new(0) }; DESCRIPTORS];

fn stream(i: usize) -> *mut c_void {
    // Streams are opaque non-NULL handles; these never collide with real ones
    // used by other tests in this binary.
    (0x5_0000_0000usize + i * 256) as *mut c_void
}

#[test]
fn c_lookups_always_return_one_registration_whole() {
    let descriptors: Vec<usize> = (0..DESCRIPTORS)
        .map(|i| {
            let d = aclrtAllocatorCreateDesc();
            assert!(!d.is_null());
            let obj = &OBJECTS[i] as *const AtomicUsize as *mut c_void;
            assert_eq!(aclrtAllocatorSetObjToDesc(d, obj), 0);
            assert_eq!(aclrtAllocatorSetAllocFuncToDesc(d, Some(alloc)), 0);
            assert_eq!(aclrtAllocatorSetFreeFuncToDesc(d, Some(free)), 0);
            assert_eq!(
                aclrtAllocatorSetGetAddrFromBlockFuncToDesc(d, Some(get_addr)),
                0
            );
            d as usize
        })
        .collect();
    let object_of = |desc: usize| {
        let i = descriptors
            .iter()
            .position(|d| *d == desc)
            .expect("one of ours");
        &OBJECTS[i] as *const AtomicUsize as usize
    };
    let done = AtomicBool::new(false);
    let found = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let descriptors = &descriptors;
                s.spawn(move || {
                    for op in 0..C_OPS_PER_WRITER {
                        let st = stream((op * 3 + w) % STREAMS);
                        let code: aclError = if op % 4 == 3 {
                            aclrtAllocatorUnregister(st)
                        } else {
                            let d = descriptors[(op + w) % DESCRIPTORS];
                            aclrtAllocatorRegister(st, d as *mut c_void)
                        };
                        assert_eq!(code, 0);
                    }
                })
            })
            .collect();
        for _ in 0..READERS {
            let (done, found, object_of) = (&done, &found, &object_of);
            s.spawn(move || {
                let mut n = 0;
                while !done.load(Ordering::Relaxed) {
                    for i in 0..STREAMS {
                        let mut desc = std::ptr::null_mut();
                        let mut obj = std::ptr::null_mut();
                        let mut alloc_fn = None;
                        let mut get_fn = None;
                        let code = unsafe {
                            aclrtAllocatorGetByStream(
                                stream(i),
                                &mut desc,
                                &mut obj,
                                &mut alloc_fn,
                                std::ptr::null_mut(),
                                std::ptr::null_mut(),
                                &mut get_fn,
                            )
                        };
                        if code == 0 {
                            n += 1;
                            assert_eq!(
                                obj as usize,
                                object_of(desc as usize),
                                "a torn registration"
                            );
                            assert_eq!(
                                alloc_fn.map(|f| f as usize),
                                Some(alloc as *const () as usize)
                            );
                            assert_eq!(
                                get_fn.map(|f| f as usize),
                                Some(get_addr as *const () as usize)
                            );
                        } else {
                            assert!(desc.is_null() && obj.is_null(), "written on failure");
                        }
                    }
                }
                // The failed look-ups left messages on this thread; drop them.
                let _ = aclalloc::take_recent_error_messages();
                found.fetch_add(n, Ordering::Relaxed);
            });
        }
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Relaxed);
    });
    println!(
        "{} C registrations/unregistrations, {} successful look-ups",
        WRITERS * C_OPS_PER_WRITER,
        found.load(Ordering::Relaxed)
    );
    for i in 0..STREAMS {
        assert_eq!(aclrtAllocatorUnregister(stream(i)), 0);
    }
    for d in descriptors {
        assert_eq!(aclrtAllocatorDestroyDesc(d as *mut c_void), 0);
    }
    assert!(global()
        .get_by_stream(aclalloc::StreamKey::from_ptr(stream(0)).unwrap())
        .is_err());
}
