//! Response rate limiting, as Knot DNS and BIND define it: a server that answers anyone over UDP
//! can be made to send its answers to a forged source address; limiting the responses that go
//! to one network and say the same thing bounds that flood, and the truncated replies it lets
//! through ("slips") let a genuine client behind the same network retry over TCP.
//!
//! Each worker keeps a fixed-size table of token buckets, indexed by a keyed hash of the client's
//! prefix (its /24 or /56 by default) and the response's class: the question's name for answers
//! and NODATA, the zone's apex for NXDOMAIN, errors grouped per apex (or all together where the
//! reply names no zone). No lock, no allocation per response; a bucket whose slot another
//! class takes starts afresh. TCP replies, exempt clients and clients that showed a valid
//! server cookie are never limited. See docs/abuse.md ("Response rate limiting").

use crate::answer::Reply;
use crate::forward::{Acl, Prefix};
use crate::io::Peer;
use crate::wire::name::name_hash;
use crate::wire::types::{flags, rcode, rtype, HEADER_LEN};
use std::cell::Cell;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

/// Buckets per worker: a power of two. 16 bytes each, 256 KiB a worker, made only when
/// limiting is on.
const TABLE_LEN: usize = 1 << 14;

/// How response rate limiting is configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RrlConfig {
    /// Responses a second each bucket allows; 0 turns limiting off.
    pub rate: u32,
    /// Of the responses over the limit, every `slip`th goes out truncated (TC set, no
    /// records), the others are dropped; 0 drops them all, 1 truncates them all.
    pub slip: u32,
    /// Seconds of debt a bucket can build up: a client that went over the limit stays limited
    /// for up to this long after it stops. Credit is capped at one second's worth.
    pub window: u32,
    /// Leading bits of an IPv4 client's address that make its prefix.
    pub ipv4_prefix: u8,
    /// Leading bits of an IPv6 client's address that make its prefix.
    pub ipv6_prefix: u8,
    /// Clients never limited.
    pub exempt: Vec<Prefix>,
}

impl Default for RrlConfig {
    /// Off; when turned on, BIND's and Knot DNS's defaults: slip 2, a 15 s window, /24 and
    /// /56.
    fn default() -> RrlConfig {
        RrlConfig {
            rate: 0,
            slip: 2,
            window: 15,
            ipv4_prefix: 24,
            ipv6_prefix: 56,
            exempt: Vec::new(),
        }
    }
}

impl RrlConfig {
    /// Whether responses are limited at all.
    pub fn is_enabled(&self) -> bool {
        self.rate > 0
    }
}

/// What becomes of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Sent as it is.
    Send,
    /// Over the limit: not sent.
    Drop,
    /// Over the limit: sent truncated, for the client to ask again over TCP.
    Slip,
}

/// One token bucket: which class holds the slot and how far its spending has gone.
///
/// The balance is kept as a point on the limiter's clock ([`Limiter::second`], `rate` units a
/// second): a bucket allowing `rate` a second whose spending has reached `spent` at `now` has
/// `now + rate - spent` responses left, so refilling it for the seconds gone by is a `max`
/// with `now`, not a multiplication by the seconds elapsed.
#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    /// The key's upper half; 0 in an empty slot, which a key whose upper half is 0 finds as
    /// full as a fresh bucket: its `spent` of 0 is long past.
    tag: u32,
    /// Limited responses so far, to pick the ones that slip.
    limited: u32,
    /// The point on the clock the responses charged so far have reached, `now` or earlier
    /// when there is credit left, up to `rate + debt` past it.
    spent: u64,
}

impl Bucket {
    /// Charges one response at `now` (on the limiter's clock) to a bucket allowing `rate` a
    /// second, with `rate + debt` at most outstanding (`cap`); whether it is over the limit.
    #[inline(always)]
    fn charge(&mut self, tag: u32, now: u64, rate: u64, cap: u64) -> bool {
        if self.tag != tag {
            *self = Bucket {
                tag,
                limited: 0,
                spent: now + 1,
            };
            return false;
        }
        let spent = self.spent.max(now) + 1;
        if spent <= now + rate {
            self.spent = spent;
            return false;
        }
        self.spent = spent.min(now + cap);
        true
    }
}

