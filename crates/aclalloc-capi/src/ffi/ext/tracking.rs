//! The tracking layer's C API (prefix `aclalloc`).
#![allow(non_snake_case)]

use crate::base::boundary::{ffi_boundary, ffi_passthrough};
use crate::base::error::Error;
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args::{self, Out};
use crate::pool::Stat;
use crate::tracking;
use std::ffi::{c_char, c_int};
use std::io::Write as _;

/// The tracking layer's statistics for one allocator object, with the pool's
/// (PyTorch's) key names and `aclallocStat` counters.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct aclallocTrackingStats {
    /// Blocks.
    pub allocation: Stat,
    /// Bytes requested from alloc.
    pub allocated_bytes: Stat,
    /// Calls of alloc that returned NULL.
    pub num_alloc_failures: u64,
}

/// Turns the tracking layer on (non-zero) or off (0) for allocator lookups
/// from now on, as `ACLALLOC_TRACK=1` does at load time: with it on,
/// `aclrtAllocatorGetByStream` hands out callbacks that record every block
/// and detect misuse, and a report is written at exit (stderr, or
/// `ACLALLOC_TRACK_REPORT`). In front of a real runtime, turn it on before
/// registering allocators.
#[no_mangle]
pub extern "C" fn aclallocTrackingSetEnabled(enable: c_int) -> aclError {
    ffi_boundary!(|| {
        tracking::set_enabled(enable != 0);
        if enable != 0 {
            tracking::report_at_exit();
        }
        Ok(())
    })
}

/// 1 when the tracking layer is on, 0 when it is off.
#[no_mangle]
pub extern "C" fn aclallocTrackingIsEnabled() -> c_int {
    ffi_passthrough!(|| { c_int::from(tracking::enabled()) })
}

/// Writes the text report (statistics per allocator, one line per fault) to
/// the file `path`, or to stderr when `path` is NULL. `%p` in `path` becomes
/// the process id.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn aclallocTrackingWriteReport(path: *const c_char) -> aclError {
    ffi_boundary!(|| {
        let text = tracking::report_text();
        if path.is_null() {
            return std::io::stderr()
                .write_all(text.as_bytes())
                .map_err(|_| Error::Failure {
                    reason: "The report could not be written to stderr",
                });
        }
        // SAFETY: the caller's contract.
        let path = unsafe { args::c_str(path, "path") }?;
        write_file(path, &text)
    })
}

/// Writes a JSON snapshot to the file `path` (`%p` becomes the process id):
/// every live block as the pool's snapshot shows blocks, each allocator's
/// statistics, every fault and the recorded history (`device_traces`).
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn aclallocTrackingWriteSnapshot(path: *const c_char) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: the caller's contract.
        let path = unsafe { args::c_str(path, "path") }?;
        write_file(path, &tracking::snapshot_json())
    })
}

/// Records the last `maxEntries` events the tracking layer sees (`alloc` at a
/// block's first address lookup, `free_requested`, `free_completed`, `oom`)
/// in a ring, like PyTorch's `_record_memory_history(max_entries=...)`,
/// written as `device_traces` by `aclallocTrackingWriteSnapshot` and
/// `ACLALLOC_TRACK_JSON`. Each call discards what was recorded; 0 stops
/// recording. The ring is allocated here: when it cannot be,
/// `ACL_ERROR_BAD_ALLOC` and nothing changes. `ACLALLOC_RECORD_HISTORY=N`
/// starts recording when tracking is first turned on.
#[no_mangle]
pub extern "C" fn aclallocTrackingRecordHistory(maxEntries: usize) -> aclError {
    ffi_boundary!(|| { tracking::record_history(maxEntries) })
}

/// Tracked allocations capture their call stack, `frames` frames deep (at
/// most 64; 0: off), from now on: faults and leaks in the report show the
/// stack that allocated their block, and the snapshot's blocks, faults and
/// allocation events carry it as PyTorch's `frames`. `ACLALLOC_TRACK_STACKS=N`
/// does the same at load time.
#[no_mangle]
pub extern "C" fn aclallocTrackingSetStacks(frames: usize) -> aclError {
    ffi_boundary!(|| {
        tracking::set_stack_depth(frames);
        Ok(())
    })
}

