//! The immutable snapshot the workers answer from: every authoritative name with its answers
//! precompiled to wire form, the zones with their SOA, and what wildcard queries need.
//!
//! A snapshot is built off the hot path (see [`skydns`]) and published through a [`SnapshotCell`];
//! workers load it once per batch and never see a half-built zone.

pub mod hosts_file;
pub mod kubernetes;
mod layer;
pub mod nodes;
mod retire;
pub mod rrset;
pub mod signed;
pub mod skydns;
#[cfg(test)]
mod test_replies;
#[cfg(test)]
mod test_rng;
pub mod views;
mod written;

use crate::wire::types::rtype;
use crate::wire::writer::Shift;
use crate::wire::{LowerName, Name};
use arc_swap::ArcSwap;
pub use layer::{lay_under, Layer};
pub use nodes::Nodes;
pub use retire::publish;
use rrset::CompiledAnswer;
pub use signed::{Signed, SignedName};
use std::net::IpAddr;
use std::sync::Arc;
use views::Views;
pub use written::Written;

/// The qtypes a node can hold data for; any other qtype is NODATA on an existing name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Slot {
    /// A
    A,
    /// AAAA
    Aaaa,
    /// CNAME
    Cname,
    /// SRV
    Srv,
    /// TXT
    Txt,
    /// MX
    Mx,
    /// NS (zone apex only)
    Ns,
    /// SOA (zone apex only)
    Soa,
    /// PTR (reverse names only)
    Ptr,
}

impl Slot {
    /// Number of slots.
    pub const COUNT: usize = 9;

    /// Every slot, in the order of their numbers.
    pub const ALL: [Slot; Slot::COUNT] = [
        Slot::A,
        Slot::Aaaa,
        Slot::Cname,
        Slot::Srv,
        Slot::Txt,
        Slot::Mx,
        Slot::Ns,
        Slot::Soa,
        Slot::Ptr,
    ];

    /// The query type each slot of [`Slot::ALL`] answers: the types a name answers from its
    /// data, every other one being NODATA there (ANY aside, answered per RFC 8482).
    pub const QTYPES: [u16; Slot::COUNT] = [
        rtype::A,
        rtype::AAAA,
        rtype::CNAME,
        rtype::SRV,
        rtype::TXT,
        rtype::MX,
        rtype::NS,
        rtype::SOA,
        rtype::PTR,
    ];

    /// The slot's bit in a node's mask.
    #[inline]
    fn bit(self) -> u16 {
        1 << self as u16
    }

    /// The bit of a node's mask that no slot has and that marks a node with [`Views`], held
    /// after the slots' answers.
    const VIEWS: u16 = 1 << 15;

    /// The slot answering `qtype`, if any: one look in a table, since every question of a
    /// node's name asks it.
    #[inline(always)]
    pub fn for_qtype(qtype: u16) -> Option<Slot> {
        SLOT_OF_TYPE.get(usize::from(qtype)).copied().flatten()
    }
}

/// [`Slot::for_qtype`]'s table, by record type: every slot's type is below 64.
const SLOT_OF_TYPE: [Option<Slot>; 64] = {
    let mut table = [None; 64];
    let mut i = 0;
    while i < Slot::COUNT {
        table[Slot::QTYPES[i] as usize] = Some(Slot::ALL[i]);
        i += 1;
    }
    table
};

/// Bits set in each byte value: the build may not assume a popcount instruction, and counting
/// the bits below a slot's by table is two loads where the portable count takes a dozen
/// instructions.
const BITS_SET: [u8; 256] = {
    let mut table = [0; 256];
    let mut byte = 0;
    while byte < table.len() {
        table[byte] = (byte as u8).count_ones() as u8;
        byte += 1;
    }
    table
};

/// Bits set in `mask`.
#[inline(always)]
fn bits_set(mask: u16) -> usize {
    let [low, high] = mask.to_le_bytes();
    usize::from(BITS_SET[usize::from(low)] + BITS_SET[usize::from(high)])
}

