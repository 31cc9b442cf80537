//! The text report: per-allocator statistics and one line per fault.
//!
//! Every line starts with `==aclalloc==` so that it stands out in a
//! program's stderr; fault lines are `key=value` pairs so that scripts can
//! pick them apart. A fault whose block's allocating stack was captured is
//! followed by its frames; leaks are also grouped by stack, the most bytes
//! first, and each leak line names its group (`stack=#N`).

use super::events::{events, Event, Fault, LeakSeen};
use super::leaks::{self, Annotated};
use super::owner::REPORT_PATIENCE;
use super::stats::Stat;
use super::tracker::tracker;
use aclalloc_core::history::stacks::Frame;
use std::fmt::Write as _;

const P: &str = "==aclalloc==";

/// Things the report must say that are not about allocators (a real
/// runtime that arrived too late to be used), one line each.
static NOTES: parking_lot::Mutex<Vec<String>> = parking_lot::Mutex::new(Vec::new());

/// Adds a `note:` line to every report from now on.
pub fn add_note(note: String) {
    NOTES.lock().push(note);
}

/// The report as text.
pub fn report_text() -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{P} allocator tracking report, process {}",
        std::process::id()
    );
    // Annotated first: reading the suppressions file may add a note.
    let (events, dropped) = events();
    let faults = leaks::annotate(&events);
    for note in NOTES.lock().iter() {
        let _ = writeln!(out, "{P} note: {note}");
    }
    let mut totals = Stat::default();
    let mut live = 0i64;
    let states = tracker().states();
    if states.is_empty() {
        let _ = writeln!(out, "{P} no allocator was used through the tracking layer");
    }
    for state in states {
        let Some(mut inside) = state.enter_for_report(REPORT_PATIENCE) else {
            let _ = writeln!(
                out,
                "{P} allocator {:#x}: busy (a thread stayed inside it), not read",
                state.allocator
            );
            continue;
        };
        let mut streams: Vec<String> = inside.streams.iter().map(|s| format!("{s:#x}")).collect();
        if inside.streams_destroyed > 0 {
            streams.push(format!("{} more destroyed", inside.streams_destroyed));
        }
        let _ = writeln!(
            out,
            "{P} allocator {:#x} on stream(s) {}",
            state.allocator,
            if streams.is_empty() {
                "(none yet)".to_string()
            } else {
                streams.join(", ")
            }
        );
        let s = inside.stats();
        write_stat_table(
            &mut out,
            &[
                ("allocations", s.allocation),
                ("allocated bytes", s.allocated_bytes),
            ],
        );
        let _ = writeln!(out, "{P}   alloc failures   {:>12}", s.num_alloc_failures);
        totals.allocated += s.allocation.allocated;
        totals.freed += s.allocation.freed;
        live += s.allocation.current;
    }
    for pool in super::ordered_pool_stats() {
        let streams: Vec<String> = pool.streams.iter().map(|s| format!("{s:#x}")).collect();
        let _ = writeln!(
            out,
            "{P} stream-ordered pool {:#x} on stream(s) {}",
            pool.pool,
            streams.join(", ")
        );
        write_stat_table(
            &mut out,
            &[
                ("allocations", pool.allocation),
                ("allocated bytes", pool.allocated_bytes),
            ],
        );
        totals.allocated += pool.allocation.allocated;
        totals.freed += pool.allocation.freed;
        live += pool.allocation.current;
    }
    let (suppressed, shown): (Vec<&Annotated>, Vec<&Annotated>) =
        faults.iter().partition(|a| a.suppressed_by.is_some());
    let count: u64 = shown.iter().map(|a| a.event.count).sum::<u64>() + dropped;
    let _ = writeln!(
        out,
        "{P} totals: allocations={} frees={} live={} faults={count}",
        totals.allocated, totals.freed, live
    );
    let groups = leaks::leak_groups(&faults);
    for a in &shown {
        let _ = write!(out, "{P} {}", fault_line(&a.event));
        let leak = matches!(a.event.fault, Fault::Leak { .. });
        match groups.iter().position(|g| leak && g.stack == a.event.stack) {
            // A leak names its group, whose stack is printed once below.
            Some(i) => {
                let _ = writeln!(out, " stack=#{}", i + 1);
            }
            _ => {
                let _ = writeln!(out);
                write_frames(&mut out, &a.frames);
            }
        }
    }
    if dropped > 0 {
        let _ = writeln!(out, "{P} ... and {dropped} more faults not kept");
    }
    if !groups.is_empty() {
        let _ = writeln!(out, "{P} leaks by allocating stack, largest first:");
    }
    for (i, group) in groups.iter().enumerate() {
        let _ = writeln!(out, "{P} stack #{}: {}", i + 1, group.title());
        write_frames(&mut out, group.frames);
    }
    if !suppressed.is_empty() {
        let leaked: usize = suppressed
            .iter()
            .map(|a| match a.event.fault {
                Fault::Leak { size, .. } => size,
                _ => 0,
            })
            .sum();
        let mut patterns: Vec<&str> = Vec::new();
        for p in suppressed.iter().filter_map(|a| a.suppressed_by.as_deref()) {
            if !patterns.contains(&p) {
                patterns.push(p);
            }
        }
        let _ = writeln!(
            out,
            "{P} suppressed: {} fault(s) ({} of leaks), by {}",
            suppressed.len(),
            leaks::human(leaked as u64),
            patterns.join(", ")
        );
    }
    out
}

