//! `skyline node-cache`: NodeLocal DNSCache's `node-cache` command line, run by skyline. It
//! fills the node-local-dns ConfigMap's Corefile template as node-cache does ([`template`]),
//! writes it to `-conf`, and starts the server exactly as `skyline --corefile` does, with the
//! node-local set-up of `crate::nodelocal` for the `-localip` addresses: the interface and the
//! NOTRACK rules made at start, checked and restored every `-syncinterval`, and torn down at
//! exit unless `-skipteardown`. The template and the kube-dns ConfigMap are followed: a change
//! rewrites the Corefile and reloads it as SIGHUP does. docs/node-local.md, "Replacing
//! node-cache", says how to swap an installation.

mod flags;
mod template;

use crate::cli::Cli;
use crate::nodelocal::Upkeep;
pub use flags::{FlagError, NodeCacheFlags};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
pub use template::{KubeDnsConfig, Pillars, TemplateError};

/// Where node-cache looks for the kube-dns ConfigMap when `-kubednscm` is not given.
const DEFAULT_KUBE_DNS_CONFIG: &str = "/etc/kube-dns";

/// Why `skyline node-cache` could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NodeCacheError {
    /// The base Corefile cannot be filled.
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// The filled Corefile cannot be written to `-conf`.
    #[error("cannot write the Corefile {path}: {source}")]
    Write {
        /// `-conf`.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Runs `skyline node-cache` with `args` (the program's name first, `node-cache` removed).
pub fn main(args: Vec<std::ffi::OsString>) -> ExitCode {
    let args = args.into_iter().skip(1).map(|a| a.to_string_lossy().into_owned());
    let flags = match NodeCacheFlags::parse(args) {
        Ok(flags) => flags,
        Err(FlagError::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("skyline node-cache: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    crate::init_logging(false);
    if !flags.without_effect.is_empty() {
        tracing::info!(
            flags = %flags.without_effect.join(" "),
            "node-cache flags accepted that change nothing for skyline"
        );
    }
    let corefile = match NodeCacheCorefile::new(&flags) {
        Ok(corefile) => corefile,
        Err(e) => {
            eprintln!("skyline node-cache: {e}");
            return ExitCode::FAILURE;
        }
    };
    let kube_dns = corefile.kube_dns_config().unwrap_or_default();
    let base = match corefile.write(&kube_dns) {
        Ok(base) => base,
        Err(e) => {
            eprintln!("skyline node-cache: {e}");
            return ExitCode::FAILURE;
        }
    };
    let cli = match Cli::try_parse_skydns(server_args(&flags)) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let upkeep = Upkeep {
        check_every: Some(flags.sync_interval),
        keep_on_exit: flags.skip_teardown,
        owned: true,
    };
    let follow = corefile.follow(flags.sync_interval, base, kube_dns);
    crate::serve(&cli, upkeep, Some(Box::pin(follow)))
}

/// node-cache's usage, with the flags skyline takes.
const USAGE: &str = "\
Usage: skyline node-cache -localip IP[,IP...] [flags]
Runs skyline as NodeLocal DNSCache's node-cache: fills the Corefile template's __PILLAR__
placeholders, writes it to -conf and serves it, setting up the interface and NOTRACK rules.
  -localip IP,...          addresses to listen on and set up (required)
  -conf FILE               the Corefile written and served (default /etc/Corefile)
  -basecorefile FILE       the template (default /etc/coredns/Corefile.base)
  -upstreamsvc NAME        Service whose cluster IP is __PILLAR__CLUSTER__DNS__ (default kube-dns)
  -kubednscm DIR           the kube-dns ConfigMap's directory (default /etc/kube-dns if present)
  -setupinterface=BOOL     make the dummy interface (default true)
  -interfacename NAME      its name (default nodelocaldns)
  -setupiptables=BOOL      install the NOTRACK rules, iptables or nftables (default true)
  -skipteardown            leave the interface and rules at exit
  -syncinterval DURATION   how often they and the ConfigMaps are checked (default 60s)
  -dns.port PORT           the DNS port (default 53)
  -pidfile FILE            write the process ID there
  -resolvconf FILE         the node's resolv.conf (default /etc/resolv.conf)
  -health-port, -metrics-listen-address, -setupebtables, -initialdelay, -quiet: accepted,
                           no effect (the Corefile's health and prometheus serve skyline's)";

/// The server's own command line for what `flags` ask: the Corefile written, the local
/// addresses (node-cache's `bind` of every block), the node-local set-up, and `--reuse-port` so
/// that a surge pod serves beside the one it replaces.
fn server_args(flags: &NodeCacheFlags) -> Vec<String> {
    let addrs: Vec<String> = flags
        .local_ips
        .iter()
        .map(|ip| SocketAddr::new(*ip, flags.port).to_string())
        .collect();
    let mut args = vec![
        "skyline".to_owned(),
        "--corefile".to_owned(),
        flags.corefile.display().to_string(),
        "--addr".to_owned(),
        addrs.join(","),
        "--reuse-port".to_owned(),
    ];
    if flags.setup_interface {
        args.extend(["--setup-interface".to_owned(), flags.interface.clone()]);
    }
    if flags.setup_rules {
        args.push("--setup-notrack".to_owned());
    }
    if let Some(path) = &flags.pid_file {
        args.extend(["--pid-file".to_owned(), path.display().to_string()]);
    }
    args
}

/// The Corefile node-cache writes: its template, what fills it, and where it goes.
#[derive(Debug, Clone)]
struct NodeCacheCorefile {
    base: PathBuf,
    target: PathBuf,
    pillars: Pillars,
    kube_dns_dir: Option<PathBuf>,
}

impl NodeCacheCorefile {
    /// Looks up the cluster IP of `-upstreamsvc` and where the kube-dns ConfigMap is.
    fn new(flags: &NodeCacheFlags) -> Result<NodeCacheCorefile, NodeCacheError> {
        let base = read_base(&flags.base_corefile)?;
        let variable = service_host_variable(&flags.upstream_service);
        let mut cluster_dns = std::env::var(&variable)
            .ok()
            .and_then(|v| v.trim().parse::<IpAddr>().ok());
        if cluster_dns.is_none() && base.contains(template::CLUSTER_DNS) {
            match cluster_ip_from_api(&flags.upstream_service) {
                Ok(ip) => {
                    tracing::info!(service = %flags.upstream_service, %ip, "{variable} is not set: the cluster IP is the API server's");
                    cluster_dns = Some(ip);
                }
                Err(why) => {
                    return Err(TemplateError::NoClusterIp {
                        service: flags.upstream_service.clone(),
                        variable,
                        why,
                    }
                    .into())
                }
            }
        }
        let kube_dns_dir = flags.kube_dns_config.clone().or_else(|| {
            let default = Path::new(DEFAULT_KUBE_DNS_CONFIG);
            default.is_dir().then(|| default.to_owned())
        });
        Ok(NodeCacheCorefile {
            base: flags.base_corefile.clone(),
            target: flags.corefile.clone(),
            pillars: Pillars {
                cluster_dns,
                local_ips: flags.local_ips_spaced(),
                port: flags.port,
                resolv_conf: flags.resolv_conf.clone(),
            },
            kube_dns_dir,
        })
    }

    /// The kube-dns ConfigMap as mounted now; `None` when there is none or it cannot be taken
    /// (logged: node-cache then keeps what it had).
    fn kube_dns_config(&self) -> Option<KubeDnsConfig> {
        let dir = self.kube_dns_dir.as_ref()?;
        KubeDnsConfig::read(dir)
            .inspect_err(|e| tracing::error!(error = %e, "the kube-dns ConfigMap is not taken"))
            .ok()
    }

    /// Fills the template with `kube_dns` and writes the Corefile (aside, then renamed, so that
    /// a reload never reads half of it); the template's text, to notice its changes.
    fn write(&self, kube_dns: &KubeDnsConfig) -> Result<String, NodeCacheError> {
        let base = read_base(&self.base)?;
        let filled = template::fill(&base, &self.pillars, kube_dns)?;
        let write = |source| NodeCacheError::Write {
            path: self.target.clone(),
            source,
        };
        let mut aside = self.target.clone().into_os_string();
        aside.push(".skyline-new");
        std::fs::write(&aside, &filled).map_err(write)?;
        std::fs::rename(&aside, &self.target).map_err(write)?;
        tracing::info!(
            corefile = %self.target.display(),
            stub_domains = kube_dns.stub_domains.len(),
            upstreams = %if kube_dns.upstream_nameservers.is_empty() {
                self.pillars.resolv_conf.display().to_string()
            } else {
                kube_dns.upstream_nameservers.join(" ")
            },
            "Corefile written from {}",
            self.base.display()
        );
        Ok(base)
    }

    /// Every `every`, reads the template and the kube-dns ConfigMap again; when either changed,
    /// rewrites the Corefile and has this process reload it, as SIGHUP does (the server's
    /// handler is installed before this runs). `base` and `kube_dns` are what was written.
    async fn follow(self, every: Duration, mut base: String, mut kube_dns: KubeDnsConfig) {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let now_base = match read_base(&self.base) {
                Ok(text) => text,
                Err(e) => {
                    tracing::error!(error = %e, "the base Corefile is not taken");
                    continue;
                }
            };
            let now_kube_dns = match &self.kube_dns_dir {
                Some(_) => self.kube_dns_config().unwrap_or_else(|| kube_dns.clone()),
                None => KubeDnsConfig::default(),
            };
            if now_base == base && now_kube_dns == kube_dns {
                continue;
            }
            match self.write(&now_kube_dns) {
                Ok(written) => {
                    base = written;
                    kube_dns = now_kube_dns;
                    let hangup = skyline_dataplane::sys::Signal::Hangup;
                    if let Err(e) = skyline_dataplane::sys::send_signal(std::process::id(), hangup) {
                        tracing::error!(error = %e, "the rewritten Corefile cannot be reloaded");
                    }
                }
                Err(e) => tracing::error!(error = %e, "the Corefile is kept as it was"),
            }
        }
    }
}

fn read_base(path: &Path) -> Result<String, TemplateError> {
    std::fs::read_to_string(path).map_err(|source| TemplateError::Read {
        path: path.to_owned(),
        source,
    })
}

/// How long the API server may take to name the upstream Service's cluster IP at start.
const API_TIMEOUT: Duration = Duration::from_secs(10);

/// The cluster IP of the Service `service` in this pod's namespace (the service account's, or
/// the kubeconfig context's), from the API server reached as the Kubernetes source reaches it;
/// why not, said in words.
fn cluster_ip_from_api(service: &str) -> Result<IpAddr, String> {
    use k8s_openapi::api::core::v1::Service;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let options = skyline_controlplane::kubernetes::KubernetesOptions::default();
        let (client, server) = options.client().await.map_err(|e| e.to_string())?;
        let namespace = client.default_namespace().to_owned();
        let services: kube::Api<Service> = kube::Api::namespaced(client, &namespace);
        let found = tokio::time::timeout(API_TIMEOUT, services.get(service))
            .await
            .map_err(|_| format!("{server} did not answer within {API_TIMEOUT:?}"))?
            .map_err(|e| format!("{server}: {e}"))?;
        let ip = found.spec.and_then(|spec| spec.cluster_ip).unwrap_or_default();
        ip.parse()
            .map_err(|_| format!("Service {namespace}/{service} has no cluster IP ({ip:?})"))
    })
}

/// The environment variable Kubernetes gives every pod for a Service of its namespace that
/// existed when the pod started: `kube-dns-upstream` is `KUBE_DNS_UPSTREAM_SERVICE_HOST`.
fn service_host_variable(service: &str) -> String {
    format!("{}_SERVICE_HOST", service.replace('-', "_").to_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_variable_is_the_one_kubernetes_injects() {
        assert_eq!(
            service_host_variable("kube-dns-upstream"),
            "KUBE_DNS_UPSTREAM_SERVICE_HOST"
        );
        assert_eq!(service_host_variable("kube-dns"), "KUBE_DNS_SERVICE_HOST");
    }

    #[test]
    fn the_server_runs_the_written_corefile_on_the_local_addresses_with_the_set_up() {
        let flags = NodeCacheFlags::parse(
            [
                "-localip",
                "169.254.20.10,10.96.0.10",
                "-conf",
                "/run/Corefile",
                "-setupiptables=false",
            ]
            .map(str::to_owned),
        )
        .unwrap();
        assert_eq!(
            server_args(&flags),
            [
                "skyline",
                "--corefile",
                "/run/Corefile",
                "--addr",
                "169.254.20.10:53,10.96.0.10:53",
                "--reuse-port",
                "--setup-interface",
                "nodelocaldns"
            ]
        );
        let cli = Cli::try_parse_skydns(server_args(&flags)).unwrap();
        assert_eq!(cli.corefile, Some(PathBuf::from("/run/Corefile")));
    }
}
