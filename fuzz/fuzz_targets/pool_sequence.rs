//! Random sequences of caching-pool calls, made the way an executor makes
//! them, against a model of the live blocks.
//!
//! Pools come from `aclallocPoolCreate` (small limits on a 64 MiB device),
//! stream descriptors from `aclallocPoolCreateStreamDesc`; descriptors are
//! registered on streams, and every alloc, allocAdvise and free goes through
//! the callbacks `aclrtAllocatorGetByStream` returns, as CANN's executor
//! calls them. Frees include foreign, interior, NULL and double frees.
//! Between the calls: empty cache, trim, limit changes, statistics reads,
//! snapshots, destroys, and calls on dead and forged handles.
//!
//! Checked after every call: the return code and the messages
//! `aclGetRecentErrMsg` holds; that no two live blocks overlap and each is
//! 512-byte aligned and keeps the bytes written into it; that a refused free
//! changes no statistic; that `allocated_bytes` matches the model's live
//! blocks (exactly for the small pool, at least the rounded sizes for the
//! large one), `requested_bytes` and the block count match exactly,
//! `reserved >= allocated` and reserved memory never grows past the limit;
//! that an allocation fails only when a pool with no live block could not
//! fit it; that an idle pool holds nothing after `empty_cache` (and at most
//! the kept bytes after `trim`). Each run frees and destroys what it made
//! (after checking that resetting an idle pool's statistics zeroes them)
//! and checks device memory, descriptors and registrations are back where
//! they started. A destroyed pool's host-side struct is freed once nothing
//! uses it (crates/aclalloc-pool/src/handles.rs), so runs simply create and
//! destroy pools, as many as the process runs.
#![no_main]

#[path = "../common/messages.rs"]
mod messages;
#[path = "../common/registration.rs"]
mod registration;

use aclalloc::ffi::cann::allocator::*;
use aclalloc::ffi::cann::errmsg::aclGetRecentErrMsg;
use aclalloc::ffi::cann::memory::aclrtGetMemInfo;
use aclalloc::ffi::cann::runtime::{aclInit, aclrtSetDevice};
use aclalloc::ffi::cann::types::*;
use aclalloc::ffi::ext::pool::*;
use aclalloc::pool::PoolStats;
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use registration::Registered;
use std::collections::{BTreeMap, HashMap};
use std::ffi::c_void;

const OK: aclError = 0;
const INVALID_PARAM: aclError = 100_000;
const RELATIVE_RESOURCE_NOT_CLEARED: aclError = 148_051;
const MIB: usize = 1 << 20;
/// The device's capacity (ACLALLOC_DEVICE_MEMORY), small so limits bite.
const DEVICE_MIB: usize = 64;
const MAX_OPS: usize = 96;
/// Pools a run creates (a create beyond them is skipped).
const MAX_POOL_CREATES: usize = 2;
const MAX_LIVE_POOLS: usize = 3;
/// What `aclGetRecentErrMsg` may hold beyond the model's lines: the host
/// runtime's own refusals when a pool asks the device for a segment or,
/// for an expandable one, for physical pages.
const DEVICE_LINES: [&str; 2] = ["aclrtMalloc failed", "aclrtMallocPhysical failed"];

