//! The calling thread's open regions: a stack of tags, so regions nest and
//! the innermost one names the memory allocated inside it.

use crate::base::error::{Error, Result};
use std::cell::RefCell;
use std::sync::Arc;

thread_local! {
    static STACK: RefCell<Vec<Arc<str>>> = const { RefCell::new(Vec::new()) };
}

/// Opens a region tagged `tag` on the calling thread, inside any open one.
pub fn begin(tag: &str) -> Result<()> {
    if tag.is_empty() {
        return Err(Error::InvalidParam {
            param: "tag",
            reason: "It is empty: a region needs a tag to sleep and wake by",
        });
    }
    STACK.with(|s| s.borrow_mut().push(Arc::from(tag)));
    Ok(())
}

/// Closes the calling thread's innermost region.
pub fn end() -> Result<()> {
    match STACK.with(|s| s.borrow_mut().pop()) {
        Some(_) => Ok(()),
        None => Err(Error::Failure {
            reason: "No tagged region is open on this thread: there is no aclallocRegionBegin for this aclallocRegionEnd",
        }),
    }
}

/// The tag of the calling thread's innermost open region, if any.
#[inline]
pub fn current() -> Option<Arc<str>> {
    // `try_with`: a thread being torn down allocates outside any region.
    STACK
        .try_with(|s| s.borrow().last().cloned())
        .ok()
        .flatten()
}

/// How many regions are open on the calling thread.
pub fn depth() -> usize {
    STACK.try_with(|s| s.borrow().len()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_nest_and_an_unmatched_end_fails() {
        assert!(end().is_err());
        assert!(begin("").is_err());
        begin("outer").unwrap();
        begin("inner").unwrap();
        assert_eq!(current().as_deref(), Some("inner"));
        assert_eq!(depth(), 2);
        end().unwrap();
        assert_eq!(current().as_deref(), Some("outer"));
        end().unwrap();
        assert_eq!(current(), None);
        assert!(end().is_err());
    }
}
