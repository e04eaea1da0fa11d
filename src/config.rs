//! The configuration file's reader (the [`FileConfig`] that `crate::settings` declares, read
//! from TOML or, through its `corefile` key, from a Corefile), and the stacking of every setting
//! into one [`Settings`].
//!
//! Precedence, highest first: command-line flags, environment variables (clap applies these two),
//! the TOML file given with `--config` ([`crate::cli::Cli::given`] stacks these), the records
//! file's or etcd's `/<prefix>/config` object, the defaults. SkyDNS itself lets its etcd config
//! override flags; skyline lets what the operator typed win over data, so that a stray key in
//! the data cannot move the server elsewhere.
//!
//! Resolution is pure: [`operator`] turns what the operator gave into what decides the data
//! source (the records file or etcd, and the prefix) and the settings that override the data's
//! own `/<prefix>/config`; [`resolve`] stacks those over that object. Both sources apply the same
//! stacking whenever that object changes, for the settings that shape answers (domain, TTLs,
//! priority, hostmaster, local, round robin); the listen address, the workers, the prefix and the
//! etcd connection are fixed at start.
//!
//! The data source: etcd when `machines` is set, else the records file when `records` is set,
//! else an empty zone. Setting both is an error, so that it is never a guess which one serves.
//! Every setting, its flag, variable, key, default and what a SIGHUP does with it, is declared in
//! [`crate::settings`]; `/<prefix>/config` also sets `ttl`, `min_ttl` and `priority` (3600, 60
//! and 10 by default), which have no flag.

use crate::observe::ObserveError;
use crate::protection::ProtectionError;
use crate::settings::{
    CacheFile, CookiesFile, EtcdFile, FileConfig, ForwardFile, Given, HostsFile, Invalid, KubernetesFile, Main,
    MainFile, ObserveFile, PluginsFile, RewriteFile, RrlFile, TemplateFile,
};
use skyline_controlplane::etcd::EtcdOptions;
use skyline_controlplane::hosts::{parse_inline, HostsOptions};
use skyline_controlplane::kubernetes::KubernetesOptions;
use skyline_controlplane::skydns::config::{self as skydns_config, ConfigPatch};
use skyline_controlplane::state::StateDir;
use skyline_dataplane::io::XdpConfig;
use skyline_dataplane::snapshot::hosts_file;
use skyline_dataplane::snapshot::kubernetes::{self, PodMode};
use skyline_dataplane::snapshot::skydns::Config;
use skyline_dataplane::wire::Name;
use skyline_dataplane::worker::TcpConfig;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

