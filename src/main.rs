//! The `skyline` server: resolves the configuration, loads the records file, starts the data
//! plane workers on the snapshot cell, and runs the control plane (the records file watch and
//! the signal handling) on a small tokio runtime of its own beside them.

mod cli;
mod config;

use cli::Cli;
use config::{ConfigError, FileConfig, Settings};
use skyline_controlplane::source::records_file::FileError;
use skyline_controlplane::source::FileSource;
use skyline_dataplane::snapshot::{self, skydns};
use skyline_dataplane::worker::{Server, ServerConfig, TcpConfig};
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::signal::unix::{signal, Signal, SignalKind};
use tracing_subscriber::EnvFilter;

/// How long, at exit, a records file load still in progress may take before it is abandoned.
const CONTROL_SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("records file {path}: {source}")]
    Records { path: PathBuf, source: FileError },
    #[error("cannot start the control plane runtime: {0}")]
    Runtime(std::io::Error),
    #[error("cannot install signal handlers: {0}")]
    Signals(std::io::Error),
    #[error("cannot serve DNS on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
}

fn main() -> ExitCode {
    let cli = Cli::try_parse_skydns(std::env::args_os()).unwrap_or_else(|e| e.exit());
    init_logging(cli.verbose);
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("skyline: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Logs to stderr: `--verbose` means debug level, otherwise `RUST_LOG` (default `info`).
fn init_logging(verbose: bool) {
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

fn run(cli: &Cli) -> Result<(), StartError> {
    let file = cli.config.as_deref().map(FileConfig::load).transpose()?;
    let operator = config::operator(cli, file.as_ref())?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("skyline-control")
        .enable_all()
        .build()
        .map_err(StartError::Runtime)?;
    let entered = runtime.enter();

    let cell = snapshot::empty_cell();
    let mut source = operator.records.as_ref().map(|path| {
        FileSource::new(
            path,
            &operator.path_prefix,
            operator.overrides.clone(),
            Arc::clone(&cell),
        )
    });
    let records_config = match source.as_mut() {
        Some(source) => {
            let loaded = source.load().map_err(|e| StartError::Records {
                path: source.path().to_owned(),
                source: e,
            })?;
            loaded.config
        }
        None => None,
    };
    let settings = config::resolve(operator, records_config.as_ref())?;
    if source.is_none() {
        cell.store(Arc::new(skydns::build(&settings.skydns, &[], 1, SystemTime::now())));
    }
    log_settings(&settings);

    let shutdown = Shutdown::register().map_err(StartError::Signals)?;
    match source {
        Some(source) => {
            runtime.spawn(source.watch().map_err(StartError::Signals)?);
        }
        None => {
            // SIGHUP's default action ends the process; an operator's habitual reload must not.
            let mut hangup = signal(SignalKind::hangup()).map_err(StartError::Signals)?;
            runtime.spawn(async move {
                while hangup.recv().await.is_some() {
                    tracing::info!("SIGHUP received; there is no records file to reload");
                }
            });
        }
    }

    let server_config = ServerConfig {
        addr: settings.addr,
        workers: settings.workers,
        pin: settings.pin,
        tcp: TcpConfig::default(),
    };
    let server = Server::start(server_config, cell).map_err(|source| StartError::Bind {
        addr: settings.addr,
        source,
    })?;
    let local = server.local_addr();
    tracing::info!(
        "listening on udp://{local} tcp://{local} for {}",
        settings.skydns.domain
    );

    let signal = runtime.block_on(shutdown.wait());
    tracing::info!("{signal} received, shutting down");
    server.shutdown();
    drop(entered);
    runtime.shutdown_timeout(CONTROL_SHUTDOWN_GRACE);
    Ok(())
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
        records = ?s.records,
        workers = s.workers,
        pin = s.pin,
        nameservers = ?s.nameservers,
        ndots = s.ndots,
        machines = ?s.machines,
        "configuration"
    );
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
    async fn wait(mut self) -> &'static str {
        tokio::select! {
            _ = self.interrupt.recv() => "SIGINT",
            _ = self.terminate.recv() => "SIGTERM",
        }
    }
}
