//! The byte copy behind the host runtime's copies: `aclrtMemcpy`, a
//! stream's queued copy and a model's replayed copy.
//!
//! Device memory made with CANN's virtual-memory calls is a memfd mapped
//! into a reservation. A plain copy into pages of it that nothing has
//! touched yet (fresh physical memory: weights loaded into an expandable
//! segment, a region or pool waking from sleep) faults each 4 KiB page in,
//! and the kernel zeroes every page before the copy overwrites it. Writing
//! the file with `pwrite` instead allocates those pages already holding the
//! bytes, at about half the time. Into pages that are already there,
//! `pwrite` is the slower way (1.2 to 2.6 times a plain copy), so each MiB
//! of the destination goes the way its pages call for, as `mincore` reports
//! them.

use super::virtual_memory::{virtual_memory, FilePart};
use std::os::fd::AsRawFd;

/// Copies below this size take the plain copy: the lookup and the system
/// calls would cost more than the faults they save.
const LARGE: usize = 1 << 20;
/// The unit in which the destination's pages are asked after.
const CHUNK: usize = 1 << 20;
/// Pages of one chunk `mincore` reports on: a chunk spans at most 257
/// pages of 4 KiB (an unaligned start adds one); larger pages, fewer.
const MAX_PAGES: usize = 520;

/// Copies `count` bytes from `src` to `dst`; the ranges may overlap.
///
/// # Safety
/// As [`std::ptr::copy`]: both ranges valid for `count` bytes.
pub(crate) unsafe fn copy(dst: *mut u8, src: *const u8, count: usize) {
    let (d, s) = (dst as usize, src as usize);
    let disjoint = d.saturating_add(count) <= s || s.saturating_add(count) <= d;
    if count >= LARGE && disjoint {
        if let Some(parts) = virtual_memory().files_under(d, count) {
            for part in &parts {
                // SAFETY: `src` is valid for `count` bytes and the part lies
                // inside the destination at the same distance.
                unsafe { write_part(part, src.add(part.addr - d)) };
            }
            return;
        }
    }
    // SAFETY: the caller's contract.
    unsafe { std::ptr::copy(src, dst, count) }
}

/// Writes `part.len` bytes from `src` into one mapping. Chunk by chunk
/// the pages decide the way; consecutive chunks going the same way are
/// written by one call, so a large plain copy keeps the streaming stores
/// `memmove` uses above its cache-sized threshold.
///
/// # Safety
/// `src` valid for `part.len` bytes, not overlapping the part.
unsafe fn write_part(part: &FilePart, src: *const u8) {
    // The run being gathered: its start within the part, its length, and
    // whether it goes through the file.
    let (mut start, mut len, mut by_file) = (0, 0, false);
    let mut done = 0;
    while done < part.len {
        let addr = part.addr + done;
        let n = (CHUNK - addr % CHUNK).min(part.len - done);
        let fresh = untouched(addr, n);
        if len > 0 && fresh != by_file {
            // SAFETY: the run lies inside the part and `src`'s range.
            unsafe { write_run(part, src, start, len, by_file) };
            len = 0;
        }
        if len == 0 {
            (start, by_file) = (done, fresh);
        }
        len += n;
        done += n;
    }
    if len > 0 {
        // SAFETY: as above.
        unsafe { write_run(part, src, start, len, by_file) };
    }
}

/// Writes `len` bytes at `start` of the part, through its file or by a
/// plain copy (also where the host refused the file write: what was
/// written is written again).
///
/// # Safety
/// As [`write_part`], with `start + len <= part.len`.
unsafe fn write_run(part: &FilePart, src: *const u8, start: usize, len: usize, by_file: bool) {
    // SAFETY: `start + len <= part.len`.
    let from = unsafe { src.add(start) };
    if by_file && write_file(part, from, part.offset + start, len) {
        return;
    }
    // SAFETY: the part is mapped writable memory, `from` valid for `len`
    // bytes, the two disjoint (checked by `copy`).
    unsafe { std::ptr::copy_nonoverlapping(from, (part.addr + start) as *mut u8, len) };
}

/// True when no page of `[addr, addr + len)` is in memory yet.
fn untouched(addr: usize, len: usize) -> bool {
    // SAFETY: no arguments.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let start = addr & !(page - 1);
    let pages = (addr + len - start).div_ceil(page);
    if pages > MAX_PAGES {
        return false;
    }
    let mut resident = [0u8; MAX_PAGES];
    // SAFETY: `start` is page-aligned and the range lies in a live mapping;
    // `resident` holds one byte per page.
    let rc = unsafe {
        libc::mincore(
            start as *mut libc::c_void,
            pages * page,
            resident.as_mut_ptr(),
        )
    };
    rc == 0 && resident[..pages].iter().all(|&r| r & 1 == 0)
}

