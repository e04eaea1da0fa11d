//! The TOML configuration file and the resolution of every setting into one [`Settings`].
//!
//! Precedence, highest first: command-line flags, environment variables (clap applies these two),
//! the TOML file given with `--config`, the records file's `/<prefix>/config` object, SkyDNS's
//! defaults. SkyDNS itself lets its etcd config override flags; skyline lets what the operator
//! typed win over data, so a stray key in the data cannot move the server elsewhere.
//!
//! Resolution is pure: [`operator`] stacks what the operator set (it decides the data source,
//! the records file or etcd, and the prefix), [`resolve`] stacks that over the data's own
//! `/<prefix>/config`. Both sources apply the same stacking whenever that object changes, for
//! the settings that shape answers (domain, TTLs, priority, hostmaster, local, round robin); the
//! listen address, the workers, the prefix and the etcd connection are fixed at start.
//!
//! SIGHUP resolves everything again from the flags as given and the `--config` file as it is now
//! (`crate::reload`). The "on reload" column says what then happens to each setting: *applied*
//! while serving, or *restart*: named in a log line and left as it is until the process
//! restarts. The `[forward]` and `[cache]` tables are applied, except `stubzones` and turning
//! forwarding on or off; `[kubernetes]` needs a restart. The cookie secrets of `[cookies]` are
//! applied, turning cookies on or off and `[rrl]` need a restart (see [`crate::protection`]).
//!
//! The data source: etcd when `machines` is set, else the records file when `records` is set,
//! else an empty zone. Setting both is an error, so that it is never a guess which one serves.
//!
//! | TOML key | flag | environment | `/<prefix>/config` key | default | on reload |
//! |---|---|---|---|---|---|
//! | `addr` (one or a list) | `--addr` (repeatable) | `SKYDNS_ADDR` | `dns_addr` | `127.0.0.1:53` | restart |
//! | `domain` | `--domain` | `SKYDNS_DOMAIN` | `domain` | `skydns.local.` | applied |
//! | `path_prefix` | `--path-prefix` | `SKYDNS_PATH_PREFIX` | — | `skydns` | restart |
//! | `nameservers` | `--nameservers` | `SKYDNS_NAMESERVERS` | `nameservers` | none | applied |
//! | `ndots` | `--ndots` | `SKYDNS_NDOTS` | `ndot` | 2 (0 = default) | applied |
//! | `machines` | `--machines` | `ETCD_MACHINES` | — | none (no etcd) | restart |
//! | `tls_key` | `--tls-key` | `ETCD_TLSKEY` | — | none | restart |
//! | `tls_pem` | `--tls-pem` | `ETCD_TLSPEM` | — | none | restart |
//! | `ca_cert` | `--ca-cert` | `ETCD_CACERT` | — | none | restart |
//! | `username` | `--username` | `ETCD_USERNAME` | — | none | restart |
//! | `password` | `--password` | `ETCD_PASSWORD` | — | none | restart |
//! | `discover` | `--discover` | `SKYDNS_DISCOVER` | — | false | restart |
//! | `local` | `--local` | — | `local` | none | applied |
//! | `hostmaster` | `--hostmaster` | — | `hostmaster` | `hostmaster.<domain>` | applied |
//! | `round_robin` | `--round-robin` | — | `round_robin` | true | applied |
//! | `wildcards_marker` | `--wildcards-marker` | — | — | false | applied |
//! | `dnssec` | `--dnssec` | — | — (not read from the data) | none (unsigned) | applied (key files re-read) |
//! | `scache` | `--scache` | — | `scache` | 10000 | applied |
//! | `records` | `--records` | — | — | none (empty zone) | restart |
//! | `workers` | `--workers` | — | — | 0 (one per core) | restart |
//! | `no_pin` | `--no-pin` | — | — | false | restart |
//! | `tcp_max_connections` | `--tcp-max-connections` | — | — | 1024 per worker | restart |
//! | `tcp_max_per_client` | `--tcp-max-per-client` | — | — | 0 (no per-address cap) | restart |
//! | `systemd` | `--systemd` | `SKYDNS_SYSTEMD` | — | false | restart |
//! | `setup_interface` | `--setup-interface` | — | — | none | restart |
//! | `setup_notrack` | `--setup-notrack` | — | — | false | restart |
//! | `pid_file` | `--pid-file` | — | — | none | restart |
//! | `drain` | `--drain` | — | — | `5s` | restart |
//! | `state_dir` | `--state-dir` | — | — | none (nothing persisted) | restart |
//! | `state_max_age` | `--state-max-age` | — | — | `24h` | restart |
//! | `http_addr` | `--http-addr` | `SKYLINE_HTTP_ADDR` | — | none (no HTTP listener) | restart |
//! | `[observe]` keys | `--dnstap`, `--query-log`, `--top-talkers` and theirs ([`crate::observe`]) | — | — | off | restart |
//! | — | — | — | `ttl`, `min_ttl`, `priority` | 3600, 60, 10 | applied |
//!
//! The `[kubernetes]` table (any `--kubernetes*` flag or `--kubeconfig` too) turns on Kubernetes
//! cluster DNS beside the SkyDNS data source; its keys are CoreDNS's `kubernetes` options (see
//! [`KubernetesFile`]), fixed at start.

use crate::cli::Cli;
use crate::forwarding::{CacheFile, ForwardFile, ForwardingError};
use crate::observe::{ObserveError, ObserveFile};
use crate::protection::{CookiesFile, ProtectionError, RrlFile};
use serde::Deserialize;
use skyline_controlplane::etcd::EtcdOptions;
use skyline_controlplane::kubernetes::KubernetesOptions;
use skyline_controlplane::skydns::config::{self as skydns_config, ConfigPatch};
use skyline_controlplane::state::StateDir;
use skyline_dataplane::observe::ObserveConfig;
use skyline_dataplane::snapshot::kubernetes::{self, PodMode};
use skyline_dataplane::snapshot::skydns::Config;
use skyline_dataplane::wire::Name;
use skyline_dataplane::worker::TcpConfig;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The default path prefix: records live under `/skydns/`.
const DEFAULT_PATH_PREFIX: &str = "skydns";

