//! Allocation stacks end to end: a C program (tests/stacks_support/leaks.c,
//! built with -g) leaks from two call sites; under `aclalloc run --stacks`
//! the report names both with file and line, grouped, the larger first; a
//! suppressions file silences one and `--error-exitcode` follows; the
//! snapshot's blocks carry PyTorch's `frames`, which `_memory_viz.py`'s
//! memory flame graph reads; the page shows a clicked block's stack; a
//! Python program's allocation names its Python line.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use common::vendor::{text, under_aclalloc};
use serde_json::Value;

fn source() -> PathBuf {
    common::root().join("tests/stacks_support/leaks.c")
}

/// The program, built once.
fn program() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = common::scratch("stacks");
        let binary = dir.join("leaks");
        common::compile("cc", "c11", &[&source()], &binary, &[]);
        binary
    })
}

/// `leaks.c:N`, N the line marked `site: NAME`.
fn site(name: &str) -> String {
    let text = std::fs::read_to_string(source()).unwrap();
    let marker = format!("site: {name} ");
    let line = text.lines().position(|l| l.contains(&marker)).unwrap() + 1;
    format!("leaks.c:{line}")
}

fn run(options: &[&str]) -> Output {
    let out = under_aclalloc(options, &[program()]);
    assert_eq!(text(&out.stdout), "done\n", "{}", text(&out.stderr));
    out
}

#[test]
fn leaks_are_grouped_by_their_allocating_stack_the_largest_first() {
    let out = run(&["--stacks"]);
    let report = text(&out.stderr);
    let weights = format!(
        "stack #1: 3 leaks, 12 KiB, from load_weights at {}",
        site("load_weights")
    );
    let cache = format!(
        "stack #2: 1 leak, 512 B, from make_cache at {}",
        site("make_cache")
    );
    assert!(report.contains(&weights), "{report}");
    assert!(report.contains(&cache), "{report}");
    let frame = format!("#0 load_weights at {}", site("load_weights"));
    assert!(report.contains(&frame), "{report}");
    assert!(
        report.contains("totals: allocations=4 frees=0 live=4 faults=4"),
        "{report}"
    );
    let leak_lines = report.lines().filter(|l| l.contains("fault leak:"));
    assert_eq!(
        leak_lines.filter(|l| l.ends_with(" stack=#1")).count(),
        3,
        "{report}"
    );
}

#[test]
fn without_stacks_the_report_has_none() {
    let report = text(&run(&[]).stderr);
    assert!(
        !report.contains("stack #") && !report.contains("stack=#"),
        "{report}"
    );
}

#[test]
fn a_suppressions_file_silences_a_site_and_the_exit_code_follows() {
    let dir = common::scratch("stacks_suppressions");
    let one = dir.join("one.supp");
    std::fs::write(&one, "# known\nleak:make_*cache\n").unwrap();
    let both = dir.join("both.supp");
    std::fs::write(&both, "leak:load_weights\nleak:leaks.c\n").unwrap();
    let with = |file: &Path| {
        let file = file.to_str().unwrap().to_string();
        run(&["--stacks", "--suppressions", &file, "--error-exitcode", "9"])
    };
    let out = with(&one);
    let report = text(&out.stderr);
    assert_eq!(out.status.code(), Some(9), "{report}");
    assert!(report.contains("faults=3"), "{report}");
    assert!(!report.contains("from make_cache"), "{report}");
    assert!(
        report.contains("suppressed: 1 fault(s) (512 B of leaks), by make_*cache"),
        "{report}"
    );
    let out = with(&both);
    let report = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert!(report.contains("faults=0"), "{report}");
    assert!(report.contains("suppressed: 4 fault(s)"), "{report}");
}