/// A header and one line per statistic: current, peak, allocated, freed.
fn write_stat_table(out: &mut String, rows: &[(&str, Stat)]) {
    let _ = writeln!(
        out,
        "{P}   {:<16} {:>12} {:>12} {:>14} {:>14}",
        "", "current", "peak", "allocated", "freed"
    );
    for (name, stat) in rows {
        let _ = writeln!(
            out,
            "{P}   {name:<16} {:>12} {:>12} {:>14} {:>14}",
            stat.current, stat.peak, stat.allocated, stat.freed
        );
    }
}

/// The frames of a stack, one line each.
fn write_frames(out: &mut String, frames: &[Frame]) {
    for (i, frame) in frames.iter().enumerate() {
        let _ = writeln!(out, "{P}     #{i} {}", frame.site());
    }
}

/// One fault as `fault <kind>: key=value ...`.
pub(crate) fn fault_line(event: &Event) -> String {
    let kind = event.fault.kind();
    let body = match event.fault {
        Fault::UnknownFree {
            stream,
            allocator,
            block,
        } => format!(
            "stream={stream:#x} allocator={allocator:#x} size=unknown block={block:#x} \
             (this allocator never handed out this block)"
        ),
        Fault::DoubleFree {
            stream,
            allocator,
            block,
            size,
            first_freed_on,
        } => format!(
            "stream={stream:#x} allocator={allocator:#x} size={size} block={block:#x} \
             first-freed-on={first_freed_on:#x}"
        ),
        Fault::NullAddress {
            stream,
            allocator,
            block,
            size,
        } => format!("stream={stream:#x} allocator={allocator:#x} size={size} block={block:#x}"),
        Fault::UnknownBlock { allocator, block } => {
            format!("allocator={allocator:#x} block={block:#x} (not a live block)")
        }
        Fault::Overlap {
            stream,
            allocator,
            block,
            address,
            size,
            other_stream,
            other_block,
            other_address,
            other_size,
        } => format!(
            "stream={stream:#x} allocator={allocator:#x} size={size} block={block:#x} \
             address={address:#x} overlaps block={other_block:#x} address={other_address:#x} \
             size={other_size} stream={other_stream:#x}"
        ),
        Fault::CrossStreamReuse {
            stream,
            allocator,
            block,
            address,
            size,
            freed_on,
            freed_block,
        } => format!(
            "stream={stream:#x} allocator={allocator:#x} size={size} block={block:#x} \
             address={address:#x} freed-on={freed_on:#x} freed-block={freed_block:#x} \
             (freed-on was not synchronized in between)"
        ),
        Fault::FreedWhileGraphHolds {
            stream,
            allocator,
            block,
            address,
            size,
            model,
        } => format!(
            "stream={stream:#x} allocator={allocator:#x} size={size} block={block:#x} \
             address={address:#x} model={model:#x} (a captured model holds this workspace \
             for its replays until aclmdlRIDestroy)"
        ),
        Fault::UseAfterFreeAsync {
            stream,
            pool,
            address,
            size,
            used_address,
            freed_on,
        } => format!(
            "stream={stream:#x} pool={pool:#x} size={size} address={address:#x} \
             used-address={used_address:#x} freed-on={freed_on:#x} \
             (the block was freed with aclrtMemPoolFreeAsync before this copy or fill)"
        ),
        Fault::FreeAsyncWhileUsed {
            stream,
            pool,
            address,
            size,
            used_on,
        } => format!(
            "stream={stream:#x} pool={pool:#x} size={size} address={address:#x} \
             used-on={used_on:#x} (nothing orders used-on's work before the free: \
             record an event on used-on after the use and wait on it on stream)"
        ),
        Fault::ConcurrentUse {
            allocator,
            stream,
            other_stream,
        } => format!(
            "stream={stream:#x} allocator={allocator:#x} size=n/a other-stream={other_stream:#x}"
        ),
        Fault::Leak {
            stream,
            allocator,
            block,
            address,
            size,
            age_ns,
            seen,
        } => format!(
            "stream={stream:#x} allocator={allocator:#x} size={size} block={block:#x} \
             address={address:#x} age-ms={} seen-at={}",
            age_ns / 1_000_000,
            leak_seen(seen)
        ),
    };
    let times = if event.count > 1 {
        format!(" (x{})", event.count)
    } else {
        String::new()
    };
    format!("fault {kind}: {body}{times}")
}

fn leak_seen(seen: LeakSeen) -> &'static str {
    match seen {
        LeakSeen::Unregister => "unregister",
        LeakSeen::StreamDestroy => "stream-destroy",
        LeakSeen::Exit => "exit",
    }
}
