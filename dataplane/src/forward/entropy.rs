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
    source: Source,
}

/// Where the bytes come from.
#[derive(Debug)]
enum Source {
    /// The kernel; if it ever failed, SipHash keyed with the randomness std drew at start, over
    /// a counter.
    Kernel {
        fallback: std::collections::hash_map::RandomState,
        counter: u64,
    },
    /// A fixed sequence (SplitMix64 from a seed).
    Seeded(u64),
}

impl Default for Entropy {
    fn default() -> Entropy {
        Entropy {
            pool: [0; POOL_LEN],
            used: POOL_LEN,
            source: Source::Kernel {
                fallback: std::collections::hash_map::RandomState::new(),
                counter: 0,
            },
        }
    }
}

impl Entropy {
    /// The same values for the same `seed`, every time: for simulations (the forwarder's state
    /// machine in tests and under the `upstream` fuzz target), whose runs must replay exactly.
    /// Never for a server: its IDs could be predicted.
    pub fn seeded(seed: u64) -> Entropy {
        Entropy {
            pool: [0; POOL_LEN],
            used: POOL_LEN,
            source: Source::Seeded(seed),
        }
    }

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
        match &mut self.source {
            Source::Kernel { fallback, counter } => {
                if getrandom::getrandom(&mut self.pool).is_err() {
                    // The kernel source failed (it does not, once booted).
                    for chunk in self.pool.chunks_mut(8) {
                        *counter = counter.wrapping_add(1);
                        let v = fallback.hash_one(*counter).to_ne_bytes();
                        chunk.copy_from_slice(&v[..chunk.len()]);
                    }
                }
            }
            Source::Seeded(state) => {
                for chunk in self.pool.chunks_mut(8) {
                    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                    let mut z = *state;
                    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                    let v = (z ^ (z >> 31)).to_ne_bytes();
                    chunk.copy_from_slice(&v[..chunk.len()]);
                }
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

    #[test]
    fn a_seed_replays_its_ids_and_still_spreads_them() {
        let run = |seed| {
            let mut e = Entropy::seeded(seed);
            (0..1000).map(|_| e.u16()).collect::<Vec<u16>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        let distinct: std::collections::HashSet<u16> = run(7).into_iter().collect();
        assert!(distinct.len() > 900, "{} distinct of 1000", distinct.len());
    }
}
