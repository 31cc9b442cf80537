//! The per-thread record of failed calls behind `aclGetRecentErrMsg`.
//!
//! Recording stores a `(function, Error)` pair in a fixed thread-local ring:
//! no allocation, no formatting, no lock.

use super::error::Error;
use std::cell::RefCell;
use std::fmt::Write as _;

/// How many failures a thread keeps between two reads. Older ones are counted,
/// not kept: a caller that never reads must not grow memory without bound.
const CAPACITY: usize = 16;

#[derive(Clone, Copy)]
struct Record {
    function: &'static str,
    error: Error,
}

struct Log {
    /// Unread records; the next one goes to `next`, overwriting the oldest.
    ring: [Option<Record>; CAPACITY],
    next: usize,
    /// Records overwritten since the last read.
    dropped: u64,
    /// Records ever pushed on this thread.
    pushed: u64,
    /// The code of the last failure not yet taken (`aclrtGetLastError`).
    last_code: i32,
}

impl Log {
    fn push(&mut self, record: Record) {
        self.pushed += 1;
        self.last_code = record.error.code();
        if self.ring[self.next].replace(record).is_some() {
            self.dropped += 1;
        }
        self.next = (self.next + 1) % CAPACITY;
    }

    fn drain_newest_first(&mut self) -> Option<String> {
        let mut text = String::new();
        for back in 1..=CAPACITY {
            if let Some(record) = self.ring[(self.next + CAPACITY - back) % CAPACITY].take() {
                if !text.is_empty() {
                    text.push('\n');
                }
                format_record(&mut text, &record);
            }
        }
        if self.dropped > 0 {
            let _ = write!(text, "\n({} earlier failures were not kept)", self.dropped);
            self.dropped = 0;
        }
        (!text.is_empty()).then_some(text)
    }
}

fn format_record(text: &mut String, record: &Record) {
    let _ = write!(
        text,
        "{}{}{}.",
        record.function,
        record.error.connective(),
        record.error
    );
}

thread_local! {
    static LOG: RefCell<Log> = const {
        RefCell::new(Log { ring: [None; CAPACITY], next: 0, dropped: 0, pushed: 0, last_code: 0 })
    };
}

/// Remembers that `function` failed with `error` on this thread.
pub fn record(function: &'static str, error: Error) {
    // During thread teardown the log may already be gone; losing the message
    // then is better than aborting the caller.
    let _ = LOG.try_with(|log| {
        if let Ok(mut log) = log.try_borrow_mut() {
            log.push(Record { function, error });
        }
    });
}

/// The messages of this thread's failures since the last call, newest first,
/// one per line; `None` when nothing failed. Reading clears them.
pub fn take_recent() -> Option<String> {
    LOG.try_with(|log| log.try_borrow_mut().ok()?.drain_newest_first())
        .ok()
        .flatten()
}

/// How many failures this thread has recorded so far (to tell whether a
/// call that failed left a message here).
pub fn recorded_count() -> u64 {
    LOG.try_with(|log| log.try_borrow().map_or(0, |l| l.pushed))
        .unwrap_or(0)
}

/// The code of this thread's last failure (0: none since the last take);
/// `take` clears it.
pub fn last_code(take: bool) -> i32 {
    LOG.try_with(|log| {
        log.try_borrow_mut().map_or(0, |mut l| {
            let code = l.last_code;
            if take {
                l.last_code = 0;
            }
            code
        })
    })
    .unwrap_or(0)
}

/// Drops this thread's unread messages (a newer failure's message is in the real runtime's log).
pub fn discard_unread() {
    let _ = take_recent();
}

/// The message one failure produces, as [`take_recent`] would show it.
pub fn message(function: &'static str, error: Error) -> String {
    let mut text = String::new();
    format_record(&mut text, &Record { function, error });
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_newest_first_and_reading_clears_them() {
        assert_eq!(take_recent(), None);
        record("first", Error::NullPointer { param: "stream" });
        record("second", Error::StreamNotRegistered);
        let text = take_recent().expect("two failures were recorded");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "second failed. Parameter stream is invalid. Reason: The stream is not registered with any allocator.",
                "first failed because stream cannot be a NULL pointer.",
            ]
        );
        assert_eq!(take_recent(), None);
    }

    #[test]
    fn a_thread_that_never_reads_keeps_a_bounded_log() {
        for _ in 0..CAPACITY + 5 {
            record("f", Error::NullPointer { param: "p" });
        }
        let text = take_recent().unwrap();
        assert_eq!(text.lines().count(), CAPACITY + 1);
        assert!(text.ends_with("(5 earlier failures were not kept)"));
    }

    #[test]
    fn each_thread_has_its_own_log() {
        record("here", Error::NullPointer { param: "p" });
        std::thread::spawn(|| assert_eq!(take_recent(), None))
            .join()
            .unwrap();
        assert!(take_recent().unwrap().starts_with("here failed"));
    }
}
