//! `skyline kube2etcd`: mirrors the cluster's DNS records from the API server into etcd as
//! SkyDNS records (the writer is `skyline_controlplane::kube2etcd`). Its etcd and Kubernetes
//! options are the server's own declarations; the options that make no sense for records in
//! etcd are refused by name.

use crate::flag_value::{parse_addr, parse_domain};
use crate::settings::{EtcdArgs, Kubernetes, KubernetesArgs};
use clap::{CommandFactory, FromArgMatches, Parser};
use skyline_controlplane::etcd::EtcdOptions;
use skyline_controlplane::http::HttpServer;
use skyline_controlplane::kube2etcd::{Kube2Etcd, Layout, WriterOptions};
use skyline_controlplane::kubernetes::KubernetesOptions;
use skyline_dataplane::snapshot::kubernetes as model;
use skyline_dataplane::wire::Name;
use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use tokio::signal::unix::{signal, SignalKind};

/// skyline kube2etcd: writes the Kubernetes cluster's DNS records into etcd as SkyDNS records,
/// so that skyline, SkyDNS or CoreDNS's etcd plugin reading that etcd answer the cluster's
/// names. Run several replicas: one leads (an etcd lease), the others wait.
#[derive(Debug, Clone, Parser)]
#[command(name = "skyline kube2etcd", bin_name = "skyline kube2etcd", version)]
pub struct Kube2EtcdCli {
    /// etcd to write to.
    #[command(flatten)]
    pub etcd: EtcdArgs,

    /// The cluster domain: records go under /<prefix>/<domain reversed>/svc/
    /// [default: cluster.local.]
    #[arg(long, value_parser = parse_domain)]
    pub domain: Option<Name>,

    /// First element of every key [default: skydns]
    #[arg(long, value_name = "PREFIX")]
    pub path_prefix: Option<String>,

    /// etcd election name of the replicas [default: /kube2etcd/<prefix>/<domain>]
    #[arg(long, value_name = "KEY")]
    pub election: Option<String>,

    /// Name this replica campaigns with [default: <hostname>-<pid>]
    #[arg(long, value_name = "NAME")]
    pub identity: Option<String>,

    /// Seconds a leader that died keeps the leadership [default: 10]
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(i64).range(2..=3600))]
    pub lease_ttl: Option<i64>,

    /// Keys written per etcd transaction at most; etcd refuses more than its --max-txn-ops
    /// [default: 128]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub txn_ops: Option<u32>,

    /// etcd transactions per second at most [default: 200]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub txn_rate: Option<u32>,

    /// IP:port to serve /health, /ready and /metrics on [default: none]
    #[arg(long, value_name = "IP:PORT", value_parser = parse_addr)]
    pub http_addr: Option<SocketAddr>,

    /// Log at debug level (otherwise RUST_LOG, default info)
    #[arg(long, short)]
    pub verbose: bool,

    /// The cluster and what its records are made of.
    #[command(flatten)]
    pub kubernetes: KubernetesArgs,
}

