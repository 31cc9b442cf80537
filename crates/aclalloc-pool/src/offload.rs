//! Host memory holding a sleeping page's contents: its own anonymous
//! mapping, so the copy touches each page once (no zeroing pass before the
//! copy, as a zeroed heap buffer would need) and waking gives the memory
//! straight back to the system (no heap keeping it).

use std::ptr::NonNull;

/// `len` bytes of private anonymous memory, unmapped when dropped.
pub(crate) struct HostCopy {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is owned by this value alone, like a `Box<[u8]>`.
unsafe impl Send for HostCopy {}
// SAFETY: shared access only reads.
unsafe impl Sync for HostCopy {}

impl HostCopy {
    /// `len` (non-zero) bytes; `None` when the system refuses.
    pub(crate) fn new(len: usize) -> Option<Self> {
        // SAFETY: a fresh private mapping at the kernel's choice touches no existing memory.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED || len == 0 {
            return None;
        }
        // Huge pages where the system allows them on request (transparent
        // huge pages in "madvise" mode): a copy of many megabytes then takes
        // one fault per 2 MiB instead of one per 4 KiB. Advice only: refused,
        // the copy runs on small pages.
        // SAFETY: advice on the mapping just made.
        let _ = unsafe { libc::madvise(p, len, libc::MADV_HUGEPAGE) };
        // Populated at once: faulting each page in while copying costs more.
        // SAFETY: as above; populating writes nothing the caller sees.
        let _ = unsafe { libc::madvise(p, len, libc::MADV_POPULATE_WRITE) };
        Some(HostCopy {
            ptr: NonNull::new(p.cast())?,
            len,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: `len` readable bytes mapped by `new`, alive while `self` is.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `len` writable bytes mapped by `new`, borrowed uniquely.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for HostCopy {
    fn drop(&mut self) {
        // SAFETY: the mapping made by `new`, unmapped once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::HostCopy;

    #[test]
    fn a_copy_is_zeroed_writable_and_sized() {
        let mut c = HostCopy::new(3 << 20).unwrap();
        assert_eq!(c.len(), 3 << 20);
        assert!(c.as_slice().iter().all(|&b| b == 0));
        c.as_mut_slice()[12345] = 7;
        assert_eq!(c.as_slice()[12345], 7);
        assert!(HostCopy::new(0).is_none());
    }
}
