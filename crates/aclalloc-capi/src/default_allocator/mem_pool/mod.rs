//! Memory pools of the default allocator: PyTorch's `MemPool` and
//! `use_mem_pool` (torch_npu's the same).
//!
//! A memory pool is a caching pool per device, made the first time the pool
//! serves on that device, taking its segments from the device or from a
//! pluggable allocator. While a thread is inside a use of it on a device
//! ([`begin_use`] .. [`end_use`], nesting as a stack), the default
//! allocator's raw allocations on that thread and device come from it; other
//! threads, other devices and launch workspaces are not routed. A block
//! keeps its pool: its free goes back there from any thread, inside a use or
//! not. Destroying a memory pool ends its handle at once; each device pool
//! gives its memory back when its last block is freed (at once when none is
//! live). `use_on_oom`: when the default pool of a device is out of memory,
//! the cached blocks of such pools serve as a last resort (they get no new
//! segment for it). `no_split`: a block of the pool is never split (each
//! takes a segment of its own). A pool can also serve every allocation on
//! a stream, from any thread, while that stream captures a graph
//! ([`capture`]).

pub mod capture;
mod routing;
mod segments;

use super::per_device::MAX_DEVICES;
use crate::base::error::{Error, Result};
use crate::base::handles::HandleTable;
pub use crate::base::ids::MemPoolHandle;
use crate::base::sync::statics::AtomicUsize as StaticUsize;
use crate::base::sync::{AtomicBool, AtomicUsize, Ordering};
use crate::plugin::{context, published, PluggableHandle};
use crate::pool::acl::AclMemory;
use crate::pool::handles as pool_handles;
use crate::pool::{DeviceMemory, Pool, PoolConfig};
use parking_lot::{Mutex, RwLock};
use std::ffi::c_void;
use std::num::NonZeroUsize;
use std::sync::{Arc, OnceLock};

/// How a memory pool is made.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemPoolOptions {
    /// Segments come from this pluggable allocator (`None`: the device).
    pub allocator: Option<PluggableHandle>,
    /// Its cached blocks serve the default pool's out-of-memory requests.
    pub use_on_oom: bool,
    /// Its blocks are never split.
    pub no_split: bool,
    /// The label of what is allocated through it.
    pub tag: Option<String>,
}

/// A memory pool.
pub struct MemPool {
    id: u64,
    options: MemPoolOptions,
    pools: Mutex<Vec<DevicePool>>,
    /// Uses begun and not ended, on any thread (a thread that exits inside
    /// uses ends them).
    uses: AtomicUsize,
    destroyed: AtomicBool,
    /// Streams routed to it now ([`capture`]).
    routes: AtomicUsize,
    /// Models that took memory from it while capturing, by handle.
    graphs: Mutex<Vec<usize>>,
    /// A stream was ever routed to it: it gives its free memory back when
    /// nothing uses it.
    captured: AtomicBool,
}

#[derive(Clone)]
struct DevicePool {
    device: i32,
    pool: pool_handles::SharedPool,
    handle: usize,
    closed: bool,
}

fn table() -> &'static HandleTable<MemPoolHandle, Arc<MemPool>> {
    static TABLE: OnceLock<HandleTable<MemPoolHandle, Arc<MemPool>>> = OnceLock::new();
    TABLE.get_or_init(HandleTable::new)
}

/// Memory pools not destroyed, and destroyed ones with a device pool still open.
static LIVE: RwLock<Vec<Arc<MemPool>>> = RwLock::new(Vec::new());
/// Device pools open, in every memory pool: 0 lets a free skip the search.
static OPEN: StaticUsize = StaticUsize::new(0);
static NEXT_ID: StaticUsize = StaticUsize::new(1);

const NOT_A_MEM_POOL: Error = Error::InvalidParam {
    param: "pool",
    reason: "It is not a live memory pool (it was destroyed, or was never returned by aclallocMemPoolCreate)",
};

fn get(handle: MemPoolHandle) -> Result<Arc<MemPool>> {
    table().with(handle, Arc::clone).ok_or(NOT_A_MEM_POOL)
}

