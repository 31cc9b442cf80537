//! Devices: `aclrtSetDevice`, `aclrtResetDevice[Force]`, `aclrtGetDevice`,
//! `aclrtGetDeviceCount`.
//!
//! As in CANN, sets are counted per process: each `aclrtSetDevice` makes the
//! device's default context current (creating it on first use), which is
//! released with its streams after as many `aclrtResetDevice` calls, or at
//! once by `aclrtResetDeviceForce` (with the device's other contexts too).
//! Device memory stays valid until `aclrtFree`.

use super::context::{self, Context};
use super::host::HostRuntime;
use super::memory::DeviceHeap;
use crate::base::error::{Error, Result};
use parking_lot::Mutex;
use std::sync::Arc;

/// One device.
pub struct Device {
    id: u32,
    memory: Arc<DeviceHeap>,
    state: Mutex<DeviceState>,
}

#[derive(Default)]
struct DeviceState {
    /// `aclrtSetDevice` calls not yet matched by `aclrtResetDevice`.
    set_count: u32,
    /// The default context's handle, while the device is set.
    default_context: Option<usize>,
}

impl Device {
    pub(crate) fn new(id: u32, capacity: usize) -> Self {
        Device {
            id,
            memory: Arc::new(DeviceHeap::new(id, capacity)),
            state: Mutex::new(DeviceState::default()),
        }
    }

    /// The device id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The device's memory.
    pub fn memory(&self) -> &Arc<DeviceHeap> {
        &self.memory
    }
}

impl HostRuntime {
    /// `aclrtGetDeviceCount`.
    pub fn device_count(&self) -> Result<u32> {
        Ok(self.devices()?.len() as u32)
    }

    /// The device with id `id`.
    pub fn device(&self, id: i32) -> Result<&Device> {
        let devices = self.devices()?;
        usize::try_from(id)
            .ok()
            .and_then(|i| devices.get(i))
            .ok_or(Error::InvalidDevice {
                device: id.into(),
                count: devices.len() as u32,
            })
    }

    /// `aclrtSetDevice`: counts the set and makes the device's default
    /// context current on this thread.
    pub fn set_device(&self, id: i32) -> Result<()> {
        let device = self.device(id)?;
        let mut state = device.state.lock();
        let ctx = match state.default_context {
            Some(ctx) => ctx,
            None => {
                let ctx = self.contexts.insert(Context::new(device.id, true))?.get();
                state.default_context = Some(ctx);
                ctx
            }
        };
        state.set_count += 1;
        drop(state);
        context::set_current(self, ctx);
        Ok(())
    }

    /// `aclrtResetDevice` (`force`: `aclrtResetDeviceForce`). Resetting a
    /// device that is not set succeeds and does nothing.
    pub fn reset_device(&self, id: i32, force: bool) -> Result<()> {
        super::waits::refuse_teardown_in_kernel()?;
        let device = self.device(id)?;
        let mut state = device.state.lock();
        if state.set_count == 0 && !force {
            return Ok(());
        }
        state.set_count = if force { 0 } else { state.set_count - 1 };
        if state.set_count > 0 {
            return Ok(());
        }
        let default = state.default_context.take();
        drop(state);
        let others = if force {
            self.contexts_of_device(device.id)
        } else {
            Vec::new()
        };
        for ctx in default.into_iter().chain(others) {
            self.release_context(ctx);
        }
        self.reap_drained(false);
        Ok(())
    }

    /// `aclrtGetDevice`: the device of this thread's current context.
    pub fn current_device(&self) -> Result<u32> {
        Ok(self.current_context()?.1)
    }
}
