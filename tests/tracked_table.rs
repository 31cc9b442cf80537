//! The tracked-allocations adaptor (`base::tracked`, the table the pluggable
//! allocators and the tracking layer keep their blocks in):
//!
//! - a property test against a model (a `HashMap`): random inserts, frees,
//!   double and unknown frees, replacements, forgets and prunes give the
//!   same answers, the same records and exact counters (current, peak,
//!   allocated, freed, refusals);
//! - a stress test: threads insert and free their own pointers under the
//!   lock while reader threads look pointers up without it; at the end no
//!   entry is lost or invented, the counters equal the sum of what the
//!   threads did, and no reader ever saw a torn record;
//! - the two forms of hold (one that may run the user's code and the brief
//!   one that may not) exclude each other, the detector reports a second
//!   owner whichever form either side takes, and a re-entry from inside a
//!   full hold is still refused after brief holds came and went.

use aclalloc::base::tracked::{Block, History, Meta, Refused, Tracked, META_WORDS};
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Metadata whose words all derive from one number, so a torn read shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tag(usize);

impl Meta for Tag {
    fn pack(&self) -> [usize; META_WORDS] {
        [self.0, !self.0, self.0.rotate_left(7), self.0 ^ 0x5555]
    }
    fn unpack(w: &[usize; META_WORDS]) -> Self {
        assert_eq!(w[1], !w[0], "torn record");
        assert_eq!(w[2], w[0].rotate_left(7), "torn record");
        assert_eq!(w[3], w[0] ^ 0x5555, "torn record");
        Tag(w[0])
    }
}

#[derive(Clone, Debug)]
enum Op {
    Insert(usize, usize),
    Free(usize),
    Replace(usize, usize),
    Forget(usize),
    DropFreed,
}

fn op() -> impl Strategy<Value = Op> {
    // A few pointers, so that reuse, double frees and collisions are common.
    let ptr = (1usize..40).prop_map(|p| p * 512);
    prop_oneof![
        4 => (ptr.clone(), 0usize..5000).prop_map(|(p, s)| Op::Insert(p, s)),
        4 => ptr.clone().prop_map(Op::Free),
        1 => (ptr.clone(), 0usize..5000).prop_map(|(p, s)| Op::Replace(p, s)),
        1 => ptr.prop_map(Op::Forget),
        1 => Just(Op::DropFreed),
    ]
}

/// The model: pointer -> (size, live).
#[derive(Default)]
struct Model {
    blocks: HashMap<usize, (usize, bool)>,
    count: [i64; 4],
    bytes: [i64; 4],
    refused: u64,
}

