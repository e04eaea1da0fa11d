//! The `skyline` server: resolves the configuration, opens its data sources (the records file or
//! etcd, the Kubernetes API when cluster DNS is on, a hosts file when one is given), starts the data plane workers on the
//! snapshot cell, and runs the control plane (the sources' watches, the signal handling) on a
//! small tokio runtime of its own beside them, and the HTTP endpoints, when asked for, on
//! another.

mod check;
mod cli;
mod config;
mod corefile;
mod file_value;
mod flag_value;
mod forwarding;
mod in_force;
mod kube2etcd;
mod node_cache;
mod nodelocal;
mod notify;
mod observe;
mod plugins;
mod protection;
mod reload;
mod settings;
mod sources;
mod stub_zone;
mod upgrade;
mod validate;

use cli::Cli;
use config::{ConfigError, Settings};
use settings::{FileConfig, Given};
use skyline_controlplane::http::{self, HttpError, HttpServer};
use skyline_controlplane::source;
use skyline_dataplane::cookie::CookieCell;
use skyline_dataplane::signer;
use skyline_dataplane::snapshot::{self, skydns};
use skyline_dataplane::worker::{AfterDrain, Options, Server, ServerConfig};
use std::future::Future;
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::signal::unix::{signal, Signal, SignalKind};
use tracing_subscriber::EnvFilter;

