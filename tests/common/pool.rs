//! Reading a pool through the C API: one statistic, the snapshot text.

use aclalloc::base::error::ACL_SUCCESS;
use aclalloc::ffi::ext::pool::{aclallocPool, aclallocPoolGetStat, aclallocPoolSnapshot};
use std::ffi::{c_char, CStr};
use std::ptr::null_mut;

/// The statistic `key` (PyTorch's name, e.g. `allocated_bytes.all.current`)
/// of `pool`; the call must succeed.
pub fn stat(pool: aclallocPool, key: &CStr) -> i64 {
    let mut v = -1;
    assert_eq!(
        unsafe { aclallocPoolGetStat(pool, key.as_ptr(), &mut v) },
        ACL_SUCCESS
    );
    v
}

/// The JSON snapshot of `pool`, as C reads it: the length first, then the
/// text into a buffer one byte longer; both calls must succeed.
pub fn snapshot_text(pool: aclallocPool) -> String {
    let mut len = 0;
    assert_eq!(
        unsafe { aclallocPoolSnapshot(pool, null_mut(), 0, &mut len) },
        ACL_SUCCESS
    );
    let mut buf = vec![0 as c_char; len + 1];
    assert_eq!(
        unsafe { aclallocPoolSnapshot(pool, buf.as_mut_ptr(), buf.len(), null_mut()) },
        ACL_SUCCESS
    );
    // SAFETY: the call wrote a NUL-terminated string into `buf`.
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_str()
        .expect("the snapshot is UTF-8")
        .to_owned()
}
