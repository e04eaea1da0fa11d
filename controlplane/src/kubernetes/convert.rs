//! API objects reduced to what DNS needs ([`skyline_dataplane::snapshot::kubernetes`]'s model),
//! as CoreDNS's informers transform them: everything else of an object is dropped as soon as it
//! is decoded, so the mirror of a large cluster stays small.

use k8s_openapi::api::core::v1::{Pod, Service, ServicePort as ApiServicePort};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use skyline_dataplane::snapshot::kubernetes as model;
use std::net::IpAddr;
use std::time::SystemTime;

/// The label naming the Service an EndpointSlice belongs to.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// The field selector of the Pod watch: pods that are over or unknown never answer.
pub const POD_FIELDS: &str = "status.phase!=Succeeded,status.phase!=Failed,status.phase!=Unknown";

/// The namespace and name of an object; `None` when it has no name.
pub fn key(meta: &ObjectMeta) -> Option<model::ObjectKey> {
    let name = meta.name.as_deref().filter(|n| !n.is_empty())?;
    Some(model::ObjectKey::new(meta.namespace.as_deref().unwrap_or(""), name))
}

/// A Namespace's name.
pub fn namespace(meta: &ObjectMeta) -> Option<Box<str>> {
    meta.name.as_deref().filter(|n| !n.is_empty()).map(Into::into)
}

/// A Service's DNS shape; `None` when it cannot answer (an ExternalName without a name, a
/// ClusterIP service whose address is not allocated).
pub fn service(service: &Service) -> Option<model::Service> {
    let spec = service.spec.as_ref()?;
    let ports: Box<[model::ServicePort]> = spec
        .ports
        .iter()
        .flatten()
        .filter_map(|p: &ApiServicePort| port(p.name.as_deref(), p.protocol.as_deref(), Some(p.port)))
        .collect();
    let kind = if spec.type_.as_deref() == Some("ExternalName") {
        let target = spec.external_name.as_deref().filter(|n| !n.is_empty())?;
        model::ServiceKind::ExternalName(target.trim_end_matches('.').into())
    } else if spec.cluster_ip.as_deref() == Some("None") {
        model::ServiceKind::Headless
    } else {
        let listed = spec.cluster_ips.iter().flatten();
        let single = spec.cluster_ip.iter();
        let mut ips: Vec<IpAddr> = listed.filter_map(|ip| ip.parse().ok()).collect();
        if ips.is_empty() {
            ips = single.filter_map(|ip| ip.parse().ok()).collect();
        }
        if ips.is_empty() {
            return None;
        }
        model::ServiceKind::ClusterIp(ips.into())
    };
    Some(model::Service { kind, ports })
}

fn port(name: Option<&str>, protocol: Option<&str>, number: Option<i32>) -> Option<model::ServicePort> {
    Some(model::ServicePort {
        name: name.unwrap_or("").to_ascii_lowercase().into(),
        protocol: model::Protocol::from_api(protocol)?,
        port: u16::try_from(number?).ok()?,
    })
}

