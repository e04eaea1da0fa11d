//! The sans-I/O core: query bytes + snapshot → reply bytes in a caller-owned buffer.
//!
//! UDP workers, TCP connections, tests, benches and fuzzers all call [`answer`]. It never
//! allocates on the authoritative path: the query name is folded onto the stack, the node is
//! found by one hash lookup, and the precompiled RRsets are copied after the client's question.

use crate::cache::{Age, Cache, Entry, Key, KeyRef, Lookup};
use crate::forward::{Failure, Route, Routes};
use crate::snapshot::kubernetes::{Host, MAX_ANSWER};
use crate::snapshot::rrset::{Beyond, CompiledAnswer};
use crate::snapshot::skydns::{self, WildcardAnswer};
use crate::snapshot::skydns::{Leaf, MAX_LEAF_ANSWER};
use crate::snapshot::{Found, Node, Slot, Snapshot, Written, Zone, ZoneKind};
use crate::wire::bytes::copy_short;
use crate::wire::query::parse_query_into;
use crate::wire::types::{
    class, ede, flags, option, rcode, rtype, ADVERTISED_UDP_LEN, CLASSIC_UDP_LEN, HEADER_LEN, MAX_MESSAGE_LEN,
    MAX_NAME_LEN,
};
use crate::wire::writer::{shift_pointers, Shift};
use crate::wire::{DropReason, LowerName, Name, Query, Question};
use std::net::IpAddr;
use std::time::Instant;

/// The transport a query arrived on; it sets the reply size limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Datagrams: limited by the client's EDNS size (512 without EDNS), capped at 1232.
    Udp,
    /// Streams: up to 65535 bytes.
    Tcp,
}

/// Per-query facts from the caller, who owns sockets and clocks.
#[derive(Debug, Clone, Copy)]
pub struct Context {
    /// Transport of the query.
    pub transport: Transport,
    /// A per-worker counter that picks the rotation of round-robin RRsets.
    pub rotation: u32,
    /// TCP idle timeout advertised in edns-tcp-keepalive (RFC 7828), in units of 100 ms.
    pub keepalive: u16,
}

impl Context {
    /// A context for `transport` with no rotation and a 10 s keepalive.
    pub fn new(transport: Transport) -> Context {
        Context {
            transport,
            rotation: 0,
            keepalive: 100,
        }
    }
}

/// What the answer path did with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A reply of `len` bytes is in the output buffer.
    Reply(Reply),
    /// Nothing is to be sent.
    Drop(DropReason),
}

/// Facts about a reply, for counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    /// Bytes written.
    pub len: usize,
    /// Response code, extended (BADVERS = 16).
    pub rcode: u16,
    /// TC was set.
    pub truncated: bool,
    /// The query claimed answer or authority records, which were ignored.
    pub ignored_records: bool,
    /// Bytes followed the query, which were ignored.
    pub trailing: bool,
}

/// What the forwarding side lends the answer path for one query: the worker's cache, the
/// routing rules, which routes have every upstream down, whether this client may use
/// forwarding, and the time. The answer path itself does no I/O: a question it cannot answer
/// from the cache comes back as [`Resolution::Forward`].
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
    /// Extended DNS Error (or, for a CNAME's target, the chain alone).
    Failed(KeyRef<'a>, Failure),
}

/// What [`answer_recursive`] did with a message. The forwarding variants are boxed: a miss
/// allocates anyway, and the common results stay small.
#[derive(Debug)]
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

/// Longest [`ClientQuery`]: header, question, OPT with an empty keepalive option.
const CLIENT_QUERY_LEN: usize = HEADER_LEN + MAX_NAME_LEN + 4 + OPT_LEN + 4;

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
            if edns.tcp_keepalive {
                bytes[pos - 1] = 4;
                bytes[pos..pos + 2].copy_from_slice(&option::TCP_KEEPALIVE.to_be_bytes());
                pos += 4;
            }
        }
        ClientQuery { bytes, len: pos as u16 }
    }

    /// The reduced query as a message.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// What the answer path decided beyond writing a reply.
enum Flow {
    /// The reply is written.
    Written,
    /// The reply is written from the cache.
    Cached { stale: bool, refresh: Option<Box<Refresh>> },
    /// Nothing written: forward; a stale answer is at hand. Boxed, as is a refresh: the
    /// result travels up several calls, and a hit should not carry a key's 260 bytes along.
    Forward(Box<Key>, Route, bool),
    /// Nothing written: drop (stub loop).
    Looped,
    /// The reply is written; these questions should be fetched in the background.
    Fetch(Vec<Refresh>),
    /// The answer's CNAME chain leaves the domain and cannot be completed: it is dropped, and
    /// the name answers NODATA, as SkyDNS drops a chain its lookups cannot complete.
    Incomplete,
}

/// RFC 8482 §4.2: the synthesised HINFO that answers ANY.
const RFC8482_HINFO: &[u8] = b"\x07RFC8482\x00";
/// Length of an OPT record without options.
const OPT_LEN: usize = 11;
/// Length of an edns-tcp-keepalive option carrying a timeout.
const KEEPALIVE_LEN: usize = 6;
/// Length of an Extended DNS Error option without extra text (RFC 8914 §2).
const EDE_LEN: usize = 6;

/// Answers one query with no forwarding: names outside every zone are REFUSED. `out` should
/// hold at least 65535 bytes; a smaller buffer caps replies.
pub fn answer(query: &[u8], snapshot: &Snapshot, ctx: &Context, out: &mut [u8]) -> Outcome {
    let mut qname = LowerName::default();
    let mut q = Query::default();
    if let Err(reason) = parse_query_into(query, &mut qname, &mut q) {
        return Outcome::Drop(reason);
    }
    let mut r = Responder::new(query, &q, ctx, out);
    // Without recursion every path writes a reply: there is nothing to forward.
    respond(&mut r, &q, &qname, snapshot, None);
    Outcome::Reply(r.finish(&q))
}

