//! A Corefile's server blocks turned into skyline's own settings: the same [`FileConfig`] a
//! `--config` file gives, so that everything after (flags and environment over it, the
//! validation, `--check-config`'s listing, SIGHUP) is one code path.
//!
//! skyline is one server: every address it listens on serves every zone of the Corefile, and a
//! block's plugins set the settings of its zones (a `forward` in the `cluster.local` block is a
//! stub zone, in the `.` block the upstreams of everything else). What cannot be said that way is
//! an error naming the file, line and plugin, never silently dropped.

use super::lex::{Place, Token};
use super::parse::{Directive, ServerBlock};
use crate::file_value::Addrs;
use crate::settings::{
    CacheFile, EtcdFile, FileConfig, ForwardFile, HostsFile, KubernetesFile, MainFile, ObserveFile, PluginsFile,
    RewriteFile, TemplateFile,
};
use crate::stub_zone::StubZoneFile;
use skyline_dataplane::forward::{resolv_conf, TLS_PORT};
use skyline_dataplane::rewrite::{Plugins, PluginsConfig};
use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// A Corefile that skyline cannot run as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct CorefileError {
    /// Where.
    pub place: Place,
    /// The plugin at fault, when the problem is in one.
    pub plugin: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for CorefileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.plugin {
            Some(plugin) => write!(f, "{}: plugin {plugin}: {}", self.place, self.message),
            None => write!(f, "{}: {}", self.place, self.message),
        }
    }
}

/// The plugins skyline runs; any other name in a server block is refused by name.
pub const PLUGINS: &[&str] = &[
    "any",
    "autopath",
    "bind",
    "cache",
    "chaos",
    "debug",
    "dnstap",
    "errors",
    "etcd",
    "forward",
    "health",
    "hosts",
    "kubernetes",
    "loadbalance",
    "log",
    "loop",
    "prometheus",
    "ready",
    "reload",
    "rewrite",
    "template",
    "whoami",
];

/// Where CoreDNS's `health` serves by default.
const HEALTH_ADDR: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 8080);
/// Where CoreDNS's `ready` serves by default.
const READY_ADDR: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 8181);
/// Where CoreDNS's `prometheus` serves by default (`localhost:9153`).
const PROMETHEUS_ADDR: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 9153);
/// CoreDNS's `reload` interval when none is written.
const RELOAD_INTERVAL: Duration = Duration::from_secs(30);
/// CoreDNS's cache capacity, entries, when none is written.
const CACHE_CAPACITY: u64 = 9984;
/// The memory skyline's cache gives one entry, to turn a CoreDNS capacity into a size: a
/// reply of a few records and its key.
const CACHE_ENTRY_BYTES: u64 = 1024;
/// CoreDNS's cache TTL caps when none is written: success, denial, and the lowest of both.
const COREDNS_SUCCESS_TTL: u32 = 3600;
const COREDNS_DENIAL_TTL: u32 = 1800;
const COREDNS_MIN_TTL: u32 = 5;

/// What a Corefile says, as settings.
#[derive(Debug, Default)]
pub struct Translated {
    /// The settings, as a configuration file would give them.
    pub file: FileConfig,
    /// Things that run, but not quite as CoreDNS runs them: logged at start and printed by
    /// `--check-config`.
    pub notes: Vec<String>,
}

/// One zone of a server block.
#[derive(Debug, Clone)]
struct Key {
    zone: String,
    port: u16,
    place: Place,
}

/// Translates `blocks`; every problem is returned, not only the first.
pub fn translate(blocks: &[ServerBlock]) -> Result<Translated, Vec<CorefileError>> {
    let mut t = Translator::default();
    let mut seen: BTreeMap<(String, u16), Place> = BTreeMap::new();
    let mut parsed = Vec::new();
    for block in blocks {
        let mut keys = Vec::new();
        for token in &block.keys {
            match key(token) {
                Ok(k) => {
                    if let Some(first) = seen.insert((k.zone.clone(), k.port), k.place.clone()) {
                        t.error(
                            &k.place,
                            None,
                            format!("zone {} on port {} is already a key at {first}", k.zone, k.port),
                        );
                    }
                    keys.push(k);
                }
                Err(message) => t.error(&token.place, None, message),
            }
        }
        parsed.push(keys);
    }
    // The root zone's block gives the settings that are the whole server's.
    let mut order: Vec<usize> = (0..blocks.len()).collect();
    order.sort_by_key(|&i| !parsed[i].iter().any(|k| k.zone == "."));
    for i in order {
        t.block(&blocks[i], &parsed[i]);
    }
    t.finish()
}

/// A server block key: `[dns://]ZONE[:PORT]`, or a CIDR of a reverse zone.
fn key(token: &Token) -> Result<Key, String> {
    let text = token.text.as_str();
    let rest = match text.split_once("://") {
        Some(("dns", rest)) => rest,
        Some((scheme, _)) => {
            return Err(format!(
                "server block key {text}: skyline serves DNS over UDP and TCP only (dns://), not {scheme}://"
            ))
        }
        None => text,
    };
    let (zone, port) = match rest.rsplit_once(':') {
        Some((zone, port)) if !zone.contains(':') || zone.starts_with('[') => {
            let port = port
                .parse::<u16>()
                .map_err(|_| format!("server block key {text}: {port:?} is not a port"))?;
            (zone, port)
        }
        _ => (rest, 53),
    };
    let zone = if zone.is_empty() { "." } else { zone };
    Ok(Key {
        zone: fqdn(zone)?,
        port,
        place: token.place.clone(),
    })
}

/// `name` lower-cased with its final dot; a CIDR (`10.0.0.0/8`) becomes its reverse zone.
fn fqdn(name: &str) -> Result<String, String> {
    if let Some((addr, bits)) = name.split_once('/') {
        return reverse_zone(addr, bits).ok_or_else(|| format!("{name} is not a CIDR on an octet or nibble boundary"));
    }
    if name == "." {
        return Ok(".".into());
    }
    let lower = name.to_ascii_lowercase();
    if lower.starts_with('.') || lower.contains("..") || lower.contains(char::is_whitespace) {
        return Err(format!("{name:?} is not a domain name"));
    }
    Ok(if lower.ends_with('.') {
        lower
    } else {
        format!("{lower}.")
    })
}

