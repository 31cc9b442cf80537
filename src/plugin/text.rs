//! Keeping the dynamic loader's messages for errors that must stay `Copy`.
//!
//! [`Error`](crate::Error) holds only `&'static str`, so the loader's text is
//! leaked once per distinct message into a small bounded set: a service that
//! retries a broken plugin path in a loop keeps one copy, not one per try.

use parking_lot::Mutex;

/// How many distinct loader messages are kept for the life of the process.
const KEPT: usize = 64;

static TEXTS: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());

/// A `'static` copy of `text`, shared with earlier equal texts.
pub fn keep(text: &str) -> &'static str {
    let mut texts = TEXTS.lock();
    if let Some(kept) = texts.iter().find(|kept| **kept == text) {
        return kept;
    }
    if texts.len() >= KEPT {
        return "(the loader's message was not kept: too many distinct load failures)";
    }
    let kept: &'static str = Box::leak(text.to_owned().into_boxed_str());
    texts.push(kept);
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_share_one_copy() {
        let a = keep("libx.so: cannot open shared object file");
        let b = keep(&String::from("libx.so: cannot open shared object file"));
        assert_eq!(a.as_ptr(), b.as_ptr());
        assert_ne!(keep("other").as_ptr(), a.as_ptr());
    }
}
