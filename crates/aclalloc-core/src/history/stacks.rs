//! Allocation stacks: the program counters of an allocation's call stack,
//! captured without symbol work and interned, so a block keeps one `u32`;
//! symbolized only when a report or snapshot is written.
//!
//! The library's own frames are dropped, so the first frame kept is the
//! user's call site (and a call forwarded through the library to a real
//! runtime reads as the runtime's): when the library is a shared object, by
//! their addresses at capture; when it is linked into a program (Rust
//! tests), the leading ones by their source files at symbolization.

use crate::base::sync::statics::AtomicUsize;
use crate::base::sync::Ordering;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::{c_void, CStr};
use std::sync::OnceLock;

/// An interned stack; [`NO_STACK`] for none.
pub type StackId = u32;
/// No stack was captured.
pub const NO_STACK: StackId = 0;
/// Frames kept when a stack depth is asked for without a number.
pub const DEFAULT_DEPTH: usize = 16;
/// The deepest stack kept.
pub(crate) const MAX_DEPTH: usize = 64;
/// Distinct stacks kept; later new ones are not recorded, so memory stays
/// bounded whatever the program does.
const MAX_STACKS: usize = 1 << 20;

/// Frames to capture at tracked allocations; 0: off.
static DEPTH: AtomicUsize = AtomicUsize::new(0);

/// Captures stacks of up to `depth` frames from now on (0: off).
pub fn set_depth(depth: usize) {
    DEPTH.store(depth.min(MAX_DEPTH), Ordering::Relaxed);
}

/// The frames captured per stack (0: off).
#[inline]
pub(crate) fn depth() -> usize {
    DEPTH.load(Ordering::Relaxed)
}

/// The caller's stack, interned, when capture is on; else [`NO_STACK`].
#[inline]
pub fn capture() -> StackId {
    match depth() {
        0 => NO_STACK,
        d => capture_depth(d),
    }
}

/// The caller's stack of up to `depth` frames, interned.
#[cold]
#[inline(never)]
pub(crate) fn capture_depth(depth: usize) -> StackId {
    let mut ips = [0usize; MAX_DEPTH];
    let depth = depth.min(MAX_DEPTH);
    let own = own_text();
    let mut n = 0;
    let mut record = |frame: &backtrace::Frame| {
        let ip = frame.ip() as usize;
        if ip != 0 && !own.as_ref().is_some_and(|r| r.contains(&ip)) {
            ips[n] = ip;
            n += 1;
        }
        n < depth
    };
    if depth > 0 {
        // SAFETY: the lock `trace` would take serializes Windows' dbghelp;
        // on Unix the unwinder it calls (_Unwind_Backtrace) is thread-safe.
        unsafe { backtrace::trace_unsynchronized(&mut record) };
    }
    // The Python frames the caller set go after the native ones (outermost).
    let mut all = [0usize; 2 * MAX_DEPTH];
    all[..n].copy_from_slice(&ips[..n]);
    let python = PYTHON.try_with(|p| {
        let p = p.borrow();
        let k = p.len().min(MAX_DEPTH);
        all[n..n + k].copy_from_slice(&p[..k]);
        k
    });
    intern(&all[..n + python.unwrap_or(0)])
}

/// Marks an entry of a stack as a Python frame (an index into
/// [`PythonFrames`]): no user-space code address has the top bit set.
const PYTHON_TAG: usize = 1 << (usize::BITS - 1);

thread_local! {
    /// The calling thread's Python frames, innermost first, as tagged
    /// indices: set by the Python package around calls that allocate.
    static PYTHON: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Every Python frame seen, interned.
#[derive(Default)]
struct PythonFrames {
    frames: Vec<Frame>,
    index: HashMap<(String, u32, String), usize>,
}

fn python_frames() -> &'static Mutex<PythonFrames> {
    static FRAMES: OnceLock<Mutex<PythonFrames>> = OnceLock::new();
    FRAMES.get_or_init(Mutex::default)
}

/// The calling thread's Python stack from now on, innermost first, as
/// `(filename, line, function)`; empty: none. Stacks captured on this thread
/// end with these frames.
pub fn set_python_frames<'a>(frames: impl Iterator<Item = (&'a str, u32, &'a str)>) {
    let mut tags = Vec::new();
    let mut table = python_frames().lock();
    for (file, line, name) in frames.take(MAX_DEPTH) {
        let key = (file.to_string(), line, name.to_string());
        if table.frames.len() >= MAX_STACKS && !table.index.contains_key(&key) {
            break;
        }
        let next = table.frames.len();
        let i = *table.index.entry(key).or_insert(next);
        if i == next {
            table.frames.push(Frame {
                name: name.into(),
                filename: file.into(),
                line,
                module: String::new(),
            });
        }
        tags.push(PYTHON_TAG | i);
    }
    drop(table);
    let _ = PYTHON.try_with(|p| *p.borrow_mut() = tags);
}