/// The reverse zone of `addr/bits`, whose bits end on a label (8 for IPv4, 4 for IPv6).
fn reverse_zone(addr: &str, bits: &str) -> Option<String> {
    let bits: u32 = bits.parse().ok()?;
    match addr.parse::<IpAddr>().ok()? {
        IpAddr::V4(v4) if bits <= 32 && bits.is_multiple_of(8) => {
            let octets = v4.octets();
            let mut labels: Vec<String> = octets[..(bits / 8) as usize].iter().map(u8::to_string).collect();
            labels.reverse();
            labels.push("in-addr.arpa.".into());
            Some(labels.join("."))
        }
        IpAddr::V6(v6) if bits <= 128 && bits.is_multiple_of(4) => {
            let nibbles: Vec<String> = v6
                .octets()
                .iter()
                .flat_map(|o| [o >> 4, o & 0xf])
                .take((bits / 4) as usize)
                .map(|n| format!("{n:x}"))
                .collect();
            let mut labels = nibbles;
            labels.reverse();
            labels.push("ip6.arpa.".into());
            Some(labels.join("."))
        }
        _ => None,
    }
}

/// A Go duration as CoreDNS writes them: `5s`, `500ms`, `1m30s`, `1h`.
fn go_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("{text:?} is not a duration such as 5s, 500ms or 1m30s");
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit() && c != '.').ok_or_else(bad)?;
        let number: f64 = rest[..digits].parse().map_err(|_| bad())?;
        let unit_len = rest[digits..]
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len() - digits);
        let unit = &rest[digits..digits + unit_len];
        let seconds = match unit {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        total += Duration::from_secs_f64(number * seconds);
        rest = &rest[digits + unit_len..];
    }
    Ok(total)
}

/// `duration` as the configuration file writes one.
fn file_duration(duration: Duration) -> String {
    format!("{}ms", duration.as_millis())
}

/// An address `[IP]:PORT`, `IP:PORT` or `:PORT` (every address), as `health`, `ready` and
/// `prometheus` take one.
fn listen_addr(text: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let (host, port) = text
        .rsplit_once(':')
        .ok_or_else(|| format!("{text:?} is not an address HOST:PORT"))?;
    let port: u16 = port.parse().map_err(|_| format!("{text:?}: {port:?} is not a port"))?;
    let ip = match host {
        "" => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        "localhost" => IpAddr::V4(Ipv4Addr::LOCALHOST),
        host => host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse()
            .map_err(|_| {
                format!("{text:?}: {host:?} is not an IP address (skyline does not look up host names here)")
            })?,
    };
    Ok(SocketAddr::new(ip, port))
}

/// What the root zone's `forward` (or a zone's) sends to.
#[derive(Debug, Default)]
struct Upstreams {
    servers: Vec<SocketAddr>,
    resolv_conf: Option<PathBuf>,
}

#[derive(Default)]
struct Translator {
    errors: Vec<CorefileError>,
    notes: Vec<String>,
    main: MainFile,
    etcd: EtcdFile,
    forward: ForwardFile,
    cache: CacheFile,
    kubernetes: Option<KubernetesFile>,
    hosts: Option<HostsFile>,
    hosts_place: Option<Place>,
    observe: ObserveFile,
    plugins: PluginsFile,
    rewrite: Option<Vec<String>>,
    templates: Option<Vec<String>>,
    /// DNS addresses, in the order written.
    addrs: Vec<SocketAddr>,
    http: Vec<SocketAddr>,
    stub_zones: Vec<StubZoneFile>,
    negative_zones: BTreeMap<String, u32>,
    success_zones: BTreeMap<String, u32>,
    round_robin: bool,
    etcd_place: Option<Place>,
    kubernetes_place: Option<Place>,
    root_forward: bool,
    /// Where `autopath @kubernetes` is, and the host's search domains.
    autopath: Option<(Place, Vec<String>)>,
}

impl Translator {
    fn error(&mut self, place: &Place, plugin: Option<&str>, message: impl Into<String>) {
        self.errors.push(CorefileError {
            place: place.clone(),
            plugin: plugin.map(str::to_owned),
            message: message.into(),
        });
    }

    fn block(&mut self, block: &ServerBlock, keys: &[Key]) {
        let zones: Vec<String> = keys.iter().map(|k| k.zone.clone()).collect();
        let is_root = zones.iter().any(|z| z == ".");
        let mut binds: Vec<IpAddr> = Vec::new();
        let mut has_cache = false;
        for d in &block.directives {
            let name = d.name.text.as_str();
            let plugin = Some(name);
            let r = match name {
                "autopath" => self.autopath(d),
                "any" => no_args(d).map(|()| self.plugins.any = Some(true)),
                "bind" => self.bind(d, &mut binds),
                "chaos" => self.chaos(d),
                "rewrite" => self.rewrite(d, is_root),
                "template" => self.template(d, &zones),
                "whoami" => no_args(d).map(|()| {
                    self.plugins
                        .whoami
                        .get_or_insert_with(Vec::new)
                        .extend(zones.iter().cloned())
                }),
                "cache" => {
                    has_cache = true;
                    self.cache(d, &zones, is_root)
                }
                "debug" => no_args(d),
                "dnstap" => self.dnstap(d),
                "errors" => self.errors_plugin(d),
                "etcd" => self.etcd(d, &zones),
                "forward" => self.forward(d, &zones, is_root),
                "health" => self.health(d),
                "hosts" => self.hosts(d, &zones),
                "kubernetes" => self.kubernetes(d, &zones),
                "loadbalance" => self.loadbalance(d),
                "log" => self.log(d),
                "loop" => no_args(d).map(|()| self.forward.loop_detect = Some(true)),
                "prometheus" => self.listener(d, PROMETHEUS_ADDR),
                "ready" => self.listener(d, READY_ADDR),
                "reload" => self.reload(d),
                _ => Err((
                    d.name.place.clone(),
                    format!("not supported by skyline (it runs: {})", PLUGINS.join(", ")),
                )),
            };
            if let Err((place, message)) = r {
                self.error(&place, plugin, message);
            }
        }
        if !has_cache {
            // As in CoreDNS, a block without `cache` caches nothing for its zones.
            for zone in &zones {
                self.success_zones.entry(zone.clone()).or_insert(0);
                self.negative_zones.entry(zone.clone()).or_insert(0);
            }
        }
        let ips = if binds.is_empty() {
            vec![IpAddr::V4(Ipv4Addr::UNSPECIFIED), IpAddr::V6(Ipv6Addr::UNSPECIFIED)]
        } else {
            binds
        };
        for k in keys {
            for ip in &ips {
                let addr = SocketAddr::new(*ip, k.port);
                if !self.addrs.contains(&addr) {
                    self.addrs.push(addr);
                }
            }
        }
    }

