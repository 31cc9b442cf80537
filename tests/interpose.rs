//! `aclalloc run` in front of a stand-in vendor runtime (tests/vendor): the
//! application behaves as without the library, the vendor's executor calls
//! the user's allocator through both of its paths, the report counts those
//! allocations, and each injected fault is reported once with its stream and
//! size. The same application linked against libaclalloc alone (its host
//! runtime) runs, and under `aclalloc run` reports the same.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;

use common::vendor::{behaviour, fault_lines, text};

struct Built {
    /// Linked against the stand-in vendor runtime.
    app: PathBuf,
    /// The same source linked against libaclalloc alone.
    alone: PathBuf,
    dir: PathBuf,
}

/// Builds the stand-in vendor runtime and the application linked against it
/// (once per test run).
fn built() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = common::scratch("interpose");
        let app = common::vendor::app_on_the_vendor_runtime(&dir);
        let alone = dir.join("alloc_app_alone");
        common::vendor::build_alloc_app(&alone, &common::lib_dir(), "-laclalloc", &[]);
        Built { app, alone, dir }
    })
}

fn aclalloc() -> Command {
    Command::new(env!("CARGO_BIN_EXE_aclalloc"))
}

fn direct(mode: &str) -> Output {
    direct_run(&built().app, mode)
}

fn direct_run(app: &std::path::Path, mode: &str) -> Output {
    common::vendor::direct(&[app.as_os_str(), mode.as_ref()])
}

fn under_aclalloc(mode: &str, options: &[&str]) -> Output {
    run_under_aclalloc(&built().app, mode, options)
}

fn run_under_aclalloc(app: &std::path::Path, mode: &str, options: &[&str]) -> Output {
    common::vendor::under_aclalloc(options, &[app.as_os_str(), mode.as_ref()])
}

/// The `# stream1=.. stream2=.. allocator=..` line.
fn handles(out: &Output) -> (String, String, String) {
    let stdout = text(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("# stream1="))
        .expect("the handles line");
    let field = |name: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .expect("field")
            .to_string()
    };
    (field("stream1="), field("stream2="), field("allocator="))
}

fn vendor_counters(out: &Output) -> String {
    text(&out.stdout)
        .lines()
        .find(|l| l.starts_with("vendor executor:"))
        .expect("vendor counters")
        .to_string()
}

#[test]
fn the_application_behaves_as_without_the_library_and_the_report_counts_its_allocations() {
    let plain = direct("clean");
    assert!(plain.status.success(), "{}", text(&plain.stdout));
    let tracked = under_aclalloc("clean", &[]);
    let report = text(&tracked.stderr);
    assert!(
        tracked.status.success(),
        "{}\n{report}",
        text(&tracked.stdout)
    );
    assert_eq!(behaviour(&plain), behaviour(&tracked));
    assert!(behaviour(&tracked).contains("result: ok"));

    // The vendor executor went through both of its paths and called the
    // user's allocator each time: the user's counters equal the vendor's.
    let stdout = text(&tracked.stdout);
    assert!(
        stdout.contains("vendor executor: internal=20 exported=20 allocs=40 frees=40 get_addrs=40"),
        "{stdout}"
    );
    assert!(
        stdout.contains("user allocator: allocs=40 frees=40 get_addrs=40 bad_frees=0 live=0"),
        "{stdout}"
    );
    assert!(stdout.contains("get_by_stream: the user's descriptor: yes"));

    // The report saw all 40, on both streams, for the user's allocator.
    let (s1, s2, allocator) = handles(&tracked);
    assert!(
        report.contains(&format!("allocator {allocator} on stream(s) {s1}, {s2}")),
        "{report}"
    );
    assert!(
        report.contains("totals: allocations=40 frees=40 live=0 faults=0"),
        "{report}"
    );
    assert!(fault_lines(&report).is_empty(), "{report}");
}