/// An existing name: its precompiled answers per slot (no answer = NODATA).
///
/// A snapshot holds one node per name, in hash tables whose slots are at most seven eighths
/// full and often half, so a node is one pointer to one allocation: its zone, what lies below
/// it, whether its underscores are optional, a mask of the slots it has answers for, and those
/// answers alone, in slot order (most names answer one or two of the nine slots).
///
/// A name whose answers depend on the client (SkyDNS views) holds the answers every client gets
/// as any node does, and [`Views`] for the others after them, under a bit of the mask no slot
/// has: a node without views reads and answers exactly as before, and the answer path asks for
/// views only where a slot has no answer.
#[derive(Debug, PartialEq, Eq)]
pub struct Node(Box<Parts<[CompiledAnswer]>>);

/// What a [`Node`] points to; `A` is the answers, an array until it is boxed.
#[derive(Debug, PartialEq, Eq)]
struct Parts<A: ?Sized> {
    /// Index of the zone in [`Snapshot::zones`].
    zone: u16,
    /// What the names directly below it that have no node of their own are.
    below: Below,
    /// Whether the name's first two labels may also be spelled without their leading `_`
    /// (see [`Node::underscores_optional`]).
    underscores_optional: bool,
    /// Bit `slot` is set for each slot with an answer, and [`Slot::VIEWS`] for a node with
    /// views.
    slots: u16,
    /// The answers of the set bits of `slots`, lowest bit first; the views' holder last.
    answers: A,
}

/// What a name without a node is when its parent's node says so: names that cannot be listed
/// in advance because any spelling of a kind answers.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Below {
    /// Nothing: such names do not exist.
    #[default]
    Nothing,
    /// A dashed address (`10-0-0-1`, `fd00-10--f`) answers with that address: Kubernetes pod
    /// names under `pods insecure`, which kube-dns served for any address without a check.
    DashedAddresses,
}

impl Node {
    /// A node without answers: a name that exists with no data (RFC 8020), or one to fill.
    pub fn new(zone: u16, below: Below) -> Node {
        Node::packed(zone, below, [const { None }; Slot::COUNT], None)
    }

    /// A node with `answers`; of two answers for one slot, the later is kept.
    pub fn with_answers(zone: u16, below: Below, answers: impl IntoIterator<Item = (Slot, CompiledAnswer)>) -> Node {
        let mut by_slot = [const { None }; Slot::COUNT];
        for (slot, answer) in answers {
            by_slot[slot as usize] = Some(answer);
        }
        Node::packed(zone, below, by_slot, None)
    }

    /// This node, its slots without an answer answered for each client by `views`.
    pub fn with_views(self, views: Views) -> Node {
        let mut node = Node::packed(
            self.0.zone,
            self.0.below,
            self.by_slot(),
            Some(CompiledAnswer::by_client(views)),
        );
        node.0.underscores_optional = self.0.underscores_optional;
        node
    }

    /// The node holding the answers of `by_slot` and the holder of its views, in one allocation
    /// sized for them.
    fn packed(
        zone: u16,
        below: Below,
        by_slot: [Option<CompiledAnswer>; Slot::COUNT],
        views: Option<CompiledAnswer>,
    ) -> Node {
        let slots = Slot::ALL
            .into_iter()
            .filter(|slot| by_slot[*slot as usize].is_some())
            .fold(0, |mask, slot| mask | slot.bit())
            | if views.is_some() { Slot::VIEWS } else { 0 };
        let mut answers = by_slot.into_iter().flatten().chain(views);
        Node(match slots.count_ones() {
            0 => Node::parts::<0>(zone, below, slots, &mut answers),
            1 => Node::parts::<1>(zone, below, slots, &mut answers),
            2 => Node::parts::<2>(zone, below, slots, &mut answers),
            3 => Node::parts::<3>(zone, below, slots, &mut answers),
            4 => Node::parts::<4>(zone, below, slots, &mut answers),
            5 => Node::parts::<5>(zone, below, slots, &mut answers),
            6 => Node::parts::<6>(zone, below, slots, &mut answers),
            7 => Node::parts::<7>(zone, below, slots, &mut answers),
            8 => Node::parts::<8>(zone, below, slots, &mut answers),
            9 => Node::parts::<9>(zone, below, slots, &mut answers),
            _ => Node::parts::<{ Slot::COUNT + 1 }>(zone, below, slots, &mut answers),
        })
    }

    /// Boxes `N` answers; the box then forgets `N`, which the count of `slots` keeps.
    fn parts<const N: usize>(
        zone: u16,
        below: Below,
        slots: u16,
        answers: &mut impl Iterator<Item = CompiledAnswer>,
    ) -> Box<Parts<[CompiledAnswer]>> {
        Box::new(Parts {
            zone,
            below,
            underscores_optional: false,
            slots,
            answers: std::array::from_fn::<_, N, _>(|_| answers.next().expect("an answer for every slot bit")),
        })
    }

