//! The environment syntax of `base::env`: truth values, sizes, numbers,
//! words, key:value lists and the messages that name what is wrong.

use aclalloc::base::env::*;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::path::PathBuf;

const VAR: &str = "EXAMPLE_VARIABLE";

fn os(text: &str) -> Option<&OsStr> {
    Some(OsStr::new(text))
}

#[test]
fn truth_values_are_one_rule_in_any_case() {
    for yes in ["1", "true", "TRUE", "Yes", "on", " On\t"] {
        assert_eq!(truth(yes), Some(true), "{yes:?}");
    }
    for no in ["0", "false", "No", "OFF", " off "] {
        assert_eq!(truth(no), Some(false), "{no:?}");
    }
    for bad in ["", "2", "y", "n", "enable", "truee", "o n"] {
        assert_eq!(truth(bad), None, "{bad:?}");
    }
}

#[test]
fn sizes_parse_in_binary_units() {
    assert_eq!(size("16GiB"), Some(16 << 30));
    assert_eq!(size("512 MiB"), Some(512 << 20));
    assert_eq!(size("1g"), Some(1 << 30));
    assert_eq!(size("1GB"), Some(1 << 30));
    assert_eq!(size("4KiB"), Some(4096));
    assert_eq!(size("8KB"), Some(8 << 10));
    assert_eq!(size("1048576"), Some(1 << 20));
    assert_eq!(size("100"), Some(100));
    assert_eq!(size("2T"), Some(2 << 40));
    assert_eq!(size("7b"), Some(7));
    for bad in [
        "",
        "GiB",
        "12 parsecs",
        "-1GiB",
        "+1GiB",
        "1.5GiB",
        "99999999999999TiB",
        "99999999999999999999999",
    ] {
        assert_eq!(size(bad), None, "{bad:?}");
    }
}

#[test]
fn whole_numbers_numbers_and_words() {
    assert_eq!(whole(" 42 "), Some(42));
    for bad in ["", "-1", "+1", "4.0", "4k", "x"] {
        assert_eq!(whole(bad), None, "{bad:?}");
    }
    assert_eq!(number("0.8"), Some(0.8));
    assert_eq!(number("128"), Some(128.0));
    for bad in ["", "inf", "NaN", "1e999", "x"] {
        assert_eq!(number(bad), None, "{bad:?}");
    }
    let choices = [("pool", 1), ("device", 2)];
    assert_eq!(word("Device", &choices), Some(2));
    assert_eq!(word("devices", &choices), None);
}

#[test]
fn unset_and_blank_are_the_default_and_text_is_trimmed() {
    assert_eq!(truth_var(VAR, None), Ok(None));
    assert_eq!(truth_var(VAR, os("")), Ok(None));
    assert_eq!(truth_var(VAR, os("  ")), Ok(None));
    assert_eq!(truth_var(VAR, os(" yes\n")), Ok(Some(true)));
    assert_eq!(text(VAR, os(" a b "), Accepted::Text("x")), Ok(Some("a b")));
}

#[test]
fn a_bad_value_names_the_variable_the_value_and_what_is_accepted() {
    let e = truth_var(VAR, os("maybe")).unwrap_err();
    assert_eq!(e.problem, Problem::Value);
    assert_eq!(
        e.to_string(),
        "Environment variable EXAMPLE_VARIABLE is invalid. Reason: the value \"maybe\" is not accepted; accepted: 1, true, yes, on, 0, false, no, off (any case)"
    );
    let e = parsed(VAR, os("lots"), SIZE_SYNTAX, size).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("Environment variable EXAMPLE_VARIABLE is invalid. Reason: the value \"lots\" is not accepted; accepted: {SIZE_SYNTAX}")
    );
}

#[test]
fn a_value_that_is_not_utf8_is_an_error_showing_it() {
    let raw = OsStr::from_bytes(b"o\xffn");
    let e = truth_var(VAR, Some(raw)).unwrap_err();
    assert_eq!(e.problem, Problem::NotUtf8);
    assert_eq!(
        e.to_string(),
        "Environment variable EXAMPLE_VARIABLE is invalid. Reason: the value \"o\u{fffd}n\" is not UTF-8 text; accepted: 1, true, yes, on, 0, false, no, off (any case)"
    );
    // File names are bytes: no error.
    assert_eq!(
        path(Some(raw)),
        Some(PathBuf::from(OsStr::from_bytes(b"o\xffn")))
    );
    assert_eq!(path(os("")), None);
    assert_eq!(path(os(" x ")), Some(PathBuf::from(" x ")));
}

#[test]
fn long_values_are_cut_and_marked() {
    let long = "x".repeat(100);
    let e = ConfigError::value(VAR, &long, Accepted::Text("short"));
    assert!(e
        .to_string()
        .contains(&format!("the value \"{}\"... is not", "x".repeat(EXCERPT))));
    // A multi-byte character is never split.
    let e = Excerpt::new(&format!("{}é", "x".repeat(EXCERPT - 1)));
    assert_eq!(e.as_str(), "x".repeat(EXCERPT - 1));
    assert_eq!(Excerpt::new("a\nb").to_string(), "\"a\\nb\"");
}