/// What `torch/cuda/_memory_viz.py`'s `memory()` hands to flamegraph.pl:
/// per block of each segment, `stream_S;STATE;FRAMES SIZE`, FRAMES the
/// block's `frames` outermost first as `file:line:name` (file without its
/// directory), or `<non-python>` without frames.
fn memory_flame_graph_lines(snapshot: &Value) -> Vec<String> {
    let mut lines = Vec::new();
    for seg in snapshot["segments"].as_array().unwrap() {
        for b in seg["blocks"].as_array().unwrap() {
            let frames: Vec<String> = b["frames"]
                .as_array()
                .map(|f| {
                    f.iter()
                        .rev()
                        .map(|f| {
                            let file = f["filename"].as_str().unwrap();
                            let file = file.rsplit('/').next().unwrap();
                            format!("{file}:{}:{}", f["line"], f["name"].as_str().unwrap())
                        })
                        .collect()
                })
                .unwrap_or_default();
            let fragment = if frames.is_empty() {
                "<non-python>".to_string()
            } else {
                frames.join(";")
            };
            lines.push(format!(
                "stream_{};{};{fragment} {}",
                seg["stream"].as_str().unwrap(),
                b["state"].as_str().unwrap(),
                b["requested_size"]
            ));
        }
    }
    lines
}

#[test]
fn the_snapshot_carries_frames_that_the_memory_flame_graph_shows() {
    let dir = common::scratch("stacks_snapshot");
    let json = dir.join("snapshot.json");
    run(&[
        "--stacks",
        "--history",
        "100",
        "--json",
        json.to_str().unwrap(),
    ]);
    let snapshot: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let lines = memory_flame_graph_lines(&snapshot);
    let with = |name: &str| {
        let frame = format!("{}:{name}", site(name));
        lines.iter().filter(|l| l.contains(&frame)).count()
    };
    assert_eq!(with("load_weights"), 3, "{lines:#?}");
    assert_eq!(with("make_cache"), 1, "{lines:#?}");
    // The trace's allocations and the leak events carry them too.
    let trace = &snapshot["device_traces"][0];
    let alloc_frames = trace
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "alloc");
    assert!(
        alloc_frames.clone().count() == 4
            && alloc_frames
                .clone()
                .all(|e| e["frames"][0]["name"].is_string()),
        "{trace}"
    );
    let leaks = snapshot["events"].as_array().unwrap();
    assert!(
        leaks
            .iter()
            .all(|e| e["kind"] == "leak" && e["frames"][0]["name"].is_string()),
        "{leaks:?}"
    );
}

/// Chromium, if installed (under CI, where `.ci/run` installs it, a
/// missing one is a failure).
fn chromium() -> Option<PathBuf> {
    let found = ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            let out = std::process::Command::new("sh")
                .args(["-c", &format!("command -v {name}")])
                .output()
                .ok()?;
            let path = text(&out.stdout).trim().to_string();
            (out.status.success() && !path.is_empty()).then(|| PathBuf::from(path))
        });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "Chromium is not installed"
        );
        eprintln!("SKIPPED: Chromium is not installed; the page was not opened");
    }
    found
}

/// Clicks the segments canvas, point by point, until a block's stack shows.
const CLICK_A_BLOCK: &str = r#"<script>
(function () {
  var c = document.getElementById("segments-canvas"), r = c.getBoundingClientRect();
  var box = document.getElementById("stack");
  for (var y = 2; y < r.height && !box.hasAttribute("data-alloc"); y += 4)
    for (var x = 0; x < r.width && !box.hasAttribute("data-alloc"); x += 3)
      c.dispatchEvent(new MouseEvent("click", { clientX: r.left + x, clientY: r.top + y, bubbles: true }));
})();
</script>
</body>"#;

#[test]
fn the_page_shows_the_stack_of_a_clicked_block_and_live_memory_by_stack() {
    let Some(chrome) = chromium() else { return };
    let dir = common::scratch("stacks_page");
    let page = dir.join("page.html");
    run(&["--stacks", "--html", page.to_str().unwrap()]);
    let html = std::fs::read_to_string(&page).unwrap();
    let end = html.rfind("</body>").unwrap();
    let clicked = dir.join("clicked.html");
    std::fs::write(
        &clicked,
        format!("{}{CLICK_A_BLOCK}{}", &html[..end], &html[end + 7..]),
    )
    .unwrap();
    let out = std::process::Command::new(chrome)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
        ])
        .args(["--window-size=1280,1400", "--virtual-time-budget=10000"])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", clicked.display()))
        .output()
        .unwrap();
    let dom = text(&out.stdout);
    assert!(!dom.contains("id=\"js-error\""), "a script error: {dom}");
    let stack = &dom[dom.find("<pre id=\"stack\"").expect("the stack box")..];
    let stack = &stack[..stack.find("</pre>").unwrap()];
    assert!(
        stack.contains("data-alloc="),
        "no block was clicked: {stack}"
    );
    let weights = format!("load_weights at {}", site("load_weights"));
    let cache = format!("make_cache at {}", site("make_cache"));
    assert!(
        stack.contains(&weights) || stack.contains(&cache),
        "{stack}"
    );
    let table = &dom[dom.find("id=\"by-stack\"").unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    let (w, c) = (table.find(&weights), table.find(&cache));
    assert!(
        w.is_some() && c.is_some() && w < c,
        "largest first: {table}"
    );
}