/// Answers one query as [`answer`] does, and names outside the zones from `rec`'s cache; a
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
    let mut q = Query::default();
    if let Err(reason) = parse_query_into(query, qname, &mut q) {
        return Resolution::Done(Outcome::Drop(reason));
    }
    let qname = &*qname;
    let mut r = Responder::new(query, &q, ctx, out);
    match respond(&mut r, &q, qname, snapshot, Some(rec)) {
        // An incomplete chain is rewritten as NODATA where it is found.
        Flow::Written | Flow::Incomplete => Resolution::Done(Outcome::Reply(r.finish(&q))),
        Flow::Cached { stale, refresh } => Resolution::Cached {
            outcome: Outcome::Reply(r.finish(&q)),
            stale,
            refresh,
        },
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

#[inline(always)]
fn respond(
    r: &mut Responder<'_>,
    q: &Query,
    qname: &LowerName,
    snapshot: &Snapshot,
    rec: Option<&mut Recursion<'_>>,
) -> Flow {
    if q.opcode() != 0 {
        r.flags = flags::QR | (q.flags & flags::OPCODE_MASK);
        r.copy_question(q, qname);
        r.set_rcode(rcode::NOTIMP);
        return Flow::Written;
    }
    if rec.as_ref().is_some_and(|rec| rec.allowed) {
        r.flags |= flags::RA;
    }
    authoritative(r, q, qname, snapshot, rec)
}

#[inline(always)]
fn authoritative(
    r: &mut Responder<'_>,
    q: &Query,
    qname: &LowerName,
    snapshot: &Snapshot,
    rec: Option<&mut Recursion<'_>>,
) -> Flow {
    let question = match (q.error, q.question) {
        (None, Some(question)) if q.qdcount == 1 => question,
        _ => {
            r.copy_question(q, qname);
            r.set_rcode(rcode::FORMERR);
            return Flow::Written;
        }
    };
    r.copy_question(q, qname);
    if q.edns.is_some_and(|e| e.version > 0) {
        r.set_rcode(rcode::BADVERS);
        return Flow::Written;
    }
    match question.qtype {
        rtype::OPT => r.set_rcode(rcode::FORMERR),
        rtype::AXFR | rtype::IXFR => {
            let code = if r.ctx.transport == Transport::Udp {
                rcode::NOTIMP
            } else {
                rcode::REFUSED
            };
            r.set_rcode(code);
        }
        t if rtype::is_unsupported_meta(t) => r.set_rcode(rcode::NOTIMP),
        _ => return by_class(r, q, qname, question, snapshot, rec),
    }
    Flow::Written
}

#[inline(always)]
fn by_class(
    r: &mut Responder<'_>,
    q: &Query,
    qname: &LowerName,
    question: Question,
    snapshot: &Snapshot,
    rec: Option<&mut Recursion<'_>>,
) -> Flow {
    match question.qclass {
        class::IN => {}
        class::CH => {
            chaos(r, qname, question.qtype, snapshot);
            return Flow::Written;
        }
        _ => {
            r.set_rcode(rcode::REFUSED);
            return Flow::Written;
        }
    }
    match snapshot.find(qname) {
        Found::Leaf(found, zone) => leaf(r, qname, question.qtype, zone, found),
        Found::Outside => return beyond(r, q, qname, question, rec),
        Found::Syncing(_) => r.set_rcode(rcode::SERVFAIL),
        Found::Wildcard(zone) => {
            r.flags |= flags::AA;
            wildcard(r, qname, question.qtype, zone, snapshot);
        }
        Found::Missing(zone) => {
            r.flags |= flags::AA;
            r.negative(rcode::NXDOMAIN, qname, zone);
        }
        Found::Node(node, zone) => {
            r.authority(zone);
            if question.qtype == rtype::ANY {
                r.hinfo(zone.default_ttl);
                return Flow::Written;
            }
            match Slot::for_qtype(question.qtype).and_then(|s| node.answer(s)) {
                Some(compiled) => {
                    let mark = r.mark();
                    r.compiled(compiled);
                    if let Some(beyond) = compiled.beyond() {
                        return match complete(r, q, question, zone, beyond, snapshot, rec) {
                            Flow::Incomplete => {
                                r.rewind(mark);
                                r.negative(rcode::NOERROR, qname, zone);
                                Flow::Written
                            }
                            flow => flow,
                        };
                    }
                }
                None => r.negative(rcode::NOERROR, qname, zone),
            }
        }
        Found::Host(found, zone) => {
            r.authority(zone);
            host(r, qname, question.qtype, zone, found);
        }
        Found::PortName(node, shift, zone) => {
            r.authority(zone);
            port_name(r, qname, question.qtype, zone, node, shift);
        }
        Found::Echo(address, zone) => {
            r.authority(zone);
            echo(r, qname, question.qtype, zone, address);
        }
    }
    Flow::Written
}

/// Completes a SkyDNS answer that leaves its domain, as SkyDNS does (docs/skydns-semantics.md,
/// "Names outside the domain"): a CNAME chain ending outside it gets the target's records of the
/// query's type in the answer section, from the cache or by forwarding the target's question (the
/// client waits); a chain nothing can complete (no forwarding for this client, no upstream
/// answer, a target that cannot be forwarded) is dropped ([`Flow::Incomplete`]). SRV and MX
/// targets outside it get their cached addresses in the additional section, and those not cached
/// are fetched in the background rather than delaying the answer; without forwarding they go
/// without.
fn complete(
    r: &mut Responder<'_>,
    q: &Query,
    question: Question,
    zone: &Zone,
    beyond: &Beyond,
    snapshot: &Snapshot,
    rec: Option<&mut Recursion<'_>>,
) -> Flow {
    let skydns_zone = snapshot
        .skydns
        .as_deref()
        .is_some_and(|index| zone.apex == *index.domain());
    if !skydns_zone || r.rcode != rcode::NOERROR || r.flags & flags::TC != 0 {
        return Flow::Written;
    }
    let chain = matches!(question.qtype, rtype::A | rtype::AAAA);
    let Some(rec) = rec.filter(|rec| rec.allowed) else {
        let dangling = chain && beyond.aliases.iter().any(|alias| outside_every_zone(alias, snapshot));
        return if dangling { Flow::Incomplete } else { Flow::Written };
    };
    let bits = (q.edns.is_some_and(|e| e.dnssec_ok), q.flags & flags::CD != 0);
    let mut flow = Flow::Written;
    if chain {
        for alias in beyond.aliases.iter() {
            if !outside_every_zone(alias, snapshot) {
                continue;
            }
            let Some((target, route)) = forwardable(alias, snapshot, rec) else {
                return Flow::Incomplete;
            };
            let key = KeyRef::new(&target, question.qtype, class::IN, bits.0, bits.1);
            match alias_records(r, &target, question.qtype, key, route, rec) {
                Flow::Written => {}
                Flow::Cached { stale, refresh } => {
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
                        flow = Flow::Cached { stale, refresh };
                    }
                }
                other => return other,
            }
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
    match flow {
        Flow::Written if !fetch.is_empty() => Flow::Fetch(fetch),
        flow => flow,
    }
}

/// Whether `name` lies outside every zone served: a CNAME to it is completed only by forwarding.
fn outside_every_zone(name: &Name, snapshot: &Snapshot) -> bool {
    LowerName::from_wire(name.wire()).is_ok_and(|lower| snapshot.zone_of(&lower).is_none())
}

/// The lowered `name` and its route, when it is outside every zone and may be forwarded
/// (SkyDNS looks up only names of at least `ndots` labels).
fn forwardable(name: &Name, snapshot: &Snapshot, rec: &Recursion<'_>) -> Option<(LowerName, Route)> {
    let lower = LowerName::from_wire(name.wire()).ok()?;
    if snapshot.zone_of(&lower).is_some() {
        return None;
    }
    let route = rec.routes.route(&lower)?;
    if !route.is_stub() && (lower.label_count() as u64) < u64::from(rec.routes.ndots()) {
        return None;
    }
    Some((lower, route))
}

/// Appends the records of `key` (a CNAME's target, asked with `qtype`) to the answer section: from the question
/// a waiting client was waiting for, or the cache; a miss is forwarded unless every upstream
/// of the route is down. No answer at all leaves the chain incomplete; an upstream's NXDOMAIN or
/// empty answer completes it with nothing more, as SkyDNS keeps the CNAME then.
fn alias_records(
    r: &mut Responder<'_>,
    target: &LowerName,
    qtype: u16,
    key: KeyRef<'_>,
    route: Route,
    rec: &mut Recursion<'_>,
) -> Flow {
    let down = rec.down.get(route.index()).copied().unwrap_or(true);
    let settled = match rec.resolved {
        Some(Resolved::Answer(k, entry)) if k == key => {
            r.alias(target, qtype, entry, Age::Fresh(0));
            return Flow::Written;
        }
        Some(Resolved::Failed(k, _)) if k == key => true,
        // A waiting client is answered now: what the cache lacks is not asked again.
        Some(_) => true,
        None => false,
    };
    match rec.cache.lookup(key, rec.now, down || settled) {
        Lookup::Fresh(hit) => {
            let wanted = hit.refresh;
            r.alias(target, qtype, hit.entry, hit.age);
            Flow::Cached {
                stale: false,
                refresh: (wanted && !settled).then(|| {
                    Box::new(Refresh {
                        key: key.to_key(),
                        route,
                    })
                }),
            }
        }
        Lookup::Stale(hit) if down || settled => {
            let wanted = hit.refresh;
            r.alias(target, qtype, hit.entry, Age::Stale);
            Flow::Cached {
                stale: true,
                refresh: (wanted && !settled).then(|| {
                    Box::new(Refresh {
                        key: key.to_key(),
                        route,
                    })
                }),
            }
        }
        Lookup::Miss if down || settled => Flow::Incomplete,
        Lookup::Stale(_) => Flow::Forward(Box::new(key.to_key()), route, true),
        Lookup::Miss => Flow::Forward(Box::new(key.to_key()), route, false),
    }
}

/// A name that answers with the address it spells (see [`Snapshot::echoed_address`]).
fn echo(r: &mut Responder<'_>, qname: &LowerName, qtype: u16, zone: &Zone, address: IpAddr) {
    match (qtype, address) {
        (rtype::ANY, _) => r.hinfo(zone.default_ttl),
        (rtype::A, IpAddr::V4(a)) => r.address_at_query(rtype::A, zone.default_ttl, a.octets()),
        (rtype::AAAA, IpAddr::V6(a)) => r.address_at_query(rtype::AAAA, zone.default_ttl, a.octets()),
        _ => r.negative(rcode::NOERROR, qname, zone),
    }
}

/// A cluster name kept in the tables rather than a node (see [`Snapshot::host`]): answered
/// as its node would be, its records written on the stack.
fn host(r: &mut Responder<'_>, qname: &LowerName, qtype: u16, zone: &Zone, found: Host<'_>) {
    if qtype == rtype::ANY {
        return r.hinfo(zone.default_ttl);
    }
    let mut records = [0u8; MAX_ANSWER];
    match found.write(qname, qtype, &mut records) {
        Some(written) => r.written(&records, written),
        None => r.negative(rcode::NOERROR, qname, zone),
    }
}

/// A SkyDNS leaf (see [`Snapshot::leaf`]): answered as its node would be, an address record
/// written straight into the reply, an SRV answer on the stack first.
#[inline(always)]
fn leaf(r: &mut Responder<'_>, qname: &LowerName, qtype: u16, zone: &Zone, found: Leaf<'_>) {
    r.authority(zone);
    match qtype {
        rtype::A => match found.v4() {
            Some(address) => r.address_at_query(rtype::A, found.ttl(), address.octets()),
            None => r.negative(rcode::NOERROR, qname, zone),
        },
        rtype::AAAA => match found.v6() {
            Some(address) => r.address_at_query(rtype::AAAA, found.ttl(), address.octets()),
            None => r.negative(rcode::NOERROR, qname, zone),
        },
        rtype::SRV => {
            let mut records = [0u8; MAX_LEAF_ANSWER];
            let written = found.write_srv(qname, &mut records);
            r.written(&records, written);
        }
        rtype::ANY => r.hinfo(zone.default_ttl),
        _ => r.negative(rcode::NOERROR, qname, zone),
    }
}

/// A Kubernetes port name spelled without an underscore (see [`Snapshot::port_name`]):
/// answered as the node of its underscored spelling, its pointers moved to this question.
fn port_name(r: &mut Responder<'_>, qname: &LowerName, qtype: u16, zone: &Zone, node: &Node, shift: Shift) {
    if qtype == rtype::ANY {
        return r.hinfo(zone.default_ttl);
    }
    match Slot::for_qtype(qtype).and_then(|s| node.answer(s)) {
        Some(compiled) => r.respelled(compiled, shift),
        None => r.negative(rcode::NOERROR, qname, zone),
    }
}

/// A name no zone answers for: from the cache, or forwarded, when this client may use
/// forwarding; REFUSED otherwise (and always without recursion).
#[inline(always)]
fn beyond(
    r: &mut Responder<'_>,
    q: &Query,
    qname: &LowerName,
    question: Question,
    rec: Option<&mut Recursion<'_>>,
) -> Flow {
    let Some(rec) = rec.filter(|rec| rec.allowed) else {
        r.set_rcode(rcode::REFUSED);
        return Flow::Written;
    };
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
                }
            }
            Lookup::Miss => {
                r.fail(failure);
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
                }
            }
            Lookup::Stale(hit) if down => {
                let wanted = hit.refresh;
                r.cached(q, hit.entry, Age::Stale);
                Flow::Cached {
                    stale: true,
                    refresh: wanted.then(|| refresh(key)),
                }
            }
            Lookup::Miss if down => {
                r.fail(Failure::Unreachable);
                Flow::Written
            }
            Lookup::Stale(_) => Flow::Forward(Box::new(key.to_key()), route, true),
            Lookup::Miss => Flow::Forward(Box::new(key.to_key()), route, false),
        },
    }
}

