//! Every setting of the server, each declared once: its flag and environment variable (the
//! `#[arg]` attribute), its TOML key (the field's name, inside its group's table), its type, its
//! default, its `/<prefix>/config` key where SkyDNS's data has one, what a SIGHUP does with it,
//! and its documentation (the doc comment, which is both `--help` and the tables of
//! `docs/settings.md`).
//!
//! Each `settings!` block is one group, one table of the configuration file (the top-level
//! keys are two groups, [`Main`] and [`Etcd`], so that `skyline kube2etcd` can take the etcd
//! flags alone). From it come three structs: `…Args`, the flags, flattened into
//! `crate::cli::Cli`; `…File`, the table as the file spells it, gathered in [`FileConfig`]; and
//! the group itself, the two stacked by [`merge`](Main::merge), flags (then their environment
//! variables) over the file over the declared default. [`Given`] holds every group merged
//! (`Cli::given`); `crate::config` stacks it over the data's `/<prefix>/config`, and
//! `crate::forwarding`, `crate::observe` and `crate::protection` turn their groups into what the
//! server runs with.
//!
//! This module is vocabulary: it sits below everything that reads a setting (the command line,
//! the file reader, the Corefile's translation, the resolutions), and uses only the value forms
//! below it: `crate::flag_value` (the text of a value), `crate::file_value` (a file value
//! converted on its own), `crate::in_force` (a value written back as TOML) and
//! `crate::stub_zone`.
//!
//! An entry reads
//!
//! ```text
//! /// What it is for, as --help and docs/settings.md show it [default: what the default is]
//! #[arg(long, env = "SKYDNS_NAME", value_name = "N")]
//! restart name: Type = default, file FileType => conversion, data "json_key";
//! ```
//!
//! `restart` or `applied` says what a SIGHUP does when the value changed: `applied` settings are
//! put in force while serving, `restart` ones are named in a log line and left as they are. The
//! `= default` is left out when the default depends on other settings or on the data (it is then
//! applied where the setting is used, and the field is an `Option`); `file FileType => conversion`
//! when the file spells the value differently from the flag (a duration as a string, a path
//! relative to the file); `data "key"` when the setting has a `/<prefix>/config` key, which
//! `crate::config::operator` hands to the sources. The long flag is the field's name unless the
//! `#[arg]` says otherwise; the doc comment ends with `[default: …]`, which the tables of
//! `docs/settings.md` show. A test checks those tables against these declarations. A group
//! whose keys repeat another group's (`ttl`, `zones`) gives its flags ids of their own, each
//! `#[arg(id = "prefix_key", …)]`, and says `ids "prefix_"` after its `keys`.

use crate::file_value::Addrs;
use crate::flag_value::{
    parse_addr, parse_domain, parse_duration, parse_go_bool, parse_hostmaster, parse_name, parse_policy, parse_prefix,
    parse_size, parse_zone_ttl, STDERR,
};
use crate::stub_zone::{parse_servers, parse_stub_zone, Ask, StubZoneFile, StubZoneSetting};
use skyline_controlplane::skydns::config as skydns_config;
use skyline_dataplane::cache::CacheConfig;
use skyline_dataplane::forward::{ForwardConfig, ForwardOptions, Policy, Prefix};
use skyline_dataplane::io::XdpMode;
use skyline_dataplane::rrl::RrlConfig;
use skyline_dataplane::snapshot::hosts_file::DEFAULT_TTL as HOSTS_TTL;
use skyline_dataplane::snapshot::kubernetes::DEFAULT_TTL as KUBERNETES_TTL;
use skyline_dataplane::wire::Name;
use skyline_dataplane::worker::TcpConfig;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The default path prefix: records live under `/skydns/`.
pub const DEFAULT_PATH_PREFIX: &str = "skydns";

/// How often the hosts file is checked for a change when nothing says (CoreDNS's `reload`).
pub const HOSTS_RELOAD: Duration = Duration::from_secs(5);

/// How long a stopping process keeps answering before its listeners close.
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(5);

/// A configuration file value that does not convert to its setting's type; the message names
/// the setting by its TOML key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct Invalid {
    /// The setting, as the file spells it (`drain`, `forward.timeout`).
    pub key: &'static str,
    /// What is wrong with the value.
    pub reason: String,
}

/// Declares one group of settings; see the module's documentation for an entry's form.
macro_rules! settings {
    (@value $ty:ty) => { Option<$ty> };
    (@value $ty:ty, $default:expr) => { $ty };
    (@file $ty:ty) => { $ty };
    (@file $ty:ty, $file:ty) => { $file };
    (@convert $raw:expr, $dir:expr) => {{
        let _ = $dir;
        Ok::<_, String>($raw)
    }};
    (@convert $raw:expr, $dir:expr, $convert:path) => { $convert($raw, $dir) };
    (@default $value:expr) => { $value };
    (@default $value:expr, $default:expr) => { $value.unwrap_or_else(|| $default) };
    (@form $value:expr) => { $value };
    (@form $value:expr, $file:ty) => { $value.map(<$file as crate::in_force::FileForm>::form) };
    (@restart applied) => { false };
    (@restart restart) => { true };
    (@data) => { None };
    (@data $data:literal) => { Some($data) };
    (
        $(#[doc = $group_doc:literal])*
        $group:ident ($args:ident, $file:ident) keys $prefix:literal { $($entries:tt)* }
    ) => {
        settings! {
            $(#[doc = $group_doc])*
            $group ($args, $file) keys $prefix ids "" { $($entries)* }
        }
    };
    (
        $(#[doc = $group_doc:literal])*
        $group:ident ($args:ident, $file:ident) keys $prefix:literal ids $ids:literal {
            $(
                $(#[doc = $doc:literal])*
                #[arg($($arg:tt)*)]
                $reload:ident $name:ident: $ty:ty
                    $(= $default:expr)?
                    $(, file $file_ty:ty => $convert:path)?
                    $(, data $data:literal)?;
            )*
        }
    ) => {
        $(#[doc = $group_doc])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $group {
            $(
                $(#[doc = $doc])*
                pub $name: settings!(@value $ty $(, $default)?),
            )*
        }

        #[doc = concat!(
            "The flags of [`", stringify!($group), "`]; `None` when neither the flag nor its variable is given."
        )]
        #[derive(Debug, Clone, Default, PartialEq, clap::Args)]
        pub struct $args {
            $(
                $(#[doc = $doc])*
                #[arg($($arg)*)]
                pub $name: Option<$ty>,
            )*
        }

        #[doc = concat!(
            "The configuration file's keys of [`", stringify!($group), "`]; an unknown key is an error, ",
            "so that a typo is reported."
        )]
        #[derive(Debug, Default, PartialEq)]
        pub struct $file {
            $(
                $(#[doc = $doc])*
                pub $name: Option<settings!(@file $ty $(, $file_ty)?)>,
            )*
        }

        impl $file {
            /// The keys of the group's table, as the file spells them.
            pub const KEYS: &'static [&'static str] = &[$(stringify!($name)),*];

            /// These keys over `under`'s: each key this file does not set is `under`'s.
            pub fn or(self, under: $file) -> $file {
                $file {
                    $($name: self.$name.or(under.$name),)*
                }
            }

            /// Takes the group's keys out of `table`, each value converted on its own, so that
            /// every value of the wrong type is added to `problems`, not only the first; what
            /// is left in `table` is no key of the group.
            pub fn take(table: &mut toml::Table, problems: &mut Vec<Invalid>) -> $file {
                $file {
                    $(
                        $name: table.remove(stringify!($name)).and_then(|value| {
                            crate::file_value::convert::<settings!(@file $ty $(, $file_ty)?)>(value)
                                .map_err(|reason| problems.push(Invalid {
                                    key: concat!($prefix, stringify!($name)),
                                    reason,
                                }))
                                .ok()
                        }),
                    )*
                }
            }
        }

        impl $group {
            /// Stacks the flags `args` over the file's keys `file` (a relative path is relative
            /// to `dir`, the file's directory) over the defaults. A file value that does not
            /// convert is added to `problems` and counts as not set.
            pub fn merge(args: &$args, file: Option<&$file>, dir: &Path, problems: &mut Vec<Invalid>) -> $group {
                $group {
                    $(
                        $name: settings!(@default args.$name.clone().or_else(|| {
                            let raw = file?.$name.clone()?;
                            settings!(@convert raw, dir $(, $convert)?)
                                .map_err(|reason| problems.push(Invalid {
                                    key: concat!($prefix, stringify!($name)),
                                    reason,
                                }))
                                .ok()
                        }) $(, $default)?),
                    )*
                }
            }

            /// The group's settings as the configuration file writes them, in declaration
            /// order; `None` for a setting that is not set.
            pub fn in_force(&self) -> Vec<(&'static str, Option<toml::Value>)> {
                vec![
                    $(
                        (
                            stringify!($name),
                            settings!(@form crate::in_force::InForce::in_force(&self.$name) $(, $file_ty)?),
                        ),
                    )*
                ]
            }

            /// The TOML keys of the settings only a restart applies whose values differ from
            /// `started`'s.
            pub fn restart_changes(&self, started: &$group) -> Vec<&'static str> {
                let mut changed = Vec::new();
                $(
                    if settings!(@restart $reload) && self.$name != started.$name {
                        changed.push(concat!($prefix, stringify!($name)));
                    }
                )*
                changed
            }

            /// The group's settings as the tables of `docs/settings.md` show them.
            #[cfg(test)]
            const SETTINGS: &'static [tests::Setting] = &[
                $(
                    tests::Setting {
                        id: concat!($ids, stringify!($name)),
                        key: concat!($prefix, stringify!($name)),
                        data: settings!(@data $($data)?),
                        restart: settings!(@restart $reload),
                    },
                )*
            ];
        }
    };
}