/// The calling thread's interpreter stack, which stacks captured on this
/// thread end with (a Python package sets it around calls that allocate):
/// one frame a line, innermost first, as `FILENAME<TAB>LINE<TAB>FUNCTION`.
/// NULL or "" clears it.
///
/// # Safety
/// `frames` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn aclallocSetPythonFrames(frames: *const c_char) -> aclError {
    ffi_boundary!(|| {
        let text = match frames.is_null() {
            true => "",
            // SAFETY: the caller's contract.
            false => unsafe { args::c_str(frames, "frames") }?,
        };
        fn frame(line: &str) -> Option<(&str, u32, &str)> {
            let mut parts = line.splitn(3, '\t');
            let (file, line, name) = (parts.next()?, parts.next()?, parts.next()?);
            Some((file, line.trim().parse().ok()?, name))
        }
        crate::history::stacks::set_python_frames(text.lines().filter_map(frame));
        Ok(())
    })
}

fn write_file(path: &str, text: &str) -> Result<(), Error> {
    std::fs::write(tracking::expand_path(path), text).map_err(|_| Error::Failure {
        reason: "The file could not be written",
    })
}

/// Reads the statistics the tracking layer keeps for the user allocator
/// object `allocator` (the object set with `aclrtAllocatorSetObjToDesc`).
/// An allocator that was never used through the tracking layer:
/// `ACL_ERROR_INVALID_PARAM`.
///
/// # Safety
/// `stats` is NULL or points to writable memory for the struct.
#[no_mangle]
pub unsafe extern "C" fn aclallocTrackingGetStats(
    allocator: aclrtAllocator,
    stats: *mut aclallocTrackingStats,
) -> aclError {
    ffi_boundary!(|| {
        // SAFETY: the caller's contract.
        let out = unsafe { Out::required(stats, "stats") }?;
        let found = tracking::allocator_stats(allocator).ok_or(Error::InvalidParam {
            param: "allocator",
            reason: "No allocation was made through the tracking layer with this allocator",
        })?;
        out.write(aclallocTrackingStats {
            allocation: found.allocation,
            allocated_bytes: found.allocated_bytes,
            num_alloc_failures: found.num_alloc_failures,
        });
        Ok(())
    })
}

/// The number of faults the tracking layer has detected so far (repeats of
/// one concurrent-use fault count each time); `UINT64_MAX` if it could not
/// be read (see `aclGetRecentErrMsg`).
#[no_mangle]
pub extern "C" fn aclallocTrackingFaultCount() -> u64 {
    ffi_boundary!(|| {
        let (events, dropped) = tracking::faults();
        Ok(events.iter().map(|e| e.count).sum::<u64>() + dropped)
    })
}

/// Before `exec` replaces this process's image: writes the tracking reports
/// this image would write at exit, to the report files (`ACLALLOC_TRACK_REPORT`,
/// `ACLALLOC_TRACK_JSON`) with `.before-exec-N` appended; the new image
/// writes the files themselves at its exit. Does nothing in a forked child
/// (its parent reports the blocks it inherited) or when no report at exit
/// is due. The preload object `libaclalloc_preload.so` (which `aclalloc run`
/// preloads) calls it around every function of the `exec` family; a
/// program that replaces its image another way can call it itself.
#[no_mangle]
pub extern "C" fn aclallocTrackingBeforeExec() -> aclError {
    ffi_boundary!(|| {
        tracking::write_reports_before_exec();
        Ok(())
    })
}

/// The `exec` after `aclallocTrackingBeforeExec` failed and this image goes
/// on: the files written for it are removed (the report at exit will say
/// everything).
#[no_mangle]
pub extern "C" fn aclallocTrackingExecFailed() -> aclError {
    ffi_boundary!(|| {
        tracking::exec_failed();
        Ok(())
    })
}
