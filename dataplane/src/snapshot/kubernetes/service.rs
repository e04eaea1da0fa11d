//! One Service seen with its ready endpoints from all its EndpointSlices (spec §4): the unit
//! the names under `<svc>.<ns>.svc.<zone>` are built from.

use super::config::Config;
use super::model::{Endpoint, EndpointSlice, ObjectKey, Protocol, Service, ServicePort};
use super::names::dashed;
use std::net::IpAddr;

/// Longest pod name usable as an endpoint label (`endpoint_pod_names`), as CoreDNS bounds it.
const MAX_POD_LABEL: usize = 63;

/// A ready endpoint address with its label and the ports of the slice it came from.
#[derive(Debug, Clone)]
pub struct ReadyEndpoint<'c> {
    /// The address.
    pub address: IpAddr,
    /// Its label under the service: the hostname, else (with `endpoint_pod_names`) the pod
    /// name, else the dashed address.
    pub label: String,
    /// The target ports of its slice.
    pub ports: &'c [ServicePort],
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
}

impl<'c> ServiceView<'c> {
    /// The view of `service` over `slices` (its slices only).
    pub fn new(
        config: &Config,
        key: &'c ObjectKey,
        service: &'c Service,
        slices: &[&'c EndpointSlice],
    ) -> ServiceView<'c> {
        let endpoints = slices
            .iter()
            .flat_map(|slice| {
                slice.endpoints.iter().map(|endpoint| ReadyEndpoint {
                    address: endpoint.address,
                    label: label(config, endpoint),
                    ports: &slice.ports,
                })
            })
            .collect();
        ServiceView {
            key,
            service,
            endpoints,
        }
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

    /// The endpoint labels with their addresses, sorted by label, each address once.
    pub fn by_label(&self) -> Vec<(&str, Vec<IpAddr>)> {
        let mut pairs: Vec<(&str, IpAddr)> = self.endpoints.iter().map(|e| (e.label.as_str(), e.address)).collect();
        pairs.sort_unstable();
        pairs.dedup();
        let mut grouped: Vec<(&str, Vec<IpAddr>)> = Vec::new();
        for (label, address) in pairs {
            match grouped.last_mut() {
                Some((last, addresses)) if *last == label => addresses.push(address),
                _ => grouped.push((label, vec![address])),
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

/// An endpoint's label under its service.
fn label(config: &Config, endpoint: &Endpoint) -> String {
    if let Some(hostname) = endpoint.hostname.as_deref().filter(|h| !h.is_empty()) {
        return hostname.to_ascii_lowercase();
    }
    if config.endpoint_pod_names {
        if let Some(pod) = endpoint
            .pod
            .as_deref()
            .filter(|p| !p.is_empty() && p.len() <= MAX_POD_LABEL)
        {
            return pod.to_ascii_lowercase();
        }
    }
    dashed(endpoint.address)
}
