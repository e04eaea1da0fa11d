//! The command line: SkyDNS's flags (as long options) with SkyDNS's environment variables, plus
//! skyline's own. Every option is optional here; [`crate::config`] stacks them over the
//! configuration file, the data's `/<prefix>/config` and the defaults.

use crate::forwarding::ForwardArgs;
use crate::observe::ObserveArgs;
use crate::protection::ProtectionArgs;
use clap::{CommandFactory, FromArgMatches, Parser};
use skyline_controlplane::skydns::config;
use skyline_dataplane::wire::Name;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;

/// skyline: a service-discovery DNS server serving SkyDNS records.
///
/// Precedence of settings: flags, then environment variables, then the --config file, then the
/// /<prefix>/config object of the data (the records file or etcd), then SkyDNS's defaults.
///
/// `skyline kube2etcd --help`: the mirror of a Kubernetes cluster's DNS records into etcd.
#[derive(Debug, Clone, Parser)]
#[command(name = "skyline", version)]
pub struct Cli {
    /// IP:port to serve DNS on, over UDP and TCP; repeat or comma-separate to serve on several
    /// (a node-local cache on 169.254.20.10:53 and a cluster IP) [default: 127.0.0.1:53]
    #[arg(long, env = "SKYDNS_ADDR", value_name = "IP:PORT", value_delimiter = ',', value_parser = parse_addr)]
    pub addr: Option<Vec<SocketAddr>>,

    /// Domain to be authoritative for [default: skydns.local.]
    #[arg(long, env = "SKYDNS_DOMAIN", value_parser = parse_domain)]
    pub domain: Option<Name>,

    /// First element of every record key: records live under /<prefix>/ [default: skydns]
    #[arg(long, env = "SKYDNS_PATH_PREFIX", value_name = "PREFIX")]
    pub path_prefix: Option<String>,

    /// Comma-separated IP:port list of resolvers for names outside the domain
    #[arg(long, env = "SKYDNS_NAMESERVERS", value_name = "IP:PORT,...", value_delimiter = ',', value_parser = parse_addr)]
    pub nameservers: Option<Vec<SocketAddr>>,

    /// Labels a name needs before it is forwarded; 0 means the default [default: 2]
    #[arg(long, env = "SKYDNS_NDOTS", value_name = "N")]
    pub ndots: Option<u32>,

    /// Where etcd is and how to authenticate to it.
    #[command(flatten)]
    pub etcd: EtcdArgs,