    fn bind(&mut self, d: &Directive, binds: &mut Vec<IpAddr>) -> Result<(), (Place, String)> {
        no_block(d)?;
        if d.args.is_empty() {
            return Err((d.name.place.clone(), "names no address".into()));
        }
        for arg in &d.args {
            let ip = arg.text.parse::<IpAddr>().map_err(|_| {
                (
                    arg.place.clone(),
                    format!(
                        "{:?} is not an IP address (skyline binds addresses, not interface names)",
                        arg.text
                    ),
                )
            })?;
            if !binds.contains(&ip) {
                binds.push(ip);
            }
        }
        Ok(())
    }

    fn errors_plugin(&mut self, d: &Directive) -> Result<(), (Place, String)> {
        if let Some(arg) = d.args.first().filter(|a| a.text != "stdout") {
            return Err((
                arg.place.clone(),
                format!("{:?}: errors go to the log; only `stdout` is taken", arg.text),
            ));
        }
        for line in &d.block {
            match line.name.text.as_str() {
                "consolidate" | "stacktrace" => self.notes.push(format!(
                    "{}: errors {}: skyline logs each error once with its cause; the option changes nothing",
                    line.name.place, line.name.text
                )),
                other => return Err((line.name.place.clone(), format!("unknown option {other}"))),
            }
        }
        Ok(())
    }

    fn dnstap(&mut self, d: &Directive) -> Result<(), (Place, String)> {
        no_block(d)?;
        let [target, rest @ ..] = d.args.as_slice() else {
            return Err((d.name.place.clone(), "dnstap unix:///PATH [full]".into()));
        };
        let Some(path) = target.text.strip_prefix("unix://") else {
            return Err((
                target.place.clone(),
                format!(
                    "{:?}: skyline writes dnstap to a unix socket, unix:///PATH",
                    target.text
                ),
            ));
        };
        if let Some(extra) = rest.iter().find(|a| a.text != "full") {
            return Err((
                extra.place.clone(),
                format!("{:?}: dnstap unix:///PATH [full]", extra.text),
            ));
        }
        self.observe.dnstap = Some(PathBuf::from(path));
        Ok(())
    }

    fn log(&mut self, d: &Directive) -> Result<(), (Place, String)> {
        no_block(d)?;
        if let Some(arg) = d.args.iter().find(|a| a.text != ".") {
            return Err((
                arg.place.clone(),
                format!(
                    "{:?}: skyline's query log covers every name in one format; write `log` alone",
                    arg.text
                ),
            ));
        }
        self.observe.query_log = Some(PathBuf::from("-"));
        Ok(())
    }

    fn chaos(&mut self, d: &Directive) -> Result<(), (Place, String)> {
        no_block(d)?;
        self.plugins.chaos = Some(true);
        if let [version, authors @ ..] = d.args.as_slice() {
            self.plugins.chaos_version = Some(version.text.clone());
            if !authors.is_empty() {
                self.plugins.chaos_authors = Some(authors.iter().map(|a| a.text.clone()).collect());
            }
        }
        Ok(())
    }

    /// A rule as one line: its words, then those of its block's lines (CoreDNS's block form,
    /// `rewrite stop { name … ; answer name … }`), checked here so that a bad one is named
    /// with its line.
    fn rewrite(&mut self, d: &Directive, is_root: bool) -> Result<(), (Place, String)> {
        let mut words: Vec<String> = d.args.iter().map(word).collect();
        for line in &d.block {
            no_block(line)?;
            words.push(word(&line.name));
            words.extend(line.args.iter().map(word));
        }
        let rule = words.join(" ");
        Plugins::new(PluginsConfig {
            rewrite: vec![rule.clone()],
            ..PluginsConfig::default()
        })
        .map_err(|e| (d.name.place.clone(), e.to_string()))?;
        if !is_root {
            self.notes.push(format!(
                "{}: rewrite: skyline applies rewrite rules to every question, not only the block's zones",
                d.name.place
            ));
        }
        self.rewrite.get_or_insert_with(Vec::new).push(rule);
        Ok(())
    }

    /// A template as its setting spells it: `CLASS TYPE ZONE... { line; … }`, the block's
    /// zones when it names none, as CoreDNS scopes it.
    fn template(&mut self, d: &Directive, zones: &[String]) -> Result<(), (Place, String)> {
        let mut head: Vec<String> = d.args.iter().map(word).collect();
        if head.len() < 2 {
            return Err((d.name.place.clone(), "template CLASS TYPE [ZONE...]".into()));
        }
        if head.len() == 2 {
            head.extend(zones.iter().cloned());
        }
        let body: Vec<String> = d
            .block
            .iter()
            .map(|line| {
                no_block(line)?;
                Ok(std::iter::once(word(&line.name))
                    .chain(line.args.iter().map(word))
                    .collect::<Vec<_>>()
                    .join(" "))
            })
            .collect::<Result<_, (Place, String)>>()?;
        let text = format!("{} {{\n{}\n}}", head.join(" "), body.join("\n"));
        Plugins::new(PluginsConfig {
            templates: vec![text.clone()],
            ..PluginsConfig::default()
        })
        .map_err(|e| (d.name.place.clone(), e.to_string()))?;
        self.templates.get_or_insert_with(Vec::new).push(text);
        Ok(())
    }

