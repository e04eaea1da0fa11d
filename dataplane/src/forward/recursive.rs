//! The recursive half of answering: names outside every zone, and answers of the SkyDNS domain
//! whose records lead outside it, answered from the worker's cache or handed back to be
//! forwarded. It plugs into the authoritative path as its [`Outside`], so that authoritative
//! answering knows nothing of forwarding; a client that waited for an upstream is answered by
//! running its query through [`answer_recursive`] again, the upstream's result in hand.

use super::replay;
use super::{Failure, Route, Routes};
use crate::answer::plugins::{before, Before};
use crate::answer::{
    emptied, outside_every_zone, respond, stands_alone, Context, Outcome, Outside, Responder, OPT_LEN,
};
use crate::cache::{Age, Cache, Entry, Key, KeyRef, Lookup};
use crate::rewrite::Plugins;
use crate::snapshot::rrset::Beyond;
use crate::snapshot::Snapshot;
use crate::wire::query::{parse_query_at, parse_query_into};
use crate::wire::types::{class, ede, flags, option, rcode, rtype, HEADER_LEN, MAX_NAME_LEN};
use crate::wire::{LowerName, Name, Query, Question};
use std::time::Instant;

/// What the forwarding side lends the answer path for one query: the worker's cache, the
/// routing rules, which routes have every upstream down, whether this client may use
/// forwarding, and the time. Nothing here does I/O: a question the cache cannot answer comes
/// back as [`Resolution::Forward`].
#[derive(Debug)]
pub struct Recursion<'a> {
    /// The worker's response cache.
    pub cache: &'a mut Cache,
    /// Stub zones, default resolvers, `ndots`.
    pub routes: &'a Routes,
    /// Per route index: every upstream is known to be down, so nothing should wait for one.
    pub down: &'a [bool],
    /// The client passes the recursion ACL: names outside the zones are served to it and RA is
    /// set in its replies; other clients get REFUSED for them.
    pub allowed: bool,
    /// Set by the answer when it refused this client a name that needs recursion, because the
    /// client is outside the recursion ACL: the refusals an operator counts.
    pub prohibited: bool,
    /// The current time, for TTL arithmetic.
    pub now: Instant,
    /// Set when answering a client that waited for an upstream: the outcome to answer with
    /// instead of looking at the cache or forwarding again.
    pub resolved: Option<Resolved<'a>>,
}

/// How a forwarded question (the key) ended. The key tells which question of the answer it
/// settles: a client may have waited for the target of a CNAME rather than for its own name.
#[derive(Debug, Clone, Copy)]
pub enum Resolved<'a> {
    /// An upstream answered (NOERROR or NXDOMAIN); the entry may or may not be cacheable.
    Answer(KeyRef<'a>, &'a Entry),
    /// No usable answer: served stale from the cache if possible, else SERVFAIL with an
    /// Extended DNS Error (or, for a CNAME's target, the chain dropped).
    Failed(KeyRef<'a>, Failure),
}

/// What [`answer_recursive`] did with a message. The forwarding variants are boxed: a miss
/// allocates anyway, and the common results stay small. A tag byte of its own, as [`Flow`]
/// has.
#[derive(Debug)]
#[repr(u8)]
pub enum Resolution {
    /// Answered (or dropped) without the cache.
    Done(Outcome),
    /// Answered from the cache.
    Cached {
        /// The reply.
        outcome: Outcome,
        /// The entry was past its lifetime (RFC 8767).
        stale: bool,
        /// The entry should be fetched again in the background (prefetch, stale recheck).
        refresh: Option<Box<Refresh>>,
    },
    /// Not answerable here: the question must go upstream, and the client be answered later.
    Forward(Box<Forward>),
    /// A stub-zone query that already passed through a SkyDNS-compatible forwarder (option
    /// 65011): dropped unanswered, as SkyDNS does, to break the loop.
    Looped,
    /// Answered without some glue the cache lacks (addresses of SRV/MX targets outside the
    /// domain): these questions should be fetched in the background, so that later answers
    /// carry it. The client is not kept waiting for additional data.
    Fetch {
        /// The reply.
        outcome: Outcome,
        /// Questions to ask upstream.
        fetch: Vec<Refresh>,
    },
}

/// A question to ask upstream without a client waiting for it.
#[derive(Debug, Clone)]
pub struct Refresh {
    /// The question.
    pub key: Key,
    /// Where to ask it.
    pub route: Route,
}

/// A question to ask upstream, and how to answer the client once it is resolved.
#[derive(Debug, Clone)]
pub struct Forward {
    /// The question (cache key: name, type, class, DO, CD).
    pub key: Key,
    /// Where to ask it.
    pub route: Route,
    /// The client's query, reduced to what shapes the reply.
    pub query: ClientQuery,
    /// The cache holds a stale answer: if upstreams are already failing for this question,
    /// the client should get it at once rather than wait (RFC 8767 §5).
    pub stale: bool,
}

/// Longest [`ClientQuery`]: header, question, OPT with an empty keepalive option and the
/// longest COOKIE option.
const CLIENT_QUERY_LEN: usize = HEADER_LEN + MAX_NAME_LEN + 4 + OPT_LEN + 4 + 4 + 40;

/// A client's query reduced to what its reply depends on (ID, flags, question as spelled, EDNS
/// size, DO, keepalive), kept while the question is upstream so that the reply can be built by
/// running it through [`answer_recursive`] again, in a fixed-size buffer.
#[derive(Clone)]
pub struct ClientQuery {
    bytes: [u8; CLIENT_QUERY_LEN],
    len: u16,
}

impl std::fmt::Debug for ClientQuery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientQuery").field("len", &self.len).finish()
    }
}

