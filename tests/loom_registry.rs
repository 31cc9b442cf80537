//! Loom model of the registration table ([`SeqTable`]): every interleaving of
//! register, re-register, unregister and lookup, including growth and
//! backward-shift removal, up to a preemption bound.
//!
//! Run (a couple of minutes on 2 cores; `scripts/loom.sh` does exactly this):
//!
//!     RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 \
//!         cargo test --release --test loom_registry
//!
//! Every value written is six copies of one word, `key << 16 | generation`,
//! so a lookup that returned words from two writes (torn), from another key
//! (a slot read while it was being moved), or from a cleared slot (a removed
//! entry) fails the check in [`whole`].
#![cfg(loom)]

mod loom_support;

use aclalloc::core::seq_table::home_slot;
use aclalloc::core::seq_table::{SeqTable, VALUE_WORDS};
use loom::sync::Arc;
use loom::thread;
use std::num::NonZeroUsize;

type Value = [usize; VALUE_WORDS];

fn value(key: usize, generation: usize) -> Value {
    [key << 16 | generation; VALUE_WORDS]
}

/// The generation of a value read for `key`, after checking it is whole.
fn whole(key: usize, read: Value) -> usize {
    assert!(
        read.iter().all(|w| *w == read[0]),
        "torn read for key {key}: {read:x?}"
    );
    assert_eq!(
        read[0] >> 16,
        key,
        "key {key} read another key's words: {read:x?}"
    );
    let generation = read[0] & 0xFFFF;
    assert_ne!(generation, 0, "key {key} read a cleared slot");
    generation
}

fn nz(key: usize) -> NonZeroUsize {
    NonZeroUsize::new(key).unwrap()
}

/// `n` distinct keys that all start their probe run at the same slot of a
/// table of `capacity` slots.
fn colliding_keys(capacity: usize, n: usize) -> Vec<usize> {
    let home = home_slot(nz(64), capacity);
    (1..)
        .map(|i| i * 64)
        .filter(|&k| home_slot(nz(k), capacity) == home)
        .take(n)
        .collect()
}

/// Checks `f` under every interleaving up to the preemption bound and prints
/// how many it explored (a model that explores one has no concurrency in it).
fn model(name: &str, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    // Builder::new reads LOOM_MAX_PREEMPTIONS; without it, stay bounded.
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(2);
    }
    loom_support::check(name, builder, f);
}

#[test]
fn reregister_vs_lookup() {
    model("reregister_vs_lookup", || {
        let table = Arc::new(SeqTable::<Value>::with_capacity(4));
        let k = 64;
        table.insert(nz(k), value(k, 1));
        let writer = {
            let table = table.clone();
            thread::spawn(move || {
                table.insert(nz(k), value(k, 2));
            })
        };
        let first = whole(
            k,
            table.get(nz(k)).expect("a registered key is always found"),
        );
        let second = whole(
            k,
            table.get(nz(k)).expect("a registered key is always found"),
        );
        assert!(
            first <= second,
            "went back from generation {first} to {second}"
        );
        writer.join().unwrap();
        assert_eq!(table.get(nz(k)), Some(value(k, 2)));
    });
}

#[test]
fn unregister_with_backward_shift_vs_lookup() {
    model("unregister_with_backward_shift_vs_lookup", || {
        let keys = colliding_keys(8, 2);
        let (a, b) = (keys[0], keys[1]);
        let table = Arc::new(SeqTable::<Value>::with_capacity(8));
        table.insert(nz(a), value(a, 1));
        table.insert(nz(b), value(b, 1)); // right after `a`: moves back when `a` goes
        let writer = {
            let table = table.clone();
            thread::spawn(move || assert_eq!(table.remove(nz(a)), Some(value(a, 1))))
        };
        let moved = table
            .get(nz(b))
            .expect("a key being shifted is still found");
        assert_eq!(whole(b, moved), 1);
        if let Some(read) = table.get(nz(a)) {
            assert_eq!(whole(a, read), 1);
        }
        writer.join().unwrap();
        assert_eq!(table.get(nz(a)), None);
        assert_eq!(table.get(nz(b)), Some(value(b, 1)));
    });
}