/// Why the configuration is unusable; each message names the file or setting at fault.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The TOML file could not be read.
    #[error("cannot read configuration file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The TOML file is not valid, or has a key or value this version does not know.
    #[error("configuration file {path}: {source}")]
    Toml {
        /// The file.
        path: PathBuf,
        /// What is wrong, with its line and column.
        source: toml::de::Error,
    },
    /// A setting's value is not valid.
    #[error(transparent)]
    Setting(#[from] skydns_config::ConfigError),
    /// The path prefix cannot be a key's first element.
    #[error("path_prefix: {0:?} must be one non-empty key element, without '/'")]
    PathPrefix(String),
    /// A forwarding or cache setting is not valid.
    #[error(transparent)]
    Forwarding(#[from] ForwardingError),
    /// A dnstap, query-log or top-talker setting is not valid.
    #[error("observe.{0}")]
    Observe(#[from] ObserveError),
    /// A cookie or rate-limiting setting is not valid.
    #[error(transparent)]
    Protection(#[from] ProtectionError),
    /// A `[kubernetes]` setting or `--kubernetes-*` flag is not valid.
    #[error("kubernetes.{key}: {message}")]
    Kubernetes {
        /// The setting.
        key: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The drain duration is not a duration.
    #[error("drain: {0}")]
    Drain(String),
    /// The maximum age of a persisted snapshot is not a duration.
    #[error("state_max_age: {0}")]
    StateMaxAge(String),
    /// A DNS over TCP connection cap is not usable.
    #[error("tcp_max_connections: a worker must be able to hold at least one connection")]
    NoTcpConnections,
    /// Both data sources are set.
    #[error("both a records file ({records}) and etcd (machines) are set; choose one data source")]
    TwoSources {
        /// The records file.
        records: PathBuf,
    },
}

/// The TOML configuration file: the long options' names in snake_case. Unknown keys are errors,
/// so that a typo is reported instead of silently ignored.
#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// `--addr`: one address, or a list to serve on several.
    pub addr: Option<Addrs>,
    /// `--domain`.
    pub domain: Option<String>,
    /// `--path-prefix`.
    pub path_prefix: Option<String>,
    /// `--nameservers`, as a list.
    pub nameservers: Option<Vec<SocketAddr>>,
    /// `--ndots`.
    pub ndots: Option<u32>,
    /// `--machines`, as a list.
    pub machines: Option<Vec<String>>,
    /// `--tls-key`; a relative path is relative to the configuration file's directory.
    pub tls_key: Option<PathBuf>,
    /// `--tls-pem`; relative like `tls_key`.
    pub tls_pem: Option<PathBuf>,
    /// `--ca-cert`; relative like `tls_key`.
    pub ca_cert: Option<PathBuf>,
    /// `--username`.
    pub username: Option<String>,
    /// `--password`.
    pub password: Option<String>,
    /// `--discover`.
    pub discover: Option<bool>,
    /// `--local`.
    pub local: Option<String>,
    /// `--hostmaster`.
    pub hostmaster: Option<String>,
    /// `--round-robin`.
    pub round_robin: Option<bool>,
    /// `--wildcards-marker`.
    pub wildcards_marker: Option<bool>,
    /// `--dnssec`; a relative path is relative to the configuration file's directory.
    pub dnssec: Option<PathBuf>,
    /// `--scache`.
    pub scache: Option<u64>,
    /// `--records`; a relative path is relative to the configuration file's directory.
    pub records: Option<PathBuf>,
    /// `--workers`.
    pub workers: Option<usize>,
    /// `--no-pin`.
    pub no_pin: Option<bool>,
    /// `--tcp-max-connections`.
    pub tcp_max_connections: Option<usize>,
    /// `--tcp-max-per-client`.
    pub tcp_max_per_client: Option<usize>,
    /// `--systemd`.
    pub systemd: Option<bool>,
    /// `--setup-interface`.
    pub setup_interface: Option<String>,
    /// `--setup-notrack`.
    pub setup_notrack: Option<bool>,
    /// `--pid-file`; a relative path is relative to the configuration file's directory.
    pub pid_file: Option<PathBuf>,
    /// `--drain`, e.g. `"5s"`.
    pub drain: Option<String>,
    /// `--state-dir`; a relative path is relative to the configuration file's directory.
    pub state_dir: Option<PathBuf>,
    /// `--state-max-age`, e.g. `"24h"`.
    pub state_max_age: Option<String>,
    /// `--http-addr`.
    pub http_addr: Option<SocketAddr>,
    /// The `[forward]` table (see [`crate::forwarding`]).
    pub forward: Option<ForwardFile>,
    /// The `[cache]` table (see [`crate::forwarding`]).
    pub cache: Option<CacheFile>,
    /// The `[kubernetes]` table: its presence serves Kubernetes cluster DNS.
    pub kubernetes: Option<KubernetesFile>,
    /// The `[observe]` table: dnstap, the query log, the top talkers (see [`crate::observe`]).
    pub observe: Option<ObserveFile>,
    /// The `[cookies]` table (see [`crate::protection`]).
    pub cookies: Option<CookiesFile>,
    /// The `[rrl]` table (see [`crate::protection`]).
    pub rrl: Option<RrlFile>,
}

/// The `[kubernetes]` table: CoreDNS's `kubernetes` plugin options under the same names, so that
/// a Corefile block translates line by line. Each `--kubernetes-*` flag wins over its key.
#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct KubernetesFile {
    /// `--kubeconfig`; a relative path is relative to the configuration file's directory.
    pub kubeconfig: Option<PathBuf>,
    /// `--kubernetes-context`.
    pub context: Option<String>,
    /// `--kubernetes-zones`.
    pub zones: Option<Vec<String>>,
    /// `--kubernetes-pods`: `disabled`, `insecure` or `verified`.
    pub pods: Option<String>,
    /// `--kubernetes-endpoint-pod-names`.
    pub endpoint_pod_names: Option<bool>,
    /// `--kubernetes-ttl`.
    pub ttl: Option<u32>,
    /// `--kubernetes-namespaces`.
    pub namespaces: Option<Vec<String>>,
    /// `--kubernetes-labels`.
    pub labels: Option<String>,
    /// `--kubernetes-namespace-labels`.
    pub namespace_labels: Option<String>,
    /// `--kubernetes-ignore-empty-service`.
    pub ignore_empty_service: Option<bool>,
    /// `--kubernetes-noendpoints`.
    pub noendpoints: Option<bool>,
    /// `--kubernetes-openshift-names`.
    pub openshift_names: Option<bool>,
    /// `--kubernetes-fallthrough`: an empty list means every cluster zone.
    pub fallthrough: Option<Vec<String>>,
    /// `--kubernetes-qps`.
    pub apiserver_qps: Option<u32>,
}

/// The Kubernetes source's settings, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct KubernetesSettings {
    /// Connection and watches.
    pub options: KubernetesOptions,
    /// What the cluster zones answer.
    pub zones: kubernetes::Config,
}

impl FileConfig {
    /// Parses TOML text read from `path`, whose directory anchors relative file paths.
    pub fn parse(text: &str, path: &Path) -> Result<FileConfig, ConfigError> {
        let mut file: FileConfig = toml::from_str(text).map_err(|source| ConfigError::Toml {
            path: path.to_owned(),
            source,
        })?;
        if let Some(dir) = path.parent() {
            if let Some(relative) = file
                .kubernetes
                .as_mut()
                .and_then(|k| k.kubeconfig.as_mut())
                .filter(|p| p.is_relative())
            {
                *relative = dir.join(&*relative);
            }
            for file_path in [
                &mut file.dnssec,
                &mut file.records,
                &mut file.tls_key,
                &mut file.tls_pem,
                &mut file.ca_cert,
                &mut file.pid_file,
                &mut file.state_dir,
            ] {
                if let Some(relative) = file_path.as_mut().filter(|p| p.is_relative()) {
                    *relative = dir.join(&*relative);
                }
            }
            // `query_log = "-"` is stderr, not a file beside the configuration.
            let observe = file.observe.as_mut();
            for file_path in observe.into_iter().flat_map(|o| [&mut o.dnstap, &mut o.query_log]) {
                if let Some(relative) = file_path.as_mut().filter(|p| p.is_relative() && p.as_os_str() != "-") {
                    *relative = dir.join(&*relative);
                }
            }
        }
        Ok(file)
    }

    /// Reads and parses the file at `path`.
    pub fn load(path: &Path) -> Result<FileConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        FileConfig::parse(&text, path)
    }
}