/// A worker's rate limiter: its buckets and settings.
pub struct Limiter {
    /// A fixed-size array, so that indexing it with a masked key needs no bounds check.
    table: Box<[Bucket; TABLE_LEN]>,
    rate: u64,
    /// `rate` plus the debt the window allows: how far past now a bucket's spending can reach.
    cap: u64,
    slip: u32,
    v4_mask: u32,
    v6_mask: u128,
    /// `None` when no client is exempt, so that the check costs nothing then; boxed, so that
    /// it is one null test.
    exempt: Option<Box<Acl>>,
    /// Keys the hash of the apex names of negative replies.
    seed: u64,
    /// The odd multiplier, drawn from the seed, of the rounds that make a bucket's key.
    multiplier: u64,
    epoch: Instant,
    /// The clock's last reading and the span of time it holds for: most batches of replies
    /// fall in the second of the one before, and comparing instants costs less than
    /// subtracting them.
    tick: Cell<Tick>,
}

/// A reading of the limiter's clock: its value for every instant from `from` until `until`.
#[derive(Debug, Clone, Copy)]
struct Tick {
    from: Instant,
    until: Instant,
    value: u64,
}

impl std::fmt::Debug for Limiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limiter")
            .field("rate", &self.rate)
            .field("slip", &self.slip)
            .finish_non_exhaustive()
    }
}

/// The response classes of Knot DNS and BIND that skyline's replies fall in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Answer = 0,
    NoData = 1,
    NxDomain = 2,
    Error = 3,
}

impl Class {
    /// The class where it goes in a bucket's key: above the 32 bits of an IPv4 prefix.
    #[inline(always)]
    fn bits(self) -> u64 {
        (self as u64) << 32
    }
}

impl Limiter {
    /// A limiter for `config`, `None` when it limits nothing; `seed` keys the hash, so that
    /// nobody outside can aim two classes at one bucket.
    pub fn new(config: &RrlConfig, seed: u64, epoch: Instant) -> Option<Limiter> {
        if !config.is_enabled() {
            return None;
        }
        let rate = config.rate.min(i32::MAX as u32 / 4);
        let debt = (u64::from(rate) * u64::from(config.window.max(1))).min(i32::MAX as u64 / 2);
        Some(Limiter {
            table: vec![Bucket::default(); TABLE_LEN]
                .into_boxed_slice()
                .try_into()
                .expect("TABLE_LEN buckets"),
            rate: u64::from(rate),
            cap: u64::from(rate) + debt,
            slip: config.slip,
            v4_mask: u32::MAX
                .checked_shl(32 - u32::from(config.ipv4_prefix.min(32)))
                .unwrap_or(0)
                .to_be(),
            v6_mask: u128::MAX
                .checked_shl(128 - u32::from(config.ipv6_prefix.min(128)))
                .unwrap_or(0)
                .to_be(),
            exempt: (!config.exempt.is_empty()).then(|| Box::new(Acl::new(config.exempt.clone()))),
            seed,
            // Mixed, so that a seed with few bits set (a test's) still makes a multiplier whose
            // upper bits carry a prefix's upper bits into the table index.
            multiplier: mix(seed, 0x5851_F42D_4C95_7F2D) | 1,
            epoch,
            tick: Cell::new(Tick {
                from: epoch,
                until: epoch,
                value: 0,
            }),
        })
    }

    /// The limiter's clock at `now`: whole seconds since it started, plus one, each counted as
    /// `rate` units, the scale buckets keep their spending on. Read once per batch of replies.
    pub fn second(&self, now: Instant) -> u64 {
        let tick = self.tick.get();
        if tick.from <= now && now < tick.until {
            return tick.value;
        }
        self.read_clock(now)
    }

    /// [`Limiter::second`] at a new second, which `tick` then holds for the rest of it.
    #[cold]
    fn read_clock(&self, now: Instant) -> u64 {
        let seconds = now.saturating_duration_since(self.epoch).as_secs();
        let from = self.epoch + Duration::from_secs(seconds);
        let tick = Tick {
            from,
            until: from + Duration::from_secs(1),
            value: (seconds + 1) * self.rate,
        };
        self.tick.set(tick);
        tick.value
    }

