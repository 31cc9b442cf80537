//! `aclalloc`: run a program with libaclalloc in front of its ACL runtime,
//! with the allocator tracking layer on, and print what it found.
//!
//! The launcher must not load the library it preloads into the child: it
//! uses std, libc and the page generator (the `aclalloc-viz` crate).

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicI32, Ordering::SeqCst};

use aclalloc_viz as viz;

const HELP: &str = "\
aclalloc: check what an ACL runtime does with the allocators a program registers

USAGE:
    aclalloc run [OPTIONS] -- PROGRAM [ARGS...]
    aclalloc viz SNAPSHOT.json [-o PAGE.html]
    aclalloc --help | --version

COMMANDS:
    run     Runs PROGRAM with libaclalloc.so preloaded (LD_PRELOAD) in front of
            whatever ACL runtime PROGRAM uses, with allocator tracking on. When
            PROGRAM exits, prints the tracking report and exits with PROGRAM's
            exit code, or with --error-exitcode's when the report has faults.
            When PROGRAM was killed by signal N, aclalloc exits with 128+N
            once the report is out, whatever --error-exitcode says.

    viz     Writes one self-contained HTML page (no network needed) drawing a
            JSON snapshot: allocated memory over time stacked by allocation and
            coloured by stream, the reserved total and the peak, the segments
            and their blocks at the end or at a clicked time, the largest live
            allocations, out-of-memory failures and faults. Reads the pool's
            snapshot (aclallocPoolSnapshot, with its recorded history),
            'aclalloc run --json' files and torch's _snapshot() (addresses as
            hex strings or integers). -o defaults to SNAPSHOT with .html.

OPTIONS (run):
    --report FILE   Write the text report to FILE instead of stderr.
    --json FILE     Also write a JSON snapshot of the blocks still live at
                    exit, each allocator's statistics and every fault to FILE.
    --html FILE     Also write the memory page (see 'viz') of that snapshot to
                    FILE: the timeline of the recorded history (--history; with
                    --html it defaults to 100000 events), live blocks at exit
                    and the faults.
    --history N     Record the last N allocations and frees the runtime made
                    through the user's allocators (address, size, stream,
                    device, time), for --json's device_traces and --html's
                    timeline (sets ACLALLOC_RECORD_HISTORY=N for PROGRAM, so
                    pools it makes record too). 0: off. A history that
                    cannot be allocated (56 bytes per event) is refused.
    --stacks[=N]    Capture the call stack (N frames, default 16) of each tracked
                    allocation: faults show the stack that allocated their block,
                    leaks are grouped by it (largest first), snapshots carry
                    PyTorch's 'frames'. Sets ACLALLOC_TRACK_STACKS=N.
    --suppressions FILE
                    Leave out faults matching FILE's LeakSanitizer-style lines,
                    'leak:PATTERN' (or another KIND:PATTERN), PATTERN a part of
                    a function, file or module name in the stack, '*' any text
                    ('#' starts a comment). Suppressed faults do not count for
                    --error-exitcode; the report says how many there were.
                    Sets ACLALLOC_SUPPRESSIONS=FILE.
    --no-track      Preload the library without tracking (forwarding only);
                    no report is printed.
    --error-exitcode N
                    Exit with N (1-255) instead of PROGRAM's exit code when the
                    report has faults (leaks included), so CI can fail on them.
                    0, the default, keeps PROGRAM's exit code. A PROGRAM killed
                    by signal N still gives 128+N.
    --lib PATH      Use this libaclalloc.so.
    -h, --help      This text.

