//! Expandable segments against fixed segments, side by side in one run, on
//! the same host "device" (`HostMemory`, whose virtual memory maps pages
//! with `mmap`).
//!
//! Printed to stderr first: (1) for each trace, the smallest device
//! capacity, as a multiple of the trace's peak live (requested) bytes, at
//! which it completes without out-of-memory — found by scanning upward in
//! steps of 0.5 % from 1.000 x — for fixed and for expandable segments.
//! Traces: random 1-64 MiB blocks (20,000 steps over 256 slots); LLM
//! serving with varying sequence lengths (KV caches regrown as requests
//! decode, per-step activations); the prefill and decode traces of
//! benches/pool.rs (same shapes, repeated here).
//!
//! Timed (divan): (2) alloc+free of a cached size and one decode token,
//! fixed against expandable.
//!
//! Run: `cargo bench --bench expandable` (`EXPANDABLE_SEEDS=8` adds the
//! mean capacities over eight seeds of the generated traces).

use aclalloc::pool::{HostMemory, Pool, PoolConfig};
use std::hint::black_box;
use std::sync::Arc;

const MIB: usize = 1 << 20;
const KIB: usize = 1 << 10;

fn pool(capacity: usize, expandable: bool) -> Pool {
    let config = PoolConfig {
        expandable_segments: expandable,
        ..PoolConfig::default()
    };
    Pool::new(config, Arc::new(HostMemory::new(capacity))).unwrap()
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn unit(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }
}

/// A trace: a sequence of allocations and frees of earlier allocations.
#[derive(Clone, Copy)]
enum Step {
    Alloc { id: usize, size: usize },
    Free { id: usize },
}

struct Trace {
    name: &'static str,
    steps: Vec<Step>,
}

impl Trace {
    fn peak_live(&self) -> usize {
        let mut sizes = std::collections::HashMap::new();
        let (mut live, mut peak) = (0usize, 0usize);
        for s in &self.steps {
            match *s {
                Step::Alloc { id, size } => {
                    sizes.insert(id, size);
                    live += size;
                    peak = peak.max(live);
                }
                Step::Free { id } => live -= sizes[&id],
            }
        }
        peak
    }

    /// True when the whole trace runs on a device of `capacity` bytes.
    fn completes(&self, capacity: usize, expandable: bool) -> bool {
        let pool = pool(capacity, expandable);
        let mut addrs = std::collections::HashMap::new();
        for s in &self.steps {
            match *s {
                Step::Alloc { id, size } => match pool.malloc(size) {
                    Ok(a) => {
                        addrs.insert(id, a.get());
                    }
                    Err(_) => return false,
                },
                Step::Free { id } => pool.free(addrs.remove(&id).unwrap()).unwrap(),
            }
        }
        true
    }
}

/// Random blocks of 1-64 MiB: each step picks one of 256 slots and frees
/// its block, or allocates one if it is empty (the measurement).
/// `seed` 0 is the trace of the table; others vary it.
fn random_trace(seed: u64) -> Trace {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ seed);
    let mut slots = [None::<usize>; 256];
    let mut steps = Vec::new();
    for id in 0..20_000 {
        let slot = rng.below(256) as usize;
        match slots[slot].take() {
            Some(old) => steps.push(Step::Free { id: old }),
            None => {
                let size = (1 + rng.below(64) as usize) * MIB;
                steps.push(Step::Alloc { id, size });
                slots[slot] = Some(id);
            }
        }
    }
    Trace {
        name: "random 1-64 MiB",
        steps,
    }
}