impl ClientQuery {
    fn new(query: &[u8], q: &Query, qname: &LowerName) -> ClientQuery {
        let mut bytes = [0u8; CLIENT_QUERY_LEN];
        bytes[0..2].copy_from_slice(&q.id.to_be_bytes());
        bytes[2..4].copy_from_slice(&q.flags.to_be_bytes());
        bytes[4..6].copy_from_slice(&1u16.to_be_bytes());
        bytes[10..12].copy_from_slice(&u16::from(q.edns.is_some()).to_be_bytes());
        let mut pos = HEADER_LEN;
        if let Some(question) = q.question {
            let spelled = &query[HEADER_LEN..question.end];
            if spelled.len() == qname.wire().len() + 4 {
                bytes[pos..pos + spelled.len()].copy_from_slice(spelled);
            } else {
                bytes[pos..pos + qname.wire().len()].copy_from_slice(qname.wire());
                bytes[pos + qname.wire().len()..pos + qname.wire().len() + 4]
                    .copy_from_slice(&query[question.end - 4..question.end]);
            }
            pos += qname.wire().len() + 4;
        }
        if let Some(edns) = q.edns {
            bytes[pos + 1..pos + 3].copy_from_slice(&rtype::OPT.to_be_bytes());
            bytes[pos + 3..pos + 5].copy_from_slice(&edns.udp_size.to_be_bytes());
            bytes[pos + 7] = if edns.dnssec_ok { 0x80 } else { 0 };
            pos += OPT_LEN;
            let rdata = pos;
            if edns.tcp_keepalive {
                bytes[pos..pos + 2].copy_from_slice(&option::TCP_KEEPALIVE.to_be_bytes());
                pos += 4;
            }
            // Kept so that the reply made when the upstream answers carries the cookie too.
            if let Some(cookie) = edns.cookie {
                let data = cookie.data(query);
                bytes[pos..pos + 2].copy_from_slice(&option::COOKIE.to_be_bytes());
                bytes[pos + 2..pos + 4].copy_from_slice(&(data.len() as u16).to_be_bytes());
                bytes[pos + 4..pos + 4 + data.len()].copy_from_slice(data);
                pos += 4 + data.len();
            }
            bytes[rdata - 2..rdata].copy_from_slice(&((pos - rdata) as u16).to_be_bytes());
        }
        ClientQuery { bytes, len: pos as u16 }
    }

    /// The reduced query as a message.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// What answering decided beyond writing a reply. A tag byte of its own (`repr(u8)`): kept in
/// the spare values of the `Vec`'s capacity, every match on the result first decoded it.
#[derive(Default)]
#[repr(u8)]
pub(crate) enum Flow {
    /// The reply is written.
    #[default]
    Written,
    /// The reply is written from the cache; `replayable` when it is the query's own fresh
    /// answer and nothing else, a reply to remember for replay (`replay.rs`).
    Cached {
        stale: bool,
        refresh: Option<Box<Refresh>>,
        replayable: bool,
    },
    /// Nothing written: forward; a stale answer is at hand. Boxed, as is a refresh: the
    /// result travels up several calls, and a hit should not carry a key's 260 bytes along.
    Forward(Box<Key>, Route, bool),
    /// Nothing written: drop (stub loop).
    Looped,
    /// The reply is written; these questions should be fetched in the background.
    Fetch(Vec<Refresh>),
}

impl Outside for Recursion<'_> {
    type Flow = Flow;

    fn recursion_available(&self) -> bool {
        self.allowed
    }

    #[inline(always)]
    fn beyond(&mut self, r: &mut Responder<'_>, q: &Query, qname: &LowerName, question: Question) -> Flow {
        beyond(r, q, qname, question, self)
    }

    fn complete(
        &mut self,
        r: &mut Responder<'_>,
        q: &Query,
        question: Question,
        beyond: &Beyond,
        snapshot: &Snapshot,
    ) -> Option<Flow> {
        complete(r, q, question, beyond, snapshot, self)
    }

    fn searched(&mut self, r: &mut Responder<'_>, q: &Query, question: Question, target: &LowerName) -> Option<Flow> {
        searched(r, q, question, target, self)
    }
}

/// Answers one query as [`crate::answer::answer`] does, and names outside the zones from `rec`'s cache; a
/// question the cache cannot answer is returned as [`Resolution::Forward`] with nothing sent.
/// A cache hit allocates nothing, as an authoritative answer does. `qname` is the caller's
/// buffer for the query name, reused from query to query: clearing a fresh one cost every
/// query a 400-byte `memset`. Inlined into the worker's loop with everything it calls on the
/// way to a reply: the calls and the moves of their results were a fifth of a query's cost.
#[inline(always)]
pub fn answer_recursive(
    query: &[u8],
    snapshot: &Snapshot,
    ctx: &Context,
    rec: &mut Recursion<'_>,
    qname: &mut LowerName,
    out: &mut [u8],
) -> Resolution {
    if let Some(plugins) = ctx.plugins {
        return plugged(plugins, query, snapshot, ctx, rec, qname, out);
    }
    resolve(query, snapshot, ctx, rec, qname, None, false, out)
}

/// [`answer_recursive`] with the plugins run ahead of it (docs/rewrite.md). A rewritten
/// question is looked up, cached and forwarded as rewritten; a client that waits for the
/// upstream keeps its own query, which runs through the plugins again when the answer comes,
/// so that its reply is turned back as one answered at once is.
#[cold]
#[inline(never)]
pub(crate) fn plugged(
    plugins: &Plugins,
    query: &[u8],
    snapshot: &Snapshot,
    ctx: &Context,
    rec: &mut Recursion<'_>,
    qname: &mut LowerName,
    out: &mut [u8],
) -> Resolution {
    let rewritten = match before(plugins, query, ctx, out) {
        Before::Pass => return resolve(query, snapshot, ctx, rec, qname, None, false, out),
        Before::Answered(outcome) => return Resolution::Done(outcome),
        Before::Rewritten(rewritten) => rewritten,
    };
    match resolve(rewritten.query(), snapshot, ctx, rec, qname, None, false, out) {
        Resolution::Done(outcome) => Resolution::Done(rewritten.restore(outcome, out)),
        Resolution::Cached {
            outcome,
            stale,
            refresh,
        } => Resolution::Cached {
            outcome: rewritten.restore(outcome, out),
            stale,
            refresh,
        },
        Resolution::Fetch { outcome, fetch } => Resolution::Fetch {
            outcome: rewritten.restore(outcome, out),
            fetch,
        },
        Resolution::Forward(mut forward) => {
            let mut q = Query::default();
            if parse_query_into(query, qname, &mut q).is_ok() {
                forward.query = ClientQuery::new(query, &q, qname);
            }
            Resolution::Forward(forward)
        }
        Resolution::Looped => Resolution::Looped,
    }
}