    fn loadbalance(&mut self, d: &Directive) -> Result<(), (Place, String)> {
        no_block(d)?;
        match d.args.first() {
            None => {}
            Some(a) if a.text == "round_robin" => {}
            Some(a) => return Err((a.place.clone(), format!("{:?}: the policy is round_robin", a.text))),
        }
        self.round_robin = true;
        Ok(())
    }

    fn listener(&mut self, d: &Directive, default: SocketAddr) -> Result<(), (Place, String)> {
        no_block(d)?;
        let addr = match d.args.as_slice() {
            [] => default,
            [a] => listen_addr(&a.text).map_err(|m| (a.place.clone(), m))?,
            [_, extra, ..] => return Err((extra.place.clone(), "takes one address".into())),
        };
        if !self.http.contains(&addr) {
            self.http.push(addr);
        }
        Ok(())
    }

    fn health(&mut self, d: &Directive) -> Result<(), (Place, String)> {
        let plain = Directive {
            name: d.name.clone(),
            args: d.args.clone(),
            block: Vec::new(),
        };
        self.listener(&plain, HEALTH_ADDR)?;
        for line in &d.block {
            match (line.name.text.as_str(), line.args.as_slice()) {
                ("lameduck", [value]) => {
                    let duration = go_duration(&value.text).map_err(|m| (value.place.clone(), m))?;
                    self.main.drain = Some(file_duration(duration));
                }
                ("lameduck", _) => return Err((line.name.place.clone(), "lameduck takes one duration".into())),
                (other, _) => return Err((line.name.place.clone(), format!("unknown option {other}"))),
            }
        }
        Ok(())
    }

    fn reload(&mut self, d: &Directive) -> Result<(), (Place, String)> {
        no_block(d)?;
        let interval = match d.args.first() {
            Some(a) => go_duration(&a.text).map_err(|m| (a.place.clone(), m))?,
            None => RELOAD_INTERVAL,
        };
        if let Some(jitter) = d.args.get(1) {
            go_duration(&jitter.text).map_err(|m| (jitter.place.clone(), m))?;
        }
        if let Some(extra) = d.args.get(2) {
            return Err((extra.place.clone(), "reload [INTERVAL] [JITTER]".into()));
        }
        if interval < Duration::from_secs(2) {
            return Err((d.name.place.clone(), "the interval is at least 2s, as CoreDNS's".into()));
        }
        self.main.reload = Some(file_duration(interval));
        Ok(())
    }

    /// `cache`: CoreDNS's caps (success 3600 s, denial 1800 s, both at least 5 s unless
    /// written) from the `.` block for the whole cache, another block's for its zones alone.
    fn cache(&mut self, d: &Directive, zones: &[String], is_root: bool) -> Result<(), (Place, String)> {
        let mut max_ttl: Option<u32> = None;
        let mut denial_ttl: Option<u32> = None;
        let mut min_ttl: Option<u32> = None;
        let (mut success, mut denial) = (CACHE_CAPACITY, CACHE_CAPACITY);
        let mut disabled: Vec<(bool, Vec<String>)> = Vec::new();
        if let Some(first) = d.args.first() {
            max_ttl = Some(seconds(first)?);
            denial_ttl = max_ttl;
            if let Some(zone) = d.args.get(1) {
                return Err((
                    zone.place.clone(),
                    "zones of a cache are the block's in skyline: write the cache in the zone's block".into(),
                ));
            }
        }
        for line in &d.block {
            let args = line.args.as_slice();
            match line.name.text.as_str() {
                kind @ ("success" | "denial") => {
                    let [cap, rest @ ..] = args else {
                        return Err((line.name.place.clone(), format!("{kind} CAPACITY [TTL] [MINTTL]")));
                    };
                    let cap: u64 = cap
                        .text
                        .parse()
                        .map_err(|_| (cap.place.clone(), format!("{:?} is not a capacity", cap.text)))?;
                    let ttl = rest.first().map(seconds).transpose()?;
                    let min = rest.get(1).map(seconds).transpose()?;
                    if kind == "success" {
                        success = cap;
                        if ttl.is_some() {
                            max_ttl = ttl;
                        }
                        if min.is_some() {
                            min_ttl = min;
                        }
                    } else {
                        denial = cap;
                        if ttl.is_some() {
                            denial_ttl = ttl;
                        }
                        if min.is_some() {
                            self.notes.push(format!(
                                "{}: cache denial MINTTL: skyline raises a negative answer's TTL to the success MINTTL",
                                line.name.place
                            ));
                        }
                    }
                }
                "prefetch" => self.cache.prefetch = Some(true),
                "serve_stale" => {
                    let duration = match args.first() {
                        Some(a) => go_duration(&a.text).map_err(|m| (a.place.clone(), m))?,
                        None => Duration::from_secs(3600),
                    };
                    if let Some(mode) = args.get(1).filter(|m| m.text != "immediate") {
                        return Err((
                            mode.place.clone(),
                            format!(
                                "{:?}: skyline serves a stale answer when the upstreams fail, then refreshes it (immediate)",
                                mode.text
                            ),
                        ));
                    }
                    self.cache.serve_stale = Some(duration.as_secs() as u32);
                }
                "keepttl" => {
                    no_args(line)?;
                    self.cache.keep_ttl = Some(true);
                }
                "servfail" => {
                    let [value] = args else {
                        return Err((line.name.place.clone(), "servfail DURATION".into()));
                    };
                    let duration = go_duration(&value.text).map_err(|m| (value.place.clone(), m))?;
                    if !duration.is_zero() {
                        self.notes.push(format!(
                            "{}: cache servfail: skyline does not cache SERVFAIL; the name is asked again, or served stale when it was cached",
                            line.name.place
                        ));
                    }
                }
                "disable" => {
                    let [kind, only @ ..] = args else {
                        return Err((line.name.place.clone(), "disable success|denial [ZONES...]".into()));
                    };
                    let success = match kind.text.as_str() {
                        "success" => true,
                        "denial" => false,
                        other => return Err((kind.place.clone(), format!("{other:?}: disable success or denial"))),
                    };
                    let only = only
                        .iter()
                        .map(|z| fqdn(&z.text).map_err(|m| (z.place.clone(), m)))
                        .collect::<Result<Vec<_>, _>>()?;
                    disabled.push((success, if only.is_empty() { zones.to_vec() } else { only }));
                }
                other => return Err((line.name.place.clone(), format!("unknown option {other}"))),
            }
        }
        let max_ttl = max_ttl.unwrap_or(COREDNS_SUCCESS_TTL);
        let denial_ttl = denial_ttl.unwrap_or(COREDNS_DENIAL_TTL);
        let min_ttl = min_ttl.unwrap_or(COREDNS_MIN_TTL);
        if is_root {
            self.cache.max_ttl = Some(max_ttl);
            self.cache.min_ttl = Some(min_ttl);
            self.cache.negative_ttl = Some(denial_ttl);
            let bytes = success.saturating_add(denial).saturating_mul(CACHE_ENTRY_BYTES);
            self.cache.size = Some(format!("{}KiB", bytes / 1024));
        } else {
            for zone in zones {
                self.negative_zones.insert(zone.clone(), denial_ttl);
                self.success_zones.insert(zone.clone(), max_ttl);
            }
        }
        for (success, zones) in disabled {
            let caps = if success {
                &mut self.success_zones
            } else {
                &mut self.negative_zones
            };
            for zone in zones {
                caps.insert(zone, 0);
            }
        }
        Ok(())
    }

