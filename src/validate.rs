//! The one validation of a configuration. A start, `--check-config` and a SIGHUP all call
//! [`validate`] on what the operator gave, then [`Valid::over_data`] with the data's own
//! `/<prefix>/config`, so that the three cannot disagree on what is valid: a check that passes
//! is a start that passes, and a reload is refused for what would stop a start.
//!
//! Beside the values, it checks what a start touches on disk before it serves: the records file
//! (where the caller reads it), the hosts file, the kubeconfig, the state directory, the
//! directories of the PID file and the query log, and the etcd TLS files. It creates and writes
//! nothing.

use crate::cli::Cli;
use crate::config::{self, ConfigError, KubernetesSettings, Operator, Settings};
use crate::forwarding;
use crate::protection::{self, CookieSettings};
use crate::settings::{FileConfig, Given};
use skyline_controlplane::etcd::EtcdSource;
use skyline_controlplane::hosts::{parse as parse_hosts, HostsError, HostsOptions};
use skyline_controlplane::skydns::config::ConfigPatch;
use skyline_controlplane::source::records_file::parse_records_file;
use skyline_controlplane::state::StateDir;
use skyline_dataplane::observe::{ObserveConfig, QueryLogTarget};
use skyline_dataplane::rewrite::Plugins;
use skyline_dataplane::rrl::RrlConfig;
use skyline_dataplane::snapshot;
use skyline_dataplane::worker::TcpConfig;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Everything the operator gave, resolved and checked.
#[derive(Debug)]
pub struct Valid {
    /// Every setting as given.
    pub given: Given,
    /// The data source and the settings over the data's.
    pub operator: Operator,
    /// DNS over TCP limits.
    pub tcp: TcpConfig,
    /// The persisted snapshot's directory, if any.
    pub state: Option<StateDir>,
    /// Kubernetes cluster DNS, when on.
    pub kubernetes: Option<KubernetesSettings>,
    /// The hosts source, when a file or inline entries are given.
    pub hosts: Option<HostsOptions>,
    /// dnstap, the query log, the top talkers.
    pub observe: ObserveConfig,
    /// DNS Cookies.
    pub cookies: CookieSettings,
    /// Response rate limiting.
    pub rrl: RrlConfig,
    /// `rewrite`, `template`, `whoami` and `chaos`, compiled; `None` when none is configured.
    pub plugins: Option<Arc<Plugins>>,
}

/// What the settings become over the data's own `/<prefix>/config`.
#[derive(Debug)]
pub struct OverData {
    /// Every setting, resolved.
    pub settings: Settings,
    /// Forwarding, with resolv.conf read when no nameserver is set.
    pub forward: forwarding::Resolved,
}

/// Checks every setting the command line `cli` and the configuration file `file` give, and
/// what they name on disk; every problem is returned, not only the first.
pub fn validate(cli: &Cli, file: Option<&FileConfig>) -> Result<Valid, Vec<ConfigError>> {
    let mut invalid = Vec::new();
    let given = cli.given(file, &mut invalid);
    let mut problems: Vec<ConfigError> = invalid.into_iter().map(ConfigError::from).collect();
    let operator = keep(&mut problems, config::operator(&given));
    if let Some(operator) = &operator {
        if let Some(options) = &operator.etcd {
            let source = EtcdSource::new(
                options,
                &operator.path_prefix,
                operator.overrides.clone(),
                snapshot::empty_cell(),
            );
            keep(&mut problems, source.map_err(ConfigError::from));
        }
    }
    let tcp = keep(&mut problems, config::tcp(&given.main));
    let state = config::state(&given.main);
    if let Some(state) = &state {
        keep(&mut problems, state_dir(state.dir()));
    }
    if let Some(path) = &given.main.pid_file {
        keep(&mut problems, in_a_directory("pid_file (--pid-file)", path));
    }
    let kubernetes = keep(&mut problems, config::kubernetes(&given));
    if let Some(Some(kubernetes)) = &kubernetes {
        keep(&mut problems, kubeconfig(kubernetes));
    }
    let hosts = keep(&mut problems, config::hosts(&given));
    if let Some(Some(HostsOptions { file: Some(path), .. })) = &hosts {
        keep(&mut problems, hosts_file(path));
    }
    let observe = keep(
        &mut problems,
        crate::observe::observe_config(&given.observe).map_err(ConfigError::from),
    );
    if let Some(QueryLogTarget::File(path)) = observe.as_ref().and_then(|o| o.query_log.as_ref()).map(|q| &q.target) {
        keep(&mut problems, in_a_directory("observe.query_log (--query-log)", path));
    }
    let cookies = keep(
        &mut problems,
        protection::cookie_settings(&given.cookies).map_err(ConfigError::from),
    );
    let rrl = keep(
        &mut problems,
        protection::rrl_config(&given.rrl).map_err(ConfigError::from),
    );
    let plugins = keep(
        &mut problems,
        crate::plugins::plugins(&given).map_err(ConfigError::from),
    );
    match (operator, tcp, kubernetes, hosts, observe, cookies, rrl, plugins) {
        (
            Some(operator),
            Some(tcp),
            Some(kubernetes),
            Some(hosts),
            Some(observe),
            Some(cookies),
            Some(rrl),
            Some(plugins),
        ) if problems.is_empty() => Ok(Valid {
            given,
            operator,
            tcp,
            state,
            kubernetes,
            hosts,
            observe,
            cookies,
            rrl,
            plugins,
        }),
        _ => Err(problems),
    }
}

