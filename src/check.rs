//! `skyline --check-config`: everything a start would read, validated without serving, so that
//! a deployment can test a configuration (and a records file) before it rolls out. It makes the
//! validation a start makes (`crate::validate`), with the same messages, reports every problem
//! it finds rather than the first, and prints the settings that would be in force as a
//! `--config` file. It fails exactly where a start fails: records a start would skip as invalid
//! (and serve the others) are a warning that names how many, not a failure.

use crate::cli::Cli;
use crate::config::{self, ConfigError};
use crate::in_force::InForce;
use crate::settings::FileConfig;
use crate::validate::{self, OverData, Valid};
use std::fmt::Write as _;
use std::process::ExitCode;

/// Settings whose values are secrets: printed as set or not, never shown.
const SECRETS: &[&str] = &["password", "cookies.secret", "cookies.secret_previous"];

/// Checks the configuration: exit 0 with the settings in force on stdout, as TOML, or exit 1
/// with one line per problem on stderr.
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

/// The settings in force as a configuration file, or every problem found.
fn effective(cli: &Cli) -> Result<String, Vec<String>> {
    let strings = |problems: Vec<ConfigError>| problems.iter().map(ToString::to_string).collect::<Vec<_>>();
    let file = FileConfig::given(cli).map_err(strings)?;
    let valid = validate::validate(cli, file.as_ref());
    // The records file is read even when a setting is wrong, so that its problems are named
    // in the same run.
    let mut unchecked = Vec::new();
    let (records, prefix) = match &valid {
        Ok(valid) => (valid.operator.records.clone(), valid.operator.path_prefix.clone()),
        Err(_) => {
            let given = cli.given(file.as_ref(), &mut unchecked);
            match config::operator(&given) {
                Ok(operator) => (operator.records, operator.path_prefix),
                Err(_) => (None, String::new()),
            }
        }
    };
    let mut problems: Vec<String> = match &valid {
        Ok(_) => Vec::new(),
        Err(found) => found.iter().map(ToString::to_string).collect(),
    };
    let mut data = None;
    if let Some(path) = &records {
        match validate::records(path, &prefix) {
            Ok(read) => {
                if read.rejected > 0 {
                    eprintln!(
                        "skyline: warning: records file {}: {} of {} records are not valid and would be \
                         skipped, the others served (the log of a start names each)",
                        path.display(),
                        read.rejected,
                        read.records + read.rejected
                    );
                }
                data = read.config;
            }
            Err(e) => problems.push(e.to_string()),
        }
    }
    let valid = match valid {
        Ok(valid) if problems.is_empty() => valid,
        _ => return Err(problems),
    };
    let over = valid.over_data(data.as_ref()).map_err(|e| vec![e.to_string()])?;
    let mut notes: Vec<String> = file
        .iter()
        .flat_map(|f| f.notes.iter().map(|note| format!("Corefile: {note}")))
        .collect();
    if let Some(xdp) = config::xdp(&valid.given.main) {
        match skyline_dataplane::io::check_xdp(&xdp, over.settings.addr, over.settings.workers) {
            Ok(queues) => notes.push(format!(
                "xdp: {} queues, mode {}, {} frames a queue",
                queues, xdp.mode, xdp.frames
            )),
            Err(_) if xdp.fallback => notes.push(format!(
                "xdp: cannot start on {}: kernel sockets alone (xdp_fallback)",
                xdp.interface
            )),
            Err(e) => return Err(vec![e.to_string()]),
        }
    }
    if let Some(problem) = &over.forward.default_unusable {
        eprintln!("skyline: warning: {problem}: names outside the zones would be refused");
    }
    Ok(write(&valid, &over, notes))
}

