//! Reading the library's environment variables, one set of rules for all of
//! them (docs/ENVIRONMENT.md lists them):
//!
//! - Unset or blank means the default. Text is trimmed and must be UTF-8;
//!   file names are taken byte for byte ([`path`]).
//! - Words the library defines (truth values, choices, keys, units) match in
//!   any case. Truth values: `1`, `true`, `yes`, `on`, `0`, `false`, `no`,
//!   `off`. Sizes: bytes, or a whole number with a binary unit (`16GiB`,
//!   `512 MiB`, `1GB` = 2^30 bytes).
//! - Lists are `key:value,key:value`; an unknown key, a key given twice and
//!   two contradicting keys are errors.
//! - Anything else is a [`ConfigError`] naming the variable, the offending
//!   text and what is accepted, never silently ignored. Variables read where
//!   no call can fail (at load time) print it as one line on stderr and take
//!   their default ([`or_default`]).
//!
//! Also [`Interned`]: the one way runtime text gets a `'static` life, for
//! errors that must stay `Copy`.

use super::fixed_line::Line;
use std::ffi::OsStr;
use std::fmt;
use std::os::unix::ffi::OsStrExt as _;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

/// What a variable accepts, as the error message shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accepted {
    /// A description ("a whole number from 1 to 64").
    Text(&'static str),
    /// The keys of a `key:value` list.
    Keys(&'static [&'static str]),
}

impl fmt::Display for Accepted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Accepted::Text(text) => write!(f, "accepted: {text}"),
            Accepted::Keys(keys) => {
                // Written piece by piece: load-time messages do not allocate.
                f.write_str("accepted keys: ")?;
                for (i, key) in keys.iter().enumerate() {
                    f.write_str(if i > 0 { ", " } else { "" })?;
                    f.write_str(key)?;
                }
                Ok(())
            }
        }
    }
}

/// What is wrong with a variable's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The whole value (the excerpt) is not accepted.
    Value,
    /// The value is not UTF-8 (the excerpt shows it with U+FFFD).
    NotUtf8,
    /// A list item (the excerpt) has no `:`.
    NotKeyValue,
    /// A list item (the excerpt) names no known key.
    UnknownKey,
    /// The value (the excerpt) of a known key is not accepted.
    KeyValue,
    /// A key is given more than once.
    Duplicate,
    /// Two keys (the key and the excerpt) contradict each other.
    Conflict,
}

/// The longest excerpt an error keeps; longer text is cut and marked `...`.
pub const EXCERPT: usize = 40;

/// A bounded, heap-free copy of the offending text (so `Error` stays `Copy`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Excerpt {
    bytes: [u8; EXCERPT],
    len: u8,
    cut: bool,
}

impl Excerpt {
    /// The first `EXCERPT` bytes of `text`, cut at a character boundary.
    pub fn new(text: &str) -> Self {
        Excerpt::lossy(text.as_bytes())
    }

    /// `bytes` as text (as [`new`](Excerpt::new)), each invalid sequence shown as U+FFFD.
    pub fn lossy(bytes: &[u8]) -> Self {
        let mut excerpt = Excerpt {
            bytes: [0; EXCERPT],
            len: 0,
            cut: false,
        };
        for chunk in bytes.utf8_chunks() {
            let invalid = (!chunk.invalid().is_empty()).then_some(char::REPLACEMENT_CHARACTER);
            if !chunk
                .valid()
                .chars()
                .chain(invalid)
                .all(|c| excerpt.push(c))
            {
                break;
            }
        }
        excerpt
    }

    /// Appends `c`; false (and marked cut) when it does not fit.
    fn push(&mut self, c: char) -> bool {
        let len = self.len as usize;
        if len + c.len_utf8() > EXCERPT {
            self.cut = true;
            return false;
        }
        c.encode_utf8(&mut self.bytes[len..]);
        self.len += c.len_utf8() as u8;
        true
    }

    /// No text kept (shown as `(not shown)`).
    const ELIDED: Excerpt = Excerpt {
        bytes: [0; EXCERPT],
        len: 0,
        cut: true,
    };

    /// The text kept.
    pub fn as_str(&self) -> &str {
        // Only whole characters are pushed: the prefix is UTF-8.
        std::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or("")
    }
}

impl fmt::Display for Excerpt {
    /// Quoted, control characters escaped, `...` after the quote when cut.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.cut && self.len == 0 {
            return f.write_str("(not shown)");
        }
        write!(f, "\"{}\"", self.as_str().escape_debug())?;
        if self.cut {
            f.write_str("...")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Excerpt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A variable whose value is refused. `Copy` and heap-free; `Error` holds
/// it [interned](ConfigError::interned).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The variable's name.
    pub variable: &'static str,
    /// What is wrong.
    pub problem: Problem,
    /// The key concerned ("" for variables that are not lists).
    pub key: &'static str,
    /// The offending text.
    pub text: Excerpt,
    /// What would have been accepted.
    pub accepted: Accepted,
}

