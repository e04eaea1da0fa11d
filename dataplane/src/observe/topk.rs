//! The top talkers: a space-saving sketch (Metwally, Agrawal and El Abbadi, "Efficient
//! computation of frequent and top-k elements in data streams", 2005) of client addresses and
//! of query names per worker, merged when the metrics endpoint is scraped.
//!
//! A sketch of `m` counters holds every key whose count exceeds `N / m` after `N` updates, and
//! overestimates any count it reports by at most `N / m` (and by at most its own `error`). A
//! worker updates its own sketches only, with no lock and no allocation once a slot's key buffer
//! is as long as the longest key it held; it publishes a copy every [`PUBLISH_INTERVAL`] at most,
//! which the scrape reads. The published rows are few (`m` per sketch), so the scrape's merge is
//! cheap and the exported series are `K` per family whatever the traffic.

use arc_swap::ArcSwap;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Counters kept per sketch for each of the `K` entries exported: the more counters, the
/// smaller the error bound `N / m`.
pub const COUNTERS_PER_ENTRY: usize = 8;
/// Fewest counters a sketch keeps, so that a small `K` still separates the heavy keys well.
pub const MIN_COUNTERS: usize = 64;
/// How often at most a worker publishes its sketches for the scrape.
pub const PUBLISH_INTERVAL: Duration = Duration::from_millis(250);
/// Every count (and its error) is halved this often, so that the sketches follow who asks now:
/// a client asking `r` queries a second settles between `r·60` and `r·120`, and yesterday's
/// heaviest client falls out within minutes of going quiet.
pub const HALF_LIFE: Duration = Duration::from_secs(60);

/// A space-saving sketch over byte-string keys with `capacity` counters.
#[derive(Debug, Clone)]
pub struct SpaceSaving {
    hashes: Vec<u64>,
    counts: Vec<u64>,
    errors: Vec<u64>,
    keys: Vec<Vec<u8>>,
    capacity: usize,
    total: u64,
}

/// One key with its estimated count: the true count lies in `count - error ..= count`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counted<K> {
    /// The key.
    pub key: K,
    /// Its estimated count, never below the true one.
    pub count: u64,
    /// By how much `count` may exceed the true count.
    pub error: u64,
}

impl SpaceSaving {
    /// A sketch of `capacity` counters (at least one).
    pub fn new(capacity: usize) -> SpaceSaving {
        let capacity = capacity.max(1);
        SpaceSaving {
            hashes: Vec::with_capacity(capacity),
            counts: Vec::with_capacity(capacity),
            errors: Vec::with_capacity(capacity),
            keys: Vec::with_capacity(capacity),
            capacity,
            total: 0,
        }
    }

    /// Updates seen so far.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Counts one occurrence of `key`.
    pub fn add(&mut self, key: &[u8]) {
        self.total += 1;
        let hash = hash(key);
        let mut at = 0;
        while let Some(offset) = self.hashes[at..].iter().position(|&h| h == hash) {
            let i = at + offset;
            if self.keys[i] == key {
                self.counts[i] += 1;
                return;
            }
            at = i + 1;
        }
        if self.counts.len() < self.capacity {
            self.hashes.push(hash);
            self.counts.push(1);
            self.errors.push(0);
            self.keys.push(key.to_vec());
            return;
        }
        // The key with the least count makes room; the newcomer inherits its count as error.
        let (min, &floor) = self
            .counts
            .iter()
            .enumerate()
            .min_by_key(|&(_, c)| *c)
            .unwrap_or((0, &0));
        self.hashes[min] = hash;
        self.errors[min] = floor;
        self.counts[min] = floor + 1;
        let slot = &mut self.keys[min];
        slot.clear();
        slot.extend_from_slice(key);
    }