/// LLM serving with varying sequence lengths: up to 24 requests in flight,
/// prompts of Pareto-distributed length; each request holds a KV cache
/// (128 KiB per token: 32 layers x 2 x 1024 x 2 bytes) that is regrown
/// every 32 generated tokens (new buffer, then the old one freed, as a
/// framework without paged attention does), and every step takes an
/// activation workspace sized by the tokens in the batch.
fn serving_trace(seed: u64) -> Trace {
    const KV_PER_TOKEN: usize = 128 * KIB;
    let mut rng = Rng(0xD1B5_4A32_D192_ED03 ^ seed);
    let mut next_id = 0;
    let mut id = || {
        next_id += 1;
        next_id
    };
    let mut steps = Vec::new();
    // (kv id, tokens, tokens left to generate)
    let mut running: Vec<(usize, usize, usize)> = Vec::new();
    for _ in 0..4000 {
        while running.len() < 24 && rng.below(4) == 0 {
            let prompt = ((48.0 / rng.unit().powf(1.0 / 1.3)) as usize).clamp(16, 6000);
            let output = 16 + rng.below(480) as usize;
            let kv = id();
            steps.push(Step::Alloc {
                id: kv,
                size: (prompt + 32) * KV_PER_TOKEN,
            });
            // Prefill activations for the prompt.
            let act = id();
            steps.push(Step::Alloc {
                id: act,
                size: prompt * 4096 * 2 * 4,
            });
            steps.push(Step::Free { id: act });
            running.push((kv, prompt, output));
        }
        let batch_tokens = running.len().max(1);
        let act = id();
        steps.push(Step::Alloc {
            id: act,
            size: batch_tokens * 4096 * 2 * 8 + 4 * MIB,
        });
        steps.push(Step::Free { id: act });
        let mut i = 0;
        while i < running.len() {
            let (kv, tokens, left) = &mut running[i];
            *tokens += 1;
            *left -= 1;
            if *left == 0 {
                steps.push(Step::Free { id: *kv });
                running.swap_remove(i);
                continue;
            }
            if *tokens % 32 == 0 {
                let grown = id();
                steps.push(Step::Alloc {
                    id: grown,
                    size: (*tokens + 32) * KV_PER_TOKEN,
                });
                steps.push(Step::Free { id: *kv });
                *kv = grown;
            }
            i += 1;
        }
    }
    for (kv, _, _) in running {
        steps.push(Step::Free { id: kv });
    }
    Trace {
        name: "LLM serving",
        steps,
    }
}