    /// Charges `reply`, a UDP reply about to go to `client` with the facts the answer path
    /// reported, at `now` (see [`Limiter::second`]), and says what to do with it. Inlined
    /// into the worker's loop: a call's register saves would cost a third of it.
    #[inline(always)]
    pub fn judge(&mut self, client: &Peer, reply: &[u8], facts: &Reply, now: u64) -> Action {
        let (bits, v4) = client.ip_raw();
        if self.exempt.is_some() && self.exempt_allows(bits, v4) {
            return Action::Send;
        }
        let class = self.class_hash(reply, facts);
        let m = self.multiplier;
        let key = if v4 {
            // The prefix's 32 bits and the class's (above them) never overlap: one round.
            fold(class ^ u64::from(bits as u32 & self.v4_mask), m)
        } else {
            let prefix = bits & self.v6_mask;
            fold(fold(fold(class, m) ^ prefix as u64, m) ^ (prefix >> 64) as u64, m)
        };
        let bucket = &mut self.table[key as usize & (TABLE_LEN - 1)];
        if !bucket.charge((key >> 32) as u32, now, self.rate, self.cap) {
            return Action::Send;
        }
        bucket.limited = bucket.limited.wrapping_add(1);
        if self.slip != 0 && bucket.limited.is_multiple_of(self.slip) {
            Action::Slip
        } else {
            Action::Drop
        }
    }

    /// Whether the client is in the exempt list; only asked when there is one.
    #[cold]
    fn exempt_allows(&self, bits: u128, v4: bool) -> bool {
        let ip = if v4 {
            IpAddr::from(Ipv4Addr::from((bits as u32).to_ne_bytes()))
        } else {
            IpAddr::from(Ipv6Addr::from(bits.to_ne_bytes()))
        };
        self.exempt.as_ref().is_some_and(|exempt| exempt.allows(ip))
    }

    /// The hash of the name that keys a reply within its class, with the class in bits 32 and
    /// 33: the question's name for an answer or NODATA (hashed as the name is hashed when it is
    /// read, case folded, so every spelling of a name shares a bucket),
    /// the zone's apex for NXDOMAIN and errors (the suffix of the question's name its SOA's
    /// owner points to). A NOERROR reply, the common case, reads one word of the header.
    #[inline(always)]
    fn class_hash(&self, reply: &[u8], facts: &Reply) -> u64 {
        let end = usize::from(facts.question_end());
        if end < HEADER_LEN + 5 || reply.len() < end {
            return Class::Error.bits();
        }
        let answers = u16::from_ne_bytes([reply[6], reply[7]]) != 0;
        if facts.rcode() == rcode::NOERROR {
            let class = if answers { Class::Answer } else { Class::NoData };
            let name = &reply[HEADER_LEN..end - 4];
            return u64::from(name_hash(name) as u32) ^ class.bits();
        }
        self.negative_hash(reply, end, answers, facts.rcode())
    }

    /// [`Limiter::class_hash`] of an NXDOMAIN or error reply: keyed by the zone, whatever name
    /// was asked, so that random names under one zone share a bucket.
    #[inline(never)]
    fn negative_hash(&self, reply: &[u8], question_end: usize, answers: bool, code: u16) -> u64 {
        let class = if code == rcode::NXDOMAIN {
            Class::NxDomain
        } else {
            Class::Error
        };
        self.apex_hash(reply, question_end, answers) ^ class.bits()
    }

    /// The hash of the apex a negative reply's SOA names (its owner, a pointer into the
    /// question's name); 0 when the reply has no SOA there.
    #[inline(always)]
    fn apex_hash(&self, reply: &[u8], question_end: usize, answers: bool) -> u64 {
        let authority = u16::from_be_bytes([reply[8], reply[9]]);
        if authority == 0 || answers {
            return 0;
        }
        match reply.get(question_end..question_end + 2) {
            Some(&[hi, lo]) if hi & 0xC0 == 0xC0 => {
                let at = usize::from(u16::from_be_bytes([hi & 0x3F, lo]));
                let name_end = question_end - 4;
                match reply.get(at..name_end).filter(|_| at >= HEADER_LEN) {
                    Some(apex) => fold_hash(self.seed, apex),
                    None => 0,
                }
            }
            _ => 0,
        }
    }
}

/// Where the question's name ends in a reply that has one.
fn question_name_end(reply: &[u8]) -> Option<usize> {
    if reply.get(4..6)? == [0, 0] {
        return None;
    }
    let mut at = HEADER_LEN;
    loop {
        let len = usize::from(*reply.get(at)?);
        if len == 0 {
            return Some(at + 1);
        }
        if len & 0xC0 != 0 {
            return None;
        }
        at += 1 + len;
    }
}

