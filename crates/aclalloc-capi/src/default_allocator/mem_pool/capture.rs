//! Capture pools: a memory pool that serves every allocation of the default
//! allocator on one stream, from any thread, as torch_npu's graph pools do
//! (`beginAllocateToPool(device, mempool_id, filter)` with a filter that
//! picks the capturing stream): raw allocations naming the stream
//! (`aclallocDefaultMalloc`) and the workspaces of launches on it that no
//! registered allocator serves.
//!
//! A captured model that took memory from such a pool while its stream was
//! routed holds a use of the pool until it goes (or its capture fails), so
//! the pool's free memory stays reserved for the replays of every model
//! that shares it. A pool that has served a capture gives its free memory
//! back to the device as soon as no route and no model uses it: when the
//! last model sharing it is destroyed, when a failed or abandoned capture
//! drops what it took, and at each later free while nothing uses it. Blocks
//! still allocated stay until freed.

use super::MemPool;
use crate::base::error::{Error, Result};
use crate::base::sync::statics::AtomicUsize as StaticUsize;
use crate::base::sync::Ordering;
use parking_lot::RwLock;
use std::sync::{Arc, OnceLock};

/// How the memory pools hear of captures (set once, at load, by the
/// composition root over the host runtime).
#[derive(Clone, Copy)]
pub struct CapturePort {
    /// The model `stream` is capturing into, if any.
    pub model_of: fn(stream: usize) -> Option<usize>,
    /// Makes the capture of `stream` run `release` when its model goes (or
    /// the capture fails); false (and `release` run) when not capturing.
    pub hold: fn(stream: usize, release: Box<dyn FnOnce() + Send>) -> bool,
}

static PORT: OnceLock<CapturePort> = OnceLock::new();

/// Sets how the memory pools hear of captures.
pub fn set_capture_port(port: CapturePort) {
    let _ = PORT.set(port);
}

/// A stream routed to a pool on a device.
struct Route {
    stream: usize,
    device: i32,
    pool: Arc<MemPool>,
}

static ROUTES: RwLock<Vec<Route>> = RwLock::new(Vec::new());
/// How many routes exist: allocations read [`ROUTES`] only when some do.
static COUNT: StaticUsize = StaticUsize::new(0);

const ROUTED: Error = Error::InvalidParam {
    param: "stream",
    reason: "It already allocates to a memory pool on that device (aclallocMemPoolEndAllocateToPool first)",
};
const NOT_ROUTED: Error = Error::InvalidParam {
    param: "stream",
    reason: "It does not allocate to this memory pool on that device (aclallocMemPoolBeginAllocateToPool was not called with them)",
};

/// Routes the default allocator's allocations on `stream` and `device` to
/// `pool` until [`end`].
pub(super) fn begin(pool: Arc<MemPool>, device: i32, stream: usize) -> Result<()> {
    let mut routes = ROUTES.write();
    if routes
        .iter()
        .any(|r| r.stream == stream && r.device == device)
    {
        return Err(ROUTED);
    }
    routes.try_reserve(1).map_err(|_| Error::BadAlloc {
        what: "the list of streams allocating to memory pools",
    })?;
    pool.captured.store(true, Ordering::Release);
    pool.routes.fetch_add(1, Ordering::AcqRel);
    routes.push(Route {
        stream,
        device,
        pool,
    });
    COUNT.fetch_add(1, Ordering::Release);
    Ok(())
}

/// Ends the route of `stream` on `device` to the pool with id `id`.
pub(super) fn end(id: u64, device: i32, stream: usize) -> Result<Arc<MemPool>> {
    let pool = {
        let mut routes = ROUTES.write();
        let at = routes
            .iter()
            .position(|r| r.stream == stream && r.device == device && r.pool.id == id)
            .ok_or(NOT_ROUTED)?;
        COUNT.fetch_sub(1, Ordering::Release);
        routes.remove(at).pool
    };
    pool.routes.fetch_sub(1, Ordering::AcqRel);
    release_if_unused(&pool);
    Ok(pool)
}

/// True when some stream is routed to a pool.
#[inline]
pub(super) fn any() -> bool {
    COUNT.load(Ordering::Acquire) != 0
}

/// The pool `stream` allocates to on `device`, if any.
#[inline]
pub(super) fn routed(stream: usize, device: i32) -> Option<Arc<MemPool>> {
    if stream == 0 || COUNT.load(Ordering::Acquire) == 0 {
        return None;
    }
    ROUTES
        .read()
        .iter()
        .find(|r| r.stream == stream && r.device == device)
        .map(|r| r.pool.clone())
}

/// After `pool` served an allocation on `stream`: when the stream is
/// capturing, its model holds a use of the pool (once per model).
pub(super) fn served(pool: &Arc<MemPool>, stream: usize) {
    let Some(port) = PORT.get() else {
        return;
    };
    let Some(model) = (port.model_of)(stream) else {
        return;
    };
    {
        let mut graphs = pool.graphs.lock();
        if graphs.contains(&model) {
            return;
        }
        graphs.push(model);
    }
    let held = pool.clone();
    // Not capturing any more (another thread ended it): the release ran.
    (port.hold)(stream, Box::new(move || unuse(&held, model)));
}

/// A model that used `pool` went.
fn unuse(pool: &Arc<MemPool>, model: usize) {
    pool.graphs.lock().retain(|&m| m != model);
    release_if_unused(pool);
}

/// Gives a capture pool's free memory back when no route and no model uses
/// it.
pub(super) fn release_if_unused(pool: &MemPool) {
    if !pool.captured.load(Ordering::Acquire)
        || pool.routes.load(Ordering::Acquire) != 0
        || !pool.graphs.lock().is_empty()
    {
        return;
    }
    let open: Vec<_> = pool
        .pools
        .lock()
        .iter()
        .filter(|p| !p.closed)
        .map(|p| p.pool.clone())
        .collect();
    // Releasing expandable pages waits for the device first, which a
    // stream's worker (where a model's last replay may drop it) must not
    // do: such a pool gives its memory back at its next free instead.
    let on_worker = crate::runtime::stream_worker::on_any_worker();
    for p in open {
        if !(on_worker && p.config().expandable_segments) {
            p.empty_cache();
        }
    }
}
