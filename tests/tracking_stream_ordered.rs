//! CANN's stream-ordered pools under `aclalloc run`, in front of the
//! stand-in vendor runtime (tests/vendor, whose pool the calls reach) and on
//! the library alone (its host runtime's pools): the program behaves as
//! without the library, the report counts the pool's allocations, the JSON
//! snapshot and the page carry them, and each misuse particular to memory
//! that follows streams is reported once, with its streams and size.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use common::vendor::{behaviour, direct, fault_lines, text, under_aclalloc};

struct Built {
    /// Linked against the stand-in vendor runtime.
    vendor: PathBuf,
    /// Linked against libaclalloc alone.
    alone: PathBuf,
    dir: PathBuf,
}

fn built() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = common::scratch("tracking_stream_ordered");
        common::vendor::build_runtime(&dir.join("libfakeascendcl.so"), None);
        let vendor = dir.join("ordered_app");
        common::vendor::build_ordered_app(&vendor, &dir, "-lfakeascendcl");
        let alone = dir.join("ordered_app_alone");
        common::vendor::build_ordered_app(&alone, &common::lib_dir(), "-laclalloc");
        Built { vendor, alone, dir }
    })
}

/// The `# stream1=.. stream2=.. pool=..` line.
fn handles(out: &Output) -> (String, String, String) {
    let stdout = text(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("# stream1="))
        .unwrap_or_else(|| panic!("the handles line in {stdout}"));
    let field = |name: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .expect("field")
            .to_string()
    };
    (field("stream1="), field("stream2="), field("pool="))
}

fn builds() -> [(&'static str, &'static Path); 2] {
    [("vendor", &built().vendor), ("alone", &built().alone)]
}

#[test]
fn a_clean_program_behaves_as_without_the_library_and_its_allocations_are_counted() {
    for (build, app) in builds() {
        let plain = direct(&[app.as_os_str(), "clean".as_ref()]);
        assert!(plain.status.success(), "{build}: {}", text(&plain.stdout));
        let json = built().dir.join(format!("clean-{build}.json"));
        let html = built().dir.join(format!("clean-{build}.html"));
        let options = [
            "--json",
            json.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
        ];
        let tracked = under_aclalloc(&options, &[app.as_os_str(), "clean".as_ref()]);
        let report = text(&tracked.stderr);
        assert!(tracked.status.success(), "{build}: {report}");
        assert_eq!(behaviour(&plain), behaviour(&tracked), "{build}");
        assert!(behaviour(&tracked).contains("result: ok"), "{build}");
        let (s1, _, pool) = handles(&tracked);
        assert!(
            report.contains(&format!("stream-ordered pool {pool} on stream(s) {s1}\n")),
            "{build}: {report}"
        );
        // Three allocations on stream 1, all freed; 4000 + 3000 + 3000 bytes.
        let rows: Vec<&str> = report
            .lines()
            .skip_while(|l| !l.contains("stream-ordered pool"))
            .take(4)
            .collect();
        let numbers = |row: &str| -> Vec<String> {
            row.split_whitespace()
                .filter(|w| w.parse::<u64>().is_ok())
                .map(str::to_string)
                .collect()
        };
        assert_eq!(numbers(rows[2]), ["0", "2", "3", "3"], "{build}: {report}");
        assert_eq!(
            numbers(rows[3]),
            ["0", "7000", "10000", "10000"],
            "{build}: {report}"
        );
        assert!(
            report.contains("totals: allocations=3 frees=3 live=0 faults=0"),
            "{build}: {report}"
        );
        assert!(fault_lines(&report).is_empty(), "{build}: {report}");

        let snapshot: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let pools = snapshot["stream_ordered_pools"].as_array().unwrap();
        assert_eq!(pools.len(), 1, "{build}: {snapshot}");
        assert_eq!(pools[0]["pool"], pool.as_str(), "{build}");
        assert_eq!(pools[0]["stats"]["allocated_bytes"]["peak"], 7000);
        let page = std::fs::read_to_string(&html).unwrap();
        assert!(
            page.contains("\"stream_ordered_pools\":[{") && page.contains(&pool),
            "{build}: the page lists the pool"
        );
    }
}

#[test]
fn each_misuse_is_reported_once_with_its_streams_and_size() {
    // mode, fault kind, the stream the line names, size, the other stream's field
    let cases = [
        (
            "use-after-free",
            "use-after-free-async",
            2,
            "3000",
            "freed-on",
            1,
        ),
        (
            "free-while-used",
            "free-async-while-used-on-another-stream",
            1,
            "3000",
            "used-on",
            2,
        ),
        ("leak", "leak", 1, "4000", "seen-at", 0),
    ];
    for ((mode, kind, stream, size, other, other_stream), (build, app)) in cases
        .into_iter()
        .flat_map(|case| builds().map(|b| (case, b)))
    {
        let plain = direct(&[app.as_os_str(), mode.as_ref()]);
        let tracked = under_aclalloc(&[], &[app.as_os_str(), mode.as_ref()]);
        let report = text(&tracked.stderr);
        let what = format!("{mode} ({build})");
        assert!(plain.status.success(), "{what}: {}", text(&plain.stdout));
        assert!(tracked.status.success(), "{what}: {report}");
        assert_eq!(behaviour(&plain), behaviour(&tracked), "{what}");
        let (s1, s2, pool) = handles(&tracked);
        let name = |n: i32| if n == 1 { s1.clone() } else { s2.clone() };
        let faults = fault_lines(&report);
        assert_eq!(faults.len(), 1, "{what}: exactly one fault\n{report}");
        let line = &faults[0];
        assert!(line.contains(&format!("fault {kind}: ")), "{what}: {line}");
        assert!(
            line.contains(&format!("stream={} ", name(stream))),
            "{what}: {line}"
        );
        assert!(line.contains(&format!("size={size} ")), "{what}: {line}");
        assert!(
            line.contains(&format!("pool={pool} ")) || line.contains(&format!("allocator={pool} ")),
            "{what}: {line}"
        );
        let expected = if other_stream == 0 {
            format!("{other}=exit")
        } else {
            format!("{other}={}", name(other_stream))
        };
        assert!(line.contains(&expected), "{what}: {line}");
    }
}

#[test]
fn the_calls_reach_the_vendor_runtime() {
    // The stand-in's pool hands out 64 KiB slots; the host runtime's pool
    // puts a block of 3000 bytes right after one of 4000.
    let distance = |out: &Output| {
        text(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("# b-a=").map(str::to_string))
            .expect("the distance line")
    };
    let vendor = under_aclalloc(&[], &[built().vendor.as_os_str(), "clean".as_ref()]);
    assert_eq!(distance(&vendor), "65536", "{}", text(&vendor.stderr));
    let alone = under_aclalloc(&[], &[built().alone.as_os_str(), "clean".as_ref()]);
    assert_ne!(distance(&alone), "65536");
}
