//! Device address ranges whose physical memory a sleeping pool gave back,
//! with the message a refused access gives. The pool fills it and the
//! runtime reads it when it refuses an address, so the two siblings meet
//! here instead of importing each other.

use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Start → (length, message) of every sleeping range.
static RANGES: RwLock<BTreeMap<usize, (usize, &'static str)>> = RwLock::new(BTreeMap::new());

/// How many ranges `RANGES` holds: a launch checks its data pointer with
/// one load while nothing sleeps.
static COUNT: AtomicUsize = AtomicUsize::new(0);

/// One leaked copy of each message (one per tag), since errors carry `&'static str`.
static MESSAGES: Mutex<Option<HashMap<String, &'static str>>> = Mutex::new(None);

/// Why memory of the sleeping pool tagged `tag` is refused (interned: a
/// process has a handful of tags).
pub fn message(tag: &str) -> &'static str {
    intern(format!(
        "It is memory of the pool tagged \"{tag}\", which is asleep: its physical memory was given back by aclallocSleep; call aclallocWakeUp first"
    ))
}

/// Why the sleeping pool tagged `tag` allocates nothing (interned).
pub fn refusal(tag: &str) -> &'static str {
    intern(format!(
        "The pool tagged \"{tag}\" is asleep (aclallocSleep): it allocates nothing until aclallocWakeUp"
    ))
}

/// Why memory of the sleeping region tagged `tag` is refused (interned).
pub fn region_message(tag: &str) -> &'static str {
    intern(format!(
        "It is memory of the region tagged \"{tag}\", which is asleep: its physical memory was given back by aclallocSleep; call aclallocWakeUp first"
    ))
}

/// Why a region tagged `tag` allocates nothing while its tag sleeps (interned).
pub fn region_refusal(tag: &str) -> &'static str {
    intern(format!(
        "The region tagged \"{tag}\" is asleep (aclallocSleep): it allocates nothing until aclallocWakeUp"
    ))
}

fn intern(text: String) -> &'static str {
    let mut messages = MESSAGES.lock();
    let messages = messages.get_or_insert_with(HashMap::new);
    if let Some(&m) = messages.get(&text) {
        return m;
    }
    let leaked: &'static str = Box::leak(text.clone().into_boxed_str());
    messages.insert(text, leaked);
    leaked
}

/// Marks `[start, start + len)` asleep, refused with `message`.
pub fn put(start: usize, len: usize, message: &'static str) {
    if RANGES.write().insert(start, (len, message)).is_none() {
        COUNT.fetch_add(1, Ordering::Relaxed);
    }
}

/// Forgets the sleeping range that starts at `start`.
pub fn take(start: usize) {
    if RANGES.write().remove(&start).is_some() {
        COUNT.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The message of the sleeping range holding `addr`, if any.
#[inline]
pub fn find(addr: usize) -> Option<&'static str> {
    if COUNT.load(Ordering::Relaxed) == 0 {
        return None;
    }
    find_slow(addr)
}

#[cold]
fn find_slow(addr: usize) -> Option<&'static str> {
    let ranges = RANGES.read();
    let (&start, &(len, message)) = ranges.range(..=addr).next_back()?;
    (addr - start < len).then_some(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_is_found_until_taken_and_messages_name_the_tag() {
        let m = message("kv");
        assert!(m.contains("\"kv\""), "{m}");
        assert!(std::ptr::eq(m, message("kv")), "interned once");
        assert!(refusal("kv").contains("\"kv\" is asleep"));
        let start = 0x7f00_dead_0000;
        put(start, 4096, m);
        assert_eq!(find(start), Some(m));
        assert_eq!(find(start + 4095), Some(m));
        assert_eq!(find(start + 4096), None);
        assert_eq!(find(start - 1), None);
        take(start);
        assert_eq!(find(start), None);
    }
}
