//! node-cache's command line, read as Go's `flag` package reads it: `-name` or `--name`, a value
//! after `=` or in the next argument, a bool flag set by its name alone and given a value only
//! with `=` (`-setupiptables=false`), parsing ending at `--` or the first argument that is not a
//! flag. The DaemonSets that run node-cache pass their arguments this way, so they pass them to
//! `skyline node-cache` unchanged.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Why the command line was refused; the message names the flag, as Go's does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FlagError {
    /// A flag neither node-cache nor CoreDNS's command line has.
    #[error("flag provided but not defined: -{0}")]
    Unknown(String),
    /// A flag that takes a value came last, without one.
    #[error("flag needs an argument: -{0}")]
    MissingValue(String),
    /// A value the flag cannot take.
    #[error("invalid value {value:?} for flag -{flag}: {why}")]
    Invalid {
        /// The flag.
        flag: String,
        /// What was given.
        value: String,
        /// What it should be.
        why: &'static str,
    },
    /// An argument after the flags: node-cache takes none.
    #[error("unexpected argument {0:?}: node-cache takes flags only")]
    Positional(String),
    /// `-localip` was not given: there is nothing to listen on.
    #[error("-localip is required: the comma-separated addresses the cache listens on")]
    NoLocalIp,
    /// The local addresses mix IPv4 and IPv6, which node-cache refuses too.
    #[error("-localip {0}: all addresses must be of one IP family")]
    MixedFamilies(String),
    /// `-help` or `-h`: the usage was asked for.
    #[error("usage asked for")]
    Help,
}

/// What the command line says, node-cache's defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeCacheFlags {
    /// `-localip`: the addresses served and set up, one family.
    pub local_ips: Vec<IpAddr>,
    /// `-dns.port` (CoreDNS's flag): the port served (default 53).
    pub port: u16,
    /// `-conf` (or node-cache's `-corefile`): where the filled Corefile is written (default /etc/Corefile).
    pub corefile: PathBuf,
    /// `-basecorefile`: the template with the `__PILLAR__` placeholders
    /// (default /etc/coredns/Corefile.base).
    pub base_corefile: PathBuf,
    /// `-upstreamsvc`: the Service whose cluster IP is `__PILLAR__CLUSTER__DNS__` (default kube-dns).
    pub upstream_service: String,
    /// `-setupinterface` (default true).
    pub setup_interface: bool,
    /// `-interfacename` (default nodelocaldns).
    pub interface: String,
    /// `-setupiptables` (default true): the NOTRACK rules (iptables or nftables, see `crate::nodelocal`).
    pub setup_rules: bool,
    /// `-skipteardown` (default false): leave the interface and rules at exit.
    pub skip_teardown: bool,
    /// `-syncinterval` (default 60s): how often the interface, the rules and the kube-dns ConfigMap are
    /// checked.
    pub sync_interval: Duration,
    /// `-health-port` (default 8080): exempted from connection tracking with the DNS port, as
    /// node-cache does for its liveness probe.
    pub health_port: u16,
    /// `-kubednscm`: the kube-dns ConfigMap's mounted directory; empty means `/etc/kube-dns` when
    /// it exists, as in node-cache.
    pub kube_dns_config: Option<PathBuf>,
    /// `-pidfile` (CoreDNS's flag).
    pub pid_file: Option<PathBuf>,
    /// `-resolvconf` (skyline's own): the node's resolv.conf, `__PILLAR__UPSTREAM__SERVERS__`
    /// when the kube-dns ConfigMap names no upstream (default /etc/resolv.conf).
    pub resolv_conf: PathBuf,
    /// Flags given that change nothing for skyline, as written, for the start's log line.
    pub without_effect: Vec<String>,
}

/// node-cache's flags that skyline takes and ignores: what they control is done otherwise
/// (`-metrics-listen-address`: the Corefile's `prometheus` serves the metrics; the others have
/// no counterpart).
const WITHOUT_EFFECT: &[(&str, Kind)] = &[
    ("metrics-listen-address", Kind::Value),
    ("setupebtables", Kind::Bool),
    ("initialdelay", Kind::Value),
    ("quiet", Kind::Bool),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    Value,
}

/// The flags with a meaning for skyline, and their kinds.
const FLAGS: &[(&str, Kind)] = &[
    ("localip", Kind::Value),
    ("dns.port", Kind::Value),
    ("conf", Kind::Value),
    ("corefile", Kind::Value),
    ("basecorefile", Kind::Value),
    ("upstreamsvc", Kind::Value),
    ("setupinterface", Kind::Bool),
    ("interfacename", Kind::Value),
    ("setupiptables", Kind::Bool),
    ("skipteardown", Kind::Bool),
    ("syncinterval", Kind::Value),
    ("health-port", Kind::Value),
    ("kubednscm", Kind::Value),
    ("pidfile", Kind::Value),
    ("resolvconf", Kind::Value),
];

