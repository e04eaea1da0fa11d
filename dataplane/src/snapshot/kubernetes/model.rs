//! The cluster as DNS sees it: only the fields of Services, EndpointSlices, Namespaces and Pods
//! that shape answers, so that a cluster of 100k endpoints stays a few megabytes in memory. The
//! control plane keeps one [`Cluster`] up to date from its watches; the builder reads it.

use foldhash::fast::RandomState;
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

/// Where an object lives: its namespace and name (cluster-scoped objects have no namespace).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// `metadata.namespace`; empty for cluster-scoped objects.
    pub namespace: Box<str>,
    /// `metadata.name`.
    pub name: Box<str>,
}

impl ObjectKey {
    /// The key of `name` in `namespace`.
    pub fn new(namespace: &str, name: &str) -> ObjectKey {
        ObjectKey {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

/// Objects of one kind by namespace and name.
pub type Objects<V> = HashMap<ObjectKey, V, RandomState>;

/// Names of cluster-scoped objects.
pub type Names = HashSet<Box<str>, RandomState>;

/// Everything the cluster zones are built from.
#[derive(Debug, Default, Clone)]
pub struct Cluster {
    /// Names of the Namespaces that exist: a service or pod in any other namespace is not served.
    pub namespaces: Names,
    /// Services.
    pub services: Objects<Service>,
    /// EndpointSlices, by the slice's own name.
    pub slices: Objects<EndpointSlice>,
    /// Pods; filled only when pod records are verified.
    pub pods: Objects<Pod>,
}

/// What changed in a [`Cluster`] since the snapshot last built from it, so that the next build
/// recompiles only the names those changes reach (see [`super::update()`]). Filled by
/// [`Changes::namespace`], [`Changes::service`], [`Changes::slice`] and [`Changes::pod`] as the
/// objects change, and completed by [`Changes::settle`] before a build.
#[derive(Debug, Default, Clone)]
pub struct Changes {
    /// Everything may have changed (the first list of a kind): build from scratch.
    pub full: bool,
    /// Services whose own object or one of whose slices changed.
    pub services: HashSet<ObjectKey, RandomState>,
    /// Addresses whose PTR may have changed: cluster IPs and endpoint addresses, before and
    /// after the changes.
    pub addresses: HashSet<IpAddr, RandomState>,
    /// Namespaces that came or went, each with whether it existed when the last snapshot was
    /// built: the names of everything in it appear or disappear.
    pub namespaces: HashMap<Box<str>, bool, RandomState>,
    /// The changed objects as the last snapshot saw them.
    pub before: Before,
}

/// Objects as the snapshot last built saw them (`None`: absent then): an update removes the
/// names they gave, which the cluster alone no longer tells.
#[derive(Debug, Default, Clone)]
pub struct Before {
    /// Services.
    pub services: Objects<Option<Service>>,
    /// EndpointSlices.
    pub slices: Objects<Option<EndpointSlice>>,
    /// Pods.
    pub pods: Objects<Option<Pod>>,
}

impl Changes {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        !self.full
            && self.before.pods.is_empty()
            && self.services.is_empty()
            && self.addresses.is_empty()
            && self.namespaces.is_empty()
    }

    /// Completes the changes once every list has ended, from `cluster` as it then is: the
    /// services and pods of every namespace noted, and the cluster IPs and endpoint addresses
    /// of every service noted. During a re-list an object may be noted before those it refers
    /// to are listed again (a slice before its Service, a deleted Service before its slices, a
    /// Namespace gone before its Services are back from the moved-aside tables), so
    /// [`Changes::namespace`], [`Changes::service`] and [`Changes::slice`] may have seen only
    /// part of them.
    pub fn settle(&mut self, cluster: &Cluster) {
        if self.full {
            return;
        }
        let namespaces: Vec<Box<str>> = self.namespaces.keys().cloned().collect();
        for name in &namespaces {
            self.contents(cluster, name);
        }
        if self.services.is_empty() {
            return;
        }
        let Changes {
            services, addresses, ..
        } = self;
        for key in services.iter() {
            if let Some(ServiceKind::ClusterIp(ips)) = cluster.services.get(key).map(|s| &s.kind) {
                addresses.extend(ips.iter().copied());
            }
        }
        let touched: HashSet<(&str, &str), RandomState> =
            services.iter().map(|key| (&*key.namespace, &*key.name)).collect();
        for (key, slice) in &cluster.slices {
            if touched.contains(&(&*key.namespace, &*slice.service)) {
                addresses.extend(slice.endpoints.iter().map(|e| e.address));
            }
        }
    }

    /// Notes that the Namespace `name` came or went in `cluster`, `existed` telling whether it
    /// was there before: its own names, and every service and pod in it, as they are.
    pub fn namespace(&mut self, cluster: &Cluster, name: &str, existed: bool) {
        if self.full {
            return;
        }
        self.namespaces.entry(name.into()).or_insert(existed);
        self.contents(cluster, name);
    }

    /// Notes every service and pod in the namespace `name` of `cluster`, as they are, with
    /// their addresses.
    fn contents(&mut self, cluster: &Cluster, name: &str) {
        for (key, service) in cluster.services.iter().filter(|(key, _)| &*key.namespace == name) {
            if let ServiceKind::ClusterIp(ips) = &service.kind {
                self.addresses.extend(ips.iter().copied());
            }
            self.services.insert(key.clone());
            self.before
                .services
                .entry(key.clone())
                .or_insert_with(|| Some(service.clone()));
        }
        let slices = cluster.slices.iter().filter(|(key, _)| &*key.namespace == name);
        self.addresses
            .extend(slices.flat_map(|(_, slice)| slice.endpoints.iter().map(|e| e.address)));
        for (key, pod) in cluster.pods.iter().filter(|(key, _)| &*key.namespace == name) {
            self.before.pods.entry(key.clone()).or_insert_with(|| Some(pod.clone()));
        }
    }

    /// Whether the Namespace `name` existed when the last snapshot was built, `cluster` being
    /// as it is now.
    pub fn namespace_existed(&self, cluster: &Cluster, name: &str) -> bool {
        self.namespaces
            .get(name)
            .copied()
            .unwrap_or_else(|| cluster.namespaces.contains(name))
    }

    /// Notes that the Service `key` of `cluster` changed, `old` being what it was: its names,
    /// the PTRs of its cluster IPs before and after, and those of its endpoints.
    pub fn service(&mut self, cluster: &Cluster, key: &ObjectKey, old: Option<&Service>) {
        if self.full {
            return;
        }
        for service in old.into_iter().chain(cluster.services.get(key)) {
            if let ServiceKind::ClusterIp(ips) = &service.kind {
                self.addresses.extend(ips.iter().copied());
            }
        }
        let endpoints = cluster
            .slices
            .iter()
            .filter(|(k, s)| k.namespace == key.namespace && s.service == key.name)
            .flat_map(|(_, s)| s.endpoints.iter().map(|e| e.address));
        self.addresses.extend(endpoints);
        self.services.insert(key.clone());
        self.before.services.entry(key.clone()).or_insert_with(|| old.cloned());
    }

    /// Notes that the EndpointSlice `key` of `cluster` changed, `old` being what it was: the
    /// names of the services it belonged to and belongs to, the PTRs of its endpoints before
    /// and after, and those of those services' cluster IPs (under `ignore_empty_service` they
    /// answer only while the service has endpoints).
    pub fn slice(&mut self, cluster: &Cluster, key: &ObjectKey, old: Option<&EndpointSlice>) {
        if self.full {
            return;
        }
        for slice in old.into_iter().chain(cluster.slices.get(key)) {
            let service = ObjectKey::new(&key.namespace, &slice.service);
            if let Some(ServiceKind::ClusterIp(ips)) = cluster.services.get(&service).map(|s| &s.kind) {
                self.addresses.extend(ips.iter().copied());
            }
            self.addresses.extend(slice.endpoints.iter().map(|e| e.address));
            self.services.insert(service);
        }
        self.before.slices.entry(key.clone()).or_insert_with(|| old.cloned());
    }

    /// Notes that the Pod `key` changed, `old` being what it was: its names before and after.
    pub fn pod(&mut self, key: &ObjectKey, old: Option<&Pod>) {
        if self.full {
            return;
        }
        self.before.pods.entry(key.clone()).or_insert_with(|| old.cloned());
    }
}

/// A Service, reduced to its DNS shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    /// ClusterIP, headless or ExternalName.
    pub kind: ServiceKind,
    /// `spec.ports`: SRV records of a ClusterIP service, with the service port.
    pub ports: Box<[ServicePort]>,
}

/// How a Service's own name answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceKind {
    /// `spec.clusterIPs` (primary first): the name answers with these (NodePort and
    /// LoadBalancer services are ClusterIP services for DNS).
    ClusterIp(Box<[IpAddr]>),
    /// `spec.clusterIP: None`: the name answers with the ready endpoints.
    Headless,
    /// `type: ExternalName`: the name is a CNAME to `spec.externalName`.
    ExternalName(Box<str>),
}