/// A hash of a name in wire form keyed by `seed` that folds ASCII case, eight bytes at a time:
/// setting bit 5 of every byte maps upper-case letters onto lower-case ones (and merges a few
/// other bytes, which only ever shares a bucket). A name of eight bytes or more ends with the
/// last eight bytes, overlapping the word before, so no partial word is ever copied.
#[inline]
fn fold_hash(seed: u64, name: &[u8]) -> u64 {
    const CASE: u64 = 0x2020_2020_2020_2020;
    let word = |bytes: &[u8]| u64::from_le_bytes(bytes.try_into().unwrap_or_default()) | CASE;
    let mut hash = seed ^ name.len() as u64;
    if name.len() < 8 {
        let mut last = [0u8; 8];
        last[..name.len()].copy_from_slice(name);
        return mix(hash, word(&last));
    }
    let mut chunks = name[..name.len() - 1].chunks_exact(8);
    for chunk in &mut chunks {
        hash = mix(hash, word(chunk));
    }
    mix(hash, word(&name[name.len() - 8..]))
}

/// The round that makes a bucket's key: the 128-bit product with the limiter's secret odd
/// multiplier, its halves folded, so that every bit of `word` reaches both the table index (the
/// low bits) and the tag (the upper half), and nobody outside can tell which keys collide.
#[inline(always)]
fn fold(word: u64, multiplier: u64) -> u64 {
    let product = u128::from(word) * u128::from(multiplier);
    product as u64 ^ (product >> 64) as u64
}

#[inline(always)]
fn mix(hash: u64, word: u64) -> u64 {
    (hash ^ word).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29)
}

