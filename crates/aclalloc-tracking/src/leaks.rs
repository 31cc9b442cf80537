//! Where faults come from: allocating stacks on (`ACLALLOC_TRACK_STACKS`),
//! faults annotated with their symbolized stack, LeakSanitizer-style
//! suppressions (`ACLALLOC_SUPPRESSIONS`), and leaks grouped by stack.
//!
//! | variable | meaning |
//! | --- | --- |
//! | `ACLALLOC_TRACK_STACKS` | frames captured at each tracked allocation: a whole number (0: off), or `on`/`yes`/`true` for 16 |
//! | `ACLALLOC_SUPPRESSIONS` | file of `KIND:PATTERN` lines (`leak:load_weights`); a fault of that kind whose stack has a frame whose function, file or module contains PATTERN (`*`: any text) is left out of the report and its fault count, which says how many were |

use super::events::{Event, Fault};
use crate::base::env;
use aclalloc_core::history::stacks::{self, Frame, NO_STACK};
use std::sync::OnceLock;

const STACKS_VAR: &str = "ACLALLOC_TRACK_STACKS";
const SUPPRESSIONS_VAR: &str = "ACLALLOC_SUPPRESSIONS";

/// Applies `ACLALLOC_TRACK_STACKS` (at load time: allocates nothing).
pub(crate) fn stacks_from_env() {
    let accepted = "a number of frames (0: off), or on/yes/true for 16";
    let depth = env::with_var_no_alloc(STACKS_VAR, |raw| {
        let parsed = env::parsed(STACKS_VAR, raw, accepted, |text| {
            env::whole(text)
                .map(|n| n as usize)
                .or_else(|| env::truth(text).map(|on| if on { stacks::DEFAULT_DEPTH } else { 0 }))
        });
        env::or_default(parsed, 0, "off")
    });
    set_stack_depth(depth);
}

/// Tracked allocations capture stacks of up to `depth` frames from now on
/// (0: off); the history's allocations show them.
pub fn set_stack_depth(depth: usize) {
    stacks::set_depth(depth);
    if depth > 0 {
        super::history::show_stacks();
    }
}

/// One `KIND:PATTERN` line of the suppressions file.
struct Rule {
    kind: String,
    pattern: String,
}

/// The suppressions file's rules (read once, at the first report).
fn rules() -> &'static [Rule] {
    static RULES: OnceLock<Vec<Rule>> = OnceLock::new();
    RULES.get_or_init(|| {
        let Some(path) = env::path(env::var(SUPPRESSIONS_VAR).as_deref()) else {
            return Vec::new();
        };
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            super::add_note(format!(
                "{SUPPRESSIONS_VAR}={}: cannot read it ({e}); nothing is suppressed",
                path.display()
            ));
            String::new()
        });
        parse_rules(&text)
    })
}

fn parse_rules(text: &str) -> Vec<Rule> {
    let rule = |line: &str| {
        let (kind, pattern) = line.split_once(':')?;
        let pattern = pattern.trim();
        (!pattern.is_empty()).then(|| Rule {
            kind: kind.trim().to_string(),
            pattern: pattern.to_string(),
        })
    };
    let lines = text.lines().map(str::trim);
    lines
        .filter(|l| !l.starts_with('#'))
        .filter_map(rule)
        .collect()
}

/// Whether `text` contains `pattern`, `*` matching any text.
fn glob(pattern: &str, text: &str) -> bool {
    let mut rest = text;
    let mut parts = pattern.split('*').filter(|p| !p.is_empty());
    parts.all(|part| match rest.find(part) {
        Some(at) => {
            rest = &rest[at + part.len()..];
            true
        }
        None => false,
    })
}

/// The rule that suppresses a fault of `kind` allocated from `frames`.
fn suppressed_by<'r>(rules: &'r [Rule], kind: &str, frames: &[Frame]) -> Option<&'r str> {
    let kind_matches = |r: &&Rule| r.kind == kind;
    let hits = |r: &&Rule| {
        frames.iter().any(|f| {
            [&f.name, &f.filename, &f.module]
                .iter()
                .any(|t| glob(&r.pattern, t))
        })
    };
    let rule = rules.iter().filter(kind_matches).find(hits)?;
    Some(rule.pattern.as_str())
}

