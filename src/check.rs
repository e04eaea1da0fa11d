//! `skyline --check-config`: everything a start would read, validated without serving, so that
//! a deployment can test a configuration (and a records file) before it rolls out. It reads the
//! same flags, environment and `--config` file as a start, reports every problem it finds rather
//! than the first, and prints the settings that would be in force.

use crate::cli::Cli;
use crate::config::{self, FileConfig};
use crate::forwarding_settings;
use crate::protection::{cookie_settings, rrl_config};
use crate::settings::Given;
use skyline_controlplane::etcd::EtcdSource;
use skyline_controlplane::source::FileSource;
use skyline_dataplane::snapshot;
use std::fmt::Write as _;
use std::process::ExitCode;

/// Checks the configuration: exit 0 with the effective settings on stdout, or exit 1 with one
/// line per problem on stderr.
pub fn check(cli: &Cli) -> ExitCode {
    match effective(cli) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(problems) => {
            for problem in problems {
                eprintln!("skyline: {problem}");
            }
            ExitCode::FAILURE
        }
    }
}

/// The effective settings as `name = value` lines, or every problem found.
fn effective(cli: &Cli) -> Result<String, Vec<String>> {
    let file = cli
        .config
        .as_deref()
        .map(FileConfig::load)
        .transpose()
        .map_err(|e| vec![e.to_string()])?;
    let file = file.as_ref();
    let mut invalid = Vec::new();
    let given = Given::merge(cli, file, &mut invalid);
    let mut problems: Vec<String> = invalid.iter().map(ToString::to_string).collect();
    let operator = keep(&mut problems, config::operator(&given));
    let tcp = keep(&mut problems, config::tcp(&given.main));
    let drain = given.main.drain;
    let state = config::state(&given.main);
    let kubernetes = keep(&mut problems, config::kubernetes(&given));
    let http = given.main.http_addr;
    let observe = crate::observe::observe_config(&given.observe).map_err(config::ConfigError::from);
    let observe = keep(&mut problems, observe);

    let mut data_config = None;
    if let Some(operator) = &operator {
        if let Some(path) = &operator.records {
            let mut source = FileSource::new(
                path,
                &operator.path_prefix,
                operator.overrides.clone(),
                snapshot::empty_cell(),
            );
            match source.load() {
                Ok(loaded) if loaded.rejected > 0 => problems.push(format!(
                    "records file {}: {} of {} records are not valid and would be skipped (the log \
                     of a start names each)",
                    path.display(),
                    loaded.rejected,
                    loaded.records + loaded.rejected
                )),
                Ok(loaded) => data_config = loaded.config,
                Err(e) => problems.push(format!("records file {}: {e}", path.display())),
            }
        }
        if let Some(options) = &operator.etcd {
            if let Err(e) = EtcdSource::new(
                options,
                &operator.path_prefix,
                operator.overrides.clone(),
                snapshot::empty_cell(),
            ) {
                problems.push(e.to_string());
            }
        }
    }
    let settings = operator.and_then(|operator| keep(&mut problems, config::resolve(operator, data_config.as_ref())));
    let forward = settings
        .as_ref()
        .and_then(|s| keep(&mut problems, forwarding_settings(&given, s)));
    let cookies = keep(&mut problems, cookie_settings(&given.cookies));
    let rrl = keep(&mut problems, rrl_config(&given.rrl));
    let (Some(settings), Some(tcp), Some(kubernetes), Some(forward), Some(observe), Some(cookies), Some(rrl)) =
        (settings, tcp, kubernetes, forward, observe, cookies, rrl)
    else {
        return Err(problems);
    };
    if !problems.is_empty() {
        return Err(problems);
    }
    if let Some(problem) = &forward.default_unusable {
        eprintln!("skyline: warning: {problem}: names outside the zones would be refused");
    }
    let forward = forward.config;

    let mut out = String::new();
    let mut line = |name: &str, value: String| {
        let _ = writeln!(out, "{name} = {value}");
    };
    let mut addrs = vec![settings.addr];
    addrs.extend(settings.extra_addrs.iter().copied());
    line("addr", list(&addrs));
    line("domain", settings.skydns.domain.to_string());
    line("path_prefix", settings.skydns.path_prefix.clone());
    line("hostmaster", settings.skydns.hostmaster.to_string());
    line("ttl", settings.skydns.ttl.to_string());
    line("min_ttl", settings.skydns.min_ttl.to_string());
    let source = match (&settings.records, &settings.etcd) {
        (Some(path), _) => format!("records file {}", path.display()),
        (None, Some(etcd)) if etcd.discover => {
            format!("etcd {}, then its members (--discover)", etcd.endpoints.join(","))
        }
        (None, Some(etcd)) => format!("etcd {}", etcd.endpoints.join(",")),
        (None, None) => "none (an empty zone)".to_owned(),
    };
    line("source", source);
    let workers = match settings.workers {
        0 => "0 (one per core)".to_owned(),
        n => n.to_string(),
    };
    line("workers", workers);
    line("pin", settings.pin.to_string());
    if let Some(xdp) = config::xdp(&given.main) {
        match skyline_dataplane::io::check_xdp(&xdp, settings.addr, settings.workers) {
            Ok(queues) => line(
                "xdp",
                format!(
                    "{} (queues {queues}, mode {}, {} frames a queue)",
                    xdp.interface, xdp.mode, xdp.frames
                ),
            ),
            Err(_) if xdp.fallback => line("xdp", format!("{} (cannot start: kernel sockets alone)", xdp.interface)),
            Err(e) => return Err(vec![e.to_string()]),
        }
    }
    line("tcp_max_connections", tcp.max_connections.to_string());
    line("tcp_max_per_client", tcp.max_per_client.to_string());
    line("drain", format!("{}ms", drain.as_millis()));
    match &state {
        Some(state) => {
            line("state_dir", state.dir().display().to_string());
            line("state_max_age", format!("{}s", state.max_age().as_secs()));
        }
        None => line("state_dir", "none (nothing persisted)".to_owned()),
    }
    line("http_addr", http.map_or_else(|| "none".to_owned(), |a| a.to_string()));
    match &forward {
        Some(f) => {
            line("forward.upstreams", list(&f.upstreams));
            line("forward.timeout", format!("{}ms", f.timeout.as_millis()));
            line("forward.max_in_flight", f.max_in_flight.to_string());
            line(
                "forward.max_in_flight_per_client",
                f.max_in_flight_per_client.to_string(),
            );
            line("cache.size", format!("{} bytes", f.cache.max_bytes));
        }
        None => line("forward", "off (names outside the zones are refused)".to_owned()),
    }
    let cookie_line = match (cookies.enabled, cookies.secret.is_some(), cookies.previous.is_some()) {
        (false, _, _) => "off".to_owned(),
        (true, false, _) => "on, random secret made at start".to_owned(),
        (true, true, false) => "on, configured secret".to_owned(),
        (true, true, true) => "on, configured secret and previous secret".to_owned(),
    };
    line("cookies", cookie_line);
    let rrl_line = if rrl.is_enabled() {
        let exempt = if rrl.exempt.is_empty() {
            "none".to_owned()
        } else {
            list(&rrl.exempt)
        };
        format!(
            "{}/s, slip {}, window {}s, /{} and /{}, exempt {exempt}",
            rrl.rate, rrl.slip, rrl.window, rrl.ipv4_prefix, rrl.ipv6_prefix
        )
    } else {
        "off".to_owned()
    };
    line("rrl", rrl_line);
    match &kubernetes {
        Some(k) => line(
            "kubernetes.zones",
            k.zones
                .zones
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(","),
        ),
        None => line("kubernetes", "off".to_owned()),
    }
    for (name, value) in crate::observe::describe(&observe) {
        line(name, value);
    }
    Ok(out)
}

/// The value, or `None` with the error noted among the problems.
fn keep<T, E: std::fmt::Display>(problems: &mut Vec<String>, result: Result<T, E>) -> Option<T> {
    result.map_err(|e| problems.push(e.to_string())).ok()
}

fn list<T: ToString>(items: &[T]) -> String {
    items.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")
}