#[test]
fn each_injected_fault_is_reported_once_with_its_stream_and_size() {
    // mode, fault kind, which stream, size
    let cases = [
        ("leak", "leak", 1, "3000"),
        ("double-free", "double-free", 2, "2000"),
        ("unknown-free", "free-of-unknown-block", 1, "unknown"),
        (
            "cross-stream",
            "cross-stream-reuse-before-synchronize",
            2,
            "8192",
        ),
        ("overlap", "overlapping-blocks", 1, "4096"),
        ("null-address", "null-address", 1, "1024"),
        ("leak-at-exit", "leak", 2, "5000"),
    ];
    let builds = [("vendor", &built().app), ("alone", &built().alone)];
    for ((mode, kind, stream, size), (build, app)) in
        cases.into_iter().flat_map(|case| builds.map(|b| (case, b)))
    {
        let plain = direct_run(app, mode);
        let tracked = run_under_aclalloc(app, mode, &[]);
        let report = text(&tracked.stderr);
        let mode = format!("{mode} ({build})");
        assert!(plain.status.success(), "{mode}: {}", text(&plain.stdout));
        assert!(tracked.status.success(), "{mode}: {report}");
        assert_eq!(behaviour(&plain), behaviour(&tracked), "{mode}");
        assert_eq!(
            vendor_counters(&plain),
            vendor_counters(&tracked),
            "{mode}: the vendor did the same work"
        );
        let (s1, s2, allocator) = handles(&tracked);
        let stream = if stream == 1 { s1 } else { s2 };
        let faults = fault_lines(&report);
        assert_eq!(faults.len(), 1, "{mode}: exactly one fault\n{report}");
        let line = &faults[0];
        assert!(line.contains(&format!("fault {kind}: ")), "{mode}: {line}");
        assert!(
            line.contains(&format!("stream={stream} ")),
            "{mode}: {line}"
        );
        assert!(
            line.contains(&format!("size={size} ")) || line.ends_with(&format!("size={size}")),
            "{mode}: {line}"
        );
        assert!(
            line.contains(&format!("allocator={allocator} ")),
            "{mode}: {line}"
        );
    }
}

#[test]
fn the_same_application_runs_on_the_library_alone() {
    let plain = direct_run(&built().alone, "clean");
    let stdout = text(&plain.stdout);
    assert!(plain.status.success(), "{stdout}{}", text(&plain.stderr));
    assert!(stdout.contains("result: ok"), "{stdout}");
    assert!(stdout.contains("vendor executor: none"), "{stdout}");
    assert!(
        stdout.contains("user allocator: allocs=40 frees=40 get_addrs=40 bad_frees=0 live=0"),
        "the host runtime's launches used the user's allocator: {stdout}"
    );
    // Preloading the library the program already uses: one copy, tracking on.
    let tracked = run_under_aclalloc(&built().alone, "clean", &[]);
    let report = text(&tracked.stderr);
    assert!(tracked.status.success(), "{report}");
    assert_eq!(behaviour(&plain), behaviour(&tracked));
    assert!(
        report.contains("totals: allocations=40 frees=40 live=0 faults=0"),
        "{report}"
    );
}

#[test]
fn a_destroyed_stream_handle_reused_by_the_runtime_inherits_nothing() {
    let line = |out: &Output| {
        text(&out.stdout)
            .lines()
            .find(|l| l.starts_with("# new stream"))
            .expect("the stream-reuse line")
            .to_string()
    };
    // The stand-in keeps the stale entry, as CANN does ...
    let plain = direct("stream-reuse");
    assert!(plain.status.success());
    assert_eq!(
        line(&plain),
        "# new stream has the old handle: yes; inherits an allocator: yes"
    );
    // ... and with libaclalloc in front, its destroy drops the record.
    for options in [&[][..], &["--no-track"][..]] {
        let fronted = under_aclalloc("stream-reuse", options);
        assert!(fronted.status.success(), "{}", text(&fronted.stderr));
        assert_eq!(
            line(&fronted),
            "# new stream has the old handle: yes; inherits an allocator: no"
        );
        assert_eq!(behaviour(&plain), behaviour(&fronted));
    }
}

