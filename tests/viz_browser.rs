//! The page `aclalloc viz` writes, opened in headless Chromium: it renders
//! with no script error, its screenshot is not blank, and the peak it drew
//! is the peak computed here from the recorded events. Skipped (with a
//! message) when Chromium is not installed, except under CI (`CI` set),
//! where that is a failure: `.ci/run` installs it.
//!
//! `ACLALLOC_VIZ_KEEP=DIR` keeps each test's page and screenshot as
//! DIR/NAME.html and DIR/NAME.png (docs/memory-timeline.png is the
//! session's page, captured with `chromium --headless --screenshot
//! --window-size=1280,860`; docs/aclalloc-run-timeline.png is the demo's
//! `aclalloc run` page, see `the_demo_run_renders_its_timeline_with_its_peak`).

mod common;
mod history_support;

use aclalloc::pool::{HostMemory, Limit, Pool, PoolConfig};
use history_support::{inference_session, peak_from_trace, Rng};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn chromium() -> Option<PathBuf> {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if let Ok(out) = Command::new("sh")
            .args(["-c", &format!("command -v {name}")])
            .output()
        {
            let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if out.status.success() && !path.is_empty() {
                return Some(PathBuf::from(path));
            }
        }
    }
    if std::env::var_os("CI").is_some() {
        panic!("Chromium is not installed; .ci/run installs it (apt-get install chromium)");
    }
    eprintln!(
        "SKIPPED: Chromium is not installed (apt-get install chromium); the page was not opened"
    );
    None
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "aclalloc-viz-browser-{}-{name}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Common flags: no GPU, no sandbox (containers), a fixed window, and a
/// virtual time budget so that the page's script finishes before capture.
fn headless(chrome: &Path, dir: &Path) -> Command {
    let mut c = Command::new(chrome);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        "--window-size=1280,1400",
        "--virtual-time-budget=20000",
    ])
    .arg(format!("--user-data-dir={}", dir.join("profile").display()));
    c
}

struct Rendered {
    dom: String,
    png: Vec<u8>,
}