/// An EndpointSlice's ready addresses; `None` for a slice DNS does not read: one of FQDNs, or
/// without the label naming its Service. The endpoints' pod names are kept only with
/// `pod_names` (`endpoint_pod_names`, the one option that reads them): at 100k endpoints they
/// are megabytes of the mirror.
pub fn slice(slice: &EndpointSlice, pod_names: bool) -> Option<model::EndpointSlice> {
    let v6 = match slice.address_type.as_str() {
        "IPv4" => false,
        "IPv6" => true,
        _ => return None,
    };
    let service = slice.metadata.labels.as_ref()?.get(SERVICE_NAME_LABEL)?;
    let ports = slice
        .ports
        .iter()
        .flatten()
        .filter_map(|p| port(p.name.as_deref(), p.protocol.as_deref(), p.port))
        .collect();
    let mut endpoints = Vec::with_capacity(slice.endpoints.len());
    for endpoint in &slice.endpoints {
        // An unknown readiness counts as ready (EndpointConditions API documentation).
        if endpoint.conditions.as_ref().and_then(|c| c.ready) == Some(false) {
            continue;
        }
        let pod = endpoint
            .target_ref
            .as_ref()
            .filter(|t| pod_names && t.kind.as_deref() == Some("Pod"))
            .and_then(|t| t.name.as_deref())
            .map(Into::into);
        for address in &endpoint.addresses {
            let Ok(address) = address.parse::<IpAddr>() else {
                continue;
            };
            if address.is_ipv6() != v6 {
                continue;
            }
            endpoints.push(model::Endpoint {
                address,
                hostname: endpoint.hostname.as_deref().filter(|h| !h.is_empty()).map(Into::into),
                pod: pod.clone(),
            });
        }
    }
    Some(model::EndpointSlice {
        service: service.as_str().into(),
        ports,
        endpoints: endpoints.into(),
    })
}

/// The annotation in which the endpoints controller records when the change an EndpointSlice
/// carries happened (a pod became ready, a Service changed).
const LAST_CHANGE_TRIGGER_TIME: &str = "endpoints.kubernetes.io/last-change-trigger-time";

/// When the change an EndpointSlice carries happened, as its controller records it; `None`
/// without the annotation (a selectorless Service's slices, the initial state) or when it is
/// not an RFC 3339 time.
pub fn last_change_trigger(slice: &EndpointSlice) -> Option<SystemTime> {
    let stamp = slice.metadata.annotations.as_ref()?.get(LAST_CHANGE_TRIGGER_TIME)?;
    let at: k8s_openapi::jiff::Timestamp = stamp.parse().ok()?;
    Some(SystemTime::from(at))
}