#[test]
fn a_descriptor_made_inside_the_runtime_is_read_back_and_tracked() {
    let plain = direct("runtime-desc");
    let tracked = under_aclalloc("runtime-desc", &[]);
    let report = text(&tracked.stderr);
    assert!(tracked.status.success(), "{report}");
    assert_eq!(behaviour(&plain), behaviour(&tracked));
    let stdout = text(&tracked.stdout);
    assert!(
        stdout.contains("runtime-made descriptor read back: yes"),
        "{stdout}"
    );
    // 40 clean launches + 6 on the third stream, both executor paths.
    assert!(
        stdout.contains("vendor executor: internal=23 exported=23 allocs=46"),
        "{stdout}"
    );
    assert!(
        report.contains("totals: allocations=46 frees=46 live=0 faults=0"),
        "{report}"
    );
}

#[test]
fn a_cross_stream_fault_names_the_stream_that_freed_the_memory() {
    let tracked = under_aclalloc("cross-stream", &[]);
    let (s1, _, _) = handles(&tracked);
    let faults = fault_lines(&text(&tracked.stderr));
    assert!(faults[0].contains(&format!("freed-on={s1} ")), "{faults:?}");
}

#[test]
fn two_streams_inside_one_allocator_at_once_are_reported() {
    let plain = direct("concurrent");
    let tracked = under_aclalloc("concurrent", &[]);
    let report = text(&tracked.stderr);
    assert!(tracked.status.success(), "{report}");
    assert_eq!(behaviour(&plain), behaviour(&tracked));
    let (s1, s2, allocator) = handles(&tracked);
    let concurrent: Vec<String> = fault_lines(&report)
        .into_iter()
        .filter(|l| l.contains("fault concurrent-use: "))
        .collect();
    assert_eq!(concurrent.len(), 1, "{report}");
    let line = &concurrent[0];
    assert!(line.contains(&format!("allocator={allocator} ")), "{line}");
    assert!(line.contains(&s1) && line.contains(&s2), "{line}");
}

#[test]
fn the_exit_code_passes_through_and_reports_can_go_to_files() {
    let dir = built().dir.join("reports");
    std::fs::create_dir_all(&dir).unwrap();
    let report_file = dir.join("report.txt");
    let json_file = dir.join("snapshot.json");
    let tracked = under_aclalloc(
        "exit:7",
        &[
            "--report",
            report_file.to_str().unwrap(),
            "--json",
            json_file.to_str().unwrap(),
        ],
    );
    assert_eq!(tracked.status.code(), Some(7));
    assert_eq!(text(&tracked.stderr), "", "the report went to the file");
    let report = std::fs::read_to_string(&report_file).unwrap();
    assert!(
        report.contains("totals: allocations=40 frees=40 live=0 faults=0"),
        "{report}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_file).unwrap()).unwrap();
    assert_eq!(json["segments"].as_array().unwrap().len(), 0);
    assert_eq!(
        json["allocators"][0]["stats"]["allocation"]["allocated"],
        40
    );
}

#[test]
fn the_snapshot_holds_a_leaked_block_with_its_stream_and_size() {
    let json_file = built().dir.join("leak.json");
    let tracked = under_aclalloc("leak", &["--json", json_file.to_str().unwrap()]);
    assert!(tracked.status.success());
    let (s1, _, allocator) = handles(&tracked);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_file).unwrap()).unwrap();
    assert_eq!(json["version"], 2);
    let segments = json["segments"].as_array().unwrap();
    assert_eq!(segments.len(), 1, "{json}");
    let segment = &segments[0];
    // Handles as the text report writes them (JSON numbers would lose bits).
    assert_eq!(segment["stream"], s1.as_str());
    assert_eq!(segment["allocator"], allocator.as_str());
    assert_eq!(segment["total_size"], 3000);
    assert_eq!(segment["requested_size"], 3000);
    let block = &segment["blocks"][0];
    assert_eq!(block["size"], 3000);
    assert_eq!(block["requested_size"], 3000);
    assert_eq!(block["state"], "active_allocated");
    let address = block["address"].as_str().unwrap();
    assert!(
        address.starts_with("0x") && u64::from_str_radix(&address[2..], 16).unwrap() != 0,
        "{address}"
    );
    let events = json["events"].as_array().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["kind"], "leak");
    assert_eq!(events[0]["seen_at"], "unregister");
}