#[test]
fn growth_vs_lookup() {
    model("growth_vs_lookup", || {
        let table = Arc::new(SeqTable::<Value>::with_capacity(4));
        let (a, b, c) = (64, 128, 192);
        table.insert(nz(a), value(a, 1));
        table.insert(nz(b), value(b, 1));
        let writer = {
            let table = table.clone();
            // The table grows when more than a quarter full: the second key
            // made it 8 slots, the third grows it to 16 while the reader may
            // be walking the old one.
            thread::spawn(move || table.insert(nz(c), value(c, 1)))
        };
        assert_eq!(whole(a, table.get(nz(a)).expect("kept across growth")), 1);
        if let Some(read) = table.get(nz(c)) {
            assert_eq!(whole(c, read), 1);
        }
        writer.join().unwrap();
        for k in [a, b, c] {
            assert_eq!(table.get(nz(k)), Some(value(k, 1)));
        }
    });
}

/// Two growths while a reader walks: the reader loads the table's shape,
/// slots and records as separate words (the read side has no table
/// pointer), so it may see the shape of one table with the slots or records
/// of a later one; every such mix must stay in bounds and either answer
/// whole values or retry.
#[test]
fn two_growths_vs_lookup() {
    model("two_growths_vs_lookup", || {
        let table = Arc::new(SeqTable::<Value>::with_capacity(4));
        let (a, b, c) = (64, 128, 192);
        table.insert(nz(a), value(a, 1));
        let writer = {
            let table = table.clone();
            // 4 slots hold one key: the second grows the table to 8 slots,
            // the third to 16.
            thread::spawn(move || {
                table.insert(nz(b), value(b, 1));
                table.insert(nz(c), value(c, 1));
            })
        };
        assert_eq!(whole(a, table.get(nz(a)).expect("kept across growth")), 1);
        for k in [b, c] {
            if let Some(read) = table.get(nz(k)) {
                assert_eq!(whole(k, read), 1);
            }
        }
        writer.join().unwrap();
        for k in [a, b, c] {
            assert_eq!(table.get(nz(k)), Some(value(k, 1)));
        }
    });
}

#[test]
fn register_and_unregister_race_with_lookup() {
    model("register_and_unregister_race_with_lookup", || {
        let table = Arc::new(SeqTable::<Value>::with_capacity(4));
        let k = 64;
        table.insert(nz(k), value(k, 1));
        let register = {
            let table = table.clone();
            thread::spawn(move || {
                table.insert(nz(k), value(k, 2));
            })
        };
        let unregister = {
            let table = table.clone();
            thread::spawn(move || {
                table.remove(nz(k));
            })
        };
        if let Some(read) = table.get(nz(k)) {
            assert!(matches!(whole(k, read), 1 | 2));
        }
        register.join().unwrap();
        unregister.join().unwrap();
        // Either order is allowed; whatever is left is whole and the newest.
        match table.get(nz(k)) {
            None => assert_eq!(table.len(), 0),
            Some(read) => {
                assert_eq!(whole(k, read), 2);
                assert_eq!(table.len(), 1);
            }
        }
    });
}

#[test]
fn reregister_after_unregister_in_a_collision_run() {
    model("reregister_after_unregister_in_a_collision_run", || {
        let keys = colliding_keys(8, 2);
        let (a, b) = (keys[0], keys[1]);
        let table = Arc::new(SeqTable::<Value>::with_capacity(8));
        table.insert(nz(a), value(a, 1));
        table.insert(nz(b), value(b, 1));
        let writer = {
            let table = table.clone();
            thread::spawn(move || {
                table.remove(nz(a)); // `b` moves into `a`'s slot
                table.insert(nz(a), value(a, 2)); // `a` now lands after `b`
            })
        };
        if let Some(read) = table.get(nz(a)) {
            assert!(matches!(whole(a, read), 1 | 2));
        }
        assert_eq!(whole(b, table.get(nz(b)).expect("never removed")), 1);
        writer.join().unwrap();
        assert_eq!(table.get(nz(a)), Some(value(a, 2)));
        assert_eq!(table.get(nz(b)), Some(value(b, 1)));
    });
}

