//! A pool as text and JSON, and the history recorder: `aclallocPoolSummary`,
//! `aclallocPoolSnapshot`, `aclallocPoolRecordHistory`,
//! `aclallocPoolRecordStacks`.

#![allow(non_snake_case, non_camel_case_types)]

use super::aclallocPool;
use crate::base::boundary::ffi_boundary;
use crate::base::error::Error;
use crate::ffi::boundary::boundary;
use crate::ffi::cann::types::*;
use crate::ffi::wiring::args::{self, write_text, Out, OutSlice};
use crate::history::StackContext;
use crate::pool::{handles, Pool};
use std::ffi::c_char;

/// The `"version"` of the JSON `aclallocPoolSnapshot` writes (2: hex
/// strings for addresses and streams, `device_traces` and `history`).
pub const ACLALLOC_SNAPSHOT_VERSION: u32 = 2;
const _: () = assert!(ACLALLOC_SNAPSHOT_VERSION == crate::pool::snapshot::SNAPSHOT_VERSION);

/// The body of a text export `$name(pool, buffer, size, length)`: `$make`
/// of the pool, written as `snprintf` does.
macro_rules! text {
    ($name:ident($pool:ident, $buffer:ident, $size:ident, $length:ident), $make:path) => {
        boundary(stringify!($name), || {
            // SAFETY: `buffer` is NULL or `size` writable bytes, the export's contract.
            let buffer = unsafe { OutSlice::new($buffer, $size, "buffer") }?;
            // SAFETY: `length` is NULL (not wanted) or writable, the export's contract.
            let length = unsafe { Out::optional($length) };
            let text = handles::with($pool, |p| $make(p))?;
            args::write_optional(length, text.len());
            write_text(buffer, &text);
            Ok(())
        })
    };
}

/// The statistics as a text table like PyTorch's `memory_summary()`, written
/// as `snprintf` writes: at most `size - 1` bytes and a NUL, the full length
/// (without the NUL) to `length` if not NULL; `buffer` may be NULL when
/// `size` is 0.
///
/// # Safety
/// `buffer` must be valid for `size` bytes; `length` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn aclallocPoolSummary(
    pool: aclallocPool,
    buffer: *mut c_char,
    size: usize,
    length: *mut usize,
) -> aclError {
    text!(
        aclallocPoolSummary(pool, buffer, size, length),
        Pool::summary
    )
}

/// The segments, blocks and recorded history as JSON, like PyTorch's
/// `_snapshot()`: `{"version":2,"device":0,"segments":[{"device","address",
/// "total_size","stream","segment_type","is_expandable","mapped_size",
/// "unmapped_size","allocated_size","active_size",
/// "requested_size","blocks":[{"address","size","requested_size","state"}]}],
/// "device_traces":[[{"action","addr","size","block_size","stream",
/// "time_us"}]],"history":{"enabled","max_entries","entries","dropped"}}`;
/// `state` is `"active_allocated"` or `"inactive"`, addresses and streams are
/// hex strings. A segment's `stream` is the stream whose launch made it (0
/// outside a launch: CANN's callbacks are not told the stream). Buffer
/// handling as `aclallocPoolSummary`.
///
/// # Safety
/// As `aclallocPoolSummary`.
#[no_mangle]
pub unsafe extern "C" fn aclallocPoolSnapshot(
    pool: aclallocPool,
    buffer: *mut c_char,
    size: usize,
    length: *mut usize,
) -> aclError {
    text!(
        aclallocPoolSnapshot(pool, buffer, size, length),
        Pool::snapshot_json
    )
}

/// Records the last `maxEntries` events of the pool (`alloc`,
/// `free_requested`, `free_completed`, `segment_alloc`, `segment_free`, `oom`)
/// in a ring, like PyTorch's `_record_memory_history(max_entries=...)`;
/// `aclallocPoolSnapshot` writes them as `device_traces`. Each call discards
/// what was recorded; 0 stops recording. The ring is allocated here: when it
/// cannot be, `ACL_ERROR_BAD_ALLOC` and nothing changes.
/// `ACLALLOC_RECORD_HISTORY=N` starts recording at a pool's creation.
#[no_mangle]
pub extern "C" fn aclallocPoolRecordHistory(pool: aclallocPool, maxEntries: usize) -> aclError {
    ffi_boundary!(|| { handles::with(pool, |p| p.record_history(maxEntries))? })
}

/// Which recorded events carry their call stack, with the meanings of
/// PyTorch's `_record_memory_history(context=..., stacks=...)`: `context`
/// NULL (none), `"state"` (live blocks only: the snapshot's blocks),
/// `"alloc"` (and allocation events), `"all"` (and frees); `stacks`
/// `"all"` (native frames, 16 deep, then the Python frames that
/// `aclallocSetPythonFrames` set) or `"python"` (the Python frames only).
/// They show as `frames` in `aclallocPoolSnapshot`'s `device_traces`.
///
/// # Safety
/// `context` and `stacks` are NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn aclallocPoolRecordStacks(
    pool: aclallocPool,
    context: *const c_char,
    stacks: *const c_char,
) -> aclError {
    ffi_boundary!(|| {
        let text = |ptr: *const c_char, param| match ptr.is_null() {
            true => Ok(None),
            // SAFETY: the caller's contract.
            false => unsafe { args::c_str(ptr, param) }.map(Some),
        };
        let invalid = |param, reason| Error::InvalidParam { param, reason };
        let context = StackContext::parse(text(context, "context")?).ok_or(invalid(
            "context",
            "Expected NULL, \"state\", \"alloc\" or \"all\"",
        ))?;
        let depth = match text(stacks, "stacks")? {
            None | Some("all") => crate::history::stacks::DEFAULT_DEPTH,
            Some("python") => 0,
            Some(_) => return Err(invalid("stacks", "Expected \"python\" or \"all\"")),
        };
        handles::with(pool, |p| p.record_stacks(context, depth))?;
        Ok(())
    })
}