/// The settings in force as a configuration file: flags, environment and file stacked over the
/// data's `/<prefix>/config` and the defaults, the keys of a group in its table; a setting that
/// is not set is a comment, and so is what has no key (the data source, the TTLs of the data).
fn write(valid: &Valid, over: &OverData, notes: Vec<String>) -> String {
    let given = &valid.given;
    let settings = &over.settings;
    let skydns = &settings.skydns;
    let mut addrs = vec![settings.addr];
    addrs.extend(settings.extra_addrs.iter().copied());
    let resolved: Vec<(&str, Option<toml::Value>)> = vec![
        ("addr", addrs.in_force()),
        ("domain", skydns.domain.in_force()),
        ("hostmaster", skydns.hostmaster.in_force()),
        ("local", skydns.local.in_force()),
        ("round_robin", skydns.round_robin.in_force()),
        ("wildcards_marker", skydns.wildcards_marker.in_force()),
        ("cname_chains", skydns.cname_chains.in_force()),
        ("fallthrough", skydns.fallthrough.in_force()),
        ("nameservers", settings.nameservers.in_force()),
        ("ndots", settings.ndots.in_force()),
        ("forward.no_rec", settings.no_rec.in_force()),
        ("forward.ns_rotate", settings.ns_rotate.in_force()),
        (
            "forward.timeout",
            over.forward
                .config
                .as_ref()
                .map(|f| f.timeout)
                .or(given.forward.timeout)
                .in_force(),
        ),
    ];
    let mut out = String::from(
        "# The settings in force: flags, then environment variables, then the --config file, then\n\
         # the data's /<prefix>/config, then the defaults. Read as a --config file, this gives the\n\
         # same settings.\n",
    );
    let source = match (&settings.records, &settings.etcd) {
        (Some(path), _) => format!("the records file {}", crate::in_force::absolute(path).display()),
        (None, Some(etcd)) if etcd.discover => format!("etcd {}, then its members", etcd.endpoints.join(",")),
        (None, Some(etcd)) => format!("etcd {}", etcd.endpoints.join(",")),
        (None, None) => "none (an empty zone)".to_owned(),
    };
    let _ = writeln!(out, "# source: {source}");
    let _ = writeln!(
        out,
        "# from the data or the defaults, with no key here: ttl = {}, min_ttl = {}, priority = {}",
        skydns.ttl, skydns.min_ttl, skydns.priority
    );
    let forwarding = match &over.forward.config {
        Some(f) => format!(
            "forwarding to {}",
            f.upstreams
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ),
        None => "not forwarding: names outside the zones are refused".to_owned(),
    };
    let _ = writeln!(out, "# {forwarding}");
    for note in notes {
        let _ = writeln!(out, "# {note}");
    }
    let group = |out: &mut String, table: &str, entries: Vec<(&'static str, Option<toml::Value>)>| {
        if !table.is_empty() {
            let _ = writeln!(out, "\n[{table}]");
        }
        for (key, value) in entries {
            let full = if table.is_empty() {
                key.to_owned()
            } else {
                format!("{table}.{key}")
            };
            let value = resolved
                .iter()
                .find(|(k, _)| *k == full)
                .map_or(value, |(_, v)| v.clone());
            let _ = match value {
                Some(_) if SECRETS.contains(&full.as_str()) => writeln!(out, "# {key}: set, not shown"),
                Some(value) => writeln!(out, "{key} = {value}"),
                None => writeln!(out, "# {key}: not set"),
            };
        }
    };
    let mut top = given.main.in_force();
    top.extend(given.etcd.in_force());
    top.extend(given.plugins.in_force());
    group(&mut out, "", top);
    group(&mut out, "forward", given.forward.in_force());
    group(&mut out, "cache", given.cache.in_force());
    if given.kubernetes_on {
        group(&mut out, "kubernetes", given.kubernetes.in_force());
    } else {
        let _ = writeln!(out, "\n# [kubernetes]: off (the table's presence turns cluster DNS on)");
    }
    if given.hosts_given {
        group(&mut out, "hosts", given.hosts.in_force());
    } else {
        let _ = writeln!(
            out,
            "\n# [hosts]: off (a file or an inline entry turns the hosts source on)"
        );
    }
    group(&mut out, "observe", given.observe.in_force());
    group(&mut out, "cookies", given.cookies.in_force());
    group(&mut out, "rrl", given.rrl.in_force());
    group(&mut out, "rewrite", given.rewrite.in_force());
    group(&mut out, "template", given.template.in_force());
    out
}