/// [`answer_recursive`] of a query as it is, without the plugins: what a worker with none
/// calls. With `memos` (the stamp of the snapshot and plan in force), a fresh hit answered here
/// leaves a memo, and with `replaying` too, a cache hit asked again in the same shape is
/// replayed from its entry's memo (`replay.rs`); `None` neither replays nor remembers. The
/// caller passes `replaying` as a constant, so that the copy without it has none of its code.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn resolve(
    query: &[u8],
    snapshot: &Snapshot,
    ctx: &Context,
    rec: &mut Recursion<'_>,
    qname: &mut LowerName,
    memos: Option<u64>,
    replaying: bool,
    out: &mut [u8],
) -> Resolution {
    let mut name_end = None;
    if let (true, Some(stamp)) = (replaying, memos) {
        name_end = replay::read_first_name(query, qname, rec);
        if let Some(end) = name_end {
            if rec.cache.may_replay(qname.hash()) {
                if let Some(reply) = replay::replay(query, qname, end, ctx, rec, stamp, out) {
                    return Resolution::Cached {
                        outcome: Outcome::Reply(reply),
                        stale: false,
                        refresh: None,
                    };
                }
            }
        }
    }
    let mut q = Query::default();
    if let Err(reason) = parse_query_at(query, qname, name_end, &mut q) {
        return Resolution::Done(Outcome::Drop(reason));
    }
    let qname = &*qname;
    let mut r = Responder::new(query, &q, ctx, out);
    match respond(&mut r, &q, qname, snapshot, rec) {
        Flow::Written => Resolution::Done(Outcome::Reply(r.finish(&q))),
        Flow::Cached {
            stale,
            refresh,
            replayable,
        } => {
            let reply = r.finish(&q);
            if let (Some(stamp), true, None) = (memos, replayable, &refresh) {
                replay::remember(query, &q, qname, ctx, rec, stamp, reply, out);
            }
            Resolution::Cached {
                outcome: Outcome::Reply(reply),
                stale,
                refresh,
            }
        }
        Flow::Forward(key, route, stale) => Resolution::Forward(Box::new(Forward {
            key: *key,
            route,
            query: ClientQuery::new(query, &q, qname),
            stale,
        })),
        Flow::Looped => Resolution::Looped,
        Flow::Fetch(fetch) => Resolution::Fetch {
            outcome: Outcome::Reply(r.finish(&q)),
            fetch,
        },
    }
}

/// A name no zone answers for: from the cache, or forwarded, when this client may use
/// forwarding; REFUSED otherwise, with Extended DNS Error 18 (Prohibited, RFC 8914 §4.19) when
/// the recursion ACL is why.
#[inline(always)]
fn beyond(r: &mut Responder<'_>, q: &Query, qname: &LowerName, question: Question, rec: &mut Recursion<'_>) -> Flow {
    if !rec.allowed {
        r.set_rcode(rcode::REFUSED);
        r.set_ede(ede::PROHIBITED);
        rec.prohibited = true;
        return Flow::Written;
    }
    let Some(route) = rec.routes.route(qname) else {
        r.set_rcode(rcode::REFUSED);
        return Flow::Written;
    };
    if route.is_stub() && q.edns.is_some_and(|e| e.skydns_stub_loop) {
        return Flow::Looped;
    }
    if !route.is_stub() && (qname.label_count() as u64) < u64::from(rec.routes.ndots()) {
        // SkyDNS: names with fewer labels than `ndots` are not forwarded; SERVFAIL, RA set.
        r.set_rcode(rcode::SERVFAIL);
        return Flow::Written;
    }
    r.flags |= q.flags & flags::CD;
    let checking_disabled = q.flags & flags::CD != 0;
    let key = KeyRef::new(
        qname,
        question.qtype,
        question.qclass,
        q.edns.is_some_and(|e| e.dnssec_ok),
        checking_disabled,
    );
    let refresh = |key: KeyRef<'_>| {
        Box::new(Refresh {
            key: key.to_key(),
            route,
        })
    };
    let down = rec.down.get(route.index()).copied().unwrap_or(true);
    match rec.resolved {
        Some(Resolved::Answer(_, entry)) => {
            r.cached(q, entry, Age::Fresh(0));
            Flow::Written
        }
        Some(Resolved::Failed(_, failure)) => match rec.cache.lookup(key, rec.now, true) {
            Lookup::Fresh(hit) | Lookup::Stale(hit) => {
                r.cached(q, hit.entry, hit.age);
                Flow::Cached {
                    stale: hit.age == Age::Stale,
                    refresh: None,
                    replayable: false,
                }
            }
            Lookup::Miss if failure == Failure::OverConcurrent => {
                r.set_rcode(rcode::REFUSED);
                r.set_ede(failure.ede());
                Flow::Written
            }
            Lookup::Miss => {
                r.fail(failure.ede());
                Flow::Written
            }
        },
        None => match rec.cache.lookup(key, rec.now, down) {
            Lookup::Fresh(hit) => {
                let wanted = hit.refresh;
                r.cached(q, hit.entry, hit.age);
                Flow::Cached {
                    stale: false,
                    refresh: wanted.then(|| refresh(key)),
                    replayable: true,
                }
            }
            Lookup::Stale(hit) if down => {
                let wanted = hit.refresh;
                r.cached(q, hit.entry, Age::Stale);
                Flow::Cached {
                    stale: true,
                    refresh: wanted.then(|| refresh(key)),
                    replayable: false,
                }
            }
            Lookup::Miss if down => {
                r.fail(Failure::Unreachable.ede());
                Flow::Written
            }
            Lookup::Stale(_) => Flow::Forward(Box::new(key.to_key()), route, true),
            Lookup::Miss => Flow::Forward(Box::new(key.to_key()), route, false),
        },
    }
}

