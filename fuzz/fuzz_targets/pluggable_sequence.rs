//! Random sequences of calls on pluggable allocators against a model of
//! their books.
//!
//! Each input is a list of calls on the C functions of pluggable allocators
//! (`aclallocPluggableMalloc`, `Free`, `GetStats`, `ResetPeakStats`,
//! `Destroy`), on their descriptors' callbacks as a launch calls them
//! (registered on a stream, read back with `aclrtAllocatorGetByStream`), with
//! live, destroyed and forged allocators, pointers of this allocator, of
//! another, freed already, forged and NULL. The plugin is in this process: it
//! hands out fresh addresses, or NULL when told to, and counts what it holds.
//! The model predicts every return code, every block, every statistic and
//! what the plugin holds; any difference, panic or sanitizer report is a
//! finding. This drives the books shared with the tracking layer
//! (`base::tracked`: the table of live blocks, statistics, refused frees)
//! through the export boundary. Every run ends by freeing, unregistering and
//! destroying what it made.
#![no_main]

#[path = "../common/registration.rs"]
mod registration;

use aclalloc::ffi::cann::allocator::{aclrtAllocatorRegister, aclrtAllocatorUnregister};
use aclalloc::ffi::cann::types::*;
use aclalloc::ffi::ext::plugin::{
    aclallocAllocatorStats, aclallocPluggableDestroy, aclallocPluggableFree,
    aclallocPluggableGetStats, aclallocPluggableMalloc, aclallocPluggableResetPeakStats,
};
use aclalloc::plugin::{published, PluggableAllocator, PluginFunctions};
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use registration::Registered;
use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::ffi::c_void;

const OK: aclError = 0;
const INVALID_PARAM: aclError = 100_000;
const NOT_CLEARED: aclError = 148_051;
const ALLOCATION: aclError = 207_001;

thread_local! {
    /// The plugin's next address (fresh on every alloc) and whether it
    /// answers the next alloc with NULL.
    static NEXT: Cell<usize> = const { Cell::new(0x7000_0000) };
    static FAIL_NEXT: Cell<bool> = const { Cell::new(false) };
    /// What the plugin has handed out and not had back, with its size.
    static HELD: std::cell::RefCell<HashMap<usize, isize>> =
        std::cell::RefCell::new(HashMap::new());
}

unsafe extern "C" fn plugin_alloc(size: isize, _device: i32, _stream: *mut c_void) -> *mut c_void {
    if FAIL_NEXT.with(|f| f.replace(false)) {
        return std::ptr::null_mut();
    }
    let addr = NEXT.with(|n| {
        let a = n.get();
        n.set(a + 0x1000);
        a
    });
    HELD.with(|h| h.borrow_mut().insert(addr, size));
    addr as *mut c_void
}