#[test]
fn retired_record_reused_for_another_key_vs_stale_lookup() {
    model(
        "retired_record_reused_for_another_key_vs_stale_lookup",
        || {
            let table = Arc::new(SeqTable::<Value>::with_capacity(8));
            let (a, b) = (64, 128);
            table.insert(nz(a), value(a, 1));
            let writer = {
                let table = table.clone();
                thread::spawn(move || {
                    table.remove(nz(a)); // retires a's record...
                    table.insert(nz(b), value(b, 1)); // ...which b's value reuses
                })
            };
            // Never b's words under a's key, never a half-rewritten record.
            if let Some(read) = table.get(nz(a)) {
                assert_eq!(whole(a, read), 1);
            }
            if let Some(read) = table.get(nz(b)) {
                assert_eq!(whole(b, read), 1);
            }
            writer.join().unwrap();
            assert_eq!(table.get(nz(a)), None);
            assert_eq!(table.get(nz(b)), Some(value(b, 1)));
        },
    );
}

#[test]
fn shared_record_survives_one_of_its_keys_leaving() {
    model("shared_record_survives_one_of_its_keys_leaving", || {
        // Equal values share one record; the key is not in the words here.
        let shared = |generation: usize| [0xACE << 16 | generation; VALUE_WORDS];
        let table = Arc::new(SeqTable::<Value>::with_capacity(8));
        let (a, b) = (64, 128);
        table.insert(nz(a), shared(1));
        table.insert(nz(b), shared(1));
        let writer = {
            let table = table.clone();
            thread::spawn(move || {
                table.remove(nz(a));
                table.insert(nz(a), shared(2));
            })
        };
        let read = table.get(nz(b)).expect("b is never removed");
        assert_eq!(
            whole(0xACE, read),
            1,
            "b's shared record was retired or rewritten"
        );
        if let Some(read) = table.get(nz(a)) {
            assert!(matches!(whole(0xACE, read), 1 | 2));
        }
        writer.join().unwrap();
        assert_eq!(table.get(nz(a)), Some(shared(2)));
        assert_eq!(table.get(nz(b)), Some(shared(1)));
    });
}

#[test]
fn record_retired_by_reregister_and_reused_vs_stale_lookup() {
    model(
        "record_retired_by_reregister_and_reused_vs_stale_lookup",
        || {
            // No removal, so the layout counter never moves: only the record's
            // own counter can tell a reader that its record was recycled.
            let table = Arc::new(SeqTable::<Value>::with_capacity(8));
            let (a, b) = (64, 128);
            table.insert(nz(a), value(a, 1));
            let writer = {
                let table = table.clone();
                thread::spawn(move || {
                    table.insert(nz(a), value(a, 2)); // retires a's first record...
                    table.insert(nz(b), value(b, 1)); // ...which b's value reuses
                })
            };
            let read = table.get(nz(a)).expect("a is never removed");
            assert!(matches!(whole(a, read), 1 | 2));
            writer.join().unwrap();
            assert_eq!(table.get(nz(a)), Some(value(a, 2)));
            assert_eq!(table.get(nz(b)), Some(value(b, 1)));
        },
    );
}

// The stream registry's own table (`registry::StreamTable`): each entry
// inline in one slot under the slot's own counter, hits trusted without the
// table-wide layout counter (only a miss checks it). Each model's reader
// makes one or two lookups (a slot is eight atomics, and every load is a
// point loom may preempt at): `hit_at_home` (the C export's first test),
// `hit` (its probing path) or `get` (which waits out writers and may answer
// "absent").

mod stream_table {
    use super::{model, nz, value, whole, Value};
    use aclalloc::registry::stream_table::home_slot;
    use aclalloc::registry::StreamTable;
    use loom::sync::Arc;
    use loom::thread;

    /// Two distinct keys that start their probe run at the same slot of a
    /// table of `capacity` slots.
    fn colliding_pair(capacity: usize) -> (usize, usize) {
        let home = home_slot(nz(64), capacity);
        let b = (2..)
            .map(|i| i * 64)
            .find(|&k| home_slot(nz(k), capacity) == home)
            .unwrap();
        (64, b)
    }

