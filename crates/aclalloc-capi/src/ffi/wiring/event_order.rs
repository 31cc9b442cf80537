//! In front of a real runtime, events still order streams for the tracking
//! layer: a record forwarded to the real runtime takes the tracking layer's
//! token for its stream, and a forwarded wait on that event hands it back,
//! as the host runtime's events do (`crate::runtime::events`). Without
//! this, a reuse ordered by an event would be reported as a cross-stream
//! reuse before synchronize.

use crate::base::types::aclrtStream;
use crate::interpose::next::{address, Sym};
use crate::registry::observer::StreamObserver;
use crate::registry::StreamKey;
use crate::tracking::TrackingObserver;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::c_void;

/// Event handle -> (stream of its last forwarded record, the token).
static RECORDS: Mutex<Option<HashMap<usize, (StreamKey, u64)>>> = Mutex::new(None);

/// A record of `event` on `stream` succeeded.
pub(crate) fn recorded(sym: Sym, event: *mut c_void, stream: aclrtStream) {
    if address(sym).is_none() {
        return; // the host runtime told the tracking layer itself
    }
    let Some(key) = StreamKey::from_ptr(stream) else {
        return; // the real runtime's default stream has no handle here
    };
    let token = TrackingObserver.event_recorded(key);
    if token != 0 {
        RECORDS
            .lock()
            .get_or_insert_with(HashMap::new)
            .insert(event as usize, (key, token));
    }
}

/// `stream` waits on `event` (the wait succeeded).
pub(crate) fn waited(sym: Sym, stream: aclrtStream, event: *mut c_void) {
    if address(sym).is_none() {
        return;
    }
    let Some(waiter) = StreamKey::from_ptr(stream) else {
        return;
    };
    let source = RECORDS
        .lock()
        .as_ref()
        .and_then(|m| m.get(&(event as usize)).copied());
    if let Some((source, token)) = source.filter(|(s, _)| *s != waiter) {
        TrackingObserver.stream_waited(waiter, source, token);
    }
}

/// `event` was destroyed: its handle may come back for another event.
pub(crate) fn destroyed(event: *mut c_void) {
    if let Some(m) = RECORDS.lock().as_mut() {
        m.remove(&(event as usize));
    }
}
