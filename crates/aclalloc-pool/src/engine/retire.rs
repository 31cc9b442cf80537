//! A destroyed stream's share of a shard: its wholly free segments go back
//! to the device, the rest are retired (no stream takes blocks from them)
//! until they are wholly free.

use super::*;

/// The stream tag of segments whose stream was destroyed.
pub(crate) const RETIRED: usize = usize::MAX;

impl Core {
    /// Forgets destroyed `stream`: releases its and earlier retired wholly free
    /// segments, retires the rest, drops its bins. Returns the bytes released.
    pub(crate) fn retire_stream(&mut self, dev: &dyn DeviceMemory, stream: usize) -> usize {
        self.flush_bins();
        self.bins.forget_stream(stream);
        let mine: Vec<u32> = self
            .by_addr
            .values()
            .filter(|&seg| matches!(self.segments[seg].stream, s if s == stream || s == RETIRED))
            .collect();
        let mut released = 0;
        for seg in mine {
            let s = self.segments[seg];
            let first = &self.blocks[s.first];
            // An expandable segment is a reservation whose free pages are
            // unmapped by empty_cache/trim, not released here: it is retired.
            if !s.expandable && first.state == State::Free && first.next == NIL {
                self.release_segment(dev, seg);
                released += s.size;
            } else if s.stream != RETIRED {
                self.retag_segment(seg);
            }
        }
        for set in &mut self.free {
            set.retain(|(_, t)| t.len() > 0);
        }
        released
    }

    /// Moves every block of segment `seg` to [`RETIRED`] (handed-out ones are
    /// binned under it when freed).
    fn retag_segment(&mut self, seg: u32) {
        self.segments[seg].stream = RETIRED;
        let mut idx = self.segments[seg].first;
        while idx != NIL {
            let b = self.blocks[idx];
            if b.state == State::Free {
                self.unlink_free(idx);
                self.blocks[idx].stream = RETIRED;
                self.insert_free(idx);
            } else {
                self.blocks[idx].stream = RETIRED;
            }
            idx = b.next;
        }
    }
}
