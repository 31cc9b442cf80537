//! What the Rust sources declare for C, read from their text: the names of
//! public items (so each header's cbindgen run can leave out the others'),
//! and the integer constants with their types and doc lines (so CANN's
//! typedef'd enums, `static const int` error codes and `U`-suffixed flags are
//! written from the same values the library uses).
//!
//! A text scan rather than cbindgen's own model because cbindgen has no API
//! listing items, and this keeps working wherever the modules move: it reads
//! every file under `src/`.

use std::path::Path;

/// One `pub const NAME: TYPE = VALUE;` of the sources.
pub struct Constant {
    pub name: String,
    pub ty: String,
    pub value: i64,
    pub doc: String,
}

/// Public item names and integer constants of every `.rs` file under `dir`.
pub struct Scan {
    pub names: Vec<String>,
    pub constants: Vec<Constant>,
}

/// [`Scan`] of the source directories `dirs` (the library's crates), their
/// files in the order of their paths inside their directory.
pub fn scan(dirs: &[std::path::PathBuf]) -> Scan {
    let mut scan = Scan {
        names: Vec::new(),
        constants: Vec::new(),
    };
    let mut files = Vec::new();
    for dir in dirs {
        let mut found = Vec::new();
        collect_rs_files(dir, &mut found);
        files.extend(
            found
                .into_iter()
                .map(|f| (f.strip_prefix(dir).unwrap().to_owned(), f)),
        );
    }
    files.sort();
    for (_, file) in files {
        let text = std::fs::read_to_string(&file).expect("read a source file");
        scan_text(&text, &mut scan);
    }
    scan.names.sort();
    scan.names.dedup();
    scan
}

fn collect_rs_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src/") {
        let path = entry.expect("read src/").path();
        if path.is_dir() {
            collect_rs_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn scan_text(text: &str, scan: &mut Scan) {
    let mut doc = String::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(d) = line.strip_prefix("///") {
            if !doc.is_empty() {
                doc.push(' ');
            }
            doc.push_str(d.trim());
            continue;
        }
        if line.starts_with("#[") {
            continue;
        }
        let item_doc = std::mem::take(&mut doc);
        let Some(rest) = line.strip_prefix("pub ") else {
            continue;
        };
        let rest = rest.trim_start_matches("unsafe ");
        let rest = rest.trim_start_matches("extern \"C\" ");
        for keyword in ["const ", "type ", "struct ", "enum ", "fn ", "static "] {
            let Some(after) = rest.strip_prefix(keyword) else {
                continue;
            };
            if keyword == "const " && after.starts_with("fn ") {
                break;
            }
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if name.is_empty() {
                break;
            }
            if keyword == "const " {
                if let Some(constant) = integer_constant(&name, after, &item_doc) {
                    scan.constants.push(constant);
                }
            }
            scan.names.push(name);
            break;
        }
    }
}

/// `NAME: TYPE = LITERAL;` with an integer literal, else None.
fn integer_constant(name: &str, decl: &str, doc: &str) -> Option<Constant> {
    let (_, typed) = decl.split_once(':')?;
    let (ty, value) = typed.split_once('=')?;
    let value = value.trim().strip_suffix(';')?.trim().replace('_', "");
    let value = match value.strip_prefix("0x") {
        Some(hex) => i64::from_str_radix(hex, 16).ok()?,
        None => value.parse().ok()?,
    };
    Some(Constant {
        name: name.to_owned(),
        ty: ty.trim().to_owned(),
        value,
        doc: doc.to_owned(),
    })
}