    /// Index of the zone in [`Snapshot::zones`].
    #[inline]
    pub fn zone(&self) -> u16 {
        self.0.zone
    }

    /// Moves the node to the zone of index `zone` in [`Snapshot::zones`].
    pub fn set_zone(&mut self, zone: u16) {
        self.0.zone = zone;
    }

    /// What the names directly below it that have no node of their own are.
    #[inline]
    pub fn below(&self) -> Below {
        self.0.below
    }

    /// Whether the names spelling this one's first two labels without their leading `_`
    /// answer as it does: Kubernetes port names, `_<port>._<proto>.<service>`, which CoreDNS
    /// also answers as `<port>.<proto>`, `_<port>.<proto>` and `<port>._<proto>`. Those
    /// spellings have no node of their own (see [`Snapshot::port_name`]).
    pub fn underscores_optional(&self) -> bool {
        self.0.underscores_optional
    }

    /// Lets the spellings without underscores answer as this node (see
    /// [`Node::underscores_optional`]).
    pub fn with_optional_underscores(mut self) -> Node {
        self.0.underscores_optional = true;
        self
    }

    /// The answer for `slot`, if the name has data of that type.
    #[inline]
    pub fn answer(&self, slot: Slot) -> Option<&CompiledAnswer> {
        let bit = slot.bit();
        if self.0.slots & bit == 0 {
            return None;
        }
        let below = self.0.slots & (bit - 1);
        self.0.answers.get(bits_set(below))
    }

    /// Whether the name has views: answers that depend on the client.
    #[inline]
    pub fn has_views(&self) -> bool {
        self.0.slots & Slot::VIEWS != 0
    }

    /// What answers the slots without an answer of their own, client by client: `None` but for
    /// a name with views (its holder is the node's last answer). For the answer path, only where
    /// [`Node::answer`] found nothing and [`Node::has_views`] said so.
    #[inline]
    pub fn views(&self) -> Option<&Views> {
        self.0.answers.last()?.views()
    }

    /// Sets or clears the answer for `slot`.
    pub fn set_answer(&mut self, slot: Slot, answer: Option<CompiledAnswer>) {
        let mut by_slot = self.by_slot();
        by_slot[slot as usize] = answer;
        *self = self.repacked(by_slot);
    }

    /// A node like this one, its views included, holding `by_slot`.
    fn repacked(&self, by_slot: [Option<CompiledAnswer>; Slot::COUNT]) -> Node {
        let views = match self.0.slots & Slot::VIEWS {
            0 => None,
            _ => self.0.answers.last().cloned(),
        };
        let mut node = Node::packed(self.0.zone, self.0.below, by_slot, views);
        node.0.underscores_optional = self.0.underscores_optional;
        node
    }

    /// Every answer with its slot, in slot order.
    pub fn answers(&self) -> impl Iterator<Item = (Slot, &CompiledAnswer)> {
        Slot::ALL
            .into_iter()
            .filter(|slot| self.0.slots & slot.bit() != 0)
            .zip(self.0.answers.iter())
    }

    fn by_slot(&self) -> [Option<CompiledAnswer>; Slot::COUNT] {
        let mut by_slot = [const { None }; Slot::COUNT];
        for (slot, answer) in self.answers() {
            by_slot[slot as usize] = Some(answer.clone());
        }
        by_slot
    }
}

impl Default for Node {
    /// A node of the first zone, without answers.
    fn default() -> Node {
        Node::new(0, Below::Nothing)
    }
}

impl Clone for Node {
    /// Shares the answers; the node itself is copied.
    fn clone(&self) -> Node {
        self.repacked(self.by_slot())
    }
}

/// How names of a zone that have no node are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZoneKind {
    /// skyline owns the zone: missing names are NXDOMAIN with the SOA, AA=1.
    Authoritative,
    /// Reverse names skyline happens to hold PTRs for (`in-addr.arpa.`, `ip6.arpa.`): it does not
    /// own the zone, so missing names are not its to deny and are passed on (forwarded, or
    /// REFUSED while no forwarding is offered), and answers carry AA=0 as SkyDNS's do. Also any
    /// zone whose missing names a source passes on (a `fallthrough` zone).
    Reverse,
    /// A list of names without a SOA (CoreDNS's `hosts` without `fallthrough`): the names it
    /// holds answer with AA=1, and a missing name is SERVFAIL, as CoreDNS answers when it has
    /// no SOA to deny the name with.
    Listed,
}