/// What the operator set, flags and environment over the configuration file: enough to find the
/// data source, and the settings that override the data's own `/<prefix>/config`.
#[derive(Debug, Clone, PartialEq)]
pub struct Operator {
    /// Settings that win over the records file's `/<prefix>/config`.
    pub overrides: ConfigPatch,
    /// First element of every record key.
    pub path_prefix: String,
    /// The records file, if any.
    pub records: Option<PathBuf>,
    /// etcd, when it is the data source.
    pub etcd: Option<EtcdOptions>,
    /// Worker threads (0 = one per core).
    pub workers: usize,
    /// Pin workers to cores.
    pub pin: bool,
    /// Listening addresses beyond the first.
    pub extra_addrs: Vec<SocketAddr>,
}

/// Every setting, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Where DNS is served, UDP and TCP.
    pub addr: SocketAddr,
    /// What shapes SkyDNS answers (domain, TTLs, priority, hostmaster, local, round robin, prefix).
    pub skydns: Config,
    /// The records file, if any.
    pub records: Option<PathBuf>,
    /// Resolvers for names outside the domain.
    pub nameservers: Vec<SocketAddr>,
    /// Labels a name needs before it is forwarded.
    pub ndots: u32,
    /// etcd, when it is the data source.
    pub etcd: Option<EtcdOptions>,
    /// Worker threads (0 = one per core).
    pub workers: usize,
    /// Pin workers to cores.
    pub pin: bool,
    /// Listening addresses beyond `addr`.
    pub extra_addrs: Vec<SocketAddr>,
    /// Never forward (SkyDNS `no_rec`).
    pub no_rec: bool,
    /// Rotate over the nameservers (SkyDNS `ns_rotate`).
    pub ns_rotate: bool,
    /// SkyDNS `read_timeout`, if set: the forwarding time budget.
    pub read_timeout: Option<std::time::Duration>,
}

/// One listening address or several, as `addr` may be written in the TOML file.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Addrs {
    /// `addr = "127.0.0.1:53"`.
    One(SocketAddr),
    /// `addr = ["169.254.20.10:53", "10.96.0.10:53"]`.
    Many(Vec<SocketAddr>),
}

impl Addrs {
    fn to_vec(&self) -> Vec<SocketAddr> {
        match self {
            Addrs::One(addr) => vec![*addr],
            Addrs::Many(addrs) => addrs.clone(),
        }
    }
}

