//! The recorder: a switch and a ring of events behind a lock of its own.
//!
//! Off, recording costs one relaxed atomic load. On, an event takes the
//! ring's lock and reads the clock under it (so times never go backwards);
//! nothing is allocated per event. Callers record under the lock that orders
//! what they record, so the ring's order is the order blocks changed hands.

use super::clock::now_us;
use super::event::{Action, Event};
use super::ring::Ring;
use super::stacks::{self, StackId, NO_STACK};
use crate::base::sync::{AtomicBool, AtomicUsize, Ordering};
use parking_lot::Mutex;
use std::collections::TryReserveError;

/// A switchable, bounded history of events for one device.
pub struct Recorder {
    on: AtomicBool,
    device: i32,
    /// [`StackContext`] as a number, and the frames each stack keeps.
    context: AtomicUsize,
    depth: AtomicUsize,
    ring: Mutex<Ring<Event>>,
}

/// A copy of what a recorder holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    /// The device the recorder was made for (each event names its own).
    pub device: i32,
    /// The events, oldest first.
    pub events: Vec<Event>,
    /// The most events kept (0: recording is off).
    pub max_entries: usize,
    /// Events overwritten because the ring was full.
    pub dropped: u64,
    /// Which events carry their stack.
    pub context: StackContext,
}

/// Which events carry a call stack, with the meanings of PyTorch's
/// `_record_memory_history(context=...)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum StackContext {
    /// None.
    #[default]
    Off,
    /// Only live blocks (in snapshots), not trace events.
    State,
    /// Live blocks and allocations.
    Alloc,
    /// Live blocks, allocations and frees.
    All,
}

impl StackContext {
    fn from_usize(n: usize) -> Self {
        [Self::Off, Self::State, Self::Alloc, Self::All][n.min(3)]
    }

    /// Whether a trace event of `action` shows its stack.
    pub fn traces(self, action: Action) -> bool {
        match action {
            Action::Alloc => self >= Self::Alloc,
            Action::FreeRequested | Action::FreeCompleted => self == Self::All,
            _ => false,
        }
    }

    /// PyTorch's name (`None` for off).
    pub fn parse(name: Option<&str>) -> Option<Self> {
        Some(match name {
            None => Self::Off,
            Some("state") => Self::State,
            Some("alloc") => Self::Alloc,
            Some("all") => Self::All,
            Some(_) => return None,
        })
    }
}

impl Recorder {
    /// A recorder for `device`, off.
    pub fn new(device: i32) -> Self {
        Recorder {
            on: AtomicBool::new(false),
            device,
            context: AtomicUsize::new(0),
            depth: AtomicUsize::new(0),
            ring: Mutex::new(Ring::with_capacity(0).expect("an empty ring takes no memory")),
        }
    }

    /// Keeps the last `max_entries` events from now on, discarding the earlier
    /// ones; 0: off. On failure to reserve the memory nothing changes.
    pub fn set_max_entries(&self, max_entries: usize) -> Result<(), TryReserveError> {
        let fresh = Ring::with_capacity(max_entries)?;
        if max_entries == 0 {
            self.on.store(false, Ordering::Relaxed);
        }
        let old = std::mem::replace(&mut *self.ring.lock(), fresh);
        if max_entries > 0 {
            self.on.store(true, Ordering::Relaxed);
        }
        drop(old); // freed outside the lock
        Ok(())
    }

    /// Events from now on carry a stack of up to `depth` frames (0: none)
    /// as `context` says.
    pub fn set_stacks(&self, context: StackContext, depth: usize) {
        let depth = if context == StackContext::Off {
            0
        } else {
            depth
        };
        self.depth.store(depth, Ordering::Relaxed);
        self.context.store(context as usize, Ordering::Relaxed);
    }

    fn context(&self) -> StackContext {
        StackContext::from_usize(self.context.load(Ordering::Relaxed))
    }

    /// The caller's stack if events of `action` keep one.
    #[inline]
    fn stack_for(&self, action: Action) -> StackId {
        match self.context() {
            StackContext::Off => NO_STACK,
            c if action == Action::Alloc || c.traces(action) => {
                stacks::capture_depth(self.depth.load(Ordering::Relaxed))
            }
            _ => NO_STACK,
        }
    }

    /// True while recording.
    #[inline]
    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Records an event when recording is on.
    #[inline]
    pub fn record(
        &self,
        action: Action,
        addr: usize,
        size: usize,
        block_size: usize,
        stream: usize,
    ) {
        self.record_on(self.device, action, addr, size, block_size, stream);
    }

