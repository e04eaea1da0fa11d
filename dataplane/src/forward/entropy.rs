//! Unpredictable upstream query IDs. Together with the kernel's random source port, the ID is
//! what an off-path attacker must guess to slip a forged answer into the cache (RFC 5452), so
//! it comes from the kernel's CSPRNG, fetched a block at a time to keep the syscall rare.

use std::hash::BuildHasher;

/// Random bytes fetched per refill: 128 IDs per `getrandom` call.
const POOL_LEN: usize = 256;

/// A per-worker pool of random bytes.
#[derive(Debug)]
pub struct Entropy {
    pool: [u8; POOL_LEN],
    used: usize,
    fallback: std::collections::hash_map::RandomState,
    counter: u64,
}

impl Default for Entropy {
    fn default() -> Entropy {
        Entropy {
            pool: [0; POOL_LEN],
            used: POOL_LEN,
            fallback: std::collections::hash_map::RandomState::new(),
            counter: 0,
        }
    }
}

impl Entropy {
    /// A random 16-bit value.
    pub fn u16(&mut self) -> u16 {
        if self.used + 2 > POOL_LEN {
            self.refill();
        }
        let v = u16::from_be_bytes([self.pool[self.used], self.pool[self.used + 1]]);
        self.used += 2;
        v
    }

    fn refill(&mut self) {
        if getrandom::getrandom(&mut self.pool).is_err() {
            // The kernel source failed (it does not, once booted): fall back to SipHash keyed
            // with the randomness std drew at start, over a counter.
            for chunk in self.pool.chunks_mut(8) {
                self.counter = self.counter.wrapping_add(1);
                let v = self.fallback.hash_one(self.counter).to_ne_bytes();
                chunk.copy_from_slice(&v[..chunk.len()]);
            }
        }
        self.used = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_vary_across_refills() {
        let mut e = Entropy::default();
        let ids: std::collections::HashSet<u16> = (0..1000).map(|_| e.u16()).collect();
        assert!(ids.len() > 900, "{} distinct of 1000", ids.len());
    }
}