/// benches/pool.rs's prefill trace: 200 requests of Pareto lengths, each a
/// hidden-state buffer and per-layer activations, nested LIFO.
fn prefill_trace(seed: u64) -> Trace {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D ^ seed);
    let mut steps = Vec::new();
    let mut n = 0;
    let mut id = || {
        n += 1;
        n
    };
    for _ in 0..200 {
        let u = ((rng.next() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        let len = ((32.0 / u.powf(1.0 / 1.2)) as usize).clamp(16, 8192);
        let h = len * 4096 * 2;
        let hidden = id();
        steps.push(Step::Alloc {
            id: hidden,
            size: h,
        });
        for _ in 0..4 {
            let (qkv, attn, mlp) = (id(), id(), id());
            steps.push(Step::Alloc {
                id: qkv,
                size: 3 * h,
            });
            steps.push(Step::Alloc { id: attn, size: h });
            steps.push(Step::Free { id: qkv });
            steps.push(Step::Alloc {
                id: mlp,
                size: 4 * h,
            });
            steps.push(Step::Free { id: mlp });
            steps.push(Step::Free { id: attn });
        }
        steps.push(Step::Free { id: hidden });
    }
    Trace {
        name: "prefill",
        steps,
    }
}

const LAYERS: usize = 32;
/// Per-layer workspaces of a 7B-class model decoding one token (as in
/// benches/pool.rs).
const DECODE_SIZES: [usize; 4] = [16 * KIB, 1536 * KIB, 256 * KIB, 11 * MIB];

/// benches/pool.rs's decode trace, 20 tokens.
fn decode_trace() -> Trace {
    let mut steps = Vec::new();
    let mut n = 0;
    for _ in 0..20 {
        n += 1;
        let hidden = n;
        steps.push(Step::Alloc {
            id: hidden,
            size: 32 * KIB,
        });
        for _ in 0..LAYERS {
            let ids = [n + 1, n + 2, n + 3, n + 4];
            n += 4;
            steps.push(Step::Alloc {
                id: ids[0],
                size: DECODE_SIZES[0],
            });
            steps.push(Step::Alloc {
                id: ids[1],
                size: DECODE_SIZES[1],
            });
            steps.push(Step::Alloc {
                id: ids[2],
                size: DECODE_SIZES[2],
            });
            steps.push(Step::Free { id: ids[2] });
            steps.push(Step::Alloc {
                id: ids[3],
                size: DECODE_SIZES[3],
            });
            steps.push(Step::Free { id: ids[3] });
            steps.push(Step::Free { id: ids[1] });
            steps.push(Step::Free { id: ids[0] });
        }
        steps.push(Step::Free { id: hidden });
    }
    Trace {
        name: "decode",
        steps,
    }
}

/// The smallest capacity (multiple of the peak live bytes, 0.5 % steps)
/// at which `trace` completes, up to 3 x.
fn smallest_fraction(trace: &Trace, expandable: bool) -> Option<f64> {
    let peak = trace.peak_live() as f64;
    (0..=400).map(|i| 1.0 + i as f64 * 0.005).find(|&f| {
        let capacity = (peak * f) as usize;
        trace.completes(capacity, expandable)
    })
}

fn report() {
    eprintln!(
        "smallest device capacity / peak live bytes at which the trace completes (0.5 % steps):"
    );
    eprintln!(
        "  {:<16} {:>12} {:>8} {:>12}",
        "trace", "peak live", "fixed", "expandable"
    );
    for trace in [
        random_trace(0),
        serving_trace(0),
        prefill_trace(0),
        decode_trace(),
    ] {
        let show = |f: Option<f64>| f.map_or("> 3".to_string(), |f| format!("{f:.3}"));
        eprintln!(
            "  {:<16} {:>8.1} MiB {:>8} {:>12}",
            trace.name,
            trace.peak_live() as f64 / MIB as f64,
            show(smallest_fraction(&trace, false)),
            show(smallest_fraction(&trace, true)),
        );
    }
}

/// With `EXPANDABLE_SEEDS=n`, the mean of the same figures over the seeds
/// 0 to n - 1 of the generated traces: one trace's figure moves with small
/// changes of placement, the mean shows whether a policy helps.
fn report_seeds() {
    let Some(n) = std::env::var("EXPANDABLE_SEEDS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&n| n > 1)
    else {
        return;
    };
    eprintln!(
        "mean over seeds 0 to {} (a trace that needs more than 3 x counts as 3):",
        n - 1
    );
    let generators: [fn(u64) -> Trace; 3] = [random_trace, serving_trace, prefill_trace];
    for generate in generators {
        let (mut fixed, mut expandable) = (0.0, 0.0);
        let mut name = "";
        for seed in 0..n {
            let trace = generate(seed);
            name = trace.name;
            fixed += smallest_fraction(&trace, false).unwrap_or(3.0);
            expandable += smallest_fraction(&trace, true).unwrap_or(3.0);
        }
        eprintln!(
            "  {:<16} {:>21.3} {:>12.3}",
            name,
            fixed / n as f64,
            expandable / n as f64
        );
    }
}

fn main() {
    report();
    report_seeds();
    divan::main();
}

fn decode_token(pool: &Pool) {
    let hidden = pool.malloc(32 * KIB).unwrap().get();
    for _ in 0..LAYERS {
        let norm = pool.malloc(DECODE_SIZES[0]).unwrap().get();
        let attn = pool.malloc(DECODE_SIZES[1]).unwrap().get();
        let proj = pool.malloc(DECODE_SIZES[2]).unwrap().get();
        pool.free(black_box(proj)).unwrap();
        let mlp = pool.malloc(DECODE_SIZES[3]).unwrap().get();
        pool.free(black_box(mlp)).unwrap();
        pool.free(black_box(attn)).unwrap();
        pool.free(black_box(norm)).unwrap();
    }
    pool.free(hidden).unwrap();
}

#[divan::bench(args = ["fixed", "expandable"], sample_size = 4000)]
fn cached_pair(bencher: divan::Bencher, mode: &str) {
    let p = pool(1 << 40, mode == "expandable");
    p.free(p.malloc(4096).unwrap().get()).unwrap();
    bencher.bench_local(|| p.free(p.malloc(black_box(4096)).unwrap().get()).unwrap());
}

#[divan::bench(args = ["fixed", "expandable"])]
fn decode_one_token(bencher: divan::Bencher, mode: &str) {
    let p = pool(1 << 40, mode == "expandable");
    decode_token(&p);
    bencher.bench_local(|| decode_token(&p));
}