/// Whether a zone's source has completed its first full sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZoneState {
    /// Data is complete: answers may deny names.
    Ready,
    /// Not yet synced: SERVFAIL, never NXDOMAIN from missing data.
    Syncing,
}

/// A zone served from the snapshot.
#[derive(Debug, Clone)]
pub struct Zone {
    /// Apex name, fixed when the zone is made: [`Zone::new`] keeps its last bytes for
    /// [`Snapshot::may_hold`].
    pub apex: Name,
    /// The apex's last four bytes, `None` when it is shorter: every name in the zone ends with
    /// them.
    tail: Option<[u8; 4]>,
    /// How many labels the apex has, counted once: negative answers and the query-wildcard and
    /// port-name checks place a name's own labels with it on every query they see.
    apex_labels: usize,
    /// Ownership semantics.
    pub kind: ZoneKind,
    /// Sync state of the zone's source.
    pub state: ZoneState,
    /// SOA RDATA in uncompressed wire form, for the authority section of negative answers.
    pub soa_rdata: Option<Box<[u8]>>,
    /// TTL of the SOA in negative answers (SkyDNS `min_ttl`; RFC 2308 negative TTL).
    pub negative_ttl: u32,
    /// TTL of synthesised records (RFC 8482 HINFO).
    pub default_ttl: u32,
}

impl Zone {
    /// A zone of apex `apex`.
    pub fn new(
        apex: Name,
        kind: ZoneKind,
        state: ZoneState,
        soa_rdata: Option<Box<[u8]>>,
        negative_ttl: u32,
        default_ttl: u32,
    ) -> Zone {
        Zone {
            tail: apex.wire().last_chunk::<4>().copied(),
            apex_labels: apex.label_count(),
            apex,
            kind,
            state,
            soa_rdata,
            negative_ttl,
            default_ttl,
        }
    }

    /// How many labels the apex has.
    #[inline]
    pub fn apex_labels(&self) -> usize {
        self.apex_labels
    }
}

/// A snapshot's zones, longest apex first so that the first match is the most specific, with a
/// filter of their apexes' last bytes: most names a worker sees outside every zone (cache hits,
/// forwards) are turned away by one bit test ([`Snapshot::may_hold`]), and a name inside one
/// pays the same test instead of a walk over the zones.
#[derive(Debug, Clone, Default)]
pub struct Zones {
    list: Vec<Zone>,
    /// Bit [`tail_bit`] of each zone's [`Zone::tail`].
    tails: u64,
    /// A zone's apex is shorter than four bytes (the root, a one-letter top-level domain):
    /// every name may be in it.
    short: bool,
}

impl Zones {
    /// Whether a name ending with `tail` may lie in one of the zones: `false` is certain.
    #[inline(always)]
    fn may_end_with(&self, tail: [u8; 4]) -> bool {
        self.short || self.tails & tail_bit(tail) != 0
    }
}

/// The bit of a filter of 64 that four bytes of name set: a multiplicative hash, whose top six
/// bits take in every byte.
#[inline(always)]
fn tail_bit(tail: [u8; 4]) -> u64 {
    1 << (u32::from_le_bytes(tail).wrapping_mul(0x9E37_79B1) >> 26)
}

impl From<Vec<Zone>> for Zones {
    fn from(list: Vec<Zone>) -> Zones {
        Zones {
            tails: list
                .iter()
                .filter_map(|zone| zone.tail)
                .fold(0, |bits, tail| bits | tail_bit(tail)),
            short: list.iter().any(|zone| zone.tail.is_none()),
            list,
        }
    }
}

impl std::ops::Deref for Zones {
    type Target = [Zone];

    fn deref(&self) -> &[Zone] {
        &self.list
    }
}

/// A zone's state and TTLs may change in place; its apex, which the filter is made of, is
/// fixed when the zone is made ([`Zone::new`]).
impl std::ops::DerefMut for Zones {
    fn deref_mut(&mut self) -> &mut [Zone] {
        &mut self.list
    }
}