    fn forward(&mut self, d: &Directive, zones: &[String], is_root: bool) -> Result<(), (Place, String)> {
        let [from, to @ ..] = d.args.as_slice() else {
            return Err((d.name.place.clone(), "forward FROM TO...".into()));
        };
        if to.is_empty() {
            return Err((from.place.clone(), "names no upstream".into()));
        }
        let from_zone = fqdn(&from.text).map_err(|m| (from.place.clone(), m))?;
        let mut upstreams = Upstreams::default();
        let mut tls = None;
        for arg in to {
            let text = arg.text.as_str();
            let (scheme, rest) = match text.split_once("://") {
                Some((scheme, rest)) => (scheme, rest),
                None => ("dns", text),
            };
            let is_tls = match scheme {
                "dns" => false,
                "tls" => true,
                _ => {
                    return Err((
                        arg.place.clone(),
                        format!("{text}: upstreams over {scheme}:// are not supported (dns:// and tls:// are)"),
                    ))
                }
            };
            if *tls.get_or_insert(is_tls) != is_tls {
                return Err((
                    arg.place.clone(),
                    "skyline asks a forward's upstreams one way: all tls:// or none".into(),
                ));
            }
            if rest.contains('/') {
                if is_tls {
                    return Err((
                        arg.place.clone(),
                        "a resolv.conf file is read for dns:// upstreams only".into(),
                    ));
                }
                if upstreams.resolv_conf.is_some() {
                    return Err((arg.place.clone(), "one resolv.conf file per forward".into()));
                }
                upstreams.resolv_conf = Some(PathBuf::from(rest));
                continue;
            }
            let port = if is_tls { TLS_PORT } else { 53 };
            let addr = upstream_addr(rest, port).map_err(|m| (arg.place.clone(), m))?;
            upstreams.servers.push(addr);
        }
        let tls = tls.unwrap_or(false);
        let (tuning, expire) = forward_options(d, tls, &mut self.notes)?;
        if let Some(expire) = expire {
            if self.forward.expire.as_ref().is_some_and(|e| *e != expire) {
                return Err((
                    d.name.place.clone(),
                    "skyline closes idle upstream connections after one expire for every forward".into(),
                ));
            }
            self.forward.expire = Some(expire);
        }
        // The zones this forward serves: its FROM where that is inside the block's zones,
        // else the block's zones.
        let targets: Vec<String> = if from_zone == "." {
            zones.to_vec()
        } else if zones.iter().any(|z| z == "." || within(&from_zone, z)) {
            vec![from_zone]
        } else {
            return Err((
                from.place.clone(),
                format!("{} is outside the block's zones", from.text),
            ));
        };
        for zone in targets {
            if zone == "." && is_root {
                if self.root_forward {
                    return Err((d.name.place.clone(), "the root zone is forwarded twice".into()));
                }
                self.root_forward = true;
                if !upstreams.servers.is_empty() {
                    self.main.nameservers = Some(upstreams.servers.clone());
                }
                if let Some(path) = &upstreams.resolv_conf {
                    if !upstreams.servers.is_empty() {
                        return Err((
                            d.name.place.clone(),
                            "either addresses or a resolv.conf file, not both".into(),
                        ));
                    }
                    self.forward.resolv_conf = Some(path.clone());
                }
                let f = &mut self.forward;
                f.force_tcp = Some(tuning.force_tcp);
                f.tls = Some(tls);
                f.tls_servername = tuning.tls_servername.clone();
                f.tls_ca = tuning.tls_ca.clone();
                f.policy = tuning.policy.clone();
                f.max_fails = tuning.max_fails;
                f.health_check = tuning.health_check.clone();
                f.health_check_no_rec = tuning.health_check_no_rec;
                f.health_check_domain = tuning.health_check_domain.clone();
                f.except = tuning.except.clone();
                f.max_concurrent = tuning.max_concurrent;
            } else {
                let mut addrs = upstreams.servers.clone();
                if let Some(path) = &upstreams.resolv_conf {
                    addrs.extend(nameservers_of(path).map_err(|m| (d.name.place.clone(), m))?);
                }
                let scheme = if tls { "tls://" } else { "" };
                let servers = addrs.iter().map(|a| format!("{scheme}{a}")).collect();
                self.stub_zones.push(StubZoneFile {
                    zone,
                    servers,
                    ..tuning.clone()
                });
            }
        }
        Ok(())
    }