settings! {
    /// Where DNS is served, what shapes the answers, and how the process runs: the configuration
    /// file's top-level keys.
    Main (MainArgs, MainFile) keys "" {
        /// IP:port to serve DNS on, over UDP and TCP; repeat or comma-separate to serve on several
        /// (a node-local cache on 169.254.20.10:53 and a cluster IP); in the file one address or a
        /// list [default: 127.0.0.1:53]
        #[arg(long, env = "SKYDNS_ADDR", value_name = "IP:PORT", value_delimiter = ',', value_parser = parse_addr)]
        restart addr: Vec<SocketAddr>, file Addrs => addrs, data "dns_addr";

        /// Share the --addr ports with another skyline of the same user, both serving (the
        /// kernel spreads queries over them), as the surge pod of a node-local cache's rolling
        /// update does; without it a start whose address another process holds fails at once.
        /// The --http-addr port is never shared: a held one is taken once its holder exits
        /// [default: false]
        #[arg(
            long,
            env = "SKYLINE_REUSE_PORT",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = parse_go_bool
        )]
        restart reuse_port: bool = false;

        /// Domain to be authoritative for [default: skydns.local.]
        #[arg(long, env = "SKYDNS_DOMAIN", value_parser = parse_domain)]
        applied domain: Name, file String => name, data "domain";

        /// First element of every record key: records live under /<prefix>/ [default: skydns]
        #[arg(long, env = "SKYDNS_PATH_PREFIX", value_name = "PREFIX")]
        restart path_prefix: String = DEFAULT_PATH_PREFIX.to_owned();

        /// Comma-separated IP:port list of resolvers for names outside the domain; without any,
        /// the nameserver lines of --resolv-conf [default: none]
        #[arg(
            long,
            env = "SKYDNS_NAMESERVERS",
            value_name = "IP:PORT,...",
            value_delimiter = ',',
            value_parser = parse_addr
        )]
        applied nameservers: Vec<SocketAddr>, data "nameservers";

        /// Labels a name needs before it is forwarded; 0 means the default [default: 2]
        #[arg(long, env = "SKYDNS_NDOTS", value_name = "N")]
        applied ndots: u32, data "ndot";

        /// Follow etcd's member list, read at connection and every 5 s: members added to the
        /// cluster are used and removed ones dropped, without a restart; --machines only seeds
        /// the first connection [default: false]
        #[arg(
            long,
            env = "SKYDNS_DISCOVER",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = parse_go_bool
        )]
        restart discover: bool = false;

        /// Name whose records local.dns.<domain> answers with [default: none]
        #[arg(long, value_name = "NAME", value_parser = parse_domain)]
        applied local: Name, file String => name, data "local";

        /// SOA contact; the mail form hostmaster@skydns.local. is accepted [default: hostmaster.<domain>]
        #[arg(long, value_name = "NAME", value_parser = parse_hostmaster)]
        applied hostmaster: Name, file String => hostmaster, data "hostmaster";

        /// Shuffle A/AAAA answers; --round-robin=false turns it off [default: true]
        #[arg(
            long,
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = parse_go_bool
        )]
        applied round_robin: bool, data "round_robin";

        /// A directory answers with the records below it, and `*`/`any` queries below it match,
        /// only when it holds a `.wildcards` key; NXDOMAIN otherwise [default: false]
        #[arg(
            long,
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = parse_go_bool
        )]
        applied wildcards_marker: bool;

        /// Answer A/AAAA for names whose records point to host names with SkyDNS's CNAME chain
        /// (the name's CNAME, then the target's addresses) instead of the targets' addresses at
        /// the name; a cache in front then follows that CNAME for SRV, MX and TXT questions too
        /// [default: false]
        #[arg(
            long,
            env = "SKYDNS_CNAME_CHAINS",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = parse_go_bool
        )]
        applied cname_chains: bool;

        /// Pass a name of the domain that has no record on (forwarded, or REFUSED without
        /// forwarding) instead of denying it with NXDOMAIN, for a server whose upstream holds the
        /// rest of the domain (CoreDNS etcd fallthrough); answers then carry AA=0 [default: false]
        #[arg(
            long,
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = parse_go_bool
        )]
        applied fallthrough: bool;

        /// Sign the domain (DNSSEC) with the key pair KEYBASE.key and KEYBASE.private that
        /// dnssec-keygen writes (algorithm 8, 13 or 15, its owner the domain); re-read on SIGHUP
        /// (docs/dnssec.md) [default: none, unsigned]
        #[arg(long, value_name = "KEYBASE")]
        applied dnssec: PathBuf, file PathBuf => relative;

        /// Signed denials and query-wildcard answers each worker keeps with --dnssec [default: 10000]
        #[arg(long, value_name = "N")]
        applied scache: u64, data "scache";

        /// Records file: a JSON object mapping etcd keys to SkyDNS records; reloaded when it changes
        /// and on SIGHUP; not with --machines [default: none, an empty zone]
        #[arg(long, value_name = "FILE")]
        restart records: PathBuf, file PathBuf => relative;

        /// Serve on the UDP and TCP sockets systemd passes (socket activation: LISTEN_FDS), in
        /// place of binding --addr; notifies READY, RELOADING and STOPPING (units in
        /// deploy/systemd/) [default: false]
        #[arg(
            long,
            env = "SKYDNS_SYSTEMD",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = parse_go_bool
        )]
        restart systemd: bool = false;

        /// Worker threads answering queries; 0 means one per core [default: 0]
        #[arg(long, value_name = "N")]
        restart workers: usize = 0;

        /// Do not pin worker threads to cores [default: false]
        #[arg(long, num_args = 0, default_missing_value = "true")]
        restart no_pin: bool = false;

        /// Serve UDP DNS to the first --addr, an address of this interface, through AF_XDP
        /// sockets past the kernel's network stack: one worker per receive queue (--workers at
        /// most the queues); TCP and all other traffic stay with the kernel; needs root or
        /// CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF (docs/xdp.md) [default: none]
        #[arg(long, value_name = "IFACE")]
        restart xdp: String;

        /// How --xdp attaches its program: auto (the driver's hook where it has one, else the
        /// generic one), native or generic [default: auto]
        #[arg(long, value_name = "MODE")]
        restart xdp_mode: XdpMode = XdpMode::Auto, file String => xdp_mode;

        /// UMEM frames of 4 KiB per receive queue with --xdp, seven eighths for queries, an eighth for replies
        /// [default: 4096]
        #[arg(long, value_name = "N")]
        restart xdp_frames: u32 = 4096;

        /// With --xdp, serve on kernel sockets alone (with a logged warning) when AF_XDP cannot
        /// start, instead of not starting [default: false]
        #[arg(long, num_args = 0, default_missing_value = "true")]
        restart xdp_fallback: bool = false;

        /// DNS over TCP connections per worker; a new one past it takes the slot of the connection
        /// idle the longest, and is refused at once only when every connection is busy [default: 1024]
        #[arg(long, value_name = "N")]
        restart tcp_max_connections: usize = TcpConfig::default().max_connections;

        /// DNS over TCP connections per client address per worker; 0 means no such cap, only the
        /// per-worker one [default: 0]
        #[arg(long, value_name = "N")]
        restart tcp_max_per_client: usize = TcpConfig::default().max_per_client;

        /// Create this dummy interface holding the --addr addresses (a node-local cache's
        /// 169.254.20.10), removed on exit after the drain and left to the new process of an
        /// in-place upgrade; needs CAP_NET_ADMIN and `ip` (iproute2) [default: none]
        #[arg(long, value_name = "NAME")]
        restart setup_interface: String;

        /// Install NOTRACK rules for DNS to and from the --addr addresses, in iptables when the
        /// node's rules are there, else in nftables; removed like --setup-interface; needs
        /// CAP_NET_ADMIN and `iptables` or `nft` [default: false]
        #[arg(long, num_args = 0, default_missing_value = "true")]
        restart setup_notrack: bool = false;

        /// File to hold the PID of the serving process; a start refuses one that names another
        /// running process, and an in-place upgrade's new process rewrites it [default: none]
        #[arg(long, value_name = "FILE")]
        restart pid_file: PathBuf, file PathBuf => relative;

        /// After SIGTERM or SIGINT, how long to keep answering while /ready says not ready, before
        /// the listeners close and the queries in flight are finished, e.g. 5s or 500ms; a second
        /// signal ends it early [default: 5s]
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        restart drain: Duration = DEFAULT_DRAIN, file String => duration;

        /// Directory for the persisted snapshot: the last complete data of etcd and Kubernetes,
        /// served (marked stale) when a start finds its source unreachable [default: none]
        #[arg(long, value_name = "DIR")]
        restart state_dir: PathBuf, file PathBuf => relative;

        /// The oldest persisted snapshot a start serves, e.g. 24h or 90m [default: 24h]
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        restart state_max_age: Duration = skyline_controlplane::state::DEFAULT_MAX_AGE, file String => duration;

        /// IP:port to serve /health, /ready and /metrics on over HTTP; port 0 picks a free one;
        /// repeat or comma-separate to serve on several (a Corefile's health, ready and
        /// prometheus ports); in the file one address or a list [default: none, no HTTP listener]
        #[arg(long, env = "SKYLINE_HTTP_ADDR", value_name = "IP:PORT", value_delimiter = ',', value_parser = parse_addr)]
        restart http_addr: Vec<SocketAddr>, file Addrs => addrs;

        /// Read the --config file or --corefile again every DURATION and, when it changed, put
        /// it in force as a SIGHUP does (CoreDNS `reload`), e.g. 30s [default: none, only on
        /// SIGHUP]
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        restart reload: Duration, file String => duration;
    }
}

