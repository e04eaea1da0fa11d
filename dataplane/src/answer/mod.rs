//! Authoritative answering, sans I/O: query bytes + snapshot → reply bytes in a caller-owned
//! buffer.
//!
//! UDP workers, TCP connections, tests, benches and fuzzers all call [`answer`]. It never
//! allocates: the query name is folded onto the stack, [`Snapshot::find`] says what the name is,
//! and the precompiled RRsets are copied after the client's question by the one message builder,
//! [`Responder`]. What the zones leave open (names outside every zone, answers leading out of the
//! SkyDNS domain) goes to an [`Outside`]: none here, forwarding in [`crate::forward`], which this
//! module knows nothing of. It reads no clock and keeps nothing between queries: the time, the
//! cookie secrets and the records signed per query name come in the [`Context`], from the caller
//! that owns them (a worker), so that an answer is a function of its inputs.

mod autopath;
pub(crate) mod plugins;
mod responder;
mod signed;

pub use crate::reply::{Outcome, Reply, Transport};
pub(crate) use responder::{Responder, OPT_LEN};
pub(crate) use signed::unsigned_sets;

use crate::cookie::{CookieSecrets, Verdict};
use crate::dnssec::denial::Signing;
use crate::io::Peer;
use crate::rewrite::Plugins;
use crate::snapshot::kubernetes::{Host, MAX_ANSWER};
use crate::snapshot::rrset::{Beyond, CompiledAnswer};
use crate::snapshot::skydns::{self, WildcardAnswer};
use crate::snapshot::skydns::{Leaf, MAX_LEAF_ANSWER};
use crate::snapshot::{Found, Node, Slot, Snapshot, Zone, ZoneKind};
use crate::wire::query::parse_query_into;
use crate::wire::types::{class, flags, rcode, rtype};
use crate::wire::writer::Shift;
use crate::wire::{LowerName, Name, Query, Question};
use plugins::Before;
use std::cell::RefCell;
use std::net::IpAddr;
use std::time::SystemTime;

/// Per-query facts from the caller, who owns sockets, clocks, the cookie secrets and the
/// records signed per query name: everything an answer depends on besides the query and the
/// snapshot is here, so that answering reads no clock and keeps no state of its own.
#[derive(Debug, Clone, Copy)]
pub struct Context<'k> {
    /// Transport of the query.
    pub transport: Transport,
    /// A per-worker counter that picks the rotation of round-robin RRsets.
    pub rotation: u32,
    /// TCP idle timeout advertised in edns-tcp-keepalive (RFC 7828), in units of 100 ms.
    pub keepalive: u16,
    /// The address the query came from, in the socket's own form: only a name whose answers
    /// depend on the client (SkyDNS views) reads it, so that no other query pays for turning it
    /// into an address.
    pub client: Peer,
    /// The secrets DNS Cookies are checked and made with; `None` ignores COOKIE options, as a
    /// server without cookies does. Read only for a query that carries one.
    pub cookies: Option<&'k CookieSecrets>,
    /// The wall clock as the caller read it for this query (a worker: once per batch): the
    /// timestamp of the server cookies checked and made (RFC 9018), the validity of the
    /// signatures made per query name and the signing time earned. Read only by a query that
    /// carries a cookie or needs records signed.
    pub now: SystemTime,
    /// The records signed per query name with the budget for signing them, which the caller
    /// keeps from query to query (a worker: one for all its queries); `None` signs with a fresh
    /// one, kept for this query alone. Borrowed only while a query needs records signed.
    pub signing: Option<&'k RefCell<Signing>>,
    /// The plugins that rewrite a question or make its answer (`rewrite`, `template`,
    /// `whoami`, `chaos`, docs/rewrite.md); `None`, the common case, costs a query one branch.
    pub plugins: Option<&'k Plugins>,
}

