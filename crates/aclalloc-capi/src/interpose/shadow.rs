//! What this library keeps about a real runtime's allocator descriptors.
//!
//! Descriptor calls are forwarded and their effect mirrored here, so that
//! `aclrtAllocatorRegister` knows the user's callbacks. With tracking on, a
//! registration gives the runtime a descriptor of its own holding the
//! tracking callbacks (a "mirror"), destroyed once the runtime drops it.

use crate::base::descriptor::Descriptor;
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

#[derive(Default)]
struct Tables {
    descriptors: HashMap<usize, Descriptor>,
    mirrors: HashMap<usize, usize>,
}

static TABLES: Mutex<Option<Tables>> = Mutex::new(None);

fn with<R>(f: impl FnOnce(&mut Tables) -> R) -> R {
    let mut tables = TABLES.lock().unwrap_or_else(PoisonError::into_inner);
    f(tables.get_or_insert_with(Tables::default))
}

/// The runtime created descriptor `desc`.
pub fn created(desc: usize) {
    with(|t| t.descriptors.insert(desc, Descriptor::default()));
}

/// The runtime accepted a change to `desc`.
pub fn changed(desc: usize, change: impl FnOnce(&mut Descriptor)) {
    with(|t| t.descriptors.get_mut(&desc).map(change));
}

/// The runtime destroyed `desc`.
pub fn destroyed(desc: usize) {
    with(|t| t.descriptors.remove(&desc));
}

/// The contents of `desc`, if it was created through this library.
pub fn descriptor(desc: usize) -> Option<Descriptor> {
    with(|t| t.descriptors.get(&desc).copied())
}

/// `stream` is now registered with `mirror` (`None`: the user's descriptor);
/// returns the mirror it replaces, for the caller to destroy in the runtime.
pub fn set_mirror(stream: usize, mirror: Option<usize>) -> Option<usize> {
    with(|t| match mirror {
        Some(m) => t.mirrors.insert(stream, m),
        None => t.mirrors.remove(&stream),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::descriptor::AllocatorObj;

    #[test]
    fn descriptors_follow_the_runtime_and_mirrors_are_replaced() {
        let d = 0x5eed_0001;
        assert!(descriptor(d).is_none());
        created(d);
        changed(d, |x| x.obj = AllocatorObj::new(0x40 as *mut _));
        assert_eq!(descriptor(d).unwrap().obj.unwrap().as_ptr() as usize, 0x40);
        destroyed(d);
        assert!(descriptor(d).is_none());
        let s = 0x5eed_0100;
        assert_eq!(set_mirror(s, Some(1)), None);
        assert_eq!(set_mirror(s, Some(2)), Some(1));
        assert_eq!(set_mirror(s, None), Some(2));
    }
}