/// The live memory pool behind the C handle `ptr`.
pub fn lookup(ptr: *mut c_void) -> Result<MemPoolHandle> {
    let handle = MemPoolHandle::from_ptr(ptr).ok_or(NOT_A_MEM_POOL)?;
    get(handle).map(|_| handle)
}

/// Makes a memory pool; its device pools are made when first used.
pub fn create(options: MemPoolOptions) -> Result<MemPoolHandle> {
    if let Some(allocator) = options.allocator {
        published::with_allocator(allocator, |_| Ok(()))?;
    }
    let pool = Arc::new(MemPool {
        id: NEXT_ID.fetch_add(1, Ordering::Relaxed) as u64,
        options,
        pools: Mutex::new(Vec::new()),
        uses: AtomicUsize::new(0),
        destroyed: AtomicBool::new(false),
        routes: AtomicUsize::new(0),
        graphs: Mutex::new(Vec::new()),
        captured: AtomicBool::new(false),
    });
    let mut live = LIVE.write();
    live.try_reserve(1).map_err(|_| Error::BadAlloc {
        what: "the list of memory pools",
    })?;
    let handle = table().insert(pool.clone())?;
    live.push(pool);
    Ok(handle)
}

/// Ends the handle; each device pool gives its memory back once its blocks
/// are freed. Refused while a use of it is not ended.
pub fn destroy(handle: MemPoolHandle) -> Result<()> {
    let pool = get(handle)?;
    if pool.destroyed.swap(true, Ordering::SeqCst) {
        return Err(NOT_A_MEM_POOL); // another destroy has it
    }
    // Flag first, then count: a use begun at the same time sees the flag
    // or is counted here (both sides are SeqCst).
    let uses = pool.uses.load(Ordering::SeqCst);
    if uses > 0 {
        pool.destroyed.store(false, Ordering::SeqCst);
        return Err(Error::StillInUse {
            what: "Uses of it begun and not ended (aclallocMemPoolEndUse)",
            count: uses,
        });
    }
    table().remove(handle).ok_or(NOT_A_MEM_POOL)?;
    pool.reap();
    Ok(())
}

/// The pool's id: PyTorch's `MemPool.id` is `(0, id)`.
pub fn id(handle: MemPoolHandle) -> Result<u64> {
    get(handle).map(|p| p.id)
}

/// PyTorch's `use_count()`: the pool itself and each use not yet ended.
pub fn use_count(handle: MemPoolHandle) -> Result<usize> {
    get(handle).map(|p| 1 + p.uses.load(Ordering::Acquire))
}

/// The options it was made with.
pub fn options(handle: MemPoolHandle) -> Result<MemPoolOptions> {
    get(handle).map(|p| p.options.clone())
}

/// Routes the calling thread's allocations on `device` to the pool until
/// the matching [`end_use`].
pub fn begin_use(handle: MemPoolHandle, device: i32) -> Result<()> {
    check_device(device)?;
    let pool = get(handle)?;
    pool.uses.fetch_add(1, Ordering::SeqCst);
    if pool.destroyed.load(Ordering::SeqCst) {
        pool.uses.fetch_sub(1, Ordering::SeqCst);
        return Err(NOT_A_MEM_POOL);
    }
    routing::push(pool.clone(), device).inspect_err(|_| {
        pool.uses.fetch_sub(1, Ordering::AcqRel);
    })
}

/// Ends the calling thread's innermost use of the pool on `device`.
pub fn end_use(handle: MemPoolHandle, device: i32) -> Result<()> {
    check_device(device)?;
    let id = get(handle)?.id;
    let pool = routing::pop(id, device)?;
    pool.uses.fetch_sub(1, Ordering::AcqRel);
    Ok(())
}

/// Routes every allocation of the default allocator on `stream` (any
/// thread) and `device` to the pool until [`end_allocate_to_pool`]: a
/// capture pool (torch_npu's `beginAllocateToPool`). Counts as a use.
pub fn begin_allocate_to_pool(handle: MemPoolHandle, device: i32, stream: usize) -> Result<()> {
    check_device(device)?;
    let pool = get(handle)?;
    pool.uses.fetch_add(1, Ordering::SeqCst);
    if pool.destroyed.load(Ordering::SeqCst) {
        pool.uses.fetch_sub(1, Ordering::SeqCst);
        return Err(NOT_A_MEM_POOL);
    }
    capture::begin(pool.clone(), device, stream).inspect_err(|_| {
        pool.uses.fetch_sub(1, Ordering::AcqRel);
    })
}