#[derive(Arbitrary, Debug, Clone, Copy)]
struct Config {
    null_config: bool,
    limit_mib: u8,
    fraction_tenths: u8,
    max_split_mib: u8,
    gc_tenths: u8,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum PoolPick {
    Null,
    /// The n-th pool this run created (live or destroyed).
    Pool(u8),
    /// A stream descriptor's object seen through aclrtAllocatorGetByStream.
    View(u8),
    /// A pool-tagged value with a small id: a pool this run made (the
    /// model resolves it), one an earlier run destroyed, or one never made.
    Tagged(u16),
    Forged(u64),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Size {
    Tiny(u16),
    Small(u32),
    Large(u32),
    Huge(u16),
    /// Near a boundary of the free index's size classes (16 per power of
    /// two, in 512-byte units; `crates/aclalloc-pool/src/engine/tlsf.rs`): (power, step,
    /// offset of -1, 0 or +1 unit).
    ClassEdge(u8, u8, u8),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum BlockPick {
    Null,
    Live(u8),
    /// A block freed earlier (a double free unless handed out again).
    Freed(u8),
    /// 512 bytes into a live block.
    Interior(u8),
    Raw(u64),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Op {
    Create(Config),
    CreateStreamDesc(PoolPick, u8),
    DestroyDesc(u8),
    Register(u8, u8),
    Unregister(u8),
    Alloc(u8, Size),
    Advise(u8, Size, BlockPick),
    Free(u8, BlockPick),
    EmptyCache(PoolPick),
    Trim(PoolPick, u8),
    SetLimit(PoolPick, u8),
    SetFraction(PoolPick, u8),
    ResetPeak(PoolPick),
    ReadStats(PoolPick),
    Snapshot(PoolPick),
    Destroy(PoolPick),
}

struct PoolModel {
    handle: usize,
    alive: bool,
    /// The limit in bytes (usize::MAX: none).
    limit: usize,
    /// Address → (rounded size, requested size, the byte written into it).
    live: BTreeMap<usize, (usize, usize, u8)>,
}

struct DescModel {
    handle: usize,
    pool: usize,
    alive: bool,
}

#[derive(Default)]
struct Model {
    pools: Vec<PoolModel>,
    descs: Vec<DescModel>,
    /// Stream → pool index of the descriptor registered on it.
    streams: HashMap<usize, usize>,
    /// Objects of stream descriptors seen, and their pool.
    views: Vec<(usize, usize)>,
    freed: Vec<usize>,
    /// Failures of this op, in call order.
    failed: Vec<&'static str>,
    next_tag: u8,
    /// Device free bytes, descriptors, registrations at the start.
    baseline: (usize, usize, usize),
}

fn round(size: usize) -> Option<usize> {
    size.max(1)
        .checked_add(511)
        .map(|s| s & !511)
        .filter(|&s| s <= isize::MAX as usize)
}

fn device_free() -> usize {
    let (mut free, mut total) = (0, 0);
    // SAFETY: both out-pointers are valid.
    let rc = unsafe { aclrtGetMemInfo(ACL_HBM_MEM, &mut free, &mut total) };
    assert_eq!(rc, OK, "aclrtGetMemInfo");
    assert_eq!(total, DEVICE_MIB * MIB);
    free
}

fn stats(handle: usize) -> PoolStats {
    let mut s = PoolStats::default();
    // SAFETY: a valid out-pointer.
    let rc = unsafe { aclallocPoolGetStats(handle as *mut c_void, &mut s) };
    assert_eq!(rc, OK, "aclallocPoolGetStats");
    s
}

fn stream_of(s: u8) -> usize {
    0x7000 + (s as usize % 4) * 64
}

impl Model {
    fn fail(&mut self, function: &'static str, got: aclError, want: aclError) {
        assert_eq!(got, want, "{function}");
        if want != OK {
            self.failed.push(function);
        }
    }

    /// The messages are exactly this op's failures, newest first, apart
    /// from the device's own refusals.
    fn check_messages(&mut self) {
        messages::check(std::mem::take(&mut self.failed), &DEVICE_LINES);
    }

    /// A handle and the pool it names (for a view: the view's pool), if any.
    fn pick(&self, p: PoolPick) -> (usize, Option<usize>) {
        let handle = match p {
            PoolPick::Null => 0,
            PoolPick::Pool(i) if self.pools.is_empty() => i as usize,
            PoolPick::Pool(i) => self.pools[i as usize % self.pools.len()].handle,
            PoolPick::View(i) if self.views.is_empty() => i as usize,
            PoolPick::View(i) => self.views[i as usize % self.views.len()].0,
            PoolPick::Tagged(id) => (0xACA5usize << 48) | id as usize,
            PoolPick::Forged(v) => v as usize,
        };
        (handle, self.resolve(handle))
    }

    fn resolve(&self, handle: usize) -> Option<usize> {
        let pool = self
            .pools
            .iter()
            .position(|p| p.handle == handle)
            .or_else(|| {
                self.views
                    .iter()
                    .find(|v| v.0 == handle)
                    .map(|&(_, pool)| pool)
            })?;
        self.pools[pool].alive.then_some(pool)
    }

    fn is_view(&self, handle: usize) -> bool {
        self.views.iter().any(|v| v.0 == handle)
    }

    fn create(&mut self, c: Config) {
        if self.pools.len() >= MAX_POOL_CREATES
            || self.pools.iter().filter(|p| p.alive).count() >= MAX_LIVE_POOLS
        {
            return;
        }
        let config = aclallocPoolConfig {
            max_split_size: (c.max_split_mib % 24) as usize * MIB,
            garbage_collection_threshold: (c.gc_tenths % 11) as f64 / 10.0,
            memory_limit: (c.limit_mib % 49) as usize * MIB,
            memory_fraction: (c.fraction_tenths % 12) as f64 / 10.0,
            // Expandable segments on one config in three (a field of the
            // input would change the corpus format).
            expandable_segments: i32::from(c.limit_mib.is_multiple_of(3)),
            // Off: the model rounds to 512 bytes.
            roundup_power2_divisions: [0; 16],
        };
        let valid = !(config.max_split_size != 0 && config.max_split_size <= MIB)
            && config.garbage_collection_threshold < 1.0
            && (config.memory_limit != 0 || config.memory_fraction <= 1.0);
        let limit = if c.null_config || (config.memory_limit == 0 && config.memory_fraction == 0.0)
        {
            usize::MAX
        } else if config.memory_limit != 0 {
            config.memory_limit
        } else {
            ((DEVICE_MIB * MIB) as f64 * config.memory_fraction) as usize
        };
        let (mut pool, mut desc) = (std::ptr::null_mut(), std::ptr::null_mut());
        let cfg: *const aclallocPoolConfig = if c.null_config {
            std::ptr::null()
        } else {
            &config
        };
        // SAFETY: valid pointers.
        let rc = unsafe { aclallocPoolCreate(cfg, &mut pool, &mut desc) };
        if c.null_config || valid {
            self.fail("aclallocPoolCreate", rc, OK);
            assert!(!pool.is_null() && !desc.is_null());
            assert_eq!(
                stats(pool as usize),
                PoolStats {
                    max_split_size: stats(pool as usize).max_split_size,
                    ..PoolStats::default()
                }
            );
            self.pools.push(PoolModel {
                handle: pool as usize,
                alive: true,
                limit,
                live: BTreeMap::new(),
            });
            self.descs.push(DescModel {
                handle: desc as usize,
                pool: self.pools.len() - 1,
                alive: true,
            });
        } else {
            self.fail("aclallocPoolCreate", rc, INVALID_PARAM);
            assert!(pool.is_null() && desc.is_null(), "written on failure");
        }
    }

    fn create_stream_desc(&mut self, p: PoolPick, s: u8) {
        let (handle, pool) = self.pick(p);
        let mut desc = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        let rc = unsafe {
            aclallocPoolCreateStreamDesc(
                handle as *mut c_void,
                stream_of(s) as *mut c_void,
                &mut desc,
            )
        };
        match pool {
            Some(pool) if !self.is_view(handle) => {
                self.fail("aclallocPoolCreateStreamDesc", rc, OK);
                self.descs.push(DescModel {
                    handle: desc as usize,
                    pool,
                    alive: true,
                });
            }
            _ => {
                self.fail("aclallocPoolCreateStreamDesc", rc, INVALID_PARAM);
                assert!(desc.is_null());
            }
        }
    }

    /// The callbacks registered for `stream`, as an executor gets them.
    fn callbacks(&mut self, stream: usize) -> Option<(Registered, usize)> {
        let (rc, found) = registration::read(stream);
        let Some(&pool) = self.streams.get(&stream) else {
            self.fail("aclrtAllocatorGetByStream", rc, INVALID_PARAM);
            return None;
        };
        self.fail("aclrtAllocatorGetByStream", rc, OK);
        let found = found.expect("read on success");
        let obj_addr = found.obj as usize;
        if obj_addr != self.pools[pool].handle && !self.views.iter().any(|v| v.0 == obj_addr) {
            self.views.push((obj_addr, pool));
        }
        assert_eq!(
            self.views
                .iter()
                .find(|v| v.0 == obj_addr)
                .map_or(pool, |v| v.1),
            pool,
            "the object names another pool"
        );
        assert!(
            found.advise.is_some(),
            "a pool's registration has allocAdvise"
        );
        Some((found, pool))
    }

    fn size(s: Size) -> usize {
        match s {
            Size::Tiny(v) => v as usize,
            Size::Small(v) => v as usize % (MIB + 1),
            Size::Large(v) => MIB + 1 + v as usize % (23 * MIB),
            Size::Huge(v) => usize::MAX - v as usize,
            Size::ClassEdge(f, s, d) => {
                let units = (16 + s as usize % 16) << (f as usize % 13);
                (units + d as usize % 3).saturating_sub(1) * 512
            }
        }
    }

    fn block(&self, b: BlockPick) -> usize {
        let live: Vec<usize> = self
            .pools
            .iter()
            .flat_map(|p| p.live.keys().copied())
            .collect();
        let nth = |v: &[usize], i: u8| (!v.is_empty()).then(|| v[i as usize % v.len()]);
        match b {
            BlockPick::Null => 0,
            BlockPick::Live(i) => nth(&live, i).unwrap_or(0x1000),
            BlockPick::Freed(i) => nth(&self.freed, i).unwrap_or(0x2000),
            BlockPick::Interior(i) => nth(&live, i).map_or(0x3000, |a| a + 512),
            BlockPick::Raw(v) => v as usize,
        }
    }

    fn alloc(&mut self, s: u8, size: Size, advise: Option<BlockPick>) {
        let stream = stream_of(s);
        let Some((c, pool)) = self.callbacks(stream) else {
            return;
        };
        let size = Self::size(size);
        let addr_hint = advise.map(|b| self.block(b));
        let alive = self.pools[pool].alive;
        let before = alive.then(|| (stats(self.pools[pool].handle), device_free()));
        // SAFETY: the registered callbacks, called as CANN calls them.
        let block = unsafe {
            match addr_hint {
                None => (c.alloc)(c.obj, size),
                Some(a) => (c.advise.expect("allocAdvise"))(c.obj, size, a as *mut c_void),
            }
        };
        let function = if advise.is_some() {
            "aclallocPoolAllocAdvise"
        } else {
            "aclallocPoolAlloc"
        };
        let Some((before, free_before)) = before else {
            assert!(block.is_null(), "a destroyed pool handed out a block");
            self.failed.push(function);
            return;
        };
        let rounded = round(size);
        let p = &self.pools[pool];
        if block.is_null() {
            self.failed.push(function);
            let reserved = before.reserved_bytes[0].current as usize;
            let need = rounded.map(|r| {
                if r <= MIB {
                    2 * MIB
                } else {
                    r.div_ceil(2 * MIB).saturating_mul(2 * MIB)
                }
            });
            if let Some(need) = need {
                assert!(
                    !(p.live.is_empty() && need <= p.limit && need <= free_before + reserved),
                    "an idle pool refused {size} bytes (needs {need}, limit {}, free {free_before}, reserved {reserved})",
                    p.limit
                );
            }
            let after = stats(p.handle);
            assert_eq!(after.allocated_bytes, before.allocated_bytes);
            assert_eq!(after.allocation, before.allocation);
            assert_eq!(after.num_ooms, before.num_ooms + 1, "an OOM not counted");
            return;
        }
        let rounded = rounded.expect("a block for an impossible size");
        // SAFETY: getAddrFromBlock on a block alloc returned.
        let addr = unsafe { (c.get_addr)(block) } as usize;
        assert_eq!(addr, block as usize, "a pool block is its address");
        assert_eq!(addr % 512, 0, "alignment");
        for q in &self.pools {
            if let Some((&a, &(r, _, _))) = q.live.range(..addr + rounded).next_back() {
                assert!(
                    a + r <= addr,
                    "block {addr:#x}+{rounded} overlaps {a:#x}+{r}"
                );
            }
        }
        let tag = self.next_tag;
        self.next_tag = self.next_tag.wrapping_add(1);
        // SAFETY: the block has at least `rounded` bytes of device memory.
        unsafe {
            *(addr as *mut u8) = tag;
            *((addr + rounded - 1) as *mut u8) = tag;
        }
        self.freed.retain(|&a| a != addr);
        self.pools[pool].live.insert(addr, (rounded, size, tag));
    }

    fn free(&mut self, s: u8, b: BlockPick) {
        let stream = stream_of(s);
        let Some((c, pool)) = self.callbacks(stream) else {
            return;
        };
        let addr = self.block(b);
        let p = &self.pools[pool];
        let before = p.alive.then(|| stats(p.handle));
        let live = p.alive.then(|| p.live.get(&addr).copied()).flatten();
        if let Some((rounded, _, tag)) = live {
            // SAFETY: a live block of at least `rounded` bytes.
            let (first, last) =
                unsafe { (*(addr as *const u8), *((addr + rounded - 1) as *const u8)) };
            assert_eq!((first, last), (tag, tag), "block {addr:#x} was overwritten");
        }
        // SAFETY: the registered callback, called as CANN calls it.
        unsafe { (c.free)(c.obj, addr as *mut c_void) };
        match live {
            Some(_) => {
                self.pools[pool].live.remove(&addr);
                self.freed.push(addr);
            }
            None => {
                self.failed.push("aclallocPoolFree");
                if let Some(before) = before {
                    assert_eq!(
                        stats(self.pools[pool].handle),
                        before,
                        "a refused free changed the pool"
                    );
                }
            }
        }
    }

    fn destroy(&mut self, p: PoolPick) {
        let (handle, pool) = self.pick(p);
        let rc = aclallocPoolDestroy(handle as *mut c_void);
        match pool {
            Some(pool) if !self.is_view(handle) => {
                if self.pools[pool].live.is_empty() {
                    self.fail("aclallocPoolDestroy", rc, OK);
                    self.pools[pool].alive = false;
                } else {
                    self.fail("aclallocPoolDestroy", rc, RELATIVE_RESOURCE_NOT_CLEARED);
                }
            }
            _ => self.fail("aclallocPoolDestroy", rc, INVALID_PARAM),
        }
    }

    /// A call on a pool handle that succeeds exactly when the handle names a
    /// live pool (or a view of one).
    fn on_pool(
        &mut self,
        function: &'static str,
        p: PoolPick,
        call: impl FnOnce(*mut c_void) -> aclError,
    ) -> Option<usize> {
        let (handle, pool) = self.pick(p);
        let rc = call(handle as *mut c_void);
        let want = if pool.is_some() { OK } else { INVALID_PARAM };
        self.fail(function, rc, want);
        pool
    }

    fn apply(&mut self, op: Op) {
        let reserved_before: Vec<i64> = self
            .pools
            .iter()
            .map(|p| {
                if p.alive {
                    stats(p.handle).reserved_bytes[0].current
                } else {
                    0
                }
            })
            .collect();
        match op {
            Op::Create(c) => self.create(c),
            Op::CreateStreamDesc(p, s) => self.create_stream_desc(p, s),
            Op::DestroyDesc(i) => {
                if self.descs.is_empty() {
                    return;
                }
                let i = i as usize % self.descs.len();
                let rc = aclrtAllocatorDestroyDesc(self.descs[i].handle as *mut c_void);
                let want = if self.descs[i].alive {
                    OK
                } else {
                    INVALID_PARAM
                };
                self.fail("aclrtAllocatorDestroyDesc", rc, want);
                self.descs[i].alive = false;
            }
            Op::Register(s, i) => {
                if self.descs.is_empty() {
                    return;
                }
                let d = &self.descs[i as usize % self.descs.len()];
                let (alive, pool) = (d.alive, d.pool);
                let rc =
                    aclrtAllocatorRegister(stream_of(s) as *mut c_void, d.handle as *mut c_void);
                if alive {
                    self.fail("aclrtAllocatorRegister", rc, OK);
                    self.streams.insert(stream_of(s), pool);
                } else {
                    self.fail("aclrtAllocatorRegister", rc, INVALID_PARAM);
                }
            }
            Op::Unregister(s) => {
                let rc = aclrtAllocatorUnregister(stream_of(s) as *mut c_void);
                self.fail("aclrtAllocatorUnregister", rc, OK);
                self.streams.remove(&stream_of(s));
            }
            Op::Alloc(s, size) => self.alloc(s, size, None),
            Op::Advise(s, size, b) => self.alloc(s, size, Some(b)),
            Op::Free(s, b) => self.free(s, b),
            Op::EmptyCache(p) => {
                if let Some(pool) =
                    self.on_pool("aclallocPoolEmptyCache", p, |h| aclallocPoolEmptyCache(h))
                {
                    if self.pools[pool].live.is_empty() {
                        let h = self.pools[pool].handle;
                        let s = stats(h);
                        assert_eq!(s.reserved_bytes[0].current, 0, "an idle pool kept memory");
                        // An expandable pool keeps its reservations (address
                        // space, no memory) through empty_cache, as
                        // torch_npu's does; empty_virt_addr_cache returns
                        // them, and then no segment is left.
                        assert_eq!(aclallocPoolEmptyVirtAddrCache(h as *mut c_void), OK);
                        assert_eq!(stats(h).segment[0].current, 0, "a segment left");
                    }
                }
            }
            Op::Trim(p, keep) => {
                let keep = (keep % 32) as usize * MIB;
                if let Some(pool) =
                    self.on_pool("aclallocPoolTrim", p, |h| aclallocPoolTrim(h, keep))
                {
                    if self.pools[pool].live.is_empty() {
                        let s = stats(self.pools[pool].handle);
                        assert!(
                            s.reserved_bytes[0].current as usize <= keep,
                            "trim kept too much"
                        );
                    }
                }
            }
            Op::SetLimit(p, mib) => {
                let bytes = (mib % 64) as usize * MIB;
                if let Some(pool) = self.on_pool("aclallocPoolSetMemoryLimit", p, |h| {
                    aclallocPoolSetMemoryLimit(h, bytes)
                }) {
                    self.pools[pool].limit = if bytes == 0 { usize::MAX } else { bytes };
                }
            }
            Op::SetFraction(p, tenths) => {
                let f = (tenths % 13) as f64 / 10.0;
                let (handle, pool) = self.pick(p);
                let rc = aclallocPoolSetMemoryFraction(handle as *mut c_void, f);
                match pool {
                    Some(pool) if f > 0.0 && f <= 1.0 => {
                        self.fail("aclallocPoolSetMemoryFraction", rc, OK);
                        self.pools[pool].limit = ((DEVICE_MIB * MIB) as f64 * f) as usize;
                    }
                    _ => self.fail("aclallocPoolSetMemoryFraction", rc, INVALID_PARAM),
                }
            }
            Op::ResetPeak(p) => {
                if let Some(pool) = self.on_pool("aclallocPoolResetPeakStats", p, |h| {
                    aclallocPoolResetPeakStats(h)
                }) {
                    let s = stats(self.pools[pool].handle);
                    assert_eq!(s.allocated_bytes[0].peak, s.allocated_bytes[0].current);
                    assert_eq!(s.reserved_bytes[0].peak, s.reserved_bytes[0].current);
                }
            }
            Op::ReadStats(p) => self.read_stats(p),
            Op::Snapshot(p) => self.snapshot(p),
            Op::Destroy(p) => self.destroy(p),
        }
        self.check_messages();
        for (i, p) in self.pools.iter().enumerate() {
            if p.alive {
                let before = reserved_before.get(i).copied().unwrap_or(0) as usize;
                check_pool(p, before);
            }
        }
    }

    fn read_stats(&mut self, p: PoolPick) {
        let (handle, pool) = self.pick(p);
        let h = handle as *mut c_void;
        let (mut a, mut r, mut ma, mut mr, mut v) = (0usize, 0usize, 0usize, 0usize, 0i64);
        let want = if pool.is_some() { OK } else { INVALID_PARAM };
        // SAFETY: valid out-pointers and a NUL-terminated key.
        unsafe {
            self.fail(
                "aclallocPoolMemoryAllocated",
                aclallocPoolMemoryAllocated(h, &mut a),
                want,
            );
            self.fail(
                "aclallocPoolMemoryReserved",
                aclallocPoolMemoryReserved(h, &mut r),
                want,
            );
            self.fail(
                "aclallocPoolMaxMemoryAllocated",
                aclallocPoolMaxMemoryAllocated(h, &mut ma),
                want,
            );
            self.fail(
                "aclallocPoolMaxMemoryReserved",
                aclallocPoolMaxMemoryReserved(h, &mut mr),
                want,
            );
            self.fail(
                "aclallocPoolGetStat",
                aclallocPoolGetStat(h, c"allocated_bytes.all.current".as_ptr(), &mut v),
                want,
            );
            let bad = aclallocPoolGetStat(h, c"allocated_bytes.everything".as_ptr(), &mut v);
            self.fail("aclallocPoolGetStat", bad, INVALID_PARAM);
        }
        if let Some(pool) = pool {
            let s = stats(self.pools[pool].handle);
            assert_eq!(a as i64, s.allocated_bytes[0].current);
            assert_eq!(r as i64, s.reserved_bytes[0].current);
            assert_eq!(ma as i64, s.allocated_bytes[0].peak);
            assert_eq!(mr as i64, s.reserved_bytes[0].peak);
            assert_eq!(v, s.allocated_bytes[0].current);
        }
    }

    /// The snapshot's allocated blocks are exactly the model's live blocks.
    fn snapshot(&mut self, p: PoolPick) {
        let (handle, pool) = self.pick(p);
        let mut buf = vec![0u8; 64 << 10];
        let mut len = 0usize;
        // SAFETY: a buffer of buf.len() bytes and a valid length pointer.
        let rc = unsafe {
            aclallocPoolSnapshot(
                handle as *mut c_void,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut len,
            )
        };
        let Some(pool) = pool else {
            self.fail("aclallocPoolSnapshot", rc, INVALID_PARAM);
            return;
        };
        self.fail("aclallocPoolSnapshot", rc, OK);
        if len >= buf.len() {
            return;
        }
        let json = std::str::from_utf8(&buf[..len]).expect("UTF-8");
        let mut allocated = BTreeMap::new();
        let mut sum = 0usize;
        let snapshot: serde_json::Value = serde_json::from_str(json).expect("snapshot JSON");
        let hex = |v: &serde_json::Value| {
            let text = v.as_str().expect("addresses are hex strings");
            usize::from_str_radix(text.trim_start_matches("0x"), 16).expect("hex address")
        };
        for segment in snapshot["segments"].as_array().expect("segments") {
            for block in segment["blocks"].as_array().expect("blocks") {
                if block["state"] != "active_allocated" {
                    continue;
                }
                let size = block["size"].as_u64().unwrap() as usize;
                let requested = block["requested_size"].as_u64().unwrap() as usize;
                sum += size;
                allocated.insert(hex(&block["address"]), (size, requested));
            }
        }
        let p = &self.pools[pool];
        assert_eq!(allocated.len(), p.live.len(), "snapshot blocks: {json}");
        for (addr, (rounded, requested, _)) in &p.live {
            let (size, req) = allocated[addr];
            assert!(size >= *rounded, "block {addr:#x} is smaller than asked");
            assert_eq!(req, *requested);
        }
        assert_eq!(sum as i64, stats(p.handle).allocated_bytes[0].current);
    }

    /// Frees and destroys everything the run made.
    fn clean_up(&mut self) {
        for p in &mut self.pools {
            if !p.alive {
                continue;
            }
            for (&addr, &(rounded, _, tag)) in &p.live {
                // SAFETY: a live block of at least `rounded` bytes.
                let (first, last) =
                    unsafe { (*(addr as *const u8), *((addr + rounded - 1) as *const u8)) };
                assert_eq!((first, last), (tag, tag), "block {addr:#x} was overwritten");
                aclallocPoolFree(p.handle as *mut c_void, addr as *mut c_void);
            }
            p.live.clear();
            check_pool(p, usize::MAX);
            assert_eq!(aclallocPoolEmptyCache(p.handle as *mut c_void), OK);
            let s = stats(p.handle);
            assert_eq!(
                s.reserved_bytes[0].current, 0,
                "reserved after freeing all and empty_cache"
            );
            // An expandable pool's reservations go too (see EmptyCache);
            // then resetting the idle pool's statistics zeroes all of them.
            let h = p.handle as *mut c_void;
            assert_eq!(aclallocPoolEmptyVirtAddrCache(h), OK);
            assert_eq!(aclallocPoolResetAccumulatedStats(h), OK);
            assert_eq!(aclallocPoolResetPeakStats(h), OK);
            assert_eq!(
                stats(p.handle),
                PoolStats {
                    max_split_size: stats(p.handle).max_split_size,
                    ..PoolStats::default()
                },
                "an idle pool's statistics after the resets"
            );
            assert_eq!(aclallocPoolDestroy(h), OK);
            p.alive = false;
        }
        for d in &mut self.descs {
            if d.alive {
                assert_eq!(aclrtAllocatorDestroyDesc(d.handle as *mut c_void), OK);
                d.alive = false;
            }
        }
        for &s in self.streams.keys() {
            assert_eq!(aclrtAllocatorUnregister(s as *mut c_void), OK);
        }
        self.streams.clear();
        self.check_messages();
        assert_eq!(
            (
                device_free(),
                aclalloc::global().live_descriptors(),
                aclalloc::global().streams().len()
            ),
            self.baseline,
            "a run leaked"
        );
    }
}

fn check_pool(p: &PoolModel, reserved_before: usize) {
    let s = stats(p.handle);
    let (mut small, mut large, mut requested) = (0usize, 0usize, 0usize);
    for &(rounded, req, _) in p.live.values() {
        if rounded <= MIB {
            small += rounded;
        } else {
            large += rounded;
        }
        requested += req;
    }
    assert_eq!(
        s.allocation[0].current as usize,
        p.live.len(),
        "block count"
    );
    assert_eq!(
        s.requested_bytes[0].current as usize, requested,
        "requested bytes"
    );
    assert_eq!(
        s.allocated_bytes[1].current as usize, small,
        "small-pool bytes"
    );
    assert!(
        s.allocated_bytes[2].current as usize >= large,
        "large-pool bytes"
    );
    assert_eq!(
        s.allocated_bytes[0].current,
        s.allocated_bytes[1].current + s.allocated_bytes[2].current
    );
    let reserved = s.reserved_bytes[0].current as usize;
    assert!(
        reserved >= s.allocated_bytes[0].current as usize,
        "reserved < allocated"
    );
    assert!(
        reserved <= p.limit.max(reserved_before),
        "reserved {reserved} past the limit {} (was {reserved_before})",
        p.limit
    );
    for stat in [
        &s.allocated_bytes,
        &s.reserved_bytes,
        &s.allocation,
        &s.segment,
    ] {
        for x in stat {
            assert!(x.current >= 0 && x.peak >= x.current, "{x:?}");
        }
    }
}

fn setup() {
    // Before the runtime's first use: a small device.
    std::env::set_var("ACLALLOC_DEVICE_MEMORY", format!("{DEVICE_MIB}MiB"));
    std::env::remove_var("ACLALLOC_ALLOC_CONF");
    // SAFETY: NULL is a valid config path.
    assert_eq!(unsafe { aclInit(std::ptr::null()) }, OK);
    assert_eq!(aclrtSetDevice(0), OK);
}

fuzz_target!(init: setup(), |ops: Vec<Op>| {
    let _ = aclGetRecentErrMsg();
    let mut model = Model {
        baseline: (
            device_free(),
            aclalloc::global().live_descriptors(),
            aclalloc::global().streams().len(),
        ),
        ..Model::default()
    };
    for &op in ops.iter().take(MAX_OPS) {
        model.apply(op);
    }
    model.clean_up();
});