    fn kubernetes(&mut self, d: &Directive, zones: &[String]) -> Result<(), (Place, String)> {
        if let Some(first) = &self.kubernetes_place {
            return Err((
                d.name.place.clone(),
                format!("skyline serves one cluster; the first is at {first}"),
            ));
        }
        self.kubernetes_place = Some(d.name.place.clone());
        let mut k = KubernetesFile::default();
        let own: Vec<String> = if d.args.is_empty() {
            zones.to_vec()
        } else {
            d.args
                .iter()
                .map(|a| fqdn(&a.text).map_err(|m| (a.place.clone(), m)))
                .collect::<Result<_, _>>()?
        };
        k.zones = Some(own.clone());
        for line in &d.block {
            let args = line.args.as_slice();
            let place = || line.name.place.clone();
            let one = || match args {
                [a] => Ok(a),
                _ => Err((place(), format!("{} takes one value", line.name.text))),
            };
            match line.name.text.as_str() {
                "endpoint" => {
                    let url = one()?;
                    k.endpoint = Some(url.text.clone());
                }
                "kubeconfig" => match args {
                    [path] => k.kubeconfig = Some(PathBuf::from(&path.text)),
                    [path, context] => {
                        k.kubeconfig = Some(PathBuf::from(&path.text));
                        k.context = Some(context.text.clone());
                    }
                    _ => return Err((place(), "kubeconfig FILE [CONTEXT]".into())),
                },
                "namespaces" => k.namespaces = Some(args.iter().map(|a| a.text.clone()).collect()),
                "labels" => k.labels = Some(joined(args)),
                "namespace_labels" => k.namespace_labels = Some(joined(args)),
                "pods" => {
                    let mode = one()?;
                    if !matches!(mode.text.as_str(), "disabled" | "insecure" | "verified") {
                        return Err((mode.place.clone(), "pods disabled|insecure|verified".into()));
                    }
                    k.pods = Some(mode.text.clone());
                }
                "endpoint_pod_names" => k.endpoint_pod_names = Some(true),
                "ttl" => k.ttl = Some(seconds(one()?)?),
                "noendpoints" => k.noendpoints = Some(true),
                "fallthrough" => {
                    let ft: Vec<String> = if args.is_empty() {
                        own.clone()
                    } else {
                        args.iter()
                            .map(|a| fqdn(&a.text).map_err(|m| (a.place.clone(), m)))
                            .collect::<Result<_, _>>()?
                    };
                    k.fallthrough = Some(ft);
                }
                "ignore" => match args {
                    [a] if a.text == "empty_service" => k.ignore_empty_service = Some(true),
                    _ => return Err((place(), "ignore empty_service".into())),
                },
                "apiserver_qps" => {
                    let v = one()?;
                    k.apiserver_qps = Some(
                        v.text
                            .parse()
                            .map_err(|_| (v.place.clone(), format!("{:?} is not a number", v.text)))?,
                    );
                }
                other @ ("apiserver_burst" | "apiserver_max_inflight") => self.notes.push(format!(
                    "{}: kubernetes {other}: skyline paces the API server with apiserver_qps alone",
                    line.name.place
                )),
                other @ ("tls" | "multicluster" | "transfer") => {
                    return Err((place(), format!("option {other} is not supported by skyline")))
                }
                other => return Err((place(), format!("unknown option {other}"))),
            }
        }
        self.kubernetes = Some(k);
        Ok(())
    }

    fn hosts(&mut self, d: &Directive, zones: &[String]) -> Result<(), (Place, String)> {
        if let Some(first) = &self.hosts_place {
            return Err((
                d.name.place.clone(),
                format!("skyline runs one hosts source; the first is at {first}"),
            ));
        }
        self.hosts_place = Some(d.name.place.clone());
        let mut h = HostsFile::default();
        let (file, own) = match d.args.split_first() {
            Some((file, rest)) => (PathBuf::from(&file.text), rest),
            None => (PathBuf::from("/etc/hosts"), &[][..]),
        };
        h.file = Some(file);
        h.zones = Some(if own.is_empty() {
            zones.to_vec()
        } else {
            own.iter()
                .map(|a| fqdn(&a.text).map_err(|m| (a.place.clone(), m)))
                .collect::<Result<_, _>>()?
        });
        let mut inline = Vec::new();
        for line in &d.block {
            let args = line.args.as_slice();
            let place = line.name.place.clone();
            match line.name.text.as_str() {
                "ttl" => match args {
                    [ttl] => h.ttl = Some(seconds(ttl)?),
                    _ => return Err((place, "ttl SECONDS".into())),
                },
                "no_reverse" => h.no_reverse = Some(true),
                "reload" => match args {
                    [every] => {
                        let duration = go_duration(&every.text).map_err(|m| (every.place.clone(), m))?;
                        h.reload = Some(file_duration(duration));
                    }
                    _ => return Err((place, "reload DURATION".into())),
                },
                "fallthrough" => {
                    h.fallthrough = Some(
                        args.iter()
                            .map(|a| fqdn(&a.text).map_err(|m| (a.place.clone(), m)))
                            .collect::<Result<_, _>>()?,
                    );
                }
                first if first.parse::<IpAddr>().is_ok() => {
                    let mut entry = vec![first.to_owned()];
                    entry.extend(args.iter().map(|a| a.text.clone()));
                    inline.push(entry.join(" "));
                }
                other => {
                    return Err((
                        place,
                        format!("unknown option {other} (an inline entry starts with an address)"),
                    ))
                }
            }
        }
        if !inline.is_empty() {
            h.inline = Some(inline);
        }
        self.hosts = Some(h);
        Ok(())
    }

