//! Stream-ordered allocations made while their stream captures: the
//! graph's memory, as CUDA's graph memory nodes are.
//!
//! `aclrtMemPoolMallocAsync` on a capturing stream returns an address the
//! captured model owns: the block is taken from the pool at once and stays
//! the model's for every replay. `aclrtMemPoolFreeAsync` of such a block in
//! the same capture, on the stream it was freed on, lets a later allocation
//! of that capture on that stream reuse it (the replay runs the capture's
//! work in call order, so the two lifetimes never overlap); the block still
//! belongs to the model. Every block of a model, freed in the capture or
//! not, goes back to its pool when the model is destroyed (after its queued
//! replays) or when the capture fails or is abandoned. CUDA lets a program
//! free a graph's unfreed allocation outside the graph; here that memory
//! stays the model's until it is destroyed, and such a free is refused.

use crate::base::error::{Error, Result, ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT};
use crate::pool::handles;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One block a model owns.
struct Block {
    pool: usize,
    addr: usize,
    size: usize,
    /// The stream it was allocated on (the pool's own stream for it).
    stream: usize,
    /// Freed in the capture on this stream: free for that stream's later
    /// allocations of the same capture.
    freed_on: Option<usize>,
}

/// Blocks by model handle.
static GRAPHS: Mutex<Option<HashMap<usize, Vec<Block>>>> = Mutex::new(None);
/// Blocks models own, in every model: a free outside any capture looks them
/// up only when some exist.
static OWNED: AtomicUsize = AtomicUsize::new(0);

const HELD_BY_MODEL: Error = Error::InvalidParam {
    param: "ptr",
    reason: "It is memory a captured model owns (allocated while its stream was capturing): it goes back to its pool when the model is destroyed",
};

const FOREIGN_FREE: Error = Error::Capture {
    code: ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT,
    reason: "The stream is capturing and the block was not allocated in this capture: on the host runtime a capture frees only the memory it allocated",
};

/// What [`malloc`] did.
pub struct GraphAlloc {
    /// The address, the model's.
    pub addr: NonZeroUsize,
    /// A block newly taken from the pool (not one the capture reused).
    pub new_block: bool,
    /// The model's first block: the caller makes the capture keep
    /// [`release`] for it.
    pub first: bool,
}

/// A block of `size` bytes for model `model`, captured on `stream`: one its
/// capture freed on `stream` (the smallest that fits), else a new one from
/// `pool` (`take`, the pool's ordinary stream-ordered allocation).
pub fn malloc(
    model: usize,
    pool: usize,
    stream: NonZeroUsize,
    size: usize,
    take: impl FnOnce() -> Result<NonZeroUsize>,
) -> Result<GraphAlloc> {
    let mut graphs = GRAPHS.lock();
    let blocks = graphs.get_or_insert_with(HashMap::new).entry(model);
    let first = matches!(blocks, std::collections::hash_map::Entry::Vacant(_));
    let blocks = blocks.or_default();
    let reuse = blocks
        .iter_mut()
        .filter(|b| b.pool == pool && b.freed_on == Some(stream.get()) && b.size >= size)
        .min_by_key(|b| b.size);
    if let Some(b) = reuse {
        b.freed_on = None;
        return Ok(GraphAlloc {
            addr: NonZeroUsize::new(b.addr).expect("a block's address is not 0"),
            new_block: false,
            first: false,
        });
    }
    let addr = match take() {
        Ok(addr) => addr,
        Err(e) => {
            if blocks.is_empty() {
                graphs.as_mut().map(|g| g.remove(&model));
            }
            return Err(e);
        }
    };
    blocks.push(Block {
        pool,
        addr: addr.get(),
        size,
        stream: stream.get(),
        freed_on: None,
    });
    OWNED.fetch_add(1, Ordering::AcqRel);
    Ok(GraphAlloc {
        addr,
        new_block: true,
        first,
    })
}

/// A free of `addr` on `stream`, capturing into `model` (`None`: not
/// capturing). `Ok(true)`: a block of that capture, now free for its later
/// allocations on `stream`; `Ok(false)`: no model owns it and `stream` is
/// not capturing (an ordinary free). A block another model owns, or one
/// its own model already freed, and a capture freeing a block it did not
/// allocate, are refused.
pub fn free(addr: usize, stream: NonZeroUsize, model: Option<usize>) -> Result<bool> {
    if OWNED.load(Ordering::Acquire) == 0 {
        return match model {
            Some(_) => Err(FOREIGN_FREE),
            None => Ok(false),
        };
    }
    let mut graphs = GRAPHS.lock();
    let Some(graphs) = graphs.as_mut() else {
        return model.map_or(Ok(false), |_| Err(FOREIGN_FREE));
    };
    if let Some(m) = model {
        if let Some(b) = graphs
            .get_mut(&m)
            .and_then(|blocks| blocks.iter_mut().find(|b| b.addr == addr))
        {
            if b.freed_on.is_some() {
                return Err(HELD_BY_MODEL);
            }
            b.freed_on = Some(stream.get());
            return Ok(true);
        }
    }
    let owned = graphs
        .values()
        .any(|blocks| blocks.iter().any(|b| b.addr == addr));
    match (owned, model) {
        (true, _) => Err(HELD_BY_MODEL),
        (false, Some(_)) => Err(FOREIGN_FREE),
        (false, None) => Ok(false),
    }
}

/// Whether a model owns `addr`.
pub fn owned(addr: usize) -> bool {
    OWNED.load(Ordering::Acquire) != 0
        && GRAPHS.lock().as_ref().is_some_and(|g| {
            g.values()
                .any(|blocks| blocks.iter().any(|b| b.addr == addr))
        })
}

/// Gives every block of `model` back to its pool (the model went, or its
/// capture failed); `freed(addr, stream)` hears of each.
pub fn release(model: usize, freed: impl Fn(usize, usize)) {
    let blocks = GRAPHS
        .lock()
        .as_mut()
        .and_then(|g| g.remove(&model))
        .unwrap_or_default();
    OWNED.fetch_sub(blocks.len(), Ordering::AcqRel);
    for b in blocks {
        let _ = handles::with(b.pool as *mut std::ffi::c_void, |p| p.free(b.addr));
        freed(b.addr, b.stream);
    }
}
