//! Loom models of the lock-free table (`base::table::Table`, the stream
//! registry's map and every handle table): every interleaving of a writer
//! (rewrite, insert, removal with backward shift, growth) with a reader, up
//! to a preemption bound. `crates/aclalloc-core/src/base/table.rs` lists which ordering each
//! model pins.
//!
//! Run (`scripts/loom.sh` does exactly this):
//!
//!     RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 \
//!         cargo test --release --test loom_registry
//!
//! Values are two words (a slot's atomics are each a point loom may preempt
//! at, and two are enough to see a torn copy), both `key << 16 | generation`,
//! so a read that mixed two writes, another key's words or a cleared slot
//! fails [`whole`].
#![cfg(loom)]

mod loom_support;

use aclalloc::base::table::{home_slot, Table};
use loom::sync::Arc;
use loom::thread;
use std::num::NonZeroUsize;

type Value = [usize; 2];
type Map = Table<Value, 2>;

fn value(key: usize, generation: usize) -> Value {
    [key << 16 | generation; 2]
}

/// The generation of a value read for `key`, after checking it is whole.
fn whole(key: usize, read: Value) -> usize {
    assert_eq!(read[0], read[1], "torn read for key {key}: {read:x?}");
    assert_eq!(read[0] >> 16, key, "key {key} read another key's words");
    let generation = read[0] & 0xFFFF;
    assert_ne!(generation, 0, "key {key} read a cleared slot");
    generation
}

fn nz(key: usize) -> NonZeroUsize {
    NonZeroUsize::new(key).unwrap()
}

/// Two distinct keys whose probe runs start at the same slot of an array
/// of `capacity` slots.
fn colliding_pair(capacity: usize) -> (usize, usize) {
    let home = home_slot(nz(64), capacity);
    let b = (2..)
        .map(|i| i * 64)
        .find(|&k| home_slot(nz(k), capacity) == home)
        .unwrap();
    (64, b)
}

fn model(name: &str, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    // Builder::new reads LOOM_MAX_PREEMPTIONS; without it, stay bounded.
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    loom_support::check(name, builder, f);
}

/// `Writer::update` stores the words (not the key) under the slot's
/// counter: a reader still finds the key and gets the old or the new value,
/// whole.
#[test]
fn update_vs_get() {
    model("update_vs_get", || {
        let table = Arc::new(Map::with_capacity(4));
        let k = 64;
        table.insert(nz(k), value(k, 1));
        let writer = {
            let table = table.clone();
            thread::spawn(move || table.write().update(nz(k), |v| *v = value(k, 2)))
        };
        let read = table.get(nz(k)).expect("a present key is found");
        assert!(matches!(whole(k, read), 1 | 2));
        assert_eq!(writer.join().unwrap(), Some(()));
        assert_eq!(table.get(nz(k)), Some(value(k, 2)));
    });
}

/// A value rewritten in place under the slot's counter: a reader gets the
/// old or the new value, whole.
#[test]
fn rewrite_vs_get() {
    model("rewrite_vs_get", || {
        let table = Arc::new(Map::with_capacity(4));
        let k = 64;
        table.insert(nz(k), value(k, 1));
        let writer = {
            let table = table.clone();
            thread::spawn(move || table.insert(nz(k), value(k, 2)))
        };
        let read = table.get(nz(k)).expect("a present key is found");
        assert!(matches!(whole(k, read), 1 | 2));
        writer.join().unwrap();
        assert_eq!(table.get(nz(k)), Some(value(k, 2)));
    });
}

/// A key inserted into an empty slot: a reader sees it absent or whole.
#[test]
fn fill_empty_vs_get() {
    model("fill_empty_vs_get", || {
        let table = Arc::new(Map::with_capacity(4));
        let k = 64;
        let writer = {
            let table = table.clone();
            thread::spawn(move || table.insert(nz(k), value(k, 1)))
        };
        if let Some(read) = table.get(nz(k)) {
            assert_eq!(whole(k, read), 1);
        }
        writer.join().unwrap();
        assert_eq!(table.get(nz(k)), Some(value(k, 1)));
    });
}

