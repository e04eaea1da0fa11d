//! SIGHUP: the configuration read again while serving. The flags and environment stay as they
//! were given; the `--config` file and the records file are read again. Settings that shape
//! answers (domain, hostmaster, TTLs, priority, local, round robin) go to the data sources, which
//! rebuild their snapshots with them; forwarding and cache settings and the cookie secrets go to
//! the workers, which switch at their next turn. All of it is resolved and validated on the
//! control plane's thread first, by the validation a start makes (`crate::validate`): an invalid
//! configuration, or a records file that cannot be read or parsed, changes nothing (it is logged
//! and counted, and readiness does not move). A changed setting that only a restart applies is named in one log line and left as it
//! is; each setting's declaration in `src/settings.rs` says which it is (`applied` or
//! `restart`), and the tables of `docs/settings.md` show it.

use crate::cli::Cli;
use crate::config::ConfigError;
use crate::forwarding::ResolvConfError;
use crate::notify::Notifier;
use crate::protection::CookieSettings;
use crate::settings::{FileConfig, Given};
use crate::validate::{self, Valid};
use skyline_controlplane::http::ReloadStats;
use skyline_controlplane::skydns::ConfigPatch;
use skyline_controlplane::source::OverridesSender;
use skyline_dataplane::cookie::CookieCell;
use skyline_dataplane::forward::{ForwardConfig, Forwarding};
use skyline_dataplane::SnapshotCell;
use std::path::{Path, PathBuf};
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
    /// The settings given at start, which the restart-only ones keep.
    started: Given,
    /// Whether the start forwarded: turning forwarding on or off takes a restart.
    started_forwarding: bool,
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
    given: Given,
    overrides: ConfigPatch,
    forward: Option<ForwardConfig>,
    /// Why the default resolv.conf gave no upstream, if it did not.
    default_unusable: Option<ResolvConfError>,
    cookies: CookieSettings,
}

impl Resolved {
    /// Whether names outside the zones are forwarded.
    fn forwarding(&self) -> bool {
        self.forward.as_ref().is_some_and(ForwardConfig::is_enabled)
    }
}

/// Resolves every setting from `cli` and the `--config` file, over the data's own
/// `/<prefix>/config`: the records file's, read again, or `data_config`, etcd's as read at
/// start. It is the validation a start makes, so that what would stop a start is refused here.
fn resolve(cli: &Cli, data_config: Option<&ConfigPatch>) -> Result<Resolved, Vec<ConfigError>> {
    let file = FileConfig::given(cli)?;
    let valid = validate::validate(cli, file.as_ref())?;
    let records = match &valid.operator.records {
        Some(path) => Some(validate::records(path, &valid.operator.path_prefix).map_err(|e| vec![e])?),
        None => None,
    };
    let data = match &records {
        Some(read) => read.config.as_ref(),
        None => data_config,
    };
    let over = valid.over_data(data).map_err(|e| vec![e])?;
    Ok(Resolved {
        overrides: valid.operator.overrides,
        given: valid.given,
        forward: over.forward.config,
        default_unusable: over.forward.default_unusable,
        cookies: valid.cookies,
    })
}

impl Reloader {
    /// A reloader for a process started from `cli` with the settings `valid`, forwarding
    /// with `forward`, whose data had `data_config`.
    pub fn new(
        cli: Cli,
        valid: &Valid,
        forward: Option<ForwardConfig>,
        data_config: Option<ConfigPatch>,
        targets: Targets,
    ) -> Reloader {
        Reloader {
            cli,
            data_config,
            started_forwarding: forward.as_ref().is_some_and(ForwardConfig::is_enabled),
            started: valid.given.clone(),
            forward,
            cookies: valid.cookies.clone(),
            targets,
        }
    }

    /// The future that reloads on each SIGHUP `hangup` receives, forever.
    pub async fn on_hangup(mut self, mut hangup: Signal) {
        let mut watched = Watched::new(&self.cli, self.started.main.reload);
        loop {
            tokio::select! {
                signal = hangup.recv() => if signal.is_none() { return },
                () = watched.changed() => tracing::info!(
                    file = %watched.path.display(),
                    "the configuration file changed: reloading as on SIGHUP"
                ),
            }
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
        let resolved = match resolve(&self.cli, self.data_config.as_ref()) {
            Ok(resolved) => resolved,
            Err(problems) => {
                self.targets.stats.rejected();
                let error = problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
                tracing::error!(%error, "SIGHUP: configuration not reloaded; the settings in force stay");
                self.targets.overrides.replace(self.targets.overrides.current());
                return;
            }
        };
        crate::warn_default_resolv_conf(resolved.default_unusable.as_ref());
        let mut restart = resolved.given.restart_changes(&self.started);
        if resolved.forwarding() != self.started_forwarding {
            restart.push("forwarding on or off");
        }
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

/// The configuration file as last read, for `--reload`: a change of its bytes is a reload.
struct Watched {
    path: PathBuf,
    every: Option<Duration>,
    seen: Option<u64>,
}

impl Watched {
    fn new(cli: &Cli, every: Option<Duration>) -> Watched {
        let path = cli.corefile.clone().or_else(|| cli.config.clone()).unwrap_or_default();
        let every = every.filter(|_| !path.as_os_str().is_empty());
        let seen = fingerprint(&path);
        Watched { path, every, seen }
    }

    /// Returns once the file's bytes differ from the last seen, looking every `every`; never
    /// without a file or an interval.
    async fn changed(&mut self) {
        let Some(every) = self.every else {
            return std::future::pending().await;
        };
        loop {
            tokio::time::sleep(every).await;
            let now = fingerprint(&self.path);
            // An unreadable file is no change: the reload would only be refused.
            if now.is_some() && now != self.seen {
                self.seen = now;
                return;
            }
        }
    }
}

/// A hash of the file's bytes, `None` when it cannot be read.
fn fingerprint(path: &Path) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let bytes = std::fs::read(path).ok()?;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut hasher);
    Some(hasher.finish())
}