    /// Follow etcd's member list: members added to the cluster are used and removed ones
    /// dropped, without a restart [default: false]
    #[arg(
        long,
        env = "SKYDNS_DISCOVER",
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = parse_go_bool
    )]
    pub discover: Option<bool>,

    /// Name whose records local.dns.<domain> answers with
    #[arg(long, value_name = "NAME", value_parser = parse_domain)]
    pub local: Option<Name>,

    /// SOA contact; the mail form hostmaster@skydns.local. is accepted [default: hostmaster.<domain>]
    #[arg(long, value_name = "NAME", value_parser = parse_hostmaster)]
    pub hostmaster: Option<Name>,

    /// Shuffle A/AAAA answers; --round-robin=false turns it off [default: true]
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = parse_go_bool
    )]
    pub round_robin: Option<bool>,

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
    pub wildcards_marker: Option<bool>,

    /// Sign the domain (DNSSEC) with the key pair KEYBASE.key and KEYBASE.private that
    /// dnssec-keygen wrote, its owner the domain; re-read on SIGHUP [default: unsigned]
    #[arg(long, value_name = "KEYBASE")]
    pub dnssec: Option<PathBuf>,

    /// Signed denials each worker keeps with --dnssec [default: 10000]
    #[arg(long, value_name = "N")]
    pub scache: Option<u64>,

    /// Records file: a JSON object mapping etcd keys to SkyDNS records; reloaded when it changes
    /// and on SIGHUP; not with --machines [default: none, an empty zone]
    #[arg(long, value_name = "FILE")]
    pub records: Option<PathBuf>,

    /// Serve on the UDP and TCP sockets systemd passes (socket activation: LISTEN_FDS), in
    /// place of binding --addr [default: false]
    #[arg(
        long,
        env = "SKYDNS_SYSTEMD",
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = parse_go_bool
    )]
    pub systemd: Option<bool>,

    /// Worker threads answering queries; 0 means one per core [default: 0]
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,

    /// Do not pin worker threads to cores
    #[arg(long)]
    pub no_pin: bool,

    /// DNS over TCP connections per worker; a new one past it takes the slot of the connection
    /// idle the longest, and is refused at once only when every connection is busy [default: 1024]
    #[arg(long, value_name = "N")]
    pub tcp_max_connections: Option<usize>,

    /// DNS over TCP connections per client address per worker; 0 means no such cap, only the
    /// per-worker one [default: 0]
    #[arg(long, value_name = "N")]
    pub tcp_max_per_client: Option<usize>,

    /// Create this dummy interface holding the --addr addresses (a node-local cache's
    /// 169.254.20.10), removed on exit; needs CAP_NET_ADMIN and `ip` (iproute2) [default: none]
    #[arg(long, value_name = "NAME")]
    pub setup_interface: Option<String>,

    /// Install nftables NOTRACK rules for DNS to and from the --addr addresses, removed on exit;
    /// needs CAP_NET_ADMIN and `nft` (nftables)
    #[arg(long)]
    pub setup_notrack: bool,

    /// File to hold the PID of the serving process; an in-place upgrade's new process rewrites
    /// it [default: none]
    #[arg(long, value_name = "FILE")]
    pub pid_file: Option<PathBuf>,

    /// After SIGTERM or SIGINT, how long to keep answering while /ready says not ready, before
    /// the listeners close and the queries in flight are finished, e.g. 5s or 500ms; a second
    /// signal ends it early [default: 5s]
    #[arg(long, value_name = "DURATION", value_parser = crate::forwarding::parse_duration)]
    pub drain: Option<std::time::Duration>,

    /// Directory for the persisted snapshot: the last complete data of etcd and Kubernetes,
    /// served (marked stale) when a start finds its source unreachable [default: none]
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// The oldest persisted snapshot a start serves, e.g. 24h or 90m [default: 24h]
    #[arg(long, value_name = "DURATION", value_parser = crate::forwarding::parse_duration)]
    pub state_max_age: Option<std::time::Duration>,

    /// IP:port to serve /health, /ready and /metrics on over HTTP; port 0 picks a free one
    /// [default: none, no HTTP listener]
    #[arg(long, env = "SKYLINE_HTTP_ADDR", value_name = "IP:PORT", value_parser = parse_addr)]
    pub http_addr: Option<SocketAddr>,

    /// TOML configuration file, keys as the long options in snake_case
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Validate the configuration, the records file included, print the settings in force and
    /// exit: 0 when a start would accept them, 1 with every problem named
    #[arg(long)]
    pub check_config: bool,

    /// Log at debug level (otherwise RUST_LOG, default info)
    #[arg(long, short)]
    pub verbose: bool,

    /// Forwarding and the response cache.
    #[command(flatten)]
    pub forward: ForwardArgs,

    /// DNS Cookies.
    #[command(flatten)]
    pub protection: ProtectionArgs,

    /// Kubernetes cluster DNS.
    #[command(flatten)]
    pub kubernetes: KubernetesArgs,

    /// dnstap, the query log and the top talkers.
    #[command(flatten)]
    pub observe: ObserveArgs,
}

/// Where etcd is and how to authenticate to it, SkyDNS's flags and variables: the server's data
/// source, and where kube2etcd writes.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct EtcdArgs {
    /// Comma-separated etcd v3 endpoints; for the server, setting them makes etcd the data source,
    /// watched live [default: none]
    #[arg(long, env = "ETCD_MACHINES", value_name = "URL,...", value_delimiter = ',')]
    pub machines: Option<Vec<String>>,

    /// Client private key for TLS to etcd, PEM; goes with --tls-pem
    #[arg(long, env = "ETCD_TLSKEY", value_name = "FILE")]
    pub tls_key: Option<PathBuf>,

    /// Client certificate for TLS to etcd, PEM; goes with --tls-key
    #[arg(long, env = "ETCD_TLSPEM", value_name = "FILE")]
    pub tls_pem: Option<PathBuf>,

    /// Certificate authority of the etcd members' certificates, PEM; needed for https endpoints
    #[arg(long, env = "ETCD_CACERT", value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,

    /// etcd user; goes with --password
    #[arg(long, env = "ETCD_USERNAME", value_name = "USER")]
    pub username: Option<String>,

    /// Password of the etcd user
    #[arg(long, env = "ETCD_PASSWORD", value_name = "PASSWORD", hide_env_values = true)]
    pub password: Option<String>,
}