/// Where a pod's service account is mounted, which a Kubernetes client uses in a cluster.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

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
    /// The TOML file is not valid TOML.
    #[error("configuration file {path}: {source}")]
    Toml {
        /// The file.
        path: PathBuf,
        /// What is wrong, with its line and column.
        source: toml::de::Error,
    },
    /// A value of the file is not of its key's type.
    #[error("configuration file {path}: {problem}")]
    FileValue {
        /// The file.
        path: PathBuf,
        /// The key, the value and what it must be.
        problem: Invalid,
    },
    /// A key no setting has.
    #[error("configuration file {path}: unknown key {key}: {hint}")]
    UnknownKey {
        /// The file.
        path: PathBuf,
        /// The key, `table.key` inside a table.
        key: String,
        /// Where it belongs, or the key it is closest to.
        hint: String,
    },
    /// A group's name given a value that is not a table.
    #[error("configuration file {path}: {table} is {found}, not a table: write its keys under [{table}]")]
    NotATable {
        /// The file.
        path: PathBuf,
        /// The group.
        table: &'static str,
        /// The TOML type it has instead.
        found: &'static str,
    },
    /// A value of the file that does not convert to its setting's type.
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// A Corefile that cannot run: its file, line and plugin named.
    #[error(transparent)]
    Corefile(#[from] crate::corefile::Problem),
    /// A setting's value is not valid.
    #[error(transparent)]
    Setting(#[from] skydns_config::ConfigError),
    /// The path prefix cannot be a key's first element.
    #[error("path_prefix: {0:?} must be one non-empty key element, without '/'")]
    PathPrefix(String),
    /// The resolv.conf given gives no upstream, or a set of TLS upstreams cannot be set up.
    #[error("{0}")]
    ResolvConf(#[from] crate::forwarding::ResolvConfError),
    /// A dnstap, query-log or top-talker setting is not valid.
    #[error("observe.{0}")]
    Observe(#[from] ObserveError),
    /// A cookie or rate-limiting setting is not valid.
    #[error(transparent)]
    Protection(#[from] ProtectionError),
    /// A `rewrite` rule, `template` or `whoami` zone is not valid.
    #[error(transparent)]
    Plugins(#[from] skyline_dataplane::rewrite::PluginError),
    /// A `[kubernetes]` setting or `--kubernetes-*` flag is not valid.
    #[error("kubernetes.{key}: {message}")]
    Kubernetes {
        /// The setting.
        key: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A `[hosts]` setting or `--hosts*` flag is not valid.
    #[error("hosts.{key}: {message}")]
    Hosts {
        /// The setting.
        key: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The hosts file cannot be read, or a line of it is not an entry.
    #[error("hosts.file {path}: {source}")]
    HostsFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: skyline_controlplane::hosts::HostsError,
    },
    /// A DNS over TCP connection cap is not usable.
    #[error("tcp_max_connections: a worker must be able to hold at least one connection")]
    NoTcpConnections,
    /// An etcd endpoint with a scheme the etcd client does not speak.
    #[error(
        "machines (--machines, ETCD_MACHINES): {endpoint} is not an etcd endpoint: write \
         http://host:port or https://host:port"
    )]
    EtcdScheme {
        /// The endpoint.
        endpoint: String,
    },
    /// The etcd connection settings do not go together, or a TLS file cannot be read.
    #[error(transparent)]
    Etcd(#[from] skyline_controlplane::etcd::OptionsError),
    /// The records file cannot be read or parsed.
    #[error("records file {path}: {source}")]
    Records {
        /// The file.
        path: PathBuf,
        /// Why (boxed: the largest of the causes, and a cold path).
        source: Box<skyline_controlplane::source::records_file::FileError>,
    },
    /// A directory setting names a path where a file is in the way.
    #[error("{setting}: {path} cannot be a directory: {file} is a file")]
    NotADirectory {
        /// The setting, its key and flag.
        setting: &'static str,
        /// The directory named.
        path: PathBuf,
        /// The file on its path.
        file: PathBuf,
    },
    /// A file setting names a directory.
    #[error("{setting}: {path} is a directory, not a file")]
    IsADirectory {
        /// The setting, its key and flag.
        setting: &'static str,
        /// The path named.
        path: PathBuf,
    },
    /// A file setting names a file in a directory that does not exist.
    #[error("{setting}: {path}: the directory {dir} does not exist")]
    NoDirectory {
        /// The setting, its key and flag.
        setting: &'static str,
        /// The file named.
        path: PathBuf,
        /// Its directory.
        dir: PathBuf,
    },
    /// The kubeconfig named cannot be read.
    #[error("{setting}: cannot read {path}: {source}")]
    Kubeconfig {
        /// Where the file is named: the setting, or the variable.
        setting: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// No kubeconfig was given or found, and this is not a pod with a service account.
    #[error(
        "kubernetes: no connection to an API server: no kubernetes.kubeconfig (--kubeconfig), \
         no KUBECONFIG, no {home}, and no in-cluster service account (KUBERNETES_SERVICE_HOST \
         and {SERVICE_ACCOUNT_DIR})"
    )]
    NoKubeconfig {
        /// The default kubeconfig's path in this user's home.
        home: String,
    },
    /// Both data sources are set.
    #[error("both a records file ({records}) and etcd (machines) are set; choose one data source")]
    TwoSources {
        /// The records file.
        records: PathBuf,
    },
}

/// The Kubernetes source's settings, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct KubernetesSettings {
    /// Connection and watches.
    pub options: KubernetesOptions,
    /// What the cluster zones answer.
    pub zones: kubernetes::Config,
}

/// The tables of the file and their keys, for the hint an unknown key gets.
const TABLES: &[(&str, &[&str])] = &[
    ("forward", ForwardFile::KEYS),
    ("cache", CacheFile::KEYS),
    ("kubernetes", KubernetesFile::KEYS),
    ("hosts", HostsFile::KEYS),
    ("observe", ObserveFile::KEYS),
    ("cookies", CookiesFile::KEYS),
    ("rrl", RrlFile::KEYS),
    ("rewrite", RewriteFile::KEYS),
    ("template", TemplateFile::KEYS),
];

/// The reading of the file whose tables `crate::settings` declares: it lives here, above the
/// Corefile front end, because a `--config` file's `corefile` key reads a Corefile beneath it.
impl FileConfig {
    /// Parses TOML text read from `path`, whose directory anchors relative file paths; every
    /// value of the wrong type and every unknown key is reported, not only the first.
    pub fn parse(text: &str, path: &Path) -> Result<FileConfig, Vec<ConfigError>> {
        let mut top: toml::Table = text.parse().map_err(|source| {
            vec![ConfigError::Toml {
                path: path.to_owned(),
                source,
            }]
        })?;
        let mut reading = Reading {
            path,
            invalid: Vec::new(),
            problems: Vec::new(),
        };
        let corefile = match top.remove("corefile") {
            Some(toml::Value::String(name)) => {
                let dir = path.parent().unwrap_or(Path::new(""));
                Some(dir.join(name))
            }
            Some(other) => {
                reading.invalid.push(Invalid {
                    key: "corefile",
                    reason: format!("{} is not a path", other.type_str()),
                });
                None
            }
            None => None,
        };
        let file = FileConfig {
            forward: reading.table(&mut top, "forward", ForwardFile::take),
            cache: reading.table(&mut top, "cache", CacheFile::take),
            kubernetes: reading.table(&mut top, "kubernetes", KubernetesFile::take),
            hosts: reading.table(&mut top, "hosts", HostsFile::take),
            observe: reading.table(&mut top, "observe", ObserveFile::take),
            cookies: reading.table(&mut top, "cookies", CookiesFile::take),
            rrl: reading.table(&mut top, "rrl", RrlFile::take),
            rewrite: reading.table(&mut top, "rewrite", RewriteFile::take),
            template: reading.table(&mut top, "template", TemplateFile::take),
            main: MainFile::take(&mut top, &mut reading.invalid),
            etcd: EtcdFile::take(&mut top, &mut reading.invalid),
            plugins: PluginsFile::take(&mut top, &mut reading.invalid),
            dir: path.parent().map(Path::to_owned).unwrap_or_default(),
            notes: Vec::new(),
        };
        let mut problems: Vec<ConfigError> = reading
            .invalid
            .into_iter()
            .map(|problem| ConfigError::FileValue {
                path: path.to_owned(),
                problem,
            })
            .collect();
        problems.extend(reading.problems);
        problems.extend(top.keys().map(|key| unknown_key(path, None, key)));
        if !problems.is_empty() {
            return Err(problems);
        }
        match corefile {
            Some(corefile) => Ok(file.over(FileConfig::corefile(&corefile)?)),
            None => Ok(file),
        }
    }

    /// Reads and translates the Corefile at `path`.
    pub fn corefile(path: &Path) -> Result<FileConfig, Vec<ConfigError>> {
        let (file, notes) = crate::corefile::load(path)
            .map_err(|problems| problems.into_iter().map(ConfigError::from).collect::<Vec<_>>())?;
        Ok(FileConfig { notes, ..file })
    }

    /// The configuration `cli` names: its `--config` file or its `--corefile`, if any.
    pub fn given(cli: &crate::cli::Cli) -> Result<Option<FileConfig>, Vec<ConfigError>> {
        match (&cli.config, &cli.corefile) {
            (Some(path), _) => FileConfig::load(path).map(Some),
            (None, Some(path)) => FileConfig::corefile(path).map(Some),
            (None, None) => Ok(None),
        }
    }

    /// This file's keys over `under`'s, table by table.
    fn over(self, under: FileConfig) -> FileConfig {
        fn table<T>(over: Option<T>, under: Option<T>, or: fn(T, T) -> T) -> Option<T> {
            match (over, under) {
                (Some(over), Some(under)) => Some(or(over, under)),
                (over, under) => over.or(under),
            }
        }
        FileConfig {
            main: self.main.or(under.main),
            etcd: self.etcd.or(under.etcd),
            forward: table(self.forward, under.forward, ForwardFile::or),
            cache: table(self.cache, under.cache, CacheFile::or),
            kubernetes: table(self.kubernetes, under.kubernetes, KubernetesFile::or),
            hosts: table(self.hosts, under.hosts, HostsFile::or),
            observe: table(self.observe, under.observe, ObserveFile::or),
            cookies: table(self.cookies, under.cookies, CookiesFile::or),
            rrl: table(self.rrl, under.rrl, RrlFile::or),
            rewrite: table(self.rewrite, under.rewrite, RewriteFile::or),
            template: table(self.template, under.template, TemplateFile::or),
            plugins: self.plugins.or(under.plugins),
            dir: self.dir,
            notes: under.notes,
        }
    }

    /// Reads and parses the file at `path`.
    pub fn load(path: &Path) -> Result<FileConfig, Vec<ConfigError>> {
        let text = std::fs::read_to_string(path).map_err(|source| {
            vec![ConfigError::Read {
                path: path.to_owned(),
                source,
            }]
        })?;
        FileConfig::parse(&text, path)
    }
}

/// The problems found while a file is read, beside the values that did convert.
struct Reading<'a> {
    path: &'a Path,
    /// Values of the wrong type.
    invalid: Vec<Invalid>,
    /// Unknown keys, and groups that are not tables.
    problems: Vec<ConfigError>,
}

impl Reading<'_> {
    /// The table `name` taken out of `top` and its keys taken with `take`; a `name` that is not
    /// a table, and the keys `take` leaves, are problems.
    fn table<F>(
        &mut self,
        top: &mut toml::Table,
        name: &'static str,
        take: fn(&mut toml::Table, &mut Vec<Invalid>) -> F,
    ) -> Option<F> {
        let mut table = match top.remove(name)? {
            toml::Value::Table(table) => table,
            other => {
                self.problems.push(ConfigError::NotATable {
                    path: self.path.to_owned(),
                    table: name,
                    found: other.type_str(),
                });
                return None;
            }
        };
        let file = take(&mut table, &mut self.invalid);
        let path = self.path;
        self.problems
            .extend(table.keys().map(|key| unknown_key(path, Some(name), key)));
        Some(file)
    }
}

/// An unknown key of the table `table` (`None`: the top level), with a hint at where it
/// belongs: the table that has it, the top level, or the known key it is closest to.
fn unknown_key(path: &Path, table: Option<&'static str>, key: &str) -> ConfigError {
    let top_level = || MainFile::KEYS.iter().chain(EtcdFile::KEYS).chain(PluginsFile::KEYS);
    let homes: Vec<String> = TABLES
        .iter()
        .filter(|(name, keys)| Some(*name) != table && keys.contains(&key))
        .map(|(name, _)| format!("[{name}]"))
        .collect();
    // The flag's spelling of a table's key: `forward_timeout` or `cookie_secret` for the
    // `timeout` of [forward] or the `secret` of [cookies].
    let flag_form = TABLES.iter().find_map(|(name, keys)| {
        let singular = name.strip_suffix('s').unwrap_or(name);
        [*name, singular].iter().find_map(|prefix| {
            let rest = key.strip_prefix(prefix)?.strip_prefix('_')?;
            keys.contains(&rest)
                .then(|| format!("write it as {rest} in the [{name}] table"))
        })
    });
    let hint = if table.is_some() && top_level().any(|k| *k == key) {
        "it is a top-level key: write it before the first [table]".to_owned()
    } else if !homes.is_empty() {
        format!("it belongs in the {} table", homes.join(" or "))
    } else if let Some(hint) = flag_form.filter(|_| table.is_none()) {
        hint
    } else {
        let known: Vec<&str> = match table {
            None => top_level()
                .copied()
                .chain(TABLES.iter().map(|(name, _)| *name))
                .collect(),
            Some(name) => TABLES
                .iter()
                .find(|(t, _)| *t == name)
                .map_or(Vec::new(), |(_, keys)| keys.to_vec()),
        };
        match known.iter().find(|k| edit_distance(k, key) <= 2) {
            Some(close) => format!("did you mean {close}?"),
            None => "docs/settings.md lists every key and its table".to_owned(),
        }
    };
    ConfigError::UnknownKey {
        path: path.to_owned(),
        key: table.map_or_else(|| key.to_owned(), |t| format!("{t}.{key}")),
        hint,
    }
}

/// Levenshtein distance, for the hint at a misspelt key.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
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

/// What the operator gave that decides the data source and overrides the data's
/// `/<prefix>/config`: the settings with a `data` key go to [`Operator::overrides`].
pub fn operator(given: &Given) -> Result<Operator, ConfigError> {
    let main = &given.main;
    let addrs = main.addr.clone().unwrap_or_default();
    let mut overrides = ConfigPatch {
        dns_addr: addrs.first().copied(),
        no_rec: given.forward.no_rec,
        ns_rotate: given.forward.ns_rotate,
        domain: main.domain.clone(),
        local: main.local.clone(),
        hostmaster: main.hostmaster.clone(),
        round_robin: main.round_robin,
        wildcards_marker: main.wildcards_marker,
        cname_chains: main.cname_chains,
        fallthrough: main.fallthrough,
        dnssec: main.dnssec.as_ref().map(|p| p.to_string_lossy().into_owned()),
        scache: main.scache,
        nameservers: main.nameservers.clone(),
        ndots: main.ndots,
        ..ConfigPatch::default()
    };
    if overrides.ndots == Some(0) {
        overrides.ndots = None;
    }
    if overrides.nameservers.as_ref().is_some_and(Vec::is_empty) {
        overrides.nameservers = None;
    }
    let etcd = &given.etcd;
    let etcd = etcd.machines.clone().map(|endpoints| EtcdOptions {
        endpoints,
        tls_key: etcd.tls_key.clone(),
        tls_pem: etcd.tls_pem.clone(),
        ca_cert: etcd.ca_cert.clone(),
        username: etcd.username.clone(),
        password: etcd.password.clone(),
        discover: main.discover,
    });
    let endpoints = etcd.iter().flat_map(|etcd| &etcd.endpoints);
    if let Some(endpoint) = endpoints.map(|e| e.trim()).find(|e| !etcd_scheme(e)) {
        return Err(ConfigError::EtcdScheme {
            endpoint: endpoint.to_owned(),
        });
    }
    if let (Some(records), Some(_)) = (&main.records, &etcd) {
        return Err(ConfigError::TwoSources {
            records: records.clone(),
        });
    }
    Ok(Operator {
        overrides,
        path_prefix: path_prefix(&main.path_prefix)?,
        records: main.records.clone(),
        etcd,
        workers: main.workers,
        pin: !main.no_pin,
        extra_addrs: addrs.into_iter().skip(1).collect(),
    })
}

/// The persisted snapshot's directory and maximum age; `None` without a directory: nothing is
/// persisted.
pub fn state(main: &Main) -> Option<StateDir> {
    main.state_dir.clone().map(|dir| StateDir::new(dir, main.state_max_age))
}

/// Serving UDP through AF_XDP, when `--xdp` names an interface.
pub fn xdp(main: &Main) -> Option<XdpConfig> {
    main.xdp.as_ref().map(|interface| XdpConfig {
        interface: interface.clone(),
        mode: main.xdp_mode,
        frames: main.xdp_frames,
        fallback: main.xdp_fallback,
    })
}

/// DNS over TCP limits.
pub fn tcp(main: &Main) -> Result<TcpConfig, ConfigError> {
    let config = TcpConfig {
        max_connections: main.tcp_max_connections,
        max_per_client: main.tcp_max_per_client,
        ..TcpConfig::default()
    };
    if config.max_connections == 0 {
        return Err(ConfigError::NoTcpConnections);
    }
    Ok(config)
}

/// The Kubernetes source's settings over CoreDNS's defaults; `None` when cluster DNS is off.
pub fn kubernetes(given: &Given) -> Result<Option<KubernetesSettings>, ConfigError> {
    if !given.kubernetes_on {
        return Ok(None);
    }
    let k = &given.kubernetes;
    let zones = match &k.zones {
        Some(zones) => zones
            .iter()
            .map(|z| kube_zone("zones", z))
            .collect::<Result<Vec<_>, _>>()?,
        None => kubernetes::Config::default().zones,
    };
    if !zones.iter().any(|z| !kubernetes::is_reverse(z)) {
        return Err(ConfigError::Kubernetes {
            key: "zones",
            message: "at least one zone must be a forward zone (like cluster.local.)".into(),
        });
    }
    let pods = match k.pods.as_deref() {
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
    if k.ttl > kubernetes::MAX_TTL {
        return Err(ConfigError::Kubernetes {
            key: "ttl",
            message: format!("{} is above {}", k.ttl, kubernetes::MAX_TTL),
        });
    }
    let fallthrough = k
        .fallthrough
        .as_ref()
        .map(|zones| zones.iter().map(|z| kube_zone("fallthrough", z)).collect())
        .transpose()?;
    let autopath = if k.autopath {
        if pods != PodMode::Verified {
            return Err(ConfigError::Kubernetes {
                key: "autopath",
                message: "autopath needs pods = \"verified\" (--kubernetes-pods verified): only the watched \
                          Pods say which namespace a client is in"
                    .into(),
            });
        }
        let search = k.autopath_search.as_deref().unwrap_or_default();
        Some(
            search
                .iter()
                .map(|d| kube_zone("autopath_search", d))
                .collect::<Result<_, _>>()?,
        )
    } else {
        if k.autopath_search.is_some() {
            return Err(ConfigError::Kubernetes {
                key: "autopath_search",
                message: "search domains without autopath = true (--kubernetes-autopath) do nothing".into(),
            });
        }
        None
    };
    let zones = kubernetes::Config {
        zones,
        ttl: k.ttl,
        pods,
        endpoint_pod_names: k.endpoint_pod_names,
        ignore_empty_service: k.ignore_empty_service,
        namespaces: k.namespaces.clone().unwrap_or_default(),
        fallthrough,
        openshift_names: k.openshift_names,
        autopath,
    };
    if let Some(url) = &k.endpoint {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(ConfigError::Kubernetes {
                key: "endpoint",
                message: format!("{url:?} is not a URL such as https://10.96.0.1:443"),
            });
        }
    }
    let options = KubernetesOptions {
        kubeconfig: k.kubeconfig.clone(),
        context: k.context.clone(),
        endpoint: k.endpoint.clone(),
        labels: k.labels.clone(),
        namespace_labels: k.namespace_labels.clone(),
        noendpoints: k.noendpoints,
        pods: pods == PodMode::Verified,
        qps: k.apiserver_qps,
    };
    Ok(Some(KubernetesSettings { options, zones }))
}

fn kube_zone(key: &'static str, text: &str) -> Result<Name, ConfigError> {
    Name::from_dotted(text).map_err(|_| ConfigError::Kubernetes {
        key,
        message: format!("{text:?} is not a domain name"),
    })
}

/// The `ttl`s CoreDNS's `hosts` accepts. `--help` states the same range (a test in
/// `crate::settings` keeps the two together).
pub const HOSTS_TTL: RangeInclusive<u32> = 1..=65535;

/// The hosts source's settings over CoreDNS's defaults, the inline entries read; `None` when
/// neither a file nor an inline entry is given.
pub fn hosts(given: &Given) -> Result<Option<HostsOptions>, ConfigError> {
    let h = &given.hosts;
    let lines = h.inline.clone().unwrap_or_default();
    if h.file.is_none() && lines.is_empty() {
        if given.hosts_given {
            return Err(ConfigError::Hosts {
                key: "file",
                message: "hosts settings are given without a file (--hosts) or an inline entry (--hosts-entry)".into(),
            });
        }
        return Ok(None);
    }
    let zone = |key: &'static str, text: &String| {
        Name::from_dotted(text).map_err(|_| ConfigError::Hosts {
            key,
            message: format!("{text:?} is not a domain name"),
        })
    };
    let zones = match &h.zones {
        Some(zones) if !zones.is_empty() => zones.iter().map(|z| zone("zones", z)).collect::<Result<_, _>>()?,
        _ => hosts_file::Config::default().zones,
    };
    let fallthrough = h
        .fallthrough
        .as_ref()
        .map(|zones| zones.iter().map(|z| zone("fallthrough", z)).collect())
        .transpose()?;
    if !HOSTS_TTL.contains(&h.ttl) {
        let (first, last) = HOSTS_TTL.into_inner();
        return Err(ConfigError::Hosts {
            key: "ttl",
            message: format!("{} is not from {first} to {last}", h.ttl),
        });
    }
    let inline = parse_inline(&lines).map_err(|e| ConfigError::Hosts {
        key: "inline",
        message: e.to_string(),
    })?;
    Ok(Some(HostsOptions {
        file: h.file.clone(),
        inline,
        config: hosts_file::Config {
            zones,
            ttl: h.ttl,
            reverse: !h.no_reverse,
            fallthrough,
        },
        reload: h.reload,
    }))
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

/// Whether the etcd client can dial `endpoint`: `http://` or `https://`, or `host:port` alone
/// (plain HTTP); an empty one is skipped.
fn etcd_scheme(endpoint: &str) -> bool {
    match endpoint.split_once("://") {
        Some((scheme, _)) => scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https"),
        None => true,
    }
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
    use crate::cli::Cli;
    use crate::settings::{DEFAULT_DRAIN, DEFAULT_PATH_PREFIX};
    use skyline_controlplane::source::records_file::parse_records_file;
    use skyline_dataplane::wire::Name;
    use std::sync::Mutex;
    use std::time::Duration;

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

    /// The settings `cli` and `file` give, every file value valid.
    fn given(cli: &Cli, file: Option<&FileConfig>) -> Given {
        cli.given_valid(file).unwrap()
    }

    fn settings(args: &[&str], env: &[(&str, &str)], file: Option<&str>, records: Option<&str>) -> Settings {
        let cli = cli(args, env).unwrap();
        let file = file.map(toml);
        let records = records.map(|r| ConfigPatch::parse(r.as_bytes()).unwrap());
        resolve(operator(&given(&cli, file.as_ref())).unwrap(), records.as_ref()).unwrap()
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
        assert!(matches!(
            operator(&given(&both, None)),
            Err(ConfigError::TwoSources { .. })
        ));
        let etcd = cli(&["--machines", "http://127.0.0.1:2379"], &[]).unwrap();
        let file = toml("records = \"records.json\"");
        assert!(matches!(
            operator(&given(&etcd, Some(&file))),
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
        assert!(matches!(operator(&given(&cli, None)), Err(ConfigError::PathPrefix(_))));
        assert_eq!(path_prefix("/skydns/").unwrap(), "skydns");
        assert!(path_prefix("/").is_err());
    }

    /// Every problem of the file `text`, as the messages read.
    fn file_problems(text: &str) -> Vec<String> {
        match FileConfig::parse(text, Path::new("x.toml")) {
            Ok(_) => Vec::new(),
            Err(problems) => problems.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn unknown_toml_keys_are_rejected_with_a_hint_at_their_table() {
        let problems = file_problems("domian = \"typo.test.\"\n");
        assert_eq!(
            problems,
            ["configuration file x.toml: unknown key domian: did you mean domain?"]
        );
        let problems = file_problems("timeout = \"2s\"\nforward_timeout = \"2s\"\n[cache]\ndomain = \"a.\"\n");
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(
            problems
                .iter()
                .any(|p| p.contains("unknown key timeout: it belongs in the [forward] table")),
            "{problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("forward_timeout: write it as timeout in the [forward] table")),
            "{problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("cache.domain: it is a top-level key")),
            "{problems:?}"
        );
        assert_eq!(
            file_problems("forward = 1\n"),
            ["configuration file x.toml: forward is integer, not a table: write its keys under [forward]"]
        );
    }

    #[test]
    fn every_value_of_the_wrong_type_is_named_not_only_the_first() {
        let problems = file_problems(
            "workers = \"two\"\naddr = \"127.0.0.1\"\nround_robin = \"yes\"\n[rrl]\nslip = -1\n[cache]\nsize = 5\n",
        );
        assert_eq!(
            problems,
            [
                "configuration file x.toml: cache.size: 5 is not a string",
                "configuration file x.toml: rrl.slip: -1 is not a whole number from 0 to 4294967295",
                "configuration file x.toml: addr: \"127.0.0.1\" has no port: write IP:port, e.g. \"127.0.0.1:53\"",
                "configuration file x.toml: round_robin: \"yes\" is not true or false",
                "configuration file x.toml: workers: \"two\" is not a whole number, 0 or more",
            ]
        );
        let host = file_problems("addr = \"localhost:53\"\n");
        assert_eq!(
            host,
            [
                "configuration file x.toml: addr: \"localhost:53\" is not an \"IP:port\" address or a list of them \
              (host names are not accepted)"
            ]
        );
        let syntax = file_problems("hostmaster = [\n");
        assert_eq!(syntax.len(), 1);
        assert!(syntax[0].contains("line 1"), "{syntax:?}");
    }

    #[test]
    fn a_relative_records_path_is_relative_to_the_file() {
        let records = |text| given(&cli(&[], &[]).unwrap(), Some(&toml(text))).main.records;
        assert_eq!(
            records("records = \"records.json\""),
            Some(PathBuf::from("/etc/skyline/records.json"))
        );
        assert_eq!(records("records = \"/srv/r.json\""), Some(PathBuf::from("/srv/r.json")));
    }

    /// Each example passes the validation a start makes, given the files it names outside the
    /// repository (a kubeconfig, etcd's TLS files), which a machine running it has; without
    /// them the start, and so the check, fails (tests/check_config.rs).
    #[test]
    fn every_example_config_passes_the_validation_of_a_start() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
        let outside = tempfile::tempdir().unwrap();
        let supplied = |name: &str| {
            let path = outside.path().join(name);
            std::fs::write(&path, "supplied by the test\n").unwrap();
            path.to_str().unwrap().to_owned()
        };
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            let file = FileConfig::load(&path).unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
            let mut args = Vec::new();
            if file.kubernetes.as_ref().is_some_and(|k| k.kubeconfig.is_some()) {
                args.extend(["--kubeconfig".to_owned(), supplied("kubeconfig.yaml")]);
            }
            for (flag, set) in [
                ("--tls-key", file.etcd.tls_key.is_some()),
                ("--tls-pem", file.etcd.tls_pem.is_some()),
                ("--ca-cert", file.etcd.ca_cert.is_some()),
            ] {
                if set {
                    args.extend([flag.to_owned(), supplied(flag)]);
                }
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let valid = crate::validate::validate(&cli(&args, &[]).unwrap(), Some(&file)).unwrap_or_else(|e| {
                let problems: Vec<String> = e.iter().map(ToString::to_string).collect();
                panic!("{}: {problems:?}", path.display())
            });
            let data = valid
                .operator
                .records
                .as_ref()
                .map(|records| crate::validate::records(records, &valid.operator.path_prefix).unwrap());
            valid
                .over_data(data.and_then(|d| d.config).as_ref())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            seen += 1;
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
        let operator = operator(&given(&cli(&[], &[]).unwrap(), None)).unwrap();
        let settings = resolve(operator, file.config.as_ref()).unwrap();
        assert_eq!(settings.skydns.domain, name("skydns.local."));
        assert_eq!(settings.skydns.local, Some(name("node1.hosts.skydns.local.")));
    }

    #[test]
    fn the_http_listener_is_off_unless_asked_for() {
        assert_eq!(given(&cli(&[], &[]).unwrap(), None).main.http_addr, None);
        let file = toml("http_addr = \"127.0.0.1:9153\"");
        let addr = |text: &str| Some(vec![text.parse::<SocketAddr>().unwrap()]);
        assert_eq!(
            given(&cli(&[], &[]).unwrap(), Some(&file)).main.http_addr,
            addr("127.0.0.1:9153")
        );
        let env = [("SKYLINE_HTTP_ADDR", "127.0.0.1:9154")];
        assert_eq!(
            given(&cli(&[], &env).unwrap(), Some(&file)).main.http_addr,
            addr("127.0.0.1:9154")
        );
        let flag = cli(&["--http-addr", "[::1]:0"], &env).unwrap();
        assert_eq!(given(&flag, Some(&file)).main.http_addr, addr("[::1]:0"));
        assert!(cli(&["--http-addr", "localhost:9153"], &[]).is_err());
        assert!(FileConfig::parse("http_addr = \"9153\"\n", Path::new("x.toml")).is_err());
        let several = cli(&["--http-addr", "127.0.0.1:8080,127.0.0.1:8181"], &[]).unwrap();
        assert_eq!(given(&several, None).main.http_addr.map(|a| a.len()), Some(2));
    }

    #[test]
    fn the_drain_comes_from_the_flag_over_the_file() {
        assert_eq!(given(&cli(&[], &[]).unwrap(), None).main.drain, DEFAULT_DRAIN);
        let file = toml("drain = \"250ms\"");
        assert_eq!(
            given(&cli(&[], &[]).unwrap(), Some(&file)).main.drain,
            Duration::from_millis(250)
        );
        let flag = cli(&["--drain", "0s"], &[]).unwrap();
        assert_eq!(given(&flag, Some(&file)).main.drain, Duration::ZERO);
        assert!(matches!(
            cli(&[], &[]).unwrap().given_valid(Some(&toml("drain = \"soon\""))),
            Err(Invalid { key: "drain", .. })
        ));
        assert!(cli(&["--drain", "5"], &[]).is_err(), "a unit is required");
    }

    #[test]
    fn the_state_directory_and_its_maximum_age_come_from_flags_over_the_file() {
        assert_eq!(state(&given(&cli(&[], &[]).unwrap(), None).main), None);
        let file = FileConfig::parse(
            "state_dir = \"state\"\nstate_max_age = \"90m\"\n",
            Path::new("/etc/x.toml"),
        )
        .unwrap();
        let from_file = state(&given(&cli(&[], &[]).unwrap(), Some(&file)).main).unwrap();
        assert_eq!(from_file.dir(), Path::new("/etc/state"), "relative to the file");
        assert_eq!(from_file.max_age(), Duration::from_secs(5400));
        let flags = cli(&["--state-dir", "/var/lib/skyline", "--state-max-age", "2h"], &[]).unwrap();
        let from_flags = state(&given(&flags, Some(&file)).main).unwrap();
        assert_eq!(from_flags.dir(), Path::new("/var/lib/skyline"));
        assert_eq!(from_flags.max_age(), Duration::from_secs(7200));
        let default = state(&given(&cli(&["--state-dir", "d"], &[]).unwrap(), None).main).unwrap();
        assert_eq!(default.max_age(), skyline_controlplane::state::DEFAULT_MAX_AGE);
        assert!(matches!(
            cli(&[], &[])
                .unwrap()
                .given_valid(Some(&toml("state_max_age = \"old\""))),
            Err(Invalid {
                key: "state_max_age",
                ..
            })
        ));
    }

    #[test]
    fn tcp_caps_come_from_flags_over_the_file() {
        let defaults = tcp(&given(&cli(&[], &[]).unwrap(), None).main).unwrap();
        assert_eq!(defaults, TcpConfig::default());
        assert_eq!(defaults.max_per_client, 0, "no per-address cap unless asked for");
        let file = toml("tcp_max_connections = 4096\ntcp_max_per_client = 64");
        let from_file = tcp(&given(&cli(&[], &[]).unwrap(), Some(&file)).main).unwrap();
        assert_eq!((from_file.max_connections, from_file.max_per_client), (4096, 64));
        let flags = cli(&["--tcp-max-connections", "200", "--tcp-max-per-client", "0"], &[]).unwrap();
        let from_flags = tcp(&given(&flags, Some(&file)).main).unwrap();
        assert_eq!((from_flags.max_connections, from_flags.max_per_client), (200, 0));
        let none = cli(&["--tcp-max-connections", "0"], &[]).unwrap();
        assert!(matches!(
            tcp(&given(&none, None).main),
            Err(ConfigError::NoTcpConnections)
        ));
    }

    #[test]
    fn hosts_is_off_unless_a_file_or_an_entry_is_given() {
        assert_eq!(hosts(&given(&cli(&[], &[]).unwrap(), None)).unwrap(), None);
        let entry = hosts(&given(&cli(&["--hosts-entry", "10.0.0.1 Node-A"], &[]).unwrap(), None))
            .unwrap()
            .unwrap();
        assert_eq!(entry.file, None);
        assert_eq!(entry.inline[0].names, [Name::from_dotted("node-a.").unwrap()]);
        assert_eq!(entry.config, hosts_file::Config::default());
        assert_eq!(entry.reload, Duration::from_secs(5));
        let bare = cli(&["--hosts-ttl", "60"], &[]).unwrap();
        assert!(
            matches!(hosts(&given(&bare, None)), Err(ConfigError::Hosts { key: "file", .. })),
            "a setting without data is a mistake, not ignored"
        );
        assert!(matches!(
            hosts(&given(&cli(&[], &[]).unwrap(), Some(&toml("[hosts]\nttl = 60\n")))),
            Err(ConfigError::Hosts { key: "file", .. })
        ));
    }

    #[test]
    fn hosts_flags_win_over_the_table() {
        let table = toml(
            "[hosts]\nfile = \"NodeHosts\"\ninline = [\"10.0.0.1 a\", \"10.0.0.2 b\"]\nttl = 60\n\
             zones = [\"lan\"]\nno_reverse = true\nreload = \"15s\"\nfallthrough = []\n",
        );
        let h = hosts(&given(&cli(&[], &[]).unwrap(), Some(&table))).unwrap().unwrap();
        assert_eq!(
            h.file,
            Some(PathBuf::from("/etc/skyline/NodeHosts")),
            "relative to the file"
        );
        assert_eq!(h.inline.len(), 2);
        assert_eq!(
            h.config,
            hosts_file::Config {
                zones: vec![Name::from_dotted("lan.").unwrap()],
                ttl: 60,
                reverse: false,
                fallthrough: Some(vec![]),
            }
        );
        assert_eq!(h.reload, Duration::from_secs(15));
        let flags = cli(
            &[
                "--hosts",
                "/etc/hosts",
                "--hosts-ttl",
                "30",
                "--hosts-reload",
                "0s",
                "--hosts-fallthrough",
                "in-addr.arpa",
            ],
            &[],
        )
        .unwrap();
        let h = hosts(&given(&flags, Some(&table))).unwrap().unwrap();
        assert_eq!(h.file, Some(PathBuf::from("/etc/hosts")));
        assert_eq!((h.config.ttl, h.reload), (30, Duration::ZERO));
        assert_eq!(
            h.config.fallthrough,
            Some(vec![Name::from_dotted("in-addr.arpa.").unwrap()])
        );
    }

    #[test]
    fn invalid_hosts_settings_are_rejected() {
        for args in [
            &["--hosts-entry", "10.0.0.1"][..],
            &["--hosts-entry", "ten a"],
            &["--hosts", "h", "--hosts-ttl", "0"],
            &["--hosts", "h", "--hosts-ttl", "65536"],
            &["--hosts", "h", "--hosts-zones", "a..b"],
            &["--hosts", "h", "--hosts-fallthrough", "a..b"],
        ] {
            let parsed = cli(args, &[]).unwrap();
            assert!(
                matches!(hosts(&given(&parsed, None)), Err(ConfigError::Hosts { .. })),
                "{args:?}"
            );
        }
        assert!(FileConfig::parse("[hosts]\nfiles = \"x\"\n", Path::new("x.toml")).is_err());
    }

    #[test]
    fn kubernetes_is_off_unless_asked_for() {
        assert_eq!(kubernetes(&given(&cli(&[], &[]).unwrap(), None)).unwrap(), None);
        let on = kubernetes(&given(&cli(&["--kubernetes"], &[]).unwrap(), None))
            .unwrap()
            .unwrap();
        assert_eq!(on.zones, kubernetes::Config::default());
        assert_eq!(on.options, KubernetesOptions::default());
        let table = toml("[kubernetes]\n");
        assert!(kubernetes(&given(&cli(&[], &[]).unwrap(), Some(&table)))
            .unwrap()
            .is_some());
    }

    #[test]
    fn kubernetes_flags_win_over_the_table() {
        let table = toml(
            "[kubernetes]\nkubeconfig = \"kube.yaml\"\nzones = [\"cluster.example\", \"10.in-addr.arpa\"]\n\
             pods = \"verified\"\nttl = 30\nnamespaces = [\"a\"]\nignore_empty_service = true\n\
             fallthrough = []\nlabels = \"app=x\"\napiserver_qps = 20\n",
        );
        let k = kubernetes(&given(&cli(&[], &[]).unwrap(), Some(&table)))
            .unwrap()
            .unwrap();
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
        let k = kubernetes(&given(&flags, Some(&table))).unwrap().unwrap();
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
                matches!(kubernetes(&given(&parsed, None)), Err(ConfigError::Kubernetes { .. })),
                "{args:?}"
            );
        }
        assert!(FileConfig::parse("[kubernetes]\nendpoints = \"x\"\n", Path::new("x.toml")).is_err());
        let file = toml("[kubernetes]\nendpoint = \"10.96.0.1\"\n");
        assert!(matches!(
            kubernetes(&given(&cli(&[], &[]).unwrap(), Some(&file))),
            Err(ConfigError::Kubernetes { key: "endpoint", .. })
        ));
    }

    #[test]
    fn autopath_takes_its_search_domains_and_needs_verified_pods() {
        let table = toml(
            "[kubernetes]\npods = \"verified\"\nautopath = true\nautopath_search = [\"corp.example\", \"example.net.\"]\n",
        );
        let k = kubernetes(&given(&cli(&[], &[]).unwrap(), Some(&table)))
            .unwrap()
            .unwrap();
        assert_eq!(
            k.zones.autopath,
            Some(vec![name("corp.example."), name("example.net.")])
        );
        let flags = cli(&["--kubernetes-pods", "verified", "--kubernetes-autopath"], &[]).unwrap();
        let k = kubernetes(&given(&flags, None)).unwrap().unwrap();
        assert_eq!(k.zones.autopath, Some(vec![]), "no host search domains by default");
        let k = kubernetes(&given(&cli(&["--kubernetes"], &[]).unwrap(), None))
            .unwrap()
            .unwrap();
        assert_eq!(k.zones.autopath, None, "off by default");
        for (args, key) in [
            (&["--kubernetes-autopath"][..], "autopath"),
            (&["--kubernetes-autopath", "--kubernetes-pods", "insecure"], "autopath"),
            (&["--kubernetes-autopath-search", "corp.example"], "autopath_search"),
            (
                &[
                    "--kubernetes-pods",
                    "verified",
                    "--kubernetes-autopath",
                    "--kubernetes-autopath-search",
                    "a..b",
                ],
                "autopath_search",
            ),
        ] {
            let parsed = cli(args, &[]).unwrap();
            match kubernetes(&given(&parsed, None)) {
                Err(ConfigError::Kubernetes { key: found, message }) => {
                    assert_eq!(found, key, "{args:?}: {message}")
                }
                other => panic!("{args:?} accepted: {other:?}"),
            }
        }
    }
}