    /// Halves every count and error `times` times over (an error never above its count); a
    /// counter that reaches 0 is the first to make room.
    pub fn decay(&mut self, times: u32) {
        let shift = times.min(63);
        for (count, error) in self.counts.iter_mut().zip(&mut self.errors) {
            *count >>= shift;
            *error = (*error >> shift).min(*count);
        }
        self.total >>= shift;
    }

    /// Every counter, largest count first.
    pub fn counted(&self) -> Vec<Counted<Vec<u8>>> {
        let mut rows: Vec<Counted<Vec<u8>>> = (0..self.counts.len())
            .map(|i| Counted {
                key: self.keys[i].clone(),
                count: self.counts[i],
                error: self.errors[i],
            })
            .collect();
        rows.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
        rows
    }
}

/// FNV-1a: keys are short, and the sketch needs no resistance to chosen collisions (a
/// collision costs a byte comparison).
fn hash(key: &[u8]) -> u64 {
    key.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Merges the sketches of several workers: counts of one key add up, as do their errors; the
/// `k` largest, largest first.
pub fn merge<'a>(sketches: impl IntoIterator<Item = &'a [Counted<Vec<u8>>]>, k: usize) -> Vec<Counted<Vec<u8>>> {
    let mut merged: Vec<Counted<Vec<u8>>> = Vec::new();
    for rows in sketches {
        for row in rows {
            match merged.iter_mut().find(|m| m.key == row.key) {
                Some(m) => {
                    m.count += row.count;
                    m.error += row.error;
                }
                None => merged.push(row.clone()),
            }
        }
    }
    merged.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
    merged.truncate(k);
    merged
}

/// What one worker last published: its client and name sketches.
#[derive(Debug, Default)]
pub struct Published {
    /// Client addresses: 4 or 16 bytes.
    pub clients: Vec<Counted<Vec<u8>>>,
    /// Query names, lower-cased, in wire form.
    pub names: Vec<Counted<Vec<u8>>>,
}

/// The top talkers of every worker, read by the scrape.
#[derive(Debug, Clone)]
pub struct TopReader {
    k: usize,
    workers: Arc<[Arc<ArcSwap<Published>>]>,
}

/// The merged top talkers at one moment: `K` rows at most per family, largest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopTalkers {
    /// Client addresses with their estimated query counts.
    pub clients: Vec<Counted<IpAddr>>,
    /// Query names, as presentation text ending in a dot, with their estimated counts.
    pub names: Vec<Counted<String>>,
}

impl TopReader {
    pub(crate) fn new(k: usize, workers: Vec<Arc<ArcSwap<Published>>>) -> TopReader {
        TopReader {
            k,
            workers: workers.into(),
        }
    }

    /// Merges what every worker published last.
    pub fn read(&self) -> TopTalkers {
        let published: Vec<Arc<Published>> = self.workers.iter().map(|w| w.load_full()).collect();
        let clients = merge(published.iter().map(|p| p.clients.as_slice()), self.k)
            .into_iter()
            .filter_map(|row| {
                let ip = match row.key.len() {
                    4 => IpAddr::from(<[u8; 4]>::try_from(row.key.as_slice()).ok()?),
                    16 => IpAddr::from(<[u8; 16]>::try_from(row.key.as_slice()).ok()?),
                    _ => return None,
                };
                Some(Counted {
                    key: ip,
                    count: row.count,
                    error: row.error,
                })
            })
            .collect();
        let names = merge(published.iter().map(|p| p.names.as_slice()), self.k)
            .into_iter()
            .map(|row| Counted {
                key: presentation(&row.key),
                count: row.count,
                error: row.error,
            })
            .collect();
        TopTalkers { clients, names }
    }
}

/// A wire-form name as lower-case text: labels joined by dots, a final dot, bytes other than letters,
/// digits, `-` and `_` escaped as `\DDD` (so that any label value is safe to print).
pub(crate) fn presentation(wire: &[u8]) -> String {
    Presentation(wire).to_string()
}