impl<'k> Context<'k> {
    /// A context for `transport` with no rotation, a 10 s keepalive, the client `0.0.0.0`, no
    /// cookies, the time the Unix epoch (see [`Context::at`]) and no signing state kept.
    pub fn new(transport: Transport) -> Context<'k> {
        Context {
            transport,
            rotation: 0,
            keepalive: 100,
            client: Peer::default(),
            cookies: None,
            now: SystemTime::UNIX_EPOCH,
            signing: None,
            plugins: None,
        }
    }

    /// This context running `plugins` ahead of answering.
    pub fn with_plugins(self, plugins: &'k Plugins) -> Context<'k> {
        Context {
            plugins: Some(plugins),
            ..self
        }
    }

    /// This context for a query from `client`.
    pub fn with_client(self, client: IpAddr) -> Context<'k> {
        Context {
            client: Peer::from(std::net::SocketAddr::new(client, 0)),
            ..self
        }
    }

    /// This context with DNS Cookies checked and made with `cookies`.
    pub fn with_cookies(self, cookies: &'k CookieSecrets) -> Context<'k> {
        Context {
            cookies: Some(cookies),
            ..self
        }
    }

    /// This context at the wall-clock time `now`.
    pub fn at(self, now: SystemTime) -> Context<'k> {
        Context { now, ..self }
    }

    /// This context signing per query name with, and into, `signing`.
    pub fn with_signing(self, signing: &'k RefCell<Signing>) -> Context<'k> {
        Context {
            signing: Some(signing),
            ..self
        }
    }
}

/// What answers the part of a question the zones leave open. The authoritative path hands it
/// names outside every zone and answers whose records lead out of the SkyDNS domain, and knows
/// nothing else of how they are answered: [`NoRecursion`] here, forwarding with its cache in
/// [`crate::forward`].
pub(crate) trait Outside {
    /// What became of the query besides a written reply; `Default` is a written reply.
    type Flow: Default;

    /// Whether this client may use recursion: RA is set in its replies.
    fn recursion_available(&self) -> bool;

    /// Answers `qname`, which no zone holds (or a reverse zone holds no data for).
    fn beyond(&mut self, r: &mut Responder<'_>, q: &Query, qname: &LowerName, question: Question) -> Self::Flow;

    /// Completes an answer of the SkyDNS domain already written, whose records lead outside
    /// it (`beyond`); `None` when its CNAME chain cannot be completed, which drops it.
    fn complete(
        &mut self,
        r: &mut Responder<'_>,
        q: &Query,
        question: Question,
        beyond: &Beyond,
        snapshot: &Snapshot,
    ) -> Option<Self::Flow>;

    /// Answers with the records of `target`, a name outside every zone that the client pod's
    /// search list reached (autopath), after a CNAME to it; `None` when nothing answers it now
    /// or it does not exist, which moves the search on.
    fn searched(
        &mut self,
        r: &mut Responder<'_>,
        q: &Query,
        question: Question,
        target: &LowerName,
    ) -> Option<Self::Flow>;
}

/// No forwarding: names outside every zone are REFUSED, and a CNAME chain leaving the domain
/// is dropped, since nothing can complete it.
pub(crate) struct NoRecursion;

impl Outside for NoRecursion {
    type Flow = ();

    fn recursion_available(&self) -> bool {
        false
    }

    fn beyond(&mut self, r: &mut Responder<'_>, _: &Query, _: &LowerName, _: Question) {
        r.set_rcode(rcode::REFUSED);
    }

    fn complete(
        &mut self,
        r: &mut Responder<'_>,
        _: &Query,
        question: Question,
        beyond: &Beyond,
        snapshot: &Snapshot,
    ) -> Option<()> {
        stands_alone(r, question, beyond, snapshot).then_some(())
    }

