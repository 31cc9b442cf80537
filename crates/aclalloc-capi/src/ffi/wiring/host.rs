//! The process-wide host runtime ([`host`]): built on first use over the
//! registry's registrations, the default allocator and tracking, and told
//! when a real runtime arrived too late to be used.

use crate::base::descriptor::Callbacks;
use crate::base::ids::StreamKey;
use crate::registry::api::global;
use crate::registry::observer::StreamObserver;
use crate::registry::Registration;
use crate::runtime::config::Config;
use crate::runtime::HostRuntime;
use std::sync::OnceLock;

/// Once this library serves as the runtime: if a real runtime was loaded
/// since, says so once (stderr, tracking report). Called outside the
/// boundary, so it keeps any panic to itself.
pub(crate) fn note_late_runtime() {
    if crate::interpose::next::decided() {
        let _ = std::panic::catch_unwind(say_late_runtime);
    }
}

fn say_late_runtime() {
    let Some(path) = crate::interpose::next::late_runtime() else {
        return;
    };
    let path = path.to_string_lossy();
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!(
            "==aclalloc== a real ACL runtime was loaded after libaclalloc began serving as the \
             runtime: {path}; it is not used (streams and allocators of this process stay on \
             the host runtime). Load it before the first ACL call that creates runtime state \
             (aclInit, aclrtSetDevice, aclrtCreateStream, ...), or link the program with \
             -lascendcl.\n"
        )
        .as_bytes(),
    );
    crate::tracking::add_note(format!(
        "a real ACL runtime loaded late was not used (this process ran on the host runtime): \
         {path}"
    ));
}

/// The process-wide host runtime, configured from the environment on first
/// use, over [`global`]'s registrations, the default allocator and tracking.
pub fn host() -> &'static HostRuntime {
    static HOST: OnceLock<HostRuntime> = OnceLock::new();
    HOST.get_or_init(|| {
        HostRuntime::new(Config::from_env(), global())
            .with_workspace_allocator(&crate::default_allocator::workspace::DefaultWorkspaces)
            .with_observer(&StreamEvents)
    })
}

/// What hears of the host runtime's stream events: the tracking layer, and
/// every pool when a stream is destroyed (`Pool::forget_stream`). Records
/// and waits the runtime keeps in `registry::order` itself.
struct StreamEvents;

impl StreamObserver for StreamEvents {
    #[inline]
    fn callbacks_for(&self, stream: StreamKey, registration: &Registration) -> Callbacks {
        crate::tracking::TrackingObserver.callbacks_for(stream, registration)
    }
    fn stream_synchronized(&self, stream: StreamKey) {
        crate::tracking::TrackingObserver.stream_synchronized(stream);
        // Memory pools keep at most their release threshold of free memory.
        crate::stream_ordered::synchronized();
    }
    fn workspace_held(&self, block: usize, model: usize) {
        crate::tracking::TrackingObserver.workspace_held(block, model);
    }
    fn workspace_released(&self, block: usize) {
        crate::tracking::TrackingObserver.workspace_released(block);
    }
    fn stream_destroyed(&self, stream: StreamKey, old: Option<&Registration>) {
        crate::tracking::TrackingObserver.stream_destroyed(stream, old);
        crate::pool::handles::forget_stream(stream.get());
        crate::registry::order::forget_waits_of(stream.get().get());
    }
}