impl ConfigError {
    /// `text`, the whole value of `variable`, is not accepted.
    pub fn value(variable: &'static str, text: &str, accepted: Accepted) -> Self {
        ConfigError {
            variable,
            problem: Problem::Value,
            key: "",
            text: Excerpt::new(text),
            accepted,
        }
    }

    /// This error in static memory, so that `Error` holds a pointer and every
    /// `Result` stays small. Equal errors share one copy.
    pub fn interned(self) -> &'static ConfigError {
        // At most 256 distinct errors keep their offending text.
        static KEPT: Interned<ConfigError> = Interned::new(256);
        static ELIDED: Interned<ConfigError> = Interned::new(usize::MAX);
        self.intern_in(&KEPT, &ELIDED)
    }

    /// Past the bound of `kept`, a new error loses its offending text and goes
    /// to `elided`, so those copies are bounded too.
    fn intern_in(self, kept: &Interned<Self>, elided: &Interned<Self>) -> &'static Self {
        let leak = |e: &Self| -> &'static Self { Box::leak(Box::new(*e)) };
        let without_text = ConfigError {
            text: Excerpt::ELIDED,
            ..self
        };
        kept.get(&self, leak)
            .or_else(|| elided.get(&without_text, leak))
            .unwrap_or_else(|| leak(&without_text))
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (variable, key, text, accepted) = (self.variable, self.key, self.text, self.accepted);
        write!(f, "Environment variable {variable} is invalid. Reason: ")?;
        match self.problem {
            Problem::Value => write!(f, "the value {text} is not accepted; {accepted}"),
            Problem::NotUtf8 => write!(f, "the value {text} is not UTF-8 text; {accepted}"),
            Problem::NotKeyValue => write!(f, "{text} is not key:value; {accepted}"),
            Problem::UnknownKey => {
                let name = Excerpt::new(text.as_str().split(':').next().unwrap_or("").trim());
                write!(f, "unknown key {name} in {text}; {accepted}")
            }
            Problem::KeyValue => write!(f, "the value {text} of {key} is not accepted; {accepted}"),
            Problem::Duplicate => write!(f, "{key} is given more than once; give each key once"),
            Problem::Conflict => {
                let why = match accepted {
                    Accepted::Text(why) => why,
                    Accepted::Keys(_) => "give one of them",
                };
                let other = text.as_str();
                write!(f, "{key} and {other} contradict each other: {why}")
            }
        }
    }
}

impl std::error::Error for ConfigError {}

/// Static copies of run-time text for errors that hold only `'static`
/// references: equal values share one copy, and at most `bound` are leaked.
pub struct Interned<T: ?Sized + 'static> {
    kept: Mutex<Vec<&'static T>>,
    bound: usize,
}

impl<T: ?Sized + PartialEq> Interned<T> {
    /// An empty set that keeps at most `bound` values.
    pub const fn new(bound: usize) -> Self {
        Interned {
            kept: Mutex::new(Vec::new()),
            bound,
        }
    }

    /// The kept copy equal to `value`, or a new one made by `leak`; `None`
    /// when `value` is new and `bound` values are kept already.
    pub fn get(&self, value: &T, leak: impl FnOnce(&T) -> &'static T) -> Option<&'static T> {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = kept.iter().find(|k| **k == value) {
            return Some(found);
        }
        if kept.len() >= self.bound {
            return None;
        }
        let new = leak(value);
        kept.push(new);
        Some(new)
    }
}

/// The result of reading a variable.
pub type Result<T> = std::result::Result<T, ConfigError>;

/// The value of `variable` in the process environment, as the system has it.
pub fn var(variable: &str) -> Option<std::ffi::OsString> {
    std::env::var_os(variable)
}

/// Calls `f` with the value of `variable` from `getenv`, without allocating
/// (for load-time code); the value lives only during `f`.
pub fn with_var_no_alloc<R>(variable: &str, f: impl FnOnce(Option<&OsStr>) -> R) -> R {
    let mut name = [0u8; 64];
    if variable.len() >= name.len() || variable.contains('\0') {
        return f(None);
    }
    name[..variable.len()].copy_from_slice(variable.as_bytes());
    // SAFETY: `name` is NUL-terminated (zero-filled past the copied bytes).
    let value = unsafe { libc::getenv(name.as_ptr().cast()) };
    if value.is_null() {
        return f(None);
    }
    // SAFETY: getenv returns a NUL-terminated string that stays valid until
    // the environment changes; it is only read during `f`, and the callers
    // run before any thread could change it.
    let bytes = unsafe { std::ffi::CStr::from_ptr(value) }.to_bytes();
    f(Some(OsStr::from_bytes(bytes)))
}

/// The text of a variable: `None` when unset or blank, trimmed otherwise;
/// not UTF-8: an error naming the variable and what it accepts.
pub fn text<'a>(
    variable: &'static str,
    raw: Option<&'a OsStr>,
    accepted: Accepted,
) -> Result<Option<&'a str>> {
    let Some(raw) = raw else { return Ok(None) };
    match raw.to_str() {
        Some(text) => Ok(Some(text.trim()).filter(|t| !t.is_empty())),
        None => Err(ConfigError {
            variable,
            problem: Problem::NotUtf8,
            key: "",
            text: Excerpt::lossy(raw.as_bytes()),
            accepted,
        }),
    }
}

