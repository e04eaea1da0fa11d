//! The Kubernetes source's data as persisted: the mirror's objects in the form DNS reads them
//! (the model of [`skyline_dataplane::snapshot::kubernetes`]), no API object in full. The model
//! types carry no serde, so the file has its own types here, moved from and into the model's.

use serde::{Deserialize, Serialize};
use skyline_dataplane::snapshot::kubernetes::{
    Cluster, Endpoint, EndpointSlice, ObjectKey, Pod, Protocol, Service, ServiceKind, ServicePort,
};
use skyline_dataplane::wire::Name;
use std::net::IpAddr;

/// What names a Kubernetes source's data: another API server (another cluster) or other zones
/// make another source, so its file is foreign.
pub(crate) fn identity(api_server: &str, zones: &[Name]) -> String {
    let zones: Vec<String> = zones.iter().map(ToString::to_string).collect();
    format!("api-server={api_server} zones={}", zones.join(","))
}

/// The cluster as written.
#[derive(Debug, Serialize, Deserialize)]
struct Data {
    namespaces: Vec<Box<str>>,
    services: Vec<(Key, ServiceData)>,
    slices: Vec<(Key, SliceData)>,
    pods: Vec<(Key, IpAddr)>,
}

/// An object's namespace and name.
#[derive(Debug, Serialize, Deserialize)]
struct Key(Box<str>, Box<str>);

#[derive(Debug, Serialize, Deserialize)]
struct ServiceData {
    kind: KindData,
    ports: Vec<PortData>,
}

#[derive(Debug, Serialize, Deserialize)]
enum KindData {
    ClusterIp(Vec<IpAddr>),
    Headless,
    ExternalName(Box<str>),
}

#[derive(Debug, Serialize, Deserialize)]
struct PortData {
    name: Box<str>,
    protocol: ProtocolData,
    port: u16,
}

#[derive(Debug, Serialize, Deserialize)]
enum ProtocolData {
    Tcp,
    Udp,
    Sctp,
}

#[derive(Debug, Serialize, Deserialize)]
struct SliceData {
    service: Box<str>,
    ports: Vec<PortData>,
    endpoints: Vec<EndpointData>,
}

#[derive(Debug, Serialize, Deserialize)]
struct EndpointData {
    address: IpAddr,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hostname: Option<Box<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pod: Option<Box<str>>,
}

/// The file data of `cluster`, taken whole (a copy made for the write) so that its strings
/// move into the file's form rather than being copied again.
pub(crate) fn encode(cluster: Cluster) -> Result<Vec<u8>, serde_json::Error> {
    let data = Data {
        namespaces: cluster.namespaces.into_iter().collect(),
        services: cluster
            .services
            .into_iter()
            .map(|(key, service)| (Key::from(key), ServiceData::from(service)))
            .collect(),
        slices: cluster
            .slices
            .into_iter()
            .map(|(key, slice)| (Key::from(key), SliceData::from(slice)))
            .collect(),
        pods: cluster
            .pods
            .into_iter()
            .map(|(key, pod)| (Key::from(key), pod.address))
            .collect(),
    };
    serde_json::to_vec(&data)
}

/// The cluster in a file's data.
pub(crate) fn decode(bytes: &[u8]) -> Result<Cluster, serde_json::Error> {
    let data: Data = serde_json::from_slice(bytes)?;
    let mut cluster = Cluster::default();
    cluster.namespaces.extend(data.namespaces);
    cluster
        .services
        .extend(data.services.into_iter().map(|(key, s)| (key.into(), s.into())));
    cluster
        .slices
        .extend(data.slices.into_iter().map(|(key, s)| (key.into(), s.into())));
    cluster.pods.extend(
        data.pods
            .into_iter()
            .map(|(key, address)| (key.into(), Pod { address })),
    );
    Ok(cluster)
}

impl From<ObjectKey> for Key {
    fn from(key: ObjectKey) -> Key {
        Key(key.namespace, key.name)
    }
}

impl From<Key> for ObjectKey {
    fn from(Key(namespace, name): Key) -> ObjectKey {
        ObjectKey { namespace, name }
    }
}

impl From<Service> for ServiceData {
    fn from(service: Service) -> ServiceData {
        ServiceData {
            kind: match service.kind {
                ServiceKind::ClusterIp(ips) => KindData::ClusterIp(ips.into_vec()),
                ServiceKind::Headless => KindData::Headless,
                ServiceKind::ExternalName(target) => KindData::ExternalName(target),
            },
            ports: service.ports.into_vec().into_iter().map(PortData::from).collect(),
        }
    }
}

