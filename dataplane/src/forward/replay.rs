//! Cache hits replayed. A fresh hit's reply is the client's question between a header and an
//! OPT that depend only on the query's shape, and the entry's records with their TTLs counted
//! down. The first time an entry answers a query of the plain shape (one question, and nothing
//! else but an OPT without options) over UDP, the reply is checked to be exactly that and its
//! header and OPT are kept with the entry (`cache::Memo`). The same query asked again, whatever
//! its ID and the case it spells the name in, is then answered by writing the header, copying
//! the question and the records and patching their TTLs, without the rest of the parse, the
//! builder and the snapshot lookup of the answer path: the same bytes, for about 210 fewer
//! instructions a hit (tuning.md, "Forwarding and cache").
//!
//! A memo holds while the snapshot and the forwarding plan it was made under are in force (the
//! resolver's stamp changes with either), for a client the recursion ACL admits, and for a
//! fresh entry whose hit starts no prefetch; anything else takes the answer path, which counts
//! and refreshes as it always does.

use super::recursive::Recursion;
use crate::answer::{Context, Transport};
use crate::cache::{Asked, KeyRef, Memo, PLAIN_OPT_LEN};
use crate::reply::Reply;
use crate::wire::bytes::copy_short;
use crate::wire::name::read_name;
use crate::wire::types::{flags, rtype, HEADER_LEN};
use crate::wire::{LowerName, Query};

/// Reads the first question's name of `query` into `qname`, when a memo may answer it: the
/// cache holds one, the client may use forwarding, and the query has a question. Returns where
/// the name ends, for [`replay`] and then, if it does not replay, for the parse of the rest.
/// Inlined into the copy of the answer path that replays, which reads the name here instead of
/// in its parse; the resolver runs the other copy while no entry has a memo.
#[inline(always)]
pub(super) fn read_first_name(query: &[u8], qname: &mut LowerName, rec: &Recursion<'_>) -> Option<usize> {
    if !rec.cache.has_memos() || !rec.allowed || query.get(4..6)? == [0, 0] {
        return None;
    }
    read_name(query, HEADER_LEN, Some(qname)).ok()
}

/// Writes the reply to `query` from its entry's memo into `out`, when the cache holds one made
/// under `stamp` for this very query and the hit needs nothing else; counts the hit as a lookup
/// does. `qname` is the query's first name, read by [`read_first_name`] up to `name_end`, and
/// its bit in the memo filter is set (a name the zones answer has it clear, and gets no call).
/// Reads no more of the query than that takes: its type and class, and the bytes compared with
/// the memo, which were those of a query the answer path read whole. Out of line: inlined, the
/// answer path around it spilled more registers, and every answer paid for that.
#[inline(never)]
pub(super) fn replay(
    query: &[u8],
    qname: &LowerName,
    name_end: usize,
    ctx: &Context,
    rec: &mut Recursion<'_>,
    stamp: u64,
    out: &mut [u8],
) -> Option<Reply> {
    if ctx.transport != Transport::Udp || ctx.plugins.is_some() {
        return None;
    }
    let header = query.get(2..HEADER_LEN)?.first_chunk::<10>()?;
    let question_end = name_end + 4;
    let &[t0, t1, c0, c1] = query.get(name_end..question_end)? else {
        return None;
    };
    let tail = query.get(question_end..)?;
    let opt = match tail.len() {
        0 => None,
        PLAIN_OPT_LEN => Some(tail.first_chunk::<PLAIN_OPT_LEN>()?),
        _ => return None,
    };
    let dnssec_ok = opt.is_some_and(|opt| opt[7] & 0x80 != 0);
    let checking_disabled = u16::from(header[1]) & flags::CD != 0;
    let key = KeyRef::new(
        qname,
        u16::from_be_bytes([t0, t1]),
        u16::from_be_bytes([c0, c1]),
        dnssec_ok,
        checking_disabled,
    );
    let room = out.len();
    let fits = |memo: &Memo| memo.stamp == stamp && memo.asked == Asked::new(header, opt) && memo.reply.len() <= room;
    let (entry, age, memo) = rec.cache.replay(key, rec.now, fits)?;
    out[..2].copy_from_slice(&query[..2]);
    out[2..HEADER_LEN].copy_from_slice(&memo.header);
    copy_short(&mut out[HEADER_LEN..question_end], &query[HEADER_LEN..question_end]);
    let records_end = question_end + entry.write_whole(&mut out[question_end..], age);
    if opt.is_some() {
        out[records_end..records_end + PLAIN_OPT_LEN].copy_from_slice(&memo.opt_record);
    }
    Some(memo.reply)
}

