//! The names of a hosts(5) file as CoreDNS's `hosts` plugin answers them, compiled into a
//! [`Layer`]: A and AAAA for each name, PTR for each address (unless `no_reverse`), every
//! record with one TTL, the names outside the plugin's zones left out. See `docs/hosts.md`.
//!
//! A name the data holds answers A and AAAA; any other type is NODATA. A name of the zones it
//! does not hold is passed on where `fallthrough` covers it, and SERVFAIL elsewhere (CoreDNS
//! has no SOA to deny it with). A reverse name it does not hold is always passed on, as
//! CoreDNS passes on every PTR question it has no answer for.

use super::kubernetes::names::reverse;
use super::layer::Layer;
use super::rrset::{AnswerSet, CompiledAnswer, Rdata, Record, Rrset};
use super::{Below, Node, Slot, Zone, ZoneKind, ZoneState};
use crate::wire::{LowerName, Name};
use std::collections::HashMap;
use std::net::IpAddr;

/// The TTL CoreDNS gives hosts records when none is set.
pub const DEFAULT_TTL: u32 = 3600;

/// What shapes the hosts names, named after the options of CoreDNS's `hosts` plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The zones the names must be in to be served (`hosts FILE ZONES...`); the root by default,
    /// any name.
    pub zones: Vec<Name>,
    /// TTL of every record (`ttl`).
    pub ttl: u32,
    /// Whether the addresses answer PTR (no `no_reverse`).
    pub reverse: bool,
    /// Zones whose missing names are passed on (`fallthrough`); an empty list means every zone,
    /// `None` none.
    pub fallthrough: Option<Vec<Name>>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            zones: vec![Name::root()],
            ttl: DEFAULT_TTL,
            reverse: true,
            fallthrough: None,
        }
    }
}

impl Config {
    /// Whether missing names of `zone` are passed on rather than failed.
    pub fn falls_through(&self, zone: &Name) -> bool {
        self.fallthrough
            .as_ref()
            .is_some_and(|zones| zones.is_empty() || zones.iter().any(|z| zone.is_within(z)))
    }

    /// Whether `name` is one the plugin serves: within one of its zones.
    pub fn serves(&self, name: &Name) -> bool {
        self.zones.iter().any(|zone| name.is_within(zone))
    }
}

/// One line of a hosts file: an address and the names it has, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The address.
    pub address: IpAddr,
    /// Its names, lower-cased and absolute, the canonical one first.
    pub names: Vec<Name>,
}

/// Compiles `entries` (the file's, then the inline ones) into the zones and names laid under
/// the served snapshot.
pub fn layer(config: &Config, entries: &[Entry]) -> Layer {
    let mut by_name: HashMap<&Name, Vec<IpAddr>> = HashMap::new();
    let mut by_address: HashMap<IpAddr, Vec<&Name>> = HashMap::new();
    let mut names_in_order: Vec<&Name> = Vec::new();
    let mut addresses_in_order: Vec<IpAddr> = Vec::new();
    for entry in entries {
        let address = entry.address;
        let pointed = reverse_of(address);
        for name in entry.names.iter().filter(|name| config.serves(name)) {
            let addresses = by_name.entry(name).or_insert_with(|| {
                names_in_order.push(name);
                Vec::new()
            });
            if !addresses.contains(&address) {
                addresses.push(address);
            }
            let names = by_address.entry(pointed).or_insert_with(|| {
                addresses_in_order.push(pointed);
                Vec::new()
            });
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    let mut layer = Layer {
        zones: zones(config),
        names: Vec::with_capacity(names_in_order.len() + addresses_in_order.len()),
    };
    for name in names_in_order {
        let addresses = &by_name[name];
        let qname = lower(name);
        let (v4, v6): (Vec<IpAddr>, Vec<IpAddr>) = addresses.iter().partition(|a| a.is_ipv4());
        let answers = [(Slot::A, v4), (Slot::Aaaa, v6)]
            .into_iter()
            .filter(|(_, addresses)| !addresses.is_empty())
            .map(|(slot, addresses)| {
                let records = addresses.iter().map(|&a| address_rdata(a)).collect();
                (slot, CompiledAnswer::compile(&qname, &answer(config.ttl, records)))
            });
        layer
            .names
            .push((name.clone(), Node::with_answers(0, Below::Nothing, answers)));
    }
    if config.reverse {
        for address in addresses_in_order {
            let owner = reverse(address);
            let records = by_address[&address].iter().map(|&n| Rdata::Ptr(n.clone())).collect();
            let compiled = CompiledAnswer::compile(&lower(&owner), &answer(config.ttl, records));
            layer
                .names
                .push((owner, Node::with_answers(0, Below::Nothing, [(Slot::Ptr, compiled)])));
        }
    }
    layer
}

/// The number of (name, address) pairs `entries` give within the zones, each counted once: the
/// records the forward names answer with.
pub fn records(config: &Config, entries: &[Entry]) -> usize {
    let mut seen: std::collections::HashSet<(&Name, IpAddr)> = std::collections::HashSet::new();
    for entry in entries {
        for name in entry.names.iter().filter(|name| config.serves(name)) {
            seen.insert((name, entry.address));
        }
    }
    seen.len()
}

/// The plugin's zones (a miss passed on under `fallthrough`, SERVFAIL elsewhere), and the two
/// reverse trees, whose misses are always passed on, `no_reverse` or not.
fn zones(config: &Config) -> Vec<Zone> {
    let zone = |apex: Name, kind| Zone::new(apex, kind, ZoneState::Ready, None, config.ttl, config.ttl);
    let mut zones: Vec<Zone> = Vec::new();
    for apex in &config.zones {
        if zones.iter().any(|z| z.apex == *apex) {
            continue;
        }
        let kind = if config.falls_through(apex) {
            ZoneKind::Reverse
        } else {
            ZoneKind::Listed
        };
        zones.push(zone(apex.clone(), kind));
    }
    for apex in config.fallthrough.iter().flatten() {
        if config.serves(apex) && !zones.iter().any(|z| z.apex == *apex) {
            zones.push(zone(apex.clone(), ZoneKind::Reverse));
        }
    }
    for apex in ["in-addr.arpa.", "ip6.arpa."] {
        let apex = Name::from_dotted(apex).unwrap_or_else(|_| Name::root());
        if !zones.iter().any(|z| z.apex == apex) {
            zones.push(zone(apex, ZoneKind::Reverse));
        }
    }
    zones
}

/// The address whose reverse name points to an entry's names: an IPv4-mapped IPv6 address
/// answers AAAA as written, but its PTR is the IPv4 address's, as CoreDNS keys addresses by
/// Go's spelling of them (`::ffff:10.0.0.1` is `10.0.0.1`).
fn reverse_of(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
        v4 => v4,
    }
}

fn address_rdata(address: IpAddr) -> Rdata {
    match address {
        IpAddr::V4(v4) => Rdata::A(v4),
        IpAddr::V6(v6) => Rdata::Aaaa(v6),
    }
}

fn answer(ttl: u32, records: Vec<Rdata>) -> AnswerSet {
    AnswerSet {
        flattened: Vec::new(),
        answer: vec![Rrset {
            owner: None,
            records: records.into_iter().map(|rdata| Record { ttl, rdata }).collect(),
            rotate: false,
        }],
        additional: Vec::new(),
    }
}

fn lower(name: &Name) -> LowerName {
    LowerName::from_wire(name.wire()).expect("a checked name")
}

#[cfg(test)]
mod tests;
