//! Where each Kubernetes DNS name lives in etcd as SkyDNS records, and what the records say: a
//! pure function of one Service and its ready endpoints, so that a watch event recomputes one
//! service's keys and nothing else.
//!
//! The SkyDNS schema answers a name with every record at or below its key, so the layout keeps
//! the records of different names apart by depth and `group` (the group of the shallowest
//! grouped record wins; docs/skydns-semantics.md, "Groups"), and puts values only on leaf keys,
//! as CoreDNS's etcd plugin requires. Under `B = /<prefix>/<domain reversed>/svc/<ns>/<svc>`:
//!
//! | key | value | answers |
//! |---|---|---|
//! | `B/_ip-<addr>` | cluster IP, first port, `targetstrip` 1, group `service` | A/AAAA and SRV of `<svc>.<ns>.svc.<domain>` |
//! | `B/_port-<port>-<proto>` | host `<svc>.<ns>.svc.<domain>`, a further port, group `service` | its SRV (an address query skips a record naming itself) |
//! | `B/_<proto>/_<name>/_ip-<addr>` | cluster IP, the port, `targetstrip` 3, group `port` | SRV and A of `_<name>._<proto>.<svc>...` |
//! | `B/_<proto>/_<name>/<label>` | host `<label>.<svc>...`, the endpoint's port, group `port` | SRV of a headless service's named port |
//! | `B/<label>/_ip-<addr>` | endpoint address, first port, `targetstrip` 1, group `endpoint` | A/AAAA and SRV of `<label>.<svc>...`; of `<svc>...` too when headless |
//! | `B/<label>/_port-<port>-<proto>` | host `<label>.<svc>...`, a further port, group `endpoint` | its SRV |
//! | `B` | host `spec.externalName` | the CNAME of an ExternalName service |
//! | `/<prefix>/arpa/in-addr/...`, `/<prefix>/arpa/ip6/...` | host: the name of the address | PTR of cluster IPs and endpoints |
//!
//! `targetstrip` takes the leaf's own labels off an SRV target, so that the target is the name
//! the specification gives (`<svc>...`, `<label>...`) while the record still carries the address.
//! Every label kube2etcd adds starts with `_`, which no endpoint label (a hostname, a pod name or
//! a dashed address) can.

use serde::Serialize;
use skyline_dataplane::snapshot::kubernetes::names::dashed;
use skyline_dataplane::snapshot::kubernetes::{ServiceKind, ServicePort, ServiceView, SCHEMA_VERSION, VERSION_TTL};
use skyline_dataplane::wire::Name;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

/// One SkyDNS record value, fields in a fixed order so that an unchanged record is the same
/// bytes and is never written again.
#[derive(Debug, Serialize)]
struct Record<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    host: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    port: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a str>,
    ttl: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    targetstrip: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<&'a str>,
}

impl Record<'_> {
    fn json(&self) -> String {
        serde_json::to_string(self).expect("a record of strings and integers serializes")
    }
}

/// Groups of the records at each depth (see the module's table).
const SERVICE: &str = "service";
const PORT: &str = "port";
const ENDPOINT: &str = "endpoint";

/// The keys and values one Service contributes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ServiceRecords {
    /// Keys under the domain, each the service's own.
    pub keys: Vec<(String, String)>,
    /// Addresses with the name their PTR gives; an address several services hold gets one PTR.
    pub pointers: Vec<(IpAddr, String)>,
}

/// The layout of one domain under one path prefix.
#[derive(Debug, Clone)]
pub struct Layout {
    /// `/<prefix>/arpa/`.
    arpa: String,
    /// `/<prefix>/<domain reversed>`.
    domain_path: String,
    /// The domain, lower case, without the final dot.
    domain: String,
    ttl: u32,
    ignore_empty_service: bool,
}

impl Layout {
    /// The layout of `domain` under `/<prefix>/`, records with `ttl` seconds, and ClusterIP
    /// services without ready endpoints left out when `ignore_empty_service`.
    pub fn new(prefix: &str, domain: &Name, ttl: u32, ignore_empty_service: bool) -> Layout {
        let domain = domain.to_string().trim_end_matches('.').to_ascii_lowercase();
        let mut domain_path = format!("/{prefix}");
        for label in domain.rsplit('.').filter(|l| !l.is_empty()) {
            domain_path.push('/');
            domain_path.push_str(label);
        }
        Layout {
            arpa: format!("/{prefix}/arpa/"),
            domain_path,
            domain,
            ttl,
            ignore_empty_service,
        }
    }

