//! The host runtime's state: configuration, devices, contexts, streams, and
//! `aclInit` / `aclFinalize`.

use super::config::Config;
use super::context::Context;
use super::device::Device;
use super::stream_worker::Stream;
use super::workspace::{direct_device_memory, WorkspaceAllocator};
use crate::base::error::{Error, Result};
use crate::base::handles::HandleTable;
use crate::base::ids::{
    ConditionHandle, ContextHandle, EventHandle, LabelHandle, LabelListHandle, ModelHandle,
    StreamHandle, TaskGroupHandle,
};
use crate::base::sync::statics::AtomicUsize;
use crate::base::sync::Ordering;
use crate::registry::api::AllocatorApi;
use crate::registry::observer::{NoObserver, StreamObserver};
use parking_lot::Mutex;
use std::ffi::CStr;
use std::sync::Arc;

/// The tag of stream handles.
pub const STREAM_TAG: u16 = crate::base::handles::tags::STREAM;
/// The tag of context handles.
pub const CONTEXT_TAG: u16 = crate::base::handles::tags::CONTEXT;

/// A live stream and the context it was created in.
#[derive(Clone)]
pub(crate) struct StreamEntry {
    pub(crate) stream: Arc<Stream>,
    pub(crate) context: usize,
    /// As created (`aclrtCreateStreamWithConfig`), for the queries.
    pub(crate) priority: u32,
    pub(crate) flags: u32,
}

/// An ACL runtime on the host: devices are host memory and a stream's work runs on a host thread.
pub struct HostRuntime {
    instance: usize,
    config: Result<Config>,
    devices: Vec<Device>,
    /// `aclrtMallocHost` memory: kept apart from every device's, so a freed
    /// host pointer stays recognisable as such.
    pub(crate) host_memory: Arc<super::memory::DeviceHeap>,
    /// `host_memory` and every device's memory, for checks made where the
    /// runtime is not at hand (a model's replay on a stream worker).
    pub(crate) heaps: Arc<[Arc<super::memory::DeviceHeap>]>,
    /// Statistics of the `aclrtMallocHost` memory.
    pub(crate) host_stats: super::host_memory::HostStats,
    initialized: Mutex<bool>,
    pub(crate) contexts: HandleTable<ContextHandle, Context>,
    pub(crate) streams: HandleTable<StreamHandle, StreamEntry>,
    pub(crate) events: HandleTable<EventHandle, Arc<super::events::Event>>,
    /// Model running instances (`aclmdlRI`), their task groups and conditions.
    pub(crate) models: HandleTable<ModelHandle, Arc<super::model::Model>>,
    pub(crate) task_groups: HandleTable<TaskGroupHandle, Arc<super::model::TaskGroup>>,
    pub(crate) conditions: HandleTable<ConditionHandle, Arc<super::model::Condition>>,
    /// Labels of built models (`aclrtLabel`) and their lists (`aclrtLabelList`).
    pub(crate) labels: HandleTable<LabelHandle, Arc<super::labels::Label>>,
    pub(crate) label_lists: HandleTable<LabelListHandle, super::labels::LabelList>,
    pub(crate) reports: Arc<super::callbacks::Reports>,
    /// `aclrtSetDeviceResLimit`'s limits: (device, resource type, value).
    pub(crate) res_limits: Mutex<Vec<(u32, i32, u32)>>,
    /// `aclrtSetDeviceSatMode`'s mode, process-wide as CANN keeps it
    /// (`aclrtFloatOverflowMode`; Inf/NaN until set).
    pub(crate) sat_mode: Mutex<i32>,
    /// Streams destroyed by force whose queued work may still be running.
    pub(crate) draining: Mutex<Vec<Arc<super::streams::Draining>>>,
    workspaces: &'static dyn WorkspaceAllocator,
    allocators: &'static AllocatorApi,
    observer: &'static dyn StreamObserver,
}