fn wildcard(r: &mut Responder<'_>, qname: &LowerName, qtype: u16, zone: &Zone, snapshot: &Snapshot) {
    let Some(index) = snapshot.skydns.as_deref() else {
        return r.negative(rcode::NXDOMAIN, qname, zone);
    };
    match skydns::wildcard(index, qname, qtype) {
        WildcardAnswer::NxDomain => r.negative(rcode::NXDOMAIN, qname, zone),
        WildcardAnswer::NoData => r.negative(rcode::NOERROR, qname, zone),
        WildcardAnswer::Answer(_) if qtype == rtype::ANY => r.hinfo(zone.default_ttl),
        WildcardAnswer::Answer(compiled) => r.compiled(&compiled),
    }
}

/// CHAOS identity queries, answered only when the operator configured them.
fn chaos(r: &mut Responder<'_>, qname: &LowerName, qtype: u16, snapshot: &Snapshot) {
    let id = &snapshot.identity;
    let text = match qname.wire() {
        b"\x07version\x04bind\x00" | b"\x07version\x06server\x00" => id.version.as_deref(),
        b"\x02id\x06server\x00" | b"\x08hostname\x04bind\x00" => id.id.as_deref(),
        _ => None,
    };
    let Some(text) = text else {
        return r.set_rcode(rcode::REFUSED);
    };
    r.flags |= flags::AA;
    if qtype == rtype::TXT || qtype == rtype::ANY {
        r.txt_chaos(text);
    }
}