    /// `/<prefix>/<domain reversed>/svc/`: every key below it is kube2etcd's.
    pub fn services_prefix(&self) -> String {
        format!("{}/svc/", self.domain_path)
    }

    /// `/<prefix>/arpa/`: the keys below it are kube2etcd's when [`Layout::owns_pointer`] says so.
    pub fn arpa_prefix(&self) -> &str {
        &self.arpa
    }

    /// The key of `dns-version.<domain>`, the schema version's TXT record.
    pub fn version_key(&self) -> String {
        format!("{}/dns-version", self.domain_path)
    }

    /// The `dns-version` record.
    pub fn version_value(&self) -> String {
        Record {
            host: None,
            port: None,
            text: Some(SCHEMA_VERSION),
            ttl: VERSION_TTL,
            targetstrip: None,
            group: None,
        }
        .json()
    }

    /// Whether a record under `/<prefix>/arpa/` is kube2etcd's: a PTR whose target is a
    /// service name of this domain. Other PTRs there (another cluster's, an operator's) are
    /// never written over nor deleted.
    pub fn owns_pointer(&self, value: &[u8]) -> bool {
        #[derive(serde::Deserialize)]
        struct Host {
            host: Option<String>,
        }
        let Ok(Host { host: Some(host) }) = serde_json::from_slice::<Host>(value) else {
            return false;
        };
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        host.strip_suffix(&self.domain)
            .and_then(|rest| rest.strip_suffix(".svc."))
            .is_some_and(|service| !service.is_empty())
    }

    /// The key of `address`'s PTR record.
    pub fn pointer_key(&self, address: IpAddr) -> String {
        let mut key = self.arpa.clone();
        match address {
            IpAddr::V4(v4) => {
                key.push_str("in-addr");
                for octet in v4.octets() {
                    key.push('/');
                    key.push_str(&octet.to_string());
                }
            }
            IpAddr::V6(v6) => {
                key.push_str("ip6");
                for byte in v6.octets() {
                    key.push_str(&format!("/{:x}/{:x}", byte >> 4, byte & 0xf));
                }
            }
        }
        key
    }

    /// The PTR record naming `target`.
    pub fn pointer_value(&self, target: &str) -> String {
        self.host(target, None, None, None)
    }

    fn host(&self, host: &str, port: Option<u16>, targetstrip: Option<u8>, group: Option<&str>) -> String {
        Record {
            host: Some(host),
            port,
            text: None,
            ttl: self.ttl,
            targetstrip,
            group,
        }
        .json()
    }

