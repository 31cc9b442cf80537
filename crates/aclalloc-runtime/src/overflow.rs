//! Float overflow: the saturation mode (`aclrtSetDeviceSatMode`,
//! `aclrtGetDeviceSatMode`), a stream's overflow check switch
//! (`aclrtSetStreamOverflowSwitch`, `aclrtGetStreamOverflowSwitch`: the
//! stream attribute `ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK`, one storage) and
//! the overflow status (`aclrtGetOverflowStatus`, `aclrtResetOverflowStatus`).
//!
//! The host keeps the mode and the switches and reports them back, as CANN
//! does. Its kernels are host code computing in the host's IEEE arithmetic;
//! nothing records an overflow on the host, so the status a stream copies
//! out is all zeros.

use super::host::HostRuntime;
use super::stream_attributes::ATTR_FLOAT_OVERFLOW_CHECK;
use super::stream_worker::Task;
use crate::base::error::{Error, Result};
use crate::registry::StreamKey;
use std::ptr::NonNull;

/// `ACL_RT_OVERFLOW_MODE_SATURATION`.
pub const OVERFLOW_MODE_SATURATION: i32 = 0;
/// `ACL_RT_OVERFLOW_MODE_INFNAN`: CANN's default.
pub const OVERFLOW_MODE_INFNAN: i32 = 1;
/// The size of the overflow status `aclrtGetOverflowStatus` copies out: the
/// only size CANN accepts.
pub const OVERFLOW_STATUS_SIZE: usize = 64;

impl HostRuntime {
    /// `aclrtSetDeviceSatMode`: the process's mode, saturation or Inf/NaN
    /// (`ACL_RT_OVERFLOW_MODE_UNDEF` and anything else are refused).
    pub fn set_sat_mode(&self, mode: i32) -> Result<()> {
        if !matches!(mode, OVERFLOW_MODE_SATURATION | OVERFLOW_MODE_INFNAN) {
            return Err(Error::InvalidParam {
                param: "mode",
                reason: "It must be ACL_RT_OVERFLOW_MODE_SATURATION (0) or ACL_RT_OVERFLOW_MODE_INFNAN (1)",
            });
        }
        *self.sat_mode.lock() = mode;
        Ok(())
    }

    /// `aclrtGetDeviceSatMode`: the mode last set, else Inf/NaN.
    pub fn sat_mode(&self) -> i32 {
        *self.sat_mode.lock()
    }

    /// `aclrtSetStreamOverflowSwitch`: `ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK`
    /// of `stream` (None: the default stream), 0 or 1.
    pub fn set_stream_overflow_switch(&self, stream: Option<StreamKey>, flag: u32) -> Result<()> {
        if flag > 1 {
            return Err(Error::InvalidParam {
                param: "flag",
                reason: "The overflow switch must be 0 (off) or 1 (on)",
            });
        }
        self.set_stream_attribute(stream, ATTR_FLOAT_OVERFLOW_CHECK, u64::from(flag))
    }

    /// `aclrtGetStreamOverflowSwitch`: the switch of `stream` (0 until set).
    pub fn stream_overflow_switch(&self, stream: Option<StreamKey>) -> Result<u32> {
        let value = self.stream_attribute(stream, ATTR_FLOAT_OVERFLOW_CHECK)?;
        Ok(u32::from(value != 0))
    }

    /// `aclrtGetOverflowStatus`: queues on `stream` the copy of the overflow
    /// status into the `size` bytes (exactly 64) of device memory at `out`:
    /// zeros, as nothing overflows on the host.
    pub fn overflow_status(
        &self,
        out: NonNull<u8>,
        size: usize,
        stream: Option<StreamKey>,
    ) -> Result<()> {
        if size != OVERFLOW_STATUS_SIZE {
            return Err(Error::InvalidParam {
                param: "outputSize",
                reason: "The overflow status is 64 bytes: outputSize must be 64",
            });
        }
        self.check_device_range(out.as_ptr(), size, "outputAddr", true)?;
        let (_, stream) = self.resolve_stream(stream)?;
        stream.enqueue(Task::Set {
            dst: out.as_ptr(),
            value: 0,
            count: size,
        })
    }

    /// `aclrtResetOverflowStatus`: clears the status on `stream`; there is
    /// none to clear on the host, so only the stream is checked.
    pub fn reset_overflow_status(&self, stream: Option<StreamKey>) -> Result<()> {
        self.resolve_stream(stream).map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::tests::runtime;

    #[test]
    fn the_mode_and_the_switch_read_back_and_are_checked() {
        let rt = runtime(1, 1 << 20);
        assert_eq!(rt.sat_mode(), OVERFLOW_MODE_INFNAN);
        rt.set_sat_mode(OVERFLOW_MODE_SATURATION).unwrap();
        assert_eq!(rt.sat_mode(), OVERFLOW_MODE_SATURATION);
        assert!(rt.set_sat_mode(2).is_err());
        assert!(rt.set_sat_mode(-1).is_err());
        assert_eq!(rt.sat_mode(), OVERFLOW_MODE_SATURATION);

        rt.set_device(0).unwrap();
        let s = rt.create_stream(0, 0).unwrap();
        assert_eq!(rt.stream_overflow_switch(Some(s)), Ok(0));
        rt.set_stream_overflow_switch(Some(s), 1).unwrap();
        assert_eq!(rt.stream_overflow_switch(Some(s)), Ok(1));
        assert_eq!(
            rt.stream_attribute(Some(s), ATTR_FLOAT_OVERFLOW_CHECK),
            Ok(1)
        );
        assert!(rt.set_stream_overflow_switch(Some(s), 2).is_err());
        assert_eq!(rt.stream_overflow_switch(Some(s)), Ok(1));
        rt.reset_overflow_status(Some(s)).unwrap();
        rt.destroy_stream(s, true).unwrap();
        assert!(rt.stream_overflow_switch(Some(s)).is_err());
        assert!(rt.reset_overflow_status(Some(s)).is_err());
    }
}