/// A Pod's primary address; `None` for a pod without one, terminating, or over.
pub fn pod(pod: &Pod) -> Option<model::Pod> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let status = pod.status.as_ref()?;
    if matches!(status.phase.as_deref(), Some("Succeeded" | "Failed" | "Unknown")) {
        return None;
    }
    let address = status.pod_ip.as_deref()?.parse().ok()?;
    Some(model::Pod { address })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode<T: serde::de::DeserializeOwned>(json: &str) -> T {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn services_keep_their_dns_shape() {
        let svc: Service = decode(
            r#"{"metadata":{"name":"web","namespace":"ns"},
                "spec":{"type":"ClusterIP","clusterIP":"10.0.0.1","clusterIPs":["10.0.0.1","fd00::1"],
                        "ports":[{"name":"HTTP","port":80},{"port":53,"protocol":"UDP"},{"port":99,"protocol":"XTP"}]}}"#,
        );
        let s = service(&svc).unwrap();
        assert_eq!(
            s.kind,
            model::ServiceKind::ClusterIp(vec!["10.0.0.1".parse().unwrap(), "fd00::1".parse().unwrap()].into())
        );
        assert_eq!(&*s.ports[0].name, "http");
        assert_eq!(s.ports[1].protocol, model::Protocol::Udp);
        assert_eq!(s.ports.len(), 2, "an unknown protocol is dropped");
        assert_eq!(key(&svc.metadata), Some(model::ObjectKey::new("ns", "web")));

        let headless: Service = decode(r#"{"metadata":{"name":"h"},"spec":{"clusterIP":"None"}}"#);
        assert_eq!(service(&headless).unwrap().kind, model::ServiceKind::Headless);
        let external: Service =
            decode(r#"{"metadata":{"name":"e"},"spec":{"type":"ExternalName","externalName":"example.net."}}"#);
        assert_eq!(
            service(&external).unwrap().kind,
            model::ServiceKind::ExternalName("example.net".into())
        );
        let pending: Service = decode(r#"{"metadata":{"name":"p"},"spec":{"type":"ClusterIP"}}"#);
        assert_eq!(service(&pending), None);
    }

    #[test]
    fn slices_keep_ready_addresses_of_their_family() {
        let s: EndpointSlice = decode(
            r#"{"metadata":{"name":"web-abc","namespace":"ns","labels":{"kubernetes.io/service-name":"web"}},
                "addressType":"IPv4",
                "ports":[{"name":"http","port":8080,"protocol":"TCP"}],
                "endpoints":[
                  {"addresses":["10.1.0.1"],"conditions":{"ready":true},"hostname":"web-0",
                   "targetRef":{"kind":"Pod","name":"web-0","namespace":"ns"}},
                  {"addresses":["10.1.0.2"],"conditions":{"ready":false}},
                  {"addresses":["10.1.0.3"]},
                  {"addresses":["fd00::9"]}]}"#,
        );
        let slice = super::slice(&s, true).unwrap();
        assert_eq!(&*slice.service, "web");
        assert_eq!(slice.ports[0].port, 8080);
        let addresses: Vec<String> = slice.endpoints.iter().map(|e| e.address.to_string()).collect();
        assert_eq!(addresses, ["10.1.0.1", "10.1.0.3"]);
        assert_eq!(slice.endpoints[0].hostname.as_deref(), Some("web-0"));
        assert_eq!(slice.endpoints[0].pod.as_deref(), Some("web-0"));
        let without_pod_names = super::slice(&s, false).unwrap();
        assert_eq!(
            without_pod_names.endpoints[0].pod, None,
            "pod names only for endpoint_pod_names"
        );
        assert_eq!(without_pod_names.endpoints[0].hostname.as_deref(), Some("web-0"));

        let fqdn: EndpointSlice = decode(
            r#"{"metadata":{"name":"f","labels":{"kubernetes.io/service-name":"web"}},"addressType":"FQDN","endpoints":[]}"#,
        );
        assert!(super::slice(&fqdn, true).is_none());
        let orphan: EndpointSlice = decode(r#"{"metadata":{"name":"o"},"addressType":"IPv4","endpoints":[]}"#);
        assert!(super::slice(&orphan, true).is_none());
    }

    #[test]
    fn a_slices_trigger_time_is_read_from_the_endpoints_controllers_annotation() {
        let s: EndpointSlice = decode(
            r#"{"metadata":{"name":"web-abc","annotations":{"endpoints.kubernetes.io/last-change-trigger-time":"2024-05-01T12:00:00.5Z"}},
                "addressType":"IPv4","endpoints":[]}"#,
        );
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_714_564_800_500);
        assert_eq!(last_change_trigger(&s), Some(at));
        let bad: EndpointSlice = decode(
            r#"{"metadata":{"name":"b","annotations":{"endpoints.kubernetes.io/last-change-trigger-time":"yesterday"}},
                "addressType":"IPv4","endpoints":[]}"#,
        );
        assert_eq!(last_change_trigger(&bad), None);
        let none: EndpointSlice = decode(r#"{"metadata":{"name":"n"},"addressType":"IPv4","endpoints":[]}"#);
        assert_eq!(last_change_trigger(&none), None);
    }

    #[test]
    fn pods_answer_only_while_alive_with_an_address() {
        let running: Pod = decode(r#"{"metadata":{"name":"p"},"status":{"phase":"Running","podIP":"10.2.0.1"}}"#);
        assert_eq!(pod(&running).unwrap().address.to_string(), "10.2.0.1");
        for json in [
            r#"{"metadata":{"name":"p","deletionTimestamp":"2024-01-01T00:00:00Z"},"status":{"podIP":"10.2.0.1"}}"#,
            r#"{"metadata":{"name":"p"},"status":{"phase":"Succeeded","podIP":"10.2.0.1"}}"#,
            r#"{"metadata":{"name":"p"},"status":{"phase":"Pending"}}"#,
        ] {
            assert_eq!(pod(&decode(json)), None, "{json}");
        }
    }
}