    fn searched(&mut self, _: &mut Responder<'_>, _: &Query, _: Question, _: &LowerName) -> Option<()> {
        None
    }
}

/// Whether an answer leading outside the SkyDNS domain stands with what the zones alone gave
/// it, for a client nothing is forwarded for: a CNAME chain leaving the zones cannot, nor a
/// flattened answer left with no record.
pub(crate) fn stands_alone(r: &Responder<'_>, question: Question, beyond: &Beyond, snapshot: &Snapshot) -> bool {
    !leaves_domain(question, beyond, snapshot) && !emptied(r, question, beyond)
}

/// Writes the records of the query's type that another zone of this server holds for the
/// targets of a flattened answer (a SkyDNS name pointing into the cluster zone, say), at the
/// query name and living at most as long as the names leading there. The targets no zone
/// holds are left to [`Outside::complete`].
#[cold]
#[inline(never)]
fn within(r: &mut Responder<'_>, question: Question, beyond: &Beyond, snapshot: &Snapshot) {
    let Some(slot) = Slot::for_qtype(question.qtype) else {
        return;
    };
    for alias in beyond.flattened.iter() {
        let Ok(target) = LowerName::from_wire(alias.target.wire()) else {
            continue;
        };
        if let Found::Node(node, _) = snapshot.find(&target) {
            if let Some(compiled) = answer_of(node, slot, r.ctx) {
                r.flattened(compiled, question.qtype, alias.ttl);
            }
        }
    }
}

/// Whether a flattened address answer was left with no record once its targets outside the
/// domain gave what they could: it is then NODATA, as SkyDNS answers a chain it cannot complete.
pub(crate) fn emptied(r: &Responder<'_>, question: Question, beyond: &Beyond) -> bool {
    matches!(question.qtype, rtype::A | rtype::AAAA) && !beyond.flattened.is_empty() && r.answers() == 0
}

/// Whether an answer's CNAME chain ends outside every zone served: only forwarding completes
/// such a chain (SRV and MX targets outside the domain only miss their glue).
pub(crate) fn leaves_domain(question: Question, beyond: &Beyond, snapshot: &Snapshot) -> bool {
    matches!(question.qtype, rtype::A | rtype::AAAA)
        && beyond.aliases.iter().any(|alias| outside_every_zone(alias, snapshot))
}

/// Whether `name` lies outside every zone served.
pub(crate) fn outside_every_zone(name: &Name, snapshot: &Snapshot) -> bool {
    LowerName::from_wire(name.wire()).is_ok_and(|lower| snapshot.zone_of(&lower).is_none())
}

/// Whether the answer written so far may be completed beyond the domain: a whole NOERROR
/// answer of the SkyDNS domain (docs/skydns-semantics.md, "Names outside the domain").
fn completable(r: &Responder<'_>, zone: &Zone, snapshot: &Snapshot) -> bool {
    r.rcode == rcode::NOERROR
        && r.flags & flags::TC == 0
        && snapshot
            .skydns
            .as_deref()
            .is_some_and(|index| zone.apex == *index.domain())
}

/// What the DNSSEC signer answers with: the zones alone, a CNAME chain leaving them kept as it
/// is (the query path completes it when the client may use forwarding).
struct Inside;

impl Outside for Inside {
    type Flow = ();

    fn recursion_available(&self) -> bool {
        false
    }

    fn beyond(&mut self, r: &mut Responder<'_>, _: &Query, _: &LowerName, _: Question) {
        r.set_rcode(rcode::REFUSED);
    }

    fn complete(&mut self, _: &mut Responder<'_>, _: &Query, _: Question, _: &Beyond, _: &Snapshot) -> Option<()> {
        Some(())
    }