/// In front of a runtime (the stand-in vendor runtime of tests/vendor),
/// each fault is followed by the stack that allocated its block, through
/// the runtime to the application, the library's own frames left out.
#[test]
fn every_fault_in_front_of_a_runtime_shows_the_applications_frames() {
    let dir = common::scratch("stacks_vendor");
    let app = common::vendor::app_on_the_vendor_runtime(&dir);
    for mode in ["double-free", "cross-stream", "overlap", "null-address"] {
        let out = under_aclalloc(&["--stacks"], &[app.as_os_str(), mode.as_ref()]);
        let report = text(&out.stderr);
        let fault = report
            .find("fault ")
            .unwrap_or_else(|| panic!("{mode}: {report}"));
        let frames: Vec<&str> = report[fault..]
            .lines()
            .skip(1)
            .take_while(|l| l.starts_with("==aclalloc==     #"))
            .collect();
        assert!(
            frames.iter().any(|f| f.contains("at alloc_app.c:")),
            "{mode}: {report}"
        );
        let own = frames.iter().any(|f| f.contains(".rs:"));
        assert!(!own, "{mode}: the library's frames are left out: {report}");
    }
}

/// A Python program whose allocator the runtime calls during a launch:
/// under `aclalloc run --stacks` the allocation's stack ends with the
/// Python frames of the launch (file, line, function), as PyTorch records
/// them.
const PYTHON_PROGRAM: &str = r#"
from aclalloc import acl
import aclalloc

acl.init()
acl.rt.set_device(0)
stream, _ = acl.rt.create_stream()
desc = acl.rt.allocator_create_desc()
acl.rt.allocator_set_obj_to_desc(desc, object())
acl.rt.allocator_set_alloc_func_to_desc(desc, lambda obj, size: acl.rt.malloc(size)[0])
acl.rt.allocator_set_free_func_to_desc(desc, lambda obj, block: acl.rt.free(block))
acl.rt.allocator_set_get_addr_from_block_func_to_desc(desc, lambda block: block)
acl.rt.allocator_register(stream, desc)

def run_model():
    aclalloc.launch_kernel(stream, 4096)  # site: run_model

run_model()
acl.rt.synchronize_stream(stream)
print("done")
"#;

#[test]
fn a_python_programs_allocation_names_its_python_line() {
    let dir = common::scratch("stacks_python");
    let (program, json) = (dir.join("model.py"), dir.join("snapshot.json"));
    std::fs::write(&program, PYTHON_PROGRAM).unwrap();
    let line = PYTHON_PROGRAM
        .lines()
        .position(|l| l.contains("site: run_model"))
        .unwrap()
        + 1;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_aclalloc"))
        .args(["run", "--stacks", "--history", "100", "--json"])
        .arg(&json)
        .args(["--", "python3"])
        .arg(&program)
        .env("PYTHONPATH", common::root().join("python"))
        .env("ACLALLOC_LIB", common::lib_dir().join("libaclalloc.so"))
        .output()
        .expect("python3");
    assert_eq!(text(&out.stdout), "done\n", "{}", text(&out.stderr));
    let snapshot: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let allocs: Vec<&Value> = snapshot["device_traces"][0]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "alloc")
        .collect();
    assert_eq!(allocs.len(), 1, "{snapshot}");
    let top = &allocs[0]["frames"][0];
    assert_eq!(top["name"], "run_model", "{snapshot}");
    assert_eq!(top["line"], line, "{snapshot}");
    assert!(
        top["filename"].as_str().unwrap().ends_with("model.py"),
        "{snapshot}"
    );
}
