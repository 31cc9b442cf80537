//! `memory_summary()`: the statistics as a text table, laid out like
//! PyTorch's (current, peak, total allocated, total freed per row).

use super::stats::{PoolStats, Stat, StatArray, STAT_ALL, STAT_LARGE_POOL, STAT_SMALL_POOL};
use super::Pool;
use std::fmt::Write as _;

const WIDTH: usize = 75;

impl Pool {
    /// The summary table of this pool's statistics.
    pub fn summary(&self) -> String {
        let mut text = summary(&self.stats(), self.limit());
        // An expandable pool also shows how much of its address space is
        // backed: the mapped and unmapped parts of its segments.
        let (mut count, mut mapped, mut total) = (0usize, 0usize, 0usize);
        for s in self.segments().iter().filter(|s| s.is_expandable) {
            count += 1;
            mapped += s.mapped_size;
            total += s.total_size;
        }
        if self.config().expandable_segments {
            let line = format!(
                "| Expandable segments: {count}, mapped {}, unmapped {}",
                format_size(mapped as i64).trim(),
                format_size((total - mapped) as i64).trim()
            );
            let line = format!("{line:<w$}|\n", w = WIDTH + 1);
            // Before the closing rule.
            let at = text.trim_end_matches('\n').rfind('\n').map_or(0, |i| i + 1);
            text.insert_str(at, &line);
        }
        text
    }
}

/// Bytes with a binary unit, as PyTorch's `_format_size` (the unit steps up
/// from 768 Ki of the current one: 20 MiB reads "20480 KiB").
fn format_size(bytes: i64) -> String {
    let (value, unit) = scale(
        bytes,
        1024,
        768 * 1024,
        &["B  ", "KiB", "MiB", "GiB", "TiB", "PiB"],
    );
    format!("{value:6} {unit}")
}

fn format_count(count: i64) -> String {
    let (value, unit) = scale(count, 1000, 750 * 1000, &[" ", "K", "M"]);
    format!("{value:7} {unit} ")
}

/// `value` in the largest of `units` (each `step` times the one before) it reaches `threshold` of.
fn scale(mut value: i64, step: i64, threshold: i64, units: &[&'static str]) -> (i64, &'static str) {
    let mut unit = units[0];
    for next in &units[1..] {
        if value.abs() < threshold {
            break;
        }
        value /= step;
        unit = next;
    }
    (value, unit)
}

fn rule(out: &mut String, c: char) {
    out.push('|');
    out.extend(std::iter::repeat(c).take(WIDTH));
    out.push_str("|\n");
}

type Fmt = fn(i64) -> String;

fn row(out: &mut String, name: &str, s: &Stat, fmt: Fmt) {
    let _ = writeln!(
        out,
        "| {name:<21} | {} | {} | {} | {} |",
        fmt(s.current),
        fmt(s.peak),
        fmt(s.allocated),
        fmt(s.freed)
    );
}

fn group(out: &mut String, name: &str, a: &StatArray, fmt: Fmt) {
    row(out, name, &a[STAT_ALL], fmt);
    row(out, "      from large pool", &a[STAT_LARGE_POOL], fmt);
    row(out, "      from small pool", &a[STAT_SMALL_POOL], fmt);
    rule(out, '-');
}

/// The summary table of `stats` for a pool with `limit` bytes (`usize::MAX`: none).
pub fn summary(stats: &PoolStats, limit: usize) -> String {
    let mut out = String::with_capacity(4096);
    rule(&mut out, '=');
    let _ = writeln!(out, "|{:^WIDTH$}|", "aclalloc caching pool memory summary");
    rule(&mut out, '-');
    let left = format!("OOMs: {}", stats.num_ooms);
    let right = format!("device alloc retries: {}", stats.num_alloc_retries);
    let _ = writeln!(out, "|{left:^37}|{right:^37}|");
    let limit = if limit == usize::MAX {
        "none".to_string()
    } else {
        format_size(limit as i64).trim().to_string()
    };
    let left = format!(
        "device allocs / frees: {} / {}",
        stats.num_device_alloc, stats.num_device_free
    );
    let right = format!("memory limit: {limit}");
    let _ = writeln!(out, "|{left:^37}|{right:^37}|");
    rule(&mut out, '=');
    let _ = writeln!(
        out,
        "| {:<21} | {:^10} | {:^10} | {:^10} | {:^10} |",
        "Metric", "Cur Usage", "Peak Usage", "Tot Alloc", "Tot Freed"
    );
    rule(&mut out, '-');
    let (size, count): (Fmt, Fmt) = (format_size, format_count);
    for (name, array, fmt) in [
        ("Allocated memory", &stats.allocated_bytes, size),
        ("Active memory", &stats.active_bytes, size),
        ("Requested memory", &stats.requested_bytes, size),
        ("Reserved memory", &stats.reserved_bytes, size),
        ("Non-releasable memory", &stats.inactive_split_bytes, size),
        ("Allocations", &stats.allocation, count),
        ("Active allocs", &stats.active, count),
        ("Reserved segments", &stats.segment, count),
        ("Non-releasable allocs", &stats.inactive_split, count),
    ] {
        group(&mut out, name, array, fmt);
    }
    row(
        &mut out,
        "Oversize allocations",
        &stats.oversize_allocations,
        count,
    );
    rule(&mut out, '-');
    row(
        &mut out,
        "Oversize segments",
        &stats.oversize_segments,
        count,
    );
    rule(&mut out, '=');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_line_up_and_sizes_pick_a_unit() {
        assert_eq!(format_size(512), "   512 B  ");
        assert_eq!(format_size(2 << 20), "  2048 KiB");
        assert_eq!(format_size(20 << 20), " 20480 KiB");
        assert_eq!(format_size(1 << 30), "  1024 MiB");
        assert_eq!(format_count(3), "      3   ");
        let mut s = PoolStats::default();
        s.reserved_bytes[STAT_ALL].increase(20 << 20);
        let text = summary(&s, usize::MAX);
        for line in text.lines() {
            assert_eq!(line.chars().count(), WIDTH + 2, "{line:?}");
        }
        assert!(
            text.contains("| Reserved memory       |  20480 KiB |"),
            "{text}"
        );
    }
}