/// Ends the route of `stream` on `device` to the pool; the pool gives its
/// free memory back if no captured model uses it.
pub fn end_allocate_to_pool(handle: MemPoolHandle, device: i32, stream: usize) -> Result<()> {
    check_device(device)?;
    let id = get(handle)?.id;
    let pool = capture::end(id, device, stream)?;
    pool.uses.fetch_sub(1, Ordering::AcqRel);
    Ok(())
}

/// How many captured models hold memory of the pool now.
pub fn graph_count(handle: MemPoolHandle) -> Result<usize> {
    get(handle).map(|p| p.graphs.lock().len())
}

fn check_device(device: i32) -> Result<()> {
    let count = context::device_count().clamp(1, MAX_DEVICES as i32);
    if (0..count).contains(&device) {
        Ok(())
    } else {
        Err(Error::InvalidDevice {
            device: i64::from(device),
            count: count as u32,
        })
    }
}

/// The caching pool handle (`aclallocPool`) of the memory pool on `device`,
/// if it has served there (for its statistics).
pub fn device_pool(handle: MemPoolHandle, device: i32) -> Result<Option<usize>> {
    check_device(device)?;
    let pool = get(handle)?;
    let pools = pool.pools.lock();
    Ok(pools
        .iter()
        .find(|p| p.device == device && !p.closed)
        .map(|p| p.handle))
}

/// The caching pool handles of every memory pool on `device`, destroyed
/// ones whose blocks are not all freed included: what the device's
/// statistics add to its default pool's.
pub fn device_pools(device: i32) -> Result<Vec<usize>> {
    check_device(device)?;
    let live = LIVE.read();
    Ok(live
        .iter()
        .flat_map(|m| {
            m.pools
                .lock()
                .iter()
                .filter(|p| p.device == device && !p.closed)
                .map(|p| p.handle)
                .collect::<Vec<_>>()
        })
        .collect())
}

/// The pool's segments on every device, as JSON in the shape of
/// `aclallocPoolSnapshot`'s segments: `{"version":2,"id":N,"segments":[...]}`.
pub fn snapshot(handle: MemPoolHandle) -> Result<String> {
    let pool = get(handle)?;
    let open: Vec<DevicePool> = pool
        .pools
        .lock()
        .iter()
        .filter(|p| !p.closed)
        .cloned()
        .collect();
    let mut segments = Vec::new();
    for p in open {
        let one: serde_json::Value =
            serde_json::from_str(&p.pool.snapshot_json()).map_err(|_| Error::Internal {
                reason: "a pool's snapshot is not JSON",
            })?;
        if let Some(serde_json::Value::Array(list)) = one.get("segments") {
            segments.extend(list.iter().cloned());
        }
    }
    let out = serde_json::json!({
        "version": crate::pool::snapshot::SNAPSHOT_VERSION,
        "id": pool.id,
        "segments": segments,
    });
    Ok(out.to_string())
}

impl MemPool {
    /// Its pool on `device`, made now (the calling thread's current device).
    fn pool_for(&self, device: i32) -> Result<pool_handles::SharedPool> {
        let mut pools = self.pools.lock();
        if let Some(p) = pools.iter().find(|p| p.device == device && !p.closed) {
            return Ok(p.pool.clone());
        }
        pools.try_reserve(1).map_err(|_| Error::BadAlloc {
            what: "a memory pool's device list",
        })?;
        let mut config = PoolConfig::default().from_env()?;
        if self.options.no_split {
            // A zero split size makes every block oversize: never split.
            config.max_split_size = 0;
            config.expandable_segments = false;
        }
        let acl = AclMemory::current()?;
        let memory: Box<dyn DeviceMemory> = match self.options.allocator {
            None => Box::new(segments::Device(acl)),
            Some(handle) => Box::new(segments::Pluggable::new(handle, device, acl.capacity())),
        };
        let pool = Pool::with_device(config, memory)?;
        if self.options.allocator.is_none() {
            // Before its first segment: a tagged pool maps its segments page
            // by page so that `aclallocSleep` can give them back. Over a
            // pluggable allocator the tag stays a label: that memory is the
            // allocator's to give back (with its own sleep).
            pool.set_tag(self.options.tag.as_deref())?;
        }
        let handle = pool_handles::insert(pool)?.get();
        let pool = pool_handles::get(handle as *mut c_void)?;
        pools.push(DevicePool {
            device,
            pool: pool.clone(),
            handle,
            closed: false,
        });
        OPEN.fetch_add(1, Ordering::AcqRel);
        Ok(pool)
    }