/// A query as a memo is kept for it: the plain shape (one question, and nothing else but an
/// OPT without options), over UDP, without plugins, which are the queries whose replies depend
/// on nothing but the question, the header and the OPT. The asked parts and where the question
/// ends.
fn plain(query: &[u8], q: &Query, ctx: &Context) -> Option<(Asked, usize)> {
    if ctx.transport != Transport::Udp
        || ctx.plugins.is_some()
        || q.qdcount != 1
        || q.ancount != 0
        || q.nscount != 0
        || q.error.is_some()
        || q.trailing
    {
        return None;
    }
    let question_end = q.question?.end;
    let header = query.get(2..HEADER_LEN)?.first_chunk::<10>()?;
    let tail = query.get(question_end..)?;
    match q.edns {
        None if tail.is_empty() => Some((Asked::new(header, None), question_end)),
        Some(edns) if edns.options == 0 => Some((Asked::new(header, Some(tail.first_chunk()?)), question_end)),
        _ => None,
    }
}

/// The cache key of `q`'s question, as the answer path looks it up.
fn key<'a>(q: &Query, qname: &'a LowerName) -> Option<KeyRef<'a>> {
    let question = q.question?;
    Some(KeyRef::new(
        qname,
        question.qtype,
        question.qclass,
        q.edns.is_some_and(|e| e.dnssec_ok),
        q.flags & flags::CD != 0,
    ))
}

