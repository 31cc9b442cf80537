//! The layer checker. The crates of the workspace are the layers, and a
//! crate depends only on crates of lower layers: Cargo refuses a cycle, and
//! this test refuses a dependency on a sibling or on a higher layer. Inside
//! the two crates that hold more than one layer (`aclalloc-core`: base,
//! registry, history; `aclalloc-capi`: default_allocator, interpose, ffi),
//! every module imports only modules of lower layers, and the files of the
//! C ABI import one another without a cycle, so a newcomer can read the
//! library bottom-up (docs/ARCHITECTURE.md draws the layers).
//!
//! Run alone with `cargo test --release --test layers`; `scripts/test-all.sh`
//! runs it with the other tests, so CI does too.
//!
//! What counts as an import: every `crate::NAME` path (in `use` items, in
//! groups `crate::{a, b::c}`, and written inline in code). `super::` paths
//! are not followed: by convention they stay inside their module. Comments, string
//! literals and test modules (`#[cfg(test)] mod x { .. }` and the files of
//! `#[cfg(test)] mod x;`) are left out: tests may reach across layers.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layer table: a module may import a module of a strictly lower layer
/// only. Modules of one layer are siblings and do not import each other;
/// they meet through traits and slots defined in `base`. Each subsystem of
/// layer 2 is a crate of its own, which `aclalloc-capi` names by the module
/// name written here.
const LAYERS: &[(&str, u8)] = &[
    // Errors, the per-thread error log, the C vocabulary, ids and handle
    // tables, statistics, the device port, "the stream being served".
    ("base", 0),
    // Which allocator serves which stream, and the allocator API; the
    // allocation history recorder the subsystems write to.
    ("registry", 1),
    ("history", 1),
    // Independent subsystems.
    ("runtime", 2),
    ("pool", 2),
    ("plugin", 2),
    ("tracking", 2),
    // Built from the subsystems.
    ("default_allocator", 3),
    ("stream_ordered", 3),
    ("interpose", 3),
    // The C ABI and the composition root (process init).
    ("ffi", 4),
];

fn layer(module: &str) -> Option<u8> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|&(_, l)| l)
}

/// Imports that break the table today, each with the reason it is still
/// there. The test fails when one is fixed and not removed from here, so
/// this list only shrinks.
const KNOWN: &[(&str, &str)] = &[];

/// `src` with comments, string and char literals blanked out (lengths kept
/// irrelevant: only the text matters).
fn strip_comments_and_strings(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if b[i] == b'r' && (b[i + 1..].starts_with(b"\"") || b[i + 1..].starts_with(b"#")) {
            // Raw string r"..", r#".."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while j < b.len() && b[j] == b'#' {
                hashes += 1;
                j += 1;
            }
            if j < b.len() && b[j] == b'"' {
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat(b'#').take(hashes))
                    .collect();
                j += 1;
                while j < b.len() && !b[j..].starts_with(&close) {
                    j += 1;
                }
                i = j + close.len();
                out.push_str("\"\"");
            } else {
                out.push('r');
                i += 1;
            }
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            let rest = &src[i + 1..];
            if let Some(end) = char_literal_len(rest) {
                i += 1 + end;
                out.push_str("' '");
            } else {
                out.push('\'');
                i += 1;
            }
        } else {
            let c = src[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The length of a char literal's rest after its opening quote, if `rest`
/// starts one (and not a lifetime).
fn char_literal_len(rest: &str) -> Option<usize> {
    let mut chars = rest.char_indices();
    let (_, first) = chars.next()?;
    if first == '\\' {
        let close = rest.find('\'')?;
        return Some(close + 1);
    }
    let (at, second) = chars.next()?;
    (second == '\'').then_some(at + 1)
}

/// Removes `#[cfg(test)] mod name { .. }` blocks; returns the names of
/// `#[cfg(test)] mod name;` declarations (their files are tests too).
fn strip_test_modules(src: &str) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut test_files = Vec::new();
    let mut rest = src;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let trimmed = after.trim_start();
        let item = trimmed
            .strip_prefix("pub(crate) ")
            .or_else(|| trimmed.strip_prefix("pub "))
            .unwrap_or(trimmed);
        if let Some(m) = item.strip_prefix("mod ") {
            let name: String = m
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let after_name = m[name.len()..].trim_start();
            if let Some(body) = after_name.strip_prefix('{') {
                let mut depth = 1;
                let mut end = 0;
                for (i, c) in body.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = i + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                rest = &body[end..];
                continue;
            }
            if let Some(tail) = after_name.strip_prefix(';') {
                test_files.push(name);
                rest = tail;
                continue;
            }
        }
        rest = after;
    }
    out.push_str(rest);
    (out, test_files)
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first path segment of each item of a `{ .. }` group starting at
/// `group` (just after its `{`).
fn group_heads(group: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut at_item_start = true;
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => at_item_start = true,
            c if at_item_start && !c.is_whitespace() => {
                at_item_start = false;
                if depth == 0 {
                    heads.push(ident_at(&group[i..]).to_string());
                }
            }
            _ => {}
        }
    }
    heads
}