/// Completes a SkyDNS answer that leaves its domain (docs/skydns-semantics.md, "Names outside
/// the domain"): the targets outside it of an address answer give their records of the query's
/// type, from the cache or by forwarding the target's question (the client waits). A flattened
/// target gives them at the query name; one nothing can complete (no forwarding for this client,
/// no upstream answer, a target that cannot be forwarded) is left out, and an answer left with
/// no record at all is dropped (`None`). The target of a CNAME chain (`--cname-chains`) gives
/// them under its own name, and a chain nothing completes drops the answer. SRV and MX targets
/// outside it get their cached addresses in the additional section, and those not cached are
/// fetched in the background rather than delaying the answer; without forwarding they go
/// without.
fn complete(
    r: &mut Responder<'_>,
    q: &Query,
    question: Question,
    beyond: &Beyond,
    snapshot: &Snapshot,
    rec: &mut Recursion<'_>,
) -> Option<Flow> {
    if !rec.allowed {
        return stands_alone(r, question, beyond, snapshot).then_some(Flow::Written);
    }
    let chain = matches!(question.qtype, rtype::A | rtype::AAAA);
    let bits = (q.edns.is_some_and(|e| e.dnssec_ok), q.flags & flags::CD != 0);
    let mut flow = Flow::Written;
    if chain {
        let targets = beyond
            .aliases
            .iter()
            .map(|alias| (alias, None))
            .chain(beyond.flattened.iter().map(|alias| (&alias.target, Some(alias.ttl))));
        for (alias, flattened) in targets {
            if !outside_every_zone(alias, snapshot) {
                continue;
            }
            let completed = forwardable(alias, snapshot, rec).and_then(|(target, route)| {
                let key = KeyRef::new(&target, question.qtype, class::IN, bits.0, bits.1);
                alias_records(r, &target, question.qtype, key, route, rec, flattened)
            });
            match completed {
                Some(Flow::Written) => {}
                Some(Flow::Cached { stale, refresh, .. }) => {
                    // One refresh travels back; a second stale or prefetched target waits for
                    // its next answer.
                    if let Flow::Cached {
                        refresh: ref mut kept, ..
                    } = flow
                    {
                        if kept.is_none() {
                            *kept = refresh;
                        }
                    } else {
                        flow = Flow::Cached {
                            stale,
                            refresh,
                            replayable: false,
                        };
                    }
                }
                Some(other) => return Some(other),
                // A flattened target that gives nothing leaves the others to answer.
                None if flattened.is_some() => {}
                None => return None,
            }
        }
        if emptied(r, question, beyond) {
            return None;
        }
    }
    let mut fetch = Vec::new();
    for host in beyond.hosts.iter() {
        let Some((target, route)) = forwardable(host, snapshot, rec) else {
            continue;
        };
        for qtype in [rtype::A, rtype::AAAA] {
            let key = KeyRef::new(&target, qtype, class::IN, bits.0, bits.1);
            let down = rec.down.get(route.index()).copied().unwrap_or(true);
            let wanted = match rec.cache.lookup(key, rec.now, down) {
                Lookup::Fresh(hit) | Lookup::Stale(hit) => {
                    // SkyDNS keeps the CNAMEs of the A lookup and drops those of the AAAA one.
                    r.glue(&target, qtype, hit.entry, hit.age, qtype == rtype::AAAA);
                    hit.refresh
                }
                Lookup::Miss => !down,
            };
            if wanted {
                fetch.push(Refresh {
                    key: key.to_key(),
                    route,
                });
            }
        }
    }
    Some(match flow {
        Flow::Written if !fetch.is_empty() => Flow::Fetch(fetch),
        flow => flow,
    })
}

/// The lowered `name` and its route, when it is outside every zone and may be forwarded
/// (SkyDNS looks up only names of at least `ndots` labels).
fn forwardable(name: &Name, snapshot: &Snapshot, rec: &Recursion<'_>) -> Option<(LowerName, Route)> {
    let lower = LowerName::from_wire(name.wire()).ok()?;
    if snapshot.zone_of(&lower).is_some() {
        return None;
    }
    let route = route_beyond(&lower, rec)?;
    Some((lower, route))
}

/// The route of `name`, a name outside every zone, when it may be forwarded.
fn route_beyond(name: &LowerName, rec: &Recursion<'_>) -> Option<Route> {
    let route = rec.routes.route(name)?;
    if !route.is_stub() && (name.label_count() as u64) < u64::from(rec.routes.ndots()) {
        return None;
    }
    Some(route)
}

/// Appends the records of `key` (a target outside the domain, asked with `qtype`) to the answer
/// section, at the query name when `flattened` gives their TTL cap (see [`upstream_answer`]).
/// No answer at all leaves the target incomplete (`None`); an upstream's NXDOMAIN or empty
/// answer completes it with nothing more, as SkyDNS keeps the CNAME then.
fn alias_records(
    r: &mut Responder<'_>,
    target: &LowerName,
    qtype: u16,
    key: KeyRef<'_>,
    route: Route,
    rec: &mut Recursion<'_>,
    flattened: Option<u32>,
) -> Option<Flow> {
    let (entry, age, flow) = match upstream_answer(key, route, rec)? {
        Ok(answer) => answer,
        Err(forward) => return Some(forward),
    };
    r.alias(target, qtype, entry, age, flattened);
    Some(flow)
}

