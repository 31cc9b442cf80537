//! A model of the hot path of PyTorch's CUDACachingAllocator
//! (`c10/cuda/CUDACachingAllocator.cpp`), written to be timed against the
//! pool: free blocks in an ordered set keyed by (stream, size, address) for
//! best fit, a hash set of active blocks, a hash map from address to block
//! behind its own lock, a reentrant mutex around the allocator, splitting
//! and merging through prev/next links, 2 MiB and 20 MiB segments, 512 B
//! rounding, `max_split_size`'s oversize rules and PyTorch's statistics
//! (`update_stat` on every key PyTorch touches, per stat type).
//!
//! One simplification favours the model: block records live in a slab
//! (PyTorch allocates each split-off block with `new` and merges with
//! `delete`). Segments come from the same `DeviceMemory` as the pool's.

use aclalloc::pool::DeviceMemory;
use parking_lot::{Mutex, ReentrantMutex};
use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

const MIN_BLOCK_SIZE: usize = 512;
const SMALL_SIZE: usize = 1 << 20;
const SMALL_BUFFER: usize = 2 << 20;
const LARGE_BUFFER: usize = 20 << 20;
const MIN_LARGE_ALLOC: usize = 10 << 20;
const ROUND_LARGE: usize = 2 << 20;
const NONE: u32 = u32::MAX;

/// libstdc++'s `std::hash<T*>` is the identity: so is this one.
#[derive(Default)]
struct Identity(u64);
impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | b as u64;
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = x;
    }
    fn write_u32(&mut self, x: u32) {
        self.0 = x as u64;
    }
    fn write_usize(&mut self, x: usize) {
        self.0 = x as u64;
    }
}
type Fast = BuildHasherDefault<Identity>;

#[derive(Default, Clone, Copy)]
struct Stat {
    current: i64,
    peak: i64,
    allocated: i64,
    freed: i64,
}

/// PyTorch's `update_stat`.
#[inline]
fn update(s: &mut Stat, amount: i64) {
    s.current += amount;
    s.peak = s.peak.max(s.current);
    if amount > 0 {
        s.allocated += amount;
    }
    if amount < 0 {
        s.freed -= amount;
    }
}

/// PyTorch's `DeviceStats`: [aggregate, small pool, large pool] per key.
#[derive(Default)]
struct DeviceStats {
    allocation: [Stat; 3],
    segment: [Stat; 3],
    active: [Stat; 3],
    inactive_split: [Stat; 3],
    allocated_bytes: [Stat; 3],
    reserved_bytes: [Stat; 3],
    active_bytes: [Stat; 3],
    inactive_split_bytes: [Stat; 3],
    requested_bytes: [Stat; 3],
    oversize_allocations: Stat,
    oversize_segments: Stat,
    num_device_alloc: i64,
}

#[derive(Clone, Copy)]
struct Block {
    addr: usize,
    size: usize,
    requested: usize,
    stream: usize,
    /// 0: small pool, 1: large pool.
    pool: usize,
    allocated: bool,
    prev: u32,
    next: u32,
}

impl Block {
    fn is_split(&self) -> bool {
        self.prev != NONE || self.next != NONE
    }
}

type Key = (usize, usize, usize, u32);

struct State {
    blocks: Vec<Block>,
    vacant: Vec<u32>,
    /// `BlockPool::blocks` of the small and the large pool.
    pools: [BTreeSet<Key>; 2],
    active_blocks: HashSet<u32, Fast>,
    stats: DeviceStats,
    max_split_size: usize,
}

/// The model: `DeviceCachingAllocator` (the reentrant mutex and its state)
/// and `NativeCachingAllocator`'s `allocated_blocks` under its own mutex.
pub struct TorchModel {
    state: ReentrantMutex<RefCell<State>>,
    allocated_blocks: Mutex<HashMap<usize, u32, Fast>>,
    device: Arc<dyn DeviceMemory>,
}

