//! SIGHUP: the configuration read again while serving. The flags and environment stay as they
//! were given; the `--config` file and the records file are read again. Settings that shape
//! answers (domain, hostmaster, TTLs, priority, local, round robin) go to the data sources, which
//! rebuild their snapshots with them; forwarding and cache settings and the cookie secrets go to
//! the workers, which switch at their next turn. All of it is resolved and validated on the control plane's thread
//! first: an invalid file changes nothing (it is logged and counted, and readiness does not
//! move). A changed setting that only a restart applies is named in one log line and left as it
//! is; the table at the top of `src/config.rs` says which are which.

use crate::cli::Cli;
use crate::config::{self, ConfigError, FileConfig, KubernetesSettings};
use crate::forwarding;
use crate::notify::Notifier;
use crate::protection::CookieSettings;
use skyline_controlplane::etcd::EtcdOptions;
use skyline_controlplane::http::ReloadStats;
use skyline_controlplane::skydns::ConfigPatch;
use skyline_controlplane::source::OverridesSender;
use skyline_dataplane::cookie::CookieCell;
use skyline_dataplane::forward::{ForwardConfig, Forwarding};
use skyline_dataplane::observe::ObserveConfig;
use skyline_dataplane::worker::TcpConfig;
use skyline_dataplane::SnapshotCell;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::signal::unix::Signal;

/// The longest a reload is reported as under way to the service manager while the sources
/// rebuild.
const NOTIFY_WAIT: Duration = Duration::from_secs(2);

/// What a reload reads the configuration with, and where it puts the result.
pub struct Reloader {
    cli: Cli,
    /// The data's own `/<prefix>/config` as read at start, under the forwarding settings.
    data_config: Option<ConfigPatch>,
    /// The restart-only settings in force since the start.
    started: Fixed,
    forward: Option<ForwardConfig>,
    cookies: CookieSettings,
    targets: Targets,
}

/// Where a reload's results go, and who hears of it.
pub struct Targets {
    /// The sources' settings.
    pub overrides: OverridesSender,
    /// The workers' forwarding; `None` when the server does not forward.
    pub forwarding: Option<Forwarding>,
    /// The workers' cookie secrets; `None` when the server does no cookies.
    pub cookies: Option<CookieCell>,
    /// The reload counters `/metrics` reports.
    pub stats: Arc<ReloadStats>,
    /// The service manager.
    pub notifier: Arc<Notifier>,
    /// The cell the workers serve, whose next generation ends a reload for the service
    /// manager.
    pub served: SnapshotCell,
}

/// Everything a reload resolves.
struct Resolved {
    overrides: ConfigPatch,
    forward: Option<ForwardConfig>,
    cookies: CookieSettings,
    fixed: Fixed,
}

/// The settings only a restart applies, as resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Fixed {
    addrs: Vec<SocketAddr>,
    path_prefix: String,
    records: Option<PathBuf>,
    etcd: Option<EtcdOptions>,
    workers: usize,
    pin: bool,
    tcp: TcpConfig,
    drain: Duration,
    http_addr: Option<SocketAddr>,
    systemd: bool,
    node_local: (Option<String>, bool),
    pid_file: Option<PathBuf>,
    kubernetes: Option<KubernetesSettings>,
    forwarding: bool,
    stub_records: bool,
    observe: ObserveConfig,
    cookies: bool,
    rrl: skyline_dataplane::rrl::RrlConfig,
}

impl Fixed {
    /// The names of the settings that differ from `other`'s, as the configuration file spells
    /// them.
    fn differences(&self, other: &Fixed) -> Vec<&'static str> {
        let differs = [
            (self.addrs != other.addrs, "addr"),
            (self.path_prefix != other.path_prefix, "path_prefix"),
            (self.records != other.records, "records"),
            (self.etcd != other.etcd, "machines (and the etcd connection)"),
            (self.workers != other.workers, "workers"),
            (self.pin != other.pin, "no_pin"),
            (self.tcp != other.tcp, "tcp_max_connections, tcp_max_per_client"),
            (self.drain != other.drain, "drain"),
            (self.http_addr != other.http_addr, "http_addr"),
            (self.systemd != other.systemd, "systemd"),
            (self.node_local != other.node_local, "setup_interface, setup_notrack"),
            (self.pid_file != other.pid_file, "pid_file"),
            (self.kubernetes != other.kubernetes, "[kubernetes]"),
            (self.forwarding != other.forwarding, "forwarding on or off"),
            (self.stub_records != other.stub_records, "forward.stubzones"),
            (self.observe != other.observe, "[observe]"),
            (self.cookies != other.cookies, "cookies.enabled"),
            (self.rrl != other.rrl, "[rrl]"),
        ];
        differs
            .into_iter()
            .filter_map(|(differs, name)| differs.then_some(name))
            .collect()
    }
}