    /// After a destroy: closes each device pool that has no live block; the
    /// pool leaves [`LIVE`] once all are closed.
    fn reap(&self) {
        let mut pools = self.pools.lock();
        for p in pools.iter_mut().filter(|p| !p.closed) {
            if p.pool.close_if_idle().is_ok() {
                let _ = pool_handles::remove(p.handle as *mut c_void);
                p.closed = true;
                OPEN.fetch_sub(1, Ordering::AcqRel);
            }
        }
        let all_closed = pools.iter().all(|p| p.closed);
        // Released first: the frees' path takes `LIVE` before a pool list.
        drop(pools);
        if all_closed {
            LIVE.write().retain(|m| m.id != self.id);
        }
    }
}

/// The default allocator's routing: a block from the pool the calling
/// thread uses on its current device, or `None` outside any use.
#[inline]
pub(crate) fn route_alloc(size: usize, stream: usize) -> Option<Result<NonZeroUsize>> {
    if let Some(routed) = route_stream(size, stream) {
        return Some(routed);
    }
    if !routing::any() {
        return None;
    }
    let device = context::current_device();
    let pool = routing::active(device)?;
    Some(
        pool.pool_for(device)
            .and_then(|p| p.malloc_on(stream, size)),
    )
}

/// A block from the capture pool `stream` is routed to on the current
/// device, or `None` when it is routed to none.
#[inline]
pub(crate) fn route_stream(size: usize, stream: usize) -> Option<Result<NonZeroUsize>> {
    // One atomic load while no stream is routed: the workspace fast path.
    if !capture::any() {
        return None;
    }
    let device = context::current_device();
    let pool = capture::routed(stream, device)?;
    let got = pool
        .pool_for(device)
        .and_then(|p| p.malloc_on(stream, size));
    if got.is_ok() {
        capture::served(&pool, stream);
    }
    Some(got)
}

/// The default allocator's routing of a free: to the memory pool holding
/// `addr`, or `None` when none does.
#[inline]
pub(crate) fn route_free(addr: usize) -> Option<Result<()>> {
    if OPEN.load(Ordering::Acquire) == 0 {
        return None;
    }
    route_free_slow(addr)
}

#[cold]
fn route_free_slow(addr: usize) -> Option<Result<()>> {
    let (owner, pool) = {
        let live = LIVE.read();
        live.iter().find_map(|m| {
            let pools = m.pools.lock();
            pools
                .iter()
                .find(|p| !p.closed && p.pool.holds(addr))
                .map(|p| (m.clone(), p.pool.clone()))
        })?
    };
    let freed = pool.free(addr).map_err(|e| super::pool_refusal(Some(e)));
    if owner.destroyed.load(Ordering::Acquire) {
        owner.reap();
    } else {
        capture::release_if_unused(&owner);
    }
    Some(freed)
}

/// The last resort of a default pool out of memory: a cached block of a
/// `use_on_oom` memory pool on the calling thread's device.
pub(crate) fn on_oom(size: usize, stream: usize) -> Option<NonZeroUsize> {
    if OPEN.load(Ordering::Acquire) == 0 {
        return None;
    }
    let device = context::current_device();
    let candidates: Vec<pool_handles::SharedPool> = LIVE
        .read()
        .iter()
        .filter(|m| m.options.use_on_oom && !m.destroyed.load(Ordering::Acquire))
        .filter_map(|m| {
            m.pools
                .lock()
                .iter()
                .find(|p| p.device == device && !p.closed)
                .map(|p| p.pool.clone())
        })
        .collect();
    segments::cache_only(|| {
        candidates
            .into_iter()
            .find_map(|pool| pool.malloc_on(stream, size).ok())
    })
}