/// Every top-level name `code` reaches through `crate::`.
fn imported_roots(code: &str) -> BTreeSet<String> {
    let mut roots = BTreeSet::new();
    let mut add_after = |after: &str| {
        if let Some(group) = after.strip_prefix('{') {
            roots.extend(group_heads(group));
        } else {
            roots.insert(ident_at(after).to_string());
        }
    };
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        add_after(&code[at + "crate::".len()..]);
    }
    roots.retain(|r| !r.is_empty() && r != "self");
    roots
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The source directories of the crates that hold more than one layer. Both
/// name their modules from `crate::` (`aclalloc-capi` imports the crates
/// below it under their module names), so one layer table covers both.
const SOURCES: [&str; 2] = ["crates/aclalloc-core/src", "crates/aclalloc-capi/src"];

/// Each library crate of the workspace and its layer: the lowest layer of
/// the modules it holds for `aclalloc-core`, the highest for `aclalloc-capi`.
/// `aclalloc-viz` draws snapshots with no part of the library, and the
/// command (`aclalloc-cli`) uses it alone; the `aclalloc` package links
/// every crate and sits above them all.
const CRATES: &[(&str, u8)] = &[
    ("aclalloc-core", 0),
    ("aclalloc-pool", 2),
    ("aclalloc-runtime", 2),
    ("aclalloc-tracking", 2),
    ("aclalloc-plugin", 2),
    ("aclalloc-viz", 2),
    ("aclalloc-capi", 4),
    ("aclalloc-cli", 3),
    ("aclalloc", 5),
];

/// The `aclalloc-*` names of the `[dependencies]` table of `manifest`.
fn workspace_dependencies(manifest: &str) -> Vec<String> {
    let mut in_dependencies = false;
    let mut found = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_dependencies = line == "[dependencies]";
        } else if in_dependencies && line.starts_with("aclalloc") {
            found.push(ident_at(&line.replace('-', "_")).replace('_', "-"));
        }
    }
    found
}

#[test]
fn every_crate_depends_only_on_crates_of_lower_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let layer_of = |name: &str| CRATES.iter().find(|(c, _)| *c == name).map(|&(_, l)| l);
    let mut members: Vec<String> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    members.sort();
    members.push("aclalloc".into());
    let mut wrong = Vec::new();
    for member in &members {
        let manifest = if member == "aclalloc" {
            root.join("Cargo.toml")
        } else {
            root.join("crates").join(member).join("Cargo.toml")
        };
        let Some(from) = layer_of(member) else {
            wrong.push(format!(
                "crate `{member}` is not in CRATES of tests/layers.rs: add it"
            ));
            continue;
        };
        let text = std::fs::read_to_string(&manifest).unwrap();
        for dep in workspace_dependencies(&text) {
            match layer_of(&dep) {
                Some(to) if to < from => {}
                Some(_) => wrong.push(format!("`{member}` depends on `{dep}`, not a lower layer")),
                None => wrong.push(format!("`{member}` depends on `{dep}`, not in CRATES")),
            }
        }
    }
    assert_eq!(members.len(), CRATES.len(), "{members:?}");
    assert!(
        wrong.is_empty(),
        "crate dependencies:\n  {}",
        wrong.join("\n  ")
    );
}