fn key(b: &Block, idx: u32) -> Key {
    (b.stream, b.size, b.addr, idx)
}

impl TorchModel {
    pub fn new(device: Arc<dyn DeviceMemory>) -> Self {
        TorchModel {
            state: ReentrantMutex::new(RefCell::new(State {
                blocks: Vec::new(),
                vacant: Vec::new(),
                pools: [BTreeSet::new(), BTreeSet::new()],
                active_blocks: HashSet::default(),
                stats: DeviceStats::default(),
                max_split_size: usize::MAX,
            })),
            allocated_blocks: Mutex::new(HashMap::default()),
            device,
        }
    }

    pub fn malloc(&self, size: usize, stream: usize) -> usize {
        let (addr, idx) = self.malloc_locked(size, stream);
        self.allocated_blocks.lock().insert(addr, idx);
        addr
    }

    fn malloc_locked(&self, size: usize, stream: usize) -> (usize, u32) {
        let guard = self.state.lock();
        let mut st = guard.borrow_mut();
        let st = &mut *st;
        let orig = size;
        let size = size.max(1).div_ceil(MIN_BLOCK_SIZE) * MIN_BLOCK_SIZE;
        let pool = usize::from(size > SMALL_SIZE);
        let stat_types = [0, 1 + pool];
        let max_split = st.max_split_size;
        // get_free_block
        let found = st.pools[pool]
            .range((stream, size, 0, 0)..)
            .next()
            .copied()
            .filter(|k| k.0 == stream)
            .filter(|k| !(size < max_split && k.1 >= max_split))
            .filter(|k| !(size >= max_split && k.1 >= size + LARGE_BUFFER));
        let mut idx = match found {
            Some(k) => {
                st.pools[pool].remove(&k);
                k.3
            }
            None => self.alloc_block(st, size, stream, pool),
        };
        // alloc_found_block
        let already_split = st.blocks[idx as usize].is_split();
        let remaining = st.blocks[idx as usize].size - size;
        let split = if pool == 0 {
            remaining >= MIN_BLOCK_SIZE
        } else {
            size < max_split && remaining > SMALL_SIZE
        };
        if split {
            let rest = idx;
            let r = st.blocks[rest as usize];
            idx = new_block(
                st,
                Block {
                    addr: r.addr,
                    size,
                    requested: 0,
                    stream,
                    pool,
                    allocated: false,
                    prev: r.prev,
                    next: rest,
                },
            );
            if r.prev != NONE {
                st.blocks[r.prev as usize].next = idx;
            }
            let r = &mut st.blocks[rest as usize];
            r.prev = idx;
            r.addr += size;
            r.size -= size;
            let (k, rsize) = (key(r, rest), r.size as i64);
            st.pools[pool].insert(k);
            for t in stat_types {
                if already_split {
                    update(&mut st.stats.inactive_split_bytes[t], -(size as i64));
                } else {
                    update(&mut st.stats.inactive_split_bytes[t], rsize);
                    update(&mut st.stats.inactive_split[t], 1);
                }
            }
        } else if already_split {
            let bsize = st.blocks[idx as usize].size as i64;
            for t in stat_types {
                update(&mut st.stats.inactive_split_bytes[t], -bsize);
                update(&mut st.stats.inactive_split[t], -1);
            }
        }
        let b = &mut st.blocks[idx as usize];
        b.allocated = true;
        b.requested = orig;
        let (addr, bsize) = (b.addr, b.size as i64);
        st.active_blocks.insert(idx);
        let s = &mut st.stats;
        for t in stat_types {
            update(&mut s.allocation[t], 1);
            update(&mut s.allocated_bytes[t], bsize);
            update(&mut s.active[t], 1);
            update(&mut s.active_bytes[t], bsize);
            update(&mut s.requested_bytes[t], orig as i64);
        }
        if bsize as usize >= max_split {
            update(&mut s.oversize_allocations, 1);
        }
        (addr, idx)
    }