/// Keeps the reply just written into `out` for `query` as its entry's memo under `stamp`, when
/// the query has the plain shape, its entry wants one, and the reply is exactly the query's
/// ID and question, the entry's records written whole, and a header and OPT to keep: any other
/// reply (records left out, an option added) is not one to replay.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub(super) fn remember(
    query: &[u8],
    q: &Query,
    qname: &LowerName,
    ctx: &Context,
    rec: &mut Recursion<'_>,
    stamp: u64,
    reply: Reply,
    out: &[u8],
) {
    let (Some((asked, end)), Some(key)) = (plain(query, q, ctx), key(q, qname)) else {
        return;
    };
    let Some((entry, age)) = rec.cache.memo_wanted(key, rec.now, stamp) else {
        return;
    };
    let records_end = end + entry.records_len();
    let opt_len = if asked.opt() { PLAIN_OPT_LEN } else { 0 };
    let len = reply.len();
    if len != records_end + opt_len
        || out.len() < len
        || out[..2] != query[..2]
        || out[HEADER_LEN..end] != query[HEADER_LEN..end]
        || !entry.wrote(&out[end..records_end], age)
    {
        return;
    }
    let count = |at: usize| u16::from_be_bytes([out[at], out[at + 1]]);
    let [answers, authority, additional] = entry.counts();
    if count(6) != answers || count(8) != authority || count(10) != additional + u16::from(asked.opt()) {
        return;
    }
    let mut opt_record = [0; PLAIN_OPT_LEN];
    if asked.opt() {
        let opt = &out[records_end..len];
        // An OPT without options: the root owner, type OPT, RDLENGTH 0.
        if opt[0] != 0 || opt[1..3] != rtype::OPT.to_be_bytes() || opt[9..11] != [0, 0] {
            return;
        }
        opt_record.copy_from_slice(opt);
    }
    let Some(&header) = out[2..HEADER_LEN].first_chunk::<10>() else {
        return;
    };
    rec.cache.remember(
        key,
        Memo {
            stamp,
            asked,
            header,
            opt_record,
            reply,
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answer::Outcome;
    use crate::cache::{Cache, CacheConfig, Entry, Key, TtlCaps};
    use crate::forward::recursive::{resolve, Resolution};
    use crate::forward::Routes;
    use crate::snapshot::Snapshot;
    use crate::wire::types::{class, MAX_MESSAGE_LEN};
    use hickory_proto::op::Message;
    use std::time::{Duration, Instant};

    /// An upstream's answer to `www.example.org. A`: two addresses (TTLs 300 and 250, so a
    /// lifetime of 250 s), the
    /// zone's server in the authority section and its address in the additional one, every
    /// name compressed against the question.
    fn entry(stored: Instant) -> Entry {
        let mut m = vec![0x12, 0x34, 0x81, 0x80, 0, 1, 0, 2, 0, 1, 0, 1];
        m.extend_from_slice(b"\x03www\x07example\x03org\x00\x00\x01\x00\x01");
        let body_start = m.len();
        m.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 192, 0, 2, 1]);
        m.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 250, 0, 4, 192, 0, 2, 2]);
        let ns_at = m.len() + 12;
        m.extend_from_slice(&[0xC0, 16, 0, 2, 0, 1, 0, 0, 14, 16, 0, 5, 2, b'n', b's', 0xC0, 16]);
        m.extend_from_slice(&[0xC0, ns_at as u8, 0, 1, 0, 1, 0, 0, 14, 16, 0, 4, 192, 0, 2, 53]);
        let caps = TtlCaps {
            min: 0,
            max: 86_400,
            negative_max: 3600,
        };
        Entry::from_reply(&m, body_start, caps, stored).unwrap()
    }

    /// A cache holding [`entry`] for the plain question and for the one with DO set.
    fn cache(config: CacheConfig, stored: Instant) -> Cache {
        let mut cache = Cache::new(config);
        let name = LowerName::from_wire(b"\x03www\x07example\x03org\x00").unwrap();
        for dnssec_ok in [false, true] {
            let key = Key::new(&name, rtype::A, class::IN, dnssec_ok, false);
            assert!(cache.insert(key.bytes(), entry(stored)).stored);
        }
        cache
    }

    /// `www.example.org. A` spelled `spelling`, with ID `id`, RD set, and an OPT of `opt`
    /// (payload size, DO) when given.
    fn query(spelling: &str, id: u16, opt: Option<(u16, bool)>) -> Vec<u8> {
        let mut q = id.to_be_bytes().to_vec();
        q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, u8::from(opt.is_some())]);
        for label in spelling.trim_end_matches('.').split('.') {
            q.push(label.len() as u8);
            q.extend_from_slice(label.as_bytes());
        }
        q.extend_from_slice(&[0, 0, 1, 0, 1]);
        if let Some((size, dnssec_ok)) = opt {
            q.extend_from_slice(&[0, 0, 41]);
            q.extend_from_slice(&size.to_be_bytes());
            q.extend_from_slice(&[0, 0, if dnssec_ok { 0x80 } else { 0 }, 0, 0, 0]);
        }
        q
    }

    /// A fresh query's recursion over `cache` at `now`, for a client `allowed` or not, its one
    /// route up.
    fn recursion<'a>(cache: &'a mut Cache, routes: &'a Routes, now: Instant, allowed: bool) -> Recursion<'a> {
        Recursion {
            cache,
            routes,
            down: &[false],
            allowed,
            prohibited: false,
            now,
            resolved: None,
        }
    }

    /// What `resolve` makes of `query` at `now` with memos under `stamp` (or none): the reply
    /// as bytes and facts.
    fn resolved(
        cache: &mut Cache,
        query: &[u8],
        ctx: &Context,
        now: Instant,
        stamp: Option<u64>,
        allowed: bool,
    ) -> Option<(Vec<u8>, Reply)> {
        let routes = Routes::new(1, true, Vec::new());
        let mut rec = recursion(cache, &routes, now, allowed);
        let mut out = vec![0u8; MAX_MESSAGE_LEN];
        match resolve(
            query,
            &Snapshot::default(),
            ctx,
            &mut rec,
            &mut LowerName::default(),
            stamp,
            true,
            &mut out,
        ) {
            Resolution::Done(Outcome::Reply(reply))
            | Resolution::Cached {
                outcome: Outcome::Reply(reply),
                ..
            } => Some((out[..reply.len()].to_vec(), reply)),
            _ => None,
        }
    }

    /// The reply [`replay`] writes for `query`, if it replays one, behind the tests the answer
    /// path makes first.
    fn replayed(cache: &mut Cache, query: &[u8], ctx: &Context, now: Instant, stamp: u64) -> Option<(Vec<u8>, Reply)> {
        let routes = Routes::new(1, true, Vec::new());
        let mut rec = recursion(cache, &routes, now, true);
        let mut qname = LowerName::default();
        let name_end = read_first_name(query, &mut qname, &rec)?;
        if !rec.cache.may_replay(qname.hash()) {
            return None;
        }
        let mut out = vec![0u8; MAX_MESSAGE_LEN];
        let reply = replay(query, &qname, name_end, ctx, &mut rec, stamp, &mut out)?;
        Some((out[..reply.len()].to_vec(), reply))
    }

    #[test]
    fn a_replayed_hit_is_the_reply_the_answer_path_makes_for_each_shape_spelling_and_age() {
        let stored = Instant::now();
        let ctx = Context::new(Transport::Udp);
        for opt in [None, Some((1232, false)), Some((4096, true)), Some((512, false))] {
            let mut cache = cache(CacheConfig::default(), stored);
            let first = resolved(
                &mut cache,
                &query("www.example.org", 1, opt),
                &ctx,
                stored,
                Some(7),
                true,
            );
            assert!(first.is_some(), "a fresh hit ({opt:?})");
            for (spelling, id, later) in [
                ("WWW.Example.ORG", 2, 0),
                ("wWw.eXample.org", 0xFFFF, 120),
                ("www.example.org", 3, 200),
            ] {
                let now = stored + Duration::from_secs(later);
                let query = query(spelling, id, opt);
                let (bytes, reply) = replayed(&mut cache, &query, &ctx, now, 7).expect("replayed");
                let mut plain = Cache::new(CacheConfig::default());
                let name = LowerName::from_wire(b"\x03www\x07example\x03org\x00").unwrap();
                let dnssec_ok = opt.is_some_and(|(_, d)| d);
                plain.insert(
                    Key::new(&name, rtype::A, class::IN, dnssec_ok, false).bytes(),
                    entry(stored),
                );
                let (expected, facts) = resolved(&mut plain, &query, &ctx, now, None, true).unwrap();
                assert_eq!(bytes, expected, "{spelling} after {later}s ({opt:?})");
                assert_eq!(reply, facts);
                let message = Message::from_vec(&bytes).unwrap();
                assert_eq!(message.id(), id);
                assert_eq!(message.queries()[0].name().to_ascii(), format!("{spelling}."));
                let ttls: Vec<u32> = message.answers().iter().map(|r| r.ttl()).collect();
                // Each TTL is cut to the entry's lifetime, the shortest of the answer's, then counted down.
                assert_eq!(ttls, [250 - later as u32; 2]);
                assert_eq!((message.name_servers().len(), message.additionals().len()), (1, 1));
                assert_eq!(message.extensions().is_some(), opt.is_some());
            }
        }
    }

    #[test]
    fn a_memo_answers_only_its_own_query_stamp_transport_and_fresh_entry() {
        let stored = Instant::now();
        let udp = Context::new(Transport::Udp);
        let mut cache = cache(CacheConfig::default(), stored);
        resolved(
            &mut cache,
            &query("www.example.org", 1, Some((1232, false))),
            &udp,
            stored,
            Some(7),
            true,
        )
        .unwrap();
        let asked = query("www.example.org", 2, Some((1232, false)));
        assert!(replayed(&mut cache, &asked, &udp, stored, 7).is_some());
        assert!(replayed(&mut cache, &asked, &udp, stored, 8).is_none(), "another stamp");
        assert!(
            replayed(&mut cache, &asked, &Context::new(Transport::Tcp), stored, 7).is_none(),
            "TCP"
        );
        for other in [
            query("www.example.org", 2, Some((1400, false))),
            query("www.example.org", 2, None),
            {
                let mut no_rd = asked.clone();
                no_rd[2] = 0;
                no_rd
            },
            {
                let mut cookie = query("www.example.org", 2, None);
                cookie[11] = 1;
                cookie.extend_from_slice(&[0, 0, 41, 4, 208, 0, 0, 0, 0, 0, 12, 0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8]);
                cookie
            },
        ] {
            assert!(replayed(&mut cache, &other, &udp, stored, 7).is_none(), "{other:?}");
        }
        let expired = stored + Duration::from_secs(250);
        assert!(
            replayed(&mut cache, &asked, &udp, expired, 7).is_none(),
            "past its lifetime"
        );
    }

    #[test]
    fn a_hit_due_for_prefetch_or_refused_by_the_acl_takes_the_answer_path() {
        let stored = Instant::now();
        let udp = Context::new(Transport::Udp);
        let mut cache = cache(CacheConfig::default(), stored);
        let asked = query("www.example.org", 1, None);
        resolved(&mut cache, &asked, &udp, stored, Some(7), true).unwrap();
        let late = stored + Duration::from_secs(230);
        assert!(
            replayed(&mut cache, &asked, &udp, late, 7).is_none(),
            "a prefetch is due"
        );
        let routes = Routes::new(1, true, Vec::new());
        let mut rec = recursion(&mut cache, &routes, late, true);
        let mut out = vec![0u8; MAX_MESSAGE_LEN];
        let resolution = resolve(
            &asked,
            &Snapshot::default(),
            &udp,
            &mut rec,
            &mut LowerName::default(),
            Some(7),
            true,
            &mut out,
        );
        assert!(
            matches!(
                resolution,
                Resolution::Cached {
                    refresh: Some(_),
                    stale: false,
                    ..
                }
            ),
            "the answer path starts the prefetch"
        );
        let (refused, _) = resolved(&mut cache, &asked, &udp, stored, Some(7), false).unwrap();
        assert_eq!(
            u16::from(refused[3] & 0x0F),
            crate::wire::types::rcode::REFUSED,
            "a client outside the ACL"
        );
    }

    #[test]
    fn answers_with_keep_ttl_replay_the_ttls_as_received() {
        let stored = Instant::now();
        let udp = Context::new(Transport::Udp);
        let config = CacheConfig {
            keep_ttl: true,
            ..CacheConfig::default()
        };
        let mut cache = cache(config, stored);
        let asked = query("www.example.org", 1, None);
        resolved(&mut cache, &asked, &udp, stored, Some(7), true).unwrap();
        let (bytes, _) = replayed(&mut cache, &asked, &udp, stored + Duration::from_secs(100), 7).unwrap();
        let ttls: Vec<u32> = Message::from_vec(&bytes)
            .unwrap()
            .answers()
            .iter()
            .map(|r| r.ttl())
            .collect();
        assert_eq!(ttls, [250, 250]);
    }
}
