//! A device's resource limits (`aclrtSetDeviceResLimit`,
//! `aclrtGetDeviceResLimit`, `aclrtResetDeviceResLimit`) and its status
//! (`aclrtQueryDeviceStatus`). The host's kernels run on host threads, so a
//! limit is kept and read back, as CANN does, and changes no launch.

use super::host::HostRuntime;
use crate::base::error::{Error, Result};

/// `ACL_RT_DEV_RES_CUBE_CORE`.
pub const RES_CUBE_CORE: i32 = 0;
/// `ACL_RT_DEV_RES_VECTOR_CORE`.
pub const RES_VECTOR_CORE: i32 = 1;

fn check_type(kind: i32) -> Result<()> {
    if matches!(kind, RES_CUBE_CORE | RES_VECTOR_CORE) {
        Ok(())
    } else {
        Err(Error::InvalidParam {
            param: "type",
            reason: "It is not an aclrtDevResLimitType value (ACL_RT_DEV_RES_CUBE_CORE or ACL_RT_DEV_RES_VECTOR_CORE)",
        })
    }
}

/// The cores of either kind a host device has: the host's available
/// parallelism, as `aclrtGetDeviceInfo` reports them.
pub fn host_cores() -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    u32::try_from(cores).unwrap_or(u32::MAX)
}

impl HostRuntime {
    /// `aclrtGetDeviceResLimit`: the limit set on `device` for `kind`, else
    /// all its cores.
    pub fn device_res_limit(&self, device: i32, kind: i32) -> Result<u32> {
        check_type(kind)?;
        let id = self.device(device)?.id();
        Ok(self
            .res_limits
            .lock()
            .iter()
            .find(|&&(d, k, _)| d == id && k == kind)
            .map_or_else(host_cores, |&(_, _, v)| v))
    }

    /// `aclrtSetDeviceResLimit`: `value` cores of `kind` on `device` (not 0).
    pub fn set_device_res_limit(&self, device: i32, kind: i32, value: u32) -> Result<()> {
        check_type(kind)?;
        let id = self.device(device)?.id();
        if value == 0 {
            return Err(Error::InvalidParam {
                param: "value",
                reason: "A resource limit must be at least 1 core",
            });
        }
        let mut limits = self.res_limits.lock();
        limits.retain(|&(d, k, _)| (d, k) != (id, kind));
        limits.push((id, kind, value));
        Ok(())
    }

    /// `aclrtResetDeviceResLimit`: `device`'s limits back to all its cores.
    pub fn reset_device_res_limit(&self, device: i32) -> Result<()> {
        let id = self.device(device)?.id();
        self.res_limits.lock().retain(|&(d, _, _)| d != id);
        Ok(())
    }

    /// `aclrtQueryDeviceStatus`: a host device is always normal; a device
    /// id out of range is refused.
    pub fn device_status_normal(&self, device: i32) -> Result<bool> {
        self.device(device)?;
        Ok(true)
    }

    /// `aclrtGetDeviceUtilizationRate`'s memory figure: the percentage of
    /// `device`'s capacity allocated.
    pub fn device_memory_utilization(&self, device: i32) -> Result<i32> {
        let memory = self.device(device)?.memory();
        let capacity = memory.capacity().max(1) as u128;
        Ok((memory.used() as u128 * 100 / capacity) as i32)
    }
}