#[derive(Default, Debug, PartialEq)]
struct Conf {
    split: f64,
    limit: f64,
    fraction: f64,
    divisions: usize,
}

/// `[a:b,c:d]`: the number of pairs.
fn set_divisions(c: &mut Conf, v: &str) -> Option<()> {
    let pairs = v.strip_prefix('[')?.strip_suffix(']')?.split(',');
    c.divisions = pairs
        .map(|p| p.split_once(':').map(|(a, b)| whole(a).and(whole(b))))
        .collect::<Option<Option<Vec<_>>>>()??
        .len();
    Some(())
}

fn set(field: fn(&mut Conf) -> &mut f64) -> impl Fn(&mut Conf, &str) -> Option<()> {
    move |c, v| {
        *field(c) = number(v).filter(|n| *n > 0.0)?;
        Some(())
    }
}

const KEYS: &[Key<Conf>] = &[
    Key {
        name: "split_mb",
        accepted: "a positive number",
        set: |c, v| set(|c| &mut c.split)(c, v),
    },
    Key {
        name: "limit_mb",
        accepted: "a positive number",
        set: |c, v| set(|c| &mut c.limit)(c, v),
    },
    Key {
        name: "fraction",
        accepted: "a positive number",
        set: |c, v| set(|c| &mut c.fraction)(c, v),
    },
    Key {
        name: "divisions",
        accepted: "[size:divisions,...]",
        set: set_divisions,
    },
];
const NAMES: [&str; KEYS.len()] = key_names(KEYS);
const LIST: KeyList<Conf> = KeyList {
    keys: KEYS,
    names: &NAMES,
    exclusive: &[("limit_mb", "fraction", "both set the limit; give one")],
};

fn apply(value: &str) -> Result<Conf> {
    let mut c = Conf::default();
    apply_key_values(VAR, value, &LIST, &mut c).map(|()| c)
}

fn message(value: &str) -> String {
    let text = apply(value).unwrap_err().to_string();
    text.strip_prefix("Environment variable EXAMPLE_VARIABLE is invalid. Reason: ")
        .unwrap_or_else(|| panic!("{text}"))
        .to_string()
}

#[test]
fn key_value_lists_apply_every_key() {
    assert_eq!(apply(""), Ok(Conf::default()));
    assert_eq!(
        apply(" split_mb : 128 ,, LIMIT_MB:64,"),
        Ok(Conf {
            split: 128.0,
            limit: 64.0,
            ..Conf::default()
        })
    );
    assert_eq!(NAMES, ["split_mb", "limit_mb", "fraction", "divisions"]);
    // Commas inside brackets belong to the value.
    assert_eq!(
        apply("split_mb:1,divisions:[256:1,512:2, 1024:4],limit_mb:2"),
        Ok(Conf {
            split: 1.0,
            limit: 2.0,
            fraction: 0.0,
            divisions: 3
        })
    );
}

#[test]
fn key_value_errors_name_the_key_the_item_and_what_is_accepted() {
    assert_eq!(
        message("split_mb:1,splitmb:128"),
        "unknown key \"splitmb\" in \"splitmb:128\"; accepted keys: split_mb, limit_mb, fraction, divisions"
    );
    assert_eq!(
        message("split_mb"),
        "\"split_mb\" is not key:value; accepted keys: split_mb, limit_mb, fraction, divisions"
    );
    assert_eq!(
        message("split_mb:abc"),
        "the value \"abc\" of split_mb is not accepted; accepted: a positive number"
    );
    assert_eq!(
        message("split_mb:"),
        "the value \"\" of split_mb is not accepted; accepted: a positive number"
    );
    assert_eq!(
        message("split_mb:1,Split_MB:2"),
        "split_mb is given more than once; give each key once"
    );
    assert_eq!(
        message("fraction:0.5,limit_mb:3"),
        "limit_mb and fraction contradict each other: both set the limit; give one"
    );
    assert_eq!(
        message("divisions:[256:1,512:2"),
        "the value \"[256:1,512:2\" of divisions is not accepted; accepted: [size:divisions,...]"
    );
    let e = apply("x:1").unwrap_err();
    assert_eq!((e.variable, e.problem), (VAR, Problem::UnknownKey));
}

#[test]
fn interned_values_are_shared_and_bounded() {
    let texts: Interned<str> = Interned::new(2);
    let leak = |t: &str| -> &'static str { Box::leak(t.into()) };
    let a = texts.get("libx.so: cannot open", leak).unwrap();
    let again = texts.get(&String::from("libx.so: cannot open"), leak);
    assert!(std::ptr::eq(a, again.unwrap()), "equal values share");
    assert!(texts.get("other", leak).is_some());
    assert_eq!(texts.get("a third", leak), None, "past the bound");
    assert!(std::ptr::eq(
        a,
        texts.get("libx.so: cannot open", leak).unwrap()
    ));
}

#[test]
fn getenv_reads_without_allocating_the_same_value() {
    // PATH is set in every test environment.
    let expected = var("PATH");
    with_var_no_alloc("PATH", |v| assert_eq!(v, expected.as_deref()));
    with_var_no_alloc("EXAMPLE_SURELY_UNSET_VARIABLE", |v| assert_eq!(v, None));
}