    fn etcd(&mut self, d: &Directive, zones: &[String]) -> Result<(), (Place, String)> {
        if let Some(first) = &self.etcd_place {
            return Err((
                d.name.place.clone(),
                format!("skyline serves one etcd domain; the first is at {first}"),
            ));
        }
        self.etcd_place = Some(d.name.place.clone());
        let own: Vec<String> = if d.args.is_empty() {
            zones.to_vec()
        } else {
            d.args
                .iter()
                .map(|a| fqdn(&a.text).map_err(|m| (a.place.clone(), m)))
                .collect::<Result<_, _>>()?
        };
        let domain = match own.as_slice() {
            [zone] if zone != "." => zone.clone(),
            _ => {
                return Err((
                    d.name.place.clone(),
                    "skyline serves one etcd zone, which is not the root".into(),
                ))
            }
        };
        self.main.domain = Some(domain.clone());
        self.main.path_prefix = Some("skydns".into());
        for line in &d.block {
            let args = line.args.as_slice();
            let place = line.name.place.clone();
            match line.name.text.as_str() {
                "path" => match args {
                    [p] => {
                        let prefix = p.text.trim_matches('/');
                        if prefix.is_empty() || prefix.contains('/') {
                            return Err((
                                p.place.clone(),
                                "skyline takes a path of one element, such as /skydns".into(),
                            ));
                        }
                        self.main.path_prefix = Some(prefix.to_owned());
                    }
                    _ => return Err((place, "path PATH".into())),
                },
                "endpoint" => {
                    if args.is_empty() {
                        return Err((place, "endpoint URL...".into()));
                    }
                    self.etcd.machines = Some(args.iter().map(|a| a.text.clone()).collect());
                }
                "credentials" => match args {
                    [user, password] => {
                        self.etcd.username = Some(user.text.clone());
                        self.etcd.password = Some(password.text.clone());
                    }
                    _ => return Err((place, "credentials USERNAME PASSWORD".into())),
                },
                "tls" => match args {
                    [ca] => self.etcd.ca_cert = Some(PathBuf::from(&ca.text)),
                    [cert, key] => {
                        self.etcd.tls_pem = Some(PathBuf::from(&cert.text));
                        self.etcd.tls_key = Some(PathBuf::from(&key.text));
                    }
                    [cert, key, ca] => {
                        self.etcd.tls_pem = Some(PathBuf::from(&cert.text));
                        self.etcd.tls_key = Some(PathBuf::from(&key.text));
                        self.etcd.ca_cert = Some(PathBuf::from(&ca.text));
                    }
                    _ => return Err((place, "tls [CERT KEY] [CACERT]".into())),
                },
                "fallthrough" => {
                    let ft: Vec<String> = args
                        .iter()
                        .map(|a| fqdn(&a.text).map_err(|m| (a.place.clone(), m)))
                        .collect::<Result<_, _>>()?;
                    if ft.is_empty() || ft.iter().any(|z| within(&domain, z)) {
                        self.main.fallthrough = Some(true);
                    } else if ft.iter().any(|z| within(z, &domain)) {
                        // The domain is one zone to skyline: it passes on every missing name of
                        // it or none.
                        return Err((
                            place,
                            format!("skyline falls through for the whole etcd zone {domain} or none of it"),
                        ));
                    } else {
                        self.notes.push(format!(
                            "{place}: etcd fallthrough: no zone given holds {domain}, so nothing falls through"
                        ));
                    }
                }
                other => return Err((place, format!("option {other} is not supported by skyline"))),
            }
        }
        if self.etcd.machines.is_none() {
            self.etcd.machines = Some(vec!["http://localhost:2379".into()]);
        }
        Ok(())
    }

    /// `autopath @kubernetes`: the kubernetes plugin's search list, then the host's search
    /// domains as CoreDNS reads them from its own resolv.conf at start.
    fn autopath(&mut self, d: &Directive) -> Result<(), (Place, String)> {
        no_block(d)?;
        match d.args.last() {
            Some(a) if a.text == "@kubernetes" => {}
            Some(a) => {
                return Err((
                    a.place.clone(),
                    format!(
                        "{:?}: skyline searches for pods of the kubernetes plugin only, autopath @kubernetes",
                        a.text
                    ),
                ))
            }
            None => return Err((d.name.place.clone(), "autopath @kubernetes".into())),
        }
        if self.autopath.is_some() {
            return Err((d.name.place.clone(), "autopath is given twice".into()));
        }
        let search = search_domains(std::path::Path::new("/etc/resolv.conf"));
        self.autopath = Some((d.name.place.clone(), search));
        Ok(())
    }

    fn finish(mut self) -> Result<Translated, Vec<CorefileError>> {
        if let Some((place, search)) = self.autopath.take() {
            match self.kubernetes.as_mut() {
                Some(k) => {
                    k.autopath = Some(true);
                    k.autopath_search = Some(search);
                }
                None => self.error(
                    &place,
                    Some("autopath"),
                    "@kubernetes names no kubernetes plugin in the Corefile",
                ),
            }
        }
        if !self.errors.is_empty() {
            return Err(self.errors);
        }
        self.main.addr = Some(Addrs::Many(std::mem::take(&mut self.addrs)));
        self.main.round_robin = Some(self.round_robin);
        // An address of every interface already serves a port's specific ones (which could
        // not be bound beside it).
        let http = std::mem::take(&mut self.http);
        let covered = |a: &SocketAddr| {
            !a.ip().is_unspecified()
                && http
                    .iter()
                    .any(|b| b.ip().is_unspecified() && b.port() == a.port() && b.is_ipv4() == a.is_ipv4())
        };
        let http: Vec<SocketAddr> = http.iter().copied().filter(|a| !covered(a)).collect();
        self.main.http_addr = (!http.is_empty()).then_some(Addrs::Many(http));
        if !self.root_forward {
            self.forward.resolv_conf = Some(PathBuf::from("none"));
        }
        if !self.stub_zones.is_empty() {
            self.forward.stub_zones = Some(std::mem::take(&mut self.stub_zones));
        }
        // CoreDNS's cache neither prefetches nor serves stale answers unless told to.
        self.cache.prefetch.get_or_insert(false);
        self.cache.serve_stale.get_or_insert(0);
        if !self.success_zones.is_empty() {
            self.cache.success_ttl_zones = Some(std::mem::take(&mut self.success_zones));
        }
        if !self.negative_zones.is_empty() {
            self.cache.negative_ttl_zones = Some(std::mem::take(&mut self.negative_zones));
        }
        let file = FileConfig {
            main: self.main,
            etcd: self.etcd,
            forward: Some(self.forward),
            cache: Some(self.cache),
            kubernetes: self.kubernetes,
            hosts: self.hosts,
            observe: Some(self.observe),
            rewrite: self.rewrite.map(|rules| RewriteFile { rules: Some(rules) }),
            template: self.templates.map(|blocks| TemplateFile { blocks: Some(blocks) }),
            plugins: self.plugins,
            ..FileConfig::default()
        };
        Ok(Translated {
            file,
            notes: self.notes,
        })
    }
}