impl NodeCacheFlags {
    /// Parses `args` (the arguments after `node-cache`).
    pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<NodeCacheFlags, FlagError> {
        let mut flags = NodeCacheFlags {
            local_ips: Vec::new(),
            port: 53,
            corefile: PathBuf::from("/etc/Corefile"),
            base_corefile: PathBuf::from("/etc/coredns/Corefile.base"),
            upstream_service: "kube-dns".to_owned(),
            setup_interface: true,
            interface: "nodelocaldns".to_owned(),
            setup_rules: true,
            skip_teardown: false,
            sync_interval: Duration::from_secs(60),
            health_port: 8080,
            kube_dns_config: None,
            pid_file: None,
            resolv_conf: PathBuf::from("/etc/resolv.conf"),
            without_effect: Vec::new(),
        };
        let mut local_ip = None;
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            if arg == "--" {
                break;
            }
            let Some(body) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
                return Err(FlagError::Positional(arg));
            };
            if body.is_empty() || body.starts_with('-') || body.starts_with('=') {
                return Err(FlagError::Unknown(body.to_owned()));
            }
            let (name, inline) = match body.split_once('=') {
                Some((name, value)) => (name, Some(value.to_owned())),
                None => (body, None),
            };
            if name == "h" || name == "help" {
                return Err(FlagError::Help);
            }
            let kind = FLAGS
                .iter()
                .chain(WITHOUT_EFFECT)
                .find(|(known, _)| *known == name)
                .map(|(_, kind)| *kind)
                .ok_or_else(|| FlagError::Unknown(name.to_owned()))?;
            let value = match (kind, inline) {
                (_, Some(value)) => value,
                (Kind::Bool, None) => "true".to_owned(),
                (Kind::Value, None) => args.next().ok_or_else(|| FlagError::MissingValue(name.to_owned()))?,
            };
            let invalid = |why| FlagError::Invalid {
                flag: name.to_owned(),
                value: value.clone(),
                why,
            };
            if WITHOUT_EFFECT.iter().any(|(known, _)| *known == name) {
                if kind == Kind::Bool {
                    go_bool(&value).ok_or_else(|| invalid("true or false"))?;
                }
                flags.without_effect.push(format!("-{name}={value}"));
                continue;
            }
            match name {
                "localip" => local_ip = Some(value),
                "dns.port" => flags.port = value.parse().map_err(|_| invalid("a port number"))?,
                "conf" | "corefile" => flags.corefile = PathBuf::from(value),
                "basecorefile" => flags.base_corefile = PathBuf::from(value),
                "upstreamsvc" => flags.upstream_service = value,
                "setupinterface" => flags.setup_interface = go_bool(&value).ok_or_else(|| invalid("true or false"))?,
                "interfacename" => flags.interface = value,
                "setupiptables" => flags.setup_rules = go_bool(&value).ok_or_else(|| invalid("true or false"))?,
                "skipteardown" => flags.skip_teardown = go_bool(&value).ok_or_else(|| invalid("true or false"))?,
                "syncinterval" => {
                    flags.sync_interval = go_duration(&value)
                        .filter(|d| !d.is_zero())
                        .ok_or_else(|| invalid("a positive duration such as 60s, 1m30s or 500ms"))?;
                }
                "health-port" => flags.health_port = value.parse().map_err(|_| invalid("a port number"))?,
                "kubednscm" => flags.kube_dns_config = Some(PathBuf::from(value)).filter(|p| !p.as_os_str().is_empty()),
                "pidfile" => flags.pid_file = Some(PathBuf::from(value)).filter(|p| !p.as_os_str().is_empty()),
                "resolvconf" => flags.resolv_conf = PathBuf::from(value),
                _ => unreachable!("every flag of FLAGS is matched"),
            }
        }
        if let Some(extra) = args.next() {
            return Err(FlagError::Positional(extra));
        }
        let local_ip = local_ip.filter(|l| !l.is_empty()).ok_or(FlagError::NoLocalIp)?;
        for text in local_ip.split(',') {
            let ip: IpAddr = text.trim().parse().map_err(|_| FlagError::Invalid {
                flag: "localip".to_owned(),
                value: text.to_owned(),
                why: "an IP address",
            })?;
            flags.local_ips.push(ip);
        }
        if flags
            .local_ips
            .iter()
            .any(|ip| ip.is_ipv4() != flags.local_ips[0].is_ipv4())
        {
            return Err(FlagError::MixedFamilies(local_ip));
        }
        Ok(flags)
    }

    /// The local addresses as node-cache writes them into `__PILLAR__LOCAL__DNS__` and `bind`:
    /// separated by spaces.
    pub fn local_ips_spaced(&self) -> String {
        self.local_ips
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Go's `strconv.ParseBool`.
fn go_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// Go's `time.ParseDuration` for non-negative values (`1m30s`, `500ms`, `1.5h`, `0`), and a
/// bare number as seconds: node-cache's help says "interval (in seconds)" and it multiplies the
/// value by a second, so `-syncinterval 60` has been written too.
pub fn go_duration(text: &str) -> Option<Duration> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse().ok().map(Duration::from_secs);
    }
    let mut rest = text.strip_prefix('+').unwrap_or(text);
    if rest.is_empty() {
        return None;
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_end);
        if number.is_empty() || number == "." {
            return None;
        }
        let value: f64 = number.parse().ok()?;
        let unit_end = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_end);
        let nanos_per = match unit {
            "ns" => 1e0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        total += value * nanos_per;
        rest = next;
    }
    (total.is_finite() && total < u64::MAX as f64).then(|| Duration::from_nanos(total as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<NodeCacheFlags, FlagError> {
        NodeCacheFlags::parse(args.iter().map(|s| (*s).to_owned()))
    }

    #[test]
    fn the_upstream_daemonsets_arguments_are_read_with_node_caches_defaults() {
        let flags = parse(&[
            "-localip",
            "169.254.20.10,10.96.0.10",
            "-conf",
            "/etc/Corefile",
            "-upstreamsvc",
            "kube-dns-upstream",
        ])
        .unwrap();
        assert_eq!(
            flags.local_ips,
            [
                "169.254.20.10".parse::<IpAddr>().unwrap(),
                "10.96.0.10".parse().unwrap()
            ]
        );
        assert_eq!(flags.local_ips_spaced(), "169.254.20.10 10.96.0.10");
        assert_eq!(flags.upstream_service, "kube-dns-upstream");
        assert_eq!(flags.corefile, PathBuf::from("/etc/Corefile"));
        assert_eq!(flags.base_corefile, PathBuf::from("/etc/coredns/Corefile.base"));
        assert!(flags.setup_interface && flags.setup_rules && !flags.skip_teardown);
        assert_eq!(flags.interface, "nodelocaldns");
        assert_eq!(flags.sync_interval, Duration::from_secs(60));
        assert_eq!((flags.port, flags.health_port), (53, 8080));
        assert!(flags.without_effect.is_empty());
    }

    #[test]
    fn values_follow_an_equals_sign_or_come_next_with_one_or_two_dashes() {
        let flags = parse(&[
            "--localip=169.254.20.10",
            "-interfacename=nl0",
            "--syncinterval",
            "5s",
            "-health-port=9080",
            "-dns.port",
            "1053",
        ])
        .unwrap();
        assert_eq!(flags.interface, "nl0");
        assert_eq!(flags.sync_interval, Duration::from_secs(5));
        assert_eq!((flags.port, flags.health_port), (1053, 9080));
    }

    #[test]
    fn bool_flags_take_a_value_only_after_an_equals_sign() {
        let flags = parse(&["-localip", "169.254.20.10", "-skipteardown", "-setupiptables=false"]).unwrap();
        assert!(flags.skip_teardown);
        assert!(!flags.setup_rules);
        let flags = parse(&["-localip", "169.254.20.10", "-setupinterface=F"]).unwrap();
        assert!(!flags.setup_interface);
        // As in Go, `false` after a bool flag is an argument, not its value.
        assert_eq!(
            parse(&["-localip", "169.254.20.10", "-setupinterface", "false"]),
            Err(FlagError::Positional("false".into()))
        );
    }

    #[test]
    fn flags_without_effect_are_accepted_and_kept_for_the_log() {
        let flags = parse(&[
            "-localip",
            "169.254.20.10",
            "-metrics-listen-address",
            "0.0.0.0:9353",
            "-setupebtables",
        ])
        .unwrap();
        assert_eq!(
            flags.without_effect,
            ["-metrics-listen-address=0.0.0.0:9353", "-setupebtables=true"]
        );
    }

    #[test]
    fn what_node_cache_refuses_is_refused_by_name() {
        assert_eq!(
            parse(&["-localip", "169.254.20.10", "-nosuch"]),
            Err(FlagError::Unknown("nosuch".into()))
        );
        assert_eq!(parse(&["-localip"]), Err(FlagError::MissingValue("localip".into())));
        assert_eq!(parse(&[]), Err(FlagError::NoLocalIp));
        assert!(matches!(
            parse(&["-localip", "169.254.20.10,fd00::a"]),
            Err(FlagError::MixedFamilies(_))
        ));
        assert!(matches!(
            parse(&["-localip", "169.254.20.300"]),
            Err(FlagError::Invalid { .. })
        ));
        assert!(matches!(
            parse(&["-localip", "169.254.20.10", "-syncinterval", "soon"]),
            Err(FlagError::Invalid { .. })
        ));
        assert!(matches!(
            parse(&["-localip", "169.254.20.10", "-skipteardown=maybe"]),
            Err(FlagError::Invalid { .. })
        ));
    }

    #[test]
    fn durations_are_read_as_go_writes_them() {
        assert_eq!(go_duration("60s"), Some(Duration::from_secs(60)));
        assert_eq!(go_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(go_duration("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(go_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(go_duration("10"), Some(Duration::from_secs(10)));
        assert_eq!(go_duration("0"), Some(Duration::ZERO));
        for bad in ["", "s", "5x", "-5s", "1..5s"] {
            assert_eq!(go_duration(bad), None, "{bad:?}");
        }
    }
}