/// Stacks the command line (flags and environment) over the configuration file.
pub fn operator(cli: &Cli, file: Option<&FileConfig>) -> Result<Operator, ConfigError> {
    let empty = FileConfig::default();
    let file = file.unwrap_or(&empty);
    let file_addrs = file.addr.as_ref().map(Addrs::to_vec).unwrap_or_default();
    let from_file = ConfigPatch {
        dns_addr: file_addrs.first().copied(),
        no_rec: file.forward.as_ref().and_then(|f| f.no_rec),
        ns_rotate: file.forward.as_ref().and_then(|f| f.ns_rotate),
        domain: file
            .domain
            .as_deref()
            .map(|d| skydns_config::domain("domain", d))
            .transpose()?,
        local: file
            .local
            .as_deref()
            .map(|d| skydns_config::domain("local", d))
            .transpose()?,
        hostmaster: file.hostmaster.as_deref().map(skydns_config::hostmaster).transpose()?,
        round_robin: file.round_robin,
        wildcards_marker: file.wildcards_marker,
        dnssec: file.dnssec.as_ref().map(|p| p.to_string_lossy().into_owned()),
        scache: file.scache,
        nameservers: file.nameservers.clone(),
        ndots: file.ndots,
        ..ConfigPatch::default()
    };
    let cli_addrs = cli.addr.clone().unwrap_or_default();
    let from_cli = ConfigPatch {
        dns_addr: cli_addrs.first().copied(),
        no_rec: cli.forward.no_rec,
        ns_rotate: cli.forward.ns_rotate,
        domain: cli.domain.clone(),
        local: cli.local.clone(),
        hostmaster: cli.hostmaster.clone(),
        round_robin: cli.round_robin,
        wildcards_marker: cli.wildcards_marker,
        dnssec: cli.dnssec.as_ref().map(|p| p.to_string_lossy().into_owned()),
        scache: cli.scache,
        nameservers: cli.nameservers.clone(),
        ndots: cli.ndots,
        ..ConfigPatch::default()
    };
    let mut overrides = from_cli.or(from_file);
    if overrides.ndots == Some(0) {
        overrides.ndots = None;
    }
    if overrides.nameservers.as_ref().is_some_and(Vec::is_empty) {
        overrides.nameservers = None;
    }
    let prefix = cli
        .path_prefix
        .as_deref()
        .or(file.path_prefix.as_deref())
        .unwrap_or(DEFAULT_PATH_PREFIX);
    let records = cli.records.clone().or_else(|| file.records.clone());
    let etcd = cli
        .etcd
        .machines
        .clone()
        .or_else(|| file.machines.clone())
        .map(|endpoints| EtcdOptions {
            endpoints,
            tls_key: cli.etcd.tls_key.clone().or_else(|| file.tls_key.clone()),
            tls_pem: cli.etcd.tls_pem.clone().or_else(|| file.tls_pem.clone()),
            ca_cert: cli.etcd.ca_cert.clone().or_else(|| file.ca_cert.clone()),
            username: cli.etcd.username.clone().or_else(|| file.username.clone()),
            password: cli.etcd.password.clone().or_else(|| file.password.clone()),
            discover: cli.discover.or(file.discover).unwrap_or(false),
        });
    if let (Some(records), Some(_)) = (&records, &etcd) {
        return Err(ConfigError::TwoSources {
            records: records.clone(),
        });
    }
    Ok(Operator {
        overrides,
        path_prefix: path_prefix(prefix)?,
        records,
        etcd,
        workers: cli.workers.or(file.workers).unwrap_or(0),
        pin: !(cli.no_pin || file.no_pin.unwrap_or(false)),
        extra_addrs: if cli_addrs.is_empty() { file_addrs } else { cli_addrs }
            .into_iter()
            .skip(1)
            .collect(),
    })
}

/// Where to serve the HTTP endpoints, the flag (or its environment variable) over the file;
/// `None`, the default, serves none: a port opened only when asked for.
pub fn http_addr(cli: &Cli, file: Option<&FileConfig>) -> Option<SocketAddr> {
    cli.http_addr.or_else(|| file.and_then(|f| f.http_addr))
}

/// The node-local set-up: the interface to create, if any, and whether to install NOTRACK
/// rules; flags over the file.
pub fn node_local(cli: &Cli, file: Option<&FileConfig>) -> (Option<String>, bool) {
    let interface = cli
        .setup_interface
        .clone()
        .or_else(|| file.and_then(|f| f.setup_interface.clone()));
    let notrack = cli.setup_notrack || file.and_then(|f| f.setup_notrack).unwrap_or(false);
    (interface, notrack)
}

/// The PID file, if any: the flag over the file.
pub fn pid_file(cli: &Cli, file: Option<&FileConfig>) -> Option<PathBuf> {
    cli.pid_file.clone().or_else(|| file.and_then(|f| f.pid_file.clone()))
}

/// Whether to serve on sockets passed by systemd, the flag (or its variable) over the file.
pub fn systemd(cli: &Cli, file: Option<&FileConfig>) -> bool {
    cli.systemd.or_else(|| file.and_then(|f| f.systemd)).unwrap_or(false)
}

/// How long a stopping process keeps answering before its listeners close.
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(5);

/// The persisted snapshot's directory and maximum age (flags over the file over
/// [`skyline_controlplane::state::DEFAULT_MAX_AGE`]); `None` without a directory: nothing is
/// persisted.
pub fn state(cli: &Cli, file: Option<&FileConfig>) -> Result<Option<StateDir>, ConfigError> {
    let max_age = match (cli.state_max_age, file.and_then(|f| f.state_max_age.as_deref())) {
        (Some(flag), _) => flag,
        (None, Some(text)) => crate::forwarding::parse_duration(text).map_err(ConfigError::StateMaxAge)?,
        (None, None) => skyline_controlplane::state::DEFAULT_MAX_AGE,
    };
    let dir = cli.state_dir.clone().or_else(|| file.and_then(|f| f.state_dir.clone()));
    Ok(dir.map(|dir| StateDir::new(dir, max_age)))
}

/// The drain duration, the flag over the file over [`DEFAULT_DRAIN`].
pub fn drain(cli: &Cli, file: Option<&FileConfig>) -> Result<Duration, ConfigError> {
    match (cli.drain, file.and_then(|f| f.drain.as_deref())) {
        (Some(flag), _) => Ok(flag),
        (None, Some(text)) => crate::forwarding::parse_duration(text).map_err(ConfigError::Drain),
        (None, None) => Ok(DEFAULT_DRAIN),
    }
}

/// dnstap, the query log and the top talkers, flags over the `[observe]` table.
pub fn observe(cli: &Cli, file: Option<&FileConfig>) -> Result<ObserveConfig, ConfigError> {
    Ok(crate::observe::observe_config(
        &cli.observe,
        file.and_then(|f| f.observe.as_ref()),
    )?)
}

/// DNS over TCP limits, flags over the file over [`TcpConfig::default`].
pub fn tcp(cli: &Cli, file: Option<&FileConfig>) -> Result<TcpConfig, ConfigError> {
    let defaults = TcpConfig::default();
    let config = TcpConfig {
        max_connections: cli
            .tcp_max_connections
            .or_else(|| file.and_then(|f| f.tcp_max_connections))
            .unwrap_or(defaults.max_connections),
        max_per_client: cli
            .tcp_max_per_client
            .or_else(|| file.and_then(|f| f.tcp_max_per_client))
            .unwrap_or(defaults.max_per_client),
        ..defaults
    };
    if config.max_connections == 0 {
        return Err(ConfigError::NoTcpConnections);
    }
    Ok(config)
}