#[test]
fn the_page_of_a_run_shows_its_live_blocks_and_faults() {
    let page_file = built().dir.join("leak.html");
    let tracked = under_aclalloc("leak", &["--html", page_file.to_str().unwrap()]);
    assert!(tracked.status.success());
    let page = std::fs::read_to_string(&page_file).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>") && !page.contains("<script src"));
    let start = page.find("id=\"aclalloc-data\">").unwrap() + "id=\"aclalloc-data\">".len();
    let data: serde_json::Value =
        serde_json::from_str(&page[start..start + page[start..].find("</script>").unwrap()])
            .unwrap();
    assert_eq!(data["faults"][0]["kind"], "leak", "{data}");
    // --html records the history: every workspace the run took is drawn,
    // and only the leaked block is still live at the end.
    let allocs = &data["devices"][0]["allocs"];
    let report = text(&tracked.stderr);
    let allocations: usize = report
        .lines()
        .find(|l| l.contains("  allocations "))
        .and_then(|l| l.split_whitespace().nth(4))
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert_eq!(allocs["size"].as_array().unwrap().len(), allocations);
    let live: Vec<(&serde_json::Value, &serde_json::Value)> = allocs["size"]
        .as_array()
        .unwrap()
        .iter()
        .zip(allocs["end"].as_array().unwrap())
        .filter(|(_, end)| **end == -1)
        .collect();
    assert_eq!(live.len(), 1, "{allocs}");
    assert_eq!(live[0].0, 3000);
    assert!(report.contains(&format!(
        "aclalloc: wrote the memory page {}",
        page_file.display()
    )));
}

#[test]
fn a_run_with_history_records_every_workspace_the_runtime_took() {
    let json_file = built().dir.join("history.json");
    let tracked = under_aclalloc(
        "cross-stream",
        &["--history", "1000", "--json", json_file.to_str().unwrap()],
    );
    assert!(tracked.status.success());
    let (s1, s2, _) = handles(&tracked);
    let report = text(&tracked.stderr);
    // The report's "allocated bytes ... allocated freed" row.
    let row: Vec<i64> = report
        .lines()
        .find(|l| l.contains("allocated bytes"))
        .unwrap()
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_file).unwrap()).unwrap();
    assert_eq!(json["history"]["enabled"], true, "{json}");
    assert_eq!(json["history"]["dropped"], 0);
    let trace = json["device_traces"][0].as_array().unwrap();
    let count = |action: &str| trace.iter().filter(|e| e["action"] == action).count();
    // alloc_app: 42 launches, each one workspace allocated, addressed, freed.
    assert_eq!(count("alloc"), 42, "{report}");
    assert_eq!(count("free_requested"), 42);
    assert_eq!(count("free_completed"), 42);
    let bytes = |action: &str| -> i64 {
        trace
            .iter()
            .filter(|e| e["action"] == action)
            .map(|e| e["size"].as_i64().unwrap())
            .sum()
    };
    assert_eq!((bytes("alloc"), bytes("free_completed")), (row[2], row[3]));
    let mut streams: Vec<&str> = trace
        .iter()
        .map(|e| e["stream"].as_str().unwrap())
        .collect();
    streams.sort_unstable();
    streams.dedup();
    assert_eq!(streams, {
        let mut both = vec![s1.as_str(), s2.as_str()];
        both.sort_unstable();
        both
    });
    // Without --history (and --html), nothing is recorded.
    let plain_file = built().dir.join("no-history.json");
    let plain = under_aclalloc("clean", &["--json", plain_file.to_str().unwrap()]);
    assert!(plain.status.success());
    let plain: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plain_file).unwrap()).unwrap();
    assert_eq!(plain["history"]["enabled"], false);
    assert_eq!(plain["device_traces"], serde_json::json!([[]]));
    let bad = aclalloc()
        .args(["run", "--history", "lots", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("--history needs a whole number of events"));
}