WHAT IS IN FRONT:
    In front of a real runtime (CANN's libascendcl.so, or any library that
    exports the ACL functions), every ACL function libaclalloc exports is
    forwarded to it. The runtime is looked for once (dlsym(RTLD_NEXT), then
    the loaded objects), at the first call that needs it (aclInit, devices,
    streams, memory, registering an allocator), so a runtime the program
    loads by dlopen before then (a plugin's dependency, RTLD_LOCAL or
    RTLD_GLOBAL; Python's ctypes or an extension module) is found; one
    loaded only after libaclalloc began serving as the runtime is named on
    stderr and in the report, and not used. aclrtAllocatorRegister also
    registers with the real runtime (through the tracking layer),
    aclrtAllocatorGetByStream is answered by libaclalloc (handing out the
    tracking callbacks; *allocatorDesc is the user's descriptor),
    aclrtSynchronizeStream tells the tracking layer which frees are complete,
    aclrtDestroyStream drops the stream's record. Without a real runtime,
    libaclalloc is the implementation.

THE REPORT:
    Lines start with '==aclalloc=='. Per allocator object: the streams that used
    it and its statistics (allocations and allocated bytes: current, peak,
    allocated, freed; alloc failures), and per stream-ordered pool
    (aclrtMemPoolMallocAsync) its streams and the same figures. Then a totals
    line and one line per fault, 'fault KIND: stream=.. allocator=.. size=..
    ...' (pool=.. for a stream-ordered pool's), KIND one of:
      free-of-unknown-block                  free of a block the allocator never handed out
      double-free                            free of a block already freed
      null-address                           getAddrFromBlock returned NULL
      address-of-unknown-block               getAddrFromBlock of a block not live
      overlapping-blocks                     two live blocks share addresses
      cross-stream-reuse-before-synchronize  memory freed on one stream handed to
                                             another before the first was synchronized
      concurrent-use                         two streams inside one allocator at once
      free-of-block-a-graph-holds            free of a workspace a captured model still
                                             holds for its replays (model=..)
      use-after-free-async                   a copy or fill touches a stream-ordered
                                             pool's block after its aclrtMemPoolFreeAsync
      free-async-while-used-on-another-stream
                                             aclrtMemPoolFreeAsync while another stream's
                                             copy or fill of the block is not ordered
                                             before it
      leak                                   a block live at unregister, stream
                                             destruction or exit (seen-at=...); a
                                             workspace a captured model holds is a
                                             leak only at exit
    Each fault is reported once; a repeating concurrent-use is counted (xN).
    With --stacks, a fault is followed by the stack that allocated its block
    ('#0 FUNCTION at FILE:LINE', the program's call site first), and leaks are
    grouped by that stack, the most bytes first ('stack #1: 3 leaks, 12 KiB,
    from load_weights at model.c:88'; each leak line ends with its group).
    Child processes write their own reports; all are printed, the PROGRAM's
    own first. An image replaced by exec (any of the family: execve, execv,
    execvp, execvpe, fexecve, execl, execle, execlp) writes its report
    first, and the new image its own. A program started by exec,
    posix_spawn, posix_spawnp, system or popen is tracked too, even when it
    is given an environment of its own: it keeps LD_PRELOAD and the
    ACLALLOC_* variables (libaclalloc_preload.so, beside the library, takes
    those libc functions; the library itself takes none).

WHERE THE LIBRARY IS FOUND (first that exists):
    1. --lib PATH
    2. $ACLALLOC_LIB
    3. libaclalloc.so in the directory of this executable (cargo's target/<profile>/)
    4. ../lib/libaclalloc.so relative to that directory (an installed prefix)
    libaclalloc_preload.so is taken from the library's directory; without it
    the program runs, but exec writes no report first and a program started
    with an environment of its own is not tracked (a line on stderr says so).

ENVIRONMENT (set for PROGRAM by 'run'; usable without it with
LD_PRELOAD=\"libaclalloc_preload.so libaclalloc.so\"):
    ACLALLOC_TRACK=1              tracking on from load time
    ACLALLOC_TRACK_REPORT=FILE    text report at exit to FILE (%p: the pid)
    ACLALLOC_TRACK_JSON=FILE      JSON snapshot at exit to FILE (%p: the pid)
    ACLALLOC_TRACK_STACKS=N       allocating stacks of N frames (0: off)
    ACLALLOC_SUPPRESSIONS=FILE    faults to leave out of the report
    ACLALLOC_FORWARD=0            never forward, even in front of a real runtime

    ACLALLOC_RECORD_HISTORY=N     pools made by aclallocPoolCreate, the
                                  default pool and the tracking layer record
                                  their last N events

EXAMPLES:
    aclalloc run --json snapshot.json -- ./my_inference_server --model m.om
    aclalloc run --html memory.html -- ./my_inference_server --model m.om
    aclalloc run --stacks --suppressions known.supp --error-exitcode 1 -- ./tests
    aclalloc viz pool_snapshot.json -o memory.html
";

/// The history `--html` records when `--history` is not given: enough for a
/// long run's timeline, 5.6 MB of ring.
const HTML_HISTORY: usize = 100_000;

#[derive(Default)]
struct RunOptions {
    report: Option<PathBuf>,
    json: Option<PathBuf>,
    html: Option<PathBuf>,
    /// Events to record (`None`: not asked; `--html` then records [`HTML_HISTORY`]).
    history: Option<usize>,
    no_track: bool,
    /// Frames of each allocating stack (0: none).
    stacks: usize,
    suppressions: Option<PathBuf>,
    lib: Option<PathBuf>,
    /// Exit code when faults were found (valgrind's option); 0 is off.
    error_exitcode: u8,
    program: Vec<OsString>,
}

/// Runs the command with the process's arguments and says how it ended.
pub fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    // `Ok(None)`: the help was asked for.
    let outcome = match args.first().and_then(|a| a.to_str()) {
        // No arguments is a usage error, as for other command-line tools.
        None => {
            eprint!("{HELP}");
            Ok(Some(ExitCode::from(2)))
        }
        Some("-h") | Some("--help") | Some("help") => Ok(None),
        Some("-V") | Some("--version") => {
            println!("aclalloc {}", env!("CARGO_PKG_VERSION"));
            Ok(Some(ExitCode::SUCCESS))
        }
        Some("run") => parse_run(&args[1..]).map(|o| o.map(run)),
        Some("viz") => parse_viz(&args[1..]).map(|o| o.map(|(i, o)| write_page(&i, &o))),
        Some(other) => Err(format!("unknown command '{other}'")),
    };
    match outcome {
        Ok(Some(code)) => code,
        Ok(None) => {
            print!("{HELP}");
            ExitCode::SUCCESS
        }
        Err(message) => usage_error(&message),
    }
}

fn usage_error(message: &str) -> ExitCode {
    eprintln!("aclalloc: {message}\nTry 'aclalloc --help'.");
    ExitCode::from(2)
}

fn parse_run(args: &[OsString]) -> Result<Option<RunOptions>, String> {
    let mut options = RunOptions::default();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].to_str().unwrap_or("");
        let mut value = |name: &str| {
            i += 1;
            args.get(i)
                .map(PathBuf::from)
                .ok_or(format!("{name} needs a value"))
        };
        match arg {
            "--" => {
                options.program = args[i + 1..].to_vec();
                break;
            }
            "-h" | "--help" => return Ok(None),
            "--report" => options.report = Some(value("--report")?),
            "--json" => options.json = Some(value("--json")?),
            "--html" => options.html = Some(value("--html")?),
            "--lib" => options.lib = Some(value("--lib")?),
            "--history" => {
                let what = "a whole number of events (0: off)";
                options.history = Some(number(value("--history")?, "--history", what)?);
            }
            "--no-track" => options.no_track = true,
            "--stacks" => options.stacks = 16,
            _ if arg.starts_with("--stacks=") => {
                let what = "a number of frames, from 1 to 64";
                let n = PathBuf::from(&arg["--stacks=".len()..]);
                options.stacks = number(n, "--stacks", what)?;
            }
            "--suppressions" => {
                let file = value("--suppressions")?;
                // The program may change directory.
                let file = file
                    .canonicalize()
                    .map_err(|e| format!("--suppressions {}: {e}", file.display()))?;
                options.suppressions = Some(file);
            }
            "--error-exitcode" => {
                let what = "a number from 0 to 255";
                options.error_exitcode =
                    number(value("--error-exitcode")?, "--error-exitcode", what)?;
            }
            _ => {
                return Err(format!(
                    "unexpected '{}' (the program goes after '--')",
                    args[i].to_string_lossy()
                ))
            }
        }
        i += 1;
    }
    if options.program.is_empty() {
        return Err("no program given: aclalloc run [OPTIONS] -- PROGRAM [ARGS...]".into());
    }
    if let Some(n) = options.history {
        check_history(n)?;
    }
    Ok(Some(options))
}

/// Bytes one recorded event takes in the program (the size of the history's
/// `Event`, asserted in crates/aclalloc-core/src/history/event.rs).
const EVENT_BYTES: usize = 56;

/// Refuses, before the program starts, a history its memory cannot hold
/// (the program would run without one).
fn check_history(n: usize) -> Result<(), String> {
    let bytes = n.checked_mul(EVENT_BYTES);
    if bytes.is_some_and(|b| Vec::<u8>::new().try_reserve_exact(b).is_ok()) {
        return Ok(());
    }
    Err(format!(
        "--history {n}: {EVENT_BYTES} bytes per event cannot be allocated {n} times; ask for fewer events"
    ))
}

/// The value of option `name`, a number (`what` says which).
fn number<N: std::str::FromStr>(value: PathBuf, name: &str, what: &str) -> Result<N, String> {
    let parsed = value.to_str().and_then(|n| n.parse().ok());
    parsed.ok_or(format!("{name} needs {what}, not '{}'", value.display()))
}

fn parse_viz(args: &[OsString]) -> Result<Option<(PathBuf, PathBuf)>, String> {
    let mut input = None;
    let mut output = None;
    let mut i = 0;
    while i < args.len() {
        match args[i].to_str().unwrap_or("") {
            "-h" | "--help" => return Ok(None),
            "-o" | "--output" => {
                i += 1;
                output = Some(PathBuf::from(args.get(i).ok_or("-o needs a file name")?));
            }
            _ if input.is_none() => input = Some(PathBuf::from(&args[i])),
            _ => {
                return Err(format!(
                    "unexpected '{}': aclalloc viz SNAPSHOT.json [-o PAGE.html]",
                    args[i].to_string_lossy()
                ))
            }
        }
        i += 1;
    }
    let input = input.ok_or("no snapshot given: aclalloc viz SNAPSHOT.json [-o PAGE.html]")?;
    let output = output.unwrap_or_else(|| input.with_extension("html"));
    Ok(Some((input, output)))
}

fn write_page(input: &Path, output: &Path) -> ExitCode {
    let title = input
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let written = std::fs::read_to_string(input)
        .map_err(|e| format!("cannot read {}: {e}", input.display()))
        .and_then(|text| {
            viz::page_from_json(&text, &title)
                .map_err(|e| format!("cannot draw {}: {e}", input.display()))
        })
        .and_then(|page| {
            std::fs::write(output, page)
                .map_err(|e| format!("cannot write {}: {e}", output.display()))
        });
    match written {
        Ok(()) => {
            println!(
                "aclalloc: wrote {} (open it in any browser; it needs no network)",
                output.display()
            );
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("aclalloc: {message}");
            ExitCode::from(1)
        }
    }
}

fn find_library(explicit: Option<&Path>) -> Result<PathBuf, String> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = explicit {
        candidates.push(p.to_path_buf());
    } else {
        if let Some(p) = std::env::var_os("ACLALLOC_LIB") {
            candidates.push(PathBuf::from(p));
        }
        if let Some(dir) = std::env::current_exe()
            .ok()
            .and_then(|e| e.canonicalize().ok())
            .and_then(|e| e.parent().map(Path::to_path_buf))
        {
            candidates.push(dir.join("libaclalloc.so"));
            candidates.push(dir.join("../lib/libaclalloc.so"));
        }
    }
    for c in &candidates {
        if c.is_file() {
            return c
                .canonicalize()
                .map_err(|e| format!("{}: {e}", c.display()));
        }
    }
    Err(format!(
        "libaclalloc.so not found (looked at: {}); build it with 'cargo build --release' or pass --lib",
        candidates
            .iter()
            .map(|c| c.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// The preload object that takes libc's `exec` family and `posix_spawn`
/// (`preload/aclalloc_preload.c`), built and installed beside the library.
fn preload_object_beside(lib: &Path) -> Option<PathBuf> {
    let object = lib.parent()?.join("libaclalloc_preload.so");
    object.is_file().then_some(object)
}

fn scratch_dir() -> std::io::Result<PathBuf> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    // Absolute, so a program that changes directory still finds it.
    let dir = std::path::absolute(std::env::temp_dir())?
        .join(format!("aclalloc-run-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// What the launcher exits with when it cannot run the program.
fn cannot_run(message: &str) -> ExitCode {
    eprintln!("aclalloc: {message}");
    ExitCode::from(127)
}

fn run(options: RunOptions) -> ExitCode {
    let lib = match find_library(options.lib.as_deref()) {
        Ok(lib) => lib,
        Err(message) => return cannot_run(&message),
    };
    let scratch = match scratch_dir() {
        Ok(d) => d,
        Err(e) => return cannot_run(&format!("cannot create a scratch directory: {e}")),
    };
    let mut preload = OsString::new();
    match preload_object_beside(&lib) {
        Some(object) => {
            preload.push(object.as_os_str());
            preload.push(":");
        }
        None => eprintln!(
            "aclalloc: no libaclalloc_preload.so beside {}: an exec will write no report \
             first, and a program started with an environment of its own is not tracked",
            lib.display()
        ),
    }
    preload.push(lib.as_os_str());
    if let Some(existing) = std::env::var_os("LD_PRELOAD").filter(|p| !p.is_empty()) {
        preload.push(":");
        preload.push(existing);
    }
    let mut command = Command::new(&options.program[0]);
    command
        .args(&options.program[1..])
        .env("LD_PRELOAD", preload);
    let track = !options.no_track;
    if track {
        command
            .env("ACLALLOC_TRACK", "1")
            .env("ACLALLOC_TRACK_REPORT", scratch.join("report.%p"));
        if options.json.is_some() || options.html.is_some() {
            command.env("ACLALLOC_TRACK_JSON", scratch.join("snapshot.%p.json"));
        }
        let history = options
            .history
            .or(options.html.as_ref().map(|_| HTML_HISTORY));
        if let Some(n) = history {
            command.env("ACLALLOC_RECORD_HISTORY", n.to_string());
        }
        if options.stacks > 0 {
            command.env("ACLALLOC_TRACK_STACKS", options.stacks.to_string());
        }
        if let Some(file) = &options.suppressions {
            command.env("ACLALLOC_SUPPRESSIONS", file);
        }
    } else {
        command
            .env_remove("ACLALLOC_TRACK")
            .env_remove("ACLALLOC_TRACK_REPORT")
            .env_remove("ACLALLOC_TRACK_JSON")
            .env_remove("ACLALLOC_TRACK_STACKS")
            .env_remove("ACLALLOC_SUPPRESSIONS");
    }
    // Before the spawn, so a stop request that comes meanwhile is not lost.
    forward_stop_signals();
    let mut child = match command.spawn() {
        Ok(c) => c,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&scratch);
            return cannot_run(&format!(
                "cannot run {}: {e}",
                options.program[0].to_string_lossy()
            ));
        }
    };
    // The terminal's interrupt goes to the whole process group: let the
    // program decide, and stay to print its report.
    // SAFETY: setting a signal disposition to SIG_IGN.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
    }
    let pid = child.id();
    forward_to(pid);
    let status = match child.wait() {
        Ok(s) => s,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&scratch);
            return cannot_run(&format!("waiting for the program failed: {e}"));
        }
    };
    let code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    // The program's exit code is passed through even when a report is
    // missing: the note on stderr says so.
    let mut faults = 0;
    if track {
        faults = deliver_report(&scratch, pid, options.report.as_deref(), &status);
        if let Some(json) = &options.json {
            deliver_json(&scratch, pid, json);
        }
        if let Some(html) = &options.html {
            deliver_html(&scratch, pid, html);
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    // A program killed by a signal gives 128+N whatever --error-exitcode
    // says: a supervisor that restarts on signals and not on error codes
    // must see how the program died (valgrind's status says so too).
    if faults > 0 && options.error_exitcode != 0 && status.signal().is_none() {
        return ExitCode::from(options.error_exitcode);
    }
    ExitCode::from(code.clamp(0, 255) as u8)
}

/// The program's process id, for [`forward`] (0: not started yet).
static CHILD: AtomicI32 = AtomicI32::new(0);
/// A stop signal that came before the program started.
static PENDING: AtomicI32 = AtomicI32::new(0);

/// SIGTERM and SIGHUP sent to the launcher (a service manager stopping it)
/// go to the program, which writes its report; the launcher stays to deliver
/// it and passes the program's status on (128+N).
fn forward_stop_signals() {
    for sig in [libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: `forward` only uses atomics and kill, both
        // async-signal-safe; a handler is reset to the default in the
        // program at exec.
        unsafe {
            libc::signal(
                sig,
                forward as extern "C" fn(libc::c_int) as libc::sighandler_t,
            )
        };
    }
}

/// The program started as `pid`: a stop signal that came before goes to it now.
fn forward_to(pid: u32) {
    CHILD.store(pid as i32, SeqCst);
    let sig = PENDING.swap(0, SeqCst);
    if sig != 0 {
        forward(sig);
    }
}

extern "C" fn forward(sig: libc::c_int) {
    let pid = CHILD.load(SeqCst);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(pid, sig) };
    } else {
        PENDING.store(sig, SeqCst);
    }
}

/// One image's output file: its process, and which image it was (`Some(n)`:
/// the one replaced by its n-th `exec`, written with `.before-exec-N`;
/// `None`: the last).
struct Output {
    pid: u32,
    before_exec: Option<u32>,
    path: PathBuf,
}

/// The files `prefix<pid><suffix>[.before-exec-N]` in `dir`: the program's
/// own first, each process's images in the order they ran.
fn outputs(dir: &Path, prefix: &str, suffix: &str, pid: u32) -> Vec<Output> {
    let mut found: Vec<Output> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let (name, before_exec) = match name.split_once(".before-exec-") {
                Some((name, n)) => (name, Some(n.parse().ok()?)),
                None => (name.as_str(), None),
            };
            let pid = name
                .strip_prefix(prefix)?
                .strip_suffix(suffix)?
                .parse()
                .ok()?;
            Some(Output {
                pid,
                before_exec,
                path: e.path(),
            })
        })
        .collect();
    found.sort_by_key(|o| (o.pid != pid, o.pid, o.before_exec.is_none(), o.before_exec));
    found
}