    fn alloc_block(&self, st: &mut State, size: usize, stream: usize, pool: usize) -> u32 {
        let seg = if size <= SMALL_SIZE {
            SMALL_BUFFER
        } else if size < MIN_LARGE_ALLOC {
            LARGE_BUFFER
        } else {
            size.div_ceil(ROUND_LARGE) * ROUND_LARGE
        };
        let addr = self.device.malloc(seg).expect("device memory").get();
        let s = &mut st.stats;
        for t in [0, 1 + pool] {
            update(&mut s.segment[t], 1);
            update(&mut s.reserved_bytes[t], seg as i64);
        }
        if seg >= st.max_split_size {
            update(&mut s.oversize_segments, 1);
        }
        s.num_device_alloc += 1;
        new_block(
            st,
            Block {
                addr,
                size: seg,
                requested: 0,
                stream,
                pool,
                allocated: false,
                prev: NONE,
                next: NONE,
            },
        )
    }

    pub fn free(&self, addr: usize) {
        let idx = self
            .allocated_blocks
            .lock()
            .remove(&addr)
            .expect("a live block");
        let guard = self.state.lock();
        let mut st = guard.borrow_mut();
        let st = &mut *st;
        let b = &mut st.blocks[idx as usize];
        b.allocated = false;
        let (pool, size, requested) = (b.pool, b.size, b.requested);
        let stat_types = [0, 1 + pool];
        for t in stat_types {
            update(&mut st.stats.allocation[t], -1);
            update(&mut st.stats.allocated_bytes[t], -(size as i64));
        }
        if size >= st.max_split_size {
            update(&mut st.stats.oversize_allocations, -1);
        }
        // free_block
        let (mut net_blocks, mut net_bytes) = (0i64, 0i64);
        let b = st.blocks[idx as usize];
        for candidate in [b.prev, b.next] {
            let subsumed = try_merge(st, idx, candidate, pool);
            if subsumed > 0 {
                net_blocks -= 1;
                net_bytes -= subsumed as i64;
            }
        }
        st.active_blocks.remove(&idx);
        let b = st.blocks[idx as usize];
        st.pools[pool].insert(key(&b, idx));
        if b.is_split() {
            net_blocks += 1;
            net_bytes += b.size as i64;
        }
        let s = &mut st.stats;
        for t in stat_types {
            if net_blocks != 0 {
                update(&mut s.inactive_split[t], net_blocks);
            }
            if net_bytes != 0 {
                update(&mut s.inactive_split_bytes[t], net_bytes);
            }
            update(&mut s.active[t], -1);
            update(&mut s.active_bytes[t], -(size as i64));
            update(&mut s.requested_bytes[t], -(requested as i64));
        }
    }
}

fn new_block(st: &mut State, b: Block) -> u32 {
    match st.vacant.pop() {
        Some(i) => {
            st.blocks[i as usize] = b;
            i
        }
        None => {
            st.blocks.push(b);
            (st.blocks.len() - 1) as u32
        }
    }
}

/// PyTorch's `try_merge_blocks`: `src` into `dst` when free; its size.
fn try_merge(st: &mut State, dst: u32, src: u32, pool: usize) -> usize {
    if src == NONE || st.blocks[src as usize].allocated {
        return 0;
    }
    let s = st.blocks[src as usize];
    let d = &mut st.blocks[dst as usize];
    if d.prev == src {
        d.addr = s.addr;
        d.prev = s.prev;
        if s.prev != NONE {
            st.blocks[s.prev as usize].next = dst;
        }
    } else {
        d.next = s.next;
        if s.next != NONE {
            st.blocks[s.next as usize].prev = dst;
        }
    }
    st.blocks[dst as usize].size += s.size;
    st.pools[pool].remove(&key(&s, src));
    st.vacant.push(src);
    s.size
}