settings! {
    /// Where etcd is and how to authenticate to it, SkyDNS's flags and variables: the server's
    /// data source when `machines` is set, and where kube2etcd writes. Top-level keys.
    Etcd (EtcdArgs, EtcdFile) keys "" {
        /// Comma-separated etcd v3 endpoints; for the server, setting them makes etcd the data
        /// source, watched live [default: none]
        #[arg(long, env = "ETCD_MACHINES", value_name = "URL,...", value_delimiter = ',')]
        restart machines: Vec<String>;

        /// Client private key for TLS to etcd, PEM; goes with --tls-pem [default: none]
        #[arg(long, env = "ETCD_TLSKEY", value_name = "FILE")]
        restart tls_key: PathBuf, file PathBuf => relative;

        /// Client certificate for TLS to etcd, PEM; goes with --tls-key [default: none]
        #[arg(long, env = "ETCD_TLSPEM", value_name = "FILE")]
        restart tls_pem: PathBuf, file PathBuf => relative;

        /// Certificate authority of the etcd members' certificates, PEM; needed for https
        /// endpoints [default: none]
        #[arg(long, env = "ETCD_CACERT", value_name = "FILE")]
        restart ca_cert: PathBuf, file PathBuf => relative;

        /// etcd user; goes with --password [default: none]
        #[arg(long, env = "ETCD_USERNAME", value_name = "USER")]
        restart username: String;

        /// Password of the etcd user [default: none]
        #[arg(long, env = "ETCD_PASSWORD", value_name = "PASSWORD", hide_env_values = true)]
        restart password: String;
    }
}

settings! {
    /// Forwarding of names outside the zones: the `[forward]` table.
    Forward (ForwardArgs, ForwardFile) keys "forward." {
        /// Never forward: names outside the domain get REFUSED (SkyDNS -no-rec) [default: false]
        #[arg(
            long,
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = parse_go_bool
        )]
        restart no_rec: bool, data "no_rec";

        /// Start successive forwarded questions at successive nameservers; =false: always the
        /// first first [default: true]
        #[arg(
            long,
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = parse_go_bool
        )]
        applied ns_rotate: bool, data "ns_rotate";

        /// File whose nameserver lines are the upstreams when no nameservers are set; one given
        /// that is missing or lists no nameserver is an error, `none` reads no file (only stub
        /// zones are forwarded) [default: /etc/resolv.conf, without it nothing is forwarded]
        #[arg(long, env = "SKYLINE_RESOLV_CONF", value_name = "FILE")]
        applied resolv_conf: PathBuf;

        /// Comma-separated address prefixes of the clients that may use forwarding; others get
        /// REFUSED for names outside the domain [default: 127.0.0.0/8, ::1, 169.254.0.0/16,
        /// fe80::/10, 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, fc00::/7]
        #[arg(long, value_name = "PREFIX,...", value_delimiter = ',', value_parser = parse_prefix)]
        applied recursion_acl: Vec<Prefix>, file Vec<String> => prefixes;

        /// How long a forwarded question may take, all tries together, before the client gets a
        /// stale answer or SERVFAIL (EDE 22), e.g. 1500ms or 2s [default: 1500ms]
        #[arg(long = "forward-timeout", value_name = "DURATION", value_parser = parse_duration)]
        applied timeout: Duration, file String => duration, data "read_timeout";

        /// Upstream questions in flight per worker; more get SERVFAIL at once [default: 512]
        #[arg(long, value_name = "N")]
        applied max_in_flight: usize = ForwardConfig::default().max_in_flight;

        /// Questions one client address may have waiting on upstreams per worker; more get
        /// SERVFAIL at once (skyline_forward_client_limited_total), so that one client's flood
        /// leaves room for the others; 0: no limit but --max-in-flight [default: 128]
        #[arg(long, value_name = "N")]
        applied max_in_flight_per_client: usize = ForwardConfig::default().max_in_flight_per_client;

        /// Which nameserver a question's first try goes to: fastest (rotate, passing over any
        /// much slower than the fastest), random, round_robin or sequential (the first that is
        /// up); retries go to the next one up (CoreDNS policy) [default: fastest]
        #[arg(long, value_name = "POLICY", value_parser = parse_policy)]
        applied policy: Policy = ForwardOptions::default().policy, file String => policy;

        /// Failures in a row (tries, over 500ms without an answer, or health checks) that mark
        /// a nameserver down; 0 never does (CoreDNS max_fails) [default: 3]
        #[arg(long, value_name = "N")]
        applied max_fails: u32 = ForwardOptions::default().max_fails;

        /// Check every nameserver with a `. NS` query at this interval from the start, up or
        /// down; a failed check counts toward --max-fails, an answer brings it up (CoreDNS
        /// health_check) [default: none, only down nameservers are probed, every 500ms]
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        applied health_check: Duration, file String => duration;

        /// Send the health checks without RD, for nameservers that do not recurse (CoreDNS
        /// health_check no_rec) [default: false]
        #[arg(
            long,
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = parse_go_bool
        )]
        applied health_check_no_rec: bool = false;

        /// The name the health checks ask, type NS (CoreDNS health_check domain) [default: .]
        #[arg(long, value_name = "NAME", value_parser = parse_name)]
        applied health_check_domain: Name, file String => name;

        /// Comma-separated zones whose names are not sent to the nameservers: they get REFUSED,
        /// as names with no upstream do (CoreDNS except) [default: none]
        #[arg(long, value_name = "ZONE,...", value_delimiter = ',', value_parser = parse_name)]
        applied except: Vec<Name> = ForwardOptions::default().except, file Vec<String> => names;

        /// Client queries waiting on the nameservers at once, all workers together; more get
        /// REFUSED at once (coredns_forward_max_concurrent_rejects_total); 0: no limit but
        /// --max-in-flight (CoreDNS max_concurrent) [default: 0]
        #[arg(long, value_name = "N")]
        applied max_concurrent: usize = ForwardOptions::default().max_concurrent;

        /// Send every nameserver (and stub zone server) a query for a random name of its own at
        /// start; one that hands it back to this server forwards in a loop: it is logged,
        /// counted (skyline_forward_loop_detected) and no longer forwarded to (CoreDNS loop,
        /// without the exit) [default: false]
        #[arg(
            long,
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = parse_go_bool
        )]
        restart loop_detect: bool = false;

        /// Ask the nameservers over TCP only, on persistent connections each worker reuses for
        /// many queries (CoreDNS force_tcp); without it, UDP first and TCP after a truncated
        /// answer (CoreDNS prefer_udp) [default: false]
        #[arg(
            long = "forward-force-tcp",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = parse_go_bool
        )]
        applied force_tcp: bool = false;

        /// Ask the nameservers over DNS over TLS (RFC 7858, CoreDNS tls://), on persistent
        /// connections; give them with port 853 [default: false]
        #[arg(
            long = "forward-tls",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = parse_go_bool
        )]
        applied tls: bool = false;

        /// The name the TLS nameservers' certificates must carry (CoreDNS tls_servername);
        /// without it, each nameserver's IP address [default: none]
        #[arg(long = "forward-tls-servername", value_name = "NAME")]
        applied tls_servername: String;

        /// PEM file of certificate authorities trusted for TLS nameservers, besides the
        /// platform's root store [default: none]
        #[arg(long = "forward-tls-ca", value_name = "FILE")]
        applied tls_ca: PathBuf, file PathBuf => relative;

        /// How long a persistent upstream connection (force_tcp, TLS) stays open with no query
        /// waiting on it (CoreDNS expire), e.g. 10s [default: 10s]
        #[arg(long = "forward-expire", value_name = "DURATION", value_parser = parse_duration)]
        applied expire: Duration = ForwardConfig::default().expire, file String => duration;

        /// A stub zone and its servers, ZONE=IP:PORT[,IP:PORT...], or `ZONE=tls://IP[:PORT],...`
        /// for DNS over TLS; repeat for more zones; in the file a list of tables with `zone`,
        /// `servers` and, optionally, how they are asked (`force_tcp`, `tls_servername`,
        /// `tls_ca`) and used (`policy`, `max_fails`, `health_check`, `health_check_no_rec`,
        /// `health_check_domain`, `except`, `max_concurrent`) [default: none]
        #[arg(long = "stub-zone", value_name = "ZONE=IP:PORT,...", value_parser = parse_stub_zone)]
        applied stub_zones: Vec<StubZoneSetting> = Vec::new(), file Vec<StubZoneFile> => stub_zones;

        /// Follow the stub zones of the records under dns/stub/ of the domain in etcd, as they
        /// change (SkyDNS -stubzones) [default: false]
        #[arg(
            long,
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = parse_go_bool
        )]
        restart stubzones: bool = false;
    }
}

