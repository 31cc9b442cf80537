//! Bounded memory across stream churn: a service that makes a stream per
//! request must not grow the tracking layer with every stream it ever made.
//!
//! Tracking objects of destroyed streams are reused (`tracker.rs`), and the
//! allocator records count destroyed streams instead of listing them. What
//! is left is the record of when each stream was last synchronized
//! (`syncclock`): it vouches for blocks freed on that stream before then.
//! Once it holds more than [`SYNC_RECORDS_KEPT`] streams, every allocator
//! drops the freed blocks that a synchronization already vouches for (they
//! can no longer cause a cross-stream fault), after which the records up to
//! that point have nothing left to vouch for and are forgotten.

use super::owner::REPORT_PATIENCE;
use super::syncclock;
use super::tracker::tracker;

/// Streams whose last synchronization is remembered before the old ones are
/// forgotten.
const SYNC_RECORDS_KEPT: usize = 4096;

/// Called after a stream is destroyed; cheap unless the records are full.
pub(crate) fn bound_sync_records() {
    if syncclock::recorded_streams() <= SYNC_RECORDS_KEPT {
        return;
    }
    // Everything synchronized up to here is vouched for by the records.
    let upto = syncclock::generation();
    for state in tracker().states() {
        match state.enter_for_report(REPORT_PATIENCE) {
            Some(mut inside) => inside.prune_freed(),
            // A thread stayed inside this allocator: try again next time.
            None => return,
        }
    }
    syncclock::forget_up_to(upto);
}