/// [`presentation`] written straight into a formatter, for a writer that must not allocate.
pub(crate) struct Presentation<'a>(pub(crate) &'a [u8]);

impl std::fmt::Display for Presentation<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let wire = self.0;
        let mut at = 0;
        while let Some(&len) = wire.get(at) {
            if len == 0 {
                break;
            }
            let label = wire.get(at + 1..at + 1 + usize::from(len)).unwrap_or_default();
            for &b in label {
                if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
                    f.write_char(char::from(b.to_ascii_lowercase()))?;
                } else {
                    write!(f, "\\{b:03}")?;
                }
            }
            f.write_char('.')?;
            at += 1 + usize::from(len);
        }
        if at == 0 {
            f.write_char('.')?;
        }
        Ok(())
    }
}

/// One worker's sketches and where it publishes them.
#[derive(Debug)]
pub(crate) struct TopCounter {
    clients: SpaceSaving,
    names: SpaceSaving,
    sample: u32,
    seen: u32,
    dirty: bool,
    last_publish: Option<Instant>,
    /// When the counts were last halved ([`HALF_LIFE`]); `None` before the first publication.
    decayed_at: Option<Instant>,
    published: Arc<ArcSwap<Published>>,
}

impl TopCounter {
    /// Sketches with `counters` counters each, counting one in `sample` queries.
    pub(crate) fn new(counters: usize, sample: u32, published: Arc<ArcSwap<Published>>) -> TopCounter {
        TopCounter {
            clients: SpaceSaving::new(counters),
            names: SpaceSaving::new(counters),
            sample: sample.max(1),
            seen: 0,
            dirty: false,
            last_publish: None,
            decayed_at: None,
            published,
        }
    }

    /// Whether the next query is counted: one in `sample`. Asked before the query's name is
    /// read, so that a query left out costs a counter only.
    #[inline]
    pub(crate) fn sampled(&mut self) -> bool {
        self.seen += 1;
        if self.seen < self.sample {
            return false;
        }
        self.seen = 0;
        true
    }