    /// A re-registration rewrites the slot in place: a hit is one whole
    /// registration, old or new, never a mix.
    #[test]
    fn stream_table_reregister_vs_hit() {
        model("stream_table_reregister_vs_hit", || {
            let table = Arc::new(StreamTable::<Value>::with_capacity(4));
            let k = 64;
            table.insert(nz(k), value(k, 1));
            let writer = {
                let table = table.clone();
                thread::spawn(move || {
                    table.insert(nz(k), value(k, 2));
                })
            };
            if let Some(read) = table.hit_at_home(nz(k)) {
                assert!(matches!(whole(k, read), 1 | 2));
            }
            writer.join().unwrap();
            assert_eq!(table.hit_at_home(nz(k)), Some(value(k, 2)));
        });
    }

    /// A removal moves the next key of the run back into the hole: that key
    /// is briefly in two slots, and the hole's slot changes from one key to
    /// another under a reader that checks only that slot.
    #[test]
    fn stream_table_backward_shift_vs_hit() {
        model("stream_table_backward_shift_vs_hit", || {
            let (a, b) = colliding_pair(8);
            let table = Arc::new(StreamTable::<Value>::with_capacity(8));
            table.insert(nz(a), value(a, 1));
            table.insert(nz(b), value(b, 1)); // after `a`: moves back when `a` goes
            let writer = {
                let table = table.clone();
                thread::spawn(move || assert_eq!(table.remove(nz(a)), Some(value(a, 1))))
            };
            // `b`'s home slot holds `a`, then `b`.
            if let Some(read) = table.hit_at_home(nz(b)) {
                assert_eq!(whole(b, read), 1);
            }
            writer.join().unwrap();
            assert_eq!(table.get(nz(a)), None);
            assert_eq!(table.hit_at_home(nz(b)), Some(value(b, 1)));
        });
    }

    /// A key being moved back past a reader is never reported absent: `get`
    /// trusts a miss only if the layout did not change around it.
    #[test]
    fn stream_table_backward_shift_vs_get() {
        model("stream_table_backward_shift_vs_get", || {
            let (a, b) = colliding_pair(8);
            let table = Arc::new(StreamTable::<Value>::with_capacity(8));
            table.insert(nz(a), value(a, 1));
            table.insert(nz(b), value(b, 1));
            let writer = {
                let table = table.clone();
                thread::spawn(move || assert_eq!(table.remove(nz(a)), Some(value(a, 1))))
            };
            let read = table.get(nz(b)).expect("a key being moved is still found");
            assert_eq!(whole(b, read), 1);
            writer.join().unwrap();
        });
    }

    /// A removed key's slot reused for another key: a reader that found the
    /// first key there never returns the second one's words for it.
    #[test]
    fn stream_table_slot_reused_for_another_key_vs_stale_hit() {
        model(
            "stream_table_slot_reused_for_another_key_vs_stale_hit",
            || {
                let (a, b) = colliding_pair(8);
                let table = Arc::new(StreamTable::<Value>::with_capacity(8));
                table.insert(nz(a), value(a, 1));
                let writer = {
                    let table = table.clone();
                    thread::spawn(move || {
                        table.remove(nz(a));
                        table.insert(nz(b), value(b, 1)); // into `a`'s old slot
                    })
                };
                if let Some(read) = table.hit_at_home(nz(a)) {
                    assert_eq!(whole(a, read), 1);
                }
                writer.join().unwrap();
                assert_eq!(table.get(nz(a)), None);
                assert_eq!(table.hit_at_home(nz(b)), Some(value(b, 1)));
            },
        );
    }

    /// Growth swaps in a bigger table while a reader may hold the old one's
    /// shape or slots (or the old shape with the new slots); a write after
    /// the growth goes to the new table only.
    #[test]
    fn stream_table_growth_vs_hit() {
        model("stream_table_growth_vs_hit", || {
            let table = Arc::new(StreamTable::<Value>::with_capacity(4));
            let (a, b) = (64, 128);
            table.insert(nz(a), value(a, 1));
            let writer = {
                let table = table.clone();
                // 4 slots hold one key: the second grows the table to 8.
                thread::spawn(move || {
                    table.insert(nz(b), value(b, 1));
                    table.insert(nz(a), value(a, 2));
                })
            };
            if let Some(read) = table.hit(nz(a)) {
                assert!(matches!(whole(a, read), 1 | 2));
            }
            writer.join().unwrap();
            assert_eq!(table.get(nz(a)), Some(value(a, 2)));
            assert_eq!(table.get(nz(b)), Some(value(b, 1)));
        });
    }
}