/// Rewrites the `len`-byte reply in `out` as a slipped one: the header with TC set and no
/// records but the question and the OPT record, when the reply had one (an OPT goes back to a
/// query that had one, RFC 6891 §7). Returns the new length.
pub fn slip(out: &mut [u8], len: usize) -> usize {
    let reply = &out[..len];
    let Some(name_end) = question_name_end(reply) else {
        let len = len.min(HEADER_LEN);
        out[4..len].fill(0);
        out[2] |= (flags::TC >> 8) as u8;
        return len;
    };
    let question_end = (name_end + 4).min(len);
    let word = |at: usize| u16::from_be_bytes([reply[at], reply[at + 1]]);
    let records = u32::from(word(6)) + u32::from(word(8)) + u32::from(word(10));
    let mut at = question_end;
    let mut opt = None;
    for _ in 0..records {
        let Ok(name_end) = crate::wire::name::skip_name(reply, at) else {
            break;
        };
        if name_end + 10 > len {
            break;
        }
        let next = name_end + 10 + usize::from(word(name_end + 8));
        if word(name_end) == rtype::OPT && next <= len {
            opt = Some(at..next);
        }
        at = next;
    }
    let mut end = question_end;
    let mut additional = 0u16;
    if let Some(opt) = opt {
        out.copy_within(opt.clone(), question_end);
        end += opt.len();
        additional = 1;
    }
    out[2] |= (flags::TC >> 8) as u8;
    out[6..10].fill(0);
    out[10..12].copy_from_slice(&additional.to_be_bytes());
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATE: u64 = 5;

    #[test]
    fn a_bucket_allows_its_rate_a_second_and_remembers_its_debt_for_the_window() {
        let debt = RATE * 3;
        let cap = RATE + debt;
        // The limiter's clock at a second, and what a bucket has left then.
        let at = |second: u64| second * RATE;
        let balance = |b: &Bucket, second: u64| (at(second) + RATE) as i64 - b.spent.max(at(second)) as i64;
        let mut b = Bucket::default();
        let over: Vec<bool> = (0..8).map(|_| b.charge(7, at(1), RATE, cap)).collect();
        assert_eq!(over, [false, false, false, false, false, true, true, true]);
        assert_eq!(balance(&b, 1), -3);
        // A second later, `RATE` more are allowed, less the debt: -3 + 5, then one charged.
        assert!(!b.charge(7, at(2), RATE, cap));
        assert_eq!(balance(&b, 2), 1);
        // Debt stops at the window's worth.
        for _ in 0..100 {
            b.charge(7, at(2), RATE, cap);
        }
        assert_eq!(balance(&b, 2), -(debt as i64));
        // Two seconds of quiet leave it in debt; four pay it off.
        assert!(b.charge(7, at(4), RATE, cap));
        assert!(!b.charge(7, at(8), RATE, cap));
        // Credit never exceeds one second's worth.
        assert!(!b.charge(7, at(1000), RATE, cap));
        assert_eq!(balance(&b, 1000), RATE as i64 - 1);
        // Another class taking the slot starts afresh.
        for _ in 0..20 {
            b.charge(7, at(1000), RATE, cap);
        }
        assert!(!b.charge(9, at(1000), RATE, cap));
        assert_eq!(balance(&b, 1000), RATE as i64 - 1);
        assert_eq!(b.limited, 0);
        // An empty slot is a full bucket, whatever the tag: 0 too.
        let mut empty = Bucket::default();
        assert!(!empty.charge(0, at(1), RATE, cap));
        assert_eq!(balance(&empty, 1), RATE as i64 - 1);
    }

    #[test]
    fn the_clock_counts_whole_seconds_in_rate_units_wherever_it_is_read() {
        let epoch = Instant::now();
        let limiter = Limiter::new(
            &RrlConfig {
                rate: 7,
                ..RrlConfig::default()
            },
            1,
            epoch,
        )
        .unwrap();
        let at = |millis: u64| limiter.second(epoch + Duration::from_millis(millis));
        assert_eq!(at(0), 7);
        assert_eq!(at(999), 7);
        assert_eq!(at(1000), 14);
        assert_eq!(at(2500), 21);
        assert_eq!(at(1999), 14, "an earlier instant reads its own second");
    }

    fn reply(name: &[u8], code: u8, answers: u16, soa_at: Option<u8>) -> Vec<u8> {
        let mut m = vec![0x12, 0x34, 0x84, code, 0, 1];
        m.extend_from_slice(&answers.to_be_bytes());
        m.extend_from_slice(&[0, u8::from(soa_at.is_some()), 0, 1]);
        m.extend_from_slice(name);
        m.extend_from_slice(&[0, 1, 0, 1]);
        for _ in 0..answers {
            m.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 10, 0, 0, 1]);
        }
        if let Some(at) = soa_at {
            m.extend_from_slice(&[0xC0, at, 0, 6, 0, 1, 0, 0, 0, 60, 0, 1, 0]);
        }
        m.extend_from_slice(&[0, 0, 41, 4, 0xD0, 0, 0, 0, 0, 0, 0]);
        m
    }

    /// The facts the answer path would report with a test reply.
    fn facts(reply: &[u8]) -> Reply {
        let end = question_name_end(reply).map_or(0, |end| end + 4);
        let qtype = if end == 0 {
            0
        } else {
            u16::from_be_bytes([reply[end - 4], reply[end - 3]])
        };
        Reply::new(reply.len(), u16::from(reply[3] & 0x0F), end as u16, qtype, 0)
    }

    fn peer(ip: &str) -> Peer {
        Peer::from(std::net::SocketAddr::new(ip.parse().unwrap(), 5300))
    }

    fn limiter(config: &RrlConfig) -> Limiter {
        Limiter::new(config, 1, Instant::now()).unwrap()
    }

    #[test]
    fn classes_are_the_name_for_answers_and_the_apex_for_nxdomain() {
        let limiter = limiter(&RrlConfig {
            rate: 1,
            ..RrlConfig::default()
        });
        let class = |r: &[u8]| limiter.class_hash(r, &facts(r));
        let name = b"\x01A\x07Example\x04test\x00";
        let hash = u64::from(name_hash(b"\x01a\x07example\x04test\x00") as u32);
        assert_eq!(class(&reply(name, 0, 1, None)), hash ^ Class::Answer.bits());
        assert_eq!(class(&reply(name, 0, 0, Some(14))), hash ^ Class::NoData.bits());
        let apex = fold_hash(1, b"\x07example\x04test\x00");
        assert_eq!(class(&reply(name, 3, 0, Some(14))), apex ^ Class::NxDomain.bits());
        assert_eq!(class(&reply(name, 5, 0, None)), Class::Error.bits());
        let r = reply(name, 0, 1, None);
        let with_question = facts(&r);
        let no_question = Reply::new(with_question.len(), with_question.rcode(), 0, 0, with_question.notes());
        assert_eq!(limiter.class_hash(&r, &no_question), Class::Error.bits());
        assert_eq!(fold_hash(1, b"\x01A\x07Example"), fold_hash(1, b"\x01a\x07eXAMPLE"));
        assert_ne!(fold_hash(1, b"\x01a\x07example"), fold_hash(1, b"\x01b\x07example"));
        assert_ne!(fold_hash(1, b"\x01a\x07example"), fold_hash(2, b"\x01a\x07example"));
    }

    #[test]
    fn an_ipv4_mapped_client_shares_the_bucket_of_its_ipv4_address() {
        let mut limiter = limiter(&RrlConfig {
            rate: 1,
            slip: 0,
            ..RrlConfig::default()
        });
        let r = reply(b"\x03www\x04test\x00", 0, 1, None);
        assert_eq!(limiter.judge(&peer("192.0.2.1"), &r, &facts(&r), 1), Action::Send);
        assert_eq!(
            limiter.judge(&peer("::ffff:192.0.2.9"), &r, &facts(&r), 1),
            Action::Drop
        );
        assert_eq!(limiter.judge(&peer("2001:db8::1"), &r, &facts(&r), 1), Action::Send);
        assert_eq!(
            limiter.judge(&peer("2001:db8:0:ff::1"), &r, &facts(&r), 1),
            Action::Drop,
            "same /56"
        );
        assert_eq!(
            limiter.judge(&peer("2001:db8:0:100::1"), &r, &facts(&r), 1),
            Action::Send
        );
    }

    #[test]
    fn the_name_hash_sees_every_byte_of_names_of_every_length() {
        let name: Vec<u8> = (0..40u8).map(|i| b'a' + i % 26).collect();
        for len in 1..name.len() {
            let base = fold_hash(7, &name[..len]);
            let upper: Vec<u8> = name[..len].iter().map(u8::to_ascii_uppercase).collect();
            assert_eq!(fold_hash(7, &upper), base, "case folds at length {len}");
            for at in 0..len {
                let mut changed = name[..len].to_vec();
                changed[at] ^= 0x01;
                assert_ne!(fold_hash(7, &changed), base, "byte {at} of {len}");
            }
        }
    }

    #[test]
    fn random_names_of_one_zone_share_the_nxdomain_bucket() {
        let config = RrlConfig {
            rate: 2,
            slip: 0,
            ..RrlConfig::default()
        };
        let mut limiter = limiter(&config);
        let client = peer("192.0.2.1");
        let actions: Vec<Action> = (0..5u8)
            .map(|i| {
                let name = [1, b'a' + i, 4, b't', b'e', b's', b't', 0];
                {
                    let r = reply(&name, 3, 0, Some(14));
                    limiter.judge(&client, &r, &facts(&r), 1)
                }
            })
            .collect();
        assert_eq!(actions[..2], [Action::Send, Action::Send]);
        assert!(actions[2..].iter().all(|a| *a == Action::Drop));
        // Another /24 has its own bucket; the same /24 does not.
        let name = [1, b'z', 4, b't', b'e', b's', b't', 0];
        let other = peer("192.0.3.1");
        let r = reply(&name, 3, 0, Some(14));
        assert_eq!(limiter.judge(&other, &r, &facts(&r), 1), Action::Send);
        let neighbour = peer("192.0.2.200");
        assert_eq!(limiter.judge(&neighbour, &r, &facts(&r), 1), Action::Drop);
    }

    #[test]
    fn every_slipth_limited_response_slips_and_exempt_clients_pass() {
        let config = RrlConfig {
            rate: 1,
            slip: 3,
            exempt: vec!["198.51.100.0/24".parse().unwrap()],
            ..RrlConfig::default()
        };
        let mut limiter = limiter(&config);
        let answer = reply(b"\x03www\x04test\x00", 0, 1, None);
        let client = peer("192.0.2.1");
        let actions: Vec<Action> = (0..7)
            .map(|_| limiter.judge(&client, &answer, &facts(&answer), 1))
            .collect();
        use Action::*;
        assert_eq!(actions, [Send, Drop, Drop, Slip, Drop, Drop, Slip]);
        let exempt = peer("198.51.100.7");
        assert!((0..10).all(|_| limiter.judge(&exempt, &answer, &facts(&answer), 1) == Send));
        assert!(
            Limiter::new(&RrlConfig::default(), 1, Instant::now()).is_none(),
            "rate 0 is off"
        );
    }

    #[test]
    fn a_slipped_reply_keeps_the_question_and_the_opt_only() {
        let mut out = reply(b"\x03www\x04test\x00", 0, 2, None);
        let len = out.len();
        let slipped = slip(&mut out, len);
        let expected_len = HEADER_LEN + 10 + 4 + 11;
        assert_eq!(slipped, expected_len);
        assert_ne!(out[2] & 0x02, 0, "TC");
        assert_eq!(&out[4..12], &[0, 1, 0, 0, 0, 0, 0, 1]);
        assert_eq!(
            &out[HEADER_LEN + 14..expected_len],
            &[0, 0, 41, 4, 0xD0, 0, 0, 0, 0, 0, 0]
        );
    }
}