    /// Counts a query from `client` for `name` (lower-cased wire form).
    pub(crate) fn count(&mut self, client: IpAddr, name: Option<&[u8]>) {
        match client {
            IpAddr::V4(v4) => self.clients.add(&v4.octets()),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => self.clients.add(&v4.octets()),
                None => self.clients.add(&v6.octets()),
            },
        }
        if let Some(name) = name {
            self.names.add(name);
        }
        self.dirty = true;
    }

    /// Halves the counts for every [`HALF_LIFE`] passed, then publishes the sketches if they
    /// changed and the last publication is old enough. Called at every turn of the worker's
    /// loop, which an idle worker still makes, so counts decay without traffic too.
    pub(crate) fn publish(&mut self, now: Instant) {
        let decayed_at = *self.decayed_at.get_or_insert(now);
        let halves = now.saturating_duration_since(decayed_at).as_secs() / HALF_LIFE.as_secs();
        if halves > 0 {
            let times = u32::try_from(halves).unwrap_or(u32::MAX);
            self.clients.decay(times);
            self.names.decay(times);
            self.decayed_at = Some(decayed_at + HALF_LIFE * times.min(1 << 20));
            self.dirty = true;
        }
        if !self.dirty
            || self
                .last_publish
                .is_some_and(|at| now.saturating_duration_since(at) < PUBLISH_INTERVAL)
        {
            return;
        }
        self.dirty = false;
        self.last_publish = Some(now);
        self.published.store(Arc::new(Published {
            clients: self.clients.counted(),
            names: self.names.counted(),
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Zipf-like stream over `keys` keys (weight of rank r: 1/r), from a fixed linear
    /// congruential generator so that the test is the same every run.
    fn zipf_stream(keys: usize, n: usize) -> (Vec<u32>, Vec<u64>) {
        let weights: Vec<f64> = (1..=keys).map(|r| 1.0 / r as f64).collect();
        let sum: f64 = weights.iter().sum();
        let mut cumulative = Vec::with_capacity(keys);
        let mut acc = 0.0;
        for w in &weights {
            acc += w / sum;
            cumulative.push(acc);
        }
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let mut stream = Vec::with_capacity(n);
        let mut truth = vec![0u64; keys];
        for _ in 0..n {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let u = (state >> 11) as f64 / (1u64 << 53) as f64;
            let key = cumulative.partition_point(|&c| c < u).min(keys - 1);
            truth[key] += 1;
            stream.push(key as u32);
        }
        (stream, truth)
    }

    #[test]
    fn the_true_top_k_of_a_zipf_stream_is_found_within_the_error_bound() {
        let (k, counters, n) = (10, 80, 200_000);
        let (stream, truth) = zipf_stream(5_000, n);
        let mut sketch = SpaceSaving::new(counters);
        for key in &stream {
            sketch.add(&key.to_be_bytes());
        }
        let bound = (n / counters) as u64;
        let top = merge([sketch.counted().as_slice()], k);
        let mut true_top: Vec<(usize, u64)> = truth.iter().copied().enumerate().collect();
        true_top.sort_by_key(|row| std::cmp::Reverse(row.1));
        for (key, count) in &true_top[..k] {
            let row = top
                .iter()
                .find(|r| r.key == (*key as u32).to_be_bytes())
                .unwrap_or_else(|| panic!("key {key} (count {count}) missing from the top {k}"));
            assert!(row.count >= *count, "space-saving never underestimates");
            assert!(
                row.count - count <= bound,
                "{} vs {count}: past N/m = {bound}",
                row.count
            );
            assert!(row.count - row.error <= *count, "the guaranteed part is a lower bound");
        }
    }

    #[test]
    fn merging_workers_adds_their_counts() {
        let mut a = SpaceSaving::new(4);
        let mut b = SpaceSaving::new(4);
        for _ in 0..5 {
            a.add(b"x");
            b.add(b"x");
        }
        b.add(b"y");
        let top = merge([a.counted().as_slice(), b.counted().as_slice()], 1);
        assert_eq!(
            top,
            [Counted {
                key: b"x".to_vec(),
                count: 10,
                error: 0
            }]
        );
    }

    #[test]
    fn a_client_gone_quiet_decays_and_a_new_one_overtakes_it() {
        let published = Arc::new(ArcSwap::from_pointee(Published::default()));
        let mut top = TopCounter::new(4, 1, Arc::clone(&published));
        let start = Instant::now();
        let old: IpAddr = "192.0.2.1".parse().unwrap();
        let new: IpAddr = "192.0.2.2".parse().unwrap();
        for _ in 0..1000 {
            top.count(old, None);
        }
        top.publish(start);
        assert_eq!(published.load().clients[0].count, 1000);
        // Three half-lives later the old client counts 1000 / 8; then a new one asks 200.
        top.publish(start + HALF_LIFE * 3);
        assert_eq!(published.load().clients[0].count, 1000 / 8);
        for _ in 0..200 {
            top.count(new, None);
        }
        top.publish(start + HALF_LIFE * 3 + PUBLISH_INTERVAL);
        let rows = published.load();
        assert_eq!(rows.clients[0].key, [192, 0, 2, 2]);
        assert_eq!((rows.clients[0].count, rows.clients[1].count), (200, 1000 / 8));
        // Idle, the counts keep decaying: to nothing after 64 half-lives.
        top.publish(start + HALF_LIFE * 70);
        assert!(published
            .load()
            .clients
            .iter()
            .all(|row| row.count == 0 && row.error == 0));
    }

    #[test]
    fn names_are_printed_with_escapes() {
        assert_eq!(presentation(b"\x03www\x07example\x00"), "www.example.");
        assert_eq!(presentation(b"\x02a\"\x00"), "a\\034.");
        assert_eq!(presentation(b"\x00"), ".");
    }
}