/// Resolves every setting from `cli` and the `--config` file's contents `file`, over
/// `data_config`.
fn resolve(cli: &Cli, file: Option<&FileConfig>, data_config: Option<&ConfigPatch>) -> Result<Resolved, ConfigError> {
    let operator = config::operator(cli, file)?;
    let overrides = operator.overrides.clone();
    let (path_prefix, records, etcd) = (
        operator.path_prefix.clone(),
        operator.records.clone(),
        operator.etcd.clone(),
    );
    let settings = config::resolve(operator, data_config)?;
    let forward = crate::forwarding_settings(cli, file, &settings)?;
    let cookies = crate::cookie_settings(cli, file)?;
    let mut addrs = vec![settings.addr];
    addrs.extend(settings.extra_addrs.iter().copied());
    let fixed = Fixed {
        addrs,
        path_prefix,
        records,
        etcd,
        workers: settings.workers,
        pin: settings.pin,
        tcp: config::tcp(cli, file)?,
        drain: config::drain(cli, file)?,
        http_addr: config::http_addr(cli, file),
        systemd: config::systemd(cli, file),
        node_local: config::node_local(cli, file),
        pid_file: config::pid_file(cli, file),
        kubernetes: config::kubernetes(cli, file)?,
        forwarding: forward.as_ref().is_some_and(ForwardConfig::is_enabled),
        stub_records: forwarding::stub_records(&cli.forward, file.and_then(|f| f.forward.as_ref())),
        observe: config::observe(cli, file)?,
        cookies: cookies.enabled,
        rrl: crate::rrl_config(cli, file)?,
    };
    Ok(Resolved {
        overrides,
        forward,
        cookies,
        fixed,
    })
}

impl Reloader {
    /// A reloader for a process started from `cli` and the `--config` file's contents `file`,
    /// whose data had `data_config`; the sources follow `overrides`, the workers `forwarding`.
    pub fn new(
        cli: Cli,
        file: Option<&FileConfig>,
        data_config: Option<ConfigPatch>,
        targets: Targets,
    ) -> Result<Reloader, ConfigError> {
        let started = resolve(&cli, file, data_config.as_ref())?;
        Ok(Reloader {
            cli,
            data_config,
            started: started.fixed,
            forward: started.forward,
            cookies: started.cookies,
            targets,
        })
    }

    /// The future that reloads on each SIGHUP `hangup` receives, forever.
    pub async fn on_hangup(mut self, mut hangup: Signal) {
        while hangup.recv().await.is_some() {
            self.targets.notifier.reloading();
            let before = self.targets.served.load().generation;
            self.reload();
            let deadline = tokio::time::Instant::now() + NOTIFY_WAIT;
            while self.targets.served.load().generation == before && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            self.targets.notifier.ready();
        }
    }

    /// Reads the configuration again and puts in force what can change live; an invalid
    /// configuration keeps everything as it is, but the records file is still read again.
    fn reload(&mut self) {
        let file = self.cli.config.as_deref().map(FileConfig::load).transpose();
        let resolved = match file.and_then(|file| resolve(&self.cli, file.as_ref(), self.data_config.as_ref())) {
            Ok(resolved) => resolved,
            Err(error) => {
                self.targets.stats.rejected();
                tracing::error!(%error, "SIGHUP: configuration not reloaded; the settings in force stay");
                self.targets.overrides.replace(self.targets.overrides.current());
                return;
            }
        };
        let restart = self.started.differences(&resolved.fixed);
        if !restart.is_empty() {
            tracing::warn!(
                settings = %restart.join(", "),
                "SIGHUP: changed settings apply only at restart; the ones in force stay"
            );
        }
        self.targets.overrides.replace(resolved.overrides);
        let forward_changed = resolved.forward != self.forward;
        if let (Some(forwarding), Some(forward), true) = (&self.targets.forwarding, &resolved.forward, forward_changed)
        {
            if forward.is_enabled() {
                crate::log_forwarding(Some(forward));
                forwarding.reconfigure(forward.clone());
                self.forward = resolved.forward;
            }
        }
        let cookies_changed = resolved.cookies != self.cookies;
        if let (Some(cell), true) = (&self.targets.cookies, cookies_changed) {
            cell.set(resolved.cookies.reloaded(&cell.get()));
            self.cookies = resolved.cookies;
        }
        self.targets.stats.applied(!restart.is_empty());
        tracing::info!(
            forwarding_changed = forward_changed,
            cookie_secrets_changed = cookies_changed,
            "SIGHUP: configuration reloaded"
        );
    }
}