/// The value of `variable` parsed by `parse` (`None` from `parse`: refused,
/// with `accepted` in the message); `Ok(None)` when unset or blank.
pub fn parsed<T>(
    variable: &'static str,
    raw: Option<&OsStr>,
    accepted: &'static str,
    parse: impl FnOnce(&str) -> Option<T>,
) -> Result<Option<T>> {
    let accepted = Accepted::Text(accepted);
    match text(variable, raw, accepted)? {
        None => Ok(None),
        Some(text) => parse(text)
            .map(Some)
            .ok_or_else(|| ConfigError::value(variable, text, accepted)),
    }
}

/// A truth-valued variable: `Ok(None)` when unset or blank.
pub fn truth_var(variable: &'static str, raw: Option<&OsStr>) -> Result<Option<bool>> {
    parsed(variable, raw, TRUTH_VALUES, truth)
}

/// What [`truth`] accepts, for messages.
pub const TRUTH_VALUES: &str = "1, true, yes, on, 0, false, no, off (any case)";

/// A file name: `None` when unset or empty; byte for byte otherwise (file
/// names need not be UTF-8, and may begin or end with a space).
pub fn path(raw: Option<&OsStr>) -> Option<PathBuf> {
    raw.filter(|r| !r.is_empty()).map(PathBuf::from)
}

/// For a variable read where no call can fail (at load time): its value, or
/// `default`, saying so on stderr when the value is invalid.
pub fn or_default<T>(value: Result<Option<T>>, default: T, default_text: &str) -> T {
    or_default_to(value, default, default_text, &mut std::io::stderr())
}

fn or_default_to<T>(
    value: Result<Option<T>>,
    default: T,
    default_text: &str,
    out: &mut dyn std::io::Write,
) -> T {
    let error = match value {
        Ok(value) => return value.unwrap_or(default),
        Err(error) => error,
    };
    use std::fmt::Write as _;
    // Formatted on the stack and written at once: no allocation, and the
    // line is not interleaved with other output.
    let mut line = Line::default();
    let _ = writeln!(
        line,
        "==aclalloc== {error}. Using the default: {default_text}."
    );
    let _ = out.write_all(line.as_bytes());
    default
}

// The value syntaxes, on trimmed text.

/// `1/true/yes/on` and `0/false/no/off`, any case.
pub fn truth(text: &str) -> Option<bool> {
    let is = |words: [&str; 4]| words.iter().any(|w| w.eq_ignore_ascii_case(text.trim()));
    let yes = is(["1", "true", "yes", "on"]);
    (yes || is(["0", "false", "no", "off"])).then_some(yes)
}

/// The value paired with `text` in `choices`, any case.
pub fn word<T: Clone>(text: &str, choices: &[(&str, T)]) -> Option<T> {
    let text = text.trim();
    choices
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(text))
        .map(|(_, value)| value.clone())
}

/// A whole decimal number (no sign, no unit).
pub fn whole(text: &str) -> Option<u64> {
    let text = text.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// A finite decimal number (`128`, `0.8`).
pub fn number(text: &str) -> Option<f64> {
    text.trim().parse::<f64>().ok().filter(|n| n.is_finite())
}

/// A size in bytes: `4096`, `16GiB`, `512 MiB`, `1G`, `8kb` (units binary,
/// any case). Overflow is refused.
pub fn size(text: &str) -> Option<usize> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let number = usize::try_from(whole(digits)?).ok()?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return None,
    };
    number.checked_mul(1usize << shift)
}

/// What [`size`] accepts, for messages.
pub const SIZE_SYNTAX: &str =
    "bytes, or a whole number with a binary unit: K, KB, KiB, M, MB, MiB, G, GB, GiB, T, TB, TiB (16GiB, 512MiB)";

// `key:value` lists.

/// One key of a `key:value,key:value` variable that configures a `T`.
pub struct Key<T> {
    /// The key.
    pub name: &'static str,
    /// What its value may be, for messages.
    pub accepted: &'static str,
    /// Applies a (trimmed, non-empty) value; `None`: the value is refused.
    pub set: fn(&mut T, &str) -> Option<()>,
}