/// Kubernetes cluster DNS, its options named after CoreDNS's `kubernetes` plugin. Any of them
/// turns the Kubernetes source on; so does a `[kubernetes]` table in the configuration file.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct KubernetesArgs {
    /// Serve Kubernetes cluster DNS from the API server (connection from --kubeconfig, else
    /// KUBECONFIG or ~/.kube/config, else the in-cluster service account)
    #[arg(long)]
    pub kubernetes: bool,

    /// kubeconfig file of the API server to watch (CoreDNS `kubeconfig`)
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// kubeconfig context to use instead of the current one
    #[arg(long, value_name = "NAME")]
    pub kubernetes_context: Option<String>,

    /// Comma-separated zones of cluster DNS: forward zones (the first names PTR targets) and
    /// reverse zones [default: cluster.local.,in-addr.arpa.,ip6.arpa.]
    #[arg(long, value_name = "ZONE,...", value_delimiter = ',')]
    pub kubernetes_zones: Option<Vec<String>>,

    /// Pod names <ip>.<ns>.pod.<zone>: disabled, insecure (any address) or verified (existing
    /// pods) [default: disabled]
    #[arg(long, value_name = "MODE")]
    pub kubernetes_pods: Option<String>,

    /// Name endpoints without a hostname after their pod rather than their address
    #[arg(long)]
    pub kubernetes_endpoint_pod_names: bool,

    /// TTL of cluster records, 0-3600 [default: 5]
    #[arg(long, value_name = "SECONDS")]
    pub kubernetes_ttl: Option<u32>,

    /// Comma-separated namespaces to serve; others do not exist [default: all]
    #[arg(long, value_name = "NS,...", value_delimiter = ',')]
    pub kubernetes_namespaces: Option<Vec<String>>,

    /// Label selector of the watched Services (and Pods)
    #[arg(long, value_name = "SELECTOR")]
    pub kubernetes_labels: Option<String>,

    /// Label selector of the watched Namespaces
    #[arg(long, value_name = "SELECTOR")]
    pub kubernetes_namespace_labels: Option<String>,

    /// A ClusterIP service without ready endpoints is NXDOMAIN (CoreDNS `ignore empty_service`)
    #[arg(long)]
    pub kubernetes_ignore_empty_service: bool,

    /// Do not watch EndpointSlices: no headless service or endpoint names
    #[arg(long)]
    pub kubernetes_noendpoints: bool,

    /// Also serve OpenShift's <svc>.<ns>.endpoints.<zone> and _endpoints.<svc>.<ns>.svc.<zone>
    #[arg(long)]
    pub kubernetes_openshift_names: bool,

    /// Requests per second to the API server at most (CoreDNS `apiserver_qps`) [default: no limit]
    #[arg(long, value_name = "N")]
    pub kubernetes_qps: Option<u32>,

    /// Comma-separated zones whose missing names are forwarded instead of denied; without a
    /// value, every cluster zone (CoreDNS `fallthrough`)
    #[arg(long, value_name = "ZONE,...", value_delimiter = ',', num_args = 0..)]
    pub kubernetes_fallthrough: Option<Vec<String>>,
}

impl KubernetesArgs {
    /// Whether any Kubernetes option is given.
    pub fn any(&self) -> bool {
        self.kubernetes
            || self.kubeconfig.is_some()
            || self.kubernetes_context.is_some()
            || self.kubernetes_zones.is_some()
            || self.kubernetes_pods.is_some()
            || self.kubernetes_endpoint_pod_names
            || self.kubernetes_ttl.is_some()
            || self.kubernetes_namespaces.is_some()
            || self.kubernetes_labels.is_some()
            || self.kubernetes_namespace_labels.is_some()
            || self.kubernetes_ignore_empty_service
            || self.kubernetes_noendpoints
            || self.kubernetes_openshift_names
            || self.kubernetes_fallthrough.is_some()
            || self.kubernetes_qps.is_some()
    }
}