impl From<ServiceData> for Service {
    fn from(data: ServiceData) -> Service {
        Service {
            kind: match data.kind {
                KindData::ClusterIp(ips) => ServiceKind::ClusterIp(ips.into()),
                KindData::Headless => ServiceKind::Headless,
                KindData::ExternalName(target) => ServiceKind::ExternalName(target),
            },
            ports: data.ports.into_iter().map(ServicePort::from).collect(),
        }
    }
}

impl From<ServicePort> for PortData {
    fn from(port: ServicePort) -> PortData {
        PortData {
            name: port.name,
            protocol: match port.protocol {
                Protocol::Tcp => ProtocolData::Tcp,
                Protocol::Udp => ProtocolData::Udp,
                Protocol::Sctp => ProtocolData::Sctp,
            },
            port: port.port,
        }
    }
}

impl From<PortData> for ServicePort {
    fn from(data: PortData) -> ServicePort {
        ServicePort {
            name: data.name,
            protocol: match data.protocol {
                ProtocolData::Tcp => Protocol::Tcp,
                ProtocolData::Udp => Protocol::Udp,
                ProtocolData::Sctp => Protocol::Sctp,
            },
            port: data.port,
        }
    }
}

impl From<EndpointSlice> for SliceData {
    fn from(slice: EndpointSlice) -> SliceData {
        SliceData {
            service: slice.service,
            ports: slice.ports.into_vec().into_iter().map(PortData::from).collect(),
            endpoints: slice
                .endpoints
                .into_vec()
                .into_iter()
                .map(|e| EndpointData {
                    address: e.address,
                    hostname: e.hostname,
                    pod: e.pod,
                })
                .collect(),
        }
    }
}

impl From<SliceData> for EndpointSlice {
    fn from(data: SliceData) -> EndpointSlice {
        EndpointSlice {
            service: data.service,
            ports: data.ports.into_iter().map(ServicePort::from).collect(),
            endpoints: data
                .endpoints
                .into_iter()
                .map(|e| Endpoint {
                    address: e.address,
                    hostname: e.hostname,
                    pod: e.pod,
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster() -> Cluster {
        let mut cluster = Cluster::default();
        cluster.namespaces.extend(["default".into(), "testns".into()]);
        let port = |name: &str, protocol, port| ServicePort {
            name: name.into(),
            protocol,
            port,
        };
        cluster.services.insert(
            ObjectKey::new("testns", "svc1"),
            Service {
                kind: ServiceKind::ClusterIp(["10.96.1.1".parse().unwrap(), "fd00::1".parse().unwrap()].into()),
                ports: [port("http", Protocol::Tcp, 80), port("", Protocol::Udp, 53)].into(),
            },
        );
        cluster.services.insert(
            ObjectKey::new("testns", "headless"),
            Service {
                kind: ServiceKind::Headless,
                ports: [port("sctp", Protocol::Sctp, 9)].into(),
            },
        );
        cluster.services.insert(
            ObjectKey::new("testns", "ext"),
            Service {
                kind: ServiceKind::ExternalName("example.org".into()),
                ports: Box::default(),
            },
        );
        cluster.slices.insert(
            ObjectKey::new("testns", "headless-abc"),
            EndpointSlice {
                service: "headless".into(),
                ports: [port("sctp", Protocol::Sctp, 9)].into(),
                endpoints: [
                    Endpoint {
                        address: "10.1.0.1".parse().unwrap(),
                        hostname: Some("web-0".into()),
                        pod: Some("web-0".into()),
                    },
                    Endpoint {
                        address: "10.1.0.2".parse().unwrap(),
                        hostname: None,
                        pod: None,
                    },
                ]
                .into(),
            },
        );
        cluster.pods.insert(
            ObjectKey::new("testns", "web-0"),
            Pod {
                address: "10.1.0.1".parse().unwrap(),
            },
        );
        cluster
    }

    #[test]
    fn a_cluster_reads_back_as_written() {
        let written = cluster();
        let read = decode(&encode(written.clone()).unwrap()).unwrap();
        assert_eq!(read.namespaces, written.namespaces);
        assert_eq!(read.services, written.services);
        assert_eq!(read.slices, written.slices);
        assert_eq!(read.pods, written.pods);
    }

    #[test]
    fn the_identity_is_the_api_server_and_the_zones() {
        let zones = [Name::from_dotted("cluster.local.").unwrap()];
        assert_eq!(
            identity("https://10.0.0.1:6443/", &zones),
            "api-server=https://10.0.0.1:6443/ zones=cluster.local."
        );
    }
}
