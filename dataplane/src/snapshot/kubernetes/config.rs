//! What shapes the cluster zones, named after the options of CoreDNS's `kubernetes` plugin so
//! that a Corefile translates line by line.

use crate::wire::Name;

/// The `ttl` CoreDNS uses when none is set.
pub const DEFAULT_TTL: u32 = 5;
/// The largest `ttl` CoreDNS accepts.
pub const MAX_TTL: u32 = 3600;
/// TTL of `dns-version.<zone>` TXT, fixed whatever `ttl` says (as CoreDNS does).
pub const VERSION_TTL: u32 = 28800;
/// The schema version of the Kubernetes DNS specification served.
pub const SCHEMA_VERSION: &str = "1.1.0";

/// How `<ip>.<namespace>.pod.<zone>` names answer (`pods`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PodMode {
    /// No pod names at all: NXDOMAIN (the default).
    #[default]
    Disabled,
    /// Any well-formed dashed address in an existing namespace answers with itself, as kube-dns
    /// did: no Pod watch, no check.
    Insecure,
    /// Only the primary address of a Pod that exists in that namespace answers.
    Verified,
}

/// The cluster zones' settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Zones served: forward zones (the first is the primary, used in PTR targets) and reverse
    /// zones under `in-addr.arpa.` / `ip6.arpa.`, which answer PTR for the addresses they cover.
    pub zones: Vec<Name>,
    /// TTL of every record except the `dns-version` TXT (`ttl`, 0–3600).
    pub ttl: u32,
    /// Pod names (`pods`).
    pub pods: PodMode,
    /// Name endpoints without a hostname by their Pod's name rather than their dashed address
    /// (`endpoint_pod_names`).
    pub endpoint_pod_names: bool,
    /// A ClusterIP service without ready endpoints is NXDOMAIN, so that search lists move on
    /// (`ignore empty_service`).
    pub ignore_empty_service: bool,
    /// Only these namespaces are served (`namespaces`); empty means all.
    pub namespaces: Vec<String>,
    /// Zones whose missing names are passed on (forwarded, or REFUSED without forwarding)
    /// instead of denied (`fallthrough`); an empty list means every zone, `None` none. Answers
    /// there carry AA=0, as for any zone skyline does not own whole.
    pub fallthrough: Option<Vec<Name>>,
    /// Also serve OpenShift's `<svc>.<ns>.endpoints.<zone>` and `_endpoints.<svc>.<ns>.svc.<zone>`
    /// names (`openshift_names`).
    pub openshift_names: bool,
    /// CoreDNS's `autopath @kubernetes`: a pod's question for a name under its first search
    /// domain that does not exist is answered with the first name of its search list that
    /// does, these domains (the host's search list) tried after the cluster's own; `None` is
    /// off. It needs verified pods, which say whose namespace a client is in.
    pub autopath: Option<Vec<Name>>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            zones: ["cluster.local.", "in-addr.arpa.", "ip6.arpa."]
                .iter()
                .filter_map(|z| Name::from_dotted(z).ok())
                .collect(),
            ttl: DEFAULT_TTL,
            pods: PodMode::Disabled,
            endpoint_pod_names: false,
            ignore_empty_service: false,
            namespaces: Vec::new(),
            fallthrough: None,
            openshift_names: false,
            autopath: None,
        }
    }
}

impl Config {
    /// The forward zones, primary first.
    pub fn forward_zones(&self) -> impl Iterator<Item = &Name> {
        self.zones.iter().filter(|z| !is_reverse(z))
    }

    /// The reverse zones.
    pub fn reverse_zones(&self) -> impl Iterator<Item = &Name> {
        self.zones.iter().filter(|z| is_reverse(z))
    }

    /// The zone PTR targets are named in: the first forward zone.
    pub fn primary(&self) -> Option<&Name> {
        self.forward_zones().next()
    }

    /// Whether services and pods of `namespace` may be served (the `namespaces` option; the
    /// Namespace must also exist).
    pub fn exposes(&self, namespace: &str) -> bool {
        self.namespaces.is_empty() || self.namespaces.iter().any(|n| n == namespace)
    }

    /// Whether missing names of `zone` are passed on rather than denied.
    pub fn falls_through(&self, zone: &Name) -> bool {
        self.fallthrough
            .as_ref()
            .is_some_and(|zones| zones.is_empty() || zones.contains(zone))
    }
}

/// Whether `zone` is at or below `in-addr.arpa.` or `ip6.arpa.`.
pub fn is_reverse(zone: &Name) -> bool {
    let wire = zone.wire();
    crate::wire::name::is_within(wire, b"\x07in-addr\x04arpa\x00")
        || crate::wire::name::is_within(wire, b"\x03ip6\x04arpa\x00")
}