/// Writes one reply: header, question, sections, and an OPT when the query had one.
struct Responder<'a> {
    out: &'a mut [u8],
    pos: usize,
    /// Bytes the sections may use; the OPT's room is already subtracted.
    limit: usize,
    ctx: &'a Context,
    query: &'a [u8],
    flags: u16,
    rcode: u16,
    counts: [u16; 4],
    opt_keepalive: bool,
    /// Extended DNS Error info code to send in the OPT (room already subtracted).
    ede: Option<u16>,
    /// The query had an OPT, so the reply gets one.
    has_opt: bool,
}

impl<'a> Responder<'a> {
    /// Sets AA when `zone` is one skyline is authoritative for (not a reverse zone it only
    /// holds some names of).
    #[inline(always)]
    fn authority(&mut self, zone: &Zone) {
        if zone.kind == ZoneKind::Authoritative {
            self.flags |= flags::AA;
        }
    }

    #[inline(always)]
    fn new(query: &'a [u8], q: &Query, ctx: &'a Context, out: &'a mut [u8]) -> Responder<'a> {
        let size = match (ctx.transport, q.edns) {
            (Transport::Tcp, _) => MAX_MESSAGE_LEN,
            (Transport::Udp, Some(e)) => (e.udp_size as usize).clamp(CLASSIC_UDP_LEN, ADVERTISED_UDP_LEN as usize),
            (Transport::Udp, None) => CLASSIC_UDP_LEN,
        };
        let opt_keepalive = ctx.transport == Transport::Tcp && q.edns.is_some_and(|e| e.tcp_keepalive);
        let opt_room = match q.edns {
            Some(_) if opt_keepalive => OPT_LEN + KEEPALIVE_LEN,
            Some(_) => OPT_LEN,
            None => 0,
        };
        let limit = size.min(out.len()).saturating_sub(opt_room);
        Responder {
            out,
            pos: HEADER_LEN,
            limit,
            ctx,
            query,
            flags: flags::QR | (q.flags & (flags::OPCODE_MASK | flags::RD)),
            rcode: rcode::NOERROR,
            counts: [0; 4],
            opt_keepalive,
            ede: None,
            has_opt: q.edns.is_some(),
        }
    }

    fn set_rcode(&mut self, code: u16) {
        self.rcode = code;
    }

    /// Adds an Extended DNS Error (RFC 8914) to the reply's OPT, if it has one.
    fn set_ede(&mut self, code: u16) {
        if self.has_opt && self.ede.is_none() {
            self.limit = self.limit.saturating_sub(EDE_LEN);
            self.ede = Some(code);
        }
    }

    /// Writes a cached (or just received) upstream answer after the question. Compression
    /// pointers in it stay valid because the question has the upstream's length (see
    /// [`crate::cache::Entry`]). AA stays clear: a cache is not an authority.
    #[inline(always)]
    fn cached(&mut self, q: &Query, entry: &Entry, age: Age) {
        self.rcode = entry.rcode();
        let asked_for_ad = q.flags & flags::AD != 0 || q.edns.is_some_and(|e| e.dnssec_ok);
        if entry.authentic() && asked_for_ad {
            self.flags |= flags::AD;
        }
        if age == Age::Stale {
            self.set_ede(if entry.rcode() == rcode::NXDOMAIN {
                ede::STALE_NXDOMAIN
            } else {
                ede::STALE_ANSWER
            });
        }
        let room = self.room();
        let (start, counts) = (self.pos, [self.counts[1], self.counts[2], self.counts[3]]);
        let written = entry.write(&mut self.out[self.pos..], room, age);
        self.pos += written.len;
        for (count, n) in self.counts[1..].iter_mut().zip(written.counts) {
            *count += n;
        }
        if written.truncated {
            match self.ctx.transport {
                Transport::Udp => self.flags |= flags::TC,
                // A TCP client cannot retry a truncated answer anywhere bigger: as for an
                // authoritative answer too large for TCP (see `does_not_fit`), SERVFAIL.
                Transport::Tcp => {
                    self.pos = start;
                    self.counts[1..].copy_from_slice(&counts);
                    self.flags &= !flags::AD;
                    self.rcode = rcode::SERVFAIL;
                }
            }
        }
    }

    /// Appends the records an upstream gave for `target`, the last CNAME's target, to the
    /// answer section. Only a NOERROR answer completes the chain (SkyDNS treats any other
    /// rcode as a failed lookup). What does not fit is left out: over UDP with TC, so that
    /// the client asks again over TCP; over TCP the chain stands alone.
    fn alias(&mut self, target: &LowerName, qtype: u16, entry: &Entry, age: Age) {
        if entry.rcode() != rcode::NOERROR {
            return;
        }
        if age == Age::Stale {
            self.set_ede(ede::STALE_ANSWER);
        }
        if let Some(n) = self.append(target, qtype, entry, age, false) {
            self.counts[1] += n;
        } else if self.ctx.transport == Transport::Udp {
            self.flags |= flags::TC;
        }
    }

    /// Appends the address records an upstream gave for `target` to the additional section,
    /// if they fit (additional data is never worth TC).
    fn glue(&mut self, target: &LowerName, qtype: u16, entry: &Entry, age: Age, skip_cnames: bool) {
        if entry.rcode() != rcode::NOERROR {
            return;
        }
        if let Some(n) = self.append(target, qtype, entry, age, skip_cnames) {
            self.counts[3] += n;
        }
    }

    /// Writes the answer records of `entry`, the upstream's answer to `target` and `qtype`,
    /// at the end of the reply; returns how many, or `None` when they do not all fit.
    fn append(&mut self, target: &LowerName, qtype: u16, entry: &Entry, age: Age, skip_cnames: bool) -> Option<u16> {
        let mut question = [0u8; MAX_NAME_LEN + 4];
        let name = target.wire();
        question[..name.len()].copy_from_slice(name);
        question[name.len()..name.len() + 2].copy_from_slice(&qtype.to_be_bytes());
        question[name.len() + 2..name.len() + 4].copy_from_slice(&class::IN.to_be_bytes());
        let room = self.room();
        let (len, n) = entry.write_answers_elsewhere(
            &question[..name.len() + 4],
            &mut self.out[self.pos..],
            room,
            age,
            skip_cnames,
        )?;
        self.pos += len;
        Some(n)
    }

    /// SERVFAIL for a question no upstream answered, saying why.
    fn fail(&mut self, failure: Failure) {
        self.rcode = rcode::SERVFAIL;
        self.set_ede(failure.ede());
    }

    fn room(&self) -> usize {
        self.limit.saturating_sub(self.pos)
    }

    #[inline(always)]
    fn put(&mut self, bytes: &[u8]) {
        copy_short(&mut self.out[self.pos..], bytes);
        self.pos += bytes.len();
    }

    /// Copies the client's question byte-exact (0x20 case echo). A question whose name used
    /// compression is rewritten from the folded name so that offsets into it stay valid.
    #[inline(always)]
    /// Where the sections stand now, to [`Self::rewind`] to.
    fn mark(&self) -> (usize, [u16; 4]) {
        (self.pos, self.counts)
    }

    /// Takes back every record written since `mark`.
    fn rewind(&mut self, (pos, counts): (usize, [u16; 4])) {
        self.pos = pos;
        self.counts = counts;
    }

    fn copy_question(&mut self, q: &Query, qname: &LowerName) {
        let Some(question) = q.question else { return };
        let name_len = question.end - 4 - HEADER_LEN;
        let total = if name_len == qname.wire().len() {
            question.end - HEADER_LEN
        } else {
            qname.wire().len() + 4
        };
        if total > self.room() {
            return;
        }
        if name_len == qname.wire().len() {
            let query = self.query;
            self.put(&query[HEADER_LEN..question.end]);
        } else {
            self.put(qname.wire());
            let query = self.query;
            self.put(&query[question.end - 4..question.end]);
        }
        self.counts[0] = 1;
    }

    #[inline(always)]
    fn compiled(&mut self, compiled: &CompiledAnswer) {
        let Some(parts) = compiled.parts() else {
            return self.does_not_fit();
        };
        let records = parts.records;
        let answer_start = self.pos;
        for span in parts.answer {
            if span.len() > self.room() {
                if self.ctx.transport == Transport::Tcp {
                    // Fits no message after this question: nothing of it is sent.
                    self.pos = answer_start;
                    self.counts[1] = 0;
                }
                return self.does_not_fit();
            }
            let bytes = &records[span.start as usize..span.end as usize];
            if span.rotate_len > 0 {
                let cut = (self.ctx.rotation % span.count as u32) as usize * span.rotate_len as usize;
                self.put(&bytes[cut..]);
                self.put(&bytes[..cut]);
            } else {
                self.put(bytes);
            }
            self.counts[1] += span.count;
        }
        for span in parts.additional {
            if span.len() <= self.room() {
                self.put(&records[span.start as usize..span.end as usize]);
                self.counts[3] += span.count;
            }
        }
    }

    /// [`Self::compiled`] for a question that spells the name the answer was compiled for
    /// shorter, by `shift`.
    fn respelled(&mut self, compiled: &CompiledAnswer, shift: Shift) {
        let (start, before) = (self.pos, self.counts[1] + self.counts[3]);
        self.compiled(compiled);
        let count = self.counts[1] + self.counts[3] - before;
        shift_pointers(&mut self.out[start..self.pos], usize::from(count), shift);
    }

    /// Records [`Host::write`] wrote, copied as [`Self::compiled`] copies an answer of one
    /// RRset a section.
    fn written(&mut self, records: &[u8], written: Written) {
        let answer = &records[..written.answer_len];
        if answer.len() > self.room() {
            if self.ctx.transport == Transport::Tcp {
                self.counts[1] = 0;
            }
            return self.does_not_fit();
        }
        self.put(answer);
        self.counts[1] += written.answer_count;
        let additional = &records[written.answer_len..written.len];
        if written.additional_count > 0 && additional.len() <= self.room() {
            self.put(additional);
            self.counts[3] += written.additional_count;
        }
    }

    /// An answer section too large for the reply: TC over UDP, so that the client retries over TCP;
    /// over TCP there is no larger transport, so SERVFAIL (docs/robustness.md, "DNS over TCP and
    /// abuse").
    fn does_not_fit(&mut self) {
        match self.ctx.transport {
            Transport::Udp => self.flags |= flags::TC,
            Transport::Tcp => {
                self.flags &= !flags::AA;
                self.rcode = rcode::SERVFAIL;
            }
        }
    }

    /// NXDOMAIN or NODATA, with the zone's SOA in the authority section (RFC 2308).
    fn negative(&mut self, code: u16, qname: &LowerName, zone: &Zone) {
        self.rcode = code;
        let Some(soa) = zone.soa_rdata.as_deref() else { return };
        if 12 + soa.len() > self.room() {
            self.flags |= flags::TC;
            return;
        }
        let apex_at = qname.label_count() - zone.apex.label_count();
        let owner = 0xC000 | (HEADER_LEN + qname.label_start(apex_at)) as u16;
        if zone.apex.label_count() == 0 {
            self.put(&[0]);
        } else {
            self.put(&owner.to_be_bytes());
        }
        self.put(&rtype::SOA.to_be_bytes());
        self.put(&class::IN.to_be_bytes());
        self.put(&zone.negative_ttl.to_be_bytes());
        self.put(&(soa.len() as u16).to_be_bytes());
        self.put(soa);
        self.counts[2] = 1;
    }

    fn hinfo(&mut self, ttl: u32) {
        self.record_at_query(rtype::HINFO, class::IN, ttl, &[RFC8482_HINFO]);
    }

    fn txt_chaos(&mut self, text: &[u8]) {
        let text = &text[..text.len().min(255)];
        self.record_at_query(rtype::TXT, class::CH, 0, &[&[text.len() as u8], text]);
    }

    /// [`Self::record_at_query`] for one A or AAAA record, as one fixed-size write: the
    /// answer of most leaves.
    #[inline(always)]
    fn address_at_query<const N: usize>(&mut self, rtype_: u16, ttl: u32, address: [u8; N]) {
        const MAX: usize = 12 + 16;
        if 12 + N > self.room() {
            self.flags |= flags::TC;
            return;
        }
        let mut rr = [0u8; MAX];
        rr[0] = 0xC0;
        rr[1] = HEADER_LEN as u8;
        rr[2..4].copy_from_slice(&rtype_.to_be_bytes());
        rr[4..6].copy_from_slice(&class::IN.to_be_bytes());
        rr[6..10].copy_from_slice(&ttl.to_be_bytes());
        rr[10..12].copy_from_slice(&(N as u16).to_be_bytes());
        rr[12..12 + N].copy_from_slice(&address);
        self.put(&rr[..12 + N]);
        self.counts[1] += 1;
    }

    fn record_at_query(&mut self, rtype_: u16, rclass: u16, ttl: u32, rdata: &[&[u8]]) {
        let rdlen: usize = rdata.iter().map(|p| p.len()).sum();
        if 12 + rdlen > self.room() {
            self.flags |= flags::TC;
            return;
        }
        self.put(&[0xC0, HEADER_LEN as u8]);
        self.put(&rtype_.to_be_bytes());
        self.put(&rclass.to_be_bytes());
        self.put(&ttl.to_be_bytes());
        self.put(&(rdlen as u16).to_be_bytes());
        for part in rdata {
            self.put(part);
        }
        self.counts[1] += 1;
    }

    #[inline(always)]
    fn finish(self, q: &Query) -> Reply {
        let Responder {
            out,
            mut pos,
            flags: fl,
            rcode: code,
            mut counts,
            ctx,
            opt_keepalive,
            ede: ede_code,
            ..
        } = self;
        if let Some(edns) = q.edns {
            let ext = (code >> 4) as u8;
            let do_bit = if edns.dnssec_ok { 0x80 } else { 0 };
            let mut opt = [0u8; OPT_LEN + KEEPALIVE_LEN + EDE_LEN];
            opt[1..3].copy_from_slice(&rtype::OPT.to_be_bytes());
            opt[3..5].copy_from_slice(&ADVERTISED_UDP_LEN.to_be_bytes());
            opt[5] = ext;
            opt[7] = do_bit;
            let mut len = OPT_LEN;
            if opt_keepalive {
                opt[len..len + 2].copy_from_slice(&option::TCP_KEEPALIVE.to_be_bytes());
                opt[len + 2..len + 4].copy_from_slice(&2u16.to_be_bytes());
                opt[len + 4..len + 6].copy_from_slice(&ctx.keepalive.to_be_bytes());
                len += KEEPALIVE_LEN;
            }
            if let Some(info) = ede_code {
                opt[len..len + 2].copy_from_slice(&option::EDE.to_be_bytes());
                opt[len + 2..len + 4].copy_from_slice(&2u16.to_be_bytes());
                opt[len + 4..len + 6].copy_from_slice(&info.to_be_bytes());
                len += EDE_LEN;
            }
            opt[9..11].copy_from_slice(&((len - OPT_LEN) as u16).to_be_bytes());
            out[pos..pos + len].copy_from_slice(&opt[..len]);
            pos += len;
            counts[3] += 1;
        }
        // The header is put together on the stack and copied at once: one bounds check, not six.
        let mut header = [0u8; HEADER_LEN];
        header[0..2].copy_from_slice(&q.id.to_be_bytes());
        header[2..4].copy_from_slice(&(fl | (code & 0x000F)).to_be_bytes());
        for (i, c) in counts.iter().enumerate() {
            header[4 + 2 * i..6 + 2 * i].copy_from_slice(&c.to_be_bytes());
        }
        out[..HEADER_LEN].copy_from_slice(&header);
        Reply {
            len: pos,
            rcode: code,
            truncated: fl & flags::TC != 0,
            ignored_records: q.ancount != 0 || q.nscount != 0,
            trailing: q.trailing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::rrset::{AnswerSet, Rdata, Record, Rrset};
    use crate::snapshot::{Node, ZoneState};
    use crate::wire::Name;
    use hickory_proto::rr::RecordType;

    /// The second message of a TCP stream the `answer` fuzz target found (kept in
    /// `fuzz/corpus/answer/regression-tc-over-tcp`): TXT for `wall.skydns.local.`.
    const WALL_TXT_QUERY: &[u8] = &[
        0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x77, 0x61, 0x6c, 0x6c, 0x06,
        0x73, 0x6b, 0x79, 0x64, 0x6e, 0x73, 0x05, 0x6c, 0x6f, 0x63, 0x61, 0x6c, 0x00, 0x00, 0x10, 0x00, 0x01,
    ];

    /// `wall.skydns.local.` with a TXT RRset of two 32760-byte records: 65520 bytes, a message's
    /// worth, but 20 bytes more than the room left after the header and this question.
    fn wall() -> Snapshot {
        let apex = Name::from_dotted("skydns.local.").unwrap();
        let owner = Name::from_dotted("wall.skydns.local.").unwrap();
        let strings = |c: u8| -> Vec<Box<[u8]>> { [c; 32_620].chunks(255).map(Box::from).collect() };
        let set = AnswerSet {
            answer: vec![Rrset {
                owner: None,
                records: [b'v', b'w']
                    .map(|c| Record {
                        ttl: 60,
                        rdata: Rdata::Txt(strings(c)),
                    })
                    .into(),
                rotate: false,
            }],
            additional: vec![],
        };
        let compiled = CompiledAnswer::compile(&LowerName::from_wire(owner.wire()).unwrap(), &set);
        assert!(!compiled.overflow() && compiled.bytes().len() == 65_520);
        one_name(apex, owner, Slot::Txt, compiled, (60, 3600))
    }

    /// A snapshot of one authoritative zone holding one name with one answer; `ttls` are the
    /// zone's negative and default TTLs.
    fn one_name(apex: Name, owner: Name, slot: Slot, compiled: CompiledAnswer, ttls: (u32, u32)) -> Snapshot {
        let mut node = Node::default();
        node.set_answer(slot, Some(compiled));
        let mut snapshot = Snapshot::default();
        snapshot.zones.push(Zone::new(
            apex,
            ZoneKind::Authoritative,
            ZoneState::Ready,
            None,
            ttls.0,
            ttls.1,
        ));
        snapshot.nodes.insert(owner, node);
        snapshot
    }

    fn reply(transport: Transport) -> Vec<u8> {
        let mut out = vec![0u8; MAX_MESSAGE_LEN];
        match answer(WALL_TXT_QUERY, &wall(), &Context::new(transport), &mut out) {
            Outcome::Reply(r) => out[..r.len].to_vec(),
            Outcome::Drop(reason) => panic!("dropped: {reason:?}"),
        }
    }

    #[test]
    fn any_is_an_ordinary_label_outside_the_skydns_domain() {
        let apex = Name::from_dotted("cluster.local.").unwrap();
        let owner = Name::from_dotted("any.default.svc.cluster.local.").unwrap();
        let set = AnswerSet {
            answer: vec![Rrset {
                owner: None,
                records: vec![Record {
                    ttl: 5,
                    rdata: Rdata::A(std::net::Ipv4Addr::new(10, 96, 0, 9)),
                }],
                rotate: false,
            }],
            additional: vec![],
        };
        let compiled = CompiledAnswer::compile(&LowerName::from_wire(owner.wire()).unwrap(), &set);
        let snapshot = one_name(apex, owner, Slot::A, compiled, (5, 5));
        let mut query = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        query.extend_from_slice(b"\x03any\x07default\x03svc\x07cluster\x05local\x00\x00\x01\x00\x01");
        let mut out = vec![0u8; MAX_MESSAGE_LEN];
        let Outcome::Reply(r) = answer(&query, &snapshot, &Context::new(Transport::Udp), &mut out) else {
            panic!("dropped");
        };
        assert_eq!(u16::from_be_bytes([out[2], out[3]]) & 0x000F, rcode::NOERROR);
        assert_eq!(u16::from_be_bytes([out[6], out[7]]), 1, "the Service named any answers");
        assert_eq!(&out[r.len - 4..r.len], &[10, 96, 0, 9]);
    }

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
                    assert!(r.len < 100, "header, question and OPT only");
                }
                Transport::Udp => assert_eq!((word & 0x000F, word & flags::TC), (rcode::NOERROR, flags::TC)),
            }
        }
    }

    /// The SkyDNS domain `skydns.test.` with `out` aliasing `www.example.org.` and `svc`
    /// locating a service there.
    fn leaving() -> Snapshot {
        let domain = Name::from_dotted("skydns.test.").unwrap();
        let config = skydns::Config {
            hostmaster: domain.prepend("hostmaster").unwrap(),
            domain,
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
            now: Instant::now(),
            resolved,
        };
        let mut out = vec![0u8; MAX_MESSAGE_LEN];
        let ctx = Context::new(Transport::Udp);
        let resolution = answer_recursive(
            &query.to_vec().unwrap(),
            &leaving(),
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
            } => Some(hickory_proto::op::Message::from_vec(&out[..r.len]).unwrap()),
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

    #[test]
    fn a_chain_leaving_the_domain_is_completed_from_the_cache_with_names_written_out() {
        let mut cache = Cache::new(crate::cache::CacheConfig::default());
        cache.insert(www_key(rtype::A).bytes(), www_entry());
        let (resolution, reply) = ask_leaving("out.skydns.test.", RecordType::A, &mut cache, true, None);
        assert!(matches!(resolution, Resolution::Cached { stale: false, .. }));
        let reply = reply.unwrap();
        assert!(reply.authoritative() && reply.recursion_available());
        assert_eq!(lines(reply.answers()), CHAIN);
    }

    #[test]
    fn a_chain_leaving_the_domain_forwards_its_target_and_completes_with_the_answer() {
        let mut cache = Cache::new(crate::cache::CacheConfig::default());
        let (resolution, _) = ask_leaving("out.skydns.test.", RecordType::A, &mut cache, true, None);
        let Resolution::Forward(forward) = resolution else {
            panic!("not forwarded: {resolution:?}");
        };
        assert_eq!(forward.key.bytes(), www_key(rtype::A).bytes());
        let entry = www_entry();
        let key = www_key(rtype::A);
        let resolved = Resolved::Answer(key.key_ref(), &entry);
        let (_, reply) = ask_leaving("out.skydns.test.", RecordType::A, &mut cache, true, Some(resolved));
        assert_eq!(lines(reply.unwrap().answers()), CHAIN);
        let failed = Resolved::Failed(key.key_ref(), Failure::Unreachable);
        let (_, reply) = ask_leaving("out.skydns.test.", RecordType::A, &mut cache, true, Some(failed));
        let reply = reply.unwrap();
        assert_eq!(reply.response_code(), hickory_proto::op::ResponseCode::NoError);
        assert!(reply.answers().is_empty(), "SkyDNS drops a chain no lookup completes");
        assert_eq!(reply.name_servers().len(), 1, "NODATA with the SOA");
        assert!(reply.authoritative());
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

    #[test]
    fn answer_too_large_for_a_tcp_message_after_its_question_is_servfail_not_tc() {
        let tcp = reply(Transport::Tcp);
        let word = u16::from_be_bytes([tcp[2], tcp[3]]);
        assert_eq!(word & 0x000F, rcode::SERVFAIL);
        assert_eq!(word & (flags::TC | flags::AA), 0);
        assert_eq!(&tcp[6..8], &[0, 0], "no answer records");
        assert_eq!(tcp.len(), WALL_TXT_QUERY.len(), "header and question only");
    }

    #[test]
    fn answer_too_large_for_udp_is_truncated_for_a_retry_over_tcp() {
        let udp = reply(Transport::Udp);
        assert_ne!(u16::from_be_bytes([udp[2], udp[3]]) & flags::TC, 0);
    }
}
