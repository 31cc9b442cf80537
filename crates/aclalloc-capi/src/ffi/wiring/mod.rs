//! What the exports stand on: argument checks, forwarding to a real
//! runtime, the host runtime singleton and the composition root.

pub(crate) mod args;
pub mod dispatch;
pub mod event_order;
pub(crate) mod forward;
pub mod host;
pub(crate) mod ordered_tracking;
pub mod process;
pub(crate) mod region;