/// A named or unnamed port of a Service or an EndpointSlice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePort {
    /// `name`, lower-cased; empty for an unnamed port, which gets no `_<port>._<proto>` name.
    pub name: Box<str>,
    /// `protocol`.
    pub protocol: Protocol,
    /// `port`: the service port for a Service, the target port for an EndpointSlice.
    pub port: u16,
}

/// A port's transport protocol, the `_<proto>` label of SRV names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// TCP, the default.
    Tcp,
    /// UDP.
    Udp,
    /// SCTP.
    Sctp,
}

impl Protocol {
    /// The protocol of a Kubernetes `protocol` field; absent means TCP, an unknown value `None`.
    pub fn from_api(text: Option<&str>) -> Option<Protocol> {
        match text {
            None | Some("TCP") => Some(Protocol::Tcp),
            Some("UDP") => Some(Protocol::Udp),
            Some("SCTP") => Some(Protocol::Sctp),
            Some(_) => None,
        }
    }

    /// The SRV label, without its underscore.
    pub fn label(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Sctp => "sctp",
        }
    }
}

/// An EndpointSlice of IPv4 or IPv6 addresses, with its ready endpoints only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointSlice {
    /// The Service it belongs to (label `kubernetes.io/service-name`), in the slice's namespace.
    pub service: Box<str>,
    /// `ports`: the target ports, which SRV records of headless services carry.
    pub ports: Box<[ServicePort]>,
    /// Endpoints whose `conditions.ready` is not false, one per address.
    pub endpoints: Box<[Endpoint]>,
}

/// One ready address of a slice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The address.
    pub address: IpAddr,
    /// `hostname`, set for pods whose `spec.subdomain` names the service (StatefulSets).
    pub hostname: Option<Box<str>>,
    /// `targetRef.name` when the target is a Pod: the label under `endpoint_pod_names`.
    pub pod: Option<Box<str>>,
}

/// A running or pending Pod with an address: what verified pod records need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    /// `status.podIP`, the primary address (the only one pod names answer for).
    pub address: IpAddr,
}
