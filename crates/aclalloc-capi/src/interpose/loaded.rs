//! Finding a real ACL runtime among the loaded objects, including one loaded
//! `RTLD_LOCAL` by a `dlopen`ed library, which `dlsym(RTLD_NEXT, ...)` misses.
//!
//! `dl_iterate_phdr`'s callback, under the loader's lock, only copies names
//! into a static buffer (a `dlopen` there could deadlock). Each name is then
//! opened with `RTLD_NOLOAD` and asked for `aclrtCreateStream` (`dladdr` names
//! the definer; copies of this library are skipped). The runtime's handle is
//! kept open; the others are closed. Nothing here allocates.

use crate::base::sync::statics::AtomicBool;
use crate::base::sync::Ordering;
use std::cell::UnsafeCell;
use std::ffi::{c_char, c_int, c_void, CStr};

/// Bytes of object names one pass can hold (names are paths).
const NAME_BYTES: usize = 32 * 1024;
/// Objects one pass can hold.
const MAX_OBJECTS: usize = 256;

/// The names of one pass over the loaded objects.
struct Names {
    bytes: [u8; NAME_BYTES],
    used: usize,
    starts: [u32; MAX_OBJECTS],
    count: usize,
    /// Objects before this index were listed by an earlier pass.
    skip: usize,
    /// Objects the callback saw in this pass.
    seen: usize,
    /// The callback stopped early (buffer full): another pass is needed.
    stopped: bool,
}

/// The one buffer, used by one scan at a time ([`SCANNING`]).
struct Scratch(UnsafeCell<Names>);
// SAFETY: only touched by the thread holding `SCANNING`.
unsafe impl Sync for Scratch {}

static SCRATCH: Scratch = Scratch(UnsafeCell::new(Names {
    bytes: [0; NAME_BYTES],
    used: 0,
    starts: [0; MAX_OBJECTS],
    count: 0,
    skip: 0,
    seen: 0,
    stopped: false,
}));
static SCANNING: AtomicBool = AtomicBool::new(false);

/// Holds the scratch buffer while alive.
struct ScanGuard;

impl ScanGuard {
    /// The buffer, if no other thread is scanning.
    fn try_take() -> Option<ScanGuard> {
        SCANNING
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| ScanGuard)
    }

    /// The buffer, waiting for another scan to end.
    fn take() -> ScanGuard {
        loop {
            if let Some(guard) = Self::try_take() {
                return guard;
            }
            std::thread::yield_now();
        }
    }

    fn names(&mut self) -> &mut Names {
        // SAFETY: this guard is the only holder of the buffer.
        unsafe { &mut *SCRATCH.0.get() }
    }
}

impl Drop for ScanGuard {
    fn drop(&mut self) {
        SCANNING.store(false, Ordering::Release);
    }
}

