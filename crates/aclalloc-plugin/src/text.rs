//! The dynamic loader's messages, kept for errors that must stay `Copy`
//! ([`Error`](crate::Error) holds only `&'static str`).

use crate::base::env::Interned;

/// At most this many distinct loader messages are kept for the life of the process.
static TEXTS: Interned<str> = Interned::new(64);

/// A `'static` copy of `text`, shared with earlier equal texts.
pub fn keep(text: &str) -> &'static str {
    TEXTS
        .get(text, |t| Box::leak(t.into()))
        .unwrap_or("(the loader's message was not kept: too many distinct load failures)")
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