/// A fault with what the report says about where it came from.
pub(crate) struct Annotated {
    pub event: Event,
    /// The allocating stack, symbolized (empty without one).
    pub frames: Vec<Frame>,
    /// The suppression pattern that silences it.
    pub suppressed_by: Option<String>,
}

/// `events` annotated: stacks symbolized, suppressions applied.
pub(crate) fn annotate(events: &[Event]) -> Vec<Annotated> {
    let rules = rules();
    let annotated = |event: &Event| {
        let frames = match event.stack {
            NO_STACK => Vec::new(),
            id => stacks::frames(id),
        };
        let suppressed_by = suppressed_by(rules, event.fault.kind(), &frames);
        Annotated {
            event: *event,
            suppressed_by: suppressed_by.map(str::to_string),
            frames,
        }
    };
    events.iter().map(annotated).collect()
}

/// Leaks from one allocating stack.
pub(crate) struct LeakGroup<'a> {
    pub stack: stacks::StackId,
    pub count: u64,
    pub bytes: u64,
    pub frames: &'a [Frame],
}

impl LeakGroup<'_> {
    /// `3 leaks, 12 KiB, from load_weights at model.c:88`.
    pub fn title(&self) -> String {
        let s = if self.count == 1 { "" } else { "s" };
        let from = self
            .frames
            .first()
            .map_or_else(|| "an unknown stack".into(), Frame::site);
        format!("{} leak{s}, {}, from {from}", self.count, human(self.bytes))
    }
}

/// The leaks not suppressed that have a stack, grouped by it, the most
/// bytes first (then the most leaks).
pub(crate) fn leak_groups(faults: &[Annotated]) -> Vec<LeakGroup<'_>> {
    let mut groups: Vec<LeakGroup> = Vec::new();
    for a in faults {
        let Fault::Leak { size, .. } = a.event.fault else {
            continue;
        };
        if a.event.stack == NO_STACK || a.suppressed_by.is_some() {
            continue;
        }
        match groups.iter_mut().find(|g| g.stack == a.event.stack) {
            Some(g) => {
                g.count += 1;
                g.bytes += size as u64;
            }
            None => groups.push(LeakGroup {
                stack: a.event.stack,
                count: 1,
                bytes: size as u64,
                frames: &a.frames,
            }),
        }
    }
    groups.sort_by_key(|g| std::cmp::Reverse((g.bytes, g.count)));
    groups
}

/// Bytes as `512 B`, `12 KiB`, `1.5 MiB`.
pub(crate) fn human(bytes: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 || value >= 10.0 || value.fract() == 0.0 {
        format!("{} {}", value.round(), units[unit])
    } else {
        format!("{value:.1} {}", units[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(name: &str, file: &str) -> Frame {
        Frame {
            name: name.into(),
            filename: file.into(),
            line: 1,
            module: "/lib/libmodel.so".into(),
        }
    }

    #[test]
    fn patterns_match_function_file_or_module_with_wildcards() {
        let rules =
            parse_rules("# known\nleak:load_*weights\n\ndouble-free:cache.c\nleak:libmodel");
        let frames = [frame("load_big_weights", "/src/model.c")];
        assert_eq!(
            suppressed_by(&rules[..1], "leak", &frames),
            Some("load_*weights")
        );
        assert_eq!(suppressed_by(&rules[1..2], "leak", &frames), None);
        assert_eq!(
            suppressed_by(&rules[2..], "leak", &frames),
            Some("libmodel")
        );
        let other = [frame("main", "/src/cache.c")];
        assert_eq!(
            suppressed_by(&rules[1..2], "double-free", &other),
            Some("cache.c")
        );
        assert!(glob("a*c", "xabxc") && !glob("a*c", "ca"));
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(12 * 1024), "12 KiB");
        assert_eq!(human(1536 * 1024), "1.5 MiB");
        assert_eq!(human(147 * 1024 + 300), "147 KiB");
    }
}