/// The Kubernetes source's settings, flags over the `[kubernetes]` table over CoreDNS's
/// defaults; `None` when neither turns it on.
pub fn kubernetes(cli: &Cli, file: Option<&FileConfig>) -> Result<Option<KubernetesSettings>, ConfigError> {
    let args = &cli.kubernetes;
    let table = file.and_then(|f| f.kubernetes.as_ref());
    if !args.any() && table.is_none() {
        return Ok(None);
    }
    let empty = KubernetesFile::default();
    let table = table.unwrap_or(&empty);
    let flag = |on: bool, key: Option<bool>| on || key.unwrap_or(false);
    let defaults = kubernetes::Config::default();
    let zones = match args.kubernetes_zones.as_ref().or(table.zones.as_ref()) {
        Some(zones) => zones
            .iter()
            .map(|z| kube_zone("zones", z))
            .collect::<Result<Vec<_>, _>>()?,
        None => defaults.zones.clone(),
    };
    if !zones.iter().any(|z| !kubernetes::is_reverse(z)) {
        return Err(ConfigError::Kubernetes {
            key: "zones",
            message: "at least one zone must be a forward zone (like cluster.local.)".into(),
        });
    }
    let pods = match args.kubernetes_pods.as_deref().or(table.pods.as_deref()) {
        None | Some("disabled") => PodMode::Disabled,
        Some("insecure") => PodMode::Insecure,
        Some("verified") => PodMode::Verified,
        Some(other) => {
            return Err(ConfigError::Kubernetes {
                key: "pods",
                message: format!("{other:?} is not disabled, insecure or verified"),
            })
        }
    };
    let ttl = args.kubernetes_ttl.or(table.ttl).unwrap_or(kubernetes::DEFAULT_TTL);
    if ttl > kubernetes::MAX_TTL {
        return Err(ConfigError::Kubernetes {
            key: "ttl",
            message: format!("{ttl} is above {}", kubernetes::MAX_TTL),
        });
    }
    let fallthrough = args
        .kubernetes_fallthrough
        .as_ref()
        .or(table.fallthrough.as_ref())
        .map(|zones| zones.iter().map(|z| kube_zone("fallthrough", z)).collect())
        .transpose()?;
    let zones = kubernetes::Config {
        zones,
        ttl,
        pods,
        endpoint_pod_names: flag(args.kubernetes_endpoint_pod_names, table.endpoint_pod_names),
        ignore_empty_service: flag(args.kubernetes_ignore_empty_service, table.ignore_empty_service),
        namespaces: args
            .kubernetes_namespaces
            .clone()
            .or_else(|| table.namespaces.clone())
            .unwrap_or_default(),
        fallthrough,
        openshift_names: flag(args.kubernetes_openshift_names, table.openshift_names),
    };
    let options = KubernetesOptions {
        kubeconfig: args.kubeconfig.clone().or_else(|| table.kubeconfig.clone()),
        context: args.kubernetes_context.clone().or_else(|| table.context.clone()),
        labels: args.kubernetes_labels.clone().or_else(|| table.labels.clone()),
        namespace_labels: args
            .kubernetes_namespace_labels
            .clone()
            .or_else(|| table.namespace_labels.clone()),
        noendpoints: flag(args.kubernetes_noendpoints, table.noendpoints),
        pods: pods == PodMode::Verified,
        qps: args.kubernetes_qps.or(table.apiserver_qps),
    };
    Ok(Some(KubernetesSettings { options, zones }))
}

fn kube_zone(key: &'static str, text: &str) -> Result<Name, ConfigError> {
    Name::from_dotted(text).map_err(|_| ConfigError::Kubernetes {
        key,
        message: format!("{text:?} is not a domain name"),
    })
}

/// Stacks the operator's settings over the data's `/<prefix>/config` (from the records file or
/// etcd) and the defaults.
pub fn resolve(operator: Operator, data_config: Option<&ConfigPatch>) -> Result<Settings, ConfigError> {
    let stacked = operator.overrides.or(data_config.cloned().unwrap_or_default());
    Ok(Settings {
        addr: stacked.dns_addr_or_default(),
        skydns: stacked.skydns_config(&operator.path_prefix)?,
        nameservers: stacked.nameservers.clone().unwrap_or_default(),
        ndots: stacked.ndots_or_default(),
        records: operator.records,
        etcd: operator.etcd,
        workers: operator.workers,
        pin: operator.pin,
        extra_addrs: operator.extra_addrs,
        no_rec: stacked.no_rec.unwrap_or(false),
        ns_rotate: stacked.ns_rotate.unwrap_or(true),
        read_timeout: stacked.read_timeout,
    })
}