/// Interned stacks: `stacks[id - 1]` and the id of each.
#[derive(Default)]
struct Table {
    stacks: Vec<Box<[usize]>>,
    ids: HashMap<Box<[usize]>, StackId>,
}

static TABLE: OnceLock<Mutex<Table>> = OnceLock::new();

fn table() -> &'static Mutex<Table> {
    TABLE.get_or_init(Mutex::default)
}

/// The id of `ips` (a new one the first time).
pub(crate) fn intern(ips: &[usize]) -> StackId {
    if ips.is_empty() {
        return NO_STACK;
    }
    let mut t = table().lock();
    if let Some(&id) = t.ids.get(ips) {
        return id;
    }
    if t.stacks.len() >= MAX_STACKS {
        return NO_STACK;
    }
    t.stacks.push(ips.into());
    let id = t.stacks.len() as StackId;
    t.ids.insert(ips.into(), id);
    id
}

/// The program counters of stack `id`, innermost first.
pub(crate) fn program_counters(id: StackId) -> Vec<usize> {
    let t = table().lock();
    let i = (id as usize).wrapping_sub(1);
    t.stacks.get(i).map_or_else(Vec::new, |s| s.to_vec())
}

/// The address range of the library's own code when it is a shared object
/// (not when linked into the program, whose frames all lie there).
fn own_text() -> Option<std::ops::Range<usize>> {
    static OWN: OnceLock<Option<std::ops::Range<usize>>> = OnceLock::new();
    OWN.get_or_init(|| {
        let me = own_text as fn() -> Option<std::ops::Range<usize>> as usize;
        let mut found = None;
        let mut walk = |start: usize, end: usize, name: &CStr| {
            // The program itself has an empty name.
            if (start..end).contains(&me) && !name.is_empty() {
                found = Some(start..end);
            }
        };
        loaded_objects(&mut walk);
        found
    })
    .clone()
}

/// Calls `f(start, end, name)` with the span of each loaded object's
/// segments.
fn loaded_objects(f: &mut dyn FnMut(usize, usize, &CStr)) {
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _: libc::size_t,
        data: *mut c_void,
    ) -> libc::c_int {
        // SAFETY: `data` is the `&mut dyn FnMut` passed below, and
        // dl_iterate_phdr hands a valid `info` for the call.
        let (f, info) = unsafe {
            (
                &mut *(data as *mut &mut dyn FnMut(usize, usize, &CStr)),
                &*info,
            )
        };
        let (mut start, mut end) = (usize::MAX, 0);
        for i in 0..info.dlpi_phnum as usize {
            // SAFETY: `dlpi_phdr` has `dlpi_phnum` entries.
            let ph = unsafe { &*info.dlpi_phdr.add(i) };
            if ph.p_type == libc::PT_LOAD {
                let base = info.dlpi_addr as usize + ph.p_vaddr as usize;
                start = start.min(base);
                end = end.max(base + ph.p_memsz as usize);
            }
        }
        let name = if info.dlpi_name.is_null() {
            c""
        } else {
            // SAFETY: a non-null name is a C string owned by the loader.
            unsafe { CStr::from_ptr(info.dlpi_name) }
        };
        if start < end {
            f(start, end, name);
        }
        0
    }
    let mut f = f;
    // SAFETY: `each` only reads what the loader hands it and calls `f`.
    unsafe { libc::dl_iterate_phdr(Some(each), &mut f as *mut _ as *mut c_void) };
}

/// One symbolized frame, as PyTorch's snapshots name its parts.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Frame {
    /// The function (demangled), or `module+0xoffset` without symbols.
    pub name: String,
    /// The source file, or the module without line information.
    pub filename: String,
    /// The line (0: unknown).
    pub line: u32,
    /// The object file the code is in.
    #[serde(skip)]
    pub module: String,
}

impl Frame {
    /// `name at file:line`, or `name (module)` without line information.
    pub fn site(&self) -> String {
        let file = self.filename.rsplit('/').next().unwrap_or(&self.filename);
        if self.line > 0 {
            format!("{} at {file}:{}", self.name, self.line)
        } else {
            format!("{} ({file})", self.name)
        }
    }
}