#[test]
fn the_crate_checker_reads_the_dependencies_table_only() {
    let manifest = "[package]\nname = \"aclalloc-x\"\n[dependencies]\n\
                    aclalloc-core = { path = \"../aclalloc-core\" }\nlibc = \"0.2\"\n\
                    [dev-dependencies]\naclalloc-pool = { path = \"../aclalloc-pool\" }\n";
    assert_eq!(workspace_dependencies(manifest), ["aclalloc-core"]);
}

/// `(importing module, imported module) -> files`, for every import in
/// the library's sources outside tests.
fn module_imports() -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut imports: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for dir in SOURCES {
        add_module_imports(dir, &mut imports);
    }
    imports
}

/// [`module_imports`] of the source directory `dir` into `imports`.
fn add_module_imports(dir: &str, imports: &mut BTreeMap<(String, String), BTreeSet<String>>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut test_files = BTreeSet::new();
    let mut stripped = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let (code, tests) = strip_test_modules(&strip_comments_and_strings(&text));
        let dir = if file.file_name().unwrap() == "mod.rs" || file.parent().unwrap() == src {
            file.parent().unwrap().to_path_buf()
        } else {
            file.with_extension("")
        };
        for t in tests {
            test_files.insert(dir.join(format!("{t}.rs")));
            test_files.insert(dir.join(&t).join("mod.rs"));
        }
        stripped.push((file.clone(), code));
    }
    for (file, code) in stripped {
        if test_files.contains(&file) {
            continue;
        }
        let rel = file.strip_prefix(&src).unwrap();
        let parts: Vec<&str> = rel.iter().map(|p| p.to_str().unwrap()).collect();
        // The crate root only declares the modules and names the crates
        // below.
        if parts.len() == 1 {
            continue;
        }
        let module = parts[0].to_string();
        let shown = format!("{dir}/{}", parts.join("/"));
        for root in imported_roots(&code) {
            if root != module {
                imports
                    .entry((module.clone(), root))
                    .or_default()
                    .insert(shown.clone());
            }
        }
    }
}