    fn searched(&mut self, _: &mut Responder<'_>, _: &Query, _: Question, _: &LowerName) -> Option<()> {
        None
    }
}

/// Answers one query from the zones alone, without DNSSEC, keeping what an answer leaves
/// outside the zones unresolved: the answers the DNSSEC signer signs ([`unsigned_sets`]).
pub(crate) fn answer_inside(query: &[u8], snapshot: &Snapshot, ctx: &Context, out: &mut [u8]) -> Outcome {
    answer_with(query, snapshot, ctx, out, &mut Inside)
}

/// RFC 8482 §4.2: the synthesised HINFO that answers ANY.
const RFC8482_HINFO: &[u8] = b"\x07RFC8482\x00";

/// Answers one query with no forwarding: names outside every zone are REFUSED. `out` should
/// hold at least 65535 bytes; a smaller buffer caps replies.
pub fn answer(query: &[u8], snapshot: &Snapshot, ctx: &Context, out: &mut [u8]) -> Outcome {
    if let Some(plugins) = ctx.plugins {
        return plugged(plugins, query, snapshot, ctx, out);
    }
    answer_with(query, snapshot, ctx, out, &mut NoRecursion)
}

/// [`answer`] with the plugins run ahead of it, out of the way of the common path.
#[cold]
#[inline(never)]
fn plugged(plugins: &Plugins, query: &[u8], snapshot: &Snapshot, ctx: &Context, out: &mut [u8]) -> Outcome {
    match plugins::before(plugins, query, ctx, out) {
        Before::Pass => answer_with(query, snapshot, ctx, out, &mut NoRecursion),
        Before::Answered(outcome) => outcome,
        Before::Rewritten(rewritten) => {
            let outcome = answer_with(rewritten.query(), snapshot, ctx, out, &mut NoRecursion);
            rewritten.restore(outcome, out)
        }
    }
}

/// Parses `query` and answers it with `outside` answering what the zones leave open.
#[inline(always)]
fn answer_with<O: Outside<Flow = ()>>(
    query: &[u8],
    snapshot: &Snapshot,
    ctx: &Context,
    out: &mut [u8],
    outside: &mut O,
) -> Outcome {
    let mut qname = LowerName::default();
    let mut q = Query::default();
    if let Err(reason) = parse_query_into(query, &mut qname, &mut q) {
        return Outcome::Drop(reason);
    }
    let mut r = Responder::new(query, &q, ctx, out);
    respond(&mut r, &q, &qname, snapshot, outside);
    Outcome::Reply(r.finish(&q))
}

#[inline(always)]
pub(crate) fn respond<O: Outside>(
    r: &mut Responder<'_>,
    q: &Query,
    qname: &LowerName,
    snapshot: &Snapshot,
    outside: &mut O,
) -> O::Flow {
    if let Some(cookie) = q.edns.and_then(|e| e.cookie) {
        if r.cookie(cookie) == Some(Verdict::Invalid) && r.ctx.transport == Transport::Udp {
            // RFC 7873 §5.2.3 and §5.2.4: a server cookie this server did not make, over UDP,
            // gets BADCOOKIE and a fresh cookie, and nothing else (docs/robustness.md).
            r.copy_question(q, qname);
            r.set_rcode(rcode::BADCOOKIE);
            return O::Flow::default();
        }
    }
    if q.opcode() != 0 {
        r.flags = flags::QR | (q.flags & flags::OPCODE_MASK);
        r.copy_question(q, qname);
        r.set_rcode(rcode::NOTIMP);
        return O::Flow::default();
    }
    if outside.recursion_available() {
        r.flags |= flags::RA;
    }
    authoritative(r, q, qname, snapshot, outside)
}

#[inline(always)]
fn authoritative<O: Outside>(
    r: &mut Responder<'_>,
    q: &Query,
    qname: &LowerName,
    snapshot: &Snapshot,
    outside: &mut O,
) -> O::Flow {
    let question = match (q.error, q.question) {
        (None, Some(question)) if q.qdcount == 1 => question,
        // RFC 7873 §5.4: a query for a server cookie alone, answered with one.
        (None, None) if q.qdcount == 0 && r.has_cookie() => return O::Flow::default(),
        _ => {
            r.copy_question(q, qname);
            r.set_rcode(rcode::FORMERR);
            return O::Flow::default();
        }
    };
    r.copy_question(q, qname);
    if q.edns.is_some_and(|e| e.version > 0) {
        r.set_rcode(rcode::BADVERS);
        return O::Flow::default();
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
        _ => return by_class(r, q, qname, question, snapshot, outside),
    }
    O::Flow::default()
}

#[inline(always)]
fn by_class<O: Outside>(
    r: &mut Responder<'_>,
    q: &Query,
    qname: &LowerName,
    question: Question,
    snapshot: &Snapshot,
    outside: &mut O,
) -> O::Flow {
    match question.qclass {
        class::IN => {}
        class::CH => {
            chaos(r, qname, question.qtype, snapshot);
            return O::Flow::default();
        }
        _ => {
            r.set_rcode(rcode::REFUSED);
            return O::Flow::default();
        }
    }
    if let (Some(signed), Some(true)) = (snapshot.dnssec.as_deref(), q.edns.map(|e| e.dnssec_ok)) {
        if let Some(flow) = signed::respond(r, q, qname, question, snapshot, signed, outside) {
            return flow;
        }
    }
    found(r, q, qname, question, snapshot, outside, snapshot.find(qname))
}

/// Answers `qname`, which the snapshot found to be `found`.
#[inline(always)]
fn found<O: Outside>(
    r: &mut Responder<'_>,
    q: &Query,
    qname: &LowerName,
    question: Question,
    snapshot: &Snapshot,
    outside: &mut O,
    found: Found<'_>,
) -> O::Flow {
    match found {
        Found::Leaf(found, zone) => leaf(r, qname, question.qtype, zone, found),
        Found::Outside => return outside.beyond(r, q, qname, question),
        Found::Syncing(_) => r.set_rcode(rcode::SERVFAIL),
        Found::Wildcard(zone) => {
            let client = r.ctx.client.ip();
            let answer = snapshot.skydns.as_deref().map_or(WildcardAnswer::NxDomain, |index| {
                skydns::wildcard(index, qname, question.qtype, client)
            });
            // A domain that falls through denies no name, a wildcard matching nothing included.
            if zone.kind == ZoneKind::Reverse && matches!(answer, WildcardAnswer::NxDomain) {
                return outside.beyond(r, q, qname, question);
            }
            r.authority(zone);
            wildcard(r, qname, question.qtype, zone, answer);
        }
        Found::Missing(zone) => {
            r.flags |= flags::AA;
            if let Some(autopath) = snapshot.autopath.as_deref() {
                if let Some(flow) = autopath::search(r, q, qname, question, zone, snapshot, autopath, outside) {
                    return flow;
                }
            }
            r.negative(rcode::NXDOMAIN, qname, zone);
        }
        Found::Node(node, zone) => {
            r.authority(zone);
            if question.qtype == rtype::ANY {
                r.hinfo(zone.default_ttl);
                return O::Flow::default();
            }
            let found = match Slot::for_qtype(question.qtype) {
                Some(slot) => match node.answer(slot) {
                    Some(compiled) => Some(compiled),
                    None if node.has_views() => viewed(node, slot, r.ctx),
                    None => None,
                },
                None if signed::apex_unsigned(r, qname, question.qtype, zone, snapshot) => return O::Flow::default(),
                None => None,
            };
            match found {
                Some(compiled) => {
                    let mark = r.mark();
                    r.compiled(compiled);
                    if let Some(beyond) = compiled.beyond().filter(|_| completable(r, zone, snapshot)) {
                        if !beyond.flattened.is_empty() {
                            within(r, question, beyond, snapshot);
                        }
                        match outside.complete(r, q, question, beyond, snapshot) {
                            Some(flow) => return flow,
                            None => {
                                // A chain nothing completes is dropped, as SkyDNS drops it.
                                r.rewind(mark);
                                r.negative(rcode::NOERROR, qname, zone);
                            }
                        }
                    }
                }
                None if node.has_views() && passed_on(node, zone, r.ctx) => {
                    return reverse_passed_on(r, q, qname, question, zone, outside)
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
    O::Flow::default()
}

/// The answer of `node` to `slot` for this client: its own, else its views'.
fn answer_of<'n>(node: &'n Node, slot: Slot, ctx: &Context) -> Option<&'n CompiledAnswer> {
    node.answer(slot).or_else(|| viewed(node, slot, ctx))
}

/// The answer for `slot` to this client where a node's slot has no answer of its own: the
/// answer of the client's class, for a name with views (docs/skydns-semantics.md, "Views").
#[cold]
#[inline(never)]
fn viewed<'n>(node: &'n Node, slot: Slot, ctx: &Context) -> Option<&'n CompiledAnswer> {
    node.views()?.answer(slot, ctx.client.ip())
}

/// Whether the reverse name of `node` is not this server's to answer for this client: its view
/// map selects several records for the client's class (docs/skydns-semantics.md, "Reverse names").
#[cold]
#[inline(never)]
fn passed_on(node: &Node, zone: &Zone, ctx: &Context) -> bool {
    zone.kind == ZoneKind::Reverse && node.views().is_some_and(|views| views.passes_on(ctx.client.ip()))
}

/// A reverse name [`passed_on`]: forwarded as a name no zone holds when the client may use
/// forwarding, else NXDOMAIN, as the SkyDNS variant's `ReverseRecord` answers without forwarding.
#[cold]
#[inline(never)]
fn reverse_passed_on<O: Outside>(
    r: &mut Responder<'_>,
    q: &Query,
    qname: &LowerName,
    question: Question,
    zone: &Zone,
    outside: &mut O,
) -> O::Flow {
    if outside.recursion_available() {
        return outside.beyond(r, q, qname, question);
    }
    r.negative(rcode::NXDOMAIN, qname, zone);
    O::Flow::default()
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

fn wildcard(r: &mut Responder<'_>, qname: &LowerName, qtype: u16, zone: &Zone, answer: WildcardAnswer) {
    match answer {
        WildcardAnswer::NxDomain => r.negative(rcode::NXDOMAIN, qname, zone),
        WildcardAnswer::NoData => r.negative(rcode::NOERROR, qname, zone),
        WildcardAnswer::Answer(_) if qtype == rtype::ANY => r.hinfo(zone.default_ttl),
        WildcardAnswer::Answer(compiled) => r.compiled(&compiled),
    }
}

/// CHAOS identity queries, answered only when the operator configured them: by the `chaos`
/// plugin, else by the snapshot's identity.
fn chaos(r: &mut Responder<'_>, qname: &LowerName, qtype: u16, snapshot: &Snapshot) {
    if let Some(chaos) = r.ctx.plugins.and_then(Plugins::chaos) {
        let texts: &[String] = match qname.wire() {
            b"\x07version\x04bind\x00" | b"\x07version\x06server\x00" => std::slice::from_ref(&chaos.version),
            b"\x07authors\x04bind\x00" => &chaos.authors,
            b"\x02id\x06server\x00" | b"\x08hostname\x04bind\x00" => std::slice::from_ref(&chaos.hostname),
            _ => &[],
        };
        if texts.is_empty() {
            return r.set_rcode(rcode::REFUSED);
        }
        r.flags |= flags::AA;
        if qtype == rtype::TXT || qtype == rtype::ANY {
            for text in texts {
                r.txt_chaos(text.as_bytes());
            }
        }
        return;
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::rrset::{AnswerSet, CompiledAnswer, Rdata, Record, Rrset};
    use crate::snapshot::{ZoneKind, ZoneState};
    use crate::wire::types::MAX_MESSAGE_LEN;
    use crate::wire::Name;

    /// Every answer moves its facts several times (into the outcome, the resolution, the
    /// counters): at 32 bytes instead of 24 a cache hit cost 64 more instructions, and nine
    /// fields moved one by one where a word and an outcome in two registers move at once.
    #[test]
    fn a_replys_facts_are_one_word_and_an_outcome_two() {
        assert_eq!(std::mem::size_of::<Reply>(), 8);
        assert!(
            std::mem::size_of::<Outcome>() <= 16,
            "{}",
            std::mem::size_of::<Outcome>()
        );
    }

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
            flattened: Vec::new(),
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
        let mut snapshot = Snapshot {
            zones: vec![Zone::new(
                apex,
                ZoneKind::Authoritative,
                ZoneState::Ready,
                None,
                ttls.0,
                ttls.1,
            )]
            .into(),
            ..Snapshot::default()
        };
        snapshot.nodes.insert(owner, node);
        snapshot
    }

    fn reply(transport: Transport) -> Vec<u8> {
        let mut out = vec![0u8; MAX_MESSAGE_LEN];
        match answer(WALL_TXT_QUERY, &wall(), &Context::new(transport), &mut out) {
            Outcome::Reply(r) => out[..r.len()].to_vec(),
            Outcome::Drop(reason) => panic!("dropped: {reason:?}"),
        }
    }

    #[test]
    fn any_is_an_ordinary_label_outside_the_skydns_domain() {
        let apex = Name::from_dotted("cluster.local.").unwrap();
        let owner = Name::from_dotted("any.default.svc.cluster.local.").unwrap();
        let set = AnswerSet {
            flattened: Vec::new(),
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
        assert_eq!(&out[r.len() - 4..r.len()], &[10, 96, 0, 9]);
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