/// The keys of a `key:value` variable.
pub struct KeyList<T: 'static> {
    /// The keys.
    pub keys: &'static [Key<T>],
    /// Their names, in the same order (from [`key_names`]).
    pub names: &'static [&'static str],
    /// Pairs of keys that cannot both be given, and why.
    pub exclusive: &'static [(&'static str, &'static str, &'static str)],
}

/// The names of `keys`, for [`KeyList::names`]: `N` is `keys.len()`.
pub const fn key_names<T, const N: usize>(keys: &[Key<T>]) -> [&'static str; N] {
    assert!(keys.len() == N, "N must be the number of keys");
    let mut names = [""; N];
    let mut i = 0;
    while i < N {
        names[i] = keys[i].name;
        i += 1;
    }
    names
}

/// The items of a `key:value,key:value` list: split at the commas outside
/// brackets, so that a value such as PyTorch's `[256:1,512:2]` stays whole.
fn items(list: &str) -> impl Iterator<Item = &str> {
    let mut depth = 0usize;
    list.split(move |c| {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        c == ',' && depth == 0
    })
}

/// Applies the `key:value,...` value of `variable` to `target` (items
/// trimmed, empty ones skipped, keys in any case). On an error `target` may
/// be partly updated: apply to a copy.
pub fn apply_key_values<T>(
    variable: &'static str,
    value: &str,
    list: &KeyList<T>,
    target: &mut T,
) -> Result<()> {
    assert!(list.keys.len() <= 64, "the keys given are a 64-bit set");
    let names = Accepted::Keys(list.names);
    let error = |problem, key, text: &str, accepted| ConfigError {
        variable,
        problem,
        key,
        text: Excerpt::new(text),
        accepted,
    };
    let mut given = 0u64;
    for item in items(value).map(str::trim).filter(|i| !i.is_empty()) {
        let Some((name, value)) = item.split_once(':') else {
            return Err(error(Problem::NotKeyValue, "", item, names));
        };
        let Some(index) = list
            .keys
            .iter()
            .position(|k| k.name.eq_ignore_ascii_case(name.trim()))
        else {
            return Err(error(Problem::UnknownKey, "", item, names));
        };
        let key = &list.keys[index];
        if given & (1 << index) != 0 {
            return Err(error(Problem::Duplicate, key.name, "", names));
        }
        given |= 1 << index;
        let value = value.trim();
        if value.is_empty() || (key.set)(target, value).is_none() {
            let accepted = Accepted::Text(key.accepted);
            return Err(error(Problem::KeyValue, key.name, value, accepted));
        }
    }
    let is_given = |name: &str| {
        list.keys
            .iter()
            .position(|k| k.name == name)
            .is_some_and(|i| given & (1 << i) != 0)
    };
    for &(a, b, why) in list.exclusive {
        if is_given(a) && is_given(b) {
            return Err(error(Problem::Conflict, a, b, Accepted::Text(why)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const VAR: &str = "EXAMPLE_VARIABLE";

    #[test]
    fn load_time_variables_fall_back_to_their_default_with_one_line() {
        let mut out = Vec::new();
        assert!(or_default_to(
            truth_var(VAR, Some(OsStr::new("maybe"))),
            true,
            "on",
            &mut out
        ));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "==aclalloc== Environment variable EXAMPLE_VARIABLE is invalid. Reason: the value \"maybe\" is not accepted; accepted: 1, true, yes, on, 0, false, no, off (any case). Using the default: on.\n"
        );
        let mut out = Vec::new();
        assert!(!or_default_to(
            truth_var(VAR, Some(OsStr::new("off"))),
            true,
            "on",
            &mut out
        ));
        assert!(or_default_to(truth_var(VAR, None), true, "on", &mut out));
        assert!(out.is_empty(), "valid or unset values print nothing");
    }

    #[test]
    fn interned_errors_are_shared_and_lose_their_text_past_the_bound() {
        let e = |v: &str| ConfigError::value(VAR, v, Accepted::Text("x"));
        let a = e("interned-a").interned();
        assert!(std::ptr::eq(a, e("interned-a").interned()));
        assert_eq!(*a, e("interned-a"));
        // Private sets here: the process-wide ones are shared with the tests running alongside.
        let (kept, elided) = (Interned::new(3), Interned::new(usize::MAX));
        let a = e("a").intern_in(&kept, &elided);
        e("b").intern_in(&kept, &elided);
        e("c").intern_in(&kept, &elided);
        let late = e("late").intern_in(&kept, &elided);
        assert_eq!(late.text.to_string(), "(not shown)");
        assert_eq!((late.variable, late.problem), (VAR, Problem::Value));
        assert!(std::ptr::eq(late, e("later").intern_in(&kept, &elided)));
        assert!(
            std::ptr::eq(a, e("a").intern_in(&kept, &elided)),
            "kept ones stay"
        );
    }
}