impl Valid {
    /// The settings over `data`, the data's own `/<prefix>/config` (from the records file or
    /// etcd), and forwarding as they make it.
    pub fn over_data(&self, data: Option<&ConfigPatch>) -> Result<OverData, ConfigError> {
        let settings = config::resolve(self.operator.clone(), data)?;
        let forward = crate::forwarding_settings(&self.given, &settings)?;
        Ok(OverData { settings, forward })
    }
}

/// What a records file holds, as far as the configuration goes.
#[derive(Debug)]
pub struct RecordsRead {
    /// Its `/<prefix>/config` object.
    pub config: Option<ConfigPatch>,
    /// Records in it.
    pub records: usize,
    /// Records a start skips as invalid.
    pub rejected: usize,
}

/// Reads and parses the records file at `path` as its source would, under `path_prefix`.
pub fn records(path: &Path, path_prefix: &str) -> Result<RecordsRead, ConfigError> {
    let wrap = |source| ConfigError::Records {
        path: path.to_owned(),
        source: Box::new(source),
    };
    let bytes =
        std::fs::read(path).map_err(|e| wrap(skyline_controlplane::source::records_file::FileError::Read(e)))?;
    let file = parse_records_file(&bytes, path_prefix).map_err(wrap)?;
    Ok(RecordsRead {
        config: file.config,
        records: file.records.len(),
        rejected: file.rejected.len(),
    })
}

/// The hosts file reads and every line of it is an entry, as the hosts source reads it.
fn hosts_file(path: &Path) -> Result<(), ConfigError> {
    let wrap = |source| ConfigError::HostsFile {
        path: path.to_owned(),
        source,
    };
    let text = std::fs::read_to_string(path).map_err(|e| wrap(HostsError::Read(e)))?;
    parse_hosts(&text).map(drop).map_err(wrap)
}

/// The value, or `None` with the error noted among the problems.
fn keep<T>(problems: &mut Vec<ConfigError>, result: Result<T, ConfigError>) -> Option<T> {
    result.map_err(|e| problems.push(e)).ok()
}

/// The state directory is a directory, or can be made one: the nearest part of its path that
/// exists is a directory.
fn state_dir(dir: &Path) -> Result<(), ConfigError> {
    let existing = dir.ancestors().find(|p| p.as_os_str().is_empty() || p.exists());
    match existing {
        Some(p) if p.as_os_str().is_empty() || p.is_dir() => Ok(()),
        Some(p) => Err(ConfigError::NotADirectory {
            setting: "state_dir (--state-dir)",
            path: dir.to_owned(),
            file: p.to_owned(),
        }),
        None => Ok(()),
    }
}

/// A file a start creates or appends to lies in a directory that exists, and is no directory
/// itself.
fn in_a_directory(setting: &'static str, path: &Path) -> Result<(), ConfigError> {
    if path.is_dir() {
        return Err(ConfigError::IsADirectory {
            setting,
            path: path.to_owned(),
        });
    }
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => return Ok(()),
    };
    if parent.is_dir() {
        Ok(())
    } else {
        Err(ConfigError::NoDirectory {
            setting,
            path: path.to_owned(),
            dir: parent.to_owned(),
        })
    }
}

/// Where the Kubernetes client finds its connection, as the client itself looks: the kubeconfig
/// given, else the files of `KUBECONFIG`, else `~/.kube/config`, else (without a context) the
/// in-cluster service account.
fn kubeconfig(kubernetes: &KubernetesSettings) -> Result<(), ConfigError> {
    let options = &kubernetes.options;
    let readable = |setting: &'static str, path: &Path| {
        std::fs::File::open(path)
            .map(drop)
            .map_err(|source| ConfigError::Kubeconfig {
                setting,
                path: path.to_owned(),
                source,
            })
    };
    if let Some(path) = &options.kubeconfig {
        return readable("kubernetes.kubeconfig (--kubeconfig)", path);
    }
    if options.endpoint.is_some() {
        return Ok(());
    }
    let listed: Vec<PathBuf> = std::env::var_os("KUBECONFIG")
        .map(|value| {
            std::env::split_paths(&value)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    let in_cluster = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
        && std::env::var_os("KUBERNETES_SERVICE_PORT").is_some()
        && ["token", "ca.crt", "namespace"]
            .iter()
            .all(|f| Path::new(config::SERVICE_ACCOUNT_DIR).join(f).is_file());
    let default = std::env::home_dir().map(|home| home.join(".kube").join("config"));
    let found = if listed.is_empty() {
        default
            .as_deref()
            .is_some_and(|p| readable("~/.kube/config", p).is_ok())
    } else {
        let mut readable_all = listed.iter().map(|p| readable("KUBECONFIG", p));
        match readable_all.find(Result::is_err) {
            Some(Err(e)) if !in_cluster || options.context.is_some() => return Err(e),
            Some(_) => false,
            None => true,
        }
    };
    if found || (in_cluster && options.context.is_none()) {
        return Ok(());
    }
    Err(ConfigError::NoKubeconfig {
        home: default.map_or_else(|| "~/.kube/config".to_owned(), |p| p.display().to_string()),
    })
}