/// A removal moves the next key of the run back into the hole: that key is
/// never reported absent (a miss overlapping the shift is not trusted) and
/// the removed one is absent or whole.
#[test]
fn backward_shift_vs_get() {
    model("backward_shift_vs_get", || {
        let (a, b) = colliding_pair(8);
        let table = Arc::new(Map::with_capacity(8));
        table.insert(nz(a), value(a, 1));
        table.insert(nz(b), value(b, 1)); // after `a`: moves back when `a` goes
        let writer = {
            let table = table.clone();
            thread::spawn(move || assert_eq!(table.remove(nz(a)), Some(value(a, 1))))
        };
        let read = table.get(nz(b)).expect("a key being moved is still found");
        assert_eq!(whole(b, read), 1);
        writer.join().unwrap();
        assert_eq!(table.get(nz(a)), None);
    });
}

/// A removed key's slot reused for another key: a reader that found the
/// first key there never returns the second one's words for it.
#[test]
fn slot_reused_for_another_key_vs_get() {
    model("slot_reused_for_another_key_vs_get", || {
        let (a, b) = colliding_pair(8);
        let table = Arc::new(Map::with_capacity(8));
        table.insert(nz(a), value(a, 1));
        let writer = {
            let table = table.clone();
            thread::spawn(move || {
                table.remove(nz(a));
                table.insert(nz(b), value(b, 1)); // into `a`'s old slot
            })
        };
        if let Some(read) = table.try_get(nz(a)).flatten() {
            assert_eq!(whole(a, read), 1);
        }
        writer.join().unwrap();
        assert_eq!(table.get(nz(a)), None);
        assert_eq!(table.get(nz(b)), Some(value(b, 1)));
    });
}

/// Growth swaps in a bigger array while a reader may hold the old one's
/// mask or slots (or the old mask with the new slots); a write after the
/// growth goes to the new array only.
#[test]
fn growth_vs_get() {
    model("growth_vs_get", || {
        let table = Arc::new(Map::with_capacity(4));
        let (a, b) = (64, 128);
        table.insert(nz(a), value(a, 1));
        let writer = {
            let table = table.clone();
            // 4 slots hold one key: the second grows the array to 8.
            thread::spawn(move || {
                table.insert(nz(b), value(b, 1));
                table.insert(nz(a), value(a, 2));
            })
        };
        let read = table.get(nz(a)).expect("kept across growth");
        assert!(matches!(whole(a, read), 1 | 2));
        if let Some(read) = table.get(nz(b)) {
            assert_eq!(whole(b, read), 1);
        }
        writer.join().unwrap();
        assert_eq!(table.get(nz(a)), Some(value(a, 2)));
        assert_eq!(table.get(nz(b)), Some(value(b, 1)));
    });
}

/// Two writers (insert and remove of one key) against a reader: whatever
/// the order, a read is whole and what is left is consistent.
#[test]
fn insert_and_remove_race_with_get() {
    model("insert_and_remove_race_with_get", || {
        let table = Arc::new(Map::with_capacity(4));
        let k = 64;
        table.insert(nz(k), value(k, 1));
        let insert = {
            let table = table.clone();
            thread::spawn(move || table.insert(nz(k), value(k, 2)))
        };
        let remove = {
            let table = table.clone();
            thread::spawn(move || table.remove(nz(k)))
        };
        if let Some(read) = table.try_get(nz(k)).flatten() {
            assert!(matches!(whole(k, read), 1 | 2));
        }
        insert.join().unwrap();
        remove.join().unwrap();
        match table.get(nz(k)) {
            None => assert_eq!(table.len(), 0),
            Some(read) => {
                assert_eq!(whole(k, read), 2);
                assert_eq!(table.len(), 1);
            }
        }
    });
}