    /// What `view`'s service contributes: nothing when its namespace is not served (the view
    /// does not exist then), when it is a ClusterIP service without ready endpoints under
    /// `ignore_empty_service`, a headless one without ready endpoints, or an ExternalName
    /// naming an address (the rules of docs/kubernetes-dns.md, "Services").
    pub fn service(&self, view: &ServiceView<'_>) -> ServiceRecords {
        let (ns, svc) = (&*view.key.namespace, &*view.key.name);
        let base = format!("{}/svc/{ns}/{svc}", self.domain_path);
        let name = format!("{svc}.{ns}.svc.{}", self.domain);
        let mut out = ServiceRecords::default();
        match &view.service.kind {
            ServiceKind::ExternalName(target) => {
                if target.parse::<IpAddr>().is_err() {
                    out.keys.push((base, self.host(target, None, None, None)));
                }
                return out;
            }
            ServiceKind::ClusterIp(ips) => {
                if self.ignore_empty_service && view.endpoints.is_empty() {
                    return out;
                }
                let ips: BTreeSet<IpAddr> = ips.iter().copied().collect();
                let ports = distinct(view.service.ports.iter());
                self.addressed(&mut out, &base, &name, &ips, &ports, SERVICE);
                for port in ports.iter().filter(|p| !p.name.is_empty()) {
                    let dir = format!("{base}/_{}/_{}", port.protocol.label(), port.name);
                    for ip in &ips {
                        let value = self.host(&ip.to_string(), Some(port.port), Some(3), Some(PORT));
                        out.keys.push((format!("{dir}/_ip-{}", dashed(*ip)), value));
                    }
                }
                out.pointers.extend(ips.iter().map(|ip| (*ip, name.clone())));
            }
            ServiceKind::Headless => {
                if view.endpoints.is_empty() {
                    return out;
                }
                let labelled = view.by_label();
                for port in view.named_slice_ports() {
                    let dir = format!("{base}/_{}/_{}", port.protocol.label(), port.name);
                    for endpoint in &labelled {
                        let own = endpoint
                            .ports
                            .iter()
                            .find(|p| p.name == port.name && p.protocol == port.protocol);
                        if let Some(own) = own {
                            let target = format!("{}.{name}", endpoint.label);
                            let value = self.host(&target, Some(own.port), None, Some(PORT));
                            out.keys.push((format!("{dir}/{}", endpoint.label), value));
                        }
                    }
                }
            }
        }
        let cluster_ips: BTreeSet<IpAddr> = match &view.service.kind {
            ServiceKind::ClusterIp(ips) => ips.iter().copied().collect(),
            _ => BTreeSet::new(),
        };
        for endpoint in view.by_label() {
            let dir = format!("{base}/{}", endpoint.label);
            let target = format!("{}.{name}", endpoint.label);
            let addresses: BTreeSet<IpAddr> = endpoint.addresses.iter().copied().collect();
            let ports = distinct(endpoint.ports.iter().copied());
            self.addressed(&mut out, &dir, &target, &addresses, &ports, ENDPOINT);
            let pointed = addresses.iter().filter(|a| !cluster_ips.contains(a));
            out.pointers.extend(pointed.map(|a| (*a, target.clone())));
        }
        out
    }

    /// The records under `dir` that make the name `name` answer `addresses` for A and AAAA and
    /// `ports` for SRV with itself as target: the addresses carry the first port, the other
    /// ports name `name` as their host.
    fn addressed(
        &self,
        out: &mut ServiceRecords,
        dir: &str,
        name: &str,
        addresses: &BTreeSet<IpAddr>,
        ports: &[&ServicePort],
        group: &str,
    ) {
        let first = ports.first().map(|p| p.port);
        for address in addresses {
            let value = self.host(&address.to_string(), first, first.map(|_| 1), Some(group));
            out.keys.push((format!("{dir}/_ip-{}", dashed(*address)), value));
        }
        for port in ports.iter().skip(1) {
            let key = format!("{dir}/_port-{}-{}", port.port, port.protocol.label());
            out.keys
                .push((key, self.host(name, Some(port.port), None, Some(group))));
        }
    }
}

/// `ports` with each (port, protocol) once, in their order.
fn distinct<'p>(ports: impl Iterator<Item = &'p ServicePort>) -> Vec<&'p ServicePort> {
    let mut seen = BTreeSet::new();
    ports.filter(|p| seen.insert((p.port, p.protocol.label()))).collect()
}

/// A 64-bit digest of `value`, so that what is already written or already wanted is compared
/// without keeping a second copy of it (a cluster of 100k endpoints makes a quarter of a million
/// keys).
pub fn digest(value: &impl std::hash::Hash) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    BuildHasherDefault::<DefaultHasher>::default().hash_one(value)
}

/// What one service contributes, as [`Desired`] keeps it: its keys (their values are in the
/// table) and PTR targets, and a digest of the whole to tell a change.
#[derive(Debug, Default)]
struct Contribution {
    keys: Vec<String>,
    pointers: Vec<(IpAddr, String)>,
    digest: u64,
}

/// Every key kube2etcd wants in etcd, kept service by service: a change to one service
/// recomputes its records and reports which keys changed.
#[derive(Debug, Default)]
pub struct Desired {
    /// Key to value, over everything kube2etcd owns.
    values: BTreeMap<String, String>,
    services: BTreeMap<(Box<str>, Box<str>), Contribution>,
    /// Address to the names pointing at it, with how many services give each.
    pointers: BTreeMap<IpAddr, BTreeMap<String, usize>>,
}

impl Desired {
    /// The wanted value of `key`, if any.
    pub fn get(&self, key: &str) -> Option<&String> {
        self.values.get(key)
    }

    /// The services that contribute keys, by namespace and name.
    pub fn services(&self) -> impl Iterator<Item = &(Box<str>, Box<str>)> {
        self.services.keys()
    }