    /// Records a free that completes at once: `free_requested` then
    /// `free_completed`, under one lock and one reading of the clock.
    #[inline]
    pub fn record_free(&self, addr: usize, size: usize, block_size: usize, stream: usize) {
        self.record_free_on(self.device, addr, size, block_size, stream);
    }

    /// [`Recorder::record`] for an event of `device`, for a recorder that
    /// serves several devices (the tracking layer's).
    #[inline]
    pub fn record_on(
        &self,
        device: i32,
        action: Action,
        addr: usize,
        size: usize,
        block_size: usize,
        stream: usize,
    ) {
        if self.is_on() {
            let stack = self.stack_for(action);
            self.push_all(device, &[action], addr, size, block_size, stream, stack);
        }
    }

    /// [`Recorder::record_on`] of an allocation whose stack the caller
    /// captured.
    #[inline]
    pub fn record_alloc_with_stack(
        &self,
        device: i32,
        addr: usize,
        size: usize,
        stream: usize,
        stack: StackId,
    ) {
        if self.is_on() {
            self.push_all(device, &[Action::Alloc], addr, size, size, stream, stack);
        }
    }

    /// [`Recorder::record_free`] for a block of `device`.
    #[inline]
    pub fn record_free_on(
        &self,
        device: i32,
        addr: usize,
        size: usize,
        block_size: usize,
        stream: usize,
    ) {
        if self.is_on() {
            let stack = self.stack_for(Action::FreeRequested);
            self.push_all(
                device,
                &[Action::FreeRequested, Action::FreeCompleted],
                addr,
                size,
                block_size,
                stream,
                stack,
            );
        }
    }

    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn push_all(
        &self,
        device: i32,
        actions: &[Action],
        addr: usize,
        size: usize,
        block_size: usize,
        stream: usize,
        stack: StackId,
    ) {
        let mut ring = self.ring.lock();
        if ring.capacity() == 0 {
            return; // switched off meanwhile
        }
        let time_us = now_us();
        for &action in actions {
            ring.push(Event {
                action,
                device,
                addr,
                size,
                block_size,
                stream,
                time_us,
                stack,
            });
        }
    }

    /// A copy of the events and counters.
    pub fn history(&self) -> History {
        let ring = self.ring.lock();
        History {
            device: self.device,
            events: ring.iter().copied().collect(),
            max_entries: ring.capacity(),
            dropped: ring.dropped(),
            context: self.context(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_only_while_on_and_each_switch_clears() {
        let r = Recorder::new(3);
        r.record(Action::Alloc, 0x1000, 10, 512, 7);
        assert_eq!(
            r.history(),
            History {
                device: 3,
                ..History::default()
            }
        );
        r.set_max_entries(4).unwrap();
        r.record(Action::Alloc, 0x1000, 10, 512, 7);
        r.record(Action::FreeRequested, 0x1000, 10, 512, 7);
        let h = r.history();
        assert_eq!((h.max_entries, h.events.len()), (4, 2));
        let e = h.events[0];
        let seen = (e.action, e.device, e.addr, e.size, e.block_size);
        assert_eq!(seen, (Action::Alloc, 3, 0x1000, 10, 512));
        assert!(e.time_us <= h.events[1].time_us);
        r.set_max_entries(4).unwrap();
        assert!(r.history().events.is_empty(), "re-enabling clears");
        r.record(Action::Oom, 0, 1, 0, 0);
        r.set_max_entries(0).unwrap();
        r.record(Action::Oom, 0, 1, 0, 0);
        assert!(!r.is_on());
        assert_eq!((r.history().events.len(), r.history().dropped), (0, 0));
    }

    #[test]
    fn a_full_ring_keeps_the_newest_and_counts_the_dropped() {
        let r = Recorder::new(0);
        r.set_max_entries(3).unwrap();
        for addr in 1..=10 {
            r.record(Action::Alloc, addr, addr, addr, 0);
        }
        let h = r.history();
        let addrs: Vec<usize> = h.events.iter().map(|e| e.addr).collect();
        assert_eq!(addrs, [8, 9, 10]);
        assert_eq!(h.dropped, 7);
    }

    #[test]
    fn an_impossible_size_leaves_the_recorder_as_it_was() {
        let r = Recorder::new(0);
        r.set_max_entries(2).unwrap();
        r.record(Action::Alloc, 1, 1, 512, 0);
        assert!(r.set_max_entries(usize::MAX / 2).is_err());
        assert!(r.is_on());
        assert_eq!(r.history().events.len(), 1);
    }
}