impl Model {
    fn up(&mut self, size: usize) {
        for (s, a) in [(&mut self.count, 1), (&mut self.bytes, size as i64)] {
            s[0] += a;
            s[2] += a;
            s[1] = s[1].max(s[0]);
        }
    }
    fn down(&mut self, size: usize) {
        for (s, a) in [(&mut self.count, 1), (&mut self.bytes, size as i64)] {
            s[0] -= a;
            s[3] += a;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn the_adaptor_agrees_with_a_model(ops in proptest::collection::vec(op(), 1..300)) {
        let t: Tracked<Tag> = Tracked::new(History::UntilForgotten, ());
        let mut m = Model::default();
        let mut g = t.enter(1, |_| {}).unwrap();
        for op in ops {
            match op {
                Op::Insert(p, s) => {
                    let got = g.insert(p, s, 7, Tag(s));
                    match m.blocks.get(&p) {
                        Some(&(old, true)) => prop_assert_eq!(got.map_err(|b| b.size), Err(old)),
                        _ => {
                            prop_assert!(got.is_ok());
                            m.blocks.insert(p, (s, true));
                            m.up(s);
                        }
                    }
                }
                Op::Free(p) => {
                    let got = g.free(p, 3, 9);
                    match m.blocks.get(&p).copied() {
                        Some((s, true)) => {
                            prop_assert_eq!(got.map(|b| (b.size, b.meta)), Ok((s, Tag(s))));
                            m.blocks.insert(p, (s, false));
                            m.down(s);
                        }
                        Some((s, false)) => {
                            m.refused += 1;
                            match got {
                                Err(Refused::DoubleFree(b)) => {
                                    prop_assert_eq!(b.size, s);
                                    prop_assert_eq!(b.freed.map(|f| (f.by, f.generation)), Some((3, 9)));
                                }
                                other => prop_assert!(false, "{:?}", other),
                            }
                        }
                        None => {
                            m.refused += 1;
                            prop_assert_eq!(got, Err(Refused::Unknown));
                        }
                    }
                }
                Op::Replace(p, s) => {
                    let got = g.replace(p, s, 7, Tag(s)).map(|b| b.size);
                    match m.blocks.get(&p).copied() {
                        Some((old, true)) => {
                            prop_assert_eq!(got, Some(old));
                            m.down(old);
                        }
                        _ => prop_assert_eq!(got, None),
                    }
                    m.blocks.insert(p, (s, true));
                    m.up(s);
                }
                Op::Forget(p) => {
                    let freed = m.blocks.get(&p).is_some_and(|&(_, live)| !live);
                    prop_assert_eq!(g.forget_freed(p), freed);
                    if freed {
                        m.blocks.remove(&p);
                    }
                }
                Op::DropFreed => {
                    g.retain(|_, b| b.is_live());
                    m.blocks.retain(|_, &mut (_, live)| live);
                }
            }
            let c = g.counters();
            let a = c.allocation;
            let b = c.allocated_bytes;
            prop_assert_eq!([a.current, a.peak, a.allocated, a.freed], m.count);
            prop_assert_eq!([b.current, b.peak, b.allocated, b.freed], m.bytes);
            prop_assert_eq!(c.refused_frees, m.refused);
            prop_assert_eq!(g.freed_count(), m.blocks.values().filter(|&&(_, l)| !l).count());
        }
        let mut records: Vec<(usize, usize, bool)> =
            g.records().into_iter().map(|(p, b)| (p, b.size, b.is_live())).collect();
        records.sort_unstable();
        let mut want: Vec<(usize, usize, bool)> =
            m.blocks.iter().map(|(&p, &(s, l))| (p, s, l)).collect();
        want.sort_unstable();
        prop_assert_eq!(records, want);
        drop(g);
        for (p, &(s, live)) in &m.blocks {
            let b: Option<Block<Tag>> = t.lookup(*p);
            prop_assert_eq!(b.map(|b| (b.size, b.is_live())), Some((s, live)));
        }
    }
}

#[test]
fn concurrent_writers_and_lock_free_readers_lose_and_invent_nothing() {
    const WRITERS: usize = 3;
    const ROUNDS: usize = 20_000;
    const PER_THREAD: usize = 64;
    let t: Arc<Tracked<Tag>> = Arc::new(Tracked::new(History::Recent(256), ()));
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    // Readers: every record they find is whole (Tag::unpack checks) and
    // belongs to a pointer some writer owns.
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (t, stop, reads) = (t.clone(), stop.clone(), reads.clone());
            std::thread::spawn(move || {
                let mut i = r;
                while !stop.load(Ordering::Relaxed) {
                    let p = ((i % (WRITERS * PER_THREAD)) + 1) * 4096;
                    if let Some(b) = t.lookup(p) {
                        assert_eq!(b.meta.0 % 4096, 0, "a record of another pointer");
                        assert_eq!(b.size, b.meta.0 / 4096);
                    }
                    i += 7;
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    // Writers: each owns its own pointers, allocates and frees them in a
    // pattern, and counts what it did; a second free is always refused.
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let t = t.clone();
            std::thread::spawn(move || {
                let mut live = vec![false; PER_THREAD];
                let (mut allocs, mut frees, mut bytes) = (0i64, 0i64, 0i64);
                for round in 0..ROUNDS {
                    let k = (round * 31 + w) % PER_THREAD;
                    let p = (w * PER_THREAD + k + 1) * 4096;
                    let size = p / 4096;
                    // Half the holds are the brief form (the pluggable
                    // allocators' and the address record's): both forms
                    // exclude each other.
                    let mut g = if round % 2 == w % 2 {
                        t.enter_brief(1, |_| {}).unwrap()
                    } else {
                        t.enter(1, |_| {}).unwrap()
                    };
                    if live[k] {
                        assert_eq!(g.free(p, w, 0).unwrap().size, size);
                        assert!(matches!(g.free(p, w, 0), Err(Refused::DoubleFree(_))));
                        frees += 1;
                        bytes -= size as i64;
                    } else {
                        g.insert(p, size, w, Tag(p)).unwrap();
                        allocs += 1;
                        bytes += size as i64;
                    }
                    drop(g);
                    live[k] = !live[k];
                }
                (live, allocs, frees, bytes)
            })
        })
        .collect();
    let mut total = (0i64, 0i64, 0i64);
    let mut expected_live = Vec::new();
    for (w, h) in writers.into_iter().enumerate() {
        let (live, a, f, b) = h.join().unwrap();
        total = (total.0 + a, total.1 + f, total.2 + b);
        for (k, l) in live.into_iter().enumerate() {
            if l {
                expected_live.push((w * PER_THREAD + k + 1) * 4096);
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    assert!(reads.load(Ordering::Relaxed) > 0);
    let g = t.enter(1, |_| {}).unwrap();
    let c = g.counters();
    assert_eq!(c.allocation.allocated, total.0);
    assert_eq!(c.allocation.freed, total.1);
    assert_eq!(c.allocation.current, total.0 - total.1);
    assert_eq!(c.allocated_bytes.current, total.2);
    assert_eq!(c.refused_frees as i64, total.1, "every second free refused");
    let mut live: Vec<usize> = g.live().into_iter().map(|(p, _)| p).collect();
    live.sort_unstable();
    expected_live.sort_unstable();
    assert_eq!(live, expected_live, "no lost or phantom live entries");
    assert!(g.freed_count() <= 256, "the history stays bounded");
}

#[test]
fn brief_and_full_holds_exclude_each_other_and_reentry_is_still_told() {
    const THREADS: usize = 4;
    const ROUNDS: u64 = 20_000;
    // The books' extra is a plain counter changed read-then-write with a
    // yield in between: a hold that did not exclude the others loses counts.
    let t: Arc<Tracked<Tag, u64>> = Arc::new(Tracked::new(History::UntilForgotten, 0));
    let reported = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..THREADS)
        .map(|i| {
            let (t, reported) = (t.clone(), reported.clone());
            std::thread::spawn(move || {
                // Two owners (streams) among the threads: a thread that
                // finds the other one inside reports it.
                let owner = 0x100 * (1 + i % 2);
                let report = |current: usize| {
                    assert_ne!(current, owner, "only another owner is reported");
                    reported.fetch_add(1, Ordering::Relaxed);
                };
                for round in 0..ROUNDS {
                    let mut g = if i < 2 {
                        t.enter_brief(owner, report).unwrap()
                    } else {
                        let g = t.enter(owner, report).unwrap();
                        // A full hold is told from a re-entry on its thread,
                        // however many brief holds (some taken after a wait,
                        // the path that writes and clears the holder's
                        // thread) came before.
                        assert!(t.enter(owner, |_| {}).is_none(), "re-entry refused");
                        g
                    };
                    let seen = *g;
                    if round % 64 == 0 {
                        std::thread::yield_now();
                    }
                    *g = seen + 1;
                }
            })
        })
        .collect();
    for h in threads {
        h.join().unwrap();
    }
    let g = t.enter_brief(1, |_| {}).unwrap();
    assert_eq!(
        *g,
        THREADS as u64 * ROUNDS,
        "no update lost: the holds exclude"
    );
    drop(g);
    // Whether the threads above overlapped depends on scheduling; an
    // overlap made on purpose must be reported: one owner holds until the
    // other, waiting, has reported it.
    let told = Arc::new(AtomicUsize::new(0));
    let held = t.enter(0x100, |_| unreachable!()).unwrap();
    let waiter = {
        let (t, told) = (t.clone(), told.clone());
        std::thread::spawn(move || {
            let g = t.enter_brief(0x200, |current| {
                assert_eq!(current, 0x100, "the owner inside is reported");
                told.fetch_add(1, Ordering::SeqCst);
            });
            assert!(g.is_some(), "the waiter gets in once the hold ends");
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while told.load(Ordering::SeqCst) == 0 && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    drop(held);
    waiter.join().unwrap();
    assert_eq!(told.load(Ordering::SeqCst), 1, "second owner reported once");
    // After all of that, the lock is free for anyone, in either form.
    assert!(t.enter(7, |_| unreachable!()).is_some());
    assert!(t.enter_brief(7, |_| unreachable!()).is_some());
}

/// Writers mix changes of the freed mark alone (a re-allocation with the
/// same size, owner and metadata, a free like the last one) with changes of
/// every field, on the same records, while readers check that every record
/// they copy is one a writer wrote: its fields all agree with each other.
#[test]
fn mark_only_and_whole_changes_mixed_never_show_a_torn_record() {
    const WRITERS: usize = 2;
    const ROUNDS: usize = 400_000;
    const PER_THREAD: usize = 4;
    let t: Arc<Tracked<Tag>> = Arc::new(Tracked::new(History::UntilForgotten, ()));
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (t, stop, seen) = (t.clone(), stop.clone(), seen.clone());
            std::thread::spawn(move || {
                let mut i = r;
                while !stop.load(Ordering::Relaxed) {
                    let p = ((i % (WRITERS * PER_THREAD)) + 1) * 4096;
                    if let Some(b) = t.lookup(p) {
                        // Written as size = p/4096*10 + x, owner = x,
                        // meta = p*4 + x; freed by y at generation 3y.
                        assert_eq!(b.meta.0 / 4, p, "a record of another pointer");
                        let x = b.meta.0 % 4;
                        assert_eq!((b.size / 10, b.size % 10), (p / 4096, x), "{b:?}");
                        assert_eq!(b.owner, x, "{b:?}");
                        if let Some(f) = b.freed {
                            assert_eq!(f.generation, 3 * f.by as u64, "{b:?}");
                        }
                        seen[b.is_live() as usize].fetch_add(1, Ordering::Relaxed);
                    }
                    i += 3;
                }
            })
        })
        .collect();
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (t, seen) = (t.clone(), seen.clone());
            std::thread::spawn(move || {
                let mut live = [false; PER_THREAD];
                // Past ROUNDS until the readers have copied both live and
                // freed records: on a loaded machine they may not have run
                // at all while the writers did their rounds.
                let seen_both = || seen.iter().all(|s| s.load(Ordering::Relaxed) > 0);
                let mut round = 0;
                while round < ROUNDS || !seen_both() {
                    let k = round % PER_THREAD;
                    let p = (w * PER_THREAD + k + 1) * 4096;
                    // The fields change every few rounds only, so most
                    // changes are of the mark alone.
                    let x = (round / 8) % 3;
                    let y = 1 + (round / 24) % 2;
                    let mut g = t.enter_brief(1, |_| {}).unwrap();
                    if live[k] {
                        let b = g.free(p, y, 3 * y as u64).unwrap();
                        assert_eq!(b.size / 10, p / 4096);
                    } else {
                        g.insert(p, p / 4096 * 10 + x, x, Tag(p * 4 + x)).unwrap();
                    }
                    drop(g);
                    live[k] = !live[k];
                    round += 1;
                }
                live.iter().filter(|&&l| l).count()
            })
        })
        .collect();
    let live: usize = writers.into_iter().map(|h| h.join().unwrap()).sum();
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    assert!(seen[0].load(Ordering::Relaxed) > 0 && seen[1].load(Ordering::Relaxed) > 0);
    let g = t.enter(1, |_| {}).unwrap();
    assert_eq!(g.live_count(), live);
    assert_eq!(
        g.freed_count(),
        WRITERS * PER_THREAD - live,
        "the freed count follows the records"
    );
    let c = g.counters();
    assert_eq!(c.allocation.allocated - c.allocation.freed, live as i64);
}