impl Cli {
    /// Parses a command line, reading the environment variables as SkyDNS does: Go's
    /// `os.Getenv` makes an empty variable the same as an unset one (deployments often carry
    /// e.g. `SKYDNS_NAMESERVERS=""`), whereas clap would take it as an empty, invalid value.
    pub fn try_parse_skydns<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let command = Cli::command().mut_args(|arg| {
            let empty = arg
                .get_env()
                .and_then(std::env::var_os)
                .is_some_and(|value| value.is_empty());
            if empty {
                arg.env(None)
            } else {
                arg
            }
        });
        Cli::from_arg_matches(&command.try_get_matches_from(args)?)
    }
}

pub(crate) fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    config::address("addr", text)
        .map_err(|_| format!("{text:?} is not an IP:port address (a host name is not accepted)"))
}

pub(crate) fn parse_domain(text: &str) -> Result<Name, String> {
    config::domain("domain", text).map_err(|e| e.to_string())
}

fn parse_hostmaster(text: &str) -> Result<Name, String> {
    config::hostmaster(text).map_err(|e| e.to_string())
}

/// Boolean values as Go's `strconv.ParseBool` takes them, so SkyDNS command lines keep working.
pub(crate) fn parse_go_bool(text: &str) -> Result<bool, String> {
    match text {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(format!("{text:?} is not a boolean (true or false)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    /// The `--flag` tokens and environment variable names written in the README's tables.
    fn readme_table_words() -> (BTreeSet<String>, BTreeSet<String>) {
        let readme = include_str!("../README.md");
        let (mut flags, mut env) = (BTreeSet::new(), BTreeSet::new());
        for row in readme.lines().filter(|line| line.starts_with('|')) {
            for word in row.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_')) {
                if let Some(flag) = word
                    .strip_prefix("--")
                    .filter(|f| f.starts_with(|c: char| c.is_ascii_lowercase()))
                {
                    flags.insert(flag.to_owned());
                } else if ["SKYDNS_", "ETCD_", "SKYLINE_"].iter().any(|p| word.starts_with(p)) {
                    env.insert(word.to_owned());
                }
            }
        }
        (flags, env)
    }

    #[test]
    fn the_readme_tables_name_every_flag_and_variable_and_no_other() {
        let (server, kube2etcd) = (Cli::command(), crate::kube2etcd::Kube2EtcdCli::command());
        let args: Vec<_> = server
            .get_arguments()
            .chain(kube2etcd.get_arguments())
            .filter(|a| a.get_long().is_some())
            .collect();
        let cli_flags: BTreeSet<String> = args
            .iter()
            .filter_map(|a| a.get_long())
            .filter(|long| !matches!(*long, "help" | "version"))
            .map(str::to_owned)
            .collect();
        let cli_env: BTreeSet<String> = args
            .iter()
            .filter_map(|a| a.get_env())
            .map(|e| e.to_string_lossy().into_owned())
            .collect();
        let (readme_flags, readme_env) = readme_table_words();
        let undocumented: Vec<_> = cli_flags.difference(&readme_flags).collect();
        let unknown: Vec<_> = readme_flags.difference(&cli_flags).collect();
        assert!(
            undocumented.is_empty(),
            "flags missing from README's tables: {undocumented:?}"
        );
        assert!(
            unknown.is_empty(),
            "README's tables name flags skyline lacks: {unknown:?}"
        );
        let undocumented: Vec<_> = cli_env.difference(&readme_env).collect();
        let unknown: Vec<_> = readme_env.difference(&cli_env).collect();
        assert!(
            undocumented.is_empty(),
            "variables missing from README's tables: {undocumented:?}"
        );
        assert!(
            unknown.is_empty(),
            "README's tables name variables skyline lacks: {unknown:?}"
        );
    }

    #[test]
    fn go_booleans_are_accepted() {
        for (text, value) in [
            ("true", true),
            ("T", true),
            ("1", true),
            ("false", false),
            ("F", false),
            ("0", false),
        ] {
            assert_eq!(parse_go_bool(text), Ok(value));
        }
        assert!(parse_go_bool("yes").is_err());
    }
}
