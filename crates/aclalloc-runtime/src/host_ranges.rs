//! Whether a host address range is mapped writable in this process, for
//! `aclrtMemset[Async]` on host memory no device record knows of (CANN
//! decides host or device by the address). Read from `/proc/self/maps`:
//! only a range that is not device memory pays for it, and a range that is
//! not mapped writable is refused instead of faulting inside the fill.

/// True when every byte of `[addr, addr + len)` lies in mappings of this
/// process that allow writing; an empty range is always writable.
pub(crate) fn writable(addr: usize, len: usize) -> bool {
    if len == 0 {
        return true;
    }
    let Some(end) = addr.checked_add(len) else {
        return false;
    };
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return false;
    };
    covered(&maps, addr, end)
}

/// True when the writable mappings listed in `maps` (the kernel's format:
/// `start-end perms ...`, in address order) cover `[addr, end)`.
fn covered(maps: &str, addr: usize, end: usize) -> bool {
    let mut next = addr;
    for line in maps.lines() {
        let Some((range, perms)) = line.split_once(' ') else {
            continue;
        };
        let Some((start, stop)) = range.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(stop)) = (
            usize::from_str_radix(start, 16),
            usize::from_str_radix(stop, 16),
        ) else {
            continue;
        };
        if stop <= next {
            continue;
        }
        // A gap, or a mapping that cannot be written, before the end.
        if start > next || perms.as_bytes().get(1) != Some(&b'w') {
            return false;
        }
        next = stop;
        if next >= end {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
1000-3000 rw-p 00000000 00:00 0
3000-4000 rw-p 00000000 00:00 0 [heap]
5000-6000 r--p 00000000 08:01 42 /lib/x.so
6000-7000 rw-p 00000000 00:00 0
";

    #[test]
    fn ranges_inside_adjacent_writable_mappings_are_covered() {
        assert!(covered(MAPS, 0x1000, 0x3000));
        assert!(
            covered(MAPS, 0x2fff, 0x3001),
            "across two adjacent mappings"
        );
        assert!(covered(MAPS, 0x1000, 0x4000));
        assert!(covered(MAPS, 0x6000, 0x7000));
    }

    #[test]
    fn gaps_read_only_and_unmapped_ranges_are_not() {
        assert!(!covered(MAPS, 0x3fff, 0x4001), "runs into the gap");
        assert!(!covered(MAPS, 0x5000, 0x5001), "read-only");
        assert!(!covered(MAPS, 0x4000, 0x4010), "unmapped");
        assert!(!covered(MAPS, 0x7000, 0x7001), "past the last mapping");
        assert!(!covered(MAPS, 0x500, 0x1001), "starts before the first");
    }

    #[test]
    fn this_process_stack_and_heap_are_writable_and_its_code_is_not() {
        let mut on_stack = [0u8; 64];
        let on_heap = vec![0u8; 1 << 16];
        assert!(writable(on_stack.as_mut_ptr() as usize, on_stack.len()));
        assert!(writable(on_heap.as_ptr() as usize, on_heap.len()));
        assert!(
            !writable(writable as *const () as usize, 16),
            "code is not writable"
        );
        assert!(!writable(16, 16), "the zero page is not mapped");
        assert!(!writable(usize::MAX - 4, 16), "wraps around");
        assert!(writable(16, 0), "an empty range touches nothing");
    }

    /// Read-only data of this program (`.rodata`).
    static READ_ONLY: [u8; 64] = [7; 64];

    #[test]
    fn memset_fills_writable_host_memory_and_refuses_the_rest() {
        use crate::base::error::Error;
        use crate::host::tests::runtime;
        use std::ptr::NonNull;
        let rt = runtime(1, 1 << 20);
        rt.set_device(0).unwrap();
        let mut on_stack = [0u8; 64];
        let at = NonNull::new(on_stack.as_mut_ptr()).unwrap();
        rt.memset(at, 64, 0x5a, 64).unwrap();
        assert!(on_stack.iter().all(|&b| b == 0x5a));
        let s = rt.create_stream(0, 0).unwrap();
        rt.memset_async(at, 64, 1, 32, Some(s)).unwrap();
        rt.synchronize_stream(Some(s)).unwrap();
        assert!(on_stack[..32].iter().all(|&b| b == 1) && on_stack[32] == 0x5a);
        let read_only = NonNull::new(READ_ONLY.as_ptr().cast_mut()).unwrap();
        for refused in [
            rt.memset(read_only, 64, 0, 64),
            rt.memset_async(read_only, 64, 0, 64, Some(s)),
            rt.memset(NonNull::new(16 as *mut u8).unwrap(), 64, 0, 64),
        ] {
            assert!(
                matches!(
                    refused,
                    Err(Error::InvalidAddress {
                        param: "devPtr",
                        ..
                    })
                ),
                "{refused:?}"
            );
        }
        assert_eq!(READ_ONLY, [7; 64]);
        // Freed device memory stays refused, though it is mapped writable.
        let dev = rt.malloc(4096).unwrap();
        rt.free(dev.as_ptr()).unwrap();
        assert!(rt.memset(dev, 64, 0, 64).is_err());
    }
}
