//! Shared by the history tests: a realistic recorded pool session and the
//! peak computed straight from a snapshot's trace.
#![allow(dead_code)]

use aclalloc::pool::Pool;
use serde_json::Value;

pub const MIB: usize = 1 << 20;

/// A small deterministic generator (xorshift64).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// An inference service on three streams: weights loaded first, then
/// `requests` requests, each with a prefill (large activations), a few decode
/// steps with workspaces and a growing KV cache, and small scratch blocks;
/// every request's memory is freed at its end except a small per-request
/// cache entry. Midway the cache is emptied, and a request far over the
/// pool's limit fails (an `oom` event). Returns the number of operations.
pub fn inference_session(pool: &Pool, requests: usize) -> usize {
    let streams = [0x5581_2a40_1000usize, 0x5581_2a40_2200, 0x5581_2a40_3400];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut ops = 0;
    let mut weights = Vec::new();
    for i in 0..12 {
        weights.push(
            pool.malloc_on(streams[0], (24 + i * 3) * MIB)
                .unwrap()
                .get(),
        );
        ops += 1;
    }
    let mut kept = Vec::new();
    for r in 0..requests {
        let stream = streams[r % streams.len()];
        let mut live = Vec::new();
        let prefill = (40 + rng.below(180) as usize) * MIB;
        live.push(pool.malloc_on(stream, prefill).unwrap().get());
        live.push(pool.malloc_on(stream, prefill / 3).unwrap().get());
        ops += 2;
        for step in 0..6 {
            let kv = (2 + step * 2 + rng.below(3) as usize) * MIB;
            live.push(pool.malloc_on(stream, kv).unwrap().get());
            let workspace = pool
                .malloc_on(stream, 256 * 1024 + rng.below(6 * MIB as u64) as usize)
                .unwrap()
                .get();
            for _ in 0..8 {
                let small = pool
                    .malloc_on(stream, 512 + rng.below(64 * 1024) as usize)
                    .unwrap();
                pool.free(small.get()).unwrap();
                ops += 2;
            }
            pool.free(workspace).unwrap();
            ops += 3;
        }
        if r == requests / 2 {
            assert!(pool.malloc_on(stream, 64 << 30).is_err(), "over the limit");
            ops += 1;
        }
        kept.push(pool.malloc_on(stream, 96 * 1024).unwrap().get());
        for a in live.drain(..) {
            pool.free(a).unwrap();
            ops += 1;
        }
        if r == requests * 3 / 4 {
            pool.empty_cache();
        }
    }
    for a in kept.into_iter().take(requests / 2) {
        pool.free(a).unwrap();
        ops += 1;
    }
    for a in weights.drain(6..) {
        pool.free(a).unwrap();
        ops += 1;
    }
    ops
}

/// A number written as an integer or a "0x..." string.
pub fn number(v: &Value) -> u64 {
    match v {
        Value::String(s) => u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap(),
        other => other.as_u64().unwrap(),
    }
}

/// The peak of allocated bytes, from the trace alone: block sizes added at
/// `alloc`, taken away at `free_completed`, starting from nothing.
pub fn peak_from_trace(snapshot: &Value) -> u64 {
    let (mut now, mut peak) = (0i64, 0i64);
    for e in snapshot["device_traces"][0].as_array().unwrap() {
        let size = e["block_size"].as_i64().unwrap_or(0);
        match e["action"].as_str().unwrap() {
            "alloc" => now += size,
            "free_completed" => now -= size,
            _ => {}
        }
        peak = peak.max(now);
    }
    peak as u64
}