/// CHAOS-class server identity; each answered only when configured.
#[derive(Debug, Clone, Default)]
pub struct Identity {
    /// Answer for `version.bind.` / `version.server.`.
    pub version: Option<Box<[u8]>>,
    /// Answer for `id.server.` / `hostname.bind.`.
    pub id: Option<Box<[u8]>>,
}

/// Everything the answer path reads, immutable once built.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Increases with every snapshot published; tells apart generations in logs and tests.
    pub generation: u64,
    /// Zones, longest apex first so the first match is the most specific.
    pub zones: Zones,
    /// Every existing name of every zone, keyed by lower-cased wire name, except those in
    /// `hosts`.
    pub nodes: Nodes,
    /// The cluster names that answer with one address or one PTR, in tables rather than nodes
    /// (they are most of a large cluster's names); a name is in `nodes` or here, never both.
    pub hosts: kubernetes::Hosts,
    /// The SkyDNS names that answer with one address record, as the source's entries rather
    /// than nodes (they are most of a large domain's names); a name is in `nodes` or here, never
    /// both, and where a cluster holds it too the cluster's name answers.
    pub leaves: skydns::Leaves,
    /// CHAOS identity.
    pub identity: Identity,
    /// Typed SkyDNS records, for `*`/`any` wildcard queries answered on the slow path.
    pub skydns: Option<Arc<skydns::Index>>,
    /// The pods and search domains of CoreDNS's `autopath @kubernetes`, when it is on: read only
    /// by a question a cluster zone denies (docs/kubernetes.md, "Autopath").
    pub autopath: Option<Arc<kubernetes::Autopath>>,
    /// The SkyDNS domain signed, with `--dnssec`: what queries with DO set are answered from.
    pub dnssec: Option<Arc<Signed>>,
}

