//! Workspaces a captured model holds: a launch captured on a stream with a
//! registered allocator takes its workspace once, and the model keeps it for
//! every replay until it is destroyed. The runtime says when a model starts
//! holding a block and when it lets it go; a free of a block while a model
//! still holds it (the program freeing what the graph will use again) is
//! reported as [`Fault::FreedWhileGraphHolds`](super::events::Fault), with
//! the stack that allocated it. A held block is no leak when its stream's
//! registration ends: the model gives it back later.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Held blocks: block → the model's handle.
static HELD: Mutex<Option<HashMap<usize, usize>>> = Mutex::new(None);
/// How many entries `HELD` has: frees look it up only when some exist.
static COUNT: AtomicUsize = AtomicUsize::new(0);

/// Model `model` holds `block` from now on.
pub(crate) fn held(block: usize, model: usize) {
    if HELD
        .lock()
        .get_or_insert_with(HashMap::new)
        .insert(block, model)
        .is_none()
    {
        COUNT.fetch_add(1, Ordering::AcqRel);
    }
}

/// The model that held `block` lets it go (it frees it next).
pub(crate) fn released(block: usize) {
    if COUNT.load(Ordering::Acquire) == 0 {
        return;
    }
    if HELD
        .lock()
        .as_mut()
        .and_then(|m| m.remove(&block))
        .is_some()
    {
        COUNT.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The model holding `block`, if one does (inlined into every free: one
/// atomic load while no model holds a block).
#[inline]
pub(crate) fn holder(block: usize) -> Option<usize> {
    if COUNT.load(Ordering::Acquire) == 0 {
        return None;
    }
    HELD.lock().as_ref().and_then(|m| m.get(&block).copied())
}
