//! Which memory pool serves this thread's allocations: a stack of
//! (pool, device) per thread, as PyTorch's `use_mem_pool` contexts nest.
//! Only the thread that began a use is routed, and only on that device.

use super::MemPool;
use crate::base::error::{Error, Result};
use crate::base::sync::Ordering;
use std::cell::RefCell;
use std::sync::Arc;

/// A thread's uses; those still open when the thread exits are ended then.
struct Uses(Vec<(Arc<MemPool>, i32)>);

impl Drop for Uses {
    fn drop(&mut self) {
        for (pool, _) in self.0.drain(..) {
            pool.uses.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

thread_local! {
    static STACK: RefCell<Uses> = const { RefCell::new(Uses(Vec::new())) };
}

/// Routes this thread's allocations on `device` to `pool` until the
/// matching [`pop`].
pub(super) fn push(pool: Arc<MemPool>, device: i32) -> Result<()> {
    STACK.with_borrow_mut(|Uses(stack)| {
        stack.try_reserve(1).map_err(|_| Error::BadAlloc {
            what: "the memory pool context stack",
        })?;
        stack.push((pool, device));
        Ok(())
    })
}

/// Ends the innermost use of `pool` on `device` begun on this thread.
pub(super) fn pop(id: u64, device: i32) -> Result<Arc<MemPool>> {
    STACK.with_borrow_mut(|Uses(stack)| {
        let at = stack
            .iter()
            .rposition(|(p, d)| p.id == id && *d == device)
            .ok_or(Error::InvalidParam {
                param: "pool",
                reason: "This thread has no use of the pool on that device to end (aclallocMemPoolBeginUse was not called here with them)",
            })?;
        Ok(stack.remove(at).0)
    })
}

/// The pool this thread's allocations on `device` go to, if any.
#[inline]
pub(super) fn active(device: i32) -> Option<Arc<MemPool>> {
    STACK
        .try_with(|stack| {
            let stack = stack.try_borrow().ok()?;
            stack
                .0
                .iter()
                .rev()
                .find(|(_, d)| *d == device)
                .map(|(p, _)| p.clone())
        })
        .ok()
        .flatten()
}

/// True when this thread is inside any use (a check with no lock).
#[inline]
pub(super) fn any() -> bool {
    STACK
        .try_with(|stack| stack.try_borrow().is_ok_and(|s| !s.0.is_empty()))
        .unwrap_or(false)
}
