//! One Service seen with its ready endpoints from all its EndpointSlices (docs/kubernetes-dns.md,
//! "From EndpointSlices to endpoints"): the unit the names under `<svc>.<ns>.svc.<zone>` are built
//! from.

use super::config::Config;
use super::model::{Endpoint, EndpointSlice, ObjectKey, Protocol, Service, ServicePort};
use super::names::dashed;
use std::net::IpAddr;

/// Longest pod name usable as an endpoint label (`endpoint_pod_names`), as CoreDNS bounds it.
const MAX_POD_LABEL: usize = 63;

/// A ready endpoint address with the ports of the slice it came from.
#[derive(Debug, Clone)]
pub struct ReadyEndpoint<'c> {
    /// The address.
    pub address: IpAddr,
    /// The endpoint.
    pub endpoint: &'c Endpoint,
    /// The target ports of its slice.
    pub ports: &'c [ServicePort],
}

/// The endpoints of a Service that share one label: the name `<label>.<svc>.<ns>.svc.<zone>`.
#[derive(Debug, Clone)]
pub struct Labelled<'c> {
    /// The label.
    pub label: String,
    /// Their addresses, each once, sorted.
    pub addresses: Vec<IpAddr>,
    /// The target ports of their slices, once per endpoint and port, duplicates (slice skew)
    /// included: CoreDNS weighs SRV records by the count before removing duplicates.
    pub ports: Vec<&'c ServicePort>,
}

/// A Service and its ready endpoints, merged across slices. The same address may appear more
/// than once (slice skew during updates); answers remove the duplicates.
#[derive(Debug)]
pub struct ServiceView<'c> {
    /// Namespace and name.
    pub key: &'c ObjectKey,
    /// The Service.
    pub service: &'c Service,
    /// Ready endpoints, in slice order.
    pub endpoints: Vec<ReadyEndpoint<'c>>,
    /// `endpoint_pod_names`.
    pod_names: bool,
}

impl<'c> ServiceView<'c> {
    /// The view of `service` over `slices` (its slices only).
    pub fn new(
        config: &Config,
        key: &'c ObjectKey,
        service: &'c Service,
        slices: impl IntoIterator<Item = &'c EndpointSlice>,
    ) -> ServiceView<'c> {
        let endpoints = slices
            .into_iter()
            .flat_map(|slice| {
                slice.endpoints.iter().map(|endpoint| ReadyEndpoint {
                    address: endpoint.address,
                    endpoint,
                    ports: &slice.ports,
                })
            })
            .collect();
        ServiceView {
            key,
            service,
            endpoints,
            pod_names: config.endpoint_pod_names,
        }
    }

    /// An endpoint's label under the service: its hostname, else (with `endpoint_pod_names`)
    /// its pod's name, else its dashed address. Computed when asked for: most builds need the
    /// labels of a few services only.
    pub fn label(&self, endpoint: &ReadyEndpoint<'_>) -> String {
        let e = endpoint.endpoint;
        if let Some(hostname) = e.hostname.as_deref().filter(|h| !h.is_empty()) {
            return hostname.to_ascii_lowercase();
        }
        if self.pod_names {
            if let Some(pod) = e.pod.as_deref().filter(|p| !p.is_empty() && p.len() <= MAX_POD_LABEL) {
                return pod.to_ascii_lowercase();
            }
        }
        dashed(e.address)
    }

    /// Every ready address.
    pub fn addresses(&self) -> Vec<IpAddr> {
        self.endpoints.iter().map(|e| e.address).collect()
    }

    /// The ready addresses whose slice has the named port `name`/`protocol`.
    pub fn addresses_with_port(&self, name: &str, protocol: Protocol) -> Vec<IpAddr> {
        self.endpoints
            .iter()
            .filter(|e| e.ports.iter().any(|p| *p.name == *name && p.protocol == protocol))
            .map(|e| e.address)
            .collect()
    }

    /// The endpoint labels with their addresses and ports, sorted by label, each address once.
    pub fn by_label(&self) -> Vec<Labelled<'c>> {
        let mut pairs: Vec<(String, &ReadyEndpoint<'c>)> = self.endpoints.iter().map(|e| (self.label(e), e)).collect();
        pairs.sort_unstable_by(|a, b| (&a.0, a.1.address).cmp(&(&b.0, b.1.address)));
        let mut grouped: Vec<Labelled<'c>> = Vec::new();
        for (label, endpoint) in pairs {
            match grouped.last_mut() {
                Some(last) if last.label == label => {
                    if last.addresses.last() != Some(&endpoint.address) {
                        last.addresses.push(endpoint.address);
                    }
                    last.ports.extend(endpoint.ports);
                }
                _ => grouped.push(Labelled {
                    label,
                    addresses: vec![endpoint.address],
                    ports: endpoint.ports.iter().collect(),
                }),
            }
        }
        grouped
    }

    /// The distinct named (port name, protocol) pairs of the endpoints' slices, sorted.
    pub fn named_slice_ports(&self) -> Vec<&'c ServicePort> {
        let mut ports: Vec<&ServicePort> = self
            .endpoints
            .iter()
            .flat_map(|e| e.ports.iter())
            .filter(|p| !p.name.is_empty())
            .collect();
        ports.sort_unstable_by(|a, b| (&a.name, a.protocol.label()).cmp(&(&b.name, b.protocol.label())));
        ports.dedup_by(|a, b| a.name == b.name && a.protocol == b.protocol);
        ports
    }
}
