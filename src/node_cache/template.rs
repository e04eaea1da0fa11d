//! The node-local-dns ConfigMap's Corefile template filled as node-cache fills it: the
//! `__PILLAR__` placeholders replaced, the kube-dns ConfigMap's upstream nameservers put in for
//! the node's resolv.conf, and one server block appended per stub domain. What comes out is a
//! plain Corefile, which `skyline --corefile` runs.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

/// The cluster IP of the `-upstreamsvc` Service: the cluster's own DNS, behind the cache.
pub const CLUSTER_DNS: &str = "__PILLAR__CLUSTER__DNS__";
/// The upstreams of names outside the cluster.
pub const UPSTREAM_SERVERS: &str = "__PILLAR__UPSTREAM__SERVERS__";
/// The `-localip` addresses, separated by spaces.
pub const LOCAL_DNS: &str = "__PILLAR__LOCAL__DNS__";
/// node-cache empties it: `__PILLAR__LOCAL__DNS__` already holds every local address.
pub const DNS_SERVER: &str = "__PILLAR__DNS__SERVER__";

/// The template's `.` block forwarding over TCP, as node-cache's own template writes it: with
/// upstream nameservers from the kube-dns ConfigMap node-cache forwards to them over UDP, and
/// rewrites exactly this text to say so.
const UPSTREAM_TCP_BLOCK: &str = "\n    forward . __PILLAR__UPSTREAM__SERVERS__ {\n            force_tcp\n    }\n";
/// What [`UPSTREAM_TCP_BLOCK`] becomes.
const UPSTREAM_UDP_BLOCK: &str = "\n    forward . __PILLAR__UPSTREAM__SERVERS__\n";
/// The cache TTL of a stub domain's block, node-cache's.
const STUB_DOMAIN_CACHE_TTL: u32 = 30;

/// Why the template cannot be filled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
    /// The template cannot be read.
    #[error("base Corefile {path}: {source}")]
    Read {
        /// `-basecorefile`.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A placeholder node-cache does not fill is left: the installation fills it (`sed`, as
    /// the upstream instructions do), and CoreDNS would fail on it as well.
    #[error(
        "the base Corefile still holds {0} after node-cache's placeholders are filled: \
         fill it when installing (the nodelocaldns.yaml instructions replace it with sed)"
    )]
    Unfilled(String),
    /// The template uses `__PILLAR__CLUSTER__DNS__` and the Service's IP is not known.
    #[error(
        "the base Corefile uses {CLUSTER_DNS} and the cluster IP of Service {service:?} is unknown: \
         {variable} is not set (Kubernetes sets it in pods started after the Service, in its \
         namespace) and the API server did not give it: {why}"
    )]
    NoClusterIp {
        /// `-upstreamsvc`.
        service: String,
        /// The environment variable Kubernetes injects for it.
        variable: String,
        /// Why the API server did not give it.
        why: String,
    },
}

/// The kube-dns ConfigMap's settings node-cache follows, as read from its mounted directory
/// (one file per key, JSON values).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KubeDnsConfig {
    /// `stubDomains`: a domain's own nameservers, `IP` or `IP:PORT`.
    pub stub_domains: BTreeMap<String, Vec<String>>,
    /// `upstreamNameservers`: the nameservers of every other name, instead of resolv.conf.
    pub upstream_nameservers: Vec<String>,
}

/// Why the kube-dns ConfigMap is not taken; the Corefile stays as it was, as in node-cache.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KubeDnsConfigError {
    /// A key's file cannot be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A key's value is not the JSON kube-dns takes.
    #[error("{path}: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
    /// A nameserver that is not an IP address with an optional port, which kube-dns refuses.
    #[error("{key}: {value:?} is not an IP address or IP:PORT")]
    Nameserver {
        /// `stubDomains` or `upstreamNameservers`.
        key: &'static str,
        /// The value.
        value: String,
    },
    /// A stub domain that is not a domain name.
    #[error("stubDomains: {0:?} is not a domain name")]
    Domain(String),
}