/// A path prefix as SkyDNS's `-path-prefix` takes it (`skydns`); surrounding slashes are dropped.
fn path_prefix(text: &str) -> Result<String, ConfigError> {
    let trimmed = text.trim_matches('/');
    if trimmed.is_empty() || trimmed.contains('/') {
        return Err(ConfigError::PathPrefix(text.to_owned()));
    }
    Ok(trimmed.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use skyline_controlplane::source::records_file::parse_records_file;
    use skyline_dataplane::wire::Name;
    use std::sync::Mutex;

    /// Environment variables are process-wide: tests that parse a command line (which reads them)
    /// take this lock so that one test's variables never leak into another's parse.
    static ENV: Mutex<()> = Mutex::new(());

    const SKYDNS_VARS: &[&str] = &[
        "SKYDNS_ADDR",
        "SKYDNS_DOMAIN",
        "SKYDNS_PATH_PREFIX",
        "SKYDNS_NAMESERVERS",
        "SKYDNS_NDOTS",
        "ETCD_MACHINES",
        "ETCD_TLSKEY",
        "ETCD_TLSPEM",
        "ETCD_CACERT",
        "ETCD_USERNAME",
        "ETCD_PASSWORD",
        "SKYLINE_HTTP_ADDR",
    ];

    /// Parses `args` with exactly the environment variables `env` set among SkyDNS's.
    fn cli(args: &[&str], env: &[(&str, &str)]) -> Result<Cli, clap::Error> {
        let _lock = ENV.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for var in SKYDNS_VARS {
            std::env::remove_var(var);
        }
        for (k, v) in env {
            std::env::set_var(k, v);
        }
        let parsed = Cli::try_parse_skydns(std::iter::once("skyline").chain(args.iter().copied()));
        for (k, _) in env {
            std::env::remove_var(k);
        }
        parsed
    }

    fn toml(text: &str) -> FileConfig {
        FileConfig::parse(text, Path::new("/etc/skyline/skyline.toml")).unwrap()
    }

    fn settings(args: &[&str], env: &[(&str, &str)], file: Option<&str>, records: Option<&str>) -> Settings {
        let cli = cli(args, env).unwrap();
        let file = file.map(toml);
        let records = records.map(|r| ConfigPatch::parse(r.as_bytes()).unwrap());
        resolve(operator(&cli, file.as_ref()).unwrap(), records.as_ref()).unwrap()
    }

    fn name(s: &str) -> Name {
        Name::from_dotted(s).unwrap()
    }

    #[test]
    fn defaults_are_skydns_defaults() {
        let s = settings(&[], &[], None, None);
        assert_eq!(s.addr.to_string(), "127.0.0.1:53");
        assert_eq!(s.skydns, Config::default());
        assert_eq!(s.skydns.domain, name("skydns.local."));
        assert_eq!(s.skydns.hostmaster, name("hostmaster.skydns.local."));
        assert_eq!((s.skydns.ttl, s.skydns.min_ttl, s.skydns.priority), (3600, 60, 10));
        assert_eq!(s.skydns.path_prefix, "skydns");
        assert_eq!(s.ndots, 2);
        assert!(s.nameservers.is_empty());
        assert_eq!(s.etcd, None, "the records file, not etcd, is the default");
        assert_eq!((s.workers, s.pin, s.records), (0, true, None));
    }

    #[test]
    fn each_layer_beats_the_ones_below() {
        let records = Some(r#"{"domain":"records.test.","dns_addr":"127.0.0.1:5301","ttl":30}"#);
        let file = Some("domain = \"file.test.\"\naddr = \"127.0.0.1:5302\"\n");
        let env = [("SKYDNS_DOMAIN", "env.test."), ("SKYDNS_ADDR", "127.0.0.1:5303")];
        let flags = ["--domain", "flag.test.", "--addr", "127.0.0.1:5304"];

        let s = settings(&[], &[], None, records);
        assert_eq!(
            (s.skydns.domain.clone(), s.addr.port(), s.skydns.ttl),
            (name("records.test."), 5301, 30)
        );
        let s = settings(&[], &[], file, records);
        assert_eq!(
            (s.skydns.domain.clone(), s.addr.port(), s.skydns.ttl),
            (name("file.test."), 5302, 30)
        );
        let s = settings(&[], &env, file, records);
        assert_eq!((s.skydns.domain.clone(), s.addr.port()), (name("env.test."), 5303));
        let s = settings(&flags, &env, file, records);
        assert_eq!((s.skydns.domain.clone(), s.addr.port()), (name("flag.test."), 5304));
        assert_eq!(
            s.skydns.hostmaster,
            name("hostmaster.flag.test."),
            "the hostmaster follows the served domain"
        );
    }

    #[test]
    fn skydns_environment_variables_are_read() {
        let env = [
            ("SKYDNS_PATH_PREFIX", "custom"),
            ("SKYDNS_NAMESERVERS", "8.8.8.8:53,[2001:db8::1]:53"),
            ("SKYDNS_NDOTS", "3"),
            ("ETCD_MACHINES", "http://10.0.0.1:2379,http://10.0.0.2:2379"),
        ];
        let s = settings(&[], &env, None, None);
        assert_eq!(s.skydns.path_prefix, "custom");
        assert_eq!(
            s.nameservers,
            ["8.8.8.8:53".parse().unwrap(), "[2001:db8::1]:53".parse().unwrap()]
        );
        assert_eq!(s.ndots, 3);
        assert_eq!(
            s.etcd.unwrap().endpoints,
            ["http://10.0.0.1:2379", "http://10.0.0.2:2379"]
        );
    }

    #[test]
    fn etcd_connection_settings_come_from_flags_environment_and_file() {
        let env = [
            ("ETCD_MACHINES", "https://10.0.0.1:2379"),
            ("ETCD_TLSKEY", "/env/key.pem"),
            ("ETCD_TLSPEM", "/env/cert.pem"),
            ("ETCD_USERNAME", "env-user"),
            ("ETCD_PASSWORD", "env-pass"),
        ];
        let file = Some("ca_cert = \"ca.pem\"\ntls_key = \"key.pem\"\nusername = \"file-user\"\n");
        let s = settings(&["--password", "flag-pass"], &env, file, None);
        let etcd = s.etcd.unwrap();
        assert_eq!(etcd.endpoints, ["https://10.0.0.1:2379"]);
        assert_eq!(etcd.tls_key, Some(PathBuf::from("/env/key.pem")));
        assert_eq!(etcd.tls_pem, Some(PathBuf::from("/env/cert.pem")));
        assert_eq!(etcd.ca_cert, Some(PathBuf::from("/etc/skyline/ca.pem")));
        assert_eq!(etcd.username.as_deref(), Some("env-user"));
        assert_eq!(etcd.password.as_deref(), Some("flag-pass"));
    }

    #[test]
    fn a_records_file_and_etcd_together_are_refused() {
        let both = cli(
            &["--records", "/srv/r.json"],
            &[("ETCD_MACHINES", "http://127.0.0.1:2379")],
        )
        .unwrap();
        assert!(matches!(operator(&both, None), Err(ConfigError::TwoSources { .. })));
        let etcd = cli(&["--machines", "http://127.0.0.1:2379"], &[]).unwrap();
        let file = toml("records = \"records.json\"");
        assert!(matches!(
            operator(&etcd, Some(&file)),
            Err(ConfigError::TwoSources { .. })
        ));
    }

    #[test]
    fn skydns_flag_forms_are_accepted() {
        let s = settings(
            &[
                "--hostmaster",
                "admin@example.org.",
                "--round-robin=false",
                "--local",
                "Node1.Hosts.skydns.local",
                "--no-pin",
            ],
            &[],
            None,
            None,
        );
        assert_eq!(s.skydns.hostmaster, name("admin.example.org."));
        assert!(!s.skydns.round_robin);
        assert_eq!(s.skydns.local, Some(name("node1.hosts.skydns.local.")));
        assert!(!s.pin);
        assert!(
            settings(&["--round-robin"], &[], None, Some(r#"{"round_robin":false}"#))
                .skydns
                .round_robin
        );
        assert!(
            !settings(&[], &[], None, Some(r#"{"round_robin":false}"#))
                .skydns
                .round_robin
        );
    }

    #[test]
    fn the_wildcards_marker_comes_from_the_operator_alone() {
        let marker = |args: &[&str], file: Option<&str>, records: Option<&str>| {
            settings(args, &[], file, records).skydns.wildcards_marker
        };
        assert!(!marker(&[], None, None));
        assert!(marker(&["--wildcards-marker"], None, None));
        assert!(marker(&[], Some("wildcards_marker = true"), None));
        assert!(!marker(
            &["--wildcards-marker=false"],
            Some("wildcards_marker = true"),
            None
        ));
        assert!(!marker(&[], None, Some(r#"{"wildcards_marker":true}"#)));
    }

    #[test]
    fn lists_from_a_higher_layer_replace_lower_ones() {
        let s = settings(
            &["--nameservers", "1.1.1.1:53"],
            &[],
            Some("nameservers = [\"8.8.8.8:53\", \"8.8.4.4:53\"]"),
            None,
        );
        assert_eq!(s.nameservers, ["1.1.1.1:53".parse().unwrap()]);
        let s = settings(
            &[],
            &[],
            Some("nameservers = [\"8.8.8.8:53\", \"8.8.4.4:53\"]"),
            Some(r#"{"nameservers":["9.9.9.9:53"]}"#),
        );
        assert_eq!(s.nameservers.len(), 2);
    }

    #[test]
    fn zero_ndots_means_the_default() {
        assert_eq!(settings(&["--ndots", "0"], &[], None, Some(r#"{"ndot":4}"#)).ndots, 4);
        assert_eq!(settings(&["--ndots", "0"], &[], None, None).ndots, 2);
    }

    #[test]
    fn invalid_command_line_values_are_rejected() {
        for args in [
            &["--addr", "localhost:53"][..],
            &["--addr", "127.0.0.1"],
            &["--nameservers", "8.8.8.8"],
            &["--domain", "bad domain"],
            &["--hostmaster", "a..b"],
            &["--round-robin", "false"],
            &["--round-robin=maybe"],
            &["--workers", "-1"],
            &["--unknown"],
        ] {
            assert!(cli(args, &[]).is_err(), "{args:?}");
        }
        assert!(cli(&[], &[("SKYDNS_ADDR", "nohost:53")]).is_err());
    }

    #[test]
    fn empty_environment_variables_count_as_unset() {
        let s = settings(
            &[],
            &[("SKYDNS_DOMAIN", ""), ("SKYDNS_NAMESERVERS", ""), ("SKYDNS_ADDR", "")],
            None,
            None,
        );
        assert_eq!(s.skydns.domain, name("skydns.local."));
        assert!(s.nameservers.is_empty());
        assert_eq!(s.addr.port(), 53);
    }

    #[test]
    fn bad_path_prefixes_are_rejected() {
        let cli = cli(&["--path-prefix", "a/b"], &[]).unwrap();
        assert!(matches!(operator(&cli, None), Err(ConfigError::PathPrefix(_))));
        assert_eq!(path_prefix("/skydns/").unwrap(), "skydns");
        assert!(path_prefix("/").is_err());
    }

    #[test]
    fn unknown_toml_keys_are_rejected() {
        let err = FileConfig::parse("domian = \"typo.test.\"\n", Path::new("x.toml")).unwrap_err();
        assert!(matches!(err, ConfigError::Toml { .. }));
        assert!(err.to_string().contains("domian"), "{err}");
        assert!(FileConfig::parse("addr = \"localhost:53\"\n", Path::new("x.toml")).is_err());
        assert!(FileConfig::parse("workers = \"two\"\n", Path::new("x.toml")).is_err());
    }

    #[test]
    fn a_relative_records_path_is_relative_to_the_file() {
        assert_eq!(
            toml("records = \"records.json\"").records,
            Some(PathBuf::from("/etc/skyline/records.json"))
        );
        assert_eq!(
            toml("records = \"/srv/r.json\"").records,
            Some(PathBuf::from("/srv/r.json"))
        );
    }

    #[test]
    fn every_example_config_parses_and_resolves() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let file = FileConfig::load(&path).unwrap_or_else(|e| panic!("{e}"));
                let op = operator(&cli(&[], &[]).unwrap(), Some(&file))
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                resolve(op, None).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                kubernetes(&cli(&[], &[]).unwrap(), Some(&file)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                observe(&cli(&[], &[]).unwrap(), Some(&file)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                seen += 1;
            }
        }
        assert!(seen > 0, "no example configuration in {}", dir.display());
    }

    #[test]
    fn the_example_records_file_is_valid_throughout() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/records.json");
        let bytes = std::fs::read(&path).unwrap();
        let file = parse_records_file(&bytes, DEFAULT_PATH_PREFIX).unwrap();
        let rejected: Vec<_> = file
            .rejected
            .iter()
            .map(|r| format!("{}: {}", r.key, r.error))
            .collect();
        assert!(rejected.is_empty(), "{rejected:?}");
        assert!(file.records.len() > 20);
        let settings = resolve(operator(&cli(&[], &[]).unwrap(), None).unwrap(), file.config.as_ref()).unwrap();
        assert_eq!(settings.skydns.domain, name("skydns.local."));
        assert_eq!(settings.skydns.local, Some(name("node1.hosts.skydns.local.")));
    }

    #[test]
    fn the_http_listener_is_off_unless_asked_for() {
        assert_eq!(http_addr(&cli(&[], &[]).unwrap(), None), None);
        let file = toml("http_addr = \"127.0.0.1:9153\"");
        let addr = |text: &str| Some(text.parse::<SocketAddr>().unwrap());
        assert_eq!(http_addr(&cli(&[], &[]).unwrap(), Some(&file)), addr("127.0.0.1:9153"));
        let env = [("SKYLINE_HTTP_ADDR", "127.0.0.1:9154")];
        assert_eq!(http_addr(&cli(&[], &env).unwrap(), Some(&file)), addr("127.0.0.1:9154"));
        let flag = cli(&["--http-addr", "[::1]:0"], &env).unwrap();
        assert_eq!(http_addr(&flag, Some(&file)), addr("[::1]:0"));
        assert!(cli(&["--http-addr", "localhost:9153"], &[]).is_err());
        assert!(FileConfig::parse("http_addr = \"9153\"\n", Path::new("x.toml")).is_err());
    }

    #[test]
    fn the_drain_comes_from_the_flag_over_the_file() {
        assert_eq!(drain(&cli(&[], &[]).unwrap(), None).unwrap(), DEFAULT_DRAIN);
        let file = toml("drain = \"250ms\"");
        assert_eq!(
            drain(&cli(&[], &[]).unwrap(), Some(&file)).unwrap(),
            Duration::from_millis(250)
        );
        let flag = cli(&["--drain", "0s"], &[]).unwrap();
        assert_eq!(drain(&flag, Some(&file)).unwrap(), Duration::ZERO);
        assert!(matches!(
            drain(&cli(&[], &[]).unwrap(), Some(&toml("drain = \"soon\""))),
            Err(ConfigError::Drain(_))
        ));
        assert!(cli(&["--drain", "5"], &[]).is_err(), "a unit is required");
    }

    #[test]
    fn the_state_directory_and_its_maximum_age_come_from_flags_over_the_file() {
        assert_eq!(state(&cli(&[], &[]).unwrap(), None).unwrap(), None);
        let file = FileConfig::parse(
            "state_dir = \"state\"\nstate_max_age = \"90m\"\n",
            Path::new("/etc/x.toml"),
        )
        .unwrap();
        let from_file = state(&cli(&[], &[]).unwrap(), Some(&file)).unwrap().unwrap();
        assert_eq!(from_file.dir(), Path::new("/etc/state"), "relative to the file");
        assert_eq!(from_file.max_age(), Duration::from_secs(5400));
        let flags = cli(&["--state-dir", "/var/lib/skyline", "--state-max-age", "2h"], &[]).unwrap();
        let from_flags = state(&flags, Some(&file)).unwrap().unwrap();
        assert_eq!(from_flags.dir(), Path::new("/var/lib/skyline"));
        assert_eq!(from_flags.max_age(), Duration::from_secs(7200));
        let default = state(&cli(&["--state-dir", "d"], &[]).unwrap(), None).unwrap().unwrap();
        assert_eq!(default.max_age(), skyline_controlplane::state::DEFAULT_MAX_AGE);
        assert!(matches!(
            state(&cli(&[], &[]).unwrap(), Some(&toml("state_max_age = \"old\""))),
            Err(ConfigError::StateMaxAge(_))
        ));
    }

    #[test]
    fn tcp_caps_come_from_flags_over_the_file() {
        let defaults = tcp(&cli(&[], &[]).unwrap(), None).unwrap();
        assert_eq!(defaults, TcpConfig::default());
        assert_eq!(defaults.max_per_client, 0, "no per-address cap unless asked for");
        let file = toml("tcp_max_connections = 4096\ntcp_max_per_client = 64");
        let from_file = tcp(&cli(&[], &[]).unwrap(), Some(&file)).unwrap();
        assert_eq!((from_file.max_connections, from_file.max_per_client), (4096, 64));
        let flags = cli(&["--tcp-max-connections", "200", "--tcp-max-per-client", "0"], &[]).unwrap();
        let from_flags = tcp(&flags, Some(&file)).unwrap();
        assert_eq!((from_flags.max_connections, from_flags.max_per_client), (200, 0));
        let none = cli(&["--tcp-max-connections", "0"], &[]).unwrap();
        assert!(matches!(tcp(&none, None), Err(ConfigError::NoTcpConnections)));
    }

    #[test]
    fn kubernetes_is_off_unless_asked_for() {
        assert_eq!(kubernetes(&cli(&[], &[]).unwrap(), None).unwrap(), None);
        let on = kubernetes(&cli(&["--kubernetes"], &[]).unwrap(), None)
            .unwrap()
            .unwrap();
        assert_eq!(on.zones, kubernetes::Config::default());
        assert_eq!(on.options, KubernetesOptions::default());
        let table = toml("[kubernetes]\n");
        assert!(kubernetes(&cli(&[], &[]).unwrap(), Some(&table)).unwrap().is_some());
    }

    #[test]
    fn kubernetes_flags_win_over_the_table() {
        let table = toml(
            "[kubernetes]\nkubeconfig = \"kube.yaml\"\nzones = [\"cluster.example\", \"10.in-addr.arpa\"]\n\
             pods = \"verified\"\nttl = 30\nnamespaces = [\"a\"]\nignore_empty_service = true\n\
             fallthrough = []\nlabels = \"app=x\"\napiserver_qps = 20\n",
        );
        let k = kubernetes(&cli(&[], &[]).unwrap(), Some(&table)).unwrap().unwrap();
        assert_eq!(k.options.kubeconfig, Some(PathBuf::from("/etc/skyline/kube.yaml")));
        assert_eq!(k.zones.zones, [name("cluster.example."), name("10.in-addr.arpa.")]);
        assert_eq!((k.zones.pods, k.zones.ttl), (PodMode::Verified, 30));
        assert!(k.options.pods && k.zones.ignore_empty_service);
        assert_eq!(k.zones.fallthrough, Some(vec![]));
        assert_eq!(k.options.labels.as_deref(), Some("app=x"));
        assert_eq!(k.options.qps, Some(20));
        let flags = cli(
            &[
                "--kubernetes-ttl",
                "7",
                "--kubernetes-pods",
                "insecure",
                "--kubeconfig",
                "/k",
            ],
            &[],
        )
        .unwrap();
        let k = kubernetes(&flags, Some(&table)).unwrap().unwrap();
        assert_eq!((k.zones.pods, k.zones.ttl), (PodMode::Insecure, 7));
        assert!(!k.options.pods, "no Pod watch unless verified");
        assert_eq!(k.options.kubeconfig, Some(PathBuf::from("/k")));
    }

    #[test]
    fn invalid_kubernetes_settings_are_rejected() {
        for args in [
            &["--kubernetes-ttl", "3601"][..],
            &["--kubernetes-pods", "sometimes"],
            &["--kubernetes-zones", "in-addr.arpa"],
            &["--kubernetes-zones", "a..b"],
        ] {
            let parsed = cli(args, &[]).unwrap();
            assert!(
                matches!(kubernetes(&parsed, None), Err(ConfigError::Kubernetes { .. })),
                "{args:?}"
            );
        }
        assert!(FileConfig::parse("[kubernetes]\nendpoint = \"x\"\n", Path::new("x.toml")).is_err());
    }
}
