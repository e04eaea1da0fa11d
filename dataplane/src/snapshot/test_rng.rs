//! A small deterministic generator (xorshift64*) for the random-change tests of the snapshot
//! builders, so that a failure reproduces from its seed.

/// The generator's state; any non-zero seed.
pub(crate) struct Rng(pub u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n`.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// One of `items`.
    pub(crate) fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    /// Up to `most` items of `items`, repeats possible.
    pub(crate) fn some<T: Clone>(&mut self, items: &[T], most: usize) -> Vec<T> {
        (0..self.below(most + 1))
            .map(|_| items[self.below(items.len())].clone())
            .collect()
    }
}