impl HostRuntime {
    /// A runtime with `config`'s devices whose streams consume the
    /// registrations of `allocators`; a configuration error fails device calls.
    pub fn new(config: Result<Config>, allocators: &'static AllocatorApi) -> Self {
        static INSTANCES: AtomicUsize = AtomicUsize::new(1);
        let devices = match &config {
            Ok(c) => (0..c.device_count)
                .map(|id| Device::new(id, c.device_memory))
                .collect(),
            Err(_) => Vec::new(),
        };
        let host_memory = Arc::new(super::memory::DeviceHeap::new(u32::MAX, usize::MAX >> 1));
        let heaps = std::iter::once(Arc::clone(&host_memory))
            .chain(devices.iter().map(|d: &Device| Arc::clone(d.memory())))
            .collect();
        HostRuntime {
            instance: INSTANCES.fetch_add(1, Ordering::Relaxed),
            config,
            devices,
            host_memory,
            heaps,
            host_stats: Default::default(),
            initialized: Mutex::new(false),
            contexts: HandleTable::new(),
            streams: HandleTable::new(),
            events: HandleTable::new(),
            models: HandleTable::new(),
            task_groups: HandleTable::new(),
            conditions: HandleTable::new(),
            labels: HandleTable::new(),
            label_lists: HandleTable::new(),
            reports: Arc::default(),
            res_limits: Mutex::new(Vec::new()),
            sat_mode: Mutex::new(super::overflow::OVERFLOW_MODE_INFNAN),
            draining: Mutex::new(Vec::new()),
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

    /// The allocator that serves workspaces on streams without a registration.
    pub fn workspace_allocator(&self) -> &'static dyn WorkspaceAllocator {
        self.workspaces
    }

    /// `aclInit`: a configuration file must be readable; it is not interpreted.
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
        self.synchronize_all()?;
        // Streams destroyed by force finish their queued work before
        // aclFinalize returns, and leave no thread behind.
        self.reap_drained(true);
        Ok(())
    }

    /// True between `aclInit` and `aclFinalize`.
    pub fn is_initialized(&self) -> bool {
        *self.initialized.lock()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A private runtime with `devices` devices of `memory` bytes each.
    pub(crate) fn runtime(devices: u32, memory: usize) -> HostRuntime {
        let api: &'static AllocatorApi = Box::leak(Box::new(AllocatorApi::new()));
        let config = Config {
            device_count: devices,
            device_memory: memory,
        };
        HostRuntime::new(Ok(config), api)
    }

    #[test]
    fn init_and_finalize_pair_up() {
        let rt = runtime(1, 1 << 20);
        assert_eq!(rt.finalize(), Err(Error::RepeatFinalize));
        rt.init(None).unwrap();
        assert_eq!(rt.init(None), Err(Error::RepeatInitialize));
        rt.finalize().unwrap();
        assert_eq!(rt.finalize(), Err(Error::RepeatFinalize));
        let missing = c"/nonexistent/acl.json";
        assert_eq!(rt.init(Some(missing)), Err(Error::InvalidConfigFile));
        rt.init(Some(c"")).unwrap();
        assert!(rt.is_initialized());
    }

    #[test]
    fn a_bad_configuration_fails_every_device_call_with_its_reason() {
        let api: &'static AllocatorApi = Box::leak(Box::new(AllocatorApi::new()));
        let bad: Error = crate::base::env::ConfigError::value(
            "ACLALLOC_DEVICE_COUNT",
            "two",
            crate::base::env::Accepted::Text("a whole number from 1 to 64"),
        )
        .into();
        let rt = HostRuntime::new(Err(bad), api);
        assert_eq!(rt.init(None), Err(bad));
        assert_eq!(rt.set_device(0), Err(bad));
        assert_eq!(rt.device_count(), Err(bad));
    }

    #[test]
    fn devices_are_counted_and_the_current_context_is_per_thread() {
        let rt = Arc::new(runtime(2, 1 << 20));
        assert_eq!(rt.device_count(), Ok(2));
        assert_eq!(
            rt.set_device(2),
            Err(Error::InvalidDevice {
                device: 2,
                count: 2
            })
        );
        assert_eq!(rt.current_device(), Err(Error::NoContext));
        rt.set_device(1).unwrap();
        rt.set_device(1).unwrap();
        assert_eq!(rt.current_device(), Ok(1));
        let (ctx, _) = rt.current_context().unwrap();

        let other = Arc::clone(&rt);
        std::thread::spawn(move || {
            assert_eq!(other.current_device(), Err(Error::NoContext));
            other.set_current_context(ctx).unwrap();
            assert_eq!(other.current_device(), Ok(1));
        })
        .join()
        .unwrap();

        rt.reset_device(1, false).unwrap();
        assert_eq!(rt.current_device(), Ok(1), "one set is still in force");
        rt.reset_device(1, false).unwrap();
        assert_eq!(rt.current_device(), Err(Error::NoContext));
        rt.reset_device(1, false).unwrap(); // not set: nothing to do
    }

    #[test]
    fn finalize_releases_every_stream() {
        let rt = runtime(2, 1 << 20);
        rt.init(None).unwrap();
        rt.set_device(0).unwrap();
        rt.create_stream(0, 0).unwrap();
        rt.create_context(1).unwrap();
        rt.create_stream(0, 0).unwrap();
        assert_eq!(rt.live_streams(), 2);
        rt.finalize().unwrap();
        assert_eq!(rt.live_streams(), 0);
        assert_eq!(rt.current_device(), Err(Error::NoContext));
    }
}