fn render(chrome: &Path, page: &str, name: &str) -> Rendered {
    let dir = scratch(name);
    let html = dir.join("page.html");
    std::fs::write(&html, page).unwrap();
    let url = format!("file://{}", html.display());
    let dump = headless(chrome, &dir)
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        dump.status.success(),
        "{}",
        String::from_utf8_lossy(&dump.stderr)
    );
    let png_path = dir.join("shot.png");
    let shot = headless(chrome, &dir)
        .arg(format!("--screenshot={}", png_path.display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        shot.status.success(),
        "{}",
        String::from_utf8_lossy(&shot.stderr)
    );
    let png = std::fs::read(&png_path).unwrap();
    if let Some(keep) = std::env::var_os("ACLALLOC_VIZ_KEEP") {
        let keep = PathBuf::from(keep);
        std::fs::create_dir_all(&keep).unwrap();
        std::fs::write(keep.join(format!("{name}.png")), &png).unwrap();
        std::fs::write(keep.join(format!("{name}.html")), page).unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
    Rendered {
        dom: String::from_utf8(dump.stdout).unwrap(),
        png,
    }
}

/// The value of `name="..."` on the element with `id`.
fn attribute(dom: &str, id: &str, name: &str) -> Option<String> {
    let at = dom.find(&format!("id=\"{id}\""))?;
    let start = dom[..at].rfind('<')?;
    let end = at + dom[at..].find('>')?;
    let tag = &dom[start..end];
    let key = format!("{name}=\"");
    let v = tag.find(&key)? + key.len();
    Some(tag[v..v + tag[v..].find('"')?].to_string())
}

/// Checks a rendered page: it ran to the end without an error, and drew
/// the expected peak.
fn check(r: &Rendered, peak: u64) {
    assert!(
        !r.dom.contains("id=\"js-error\""),
        "the page reported a script error: {}",
        &r.dom[r.dom.find("id=\"js-error\"").unwrap()..][..400.min(r.dom.len())]
    );
    assert!(
        r.dom.contains("data-rendered=\"1\""),
        "the page's script did not finish"
    );
    assert_eq!(
        attribute(&r.dom, "timeline", "data-peak-bytes").as_deref(),
        Some(peak.to_string().as_str()),
        "the drawn peak"
    );
    // A PNG, and not one colour: count distinct bytes of the compressed
    // image data (a blank page compresses to a few repeated bytes).
    assert_eq!(&r.png[..8], b"\x89PNG\r\n\x1a\n");
    assert!(
        r.png.len() > 20_000,
        "the screenshot is {} bytes: blank?",
        r.png.len()
    );
    let mut seen = [false; 256];
    r.png.iter().for_each(|&b| seen[b as usize] = true);
    assert!(seen.iter().filter(|&&s| s).count() > 200);
}

fn recorded_pool() -> Pool {
    let config = PoolConfig {
        limit: Limit::Bytes(6 << 30),
        ..PoolConfig::default()
    };
    let pool = Pool::new(config, HostMemory::new(16 << 30)).unwrap();
    pool.record_history(1 << 20).unwrap();
    pool
}

#[test]
fn a_recorded_session_renders_with_its_peak() {
    let Some(chrome) = chromium() else { return };
    let pool = recorded_pool();
    inference_session(&pool, 30);
    let json: Value = serde_json::from_str(&pool.snapshot_json()).unwrap();
    let peak = peak_from_trace(&json);
    assert_eq!(peak, pool.max_memory_allocated() as u64);
    let page = aclalloc_viz::page(&json, "pool session").unwrap();
    let r = render(&chrome, &page, "session");
    check(&r, peak);
    assert!(r.dom.contains("Segments at the end of the trace"));
}

#[test]
fn a_hundred_thousand_events_render() {
    let Some(chrome) = chromium() else { return };
    let pool = recorded_pool();
    let mut rng = Rng(7);
    let mut live = Vec::new();
    let streams = [0x7f00_0000_1000usize, 0x7f00_0000_2000];
    // An allocation records one event (and sometimes a segment's), a free two.
    let mut events = 0;
    while events < 100_000 {
        if live.len() < 3000 && (rng.below(3) != 0 || live.is_empty()) {
            let size =
                [700, 5000, 200 << 10, 3 << 20][rng.below(4) as usize] + rng.below(4096) as usize;
            live.push(
                pool.malloc_on(streams[rng.below(2) as usize], size)
                    .unwrap()
                    .get(),
            );
            events += 1;
        } else {
            let a = live.swap_remove(rng.below(live.len() as u64) as usize);
            pool.free(a).unwrap();
            events += 2;
        }
    }
    assert!(pool.history().events.len() >= 100_000);
    let json: Value = serde_json::from_str(&pool.snapshot_json()).unwrap();
    let peak = peak_from_trace(&json);
    let r = render(&chrome, &aclalloc_viz::page(&json, "100k").unwrap(), "100k");
    check(&r, peak);
    let events: usize = attribute(&r.dom, "timeline", "data-events")
        .unwrap()
        .parse()
        .unwrap();
    assert!(events >= 65_000, "{events} events drawn"); // free_requested is not drawn
}

#[test]
fn a_pytorch_shaped_snapshot_with_integers_renders() {
    let Some(chrome) = chromium() else { return };
    // Integer addresses and streams, no block_size, no version: torch's own.
    let mut trace = Vec::new();
    let base = 139_800_000_000_000u64;
    trace.push(serde_json::json!({"action": "segment_alloc", "addr": base, "size": 20 << 20, "stream": 0, "time_us": 1_000}));
    let mut now = 0u64;
    let mut peak = 0u64;
    for i in 0..40u64 {
        let size = (i % 7 + 1) << 20;
        let addr = base + (i % 10) * (2 << 20);
        trace.push(serde_json::json!({"action": "alloc", "addr": addr, "size": size, "stream": 0, "time_us": 1_000 + i * 10}));
        now += size;
        peak = peak.max(now);
        trace.push(serde_json::json!({"action": "free_requested", "addr": addr, "size": size, "stream": 0, "time_us": 1_005 + i * 10}));
        trace.push(serde_json::json!({"action": "free_completed", "addr": addr, "size": size, "stream": 0, "time_us": 1_005 + i * 10}));
        now -= size;
    }
    let snapshot = serde_json::json!({
        "segments": [{"device": 0, "address": base, "total_size": 20 << 20, "stream": 0,
            "segment_type": "large", "allocated_size": 0, "active_size": 0, "requested_size": 0,
            "blocks": [{"size": 20 << 20, "requested_size": 0, "state": "inactive"}]}],
        "device_traces": [trace],
    });
    let r = render(
        &chrome,
        &aclalloc_viz::page(&snapshot, "torch").unwrap(),
        "torch",
    );
    check(&r, peak);
}

#[test]
fn an_aclalloc_run_snapshot_renders_its_live_blocks_and_faults() {
    let Some(chrome) = chromium() else { return };
    // The shape 'aclalloc run --json' writes (crates/aclalloc-tracking/src/snapshot.rs): no
    // history, every live block its own "user" segment, faults as events.
    let block = |address: &str, size: u64, stream: &str| {
        serde_json::json!({"address": address, "total_size": size, "stream": stream,
            "segment_type": "user", "allocator": "0x5a5a0010", "allocated_size": size,
            "active_size": size, "requested_size": size,
            "blocks": [{"address": address, "size": size, "requested_size": size,
                "state": "active_allocated", "block": address, "time_ns": 12}]})
    };
    let snapshot = serde_json::json!({
        "version": 2, "pid": 4242,
        "segments": [block("0x7f0000100000", 3000, "0x5581aa000010"), block("0x7f0000200000", 1 << 20, "0x5581aa000020")],
        "allocators": [],
        "events": [
            {"kind": "double-free", "time_ns": 5, "count": 1, "stream": "0x5581aa000010",
             "allocator": "0x5a5a0010", "block": "0x7f0000300000", "size": 4096, "first_freed_on": "0x5581aa000010"},
            {"kind": "leak", "time_ns": 9, "count": 1, "stream": "0x5581aa000020", "allocator": "0x5a5a0010",
             "block": "0x7f0000200000", "address": "0x7f0000200000", "size": 1048576, "age_ns": 100, "seen_at": "exit"}
        ],
        "events_dropped": 0
    });
    let r = render(
        &chrome,
        &aclalloc_viz::page(&snapshot, "run").unwrap(),
        "run",
    );
    check(&r, 3000 + (1 << 20));
    for needle in [
        "double-free",
        "first_freed_on=0x5581aa000010",
        "seen_at=exit",
        "No history was recorded",
    ] {
        assert!(r.dom.contains(needle), "the page lacks {needle}");
    }
}

/// The reserved line, its legend and the peak reserved are shown when the
/// session has segments and hidden when it has none (tracking alone, every
/// block freed by the end): there is no reserved memory to speak of.
fn assert_reserved_shown(r: &Rendered, shown: bool) {
    assert_eq!(
        attribute(&r.dom, "timeline", "data-reserved-line").as_deref(),
        Some(if shown { "1" } else { "0" }),
        "the reserved line"
    );
    assert_eq!(
        r.dom.contains("id=\"legend-reserved\""),
        shown,
        "the reserved legend"
    );
    let summary = r.dom.split("id=\"summary\"").nth(1).expect("the summary");
    let summary = &summary[..summary.find('<').unwrap_or(summary.len())];
    assert_eq!(
        summary.contains("peak reserved"),
        shown,
        "the peak reserved in {summary}"
    );
}

#[test]
fn a_session_without_segments_shows_no_reserved_line() {
    let Some(chrome) = chromium() else { return };
    // 'aclalloc run --json' after a run that freed every block: no segment,
    // a fault as the only event.
    let snapshot = serde_json::json!({
        "version": 2, "pid": 4242, "segments": [], "allocators": [],
        "events": [
            {"kind": "double-free", "time_ns": 5, "count": 1, "stream": "0x5581aa000010",
             "allocator": "0x5a5a0010", "block": "0x7f0000300000", "size": 4096,
             "first_freed_on": "0x5581aa000010"}
        ],
        "events_dropped": 0
    });
    let r = render(
        &chrome,
        &aclalloc_viz::page(&snapshot, "empty-run").unwrap(),
        "empty-run",
    );
    assert!(!r.dom.contains("id=\"js-error\""), "a script error");
    assert!(r.dom.contains("data-rendered=\"1\""), "the script finished");
    assert_reserved_shown(&r, false);
    // The same page with one live block (its own segment) shows it.
    let mut with_block = snapshot.clone();
    with_block["segments"] = serde_json::json!([{"address": "0x7f0000100000", "total_size": 3000,
        "stream": "0x5581aa000010", "segment_type": "user", "allocator": "0x5a5a0010",
        "allocated_size": 3000, "active_size": 3000, "requested_size": 3000,
        "blocks": [{"address": "0x7f0000100000", "size": 3000, "requested_size": 3000,
            "state": "active_allocated", "block": "0x7f0000100000", "time_ns": 12}]}]);
    let r = render(
        &chrome,
        &aclalloc_viz::page(&with_block, "one-block-run").unwrap(),
        "one-block-run",
    );
    assert_reserved_shown(&r, true);
}

#[test]
fn hovering_and_clicking_the_timeline_work() {
    let Some(chrome) = chromium() else { return };
    let pool = recorded_pool();
    inference_session(&pool, 12);
    let json: Value = serde_json::from_str(&pool.snapshot_json()).unwrap();
    let page = aclalloc_viz::page(&json, "interaction").unwrap();
    // A mouse over the lowest band (the first weights) at mid-width, then a click.
    let driver = r#"<script>
(function () {
  var o = document.getElementById("timeline-overlay"), r = o.getBoundingClientRect();
  var at = { clientX: r.left + r.width / 2, clientY: r.bottom - 32, bubbles: true };
  o.dispatchEvent(new MouseEvent("mousemove", at));
  o.dispatchEvent(new MouseEvent("click", at));
  document.body.setAttribute("data-driven", "1");
})();
</script>
</body>"#;
    let page = page.replacen("</body>", driver, 1);
    let r = render(&chrome, &page, "interaction");
    check(&r, peak_from_trace(&json));
    assert!(r.dom.contains("data-driven=\"1\""));
    let tooltip = &r.dom[r.dom.find("id=\"tooltip\"").unwrap()..];
    let tooltip = &tooltip[..tooltip.find("</div>").unwrap()];
    assert!(
        !tooltip.contains("hidden")
            && tooltip.contains("allocation 0x")
            && tooltip.contains("stream 0x55812a401000"),
        "{tooltip}"
    );
    assert!(
        r.dom.contains("Segments after event "),
        "the click chose a point"
    );
    assert!(r.dom.contains("Largest live allocations after event "));
}

/// The demo of `scripts/demo-run.sh`: the stand-in vendor runtime
/// (tests/vendor) and the application linked against it, built here.
fn demo_application() -> PathBuf {
    common::vendor::app_on_the_vendor_runtime(&common::scratch("viz_browser_demo"))
}

#[test]
fn the_demo_run_renders_its_timeline_with_its_peak() {
    let Some(chrome) = chromium() else { return };
    let app = demo_application();
    let dir = scratch("demo-run");
    let (json_file, page_file) = (dir.join("run.json"), dir.join("run.html"));
    // As scripts/demo-run.sh runs it: a block reused across streams before
    // a synchronize; --html records the history by itself.
    let out = Command::new(env!("CARGO_BIN_EXE_aclalloc"))
        .arg("run")
        .arg("--json")
        .arg(&json_file)
        .arg("--html")
        .arg(&page_file)
        .arg("--")
        .arg(&app)
        .arg("cross-stream")
        .output()
        .unwrap();
    assert!(out.status.success());
    let report = String::from_utf8_lossy(&out.stderr).into_owned();
    // The report's peak of allocated bytes ("allocated bytes  current peak ...").
    let report_peak: u64 = report
        .lines()
        .find(|l| l.contains("allocated bytes"))
        .and_then(|l| l.split_whitespace().nth(4))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no peak in the report: {report}"));
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&json_file).unwrap()).unwrap();
    assert!(json["history"]["entries"].as_u64().unwrap() > 100, "{json}");
    assert_eq!(peak_from_trace(&json), report_peak);
    let page = std::fs::read_to_string(&page_file).unwrap();
    assert!(!page.contains("<script src") && !page.contains("http"));
    let r = render(&chrome, &page, "aclalloc-run");
    check(&r, report_peak);
    assert!(r.dom.contains("cross-stream-reuse-before-synchronize"));
    // The warning element, not the script that could write it.
    assert!(!r.dom.contains(">No history was recorded"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_stream_ordered_run_renders_its_pool_and_fault() {
    let Some(chrome) = chromium() else { return };
    let dir = scratch("ordered-run");
    let app = dir.join("ordered_app");
    common::vendor::build_ordered_app(&app, &common::lib_dir(), "-laclalloc");
    let page_file = dir.join("run.html");
    let out = Command::new(env!("CARGO_BIN_EXE_aclalloc"))
        .args(["run", "--html"])
        .arg(&page_file)
        .arg("--")
        .arg(&app)
        .arg("use-after-free")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = render(
        &chrome,
        &std::fs::read_to_string(&page_file).unwrap(),
        "ordered-run",
    );
    // Peak allocated: blocks of 4000 and 3000 bytes live together.
    check(&r, 7000);
    assert!(r.dom.contains("use-after-free-async"));
    let table = &r.dom[r.dom.find("id=\"ordered-pools\"").expect("the pools table")..];
    let table = &table[..table.find("</table>").unwrap()];
    assert!(table.contains("6.84 KiB (7,000 B)"), "{table}");
    assert!(!table.contains("none ("), "{table}");
    let _ = std::fs::remove_dir_all(&dir);
}
