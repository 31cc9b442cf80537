//! The host runtime's state: configuration, devices, contexts, streams, and
//! `aclInit` / `aclFinalize`.

use super::config::Config;
use super::context::Context;
use super::device::Device;
use super::stream_worker::Stream;
use super::workspace::{direct_device_memory, WorkspaceAllocator};
use crate::core::error::{Error, Result};
use crate::core::handles::HandleTable;
use crate::core::ids::{ContextHandle, StreamHandle};
use crate::registry::api::AllocatorApi;
use crate::registry::observer::{NoObserver, StreamObserver};
use parking_lot::Mutex;
use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The tag of stream handles.
pub const STREAM_TAG: u16 = crate::core::handles::tags::STREAM;
/// The tag of context handles.
pub const CONTEXT_TAG: u16 = crate::core::handles::tags::CONTEXT;

/// A live stream and the context it was created in.
#[derive(Clone)]
pub(crate) struct StreamEntry {
    pub(crate) stream: Arc<Stream>,
    pub(crate) context: usize,
}

/// An ACL runtime on the host: devices are host memory and a stream's work
/// runs on a host thread.
pub struct HostRuntime {
    instance: usize,
    config: Result<Config>,
    devices: Vec<Device>,
    initialized: Mutex<bool>,
    pub(crate) contexts: HandleTable<ContextHandle, Context>,
    pub(crate) streams: HandleTable<StreamHandle, StreamEntry>,
    workspaces: &'static dyn WorkspaceAllocator,
    allocators: &'static AllocatorApi,
    observer: &'static dyn StreamObserver,
}

impl HostRuntime {
    /// A runtime with `config`'s devices whose streams consume the
    /// registrations of `allocators`. A configuration error is reported by
    /// every call that needs a device.
    pub fn new(config: Result<Config>, allocators: &'static AllocatorApi) -> Self {
        static INSTANCES: AtomicUsize = AtomicUsize::new(1);
        let devices = match &config {
            Ok(c) => (0..c.device_count)
                .map(|id| Device::new(id, c.device_memory))
                .collect(),
            Err(_) => Vec::new(),
        };
        HostRuntime {
            instance: INSTANCES.fetch_add(1, Ordering::Relaxed),
            config,
            devices,
            initialized: Mutex::new(false),
            contexts: HandleTable::new(),
            streams: HandleTable::new(),
            workspaces: direct_device_memory(),
            allocators,
            observer: &NoObserver,
        }
    }

    /// The same runtime with `workspaces` serving launches on streams without
    /// a registration (streams created from now on).
    pub fn with_workspace_allocator(mut self, workspaces: &'static dyn WorkspaceAllocator) -> Self {
        self.workspaces = workspaces;
        self
    }

    /// The same runtime telling `observer` about launches and stream events
    /// (the process-wide runtime: the tracking layer's).
    pub fn with_observer(mut self, observer: &'static dyn StreamObserver) -> Self {
        self.observer = observer;
        self
    }

    /// Who is told about launches and stream events.
    #[inline]
    pub(crate) fn observer(&self) -> &'static dyn StreamObserver {
        self.observer
    }

    /// Runs `f` on a live context (`ctx` as C passed it).
    pub(crate) fn with_context<R>(&self, ctx: usize, f: impl FnOnce(&Context) -> R) -> Option<R> {
        self.contexts.with(ContextHandle::from_raw(ctx)?, f)
    }

    /// Runs `f` on a live context, with the right to change it.
    pub(crate) fn with_context_mut<R>(
        &self,
        ctx: usize,
        f: impl FnOnce(&mut Context) -> R,
    ) -> Option<R> {
        self.contexts.with_mut(ContextHandle::from_raw(ctx)?, f)
    }

    /// Runs `f` on a live stream (`handle` as C passed it).
    pub(crate) fn with_stream<R>(
        &self,
        handle: usize,
        f: impl FnOnce(&StreamEntry) -> R,
    ) -> Option<R> {
        self.streams.with(StreamHandle::from_raw(handle)?, f)
    }

    /// Identifies this instance in thread-local state.
    pub(crate) fn instance(&self) -> usize {
        self.instance
    }

    /// The configuration, or why it is invalid.
    pub fn config(&self) -> Result<Config> {
        self.config
    }

    /// Every device.
    pub fn devices(&self) -> Result<&[Device]> {
        self.config?;
        Ok(&self.devices)
    }

    /// The allocator registrations launches consume.
    pub fn allocators(&self) -> &'static AllocatorApi {
        self.allocators
    }

    /// The allocator that serves workspaces on streams without a
    /// registration.
    pub fn workspace_allocator(&self) -> &'static dyn WorkspaceAllocator {
        self.workspaces
    }

    /// `aclInit`. The configuration file, if any, must be readable; its
    /// contents are not interpreted (the host runtime has nothing to tune
    /// there).
    pub fn init(&self, config_path: Option<&CStr>) -> Result<()> {
        self.config?;
        if let Some(path) = config_path.filter(|p| !p.is_empty()) {
            use std::os::unix::ffi::OsStrExt;
            let path = std::path::Path::new(std::ffi::OsStr::from_bytes(path.to_bytes()));
            let readable = std::fs::File::open(path)
                .and_then(|f| f.metadata())
                .is_ok_and(|m| m.is_file());
            if !readable {
                return Err(Error::InvalidConfigFile);
            }
        }
        let mut initialized = self.initialized.lock();
        if *initialized {
            return Err(Error::RepeatInitialize);
        }
        *initialized = true;
        Ok(())
    }

    /// `aclFinalize`: releases every context and stream (waiting for pending
    /// work), as a forced reset of every device would. Device memory stays.
    pub fn finalize(&self) -> Result<()> {
        super::waits::refuse_teardown_in_kernel()?;
        let mut initialized = self.initialized.lock();
        if !*initialized {
            return Err(Error::RepeatFinalize);
        }
        *initialized = false;
        drop(initialized);
        for device in 0..self.devices.len() {
            self.reset_device(device as i32, true)?;
        }
        Ok(())
    }

    /// True between `aclInit` and `aclFinalize`.
    pub fn is_initialized(&self) -> bool {
        *self.initialized.lock()
    }
}