/// Answers with the upstream's answer to `target`, the name outside every zone that a client
/// pod's search list reached (docs/kubernetes.md, "Autopath"), after a CNAME to it: from the
/// question the client waited for, or the cache, or forwarded while it waits. `None` when this
/// client may not use forwarding, no answer will come for this query, or the name does not
/// exist: the search moves on. A search forwards at most one name per query; a name it reaches
/// after one that was forwarded is answered only from the cache.
fn searched(
    r: &mut Responder<'_>,
    q: &Query,
    question: Question,
    target: &LowerName,
    rec: &mut Recursion<'_>,
) -> Option<Flow> {
    if !rec.allowed {
        return None;
    }
    let route = route_beyond(target, rec)?;
    let dnssec_ok = q.edns.is_some_and(|e| e.dnssec_ok);
    let key = KeyRef::new(
        target,
        question.qtype,
        question.qclass,
        dnssec_ok,
        q.flags & flags::CD != 0,
    );
    let (entry, age, flow) = match upstream_answer(key, route, rec)? {
        Ok(answer) => answer,
        Err(forward) => return Some(forward),
    };
    (entry.rcode() == rcode::NOERROR && r.searched_beyond(target, question.qtype, entry, age)).then_some(flow)
}

/// The upstream's answer to `key`, a question for `route`, with what answering from it means
/// for the worker (`Ok`): from the question a waiting client was waiting for, or the cache; the
/// question to forward when neither has it (`Err`), unless every upstream of the route is down
/// or a waiting client is being answered, when nothing will answer it (`None`).
#[allow(clippy::type_complexity)]
fn upstream_answer<'r>(
    key: KeyRef<'_>,
    route: Route,
    rec: &'r mut Recursion<'_>,
) -> Option<Result<(&'r Entry, Age, Flow), Flow>> {
    let down = rec.down.get(route.index()).copied().unwrap_or(true);
    let settled = match rec.resolved {
        Some(Resolved::Answer(k, entry)) if k == key => return Some(Ok((entry, Age::Fresh(0), Flow::Written))),
        Some(Resolved::Failed(k, _)) if k == key => true,
        // A waiting client is answered now: what the cache lacks is not asked again.
        Some(_) => true,
        None => false,
    };
    let refresh = |wanted: bool| {
        (wanted && !settled).then(|| {
            Box::new(Refresh {
                key: key.to_key(),
                route,
            })
        })
    };
    Some(match rec.cache.lookup(key, rec.now, down || settled) {
        Lookup::Fresh(hit) => {
            let refresh = refresh(hit.refresh);
            Ok((
                hit.entry,
                hit.age,
                Flow::Cached {
                    stale: false,
                    refresh,
                    replayable: false,
                },
            ))
        }
        Lookup::Stale(hit) if down || settled => {
            let refresh = refresh(hit.refresh);
            Ok((
                hit.entry,
                Age::Stale,
                Flow::Cached {
                    stale: true,
                    refresh,
                    replayable: false,
                },
            ))
        }
        Lookup::Miss if down || settled => return None,
        Lookup::Stale(_) => Err(Flow::Forward(Box::new(key.to_key()), route, true)),
        Lookup::Miss => Err(Flow::Forward(Box::new(key.to_key()), route, false)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answer::Transport;
    use crate::snapshot::skydns;
    use crate::wire::types::MAX_MESSAGE_LEN;
    use hickory_proto::rr::RecordType;

    /// A cached TXT answer for `wall.example.org.` that filled a whole 65535-byte upstream
    /// message: with the OPT of a client's EDNS query it no longer fits one.
    fn wall_entry() -> crate::cache::Entry {
        let mut m = vec![0x12, 0x34, 0x81, 0x80, 0, 1, 0, 2, 0, 0, 0, 0];
        m.extend_from_slice(b"\x04wall\x07example\x03org\x00\x00\x10\x00\x01");
        let body_start = m.len();
        for strings in [vec![255usize; 128], [vec![255usize; 127], vec![196]].concat()] {
            let rdata: usize = strings.iter().map(|l| l + 1).sum();
            m.extend_from_slice(&[0xC0, 12, 0, 16, 0, 1, 0, 0, 0, 60]);
            m.extend_from_slice(&(rdata as u16).to_be_bytes());
            for len in strings {
                m.push(len as u8);
                m.extend(std::iter::repeat_n(b'x', len));
            }
        }
        assert_eq!(m.len(), 65_535);
        let caps = crate::cache::TtlCaps {
            min: 0,
            max: 86_400,
            negative_max: 3600,
        };
        crate::cache::Entry::from_reply(&m, body_start, caps, std::time::Instant::now()).unwrap()
    }

    #[test]
    fn a_cached_answer_too_large_for_a_tcp_message_is_servfail_not_tc() {
        let entry = wall_entry();
        let mut query = vec![0x56, 0x78, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 1];
        query.extend_from_slice(b"\x04wall\x07example\x03org\x00\x00\x10\x00\x01");
        query.extend_from_slice(&[0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 0]);
        let mut cache = crate::cache::Cache::new(crate::cache::CacheConfig::default());
        let routes = crate::forward::Routes::new(1, true, Vec::new());
        for transport in [Transport::Tcp, Transport::Udp] {
            let mut rec = Recursion {
                cache: &mut cache,
                routes: &routes,
                down: &[false],
                allowed: true,
                prohibited: false,
                now: std::time::Instant::now(),
                resolved: Some(Resolved::Answer(KeyRef::from_bytes(b""), &entry)),
            };
            let mut out = vec![0u8; MAX_MESSAGE_LEN];
            let Resolution::Done(Outcome::Reply(r)) = answer_recursive(
                &query,
                &Snapshot::default(),
                &Context::new(transport),
                &mut rec,
                &mut LowerName::default(),
                &mut out,
            ) else {
                panic!("no reply over {transport:?}");
            };
            let word = u16::from_be_bytes([out[2], out[3]]);
            let ancount = u16::from_be_bytes([out[6], out[7]]);
            match transport {
                Transport::Tcp => {
                    assert_eq!((word & 0x000F, word & flags::TC, ancount), (rcode::SERVFAIL, 0, 0));
                    assert!(r.len() < 100, "header, question and OPT only");
                }
                Transport::Udp => assert_eq!((word & 0x000F, word & flags::TC), (rcode::NOERROR, flags::TC)),
            }
        }
    }

    /// The SkyDNS domain `skydns.test.` with `out` aliasing `www.example.org.` and `svc`
    /// locating a service there.
    fn leaving() -> Snapshot {
        leaving_with(false)
    }

    /// [`leaving`], its answers CNAME chains when `cname_chains` is set.
    fn leaving_with(cname_chains: bool) -> Snapshot {
        let domain = Name::from_dotted("skydns.test.").unwrap();
        let config = skydns::Config {
            hostmaster: domain.prepend("hostmaster").unwrap(),
            domain,
            cname_chains,
            ..skydns::Config::default()
        };
        let service = |port| skydns::Service {
            host: "www.example.org".into(),
            port,
            ..skydns::Service::default()
        };
        let records = [
            ("/skydns/test/skydns/out".to_string(), service(0)),
            ("/skydns/test/skydns/svc".to_string(), service(80)),
        ];
        skydns::build(&config, &records, 1, std::time::SystemTime::now())
    }

    /// An upstream's answer to `www.example.org. A`, compressed as upstreams do: `www CNAME
    /// edge`, `edge A 192.0.2.7`, every name a pointer into the question or the CNAME.
    fn www_entry() -> Entry {
        let mut m = vec![0x12, 0x34, 0x81, 0x80, 0, 1, 0, 2, 0, 0, 0, 0];
        m.extend_from_slice(b"\x03www\x07example\x03org\x00\x00\x01\x00\x01");
        let body_start = m.len();
        m.extend_from_slice(&[0xC0, 12, 0, 5, 0, 1, 0, 0, 1, 44, 0, 7]);
        let edge_at = m.len() as u8;
        m.extend_from_slice(b"\x04edge\xC0\x10");
        m.extend_from_slice(&[0xC0, edge_at, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 192, 0, 2, 7]);
        let caps = crate::cache::TtlCaps {
            min: 0,
            max: 86_400,
            negative_max: 3600,
        };
        Entry::from_reply(&m, body_start, caps, Instant::now()).unwrap()
    }

    fn www_key(qtype: u16) -> Key {
        let name = LowerName::from_wire(b"\x03www\x07example\x03org\x00").unwrap();
        Key::new(&name, qtype, class::IN, false, false)
    }

    /// Asks `name`/`qtype` of [`leaving`] with recursion as given; the resolution and the reply.
    fn ask_leaving(
        name: &str,
        qtype: hickory_proto::rr::RecordType,
        cache: &mut Cache,
        allowed: bool,
        resolved: Option<Resolved<'_>>,
    ) -> (Resolution, Option<hickory_proto::op::Message>) {
        ask_in(&leaving(), name, qtype, cache, allowed, resolved)
    }

    /// Asks `name`/`qtype` of `snapshot` with recursion as given; the resolution and the reply.
    fn ask_in(
        snapshot: &Snapshot,
        name: &str,
        qtype: hickory_proto::rr::RecordType,
        cache: &mut Cache,
        allowed: bool,
        resolved: Option<Resolved<'_>>,
    ) -> (Resolution, Option<hickory_proto::op::Message>) {
        let mut query = hickory_proto::op::Message::new();
        query
            .set_id(9)
            .set_recursion_desired(true)
            .add_query(hickory_proto::op::Query::query(
                hickory_proto::rr::Name::from_ascii(name).unwrap(),
                qtype,
            ));
        let routes = crate::forward::Routes::new(2, true, Vec::new());
        let mut rec = Recursion {
            cache,
            routes: &routes,
            down: &[false],
            allowed,
            prohibited: false,
            now: Instant::now(),
            resolved,
        };
        let mut out = vec![0u8; MAX_MESSAGE_LEN];
        let ctx = Context::new(Transport::Udp);
        let resolution = answer_recursive(
            &query.to_vec().unwrap(),
            snapshot,
            &ctx,
            &mut rec,
            &mut LowerName::default(),
            &mut out,
        );
        let reply = match &resolution {
            Resolution::Done(Outcome::Reply(r))
            | Resolution::Cached {
                outcome: Outcome::Reply(r),
                ..
            }
            | Resolution::Fetch {
                outcome: Outcome::Reply(r),
                ..
            } => Some(hickory_proto::op::Message::from_vec(&out[..r.len()]).unwrap()),
            _ => None,
        };
        (resolution, reply)
    }

    fn lines(records: &[hickory_proto::rr::Record]) -> Vec<String> {
        records
            .iter()
            .map(|r| format!("{} {} {}", r.name(), r.record_type(), r.data().unwrap()))
            .collect()
    }

    const CHAIN: [&str; 3] = [
        "out.skydns.test. CNAME www.example.org.",
        "www.example.org. CNAME edge.example.org.",
        "edge.example.org. A 192.0.2.7",
    ];

    /// The upstream's addresses of the target, at the query name, as long as the shorter of
    /// the record's 3600 and the upstream's 300 seconds.
    const FLATTENED: [&str; 1] = ["out.skydns.test. 300 A 192.0.2.7"];

    fn lines_with_ttl(records: &[hickory_proto::rr::Record]) -> Vec<String> {
        records
            .iter()
            .map(|r| format!("{} {} {} {}", r.name(), r.ttl(), r.record_type(), r.data().unwrap()))
            .collect()
    }

    #[test]
    fn a_name_pointing_outside_the_domain_is_completed_from_the_cache_at_its_own_name() {
        let mut cache = Cache::new(crate::cache::CacheConfig::default());
        cache.insert(www_key(rtype::A).bytes(), www_entry());
        let (resolution, reply) = ask_leaving("out.skydns.test.", RecordType::A, &mut cache, true, None);
        assert!(matches!(resolution, Resolution::Cached { stale: false, .. }));
        let reply = reply.unwrap();
        assert!(reply.authoritative() && reply.recursion_available());
        assert_eq!(lines_with_ttl(reply.answers()), FLATTENED);
    }

    /// Asks `out.skydns.test. A` of `snapshot` with an empty cache: forwarded for the target,
    /// then answered with the upstream's reply (the answer section's lines returned, by
    /// `render`), then NODATA with the SOA when the upstream failed.
    fn forwarded_then_completed(
        snapshot: &Snapshot,
        render: fn(&[hickory_proto::rr::Record]) -> Vec<String>,
    ) -> Vec<String> {
        let mut cache = Cache::new(crate::cache::CacheConfig::default());
        let (resolution, _) = ask_in(snapshot, "out.skydns.test.", RecordType::A, &mut cache, true, None);
        let Resolution::Forward(forward) = resolution else {
            panic!("not forwarded: {resolution:?}");
        };
        assert_eq!(forward.key.bytes(), www_key(rtype::A).bytes());
        let entry = www_entry();
        let key = www_key(rtype::A);
        let resolved = Resolved::Answer(key.key_ref(), &entry);
        let (_, reply) = ask_in(
            snapshot,
            "out.skydns.test.",
            RecordType::A,
            &mut cache,
            true,
            Some(resolved),
        );
        let completed = render(reply.unwrap().answers());
        let failed = Resolved::Failed(key.key_ref(), Failure::Unreachable);
        let (_, reply) = ask_in(
            snapshot,
            "out.skydns.test.",
            RecordType::A,
            &mut cache,
            true,
            Some(failed),
        );
        let reply = reply.unwrap();
        assert_eq!(reply.response_code(), hickory_proto::op::ResponseCode::NoError);
        assert!(reply.answers().is_empty(), "a target no lookup completes gives nothing");
        assert_eq!(reply.name_servers().len(), 1, "NODATA with the SOA");
        assert!(reply.authoritative());
        completed
    }

    #[test]
    fn a_name_pointing_outside_the_domain_forwards_its_target_and_completes_at_its_own_name() {
        assert_eq!(forwarded_then_completed(&leaving(), lines_with_ttl), FLATTENED);
    }

    #[test]
    fn a_chain_leaving_the_domain_is_completed_from_the_cache_with_names_written_out() {
        let mut cache = Cache::new(crate::cache::CacheConfig::default());
        cache.insert(www_key(rtype::A).bytes(), www_entry());
        let (resolution, reply) = ask_in(
            &leaving_with(true),
            "out.skydns.test.",
            RecordType::A,
            &mut cache,
            true,
            None,
        );
        assert!(matches!(resolution, Resolution::Cached { stale: false, .. }));
        let reply = reply.unwrap();
        assert!(reply.authoritative() && reply.recursion_available());
        assert_eq!(lines(reply.answers()), CHAIN);
    }

    #[test]
    fn a_chain_leaving_the_domain_forwards_its_target_and_completes_with_the_answer() {
        assert_eq!(forwarded_then_completed(&leaving_with(true), lines), CHAIN);
    }

    #[test]
    fn clients_without_recursion_get_no_incomplete_chain() {
        let mut cache = Cache::new(crate::cache::CacheConfig::default());
        cache.insert(www_key(rtype::A).bytes(), www_entry());
        let (resolution, reply) = ask_leaving("out.skydns.test.", RecordType::A, &mut cache, false, None);
        assert!(matches!(resolution, Resolution::Done(_)));
        let reply = reply.unwrap();
        assert!(reply.answers().is_empty());
        assert_eq!(reply.name_servers().len(), 1, "NODATA with the SOA");
    }

    #[test]
    fn srv_targets_outside_the_domain_get_cached_glue_and_fetch_what_is_missing() {
        let mut cache = Cache::new(crate::cache::CacheConfig::default());
        let (resolution, reply) = ask_leaving("svc.skydns.test.", RecordType::SRV, &mut cache, true, None);
        let Resolution::Fetch { fetch, .. } = resolution else {
            panic!("nothing fetched: {resolution:?}");
        };
        let keys: Vec<&[u8]> = fetch.iter().map(|f| f.key.bytes()).collect();
        assert_eq!(keys, [www_key(rtype::A).bytes(), www_key(rtype::AAAA).bytes()]);
        let reply = reply.unwrap();
        assert_eq!((reply.answers().len(), reply.additionals().len()), (1, 0));

        cache.insert(www_key(rtype::A).bytes(), www_entry());
        let (resolution, reply) = ask_leaving("svc.skydns.test.", RecordType::SRV, &mut cache, true, None);
        assert!(
            matches!(&resolution, Resolution::Fetch { fetch, .. } if fetch.len() == 1),
            "AAAA still missing"
        );
        assert_eq!(lines(reply.unwrap().additionals()), CHAIN[1..]);
    }

    /// The cluster zone `cluster.local.` with autopath on and one pod, `10.1.0.5` in `testns`.
    fn searching() -> Snapshot {
        use crate::snapshot::kubernetes::{self, Cluster, ObjectKey, Pod, PodMode};
        let mut cluster = Cluster::default();
        cluster.namespaces.insert("testns".into());
        let address = std::net::IpAddr::from([10, 1, 0, 5]);
        cluster.pods.insert(ObjectKey::new("testns", "client"), Pod { address });
        let config = kubernetes::Config {
            pods: PodMode::Verified,
            autopath: Some(Vec::new()),
            ..kubernetes::Config::default()
        };
        kubernetes::build(&config, &cluster, 1, std::time::SystemTime::UNIX_EPOCH)
    }

    /// What the pod of [`searching`] asks: `www.example.org.` under its first search domain.
    const ASKED: &str = "www.example.org.testns.svc.cluster.local.";

    /// Asks [`ASKED`] A of [`searching`] from the pod, recursion as given; the resolution, the
    /// reply and whether it was a search's answer.
    fn ask_searching(
        cache: &mut Cache,
        allowed: bool,
        resolved: Option<Resolved<'_>>,
    ) -> (Resolution, Option<hickory_proto::op::Message>, bool) {
        let mut query = hickory_proto::op::Message::new();
        query
            .set_id(9)
            .set_recursion_desired(true)
            .add_query(hickory_proto::op::Query::query(
                hickory_proto::rr::Name::from_ascii(ASKED).unwrap(),
                RecordType::A,
            ));
        let routes = crate::forward::Routes::new(2, true, Vec::new());
        let mut rec = Recursion {
            cache,
            routes: &routes,
            down: &[false],
            allowed,
            prohibited: false,
            now: Instant::now(),
            resolved,
        };
        let mut out = vec![0u8; MAX_MESSAGE_LEN];
        let ctx = Context::new(Transport::Udp).with_client([10, 1, 0, 5].into());
        let snapshot = searching();
        let resolution = answer_recursive(
            &query.to_vec().unwrap(),
            &snapshot,
            &ctx,
            &mut rec,
            &mut LowerName::default(),
            &mut out,
        );
        let (reply, searched) = match &resolution {
            Resolution::Done(Outcome::Reply(r))
            | Resolution::Cached {
                outcome: Outcome::Reply(r),
                ..
            } => (
                Some(hickory_proto::op::Message::from_vec(&out[..r.len()]).unwrap()),
                r.searched(),
            ),
            _ => (None, false),
        };
        (resolution, reply, searched)
    }

    /// An upstream's NXDOMAIN for `www.example.org. A`, with the SOA of `org.`.
    fn www_nxdomain() -> Entry {
        let mut m = vec![0x12, 0x34, 0x81, 0x83, 0, 1, 0, 0, 0, 1, 0, 0];
        m.extend_from_slice(b"\x03www\x07example\x03org\x00\x00\x01\x00\x01");
        let body_start = m.len();
        m.extend_from_slice(&[0xC0, 24, 0, 6, 0, 1, 0, 0, 0, 60, 0, 24, 0xC0, 24, 0xC0, 24]);
        m.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 60, 0, 0, 0, 60, 0, 0, 0, 60, 0, 0, 0, 60]);
        let caps = crate::cache::TtlCaps {
            min: 0,
            max: 86_400,
            negative_max: 3600,
        };
        Entry::from_reply(&m, body_start, caps, Instant::now()).unwrap()
    }

    #[test]
    fn a_pods_name_found_only_as_the_bare_name_is_forwarded_bare_and_completed_with_a_cname() {
        let mut cache = Cache::new(crate::cache::CacheConfig::default());
        let (resolution, _, _) = ask_searching(&mut cache, true, None);
        let Resolution::Forward(forward) = resolution else {
            panic!("not forwarded: {resolution:?}");
        };
        assert_eq!(
            forward.key.bytes(),
            www_key(rtype::A).bytes(),
            "the upstream is asked the bare name"
        );
        let (entry, key) = (www_entry(), www_key(rtype::A));
        let (_, reply, searched) = ask_searching(&mut cache, true, Some(Resolved::Answer(key.key_ref(), &entry)));
        let reply = reply.unwrap();
        assert!(searched && !reply.authoritative());
        assert_eq!(reply.response_code(), hickory_proto::op::ResponseCode::NoError);
        assert_eq!(reply.queries()[0].name().to_ascii(), ASKED);
        assert_eq!(
            lines_with_ttl(reply.answers()),
            [
                format!("{ASKED} 300 CNAME www.example.org."),
                "www.example.org. 300 CNAME edge.example.org.".to_owned(),
                "edge.example.org. 300 A 192.0.2.7".to_owned(),
            ]
        );
    }

    #[test]
    fn a_pods_bare_name_from_the_cache_is_answered_at_once() {
        let mut cache = Cache::new(crate::cache::CacheConfig::default());
        cache.insert(www_key(rtype::A).bytes(), www_entry());
        let (resolution, reply, searched) = ask_searching(&mut cache, true, None);
        assert!(matches!(resolution, Resolution::Cached { stale: false, .. }));
        assert!(searched);
        assert_eq!(
            lines(reply.unwrap().answers())[0],
            format!("{ASKED} CNAME www.example.org.")
        );
    }

    #[test]
    fn a_bare_name_the_upstream_denies_leaves_the_pods_question_denied() {
        let mut cache = Cache::new(crate::cache::CacheConfig::default());
        let (entry, key) = (www_nxdomain(), www_key(rtype::A));
        let (_, reply, searched) = ask_searching(&mut cache, true, Some(Resolved::Answer(key.key_ref(), &entry)));
        let reply = reply.unwrap();
        assert!(!searched);
        assert_eq!(reply.response_code(), hickory_proto::op::ResponseCode::NXDomain);
        assert!(reply.answers().is_empty());
        assert_eq!(reply.name_servers()[0].name().to_ascii(), "cluster.local.");
    }

    #[test]
    fn a_pod_without_recursion_gets_no_forwarded_search() {
        let mut cache = Cache::new(crate::cache::CacheConfig::default());
        cache.insert(www_key(rtype::A).bytes(), www_entry());
        let (_, reply, searched) = ask_searching(&mut cache, false, None);
        assert!(!searched);
        assert_eq!(
            reply.unwrap().response_code(),
            hickory_proto::op::ResponseCode::NXDomain
        );
    }
}