/// Why kube2etcd could not start.
#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("{0} does not apply to records in etcd")]
    Inapplicable(&'static str),
    #[error("--kubernetes-ttl {0} is above {max}", max = model::MAX_TTL)]
    Ttl(u32),
    #[error("no etcd endpoint given (--machines, ETCD_MACHINES)")]
    NoMachines,
    #[error(transparent)]
    Start(#[from] skyline_controlplane::kube2etcd::StartError),
    #[error(transparent)]
    Http(#[from] skyline_controlplane::http::HttpError),
    #[error("cannot start the runtime or install signal handlers: {0}")]
    Runtime(std::io::Error),
}

/// Runs `skyline kube2etcd` with `args` (the program's name first, `kube2etcd` removed).
pub fn main(args: Vec<std::ffi::OsString>) -> ExitCode {
    let cli = parse(args).unwrap_or_else(|e| e.exit());
    crate::init_logging(cli.verbose);
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("skyline kube2etcd: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The Kubernetes flags of the server that make no sense for records in etcd: hidden from
/// `--help`, which lists only what kube2etcd takes, and refused by name when given.
const INAPPLICABLE: &[&str] = &[
    "kubernetes_zones",
    "kubernetes_pods",
    "kubernetes_fallthrough",
    "kubernetes_openshift_names",
    "kubernetes_autopath",
    "kubernetes_autopath_search",
];

/// Parses kube2etcd's command line.
fn parse(args: Vec<std::ffi::OsString>) -> Result<Kube2EtcdCli, clap::Error> {
    let command = INAPPLICABLE.iter().fold(Kube2EtcdCli::command(), |command, id| {
        command.mut_arg(*id, |arg| arg.hide(true))
    });
    Kube2EtcdCli::from_arg_matches(&command.try_get_matches_from(args)?)
}

fn run(cli: &Kube2EtcdCli) -> Result<(), Error> {
    let k = &cli.kubernetes;
    for (given, flag) in [
        (k.zones.is_some(), "--kubernetes-zones (the zone is --domain)"),
        (k.pods.is_some(), "--kubernetes-pods"),
        (k.fallthrough.is_some(), "--kubernetes-fallthrough"),
        (k.openshift_names.is_some(), "--kubernetes-openshift-names"),
        (k.autopath.is_some(), "--kubernetes-autopath"),
        (k.autopath_search.is_some(), "--kubernetes-autopath-search"),
    ] {
        if given {
            return Err(Error::Inapplicable(flag));
        }
    }
    let k = Kubernetes::merge(k, None, Path::new(""), &mut Vec::new());
    let ttl = k.ttl;
    if ttl > model::MAX_TTL {
        return Err(Error::Ttl(ttl));
    }
    let domain = cli
        .domain
        .clone()
        .unwrap_or_else(|| Name::from_dotted("cluster.local.").expect("a valid name"));
    let prefix = cli.path_prefix.clone().unwrap_or_else(|| "skydns".to_owned());
    let config = model::Config {
        zones: vec![domain.clone()],
        ttl,
        endpoint_pod_names: k.endpoint_pod_names,
        ignore_empty_service: k.ignore_empty_service,
        namespaces: k.namespaces.unwrap_or_default(),
        ..model::Config::default()
    };
    let options = KubernetesOptions {
        kubeconfig: k.kubeconfig,
        context: k.context,
        endpoint: k.endpoint,
        labels: k.labels,
        namespace_labels: k.namespace_labels,
        noendpoints: k.noendpoints,
        pods: false,
        qps: k.apiserver_qps,
    };
    let e = &cli.etcd;
    let etcd = EtcdOptions {
        endpoints: e.machines.clone().ok_or(Error::NoMachines)?,
        tls_key: e.tls_key.clone(),
        tls_pem: e.tls_pem.clone(),
        ca_cert: e.ca_cert.clone(),
        username: e.username.clone(),
        password: e.password.clone(),
        discover: false,
    };
    let writing = WriterOptions {
        txn_ops: cli.txn_ops.unwrap_or(128) as usize,
        txn_rate: cli.txn_rate.unwrap_or(200),
        lease_ttl: cli.lease_ttl.unwrap_or(10),
        election: cli
            .election
            .clone()
            .unwrap_or_else(|| format!("/kube2etcd/{prefix}/{domain}")),
        identity: cli.identity.clone().unwrap_or_else(identity),
    };
    let layout = Layout::new(&prefix, &domain, ttl, config.ignore_empty_service);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("skyline-kube2etcd")
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    runtime.block_on(async {
        let mirror = Kube2Etcd::connect(options, config, layout, &etcd, writing).await?;
        if let Some(addr) = cli.http_addr {
            let server = HttpServer::bind(addr, mirror.stats()).await?;
            tracing::info!("http on http://{}", server.local_addr());
            tokio::spawn(server.serve());
        }
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let mut terminate = signal(SignalKind::terminate()).map_err(Error::Runtime)?;
        let mut interrupt = signal(SignalKind::interrupt()).map_err(Error::Runtime)?;
        tokio::spawn(async move {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = interrupt.recv() => {}
            }
            tracing::info!("kube2etcd: stopping; the leadership is handed back");
            let _ = stop.send(true);
        });
        mirror.run(stopped).await;
        Ok(())
    })
}

/// `<hostname>-<pid>`: what etcd's election shows as the leader.
fn identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host = host.trim();
    let host = if host.is_empty() { "kube2etcd" } else { host };
    format!("{host}-{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_lists_only_the_flags_kube2etcd_takes() {
        let help = parse(vec!["skyline kube2etcd".into(), "--help".into()])
            .unwrap_err()
            .to_string();
        for refused in [
            "--kubernetes-zones",
            "--kubernetes-pods",
            "--kubernetes-fallthrough",
            "--kubernetes-openshift-names",
            "--kubernetes-autopath",
        ] {
            assert!(!help.contains(refused), "{refused} in:\n{help}");
        }
        for taken in ["--machines", "--kubeconfig", "--kubernetes-ttl", "--domain"] {
            assert!(help.contains(taken), "{taken} not in:\n{help}");
        }
        let given = parse(vec![
            "skyline kube2etcd".into(),
            "--kubernetes-pods".into(),
            "verified".into(),
        ])
        .unwrap();
        assert_eq!(
            run(&given).unwrap_err().to_string(),
            "--kubernetes-pods does not apply to records in etcd"
        );
    }
}