/// Prints or writes the reports; returns the number of faults they count.
fn deliver_report(
    dir: &Path,
    pid: u32,
    to: Option<&Path>,
    status: &std::process::ExitStatus,
) -> u64 {
    let reports = outputs(dir, "report.", "", pid);
    let mut text = String::new();
    for o in &reports {
        if reports.len() > 1 {
            let image = o.before_exec.map_or(String::new(), |n| {
                format!(", image {} (until its exec)", n + 1)
            });
            text.push_str(&format!("==aclalloc== --- process {}{image} ---\n", o.pid));
        }
        text.push_str(&std::fs::read_to_string(&o.path).unwrap_or_default());
    }
    if reports.is_empty() && status.signal().is_some() {
        text.push_str(&format!(
            "==aclalloc== no report: the program was killed ({status}) before it could write \
             one (SIGKILL cannot be caught; after a crash the report is a best effort)\n"
        ));
    } else if reports.is_empty() {
        text.push_str(&format!(
            "==aclalloc== no report: the program wrote none ({status}); was libaclalloc.so \
             loaded (a static or setuid program ignores LD_PRELOAD)?\n"
        ));
    }
    match to {
        Some(path) => {
            if let Err(e) = std::fs::write(path, &text) {
                eprintln!("aclalloc: cannot write {}: {e}\n{text}", path.display());
            }
        }
        None => eprint!("{text}"),
    }
    fault_count(&text)
}

