//! The ordering of streams the tracking layer checks reuses against: the
//! one kept for every subsystem in [`crate::registry::order`].

pub(crate) use crate::registry::order::{
    device_synchronized, event_recorded, forget_up_to, generation, ordered_after, recorded_streams,
    stream_destroyed, stream_synchronized, stream_waited, synchronized_since,
};