#[test]
fn without_tracking_the_library_forwards_and_reports_nothing() {
    let plain = direct("clean");
    let forwarded = under_aclalloc("clean", &["--no-track"]);
    assert!(forwarded.status.success());
    assert_eq!(behaviour(&plain), behaviour(&forwarded));
    assert_eq!(vendor_counters(&plain), vendor_counters(&forwarded));
    assert_eq!(text(&forwarded.stderr), "");
}

#[test]
fn help_documents_the_command() {
    let out = aclalloc().arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = text(&out.stdout);
    for needle in [
        "aclalloc run [OPTIONS] -- PROGRAM [ARGS...]",
        "--report FILE",
        "--json FILE",
        "--html FILE",
        "--history N",
        "aclalloc viz SNAPSHOT.json [-o PAGE.html]",
        "ACLALLOC_RECORD_HISTORY=N",
        "--no-track",
        "ACLALLOC_TRACK=1",
        "RTLD_NEXT",
        "by dlopen",
        "double-free",
    ] {
        assert!(help.contains(needle), "--help lacks {needle}");
    }
    let bad = aclalloc().args(["run", "--bogus"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let missing = aclalloc()
        .args(["run", "--", "/nonexistent/program"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(127));
}

/// The application with libaclalloc preloaded by hand, with `vars` set.
fn preloaded(mode: &str, vars: &[(&str, &[u8])]) -> Output {
    use std::os::unix::ffi::OsStrExt as _;
    let mut command = Command::new(&built().app);
    command
        .arg(mode)
        .env("LD_PRELOAD", common::lib_dir().join("libaclalloc.so"))
        .env_remove("ACLALLOC_TRACK")
        .env_remove("ACLALLOC_TRACK_REPORT")
        .env_remove("ACLALLOC_TRACK_JSON")
        .env_remove("ACLALLOC_FORWARD");
    for (name, value) in vars {
        command.env(name, std::ffi::OsStr::from_bytes(value));
    }
    command.output().expect("run the application")
}

fn refusal_line(variable: &str, shown: &str, what: &str, default: &str) -> String {
    format!(
        "==aclalloc== Environment variable {variable} is invalid. Reason: the value \"{shown}\" {what}; accepted: 1, true, yes, on, 0, false, no, off (any case). Using the default: {default}.\n"
    )
}

#[test]
fn load_time_switches_refuse_other_values_with_one_line_and_keep_their_defaults() {
    let plain = direct("clean");
    let out = preloaded(
        "clean",
        &[
            ("ACLALLOC_FORWARD", b"maybe"),
            ("ACLALLOC_TRACK", b"sometimes"),
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr),
        refusal_line("ACLALLOC_FORWARD", "maybe", "is not accepted", "on")
            + &refusal_line("ACLALLOC_TRACK", "sometimes", "is not accepted", "off"),
        "one line each, and no report: tracking stayed off"
    );
    // Forwarding stayed on: the vendor's executor ran as without the library.
    assert_eq!(behaviour(&plain), behaviour(&out));
    assert_eq!(vendor_counters(&plain), vendor_counters(&out));

    let out = preloaded("clean", &[("ACLALLOC_TRACK", b"o\xffn")]);
    assert_eq!(
        text(&out.stderr),
        refusal_line("ACLALLOC_TRACK", "o\u{fffd}n", "is not UTF-8 text", "off")
    );
}

#[test]
fn load_time_switches_take_the_truth_values_in_any_case() {
    let plain = direct("clean");
    let out = preloaded(
        "clean",
        &[("ACLALLOC_FORWARD", b" Off "), ("ACLALLOC_TRACK", b"YES")],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let counters = vendor_counters(&out);
    assert!(
        counters.contains("internal=0 ") && counters != vendor_counters(&plain),
        "forwarding off: the library is the runtime, the vendor's executor is not reached: {counters}"
    );
    assert!(behaviour(&out).contains("result: ok"));
    let report = text(&out.stderr);
    assert!(
        report.contains("==aclalloc== totals: allocations=40 frees=40 live=0 faults=0"),
        "tracking on: {report}"
    );
    // And the negative forms: forwarding on, tracking off, nothing printed.
    let out = preloaded(
        "clean",
        &[("ACLALLOC_FORWARD", b"TRUE"), ("ACLALLOC_TRACK", b"false")],
    );
    assert_eq!(text(&out.stderr), "");
    assert_eq!(vendor_counters(&plain), vendor_counters(&out));
}

/// `--error-exitcode N` turns a report with faults into exit code N (a leak
/// here); without faults, or without the option, the program's code stands.
#[test]
fn error_exitcode_fails_a_run_with_faults() {
    let leaking = under_aclalloc("leak", &["--error-exitcode", "42"]);
    assert_eq!(leaking.status.code(), Some(42), "{}", text(&leaking.stderr));
    assert!(text(&leaking.stderr).contains("fault leak"));
    let clean = under_aclalloc("clean", &["--error-exitcode", "42"]);
    assert_eq!(clean.status.code(), Some(0), "{}", text(&clean.stderr));
    let default = under_aclalloc("leak", &[]);
    assert_eq!(default.status.code(), Some(0));
    let off = under_aclalloc("leak", &["--error-exitcode", "0"]);
    assert_eq!(off.status.code(), Some(0));
    for bad in ["256", "x", "-1"] {
        let out = under_aclalloc("clean", &["--error-exitcode", bad]);
        assert_eq!(out.status.code(), Some(2), "--error-exitcode {bad}");
        assert!(text(&out.stderr).contains("--error-exitcode needs a number from 0 to 255"));
    }
}

/// With no arguments the tool prints its usage on stderr and exits 2.
#[test]
fn no_arguments_is_a_usage_error() {
    let out = aclalloc().output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(text(&out.stdout), "");
    assert!(text(&out.stderr).contains("aclalloc run [OPTIONS] -- PROGRAM [ARGS...]"));
}

#[test]
fn the_virtual_memory_calls_reach_the_runtime_behind_the_library() {
    let plain = direct("vm");
    let forwarded = under_aclalloc("vm", &[]);
    let out = text(&forwarded.stdout);
    assert!(
        forwarded.status.success(),
        "{out}{}",
        text(&forwarded.stderr)
    );
    assert_eq!(behaviour(&plain), behaviour(&forwarded));
    assert!(
        out.contains("vm: granularity 2097152, vendor calls 7"),
        "all seven calls reach the vendor runtime: {out}"
    );
    // On the library alone the host runtime serves them.
    let alone = direct_run(&built().alone, "vm");
    let out = text(&alone.stdout);
    assert!(alone.status.success(), "{out}{}", text(&alone.stderr));
    assert!(
        out.contains("vm: granularity 2097152, vendor calls 0"),
        "{out}"
    );
}

#[test]
fn the_recent_message_is_the_most_recent_failures_whichever_side_failed() {
    let out = under_aclalloc("errmsg", &["--no-track"]);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("aclalloc's call failed: yes"), "{stdout}");
    assert!(
        stdout.contains("runtime failed: 107001; recent message: fake: no such device"),
        "an earlier unread aclalloc message hid the runtime's: {stdout}"
    );
    assert!(
        stdout.contains("after both, recent message: aclallocDefaultFree failed"),
        "{stdout}"
    );
}

#[test]
fn a_reuse_ordered_by_a_forwarded_event_is_not_reported_and_one_recorded_before_the_free_is() {
    let ordered = under_aclalloc("event-ordered", &[]);
    let report = text(&ordered.stderr);
    assert!(ordered.status.success(), "{report}");
    assert!(fault_lines(&report).is_empty(), "{report}");
    let unordered = under_aclalloc("event-before-free", &[]);
    let (s1, _, _) = handles(&unordered);
    let faults = fault_lines(&text(&unordered.stderr));
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert!(faults[0].contains(&format!("freed-on={s1} ")), "{faults:?}");
}
