//! CANN's data buffers (`aclDataBuffer`): an address and a size that a
//! program wraps device memory in to hand it around. A buffer owns neither:
//! the program allocates and frees the memory. The handle C sees is a
//! number of a table of live buffers, so a destroyed or forged buffer is
//! refused, never read.

use crate::base::error::{Error, Result};
use crate::base::handles::HandleTable;
use crate::base::ids::DataBufferHandle;
use std::sync::LazyLock;

/// Live buffers: (address, size in bytes).
static BUFFERS: LazyLock<HandleTable<DataBufferHandle, (usize, usize)>> =
    LazyLock::new(HandleTable::new);

const NOT_A_BUFFER: Error = Error::InvalidParam {
    param: "dataBuffer",
    reason: "It is not a live data buffer (not returned by aclCreateDataBuffer, or destroyed)",
};

/// `aclCreateDataBuffer`: a buffer naming `size` bytes at `addr` (either
/// may be 0, as CANN allows: an output whose memory comes later).
pub fn create(addr: usize, size: usize) -> Result<DataBufferHandle> {
    BUFFERS.insert((addr, size))
}

/// `aclDestroyDataBuffer`: the buffer goes; its memory stays the program's.
pub fn destroy(buffer: DataBufferHandle) -> Result<()> {
    BUFFERS.remove(buffer).map(|_| ()).ok_or(NOT_A_BUFFER)
}

/// `aclUpdateDataBuffer`: the buffer names `size` bytes at `addr` from now on.
pub fn update(buffer: DataBufferHandle, addr: usize, size: usize) -> Result<()> {
    BUFFERS
        .with_mut(buffer, |b| *b = (addr, size))
        .ok_or(NOT_A_BUFFER)
}

/// The address and size `buffer` names.
pub fn get(buffer: DataBufferHandle) -> Result<(usize, usize)> {
    BUFFERS.with(buffer, |b| *b).ok_or(NOT_A_BUFFER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_names_its_memory_until_destroyed() {
        let b = create(0x1000, 64).unwrap();
        assert_eq!(get(b).unwrap(), (0x1000, 64));
        update(b, 0x2000, 128).unwrap();
        assert_eq!(get(b).unwrap(), (0x2000, 128));
        destroy(b).unwrap();
        assert!(get(b).is_err());
        assert!(update(b, 0, 0).is_err());
        assert!(destroy(b).is_err());
        let forged = DataBufferHandle::from_raw(0x1234).unwrap();
        assert!(get(forged).is_err());
    }
}