settings! {
    /// The response cache of forwarded answers: the `[cache]` table.
    Cache (CacheArgs, CacheFile) keys "cache." {
        /// Response cache memory, all workers together, e.g. 64MiB [default: 16MiB]
        #[arg(long = "cache-size", value_name = "SIZE", value_parser = parse_size)]
        applied size: usize = CacheConfig::default().max_bytes, file String => size;

        /// Lowest TTL, seconds, given to cached positive answers [default: 0]
        #[arg(long = "cache-min-ttl", value_name = "SECS")]
        applied min_ttl: u32 = CacheConfig::default().min_ttl;

        /// Highest TTL, seconds, given to cached positive answers [default: 86400]
        #[arg(long = "cache-max-ttl", value_name = "SECS")]
        applied max_ttl: u32 = CacheConfig::default().max_ttl;

        /// Highest TTL, seconds, of cached negative answers (RFC 2308) [default: 3600]
        #[arg(long = "cache-negative-ttl", value_name = "SECS")]
        applied negative_ttl: u32 = CacheConfig::default().negative_max_ttl;

        /// A lower negative-answer cap for one zone, ZONE=SECS; repeat for more zones; in the
        /// file a table of zone = seconds [default: cluster.local.=5]
        #[arg(long = "cache-negative-ttl-zone", value_name = "ZONE=SECS", value_parser = parse_zone_ttl)]
        applied negative_ttl_zones: Vec<(Name, u32)> = CacheConfig::default().negative_zone_caps,
            file BTreeMap<String, u32> => zone_ttls;

        /// Seconds past expiry an answer may still be served when upstreams fail (RFC 8767); 0
        /// turns serve-stale off [default: 86400]
        #[arg(long = "serve-stale", value_name = "SECS")]
        applied serve_stale: u32 = CacheConfig::default().stale_for;

        /// Do not refresh popular cache entries before they expire; in the file `prefetch =
        /// false` [default: popular entries are refreshed]
        #[arg(long = "no-prefetch", num_args = 0, default_missing_value = "false")]
        applied prefetch: bool = CacheConfig::default().prefetch;

        /// A lower positive-answer cap for one zone, ZONE=SECS; 0 keeps the zone's answers out
        /// of the cache (CoreDNS disable success); repeat for more zones; in the file a table
        /// of zone = seconds [default: none]
        #[arg(long = "cache-success-ttl-zone", value_name = "ZONE=SECS", value_parser = parse_zone_ttl)]
        applied success_ttl_zones: Vec<(Name, u32)> = CacheConfig::default().success_zone_caps,
            file BTreeMap<String, u32> => zone_ttls;

        /// Answer from the cache with the TTLs as received, not counted down (CoreDNS keepttl)
        /// [default: false]
        #[arg(
            long = "cache-keep-ttl",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = parse_go_bool
        )]
        applied keep_ttl: bool = CacheConfig::default().keep_ttl;
    }
}

settings! {
    /// Kubernetes cluster DNS: the `[kubernetes]` table, CoreDNS's `kubernetes` plugin options
    /// under the same names, so that a Corefile block translates line by line. Any of them, the
    /// table or --kubernetes turns the Kubernetes source on.
    Kubernetes (KubernetesArgs, KubernetesFile) keys "kubernetes." ids "kubernetes_" {
        /// kubeconfig file of the API server to watch (CoreDNS `kubeconfig`) [default:
        /// KUBECONFIG, else ~/.kube/config, else the in-cluster service account]
        #[arg(id = "kubernetes_kubeconfig", long = "kubeconfig", value_name = "FILE")]
        restart kubeconfig: PathBuf, file PathBuf => relative;

        /// URL of the API server (CoreDNS `endpoint`), in place of the kubeconfig's; the
        /// in-cluster service account's token is sent when there is one, else nothing [default:
        /// the kubeconfig's]
        #[arg(id = "kubernetes_endpoint", long = "kubernetes-endpoint", value_name = "URL")]
        restart endpoint: String;

        /// kubeconfig context to use instead of the current one [default: the current one]
        #[arg(id = "kubernetes_context", long = "kubernetes-context", value_name = "NAME")]
        restart context: String;

        /// Comma-separated zones of cluster DNS: forward zones (the first names PTR targets) and
        /// reverse zones [default: cluster.local.,in-addr.arpa.,ip6.arpa.]
        #[arg(id = "kubernetes_zones", long = "kubernetes-zones", value_name = "ZONE,...", value_delimiter = ',')]
        restart zones: Vec<String>;

        /// Pod names <ip>.<ns>.pod.<zone>: disabled, insecure (any address answers with itself)
        /// or verified (existing pods; watches Pods) [default: disabled]
        #[arg(id = "kubernetes_pods", long = "kubernetes-pods", value_name = "MODE")]
        restart pods: String;

        /// Name endpoints without a hostname after their pod rather than their address
        /// [default: false]
        #[arg(id = "kubernetes_endpoint_pod_names", long = "kubernetes-endpoint-pod-names", num_args = 0, default_missing_value = "true")]
        restart endpoint_pod_names: bool = false;

        /// TTL of cluster records, 0-3600 (dns-version stays 28800) [default: 5]
        #[arg(id = "kubernetes_ttl", long = "kubernetes-ttl", value_name = "SECONDS")]
        restart ttl: u32 = KUBERNETES_TTL;

        /// Comma-separated namespaces to serve; others do not exist, PTRs included [default: all]
        #[arg(id = "kubernetes_namespaces", long = "kubernetes-namespaces", value_name = "NS,...", value_delimiter = ',')]
        restart namespaces: Vec<String>;

        /// Label selector of the watched Services (and Pods) [default: none]
        #[arg(id = "kubernetes_labels", long = "kubernetes-labels", value_name = "SELECTOR")]
        restart labels: String;

        /// Label selector of the watched Namespaces [default: none]
        #[arg(id = "kubernetes_namespace_labels", long = "kubernetes-namespace-labels", value_name = "SELECTOR")]
        restart namespace_labels: String;

        /// A ClusterIP service without ready endpoints is NXDOMAIN (CoreDNS `ignore
        /// empty_service`) [default: false]
        #[arg(id = "kubernetes_ignore_empty_service", long = "kubernetes-ignore-empty-service", num_args = 0, default_missing_value = "true")]
        restart ignore_empty_service: bool = false;

        /// Do not watch EndpointSlices: no headless service or endpoint names [default: false]
        #[arg(id = "kubernetes_noendpoints", long = "kubernetes-noendpoints", num_args = 0, default_missing_value = "true")]
        restart noendpoints: bool = false;

        /// Also serve OpenShift's <svc>.<ns>.endpoints.<zone> and
        /// _endpoints.<svc>.<ns>.svc.<zone> [default: false]
        #[arg(id = "kubernetes_openshift_names", long = "kubernetes-openshift-names", num_args = 0, default_missing_value = "true")]
        restart openshift_names: bool = false;

        /// Requests per second to the API server at most (CoreDNS `apiserver_qps`) [default: no limit]
        #[arg(id = "kubernetes_apiserver_qps", long = "kubernetes-qps", value_name = "N")]
        restart apiserver_qps: u32;

        /// Comma-separated zones whose missing names are forwarded instead of denied; without a
        /// value, every cluster zone (CoreDNS `fallthrough`) [default: none]
        #[arg(id = "kubernetes_fallthrough", long = "kubernetes-fallthrough", value_name = "ZONE,...", value_delimiter = ',', num_args = 0..)]
        restart fallthrough: Vec<String>;

        /// Answer a pod's question for a missing name under its namespace's domain with the
        /// first name of its search list that exists, after a CNAME (CoreDNS `autopath
        /// @kubernetes`); needs --kubernetes-pods verified [default: false]
        #[arg(id = "kubernetes_autopath", long = "kubernetes-autopath", num_args = 0, default_missing_value = "true")]
        restart autopath: bool = false;

        /// Comma-separated search domains of the hosts' resolv.conf, tried by autopath after the
        /// cluster's own and before the bare name [default: none]
        #[arg(id = "kubernetes_autopath_search", long = "kubernetes-autopath-search", value_name = "DOMAIN,...", value_delimiter = ',')]
        restart autopath_search: Vec<String>;
    }
}