unsafe extern "C" fn plugin_free(
    ptr: *mut c_void,
    size: isize,
    _device: i32,
    _stream: *mut c_void,
) {
    let held = HELD.with(|h| h.borrow_mut().remove(&(ptr as usize)));
    // The library passes free the size alloc got, and only for what it holds.
    assert_eq!(
        held,
        Some(size),
        "the plugin's free got {ptr:?} ({size} bytes)"
    );
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Alloc {
    /// The n-th allocator this run created (live or destroyed).
    Created(u8),
    Null,
    Forged(u64),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Ptr {
    /// The n-th block this run got (live, or freed already).
    Got(u8),
    Null,
    Forged(u64),
}

#[derive(Arbitrary, Debug)]
enum Op {
    Create,
    /// `fail`: the plugin answers with NULL.
    Malloc {
        a: Alloc,
        size: u32,
        stream: u8,
        fail: bool,
    },
    Free {
        a: Alloc,
        p: Ptr,
    },
    /// Through the descriptor registered on stream `s`.
    DescAlloc {
        s: u8,
        size: u32,
        fail: bool,
    },
    DescFree {
        s: u8,
        p: Ptr,
    },
    Register {
        s: u8,
        a: Alloc,
    },
    Unregister {
        s: u8,
    },
    Stats(Alloc),
    ResetPeaks(Alloc),
    Destroy(Alloc),
}

/// What the model expects of one allocator's books.
#[derive(Default, Clone)]
struct Books {
    live: HashMap<usize, u64>,
    bytes: u64,
    bytes_peak: u64,
    bytes_total: u64,
    freed_total: u64,
    allocs: u64,
    frees: u64,
    peak: u64,
    failed: u64,
    refused: u64,
}

impl Books {
    fn alloc(&mut self, addr: usize, size: u64) {
        self.live.insert(addr, size);
        self.allocs += 1;
        self.bytes += size;
        self.bytes_total += size;
        self.bytes_peak = self.bytes_peak.max(self.bytes);
        self.peak = self.peak.max(self.live.len() as u64);
    }

    /// True when `addr` was live here (then freed).
    fn free(&mut self, addr: usize) -> bool {
        match self.live.remove(&addr) {
            Some(size) => {
                self.frees += 1;
                self.bytes -= size;
                self.freed_total += size;
                true
            }
            None => {
                self.refused += 1;
                false
            }
        }
    }

    fn expect(&self, got: &aclallocAllocatorStats) {
        let want = [
            self.bytes,
            self.bytes_peak,
            self.bytes_total,
            self.freed_total,
            self.allocs,
            self.frees,
            self.live.len() as u64,
            self.peak,
            self.failed,
            self.refused,
        ];
        let got = [
            got.allocatedBytesCurrent,
            got.allocatedBytesPeak,
            got.allocatedBytesTotal,
            got.freedBytesTotal,
            got.allocCount,
            got.freeCount,
            got.activeCount,
            got.activePeak,
            got.failedAllocCount,
            got.refusedFreeCount,
        ];
        assert_eq!(got, want, "statistics (bytes now, peak, total, freed; allocs, frees, live, peak, failed, refused)");
    }
}

struct Made {
    handle: usize,
    desc: usize,
    /// `None` once destroyed.
    books: Option<Books>,
}

#[derive(Default)]
struct Model {
    made: Vec<Made>,
    /// Every block got: its address and the allocator it came from.
    got: Vec<(usize, usize)>,
    /// Stream -> index in `made` of the allocator registered there.
    streams: HashMap<usize, usize>,
}

fn stream_of(s: u8) -> usize {
    0x5000 + (s as usize % 6) * 0x40
}

fn size_of(size: u32) -> usize {
    // Mostly small; now and then more than the plugin can be asked for.
    if size == u32::MAX {
        usize::MAX
    } else {
        size as usize % (1 << 24)
    }
}

impl Model {
    /// The handle passed for `a`, and the allocator it names if live.
    fn handle(&self, a: Alloc) -> (usize, Option<usize>) {
        match a {
            Alloc::Created(i) if !self.made.is_empty() => {
                let i = i as usize % self.made.len();
                let m = &self.made[i];
                (m.handle, m.books.as_ref().map(|_| i))
            }
            Alloc::Created(_) | Alloc::Null => (0, None),
            Alloc::Forged(v) => {
                let v = v as usize;
                (
                    v,
                    self.made
                        .iter()
                        .position(|m| m.handle == v && m.books.is_some()),
                )
            }
        }
    }

    fn ptr(&self, p: Ptr) -> usize {
        match p {
            Ptr::Got(i) if !self.got.is_empty() => self.got[i as usize % self.got.len()].0,
            Ptr::Got(_) | Ptr::Null => 0,
            Ptr::Forged(v) => v as usize,
        }
    }

    fn books(&mut self, i: usize) -> &mut Books {
        self.made[i].books.as_mut().expect("a live allocator")
    }

    fn apply(&mut self, op: Op) {
        match op {
            Op::Create => {
                if self.made.len() >= 6 {
                    return;
                }
                let functions = PluginFunctions {
                    alloc: plugin_alloc,
                    free: plugin_free,
                    init: None,
                    empty_cache: None,
                    memory_fraction: None,
                };
                let (h, d) = published::publish(PluggableAllocator::from_functions(functions))
                    .expect("publish");
                self.made.push(Made {
                    handle: h.as_ptr() as usize,
                    desc: d.as_ptr() as usize,
                    books: Some(Books::default()),
                });
            }
            Op::Malloc {
                a,
                size,
                stream,
                fail,
            } => {
                let (h, live) = self.handle(a);
                let size = size_of(size);
                FAIL_NEXT.with(|f| f.set(fail && live.is_some()));
                let mut out = 0x1 as *mut c_void;
                // SAFETY: `out` is writable.
                let rc = unsafe {
                    aclallocPluggableMalloc(
                        h as *mut c_void,
                        &mut out,
                        size,
                        stream_of(stream) as *mut c_void,
                    )
                };
                FAIL_NEXT.with(|f| f.set(false));
                match live {
                    None => {
                        assert_eq!(rc, INVALID_PARAM, "malloc on a dead or forged allocator");
                        assert_eq!(out as usize, 1, "out written on failure");
                    }
                    Some(_) if size > isize::MAX as usize => {
                        assert_ne!(rc, OK, "malloc of {size} bytes");
                        assert_eq!(out as usize, 1, "out written on failure");
                    }
                    Some(i) if fail => {
                        assert_eq!(rc, ALLOCATION, "malloc the plugin failed");
                        assert_eq!(out as usize, 1, "out written on failure");
                        self.books(i).failed += 1;
                    }
                    Some(i) => {
                        assert_eq!(rc, OK, "malloc");
                        self.books(i).alloc(out as usize, size as u64);
                        self.got.push((out as usize, i));
                    }
                }
            }
            Op::Free { a, p } => {
                let (h, live) = self.handle(a);
                let ptr = self.ptr(p);
                let rc = aclallocPluggableFree(h as *mut c_void, ptr as *mut c_void);
                match live {
                    Some(i) if ptr != 0 => {
                        let freed = self.books(i).free(ptr);
                        assert_eq!(rc, if freed { OK } else { INVALID_PARAM }, "free {ptr:#x}");
                    }
                    _ => assert_eq!(rc, INVALID_PARAM, "free on a dead allocator or of NULL"),
                }
            }
            Op::DescAlloc { s, size, fail } => {
                let stream = stream_of(s);
                let Some(c) = callbacks(stream) else {
                    assert!(
                        !self.streams.contains_key(&stream),
                        "a registration went missing"
                    );
                    return;
                };
                // A pluggable allocator's descriptor sets no allocAdvise.
                assert!(c.advise.is_none(), "allocAdvise read back");
                let i = self.streams[&stream];
                let size = size_of(size) & 0xFF_FFFF;
                FAIL_NEXT.with(|f| f.set(fail));
                // SAFETY: the registered callbacks with their own object.
                let block = unsafe { (c.alloc)(c.obj, size) };
                FAIL_NEXT.with(|f| f.set(false));
                if fail {
                    assert!(block.is_null(), "desc alloc the plugin failed");
                    self.books(i).failed += 1;
                } else {
                    assert!(!block.is_null(), "desc alloc");
                    // SAFETY: as above.
                    assert_eq!(
                        unsafe { (c.get_addr)(block) },
                        block,
                        "a block is its address"
                    );
                    self.books(i).alloc(block as usize, size as u64);
                    self.got.push((block as usize, i));
                }
            }
            Op::DescFree { s, p } => {
                let stream = stream_of(s);
                let Some(c) = callbacks(stream) else {
                    return;
                };
                let ptr = self.ptr(p);
                if ptr == 0 {
                    return;
                }
                let i = self.streams[&stream];
                // SAFETY: the registered callbacks with their own object;
                // a pointer they did not hand out is refused, not freed.
                unsafe { (c.free)(c.obj, ptr as *mut c_void) };
                self.books(i).free(ptr);
            }
            Op::Register { s, a } => {
                let stream = stream_of(s);
                let (_, live) = self.handle(a);
                let desc = match a {
                    Alloc::Created(i) if !self.made.is_empty() => {
                        self.made[i as usize % self.made.len()].desc
                    }
                    _ => return,
                };
                let rc = aclrtAllocatorRegister(stream as *mut c_void, desc as *mut c_void);
                match live {
                    Some(i) => {
                        assert_eq!(rc, OK, "register");
                        self.streams.insert(stream, i);
                    }
                    // Its descriptor went with it.
                    None => assert_eq!(rc, INVALID_PARAM, "register a destroyed allocator"),
                }
            }
            Op::Unregister { s } => {
                let stream = stream_of(s);
                assert_eq!(
                    aclrtAllocatorUnregister(stream as *mut c_void),
                    OK,
                    "unregister"
                );
                self.streams.remove(&stream);
            }
            Op::Stats(a) => {
                let (h, live) = self.handle(a);
                let mut stats = aclallocAllocatorStats::default();
                // SAFETY: `stats` is writable.
                let rc = unsafe { aclallocPluggableGetStats(h as *mut c_void, &mut stats) };
                match live {
                    Some(i) => {
                        assert_eq!(rc, OK, "get stats");
                        self.books(i).expect(&stats);
                    }
                    None => assert_eq!(rc, INVALID_PARAM, "stats of a dead allocator"),
                }
            }
            Op::ResetPeaks(a) => {
                let (h, live) = self.handle(a);
                let rc = aclallocPluggableResetPeakStats(h as *mut c_void);
                match live {
                    Some(i) => {
                        assert_eq!(rc, OK, "reset peaks");
                        let b = self.books(i);
                        b.bytes_peak = b.bytes;
                        b.peak = b.live.len() as u64;
                    }
                    None => assert_eq!(rc, INVALID_PARAM, "reset a dead allocator"),
                }
            }
            Op::Destroy(a) => {
                let (h, live) = self.handle(a);
                let rc = aclallocPluggableDestroy(h as *mut c_void);
                match live {
                    Some(i) => {
                        let busy = !self.books(i).live.is_empty()
                            || self.streams.values().any(|&j| j == i);
                        if busy {
                            assert_eq!(rc, NOT_CLEARED, "destroy with blocks or streams");
                        } else {
                            assert_eq!(rc, OK, "destroy");
                            self.made[i].books = None;
                        }
                    }
                    None => assert_eq!(rc, INVALID_PARAM, "destroy a dead allocator"),
                }
            }
        }
        self.check_held();
    }

    /// The plugin holds exactly the blocks live in the books.
    fn check_held(&self) {
        let live: HashSet<usize> = self
            .made
            .iter()
            .filter_map(|m| m.books.as_ref())
            .flat_map(|b| b.live.keys().copied())
            .collect();
        let held: HashSet<usize> = HELD.with(|h| h.borrow().keys().copied().collect());
        assert_eq!(held, live, "what the plugin holds");
    }

    /// Frees, unregisters and destroys everything this run made.
    fn finish(mut self) {
        for stream in self.streams.keys().copied().collect::<Vec<_>>() {
            assert_eq!(aclrtAllocatorUnregister(stream as *mut c_void), OK);
        }
        self.streams.clear();
        for i in 0..self.made.len() {
            let h = self.made[i].handle as *mut c_void;
            if let Some(b) = self.made[i].books.take() {
                for &addr in b.live.keys() {
                    assert_eq!(aclallocPluggableFree(h, addr as *mut c_void), OK);
                }
                assert_eq!(aclallocPluggableDestroy(h), OK, "destroy at the end");
            }
        }
        self.check_held();
    }
}

/// The callbacks registered on `stream`, as an executor reads them.
fn callbacks(stream: usize) -> Option<Registered> {
    registration::read(stream).1
}

fuzz_target!(|ops: Vec<Op>| {
    let mut model = Model::default();
    for op in ops.into_iter().take(256) {
        model.apply(op);
    }
    model.finish();
});