/// How long, at exit, a records file load still in progress may take before it is abandoned.
const CONTROL_SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// Slack on top of the longest a query in flight can still take once the listeners close (the
/// forwarding timeout, then the TCP write timeout), before a drain gives up on it.
const FINISH_MARGIN: Duration = Duration::from_secs(1);

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Every problem of the configuration, each printed on its own line.
    #[error("{} problems in the configuration", .0.len())]
    Invalid(Vec<ConfigError>),
    #[error(transparent)]
    Source(#[from] source::StartError),
    #[error(transparent)]
    Sources(#[from] sources::SourcesError),
    #[error("cannot start the control plane runtime: {0}")]
    Runtime(std::io::Error),
    #[error("cannot install signal handlers: {0}")]
    Signals(std::io::Error),
    #[error("cannot serve DNS on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error(
        "cannot serve DNS on {addr}: a port below 1024 needs root or the CAP_NET_BIND_SERVICE \
         capability (setcap cap_net_bind_service=+ep on the binary, or AmbientCapabilities= in \
         its systemd unit); or serve on a higher port, e.g. --addr {example}"
    )]
    Privileged { addr: SocketAddr, example: SocketAddr },
    #[error(
        "cannot serve DNS on {addr}: another process holds the address (UDP or TCP); \
         --reuse-port shares it with another skyline on purpose"
    )]
    PortHeld { addr: SocketAddr },
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error("sockets handed over: {0}")]
    Inherit(#[from] skyline_dataplane::sys::InheritError),
    #[error("AF_XDP handed over: {0}")]
    XdpHandover(std::io::Error),
    #[error("cannot find this program's path (needed for in-place upgrades): {0}")]
    Exe(std::io::Error),
    #[error("node-local set-up: {0}")]
    NodeLocal(#[from] nodelocal::SetupError),
    #[error(transparent)]
    PidFile(#[from] upgrade::PidFileError),
    #[error("query log {path}: {source}")]
    QueryLog { path: PathBuf, source: std::io::Error },
    #[error("state directory {path}: {source}")]
    StateDir { path: PathBuf, source: std::io::Error },
}

fn main() -> ExitCode {
    skyline_dataplane::sys::limit_allocator_arenas();
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|first| first == "kube2etcd") {
        args.remove(1);
        return kube2etcd::main(args);
    }
    if args.get(1).is_some_and(|first| first == "node-cache") {
        args.remove(1);
        return node_cache::main(args);
    }
    let cli = Cli::try_parse_skydns(args).unwrap_or_else(|e| e.exit());
    init_logging(cli.verbose);
    if cli.check_config {
        return check::check(&cli);
    }
    serve(&cli, nodelocal::Upkeep::default(), None)
}

/// A task that runs on the control plane's runtime once the server serves and its SIGHUP
/// handler is installed (`skyline node-cache` follows its ConfigMaps with one).
pub(crate) type Follower = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Runs the server `cli` describes until it is told to stop; `upkeep` is what the node-local
/// set-up asks beyond its flags, `follower` a task to run beside the server.
pub(crate) fn serve(cli: &Cli, upkeep: nodelocal::Upkeep, follower: Option<Follower>) -> ExitCode {
    match run(cli, upkeep, follower) {
        Ok(()) => ExitCode::SUCCESS,
        Err(StartError::Invalid(problems)) => {
            for problem in problems {
                eprintln!("skyline: {problem}");
            }
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("skyline: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Logs to stderr: `--verbose` means debug level, otherwise `RUST_LOG` (default `info`).
pub(crate) fn init_logging(verbose: bool) {
    let filter = if verbose {
        EnvFilter::new("debug")
    } else {
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"))
    };
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .init();
}

fn run(cli: &Cli, upkeep: nodelocal::Upkeep, follower: Option<Follower>) -> Result<(), StartError> {
    let file = FileConfig::given(cli).map_err(StartError::Invalid)?;
    for note in file.iter().flat_map(|f| &f.notes) {
        tracing::warn!("Corefile: {note}");
    }
    let valid = validate::validate(cli, file.as_ref()).map_err(StartError::Invalid)?;
    let given = &valid.given;
    let operator = valid.operator.clone();
    let tcp = valid.tcp;
    let drain = given.main.drain;
    let observe = valid.observe.clone();
    if let Some(skyline_dataplane::observe::QueryLogTarget::File(path)) = observe.query_log.as_ref().map(|q| &q.target)
    {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| StartError::QueryLog {
                path: path.clone(),
                source,
            })?;
    }
    let pid_file = given.main.pid_file.clone();
    let state = valid.state.clone();
    if let Some(state) = &state {
        std::fs::create_dir_all(state.dir()).map_err(|source| StartError::StateDir {
            path: state.dir().to_owned(),
            source,
        })?;
    }
    let restart = upgrade::Restart::of_this_process().map_err(StartError::Exe)?;
    // These read (and clear) the environment, before any other thread exists. Sockets handed
    // over by the process this one replaces win over systemd's: it passed them on.
    let notifier = Arc::new(notify::Notifier::from_environment());
    let upgraded_http = skyline_dataplane::sys::take_upgrade_http_fd()?;
    let upgraded = skyline_dataplane::sys::take_upgrade_fds()?;
    let upgraded_xdp = skyline_dataplane::worker::take_xdp_handover().map_err(StartError::XdpHandover)?;
    let handed_over = upgraded.is_some();
    if let Some(path) = &pid_file {
        // The process that hands its sockets over is this one's parent, and still serves.
        let upgrading_from = handed_over.then(std::os::unix::process::parent_id);
        upgrade::claim_pid_file(path, upgrading_from)?;
    }
    let inherited = match upgraded {
        Some(pairs) => Some(pairs),
        None => given
            .main
            .systemd
            .then(skyline_dataplane::sys::take_listen_fds)
            .transpose()?,
    };

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("skyline-control")
        .enable_all()
        .build()
        .map_err(StartError::Runtime)?;
    let entered = runtime.enter();

    let cell = snapshot::empty_cell();
    let sources::Configured {
        mut sources,
        skydns_cell,
        skydns_source,
        etcd_health,
        reload_overrides,
    } = sources::configured(
        &operator,
        valid.kubernetes.clone(),
        valid.hosts.clone(),
        state.as_ref(),
        &cell,
        &runtime,
    )?;
    // The settings the SkyDNS source's data carries (`/<prefix>/config`), under the operator's.
    let mut data_config = None;
    for source in &mut sources {
        let carried = runtime.block_on(source.start())?;
        data_config = data_config.or(carried);
    }
    let over = valid
        .over_data(data_config.as_ref())
        .map_err(|e| StartError::Invalid(vec![e]))?;
    let settings = over.settings;
    let reloader_data = data_config.clone();
    if !skydns_source {
        let empty = signer::build::<skydns::Service>(&settings.skydns, &[], 1, SystemTime::now());
        skydns_cell.store(Arc::new(empty));
    }
    log_settings(&settings);

    let mut shutdown = Shutdown::register().map_err(StartError::Signals)?;
    // Before anything is served: SIGHUP's default action would end the process.
    let hangup = signal(SignalKind::hangup()).map_err(StartError::Signals)?;
    let stub_records = etcd_health.filter(|_| given.forward.stubzones);
    let reported = sources.iter().map(|source| source.report()).collect();
    for source in sources {
        runtime.spawn(source.serve(&settings.skydns));
    }

    let server_config = ServerConfig {
        addr: settings.addr,
        workers: settings.workers,
        pin: settings.pin,
        tcp,
    };
    warn_default_resolv_conf(over.forward.default_unusable.as_ref());
    let forward = over.forward.config;
    let started_forward = forward.clone();
    log_forwarding(forward.as_ref());
    let finish_limit = forward.as_ref().map_or(Duration::ZERO, |f| f.timeout) + tcp.io_timeout + FINISH_MARGIN;
    if forward.is_some() {
        match skyline_dataplane::sys::raise_open_files_limit() {
            Ok(limit) => tracing::debug!(limit, "open files limit"),
            Err(e) => tracing::warn!(error = %e, "cannot raise the open files limit"),
        }
    }
    let cookie_settings = &valid.cookies;
    let cookies = cookie_settings.secrets().map_err(ConfigError::from)?;
    tracing::info!(
        cookies = cookies.is_some(),
        configured_secret = cookie_settings.secret.is_some(),
        "DNS Cookies"
    );
    let options = Options {
        extra_addrs: settings.extra_addrs.clone(),
        forward,
        observe,
        cookies: cookies.map(CookieCell::new),
        rrl: valid.rrl.clone(),
        xdp: config::xdp(&given.main),
        plugins: valid.plugins.clone(),
    };
    if options.rrl.is_enabled() {
        tracing::info!(
            rate = options.rrl.rate,
            slip = options.rrl.slip,
            window = options.rrl.window,
            "response rate limiting"
        );
    }
    let (setup_interface, setup_notrack) = (&given.main.setup_interface, given.main.setup_notrack);
    let node_local = if setup_interface.is_some() || setup_notrack {
        let mut addrs = vec![settings.addr];
        addrs.extend(settings.extra_addrs.iter().copied());
        Some(nodelocal::NodeLocal::set_up(
            setup_interface.as_deref(),
            setup_notrack,
            &addrs,
            handed_over || upkeep.owned,
        )?)
    } else {
        None
    };
    let bind_error = |source| bind_failed(settings.addr, source);
    let server = match inherited {
        Some(pairs) => {
            Server::start_inherited(server_config, options, pairs, upgraded_xdp, Arc::clone(&cell)).map_err(bind_error)
        }
        None => {
            let mut addrs = vec![settings.addr];
            addrs.extend(settings.extra_addrs.iter().copied());
            let unshared = if given.main.reuse_port {
                Ok(())
            } else {
                held_by_none(&addrs)
            };
            unshared.and_then(|()| Server::start_with(server_config, options, Arc::clone(&cell)).map_err(bind_error))
        }
    };
    let server = match server {
        Ok(server) => server,
        Err(e) => {
            if let Some(node_local) = node_local {
                node_local.tear_down();
            }
            return Err(e);
        }
    };
    let mut node_local = match (node_local, upkeep.check_every) {
        (Some(set_up), Some(every)) => match set_up.keep(every) {
            Ok(keeper) => NodeLocalState::Kept(keeper),
            Err(e) => {
                tracing::error!(error = %e, "the node-local set-up is not checked: no thread for it");
                NodeLocalState::None
            }
        },
        (Some(set_up), None) => NodeLocalState::Made(set_up),
        (None, _) => NodeLocalState::None,
    };
    for local in server.local_addrs() {
        tracing::info!(
            "listening on udp://{local} tcp://{local} for {}",
            settings.skydns.domain
        );
    }
    let mut draining = Arc::new(AtomicBool::new(false));
    let mut reload_stats = Arc::default();
    let mut http_tasks = Vec::new();
    let mut http_handover = None;
    let mut http_runtime = None;
    let served = Arc::clone(&cell);
    let mut http_addrs = given.main.http_addr.iter().flatten().copied();
    if let Some(addr) = http_addrs.next() {
        // A thread of its own: a source's snapshot build on the control runtime (a few hundred
        // ms of CPU for a large cluster, far more on a busy node) must not hold up a probe.
        let endpoints_runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("skyline-http")
            .enable_all()
            .build()
            .map_err(StartError::Runtime)?;
        let observed = http::Observed::new(server.stats_reader(), cell, reported)
            .observing(server.observe_reader())
            .serving(server.local_addrs());
        draining = observed.draining();
        reload_stats = observed.reloads();
        let upgrading = upgraded_http.is_some();
        let endpoints = match upgraded_http {
            Some(listener) => {
                let _within = endpoints_runtime.enter();
                Some(HttpServer::from_std(listener, observed.clone())?)
            }
            None => match endpoints_runtime.block_on(HttpServer::bind(addr, observed.clone())) {
                Ok(endpoints) => Some(endpoints),
                // Started beside another process on purpose (a surge update): its HTTP port is
                // taken once it exits, never shared.
                Err(HttpError::Held { addr }) if given.main.reuse_port => {
                    tracing::warn!(%addr, "another process holds the HTTP address: serving DNS now, HTTP once it is free");
                    http_tasks.push(endpoints_runtime.spawn(HttpServer::serve_once_free(addr, observed.clone())));
                    None
                }
                Err(e) => return Err(e.into()),
            },
        };
        if let Some(endpoints) = endpoints {
            tracing::info!("http on http://{}", endpoints.local_addr());
            http_handover = endpoints
                .handover()
                .inspect_err(|e| tracing::warn!(error = %e, "the HTTP listener cannot be handed over in an upgrade"))
                .ok();
            http_tasks.push(endpoints_runtime.spawn(endpoints.serve()));
        }
        // The other addresses (a Corefile's health, ready and prometheus ports each have one)
        // serve the same endpoints; they are bound again by an upgrade's new process, once
        // the old one lets them go.
        for addr in http_addrs {
            match endpoints_runtime.block_on(HttpServer::bind(addr, observed.clone())) {
                Ok(endpoints) => {
                    tracing::info!("http on http://{}", endpoints.local_addr());
                    http_tasks.push(endpoints_runtime.spawn(endpoints.serve()));
                }
                Err(HttpError::Held { addr }) if given.main.reuse_port || upgrading => {
                    tracing::warn!(%addr, "another process holds the HTTP address: serving DNS now, HTTP once it is free");
                    http_tasks.push(endpoints_runtime.spawn(HttpServer::serve_once_free(addr, observed.clone())));
                }
                Err(e) => return Err(e.into()),
            }
        }
        http_runtime = Some(endpoints_runtime);
    }
    let reloader = reload::Reloader::new(
        cli.clone(),
        &valid,
        started_forward,
        reloader_data,
        reload::Targets {
            overrides: reload_overrides,
            forwarding: server.forwarding(),
            cookies: server.cookies(),
            stats: reload_stats,
            notifier: Arc::clone(&notifier),
            served,
        },
    );
    runtime.spawn(reloader.on_hangup(hangup));
    match (stub_records, server.forwarding()) {
        (Some(source), Some(zones)) => {
            runtime.spawn(forwarding::follow_stub_records(source, zones));
        }
        (Some(_), None) => tracing::warn!("stub zone records are not followed: nothing is forwarded"),
        (None, _) => {}
    }
    if let Some(follower) = follower {
        runtime.spawn(follower);
    }

    if let Some(path) = &pid_file {
        upgrade::write_pid_file(path)?;
    }
    notifier.ready();
    let mut upgrades = signal(SignalKind::user_defined2()).map_err(StartError::Signals)?;
    let stop = runtime.block_on(async {
        loop {
            tokio::select! {
                signal = shutdown.wait() => break Stop::Signal(signal),
                _ = upgrades.recv() => {
                    tracing::info!(exe = %restart.exe().display(), "SIGUSR2 received: upgrading in place");
                    match restart.upgrade(&server, http_handover.as_ref(), notifier.target()).await {
                        Ok(pid) => break Stop::Upgraded(pid),
                        Err(e) => tracing::error!(error = %e, "upgrade failed; this process keeps serving"),
                    }
                }
            }
        }
    });
    let upgraded = matches!(stop, Stop::Upgraded(_));
    match stop {
        Stop::Upgraded(pid) => {
            // The new process serves on the same sockets: this one stops taking HTTP requests
            // (they would reach the old process's view) and finishes what it holds at once.
            notifier.main_pid(pid);
            for task in http_tasks {
                task.abort();
            }
            drop(http_handover);
            tracing::info!(pid, "the new process serves; finishing what this one holds");
        }
        Stop::Signal(signal) => {
            draining.store(true, Ordering::Release);
            notifier.stopping();
            tracing::info!(
                drain_ms = drain.as_millis() as u64,
                "{signal} received: draining; /ready answers 503, queries are answered until the drain ends"
            );
            let again = runtime.block_on(async {
                tokio::select! {
                    () = tokio::time::sleep(drain) => None,
                    signal = shutdown.wait() => Some(signal),
                }
            });
            if let Some(signal) = again {
                tracing::info!("{signal} received again: the drain ends now");
            }
        }
    }
    if let Some(path) = &pid_file {
        upgrade::remove_pid_file(path);
    }
    // Sockets systemd activated stay systemd's, for the next start; sockets handed to a new
    // process are its own now. Sockets this process bound alone are retired before they close.
    let after = if upgraded {
        AfterDrain::HandedOver
    } else if given.main.systemd {
        AfterDrain::Shared
    } else {
        AfterDrain::Retire
    };
    if server.drain(finish_limit, after) {
        tracing::info!("listeners closed and every query in flight answered; exiting");
    } else {
        tracing::warn!(
            limit_ms = finish_limit.as_millis() as u64,
            "listeners closed; queries still in flight after the limit are abandoned; exiting"
        );
    }
    // The interface and rules stay for the process that took this one's sockets, and for one
    // started beside this one (a surge update) that serves on them now.
    let set_up = match std::mem::replace(&mut node_local, NodeLocalState::None) {
        NodeLocalState::Kept(keeper) => keeper.stop(),
        NodeLocalState::Made(set_up) => Some(set_up),
        NodeLocalState::None => None,
    };
    if let Some(set_up) = set_up.filter(|_| !upgraded) {
        let mut addrs = vec![settings.addr];
        addrs.extend(settings.extra_addrs.iter().copied());
        if upkeep.keep_on_exit {
            tracing::info!("the node-local interface and rules are left in place, as asked");
        } else if given.main.reuse_port && served_by_another(&addrs) {
            tracing::info!("another process serves the node-local addresses: their interface and rules are left to it");
        } else {
            set_up.tear_down();
        }
    }
    drop(entered);
    if let Some(http_runtime) = http_runtime {
        http_runtime.shutdown_timeout(CONTROL_SHUTDOWN_GRACE);
    }
    runtime.shutdown_timeout(CONTROL_SHUTDOWN_GRACE);
    Ok(())
}

/// Fails when another process holds one of `addrs`, for UDP or TCP: the workers' sockets would
/// otherwise join that process's SO_REUSEPORT group without a word, and the kernel split the
/// queries between the two. Port 0 is left out: the kernel picks a port no one holds.
fn held_by_none(addrs: &[SocketAddr]) -> Result<(), StartError> {
    for &addr in addrs.iter().filter(|addr| addr.port() != 0) {
        match skyline_dataplane::sys::probe_unshared(addr) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => return Err(StartError::PortHeld { addr }),
            Err(source) => return Err(bind_failed(addr, source)),
        }
    }
    Ok(())
}

/// Whether another process holds one of `addrs` now that this one closed its sockets.
fn served_by_another(addrs: &[SocketAddr]) -> bool {
    addrs.iter().filter(|addr| addr.port() != 0).any(|&addr| {
        skyline_dataplane::sys::probe_unshared(addr).is_err_and(|e| e.kind() == std::io::ErrorKind::AddrInUse)
    })
}

/// The node-local set-up while serving: checked on a thread of its own or not.
enum NodeLocalState {
    Kept(nodelocal::Keeper),
    Made(nodelocal::NodeLocal),
    None,
}

/// Why `addr` could not be bound: a privileged port refused says what grants it.
fn bind_failed(addr: SocketAddr, source: std::io::Error) -> StartError {
    if source.kind() == std::io::ErrorKind::PermissionDenied && (1..1024).contains(&addr.port()) {
        let mut example = addr;
        example.set_port(1053);
        return StartError::Privileged { addr, example };
    }
    StartError::Bind { addr, source }
}

/// Why the serving loop ended.
enum Stop {
    /// SIGTERM or SIGINT: drain and exit.
    Signal(&'static str),
    /// A new process, with this PID, serves in this one's place.
    Upgraded(u32),
}

/// Forwarding as configured, with resolv.conf read when no nameserver is set.
pub(crate) fn forwarding_settings(given: &Given, settings: &Settings) -> Result<forwarding::Resolved, ConfigError> {
    let mut listen = vec![settings.addr];
    listen.extend(settings.extra_addrs.iter().copied());
    let stacked = forwarding::Stacked {
        nameservers: settings.nameservers.clone(),
        ndots: settings.ndots,
        no_rec: settings.no_rec,
        ns_rotate: settings.ns_rotate,
        read_timeout: settings.read_timeout,
        listen,
    };
    forwarding::forward_config(&given.forward, &given.cache, &stacked, |path| {
        std::fs::read_to_string(path)
    })
    .map_err(ConfigError::from)
}

/// Says that the default resolv.conf gave no upstream, and what follows: names outside the
/// zones are refused rather than forwarded.
pub(crate) fn warn_default_resolv_conf(default_unusable: Option<&forwarding::ResolvConfError>) {
    if let Some(problem) = default_unusable {
        tracing::warn!(
            %problem,
            "no upstream: names outside the zones are answered REFUSED (stub zones are still \
             forwarded); set --nameservers or --resolv-conf, or --resolv-conf=none to say so"
        );
    }
}

/// Logs where names outside the domain go: the first thing to check when they do not resolve.
pub(crate) fn log_forwarding(forward: Option<&skyline_dataplane::forward::ForwardConfig>) {
    match forward {
        Some(f) => tracing::info!(
            upstreams = %list(&f.upstreams),
            stub_zones = f.stub_zones.len(),
            acl = %f.acl.prefixes().iter().map(ToString::to_string).collect::<Vec<_>>().join(","),
            timeout_ms = f.timeout.as_millis() as u64,
            cache_bytes = f.cache.max_bytes,
            "forwarding names outside the domain"
        ),
        None => tracing::info!("not forwarding: names outside the domain are refused"),
    }
}

/// One line with the effective configuration, so that what is served can be told from the log.
fn log_settings(s: &Settings) {
    tracing::info!(
        addr = %s.addr,
        domain = %s.skydns.domain,
        path_prefix = %s.skydns.path_prefix,
        hostmaster = %s.skydns.hostmaster,
        ttl = s.skydns.ttl,
        min_ttl = s.skydns.min_ttl,
        records = %s.records.as_ref().map_or_else(|| "none".to_owned(), |p| p.display().to_string()),
        workers = s.workers,
        pin = s.pin,
        nameservers = %list(&s.nameservers),
        ndots = s.ndots,
        etcd = %s.etcd.as_ref().map_or_else(|| "none".to_owned(), |e| e.endpoints.join(",")),
        "configuration"
    );
}

/// `items` comma-separated, as the log shows a list.
fn list<T: std::fmt::Display>(items: &[T]) -> String {
    items.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")
}

/// SIGINT and SIGTERM, registered before serving so that either one ends the process cleanly.
struct Shutdown {
    interrupt: Signal,
    terminate: Signal,
}

impl Shutdown {
    fn register() -> std::io::Result<Shutdown> {
        Ok(Shutdown {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// Waits for the first of the two; returns its name.
    async fn wait(&mut self) -> &'static str {
        tokio::select! {
            _ = self.interrupt.recv() => "SIGINT",
            _ = self.terminate.recv() => "SIGTERM",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_privileged_port_refused_names_the_capability_and_a_flag() {
        let denied = || std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let message = bind_failed("127.0.0.1:53".parse().unwrap(), denied()).to_string();
        assert!(message.contains("CAP_NET_BIND_SERVICE"), "{message}");
        assert!(message.contains("--addr 127.0.0.1:1053"), "{message}");
        let high = bind_failed("127.0.0.1:5353".parse().unwrap(), denied());
        assert!(
            matches!(high, StartError::Bind { .. }),
            "only ports below 1024 are privileged"
        );
    }
}