settings! {
    /// Names from a hosts(5) file and inline entries: the `[hosts]` table, CoreDNS's `hosts`
    /// plugin options under the same names, so that a Corefile block translates line by line.
    /// A file or an inline entry turns the hosts source on (docs/hosts.md).
    Hosts (HostsArgs, HostsFile) keys "hosts." ids "hosts_" {
        /// hosts(5) file whose names answer A, AAAA and PTR (CoreDNS `hosts FILE`); read again
        /// when it changes [default: none]
        #[arg(id = "hosts_file", long = "hosts", value_name = "FILE")]
        restart file: PathBuf, file PathBuf => relative;

        /// An entry "ADDRESS NAME..." served beside the file's, as a line of it (CoreDNS's
        /// inline lines); repeat the flag for more [default: none]
        #[arg(id = "hosts_inline", long = "hosts-entry", value_name = "LINE")]
        restart inline: Vec<String>;

        /// TTL of the hosts records, forward and reverse, 1-65535 (CoreDNS `ttl`) [default: 3600]
        #[arg(id = "hosts_ttl", long = "hosts-ttl", value_name = "SECONDS")]
        restart ttl: u32 = HOSTS_TTL;

        /// Comma-separated zones the hosts names must be in to be served (CoreDNS `hosts FILE
        /// ZONES...`) [default: ., every name]
        #[arg(id = "hosts_zones", long = "hosts-zones", value_name = "ZONE,...", value_delimiter = ',')]
        restart zones: Vec<String>;

        /// No PTR records for the hosts addresses (CoreDNS `no_reverse`) [default: false]
        #[arg(id = "hosts_no_reverse", long = "hosts-no-reverse", num_args = 0, default_missing_value = "true")]
        restart no_reverse: bool = false;

        /// How often the file is checked for a change, e.g. 5s or 500ms; 0 never (CoreDNS
        /// `reload`) [default: 5s]
        #[arg(id = "hosts_reload", long = "hosts-reload", value_name = "DURATION", value_parser = parse_duration)]
        restart reload: Duration = HOSTS_RELOAD, file String => duration;

        /// Comma-separated zones whose names the hosts data lacks are passed on (to the other
        /// zones, then forwarding) instead of SERVFAIL; without a value, every hosts zone
        /// (CoreDNS `fallthrough`) [default: none]
        #[arg(id = "hosts_fallthrough", long = "hosts-fallthrough", value_name = "ZONE,...", value_delimiter = ',', num_args = 0..)]
        restart fallthrough: Vec<String>;
    }
}

settings! {
    /// What the workers let others see of the queries, all off by default: dnstap, the query log
    /// and the top talkers (docs/observability.md): the `[observe]` table.
    Observe (ObserveArgs, ObserveFile) keys "observe." {
        /// Stream dnstap messages (client and forwarder queries and responses) over Frame Streams
        /// to the unix socket PATH; the reader may come and go [default: none, no dnstap]
        #[arg(long, value_name = "PATH")]
        restart dnstap: PathBuf, file PathBuf => relative;

        /// dnstap identity of this server [default: the host name]
        #[arg(long, value_name = "TEXT")]
        restart dnstap_identity: String;

        /// dnstap version string [default: skyline and its version]
        #[arg(long, value_name = "TEXT")]
        restart dnstap_version: String;

        /// Send one query in N (with its response) to dnstap [default: 1]
        #[arg(long, value_name = "N")]
        restart dnstap_sample: u32 = 1;

        /// Write one line per answered query to FILE, or to stderr with `-` or no value
        /// [default: none, no query log]
        #[arg(long, value_name = "FILE", num_args = 0..=1, require_equals = true, default_missing_value = STDERR)]
        restart query_log: PathBuf, file PathBuf => relative_or_stderr;

        /// Query-log lines per second at most, all workers together; the rest are counted as
        /// suppressed [default: 1000]
        #[arg(long, value_name = "N")]
        restart query_log_rate: u32 = 1000;

        /// Count the heaviest client addresses and query names, exported on /metrics
        /// [default: false]
        #[arg(long, num_args = 0, default_missing_value = "true")]
        restart top_talkers: bool = false;

        /// Top talkers exported per family [default: 10]
        #[arg(long, value_name = "K")]
        restart top_talkers_k: usize = 10;

        /// Count one query in N for the top talkers [default: 1]
        #[arg(long, value_name = "N")]
        restart top_talkers_sample: u32 = 1;
    }
}

settings! {
    /// DNS Cookies (RFC 7873, with the server cookie of RFC 9018): the `[cookies]` table.
    Cookies (CookiesArgs, CookiesFile) keys "cookies." {
        /// Answer DNS Cookies (RFC 7873): a COOKIE option is checked and answered with a server
        /// cookie; a wrong server cookie over UDP gets BADCOOKIE; =false ignores them [default: true]
        #[arg(
            long = "cookies",
            value_name = "BOOL",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            value_parser = parse_go_bool
        )]
        restart enabled: bool = true;

        /// Secret of the server cookies, 32 hexadecimal digits; set the same on every server of
        /// an anycast address [default: random, made at start]
        #[arg(long = "cookie-secret", env = "SKYLINE_COOKIE_SECRET", value_name = "HEX", hide_env_values = true)]
        applied secret: String;

        /// The secret before the last rotation, still accepted; cookies it made are replaced in
        /// the reply [default: none]
        #[arg(
            long = "cookie-secret-previous",
            env = "SKYLINE_COOKIE_SECRET_PREVIOUS",
            value_name = "HEX",
            hide_env_values = true
        )]
        applied secret_previous: String;
    }
}

settings! {
    /// Response rate limiting of UDP responses, as Knot DNS and BIND do it: the `[rrl]` table.
    Rrl (RrlArgs, RrlFile) keys "rrl." {
        /// Response rate limiting: UDP responses a second allowed to one client prefix for one
        /// name (NXDOMAIN and errors: one zone); 0 turns it off [default: 0]
        #[arg(long = "rrl-rate", value_name = "N")]
        restart rate: u32 = RrlConfig::default().rate;

        /// Of the responses over the rate, every Nth goes out truncated (TC) so that a genuine
        /// client retries over TCP, the rest are dropped; 0 drops all, 1 truncates all [default: 2]
        #[arg(long = "rrl-slip", value_name = "N")]
        restart slip: u32 = RrlConfig::default().slip;

        /// Seconds a client over the rate stays limited after it stops: the debt a bucket can
        /// hold, 1 to 3600 [default: 15]
        #[arg(long = "rrl-window", value_name = "SECS")]
        restart window: u32 = RrlConfig::default().window;

        /// Leading bits of an IPv4 client's address that rate limiting groups by [default: 24]
        #[arg(long = "rrl-ipv4-prefix", value_name = "BITS")]
        restart ipv4_prefix: u8 = RrlConfig::default().ipv4_prefix;

        /// Leading bits of an IPv6 client's address that rate limiting groups by [default: 56]
        #[arg(long = "rrl-ipv6-prefix", value_name = "BITS")]
        restart ipv6_prefix: u8 = RrlConfig::default().ipv6_prefix;

        /// Comma-separated address prefixes never rate limited [default: none]
        #[arg(long = "rrl-exempt", value_name = "PREFIX,...", value_delimiter = ',')]
        restart exempt: Vec<Prefix> = RrlConfig::default().exempt, file Vec<String> => prefixes;
    }
}