/// The sum of the `faults=N` of the reports' totals lines.
fn fault_count(report: &str) -> u64 {
    report
        .lines()
        .filter(|l| l.starts_with("==aclalloc== totals:"))
        .filter_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("faults=")))
        .filter_map(|n| n.parse::<u64>().ok())
        .sum()
}

/// The program's own JSON snapshot, if it wrote one: its last image's,
/// else the last one written before an `exec`.
fn snapshot(dir: &Path, pid: u32) -> Option<PathBuf> {
    let own = outputs(dir, "snapshot.", ".json", pid).into_iter();
    own.take_while(|o| o.pid == pid).last().map(|o| o.path)
}

/// The page of the program's snapshot (live blocks at exit and faults).
fn deliver_html(dir: &Path, pid: u32, to: &Path) {
    let Some(path) = snapshot(dir, pid) else {
        eprintln!("aclalloc: the program wrote no JSON snapshot, so no page");
        return;
    };
    let page = std::fs::read_to_string(&path)
        .map_err(|e| e.to_string())
        .and_then(|text| viz::page_from_json(&text, "aclalloc run").map_err(|e| e.to_string()));
    match page {
        Ok(page) => match std::fs::write(to, page) {
            Ok(()) => eprintln!(
                "aclalloc: wrote the memory page {} (open it in any browser; it needs no network)",
                to.display()
            ),
            Err(e) => eprintln!("aclalloc: cannot write {}: {e}", to.display()),
        },
        Err(e) => eprintln!("aclalloc: cannot draw the program's snapshot: {e}"),
    }
}

fn deliver_json(dir: &Path, pid: u32, to: &Path) {
    let Some(path) = snapshot(dir, pid) else {
        eprintln!("aclalloc: the program wrote no JSON snapshot");
        return;
    };
    if let Err(e) = std::fs::copy(&path, to) {
        eprintln!("aclalloc: cannot write {}: {e}", to.display());
    }
    // The snapshots of the images the program replaced by `exec`, next to it.
    for o in outputs(dir, "snapshot.", ".json", pid) {
        if let (true, Some(n)) = (o.pid == pid && o.path != path, o.before_exec) {
            let mut name = to.as_os_str().to_owned();
            name.push(format!(".before-exec-{n}"));
            if let Err(e) = std::fs::copy(&o.path, &name) {
                eprintln!("aclalloc: cannot write {}: {e}", Path::new(&name).display());
            }
        }
    }
}
