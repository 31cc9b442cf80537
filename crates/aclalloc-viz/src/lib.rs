//! `aclalloc viz`: one self-contained, offline HTML page that draws a
//! snapshot and its recorded history: the memory timeline stacked by
//! allocation, the segments at any point, the largest live allocations,
//! out-of-memory failures and faults.
//!
//! The snapshot is read in Rust ([`model`], exact 64-bit arithmetic) and
//! embedded as JSON; `page.js` only draws. Depends only on std and
//! serde_json: a crate of its own, so that the `aclalloc` command draws pages
//! without linking the library.

pub mod model;

pub use self::model::VizError;

const TEMPLATE: &str = include_str!("page.html");
const STYLE: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");

/// The page for a snapshot's JSON text. `title` names it (e.g. the file).
pub fn page_from_json(snapshot: &str, title: &str) -> Result<String, VizError> {
    let value: serde_json::Value = serde_json::from_str(snapshot).map_err(|e| {
        VizError(format!(
            "the snapshot is not valid JSON ({e}); {}",
            model::SOURCES
        ))
    })?;
    page(&value, title)
}

/// The page for a parsed snapshot.
pub fn page(snapshot: &serde_json::Value, title: &str) -> Result<String, VizError> {
    let data = model::build(snapshot)?;
    let data = serde_json::to_string(&data).expect("the page's data serializes");
    // Inside <script>, "</script>" or "<!--" would end or change the
    // element; '<' only occurs in JSON strings, where \u003c reads the same.
    let data = data.replace('<', "\\u003c");
    Ok(TEMPLATE
        .replace("{{TITLE}}", &escape_html(title))
        .replace("{{STYLE}}", STYLE)
        .replace("{{SCRIPT}}", SCRIPT)
        .replace("{{DATA}}", &data))
}

fn escape_html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