    /// Every wanted key.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.values.keys()
    }

    /// How many keys are wanted.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether no key is wanted.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Sets a key that belongs to no service (`dns-version`).
    pub fn set_fixed(&mut self, key: String, value: String, changed: &mut BTreeSet<String>) {
        if self.values.get(&key) != Some(&value) {
            changed.insert(key.clone());
            self.values.insert(key, value);
        }
    }

    /// Replaces what the service `id` contributes with `records` (nothing: the service is gone
    /// or does not answer), adding every key whose wanted value changed to `changed`.
    pub fn set_service(
        &mut self,
        layout: &Layout,
        id: (Box<str>, Box<str>),
        records: ServiceRecords,
        changed: &mut BTreeSet<String>,
    ) {
        let new_digest = digest(&(&records.keys, &records.pointers));
        let old = self.services.remove(&id).unwrap_or_default();
        let empty = records.keys.is_empty() && records.pointers.is_empty();
        let held = !old.keys.is_empty() || !old.pointers.is_empty();
        if held && old.digest == new_digest {
            self.services.insert(id, old);
            return;
        }
        let kept: BTreeSet<&String> = records.keys.iter().map(|(key, _)| key).collect();
        for key in &old.keys {
            if !kept.contains(key) && self.values.remove(key).is_some() {
                changed.insert(key.clone());
            }
        }
        for (key, value) in &records.keys {
            if self.values.get(key) != Some(value) {
                changed.insert(key.clone());
                self.values.insert(key.clone(), value.clone());
            }
        }
        let mut touched = BTreeSet::new();
        for (address, target) in old.pointers {
            if let Some(targets) = self.pointers.get_mut(&address) {
                if let Some(count) = targets.get_mut(&target) {
                    *count -= 1;
                    if *count == 0 {
                        targets.remove(&target);
                    }
                }
                if targets.is_empty() {
                    self.pointers.remove(&address);
                }
            }
            touched.insert(address);
        }
        for (address, target) in &records.pointers {
            *self
                .pointers
                .entry(*address)
                .or_default()
                .entry(target.clone())
                .or_default() += 1;
            touched.insert(*address);
        }
        if !empty {
            let contribution = Contribution {
                keys: records.keys.into_iter().map(|(key, _)| key).collect(),
                pointers: records.pointers,
                digest: new_digest,
            };
            self.services.insert(id, contribution);
        }
        for address in touched {
            let key = layout.pointer_key(address);
            let wanted = self
                .pointers
                .get(&address)
                .and_then(|targets| targets.keys().next())
                .map(|target| layout.pointer_value(target));
            let held = self.values.get(&key);
            if held == wanted.as_ref() {
                continue;
            }
            changed.insert(key.clone());
            match wanted {
                Some(value) => self.values.insert(key, value),
                None => self.values.remove(&key),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skyline_dataplane::snapshot::kubernetes::{
        service_views, Cluster, Config, Endpoint, EndpointSlice, ObjectKey, Protocol, Service,
    };

    fn port(name: &str, protocol: Protocol, port: u16) -> ServicePort {
        ServicePort {
            name: name.into(),
            protocol,
            port,
        }
    }

    fn endpoint(address: &str, hostname: Option<&str>) -> Endpoint {
        Endpoint {
            address: address.parse().unwrap(),
            hostname: hostname.map(Into::into),
            pod: None,
        }
    }

    fn layout() -> Layout {
        Layout::new("skydns", &Name::from_dotted("cluster.local.").unwrap(), 5, false)
    }

    fn cluster() -> Cluster {
        let mut c = Cluster::default();
        c.namespaces.insert("ns".into());
        c.services.insert(
            ObjectKey::new("ns", "web"),
            Service {
                kind: ServiceKind::ClusterIp(["10.96.0.10".parse().unwrap()].into()),
                ports: [port("http", Protocol::Tcp, 80), port("", Protocol::Udp, 53)].into(),
            },
        );
        c.services.insert(
            ObjectKey::new("ns", "db"),
            Service {
                kind: ServiceKind::Headless,
                ports: [port("pg", Protocol::Tcp, 5432)].into(),
            },
        );
        c.slices.insert(
            ObjectKey::new("ns", "db-1"),
            EndpointSlice {
                service: "db".into(),
                ports: [port("pg", Protocol::Tcp, 6432)].into(),
                endpoints: [endpoint("10.1.0.1", Some("db-0")), endpoint("10.1.0.2", None)].into(),
            },
        );
        c.slices.insert(
            ObjectKey::new("ns", "web-1"),
            EndpointSlice {
                service: "web".into(),
                ports: [port("http", Protocol::Tcp, 8080)].into(),
                endpoints: [endpoint("10.1.0.3", None)].into(),
            },
        );
        c
    }

    fn records(cluster: &Cluster, ns: &str, name: &str) -> ServiceRecords {
        let views = service_views(&Config::default(), cluster, None);
        let view = views
            .iter()
            .find(|v| &*v.key.namespace == ns && &*v.key.name == name)
            .unwrap();
        layout().service(view)
    }

    fn keys(records: &ServiceRecords) -> Vec<(&str, &str)> {
        records.keys.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
    }

    #[test]
    fn a_cluster_ip_service_is_laid_out_by_depth_and_group() {
        let r = records(&cluster(), "ns", "web");
        let b = "/skydns/local/cluster/svc/ns/web";
        assert_eq!(
            keys(&r),
            [
                (
                    &*format!("{b}/_ip-10-96-0-10"),
                    r#"{"host":"10.96.0.10","port":80,"ttl":5,"targetstrip":1,"group":"service"}"#
                ),
                (
                    &*format!("{b}/_port-53-udp"),
                    r#"{"host":"web.ns.svc.cluster.local","port":53,"ttl":5,"group":"service"}"#
                ),
                (
                    &*format!("{b}/_tcp/_http/_ip-10-96-0-10"),
                    r#"{"host":"10.96.0.10","port":80,"ttl":5,"targetstrip":3,"group":"port"}"#
                ),
                (
                    &*format!("{b}/10-1-0-3/_ip-10-1-0-3"),
                    r#"{"host":"10.1.0.3","port":8080,"ttl":5,"targetstrip":1,"group":"endpoint"}"#
                ),
            ]
        );
        let pointers: Vec<(String, &str)> = r.pointers.iter().map(|(a, t)| (a.to_string(), t.as_str())).collect();
        assert_eq!(
            pointers,
            [
                ("10.96.0.10".to_owned(), "web.ns.svc.cluster.local"),
                ("10.1.0.3".to_owned(), "10-1-0-3.web.ns.svc.cluster.local")
            ]
        );
    }

    #[test]
    fn a_headless_service_names_its_endpoints_and_their_ports() {
        let r = records(&cluster(), "ns", "db");
        let b = "/skydns/local/cluster/svc/ns/db";
        assert_eq!(
            keys(&r),
            [
                (
                    &*format!("{b}/_tcp/_pg/10-1-0-2"),
                    r#"{"host":"10-1-0-2.db.ns.svc.cluster.local","port":6432,"ttl":5,"group":"port"}"#
                ),
                (
                    &*format!("{b}/_tcp/_pg/db-0"),
                    r#"{"host":"db-0.db.ns.svc.cluster.local","port":6432,"ttl":5,"group":"port"}"#
                ),
                (
                    &*format!("{b}/10-1-0-2/_ip-10-1-0-2"),
                    r#"{"host":"10.1.0.2","port":6432,"ttl":5,"targetstrip":1,"group":"endpoint"}"#
                ),
                (
                    &*format!("{b}/db-0/_ip-10-1-0-1"),
                    r#"{"host":"10.1.0.1","port":6432,"ttl":5,"targetstrip":1,"group":"endpoint"}"#
                ),
            ]
        );
    }

    #[test]
    fn services_that_do_not_answer_contribute_nothing() {
        let mut c = cluster();
        c.slices.clear();
        assert_eq!(
            records(&c, "ns", "db"),
            ServiceRecords::default(),
            "headless without endpoints"
        );
        c.services.insert(
            ObjectKey::new("ns", "ext"),
            Service {
                kind: ServiceKind::ExternalName("192.0.2.1".into()),
                ports: Box::new([]),
            },
        );
        assert_eq!(
            records(&c, "ns", "ext"),
            ServiceRecords::default(),
            "ExternalName of an address"
        );
        let views = service_views(&Config::default(), &c, None);
        let web = views.iter().find(|v| &*v.key.name == "web").unwrap();
        let strict = Layout::new("skydns", &Name::from_dotted("cluster.local.").unwrap(), 5, true);
        assert_eq!(strict.service(web), ServiceRecords::default(), "ignore_empty_service");
    }

    #[test]
    fn pointers_are_arpa_keys_and_owned_only_when_they_name_a_service_of_the_domain() {
        let l = layout();
        assert_eq!(
            l.pointer_key("10.96.0.10".parse().unwrap()),
            "/skydns/arpa/in-addr/10/96/0/10"
        );
        let v6 = l.pointer_key("fd00::1".parse().unwrap());
        assert!(v6.starts_with("/skydns/arpa/ip6/f/d/0/0/0/0/"), "{v6}");
        assert!(v6.ends_with("/0/0/0/1") && v6.matches('/').count() == 35, "{v6}");
        assert!(l.owns_pointer(br#"{"host":"web.ns.svc.cluster.local"}"#));
        assert!(l.owns_pointer(br#"{"host":"Web.NS.svc.cluster.local."}"#));
        assert!(!l.owns_pointer(br#"{"host":"web.ns.svc.other.local"}"#));
        assert!(!l.owns_pointer(br#"{"host":"svc.cluster.local"}"#));
        assert!(!l.owns_pointer(br#"{"host":"mail.example.org"}"#));
        assert!(!l.owns_pointer(b"not json"));
    }

    #[test]
    fn a_change_reports_only_the_keys_it_changes_and_shared_addresses_keep_one_pointer() {
        let l = layout();
        let mut desired = Desired::default();
        let mut changed = BTreeSet::new();
        let c = cluster();
        for view in service_views(&Config::default(), &c, None) {
            let id = (view.key.namespace.clone(), view.key.name.clone());
            desired.set_service(&l, id, l.service(&view), &mut changed);
        }
        assert_eq!(changed.len(), desired.len());
        assert_eq!(
            desired.len(),
            4 + 4 + 4,
            "web, db, and a PTR for each of their 4 addresses"
        );

        // One endpoint of `db` changes address: its two keys under db-0, the port key's value
        // stays, and two PTRs change.
        let mut c2 = c.clone();
        c2.slices.get_mut(&ObjectKey::new("ns", "db-1")).unwrap().endpoints =
            [endpoint("10.1.0.9", Some("db-0")), endpoint("10.1.0.2", None)].into();
        let views = service_views(&Config::default(), &c2, None);
        let db = views.iter().find(|v| &*v.key.name == "db").unwrap();
        let mut changed = BTreeSet::new();
        desired.set_service(&l, ("ns".into(), "db".into()), l.service(db), &mut changed);
        let changed: Vec<&str> = changed.iter().map(String::as_str).collect();
        assert_eq!(
            changed,
            [
                "/skydns/arpa/in-addr/10/1/0/1",
                "/skydns/arpa/in-addr/10/1/0/9",
                "/skydns/local/cluster/svc/ns/db/db-0/_ip-10-1-0-1",
                "/skydns/local/cluster/svc/ns/db/db-0/_ip-10-1-0-9",
            ]
        );
        assert!(desired.get("/skydns/arpa/in-addr/10/1/0/1").is_none());

        // A second service selecting the same address: the PTR keeps naming the first target
        // in order, and moves to the other when that one goes.
        let extra = ServiceRecords {
            keys: Vec::new(),
            pointers: vec![("10.1.0.2".parse().unwrap(), "a.ns.svc.cluster.local".into())],
        };
        let ptr = "/skydns/arpa/in-addr/10/1/0/2";
        let mut changed = BTreeSet::new();
        desired.set_service(&l, ("ns".into(), "a".into()), extra, &mut changed);
        assert!(changed.is_empty(), "{changed:?}");
        assert_eq!(
            desired.get(ptr).unwrap(),
            r#"{"host":"10-1-0-2.db.ns.svc.cluster.local","ttl":5}"#
        );
        desired.set_service(&l, ("ns".into(), "db".into()), ServiceRecords::default(), &mut changed);
        assert_eq!(
            desired.get(ptr).unwrap(),
            r#"{"host":"a.ns.svc.cluster.local","ttl":5}"#
        );
        assert_eq!(desired.len(), 4 + 2 + 1, "web's keys and PTRs, and the PTR `a` keeps");
    }
}