settings! {
    /// CoreDNS's `rewrite` plugin: the `[rewrite]` table (docs/rewrite.md).
    Rewrite (RewriteArgs, RewriteFile) keys "rewrite." {
        /// Rewrite rule in CoreDNS's syntax, `[continue|stop] name
        /// [exact|prefix|suffix|substring|regex] FROM TO [answer auto|answer name FROM TO]`,
        /// `type FROM TO` or `class FROM TO`; repeat for more, applied in order: the question is
        /// looked up (zones, cache, forwarding) as rewritten and the client sees its own
        /// [default: none]
        #[arg(long = "rewrite", value_name = "RULE")]
        restart rules: Vec<String> = Vec::new();
    }
}

settings! {
    /// CoreDNS's `template` plugin: the `[template]` table (docs/rewrite.md).
    Template (TemplateArgs, TemplateFile) keys "template." {
        /// Template in CoreDNS's syntax, `CLASS TYPE [ZONE...] { match REGEX...; answer RR;
        /// additional RR; authority RR; rcode CODE; fallthrough [ZONE...] }`; repeat for more,
        /// tried in order before the zones [default: none]
        #[arg(long = "template", value_name = "TEMPLATE")]
        restart blocks: Vec<String> = Vec::new();
    }
}

settings! {
    /// CoreDNS's `whoami`, `chaos` (`chaos VERSION AUTHORS...`) and `any` plugins: top-level
    /// keys (docs/rewrite.md).
    Plugins (PluginsArgs, PluginsFile) keys "" {
        /// Comma-separated zones whose names answer with the client's address and port (A or
        /// AAAA and an SRV record at _udp. or _tcp., in the additional section) [default: none]
        #[arg(long, value_name = "ZONE,...", value_delimiter = ',')]
        restart whoami: Vec<String> = Vec::new();

        /// Answer version.bind, version.server, authors.bind, hostname.bind and id.server in
        /// class CH, as do the chaos_* settings; without any they are REFUSED [default: false]
        #[arg(long, num_args = 0, default_missing_value = "true")]
        restart chaos: bool = false;

        /// TXT of version.bind and version.server [default: skyline-<its version>]
        #[arg(long, value_name = "TEXT")]
        restart chaos_version: String;

        /// Comma-separated TXT records of authors.bind, one per author [default: skyline]
        #[arg(long, value_name = "NAME,...", value_delimiter = ',')]
        restart chaos_authors: Vec<String>;

        /// TXT of hostname.bind and id.server [default: the host name]
        #[arg(long, value_name = "NAME")]
        restart chaos_hostname: String;

        /// Answer every ANY question, in the zones or not, with CoreDNS's RFC 8482 HINFO (`ANY
        /// obsoleted`, TTL 8482) instead of the zones' HINFO or forwarding it [default: false]
        #[arg(long, num_args = 0, default_missing_value = "true")]
        restart any: bool = false;
    }
}

/// Every setting as the operator gave it: flags, then environment variables, then the
/// configuration file, then the declared defaults, group by group.
#[derive(Debug, Clone, PartialEq)]
pub struct Given {
    /// The top-level keys but etcd's.
    pub main: Main,
    /// etcd's connection.
    pub etcd: Etcd,
    /// `[forward]`.
    pub forward: Forward,
    /// `[cache]`.
    pub cache: Cache,
    /// `[kubernetes]`.
    pub kubernetes: Kubernetes,
    /// Whether Kubernetes cluster DNS is served: `--kubernetes`, any of its flags, or a
    /// `[kubernetes]` table.
    pub kubernetes_on: bool,
    /// `[hosts]`.
    pub hosts: Hosts,
    /// Whether a `--hosts*` flag or a `[hosts]` table was given: the hosts source then needs a
    /// file or an inline entry.
    pub hosts_given: bool,
    /// `[observe]`.
    pub observe: Observe,
    /// `[cookies]`.
    pub cookies: Cookies,
    /// `[rrl]`.
    pub rrl: Rrl,
    /// `[rewrite]`.
    pub rewrite: Rewrite,
    /// `[template]`.
    pub template: Template,
    /// `whoami`, `chaos` and `any`, top-level keys.
    pub plugins: Plugins,
}

/// The configuration file's settings, group by group, as a `--config` file or a Corefile gives
/// them: each setting's key is its long option in snake_case, at the top level or, for a group
/// with a table, inside that table without the group's prefix. `crate::config` reads the TOML
/// file (unknown keys are errors, so that a typo is reported instead of silently ignored) and
/// `crate::corefile` translates a Corefile into one.
#[derive(Debug, Default, PartialEq)]
pub struct FileConfig {
    /// The top-level keys but etcd's.
    pub main: MainFile,
    /// etcd's top-level keys.
    pub etcd: EtcdFile,
    /// The `[forward]` table.
    pub forward: Option<ForwardFile>,
    /// The `[cache]` table.
    pub cache: Option<CacheFile>,
    /// The `[kubernetes]` table: its presence serves Kubernetes cluster DNS.
    pub kubernetes: Option<KubernetesFile>,
    /// The `[hosts]` table: names from a hosts file and inline entries.
    pub hosts: Option<HostsFile>,
    /// The `[observe]` table: dnstap, the query log, the top talkers.
    pub observe: Option<ObserveFile>,
    /// The `[cookies]` table.
    pub cookies: Option<CookiesFile>,
    /// The `[rrl]` table.
    pub rrl: Option<RrlFile>,
    /// The `[rewrite]` table.
    pub rewrite: Option<RewriteFile>,
    /// The `[template]` table.
    pub template: Option<TemplateFile>,
    /// The top-level keys of `whoami`, `chaos` and `any`.
    pub plugins: PluginsFile,
    /// The file's directory, which relative paths in it are relative to.
    pub dir: PathBuf,
    /// What a Corefile runs differently from CoreDNS: logged at start, printed by
    /// `--check-config`.
    pub notes: Vec<String>,
}

impl Given {
    /// The TOML keys of the settings only a restart applies that differ from `started`'s,
    /// `[kubernetes]` when cluster DNS was turned on or off.
    pub fn restart_changes(&self, started: &Given) -> Vec<&'static str> {
        let mut changed = self.main.restart_changes(&started.main);
        changed.extend(self.etcd.restart_changes(&started.etcd));
        changed.extend(self.forward.restart_changes(&started.forward));
        changed.extend(self.cache.restart_changes(&started.cache));
        changed.extend(self.kubernetes.restart_changes(&started.kubernetes));
        if self.kubernetes_on != started.kubernetes_on {
            changed.push("[kubernetes]");
        }
        changed.extend(self.hosts.restart_changes(&started.hosts));
        changed.extend(self.observe.restart_changes(&started.observe));
        changed.extend(self.cookies.restart_changes(&started.cookies));
        changed.extend(self.rrl.restart_changes(&started.rrl));
        changed.extend(self.rewrite.restart_changes(&started.rewrite));
        changed.extend(self.template.restart_changes(&started.template));
        changed.extend(self.plugins.restart_changes(&started.plugins));
        changed
    }
}

/// `addr`: one address or a list.
fn addrs(addrs: Addrs, _: &Path) -> Result<Vec<SocketAddr>, String> {
    Ok(match addrs {
        Addrs::One(addr) => vec![addr],
        Addrs::Many(addrs) => addrs,
    })
}

/// A domain name (`domain`, `local`), lower-cased and absolute.
fn name(text: String, _: &Path) -> Result<Name, String> {
    skydns_config::domain("", &text).map_err(|e| name_error(&text, e))
}

/// The SOA contact, the mail form accepted.
fn hostmaster(text: String, _: &Path) -> Result<Name, String> {
    skydns_config::hostmaster(&text).map_err(|e| name_error(&text, e))
}

/// A name's error without the setting's name, which [`Invalid`] adds.
fn name_error(text: &str, error: skydns_config::ConfigError) -> String {
    match error {
        skydns_config::ConfigError::BadName { reason, .. } => format!("{text:?} is not a valid domain name: {reason}"),
        other => other.to_string(),
    }
}

/// An XDP attach mode: `auto`, `native` or `generic`.
fn xdp_mode(text: String, _: &Path) -> Result<XdpMode, String> {
    text.parse()
}

/// A path relative to the configuration file's directory `dir`, unless absolute.
fn relative(path: PathBuf, dir: &Path) -> Result<PathBuf, String> {
    Ok(if path.is_relative() { dir.join(path) } else { path })
}

/// Like [`relative`], but `-` (stderr) stays as it is.
fn relative_or_stderr(path: PathBuf, dir: &Path) -> Result<PathBuf, String> {
    if path.as_os_str() == STDERR {
        return Ok(path);
    }
    relative(path, dir)
}

/// A duration such as `"1500ms"` or `"24h"`.
fn duration(text: String, _: &Path) -> Result<Duration, String> {
    parse_duration(&text)
}

/// A memory size such as `"64MiB"`.
fn size(text: String, _: &Path) -> Result<usize, String> {
    parse_size(&text)
}