/// Whether `name` is `zone` or below it (both absolute, lower-case).
fn within(name: &str, zone: &str) -> bool {
    zone == "." || name == zone || name.ends_with(&format!(".{zone}"))
}

fn joined(args: &[Token]) -> String {
    args.iter().map(|a| a.text.as_str()).collect::<Vec<_>>().join(" ")
}

fn seconds(token: &Token) -> Result<u32, (Place, String)> {
    token.text.parse().map_err(|_| {
        (
            token.place.clone(),
            format!("{:?} is not a number of seconds", token.text),
        )
    })
}

/// A token as the rule and template parsers read it back: quoted again where it was quoted
/// or holds a space.
fn word(token: &Token) -> String {
    if token.quoted || token.text.contains(char::is_whitespace) || token.text.is_empty() {
        format!("\"{}\"", token.text.replace('"', "\\\""))
    } else {
        token.text.clone()
    }
}

fn no_args(d: &Directive) -> Result<(), (Place, String)> {
    no_block(d)?;
    match d.args.first() {
        Some(a) => Err((a.place.clone(), format!("takes no argument, not {:?}", a.text))),
        None => Ok(()),
    }
}

fn no_block(d: &Directive) -> Result<(), (Place, String)> {
    match d.block.first() {
        Some(line) => Err((line.name.place.clone(), "takes no block of options".into())),
        None => Ok(()),
    }
}

/// An upstream `IP`, `IP:PORT` or `[IPv6]:PORT`, with `default_port` when none is written.
/// The options of a `forward` block, as the stub zone file keys that carry them (zone and
/// servers left empty), and its `expire`. CoreDNS's defaults where they differ from skyline's:
/// policy `random` and `max_fails 2`. The TLS options count for `tls://` upstreams only, as
/// in CoreDNS.
fn forward_options(
    d: &Directive,
    tls: bool,
    notes: &mut Vec<String>,
) -> Result<(StubZoneFile, Option<String>), (Place, String)> {
    let mut expire = None;
    let mut o = StubZoneFile {
        policy: Some("random".into()),
        max_fails: Some(2),
        ..StubZoneFile::default()
    };
    for line in &d.block {
        let place = || line.name.place.clone();
        let args: Vec<&str> = line.args.iter().map(|a| a.text.as_str()).collect();
        let one = || match args.as_slice() {
            [value] => Ok(*value),
            _ => Err((place(), format!("{} takes one value", line.name.text))),
        };
        match line.name.text.as_str() {
            "prefer_udp" => no_args(line)?,
            "next" => {
                if args.is_empty() {
                    return Err((place(), "next RCODE...".into()));
                }
                notes.push(format!(
                    "{}: forward next: skyline has no plugin after forward; the upstream's reply is sent as it is",
                    line.name.place
                ));
            }
            "force_tcp" => {
                no_args(line)?;
                o.force_tcp = true;
            }
            "expire" => {
                let value = go_duration(one()?).map_err(|m| (place(), m))?;
                expire = Some(file_duration(value));
            }
            "tls_servername" => {
                let name = one()?;
                o.tls_servername = tls.then(|| name.to_owned());
            }
            "tls" => match args.as_slice() {
                [] => {}
                [ca] => o.tls_ca = tls.then(|| PathBuf::from(ca)),
                _ => {
                    return Err((
                        place(),
                        "skyline has no client certificate for upstreams: tls takes a CA file or nothing".into(),
                    ))
                }
            },
            "policy" => {
                let policy = one()?;
                if !matches!(policy, "random" | "round_robin" | "sequential") {
                    return Err((place(), format!("unknown policy {policy:?}")));
                }
                o.policy = Some(policy.into());
            }
            "max_fails" => {
                let n = one()?;
                o.max_fails = Some(n.parse().map_err(|_| (place(), format!("{n:?} is not a count")))?);
            }
            "max_concurrent" => {
                let n = one()?;
                o.max_concurrent = Some(n.parse().map_err(|_| (place(), format!("{n:?} is not a count")))?);
            }
            "except" => {
                if args.is_empty() {
                    return Err((place(), "except names no zone".into()));
                }
                let zones = args
                    .iter()
                    .map(|z| fqdn(z))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|m| (place(), m))?;
                o.except = Some(zones);
            }
            "health_check" => {
                let (interval, rest) = match args.as_slice() {
                    [first, rest @ ..] if !matches!(*first, "no_rec" | "domain") => {
                        (go_duration(first).map_err(|m| (place(), m))?, rest)
                    }
                    rest => (Duration::from_millis(500), rest),
                };
                o.health_check = Some(file_duration(interval));
                let mut rest = rest.iter();
                while let Some(word) = rest.next() {
                    match *word {
                        "no_rec" => o.health_check_no_rec = Some(true),
                        "domain" => {
                            let name = rest.next().ok_or_else(|| (place(), "domain names no name".into()))?;
                            o.health_check_domain = Some(fqdn(name).map_err(|m| (place(), m))?);
                        }
                        other => return Err((place(), format!("health_check: unknown word {other:?}"))),
                    }
                }
            }
            other => return Err((place(), format!("option {other} is not supported by skyline"))),
        }
    }
    Ok((o, expire))
}

fn upstream_addr(text: &str, default_port: u16) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    if let Ok(ip) = text.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, default_port));
    }
    Err(format!(
        "{text:?} is not an upstream IP[:PORT] (a resolv.conf is written as a path with a '/')"
    ))
}

/// The search domains of the resolv.conf at `path`; none when it cannot be read.
fn search_domains(path: &std::path::Path) -> Vec<String> {
    resolv_conf::search_domains(&std::fs::read_to_string(path).unwrap_or_default())
}

/// The nameserver lines of the resolv.conf at `path`, on port 53.
fn nameservers_of(path: &std::path::Path) -> Result<Vec<SocketAddr>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let servers = resolv_conf::nameservers(&text);
    if servers.is_empty() {
        return Err(format!("{} lists no nameserver", path.display()));
    }
    Ok(servers)
}

#[cfg(test)]
mod tests;