impl KubeDnsConfig {
    /// Reads the ConfigMap mounted at `dir`; a key without its file is empty (the ConfigMap
    /// may hold either, or be absent: `optional: true` in the manifest).
    pub fn read(dir: &Path) -> Result<KubeDnsConfig, KubeDnsConfigError> {
        let read = |key: &str| -> Result<Option<(PathBuf, String)>, KubeDnsConfigError> {
            let path = dir.join(key);
            match std::fs::read_to_string(&path) {
                Ok(text) if text.trim().is_empty() => Ok(None),
                Ok(text) => Ok(Some((path, text))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(source) => Err(KubeDnsConfigError::Read { path, source }),
            }
        };
        let json = |path: PathBuf, source| KubeDnsConfigError::Json { path, source };
        let mut config = KubeDnsConfig::default();
        if let Some((path, text)) = read("stubDomains")? {
            config.stub_domains = serde_json::from_str(&text).map_err(|e| json(path, e))?;
        }
        if let Some((path, text)) = read("upstreamNameservers")? {
            config.upstream_nameservers = serde_json::from_str(&text).map_err(|e| json(path, e))?;
        }
        config.validate()?;
        Ok(config)
    }

    /// kube-dns's own checks: nameservers are `IP` or `IP:PORT`, stub domains are names.
    fn validate(&self) -> Result<(), KubeDnsConfigError> {
        let nameserver = |key, value: &String| {
            let ok = value.parse::<IpAddr>().is_ok() || value.parse::<SocketAddr>().is_ok();
            ok.then_some(()).ok_or_else(|| KubeDnsConfigError::Nameserver {
                key,
                value: value.clone(),
            })
        };
        for (domain, servers) in &self.stub_domains {
            let labels_ok = domain.trim_end_matches('.').split('.').all(|l| {
                (1..=63).contains(&l.len()) && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            });
            if !labels_ok || domain.len() > 253 {
                return Err(KubeDnsConfigError::Domain(domain.clone()));
            }
            for server in servers {
                nameserver("stubDomains", server)?;
            }
        }
        for server in &self.upstream_nameservers {
            nameserver("upstreamNameservers", server)?;
        }
        Ok(())
    }
}

/// What fills the placeholders.
#[derive(Debug, Clone)]
pub struct Pillars {
    /// `__PILLAR__CLUSTER__DNS__`; `None` when it is not known.
    pub cluster_dns: Option<IpAddr>,
    /// `__PILLAR__LOCAL__DNS__`: the local addresses, separated by spaces.
    pub local_ips: String,
    /// The port of the stub domains' blocks (`-dns.port`).
    pub port: u16,
    /// The node's resolv.conf, the upstreams when the kube-dns ConfigMap names none.
    pub resolv_conf: PathBuf,
}

/// Fills `base` as node-cache's `updateCorefile` does; a placeholder still there afterwards is
/// an error that names it.
pub fn fill(base: &str, pillars: &Pillars, kube_dns: &KubeDnsConfig) -> Result<String, TemplateError> {
    let mut text = base.to_owned();
    if kube_dns.upstream_nameservers.is_empty() {
        text = text.replace(UPSTREAM_SERVERS, &pillars.resolv_conf.display().to_string());
    } else {
        let upstreams = kube_dns.upstream_nameservers.join(" ");
        text = text.replace(UPSTREAM_TCP_BLOCK, UPSTREAM_UDP_BLOCK);
        text = text.replace(UPSTREAM_SERVERS, &upstreams);
    }
    if let Some(ip) = pillars.cluster_dns {
        text = text.replace(CLUSTER_DNS, &ip.to_string());
    }
    text = text.replace(LOCAL_DNS, &pillars.local_ips);
    text = text.replace(DNS_SERVER, "");
    for (domain, servers) in &kube_dns.stub_domains {
        text.push_str(&format!(
            "\n{domain}:{port} {{\n    errors\n    cache {STUB_DOMAIN_CACHE_TTL}\n    bind {local}\n    forward . {servers}\n}}\n",
            port = pillars.port,
            local = pillars.local_ips,
            servers = servers.join(" "),
        ));
    }
    if let Some(at) = text.find("__PILLAR__") {
        let name: String = text[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        return Err(TemplateError::Unfilled(name));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Corefile of Kubernetes' `nodelocaldns.yaml` after its installation step (`sed` of the
    /// domain, the local address and the kube-dns address), as node-cache receives it.
    const INSTALLED: &str = "cluster.local:53 {
    errors
    cache {
            success 9984 30
            denial 9984 5
    }
    reload
    loop
    bind 169.254.20.10 10.96.0.10
    forward . __PILLAR__CLUSTER__DNS__ {
            force_tcp
    }
    prometheus :9253
    health 169.254.20.10:8080
    }
.:53 {
    errors
    cache 30
    reload
    loop
    bind 169.254.20.10 10.96.0.10
    forward . __PILLAR__UPSTREAM__SERVERS__
    prometheus :9253
    }
";

    fn pillars() -> Pillars {
        Pillars {
            cluster_dns: Some("10.96.0.11".parse().unwrap()),
            local_ips: "169.254.20.10 10.96.0.10".to_owned(),
            port: 53,
            resolv_conf: PathBuf::from("/etc/resolv.conf"),
        }
    }

    #[test]
    fn the_cluster_ip_and_the_nodes_resolv_conf_fill_the_installed_template() {
        let filled = fill(INSTALLED, &pillars(), &KubeDnsConfig::default()).unwrap();
        assert!(
            filled.contains("forward . 10.96.0.11 {\n            force_tcp"),
            "{filled}"
        );
        assert!(filled.contains("forward . /etc/resolv.conf\n"), "{filled}");
        assert!(!filled.contains("__PILLAR__"));
    }

    #[test]
    fn the_local_addresses_fill_both_listen_placeholders_as_node_cache_does() {
        let base = "cluster.local:53 {\n    bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__\n}\n";
        let filled = fill(base, &pillars(), &KubeDnsConfig::default()).unwrap();
        assert_eq!(filled, "cluster.local:53 {\n    bind 169.254.20.10 10.96.0.10 \n}\n");
    }

    #[test]
    fn kube_dns_stub_domains_become_blocks_and_its_upstreams_replace_resolv_conf() {
        let kube_dns = KubeDnsConfig {
            stub_domains: BTreeMap::from([(
                "corp.example".to_owned(),
                vec!["10.150.0.1".to_owned(), "10.150.0.2:5353".to_owned()],
            )]),
            upstream_nameservers: vec!["172.16.0.1".to_owned(), "172.16.0.2".to_owned()],
        };
        let base = "\
.:53 {
    forward . __PILLAR__UPSTREAM__SERVERS__ {
            force_tcp
    }
}
";
        let filled = fill(base, &pillars(), &kube_dns).unwrap();
        assert!(
            filled.starts_with(".:53 {\n    forward . 172.16.0.1 172.16.0.2\n}\n"),
            "{filled}"
        );
        assert!(
            filled.ends_with(
                "\ncorp.example:53 {\n    errors\n    cache 30\n    bind 169.254.20.10 10.96.0.10\n    forward . 10.150.0.1 10.150.0.2:5353\n}\n"
            ),
            "{filled}"
        );
    }

    #[test]
    fn a_placeholder_left_unfilled_is_named() {
        let base = "__PILLAR__DNS__DOMAIN__:53 {\n    forward . __PILLAR__CLUSTER__DNS__\n}\n";
        let error = fill(base, &pillars(), &KubeDnsConfig::default()).unwrap_err();
        assert!(
            matches!(&error, TemplateError::Unfilled(name) if name == "__PILLAR__DNS__DOMAIN__"),
            "{error}"
        );
        let unknown = Pillars {
            cluster_dns: None,
            ..pillars()
        };
        let error = fill(
            "cluster.local:53 {\n    forward . __PILLAR__CLUSTER__DNS__\n}\n",
            &unknown,
            &KubeDnsConfig::default(),
        )
        .unwrap_err();
        assert!(
            matches!(&error, TemplateError::Unfilled(name) if name == CLUSTER_DNS),
            "{error}"
        );
    }

    #[test]
    fn the_kube_dns_configmap_is_read_from_its_mounted_directory() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(KubeDnsConfig::read(dir.path()).unwrap(), KubeDnsConfig::default());
        std::fs::write(dir.path().join("stubDomains"), r#"{"acme.local": ["1.2.3.4"]}"#).unwrap();
        std::fs::write(dir.path().join("upstreamNameservers"), r#"["8.8.8.8", "8.8.4.4:53"]"#).unwrap();
        let config = KubeDnsConfig::read(dir.path()).unwrap();
        assert_eq!(config.stub_domains["acme.local"], ["1.2.3.4"]);
        assert_eq!(config.upstream_nameservers, ["8.8.8.8", "8.8.4.4:53"]);
        std::fs::write(dir.path().join("stubDomains"), r#"{"acme.local": ["ns.acme.local"]}"#).unwrap();
        assert!(matches!(
            KubeDnsConfig::read(dir.path()),
            Err(KubeDnsConfigError::Nameserver { .. })
        ));
        std::fs::write(dir.path().join("stubDomains"), "not json").unwrap();
        assert!(matches!(
            KubeDnsConfig::read(dir.path()),
            Err(KubeDnsConfigError::Json { .. })
        ));
    }
}