/// A list of address prefixes.
fn prefixes(texts: Vec<String>, _: &Path) -> Result<Vec<Prefix>, String> {
    texts.iter().map(|text| parse_prefix(text)).collect()
}

/// Stub zones as tables of `zone`, `servers`, how they are used and how they are asked; a CA
/// file relative to `dir`.
fn stub_zones(zones: Vec<StubZoneFile>, dir: &Path) -> Result<Vec<StubZoneSetting>, String> {
    zones
        .into_iter()
        .map(|s| {
            let (servers, tls) = parse_servers(s.servers.iter().map(String::as_str))?;
            Ok(StubZoneSetting {
                zone: zone(&s.zone)?,
                servers,
                options: s.options()?,
                ask: Ask {
                    force_tcp: s.force_tcp,
                    tls,
                    tls_servername: s.tls_servername,
                    tls_ca: s.tls_ca.map(|ca| relative(ca, dir)).transpose()?,
                },
            })
        })
        .collect()
}

/// A forwarding policy's name.
fn policy(text: String, _: &Path) -> Result<Policy, String> {
    parse_policy(&text)
}

/// Zones given as a list of names.
fn names(texts: Vec<String>, _: &Path) -> Result<Vec<Name>, String> {
    texts.iter().map(|text| zone(text)).collect()
}

/// TTL caps as a table of zone = seconds.
fn zone_ttls(zones: BTreeMap<String, u32>, _: &Path) -> Result<Vec<(Name, u32)>, String> {
    zones.iter().map(|(z, secs)| Ok((zone(z)?, *secs))).collect()
}

fn zone(text: &str) -> Result<Name, String> {
    skydns_config::domain("", text).map_err(|e| name_error(text, e))
}