/// What a name is in the snapshot: the one lookup the answer path makes, with the precedence
/// of the sources settled here (a SkyDNS leaf, then the zones' nodes, the cluster's tables and
/// the names they answer by spelling alone).
#[derive(Debug, Clone, Copy)]
pub enum Found<'a> {
    /// A SkyDNS name answering with its own address records.
    Leaf(skydns::Leaf<'a>, &'a Zone),
    /// Outside every zone, or a reverse zone's name without data: answered beyond the zones
    /// (forwarded) or refused.
    Outside,
    /// SERVFAIL: in a zone whose source has not synced yet (never a denial from missing data),
    /// or a name a [`ZoneKind::Listed`] zone does not hold.
    Syncing(&'a Zone),
    /// A query wildcard (a `*` or `any` label) in the SkyDNS domain.
    Wildcard(&'a Zone),
    /// A name with precompiled answers.
    Node(&'a Node, &'a Zone),
    /// A cluster name answering with one address or one PTR.
    Host(kubernetes::Host<'a>, &'a Zone),
    /// A Kubernetes port name spelled without its underscores: the node of the underscored
    /// name, and how the shorter question moves its answers' pointers.
    PortName(&'a Node, Shift, &'a Zone),
    /// A dashed address below a name that echoes them.
    Echo(IpAddr, &'a Zone),
    /// No such name in an authoritative zone: NXDOMAIN.
    Missing(&'a Zone),
}

impl Snapshot {
    /// What `qname` is here. Most questions name a SkyDNS leaf or a node: the zone comes with
    /// either, and only a miss walks the zones. Allocation-free.
    #[inline(always)]
    pub fn find(&self, qname: &LowerName) -> Found<'_> {
        if let Some((leaf, zone)) = self.leaf(qname) {
            if zone.state == ZoneState::Syncing {
                return Found::Syncing(zone);
            }
            return Found::Leaf(leaf, zone);
        }
        if !self.may_hold(qname) {
            return Found::Outside;
        }
        let (node, zone) = match self.node_in_zone(qname) {
            Some((node, zone)) => (Some(node), zone),
            None => match self.zone_of(qname) {
                Some((_, zone)) => (None, zone),
                None => return Found::Outside,
            },
        };
        if zone.state == ZoneState::Syncing {
            return Found::Syncing(zone);
        }
        if zone.kind != ZoneKind::Listed && self.is_wildcard(qname, zone) {
            return Found::Wildcard(zone);
        }
        if let Some(node) = node {
            return Found::Node(node, zone);
        }
        if let Some(host) = self.host(qname) {
            return Found::Host(host, zone);
        }
        if let Some((node, shift)) = self.port_name(qname, zone) {
            return Found::PortName(node, shift, zone);
        }
        if let Some(address) = self.echoed_address(qname) {
            return Found::Echo(address, zone);
        }
        match zone.kind {
            ZoneKind::Authoritative => Found::Missing(zone),
            ZoneKind::Reverse => Found::Outside,
            ZoneKind::Listed => Found::Syncing(zone),
        }
    }

    /// Whether `qname` is a SkyDNS query wildcard: a `*` or `any` label anywhere left of the
    /// apex of the SkyDNS domain. In the Kubernetes cluster zones they are ordinary labels: a
    /// Service or port may be named `any`.
    #[inline(always)]
    fn is_wildcard(&self, qname: &LowerName, zone: &Zone) -> bool {
        let own = qname.label_count().saturating_sub(zone.apex_labels);
        // A loop of its own: as an iterator's `any` it was compiled out of line, a call per
        // answer.
        let mut i = 0;
        while i < own {
            if qname.is_wildcard_label(i) {
                return self.skydns.as_deref().is_some_and(|index| *index.domain() == zone.apex);
            }
            i += 1;
        }
        false
    }

    /// The node of a lower-cased wire name.
    #[inline]
    pub fn node(&self, wire: &[u8]) -> Option<&Node> {
        self.nodes.get(wire)
    }

    /// Whether `name` exists in the snapshot's own data, as a node, a cluster table entry or a
    /// SkyDNS leaf: what a source's tests and tools ask, not the answer path.
    pub fn contains(&self, name: &Name) -> bool {
        let Ok(lower) = LowerName::from_wire(name.wire()) else {
            return false;
        };
        self.nodes.get_lower(&lower).is_some() || self.hosts.get(&lower).is_some() || self.leaves.get(&lower).is_some()
    }

    /// The node of a lower-cased name with the zone that answers for it. A node records its
    /// zone (the most specific one holding its name, as [`Self::zone_of`] finds), so a name
    /// that exists costs one hash lookup and no walk over the zones.
    #[inline(always)]
    pub fn node_in_zone(&self, name: &LowerName) -> Option<(&Node, &Zone)> {
        let node = self.nodes.get_lower(name)?;
        let zone = self.zones.get(usize::from(node.zone()))?;
        Some((node, zone))
    }

    /// The SkyDNS leaf `qname`, with the zone it answers in: looked up before the nodes, since
    /// most names of a large domain are leaves. In a composed snapshot a leaf answers only
    /// where the cluster holds no node or table entry of its name. Allocation-free.
    #[inline(always)]
    pub fn leaf(&self, qname: &LowerName) -> Option<(skydns::Leaf<'_>, &Zone)> {
        let leaf = self.leaves.get(qname)?;
        if self.leaves.shadowed() && (self.nodes.get_lower(qname).is_some() || self.hosts.get(qname).is_some()) {
            return None;
        }
        Some((leaf, self.zones.get(usize::from(self.leaves.zone()))?))
    }

    /// The cluster name `qname` if it has no node: for the answer path, where the node lookup
    /// missed, so that a name with a node costs nothing more. Allocation-free.
    #[inline]
    pub fn host(&self, qname: &LowerName) -> Option<kubernetes::Host<'_>> {
        self.hosts.get(qname)
    }

    /// The address a name with no node stands for by its spelling alone: a dashed address
    /// directly below a node whose [`Below`] says so. Allocation-free, for the query path.
    pub fn echoed_address(&self, qname: &LowerName) -> Option<IpAddr> {
        if qname.label_count() < 2 {
            return None;
        }
        let parent = self.nodes.get(qname.suffix(1))?;
        if parent.below() != Below::DashedAddresses {
            return None;
        }
        kubernetes::names::undashed(qname.label(0))
    }

    /// The node answering `qname`, a Kubernetes port name spelled without one or both of its
    /// underscores (`http.tcp.<service>…`), which has no node of its own: that of
    /// `_http._tcp.<service>…` when it says such spellings answer as it does, and how the
    /// shorter question moves its answers' pointers. For the answer path, where the node
    /// lookup missed, only for names five labels below `zone`'s apex. Allocation-free.
    pub fn port_name(&self, qname: &LowerName, zone: &Zone) -> Option<(&Node, Shift)> {
        let (underscored, shift) = kubernetes::names::underscored(qname, zone.apex_labels)?;
        let node = self.nodes.get_lower(&underscored)?;
        node.underscores_optional().then_some((node, shift))
    }

    /// Whether some zone may hold `name`: `false` is certain, and spares a name outside every
    /// zone (a cache hit or a forward) the node lookup and the walk over the zones. A name in a
    /// zone ends with the zone's apex, so with the apex's last four bytes (its top label's last
    /// three and the root) when the apex and the name are that long.
    #[inline(always)]
    pub fn may_hold(&self, name: &LowerName) -> bool {
        let Some(&tail) = name.wire().last_chunk::<4>() else {
            return true;
        };
        self.zones.may_end_with(tail)
    }

    /// The most specific zone containing the name.
    #[inline(always)]
    pub fn zone_of(&self, name: &LowerName) -> Option<(usize, &Zone)> {
        for (i, zone) in self.zones.iter().enumerate() {
            if name.is_within(zone.apex.wire()) {
                return Some((i, zone));
            }
        }
        None
    }
}

/// One snapshot serving the zones of two sources: `overlay`'s zones (the Kubernetes cluster
/// zones) and those of `base` (the SkyDNS domain and its reverse zones). A zone both have (the
/// reverse zones) takes `overlay`'s settings and holds both sources' names; where both hold a
/// name, `overlay`'s node wins, and so does a name of `overlay`'s tables, which then becomes a
/// node (a node answers first); `base`'s leaves answer where `overlay` holds no such name.
/// `overlay` is consumed so that its nodes move rather than copy; `base`'s are cloned (their
/// answers are shared, not copied). Neither a change of the cluster nor a new `base` needs to
/// compose again: [`kubernetes::update()`] carries the composed names over and writes only
/// those either change.
pub fn compose(base: &Snapshot, overlay: Snapshot, generation: u64) -> Snapshot {
    let mut zones: Vec<Zone> = overlay.zones.to_vec();
    zones.extend(
        base.zones
            .iter()
            .filter(|z| !overlay.zones.iter().any(|o| o.apex == z.apex))
            .cloned(),
    );
    zones.sort_by(|a, b| {
        b.apex
            .wire()
            .len()
            .cmp(&a.apex.wire().len())
            .then_with(|| a.apex.cmp(&b.apex))
    });
    let index_of = |apex: &Name| zones.iter().position(|z| z.apex == *apex).unwrap_or(0) as u16;
    let base_map: Vec<u16> = base.zones.iter().map(|z| index_of(&z.apex)).collect();
    let overlay_map: Vec<u16> = overlay.zones.iter().map(|z| index_of(&z.apex)).collect();
    let mut nodes = overlay.nodes;
    let mut hosts = overlay.hosts;
    // Writing every node would copy every shard the overlay shares with another snapshot.
    if overlay_map.iter().enumerate().any(|(i, &to)| usize::from(to) != i) {
        let map = |zone: u16| overlay_map.get(usize::from(zone)).copied().unwrap_or(0);
        for (_, node) in nodes.iter_mut() {
            node.set_zone(map(node.zone()));
        }
        hosts.set_zones(map);
    }
    for (name, node) in &base.nodes {
        if !nodes.contains_key(name) {
            let node = hosts.take(name).unwrap_or_else(|| {
                let mut node = node.clone();
                node.set_zone(base_map.get(usize::from(node.zone())).copied().unwrap_or(0));
                node
            });
            nodes.insert(name.clone(), node);
        }
    }
    let leaves = base
        .leaves
        .composed(base_map.get(usize::from(base.leaves.zone())).copied().unwrap_or(0));
    Snapshot {
        generation,
        zones: zones.into(),
        nodes,
        hosts,
        leaves,
        identity: base.identity.clone(),
        skydns: base.skydns.clone(),
        autopath: overlay.autopath,
        dnssec: base.dnssec.clone(),
    }
}

/// The published snapshot: replaced atomically by the control plane, loaded by workers.
pub type SnapshotCell = Arc<ArcSwap<Snapshot>>;

/// A cell holding an empty snapshot, before any source has loaded.
pub fn empty_cell() -> SnapshotCell {
    Arc::new(ArcSwap::from_pointee(Snapshot::default()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::rrset::{AnswerSet, Rdata, Record, Rrset};
    use std::net::Ipv4Addr;

    /// An answer with the address 10.0.0.`last`.
    pub(crate) fn answer(last: u8) -> CompiledAnswer {
        let qname = LowerName::from_wire(Name::from_dotted("web.skydns.test.").unwrap().wire()).unwrap();
        let set = AnswerSet {
            flattened: Vec::new(),
            answer: vec![Rrset {
                owner: None,
                records: vec![Record {
                    ttl: 60,
                    rdata: Rdata::A(Ipv4Addr::new(10, 0, 0, last)),
                }],
                rotate: false,
            }],
            additional: vec![],
        };
        CompiledAnswer::compile(&qname, &set)
    }

    #[test]
    fn each_slot_answers_its_own_query_type_and_no_other() {
        for (slot, qtype) in Slot::ALL.into_iter().zip(Slot::QTYPES) {
            assert_eq!(Slot::for_qtype(qtype), Some(slot));
        }
        let others = (0..=u16::MAX).filter(|qtype| !Slot::QTYPES.contains(qtype));
        assert!(others.into_iter().all(|qtype| Slot::for_qtype(qtype).is_none()));
    }

    fn zones(apexes: &[&str]) -> Snapshot {
        let zone = |apex: &&str| {
            Zone::new(
                Name::from_dotted(apex).unwrap(),
                ZoneKind::Authoritative,
                ZoneState::Ready,
                None,
                60,
                3600,
            )
        };
        Snapshot {
            zones: apexes.iter().map(zone).collect::<Vec<_>>().into(),
            ..Snapshot::default()
        }
    }

    fn lower(name: &str) -> LowerName {
        LowerName::from_wire(Name::from_dotted(name).unwrap().wire()).unwrap()
    }

    #[test]
    fn every_name_of_a_zone_may_be_held_and_names_outside_them_are_turned_away() {
        let snapshot = zones(&["example.org.", "cluster.local.", "10.in-addr.arpa."]);
        for name in [
            "example.org.",
            "a.b.EXAMPLE.org.",
            "svc.cluster.local.",
            "4.3.2.10.in-addr.arpa.",
        ] {
            assert!(snapshot.may_hold(&lower(name)), "{name}");
        }
        let outside = [
            "example.com.",
            "example.net.",
            "cluster.internal.",
            "ip6.arpa.",
            "wikipedia.de.",
        ];
        let turned_away = outside.iter().filter(|name| !snapshot.may_hold(&lower(name))).count();
        assert!(turned_away >= 4, "only {turned_away} of {outside:?} turned away");
        assert!(
            snapshot.may_hold(&lower("a.")),
            "a name shorter than a tail is never turned away"
        );
    }

    #[test]
    fn a_zone_with_a_short_apex_may_hold_every_name() {
        for apex in [".", "a."] {
            let snapshot = zones(&["example.org.", apex]);
            assert!(snapshot.may_hold(&lower("www.example.com.")), "{apex}");
        }
        assert!(
            !zones(&[]).may_hold(&lower("www.example.com.")),
            "no zone holds anything"
        );
    }

    #[test]
    fn bits_are_counted_by_table_as_the_processor_counts_them() {
        for mask in 0..=u16::MAX {
            assert_eq!(bits_set(mask), mask.count_ones() as usize, "{mask:#x}");
        }
    }

    #[test]
    fn a_node_holds_only_the_answers_it_has() {
        let (srv, ptr) = (answer(1), answer(2));
        let mut node = Node::with_answers(3, Below::Nothing, [(Slot::Ptr, ptr.clone()), (Slot::Srv, srv.clone())]);
        assert_eq!(std::mem::size_of::<Node>(), 16);
        assert_eq!(
            (node.answer(Slot::Srv), node.answer(Slot::Ptr)),
            (Some(&srv), Some(&ptr))
        );
        assert!(Slot::ALL
            .into_iter()
            .filter(|s| ![Slot::Srv, Slot::Ptr].contains(s))
            .all(|s| node.answer(s).is_none()));
        let a = answer(3);
        node.set_answer(Slot::A, Some(a.clone()));
        node.set_answer(Slot::Srv, None);
        let slots: Vec<Slot> = node.answers().map(|(slot, _)| slot).collect();
        assert_eq!(slots, [Slot::A, Slot::Ptr]);
        assert_eq!((node.answer(Slot::A), node.answer(Slot::Ptr)), (Some(&a), Some(&ptr)));
        assert_eq!(node.answer(Slot::Srv), None);
    }
}
