//! A line of text in a fixed buffer, for messages written where allocating
//! is not safe (a foreign exception unwinding, a program's allocator not yet
//! known to work). What does not fit is dropped.

use std::fmt;

/// Up to 1,024 bytes of text; `write!` into it, then [`Line::emit`] or [`Line::as_bytes`].
pub(crate) struct Line {
    bytes: [u8; 1024],
    len: usize,
}

impl Default for Line {
    fn default() -> Self {
        Line {
            bytes: [0; 1024],
            len: 0,
        }
    }
}

impl Line {
    /// The text written so far.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// Writes the text to stderr with one `write(2)`; a short or failed
    /// write only shortens the message.
    pub(crate) fn emit(&self) {
        // SAFETY: writes our own initialised buffer.
        unsafe { libc::write(2, self.bytes.as_ptr().cast(), self.len) };
    }
}

impl fmt::Write for Line {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let take = s.len().min(self.bytes.len() - self.len);
        self.bytes[self.len..self.len + take].copy_from_slice(&s.as_bytes()[..take]);
        self.len += take;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Line;
    use std::fmt::Write;

    #[test]
    fn text_beyond_the_buffer_is_dropped_not_an_error() {
        let mut line = Line::default();
        write!(line, "{}", "x".repeat(1000)).unwrap();
        write!(line, "{}", "y".repeat(100)).unwrap();
        assert_eq!(line.as_bytes().len(), 1024);
        assert_eq!(line.as_bytes()[999], b'x');
        assert_eq!(line.as_bytes()[1000..], [b'y'; 24]);
    }
}
