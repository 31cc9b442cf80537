//! Bounded memory across stream churn (a stream per request must not grow
//! the tracking layer). Once the synchronization records (`syncclock`) hold
//! more than [`SYNC_RECORDS_KEPT`] streams, every allocator drops the freed
//! blocks a synchronization already vouches for, and the records up to that
//! point, with nothing left to vouch for, are forgotten.

use super::owner::REPORT_PATIENCE;
use super::syncclock;
use super::tracker::tracker;

/// Streams whose last synchronization is remembered before the old ones are forgotten.
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
    super::ordered::forget_ordered_uses();
    syncclock::forget_up_to(upto);
}