/// `pwrite`s `len` bytes at `offset` of the part's file; false if the host
/// refused partway (what was written is written again by the plain copy).
fn write_file(part: &FilePart, src: *const u8, offset: usize, len: usize) -> bool {
    let mut done = 0;
    while done < len {
        let Ok(at) = libc::off_t::try_from(offset + done) else {
            return false;
        };
        // SAFETY: `src` is valid for `len` bytes; the part holds the file
        // open.
        let n = unsafe { libc::pwrite(part.fd.as_raw_fd(), src.add(done).cast(), len - done, at) };
        match n {
            n if n > 0 => done += n as usize,
            -1 if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::super::memory::DeviceHeap;
    use super::super::virtual_memory::GRANULARITY as G;
    use super::*;

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 31 % 251) as u8).collect()
    }

    /// The resident KiB of this process's mapping that starts at `addr`
    /// (`/proc/self/smaps`): pages a plain copy faulted in count, pages
    /// written through the file do not until something touches them.
    fn rss_kib(addr: usize) -> usize {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let head = format!("{addr:x}-");
        let mut lines = smaps.lines().skip_while(|l| !l.starts_with(&head));
        assert!(lines.next().is_some(), "a mapping at {addr:#x}");
        let rss = lines.find(|l| l.starts_with("Rss:")).unwrap();
        rss.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    #[test]
    fn copies_across_fresh_and_touched_mappings_land_in_the_files() {
        let vm = virtual_memory();
        let heap = DeviceHeap::new(0, 8 * G);
        let va = vm.reserve(3 * G, 0, 0, 0).unwrap();
        let (h1, h2) = (
            vm.malloc_physical(&heap, G).unwrap(),
            vm.malloc_physical(&heap, G).unwrap(),
        );
        vm.map(va, G, 0, h1, 0).unwrap();
        vm.map(va + G, G, 0, h2, 0).unwrap();
        assert!(untouched(va, CHUNK) && untouched(va + G, CHUNK));
        // One touched page in the second mapping: its chunk takes the plain copy.
        // SAFETY: mapped read-write.
        unsafe { ((va + G + 5 * 4096) as *mut u8).write(1) };
        assert!(!untouched(va + G, CHUNK));

        // Unaligned at both ends, across both mappings.
        let (at, len) = (va + 100, 2 * G - 100 - 777);
        let src = pattern(len);
        // SAFETY: `src` holds `len` bytes; the destination is mapped.
        unsafe { copy(at as *mut u8, src.as_ptr(), len) };
        // Through the file: the first mapping's pages are in memory but
        // none is mapped yet; the second's touched MiB took the plain copy.
        assert!(!untouched(va, CHUNK) && !untouched(va + G + CHUNK, CHUNK));
        assert_eq!(rss_kib(va), 0);
        assert!(rss_kib(va + G) >= CHUNK >> 10);
        // SAFETY: mapped read-write.
        let got = unsafe { std::slice::from_raw_parts(at as *const u8, len) };
        assert!(got == &src[..], "the bytes read back through the mapping");

        // The files hold them: the same physical memory mapped elsewhere.
        let other = vm.reserve(G, 0, 0, 0).unwrap();
        vm.unmap(va + G).unwrap();
        vm.map(other, G, 0, h2, 0).unwrap();
        // SAFETY: mapped read-write.
        let again = unsafe { std::slice::from_raw_parts(other as *const u8, G - 777) };
        assert!(again == &src[G - 100..]);

        // Overlapping copies inside device memory keep `memmove`'s meaning.
        // SAFETY: both ranges lie in the first mapping.
        unsafe { copy((va + 4096) as *mut u8, (va + 100) as *const u8, G - 8192) };
        // SAFETY: mapped read-write.
        let moved = unsafe { std::slice::from_raw_parts((va + 4096) as *const u8, G - 8192) };
        assert!(moved == &src[..G - 8192]);

        assert!(
            vm.files_under(va + G, 1).is_none(),
            "unmapped: not a file's"
        );
        assert!(
            vm.files_under(va, G + 1).is_none(),
            "runs into unmapped space"
        );
        vm.unmap(va).unwrap();
        vm.unmap(other).unwrap();
        for h in [h1, h2] {
            vm.free_physical(h).unwrap();
        }
        vm.release(va).unwrap();
        vm.release(other).unwrap();
    }
}
