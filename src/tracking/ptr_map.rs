//! A hash map keyed by pointers, hashed with one multiplication.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Hashes pointer-sized keys with one multiplication: block handles are
/// addresses, already well spread in their middle bits.
#[derive(Default)]
pub(crate) struct PtrHasher(u64);

impl Hasher for PtrHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_right(29);
    }
}

pub(crate) type PtrMap<V> = HashMap<usize, V, BuildHasherDefault<PtrHasher>>;