#[test]
fn every_module_imports_only_lower_layers() {
    let mut wrong = Vec::new();
    let mut known_seen = BTreeSet::new();
    for ((from, to), files) in module_imports() {
        let Some(from_layer) = layer(&from) else {
            wrong.push(format!(
                "module `{from}` is not in the layer table of tests/layers.rs: add it"
            ));
            continue;
        };
        let allowed = match layer(&to) {
            Some(to_layer) => to_layer < from_layer,
            // A name of the crate root (a re-export in lib.rs): name the
            // module that defines it instead, so the layer shows.
            None => false,
        };
        if allowed {
            continue;
        }
        for file in files {
            if KNOWN.contains(&(file.as_str(), to.as_str())) {
                known_seen.insert((file, to.clone()));
                continue;
            }
            let why = match layer(&to) {
                Some(l) if l == from_layer => "a sibling of the same layer",
                Some(_) => "a higher layer",
                None => "the crate root (use the defining module's path)",
            };
            wrong.push(format!("{file}: `{from}` imports `crate::{to}`, {why}"));
        }
    }
    for (file, to) in KNOWN {
        if !known_seen.contains(&(file.to_string(), to.to_string())) {
            wrong.push(format!(
                "{file} no longer imports `{to}`: remove it from KNOWN in tests/layers.rs"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layer table (see docs/ARCHITECTURE.md):\n  {}",
        wrong.join("\n  ")
    );
}

#[test]
fn the_checker_sees_imports_in_groups_and_inline_paths() {
    let code = "use crate::{base::error::Error, registry::{a, b}};\n\
                fn f() { crate::pool::x(); let _ = $crate::ffi::y; }";
    let roots = imported_roots(code);
    assert_eq!(
        roots.into_iter().collect::<Vec<_>>(),
        ["base", "pool", "registry"]
    );
}

#[test]
fn the_checker_ignores_comments_strings_and_test_modules() {
    let code = strip_comments_and_strings(
        "// crate::ffi\n/* crate::ffi */ let s = \"crate::ffi\"; let c = '\"';\n\
         #[cfg(test)]\nmod tests { use crate::ffi; }\n#[cfg(test)]\nmod more;\nuse crate::base;",
    );
    let (code, test_files) = strip_test_modules(&code);
    assert_eq!(test_files, ["more"]);
    assert_eq!(
        imported_roots(&code).into_iter().collect::<Vec<_>>(),
        ["base"]
    );
}

// --- The files of the C ABI ---

/// The node of a file of `crates/aclalloc-capi/src/ffi/`: `cann/memory`, `wiring/process`; the
/// files of a directory below those (`ext/pool/`) are one node with it.
fn ffi_node(relative: &Path) -> Option<String> {
    let parts: Vec<String> = relative
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    match parts.as_slice() {
        [dir, file] if file != "mod" => Some(format!("{dir}/{file}")),
        [dir, sub, ..] if parts.len() > 2 => Some(format!("{dir}/{sub}")),
        _ => None,
    }
}

/// The nodes `code` names through `crate::ffi::DIR::FILE` (or `$crate::`,
/// as the export macros do), groups included.
fn ffi_references(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (at, _) in code.match_indices("crate::ffi::") {
        let after = &code[at + "crate::ffi::".len()..];
        let dir = ident_at(after);
        if !["cann", "ext", "wiring"].contains(&dir) {
            continue; // `boundary`: the bottom layer's, re-exported
        }
        let rest = &after[dir.len()..];
        let Some(rest) = rest.strip_prefix("::") else {
            continue;
        };
        let files = match rest.strip_prefix('{') {
            Some(group) => group_heads(group),
            None => vec![ident_at(rest).to_string()],
        };
        found.extend(files.into_iter().map(|f| format!("{dir}/{f}")));
    }
    found
}

/// `file node -> nodes it names`, outside comments, strings and tests.
fn ffi_file_imports() -> BTreeMap<String, BTreeSet<String>> {
    let ffi = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/aclalloc-capi/src/ffi");
    let mut files = Vec::new();
    rust_files(&ffi, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in files {
        let Some(node) = ffi_node(path.strip_prefix(&ffi).unwrap()) else {
            continue;
        };
        let text = std::fs::read_to_string(&path).unwrap();
        let (code, _) = strip_test_modules(&strip_comments_and_strings(&text));
        let named = graph.entry(node.clone()).or_default();
        named.extend(ffi_references(&code).into_iter().filter(|n| *n != node));
    }
    graph
}

/// A cycle of `graph`, if it has one.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            return Some(path[at..].to_vec());
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

#[test]
fn the_c_abi_files_import_one_another_without_a_cycle() {
    let graph = ffi_file_imports();
    assert!(graph.len() > 30, "{graph:?}");
    if let Some(found) = cycle(&graph) {
        panic!(
            "the files of crates/aclalloc-capi/src/ffi import one another in a cycle: {}",
            found.join(" -> ")
        );
    }
    // The wiring stands under the exports; only the composition root,
    // which builds the device port and installs the pool's callbacks,
    // reaches up to them.
    for (node, named) in &graph {
        if node.starts_with("wiring/") && node != "wiring/process" {
            let up: Vec<_> = named.iter().filter(|n| !n.starts_with("wiring/")).collect();
            assert!(up.is_empty(), "{node} reaches the exports: {up:?}");
        }
    }
}

#[test]
fn the_file_checker_finds_a_cycle_and_reads_groups() {
    let refs = ffi_references(
        "use crate::ffi::wiring::{args, host::host}; $crate::ffi::cann::memory::f();",
    );
    let want: BTreeSet<String> = ["wiring/args", "wiring/host", "cann/memory"]
        .map(String::from)
        .into();
    assert_eq!(refs, want);
    let graph: BTreeMap<String, BTreeSet<String>> =
        [("a", vec!["b"]), ("b", vec!["c"]), ("c", vec!["a"])]
            .into_iter()
            .map(|(n, e)| (n.to_string(), e.into_iter().map(String::from).collect()))
            .collect();
    assert_eq!(cycle(&graph).unwrap().len(), 3);
    assert_eq!(
        ffi_node(Path::new("ext/pool/stats.rs")).as_deref(),
        Some("ext/pool")
    );
}