/// The table `text` as a group's keys, taken with `take`; an unknown key or a wrong value
/// is an error.
#[cfg(test)]
pub fn parse_group<F>(text: &str, take: fn(&mut toml::Table, &mut Vec<Invalid>) -> F) -> Result<F, String> {
    let mut table: toml::Table = text.parse().map_err(|e: toml::de::Error| e.to_string())?;
    let mut problems = Vec::new();
    let file = take(&mut table, &mut problems);
    match (problems.first(), table.keys().next()) {
        (Some(problem), _) => Err(problem.to_string()),
        (None, Some(key)) => Err(format!("unknown key {key}")),
        (None, None) => Ok(file),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use clap::CommandFactory;

    /// One setting as the tables of `docs/settings.md` show it, beside what clap knows of its flag.
    pub struct Setting {
        /// The clap argument's id: the field's name.
        pub id: &'static str,
        /// The TOML key, `table.key` inside a table.
        pub key: &'static str,
        /// The `/<prefix>/config` key, if any.
        pub data: Option<&'static str>,
        /// Whether a change needs a restart.
        pub restart: bool,
    }

    /// Each group's name in the markers of `docs/settings.md`, and its settings.
    const GROUPS: &[(&str, &[Setting])] = &[
        ("main", Main::SETTINGS),
        ("etcd", Etcd::SETTINGS),
        ("forward", Forward::SETTINGS),
        ("cache", Cache::SETTINGS),
        ("kubernetes", Kubernetes::SETTINGS),
        ("hosts", Hosts::SETTINGS),
        ("observe", Observe::SETTINGS),
        ("cookies", Cookies::SETTINGS),
        ("rrl", Rrl::SETTINGS),
        ("rewrite", Rewrite::SETTINGS),
        ("template", Template::SETTINGS),
        ("plugins", Plugins::SETTINGS),
    ];

    /// The Markdown table of one group, from the declarations and the flags clap made of them.
    fn table(command: &clap::Command, settings: &[Setting]) -> String {
        let with_data = settings.iter().any(|s| s.data.is_some());
        let mut header = vec!["flag", "environment", "TOML key"];
        header.extend(with_data.then_some("`/<prefix>/config` key"));
        header.extend(["default", "on SIGHUP", "what it is for"]);
        let mut out = format!("| {} |\n|{}\n", header.join(" | "), "---|".repeat(header.len()));
        for setting in settings {
            let arg = command
                .get_arguments()
                .find(|a| a.get_id() == setting.id)
                .unwrap_or_else(|| panic!("{}: no such flag", setting.key));
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            let help = help.replace('\n', " ");
            let (what, default) = help
                .strip_suffix(']')
                .and_then(|h| h.rsplit_once(" [default: "))
                .unwrap_or_else(|| panic!("{}: the doc comment does not end with [default: …]", setting.key));
            let long = arg.get_long().expect("a long flag");
            let value = arg
                .get_value_names()
                .map(|names| names.iter().map(ToString::to_string).collect::<Vec<_>>().join(" "))
                .unwrap_or_default();
            let range = arg.get_num_args().expect("a built command");
            let flag = match (range.min_values(), range.max_values()) {
                (_, 0) => format!("--{long}"),
                (0, _) if arg.is_require_equals_set() => format!("--{long}[={value}]"),
                (0, _) => format!("--{long} [{value}]"),
                _ => format!("--{long} {value}"),
            };
            let mut row = vec![
                format!("`{flag}`"),
                arg.get_env()
                    .map_or(String::new(), |e| format!("`{}`", e.to_string_lossy())),
                format!("`{}`", setting.key),
            ];
            if with_data {
                row.push(setting.data.map_or(String::new(), |d| format!("`{d}`")));
            }
            row.push(cell(default));
            row.push(if setting.restart { "restart" } else { "applied" }.to_owned());
            row.push(cell(&sentence(what)));
            out.push_str(&format!("| {} |\n", row.join(" | ")));
        }
        out.push('\n');
        out
    }

    /// `--help`'s capital letter lowered, as in the prose of `docs/settings.md`: "Domain to" but "IP:port".
    fn sentence(text: &str) -> String {
        let mut chars = text.chars();
        match (chars.next(), chars.next()) {
            (Some(first), Some(second)) if second.is_lowercase() => {
                first.to_lowercase().chain([second]).chain(chars).collect()
            }
            _ => text.to_owned(),
        }
    }

    /// Text for a table cell: `|` would end it, `<` would start HTML.
    fn cell(text: &str) -> String {
        text.replace('|', "\\|").replace('<', "&lt;")
    }

    /// The text between `<!-- settings: NAME -->` and `<!-- end of settings -->` for every group,
    /// replaced with `replace(name)`.
    fn rewrite(doc: &str, mut replace: impl FnMut(&str) -> String) -> String {
        let mut out = String::new();
        let mut rest = doc;
        while let Some(start) = rest.find("<!-- settings: ") {
            let (before, marked) = rest.split_at(start);
            let (marker, after) = marked.split_once("-->\n").expect("a closed marker");
            let name = marker.trim_start_matches("<!-- settings: ").trim();
            let (_, after) = after.split_once("<!-- end of settings -->").expect("an end marker");
            out.push_str(before);
            out.push_str(marker);
            out.push_str("-->\n");
            out.push_str(&replace(name));
            out.push_str("<!-- end of settings -->");
            rest = after;
        }
        out.push_str(rest);
        out
    }

    /// The settings tables of `docs/settings.md` are made from the declarations above, so that
    /// they cannot drift from the flags. After changing a setting, `SKYLINE_WRITE_README=1 cargo
    /// test -p skyline --bin skyline readme` writes them.
    #[test]
    fn the_readme_tables_are_the_declared_settings() {
        let mut command = Cli::command();
        command.build();
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/settings.md");
        let doc = std::fs::read_to_string(&path).unwrap();
        let mut seen = Vec::new();
        let generated = rewrite(&doc, |name| {
            seen.push(name.to_owned());
            let (_, settings) = GROUPS
                .iter()
                .find(|(group, _)| *group == name)
                .unwrap_or_else(|| panic!("docs/settings.md names a group {name:?} there is not"));
            table(&command, settings)
        });
        let missing: Vec<_> = GROUPS.iter().filter(|(g, _)| !seen.iter().any(|s| s == g)).collect();
        assert!(
            missing.is_empty(),
            "docs/settings.md has no table for {:?}",
            missing.iter().map(|(g, _)| g).collect::<Vec<_>>()
        );
        if generated != doc && std::env::var_os("SKYLINE_WRITE_README").is_some() {
            std::fs::write(&path, &generated).unwrap();
            return;
        }
        assert!(
            generated == doc,
            "docs/settings.md's tables differ from the declarations in src/settings.rs; \
             SKYLINE_WRITE_README=1 cargo test -p skyline --bin skyline readme rewrites them"
        );
    }

    /// The `[default: …]` ending a setting's help, as `--help` and `docs/settings.md` show it.
    fn help_default(command: &clap::Command, id: &str) -> String {
        let arg = command
            .get_arguments()
            .find(|a| a.get_id() == id)
            .unwrap_or_else(|| panic!("{id}: no such flag"));
        let help = arg
            .get_help()
            .map(ToString::to_string)
            .unwrap_or_default()
            .replace('\n', " ");
        help.strip_suffix(']')
            .and_then(|h| h.rsplit_once(" [default: "))
            .map(|(_, default)| default.to_owned())
            .unwrap_or_else(|| panic!("{id}: the doc comment does not end with [default: …]"))
    }

    /// Every setting at its declared default: no flag, no file; cluster DNS on, so that its
    /// resolution can be read too.
    fn nothing_given() -> Given {
        let dir = Path::new("");
        let problems = &mut Vec::new();
        let given = Given {
            main: Main::merge(&MainArgs::default(), None, dir, problems),
            etcd: Etcd::merge(&EtcdArgs::default(), None, dir, problems),
            forward: Forward::merge(&ForwardArgs::default(), None, dir, problems),
            cache: Cache::merge(&CacheArgs::default(), None, dir, problems),
            kubernetes: Kubernetes::merge(&KubernetesArgs::default(), None, dir, problems),
            kubernetes_on: true,
            hosts: Hosts::merge(&HostsArgs::default(), None, dir, problems),
            hosts_given: false,
            observe: Observe::merge(&ObserveArgs::default(), None, dir, problems),
            cookies: Cookies::merge(&CookiesArgs::default(), None, dir, problems),
            rrl: Rrl::merge(&RrlArgs::default(), None, dir, problems),
            rewrite: Rewrite::merge(&RewriteArgs::default(), None, dir, problems),
            template: Template::merge(&TemplateArgs::default(), None, dir, problems),
            plugins: Plugins::merge(&PluginsArgs::default(), None, dir, problems),
        };
        assert_eq!(*problems, []);
        given
    }

    /// Each group's settings at their declared defaults, as `--check-config` writes them, in
    /// the order of [`GROUPS`].
    fn declared_defaults() -> Vec<Vec<(&'static str, Option<toml::Value>)>> {
        let g = nothing_given();
        vec![
            g.main.in_force(),
            g.etcd.in_force(),
            g.forward.in_force(),
            g.cache.in_force(),
            g.kubernetes.in_force(),
            g.hosts.in_force(),
            g.observe.in_force(),
            g.cookies.in_force(),
            g.rrl.in_force(),
            g.rewrite.in_force(),
            g.template.in_force(),
            g.plugins.in_force(),
        ]
    }

    /// Settings whose help says their default in words rather than as a value: `--no-prefetch`
    /// turns off what `prefetch = true` means.
    const WORDED_DEFAULTS: &[&str] = &["cache.prefetch"];

    /// A setting's default is declared once, in its `settings!` entry: the `[default: …]` its
    /// help ends with (and so `docs/settings.md`) is that value as the file writes it, "none"
    /// for an empty list, so that the text cannot drift from what the server does.
    #[test]
    fn the_help_states_each_declared_default() {
        let mut command = Cli::command();
        command.build();
        let groups = declared_defaults();
        assert_eq!(groups.len(), GROUPS.len());
        let mut wrong = Vec::new();
        for ((_, settings), defaults) in GROUPS.iter().zip(groups) {
            assert_eq!(settings.len(), defaults.len());
            for (setting, (key, value)) in settings.iter().zip(defaults) {
                assert!(setting.key.ends_with(key), "{} and {key} out of order", setting.key);
                let Some(value) = value else { continue };
                if WORDED_DEFAULTS.contains(&setting.key) {
                    continue;
                }
                let declared = match value {
                    toml::Value::String(text) => text,
                    toml::Value::Array(items) if items.is_empty() => "none".to_owned(),
                    toml::Value::Table(table) if table.is_empty() => "none".to_owned(),
                    toml::Value::Table(table) => table
                        .iter()
                        .map(|(zone, value)| format!("{zone}={value}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    other => other.to_string(),
                };
                let stated = help_default(&command, setting.id);
                if stated != declared {
                    wrong.push(format!("{}: help says {stated:?}, declared {declared:?}", setting.key));
                }
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    /// A setting whose default depends on the data (`/<prefix>/config`) or on other settings
    /// has it applied where it is resolved; the help states the value that resolution gives
    /// when nothing is set.
    #[test]
    fn the_help_states_the_defaults_applied_where_a_setting_is_resolved() {
        let mut command = Cli::command();
        command.build();
        let given = nothing_given();
        let resolved = crate::config::resolve(crate::config::operator(&given).unwrap(), None).unwrap();
        let kubernetes = crate::config::kubernetes(&given).unwrap().unwrap();
        let shown = |value: &dyn crate::in_force::InForce| match value.in_force() {
            Some(toml::Value::String(text)) => text,
            other => other.map(|v| v.to_string()).unwrap_or_default(),
        };
        let zones: Vec<String> = kubernetes.zones.zones.iter().map(ToString::to_string).collect();
        for (id, applied) in [
            ("addr", shown(&resolved.addr)),
            ("domain", shown(&resolved.skydns.domain)),
            ("ndots", shown(&resolved.ndots)),
            ("round_robin", shown(&resolved.skydns.round_robin)),
            ("wildcards_marker", shown(&resolved.skydns.wildcards_marker)),
            ("cname_chains", shown(&resolved.skydns.cname_chains)),
            ("fallthrough", shown(&resolved.skydns.fallthrough)),
            ("scache", shown(&skyline_dataplane::dnssec::DEFAULT_CACHE)),
            ("no_rec", shown(&resolved.no_rec)),
            ("ns_rotate", shown(&resolved.ns_rotate)),
            ("timeout", shown(&ForwardConfig::default().timeout)),
            ("kubernetes_zones", zones.join(",")),
        ] {
            assert_eq!(help_default(&command, id), applied, "{id}");
        }
    }

    /// A range is declared once, where its setting is resolved; the help states it, and this
    /// keeps the two the same.
    #[test]
    fn the_help_states_the_ranges_that_are_checked() {
        let mut command = Cli::command();
        command.build();
        let (window_first, window_last) = crate::protection::RRL_WINDOW.into_inner();
        let (hosts_first, hosts_last) = crate::config::HOSTS_TTL.into_inner();
        let kubernetes_last = skyline_dataplane::snapshot::kubernetes::MAX_TTL;
        for (id, range) in [
            ("window", format!("{window_first} to {window_last}")),
            ("hosts_ttl", format!("{hosts_first}-{hosts_last}")),
            ("kubernetes_ttl", format!("0-{kubernetes_last}")),
        ] {
            let arg = command.get_arguments().find(|a| a.get_id() == id).unwrap();
            let help = arg
                .get_help()
                .map(ToString::to_string)
                .unwrap_or_default()
                .replace('\n', " ");
            assert!(help.contains(&range), "{id}: the help does not say {range}: {help}");
        }
    }

    /// README.md is what a newcomer reads in minutes: what skyline is, how to run it and the
    /// common configurations, with the reference in `docs/`. 20 KiB is the promise that keeps it so.
    #[test]
    fn the_readme_stays_within_20_kib() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
        let len = std::fs::metadata(&path).unwrap().len();
        assert!(
            len <= 20 * 1024,
            "README.md is {len} bytes, over 20,480: move reference text into docs/"
        );
    }

    #[test]
    fn every_toml_key_is_in_an_example() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
        let mut text = String::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                text.push_str(&std::fs::read_to_string(path).unwrap());
            }
        }
        let missing: Vec<_> = GROUPS
            .iter()
            .flat_map(|(_, settings)| settings.iter())
            .map(|s| s.key)
            .filter(|key| {
                let last = key.rsplit('.').next().unwrap();
                !text.contains(&format!("{last} =")) && !text.contains(&format!("{key}]"))
            })
            .collect();
        assert!(missing.is_empty(), "keys no file in examples/ shows: {missing:?}");
    }

    #[test]
    fn file_values_convert_and_a_bad_one_is_named() {
        let file = parse_group("drain = \"soon\"\nrecords = \"r.json\"\n", MainFile::take).unwrap();
        let mut problems = Vec::new();
        let main = Main::merge(&MainArgs::default(), Some(&file), Path::new("/etc"), &mut problems);
        assert_eq!(main.drain, DEFAULT_DRAIN, "an invalid value counts as not set");
        assert_eq!(main.records, Some(PathBuf::from("/etc/r.json")));
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].key, "drain");
        let flag = MainArgs {
            drain: Some(Duration::ZERO),
            ..MainArgs::default()
        };
        let mut problems = Vec::new();
        let main = Main::merge(&flag, Some(&file), Path::new("/etc"), &mut problems);
        assert_eq!(main.drain, Duration::ZERO);
        assert!(problems.is_empty(), "a flag's value hides the file's");
    }
}
