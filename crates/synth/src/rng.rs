//! A small, fast, seedable PRNG (splitmix64). Not cryptographic: it only has
//! to be deterministic across platforms and cheap enough for >100 MB/s.

use std::cell::Cell;

/// The splitmix64 finalizer: a bijection on u64, so distinct inputs give
/// distinct outputs (ids rely on this to stay unique).
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The state sits in a `Cell` so that drawing a number needs only `&self`:
/// builders can then write `sc.step(at + sc.dt(..), ..)`.
pub(crate) struct Rng(Cell<u64>);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(Cell::new(seed))
    }

    pub fn next_u64(&self) -> u64 {
        let s = self.0.get().wrapping_add(0x9e37_79b9_7f4a_7c15);
        self.0.set(s);
        mix(s)
    }

    /// Uniform in 0..n (n > 0), by multiply-shift: no modulo bias worth caring about.
    pub fn below(&self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in lo..=hi.
    pub fn range(&self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    pub fn chance(&self, p: f64) -> bool {
        ((self.next_u64() >> 11) as f64) * (1.0 / (1u64 << 53) as f64) < p
    }

    pub fn pick<T: Copy>(&self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}