/// The frames of stack `id`, innermost first (inlined calls each a frame),
/// the library's own leading frames left out.
pub fn frames(id: StackId) -> Vec<Frame> {
    static CACHE: OnceLock<Mutex<HashMap<usize, Vec<Frame>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Mutex::default);
    let mut out = Vec::new();
    let mut python = Vec::new();
    for ip in program_counters(id) {
        if ip & PYTHON_TAG != 0 {
            let table = python_frames().lock();
            python.extend(table.frames.get(ip & !PYTHON_TAG).cloned());
            continue;
        }
        let mut cache = cache.lock();
        let resolved = cache.entry(ip).or_insert_with(|| symbolize(ip));
        out.extend(resolved.iter().cloned());
    }
    if !python.is_empty() {
        // The Python frames stand where the interpreter's own begin (the
        // call into ctypes), as PyTorch interleaves them.
        let interpreter = |f: &Frame| {
            let module = f.module.rsplit('/').next().unwrap_or("");
            ["libffi", "_ctypes", "python", "libpython"]
                .iter()
                .any(|m| module.starts_with(m))
        };
        let cut = out.iter().position(interpreter).unwrap_or(out.len());
        out.truncate(cut);
        out.extend(python);
    }
    // Linked into a program, the library's frames are those of its sources
    // (debug information names functions without their paths).
    let own = |f: &Frame| {
        f.filename
            .starts_with(concat!(env!("CARGO_MANIFEST_DIR"), "/src/"))
            || f.filename.contains("/backtrace-0.")
    };
    let skip = out.iter().take_while(|f| own(f)).count();
    if skip < out.len() {
        out.drain(..skip);
    }
    out
}

/// The frames at `ip` (several when calls were inlined there).
fn symbolize(ip: usize) -> Vec<Frame> {
    let mut frames = Vec::new();
    backtrace::resolve(ip as *mut c_void, |symbol| {
        let name = symbol.name().map(|n| format!("{n:#}"));
        let filename = symbol.filename().map(|f| f.display().to_string());
        frames.push(Frame {
            name: name.unwrap_or_default(),
            filename: filename.unwrap_or_default(),
            line: symbol.lineno().unwrap_or(0),
            module: String::new(),
        });
    });
    let module = module_of(ip);
    if frames.is_empty() {
        frames.push(Frame::default_at(ip, &module));
    }
    for f in &mut frames {
        if f.name.is_empty() {
            f.name = Frame::default_at(ip, &module).name;
        }
        f.module = module.as_ref().map_or_else(String::new, |m| m.0.clone());
        if f.filename.is_empty() {
            f.filename = f.module.clone();
        }
    }
    frames
}

impl Frame {
    fn default_at(ip: usize, module: &Option<(String, usize)>) -> Frame {
        let (name, filename) = match module {
            Some((m, offset)) => {
                let short = m.rsplit('/').next().unwrap_or(m);
                (format!("{short}+{offset:#x}"), m.clone())
            }
            None => (format!("{ip:#x}"), String::new()),
        };
        Frame {
            name,
            module: filename.clone(),
            filename,
            line: 0,
        }
    }
}

/// The object `ip` lies in and its offset there.
fn module_of(ip: usize) -> Option<(String, usize)> {
    // SAFETY: dladdr writes `info`, which is plain data.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: any address may be asked about.
    if unsafe { libc::dladdr(ip as *const c_void, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: a non-null name from dladdr is a C string owned by the loader.
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    let name = name.to_string_lossy().into_owned();
    let name = if name.is_empty() {
        std::env::current_exe().map_or(name, |p| p.display().to_string())
    } else {
        name
    };
    Some((name, ip.wrapping_sub(info.dli_fbase as usize)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn leaf() -> StackId {
        capture_depth(8)
    }

    #[test]
    fn a_captured_stack_names_its_caller_with_file_and_line() {
        // Not unrolled: one call site.
        let ids: Vec<StackId> = (0..std::hint::black_box(2)).map(|_| leaf()).collect();
        let id = ids[0];
        assert_ne!(id, NO_STACK);
        assert_eq!(ids[1], id, "the same call site interns to one id");
        // Linked into the test, the library's frames are told by their
        // files, and this test is one: read the symbols whole.
        let all: Vec<Frame> = program_counters(id)
            .into_iter()
            .flat_map(symbolize)
            .collect();
        let here = |f: &Frame| f.filename.ends_with("history/stacks.rs") && f.line > 0;
        assert!(all.iter().any(here), "{all:#?}");
        let shown = frames(id);
        assert!(!shown.is_empty() && !here(&shown[0]), "{shown:#?}");
    }

    #[test]
    fn python_frames_follow_the_native_ones() {
        set_python_frames([("model.py", 12, "load"), ("main.py", 3, "<module>")].into_iter());
        let id = capture_depth(0);
        set_python_frames(std::iter::empty());
        let names: Vec<(String, u32)> = frames(id).into_iter().map(|f| (f.name, f.line)).collect();
        assert_eq!(
            names,
            [("load".to_string(), 12), ("<module>".to_string(), 3)]
        );
        assert_eq!(capture_depth(0), NO_STACK);
    }

    #[test]
    fn interning_dedupes_and_empty_is_none() {
        assert_eq!(intern(&[]), NO_STACK);
        let a = intern(&[1, 2, 3]);
        assert_eq!(intern(&[1, 2, 3]), a);
        assert_ne!(intern(&[1, 2]), a);
        assert_eq!(program_counters(a), [1, 2, 3]);
    }
}