/// The `dl_iterate_phdr` callback: copies names, calls nothing.
unsafe extern "C" fn collect(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> c_int {
    // SAFETY: `data` is the `Names` handed to dl_iterate_phdr below, and
    // `info` the loader's description of one object, valid for this call.
    let (names, info) = unsafe { (&mut *data.cast::<Names>(), &*info) };
    let index = names.seen;
    names.seen += 1;
    if index < names.skip || info.dlpi_name.is_null() {
        return 0;
    }
    // SAFETY: the loader's NUL-terminated name of a loaded object.
    let name = unsafe { CStr::from_ptr(info.dlpi_name) }.to_bytes_with_nul();
    if name.len() <= 1 {
        return 0; // the executable: its name is empty
    }
    if names.count == MAX_OBJECTS || names.used + name.len() > NAME_BYTES {
        names.stopped = true;
        names.seen -= 1; // listed by the next pass
        return 1;
    }
    names.starts[names.count] = names.used as u32;
    names.bytes[names.used..names.used + name.len()].copy_from_slice(name);
    names.used += name.len();
    names.count += 1;
    0
}

/// The loader's count of objects ever loaded into the process: a new value
/// means something was loaded since it was last read.
pub(crate) fn objects_ever_loaded() -> u64 {
    unsafe extern "C" fn first(
        info: *mut libc::dl_phdr_info,
        size: usize,
        data: *mut c_void,
    ) -> c_int {
        let wanted = std::mem::offset_of!(libc::dl_phdr_info, dlpi_adds)
            + std::mem::size_of::<libc::c_ulonglong>();
        if size >= wanted {
            // SAFETY: `info` is valid for this call and, being `size` bytes
            // long, has the field; `data` is the u64 below.
            unsafe { *data.cast::<libc::c_ulonglong>() = (*info).dlpi_adds };
        }
        1
    }
    let mut adds: libc::c_ulonglong = 0;
    // SAFETY: a callback that only reads `info` and writes `adds`.
    unsafe { libc::dl_iterate_phdr(Some(first), (&mut adds as *mut libc::c_ulonglong).cast()) };
    adds
}

/// The base address of the object defining `addr`, and its file name.
fn defining_object(addr: *const c_void) -> Option<(usize, *const c_char)> {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: dladdr only reads `addr` as a number and fills `info`.
    if unsafe { libc::dladdr(addr, info.as_mut_ptr()) } == 0 {
        return None;
    }
    // SAFETY: dladdr succeeded, so `info` is filled in.
    let info = unsafe { info.assume_init() };
    (!info.dli_fname.is_null()).then_some((info.dli_fbase as usize, info.dli_fname))
}

/// The base address of the object defining `addr` (`None` for NULL or an address in no object).
pub(crate) fn defining_base(addr: *const c_void) -> Option<usize> {
    let object = (!addr.is_null()).then(|| defining_object(addr));
    object.flatten().map(|(base, _)| base)
}

/// The base address of this library (of the executable, when the crate is
/// linked statically into it).
pub(crate) fn own_base() -> usize {
    defining_object(own_base as *const c_void).map_or(0, |(base, _)| base)
}

const CREATE_STREAM: &CStr = c"aclrtCreateStream";
/// A function only libaclalloc exports: a second copy of this library
/// loaded under another path is not a runtime to forward to.
const OWN_MARK: &CStr = c"aclallocTrackingSetEnabled";

/// The `dlsym(handle, name)` address, if defined in an object other than
/// this library, with that object's base and name.
fn defined_elsewhere(
    handle: *mut c_void,
    name: &CStr,
    own: usize,
) -> Option<(usize, *const c_char)> {
    // SAFETY: a handle from dlopen and a NUL-terminated name.
    let p = unsafe { libc::dlsym(handle, name.as_ptr()) };
    if p.is_null() {
        return None;
    }
    defining_object(p).filter(|&(base, _)| base != own)
}

/// Checks the object named `name` (a loaded object): the runtime's handle
/// (kept open) if it or a dependency defines the ACL runtime.
fn check(name: &CStr, own: usize) -> Option<*mut c_void> {
    // SAFETY: a NUL-terminated path; RTLD_NOLOAD loads nothing.
    let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
    if h.is_null() {
        return None;
    }
    let mut found = None;
    if let Some((base, path)) = defined_elsewhere(h, CREATE_STREAM, own) {
        // SAFETY: the loader's NUL-terminated name of a loaded object.
        let rt = unsafe { libc::dlopen(path, libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
        if !rt.is_null() {
            let another_aclalloc =
                defined_elsewhere(rt, OWN_MARK, own).is_some_and(|(b, _)| b == base);
            if another_aclalloc {
                // SAFETY: the handle just opened.
                unsafe { libc::dlclose(rt) };
            } else {
                found = Some(rt);
            }
        }
    }
    // SAFETY: the NOLOAD handle opened above (drops only its reference).
    unsafe { libc::dlclose(h) };
    found
}

/// The handle, kept open, of the first loaded object (other than this
/// library) defining the ACL runtime. `wait`: wait for a concurrent scan
/// instead of giving up (`None`).
pub(crate) fn find(wait: bool) -> Option<*mut c_void> {
    let mut guard = if wait {
        ScanGuard::take()
    } else {
        ScanGuard::try_take()?
    };
    let own = own_base();
    let mut skip = 0;
    loop {
        let names = guard.names();
        names.used = 0;
        names.count = 0;
        names.seen = 0;
        names.skip = skip;
        names.stopped = false;
        // SAFETY: `collect` only copies into `names`, which outlives the call.
        unsafe { libc::dl_iterate_phdr(Some(collect), (names as *mut Names).cast()) };
        for i in 0..names.count {
            let start = names.starts[i] as usize;
            let name = CStr::from_bytes_until_nul(&names.bytes[start..]).ok()?;
            if let Some(found) = check(name, own) {
                return Some(found);
            }
        }
        if !names.stopped {
            return None;
        }
        // A name too long for the whole buffer is skipped, not retried.
        skip = names.seen + usize::from(names.count == 0);
    }
}

/// The file name of the runtime behind `handle` (the loader's copy, valid
/// while the object is loaded, which the kept handle guarantees).
pub(crate) fn name_of(handle: *mut c_void) -> Option<&'static CStr> {
    // SAFETY: a live handle and a NUL-terminated name.
    let p = unsafe { libc::dlsym(handle, CREATE_STREAM.as_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: the name of an object kept loaded by our handle for the life
    // of the process.
    defining_object(p).map(|(_, name)| unsafe { CStr::from_ptr(name) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_loaded_object_of_the_test_process_is_a_runtime() {
        // The test executable holds this crate (skipped as the executable);
        // its libraries are the C library's.
        assert!(find(true).is_none());
    }

    #[test]
    fn the_loader_counts_objects_and_this_crate_has_a_base() {
        // At least the executable and the C library.
        assert!(objects_ever_loaded() >= 2);
        assert_ne!(own_base(), 0);
    }
}
