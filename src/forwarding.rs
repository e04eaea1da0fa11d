//! Forwarding and the response cache: the resolution of their settings (declared in
//! [`crate::settings`], the `[forward]` and `[cache]` tables) into the data plane's
//! [`ForwardConfig`], and the stub zones learnt from records.

use crate::flag_value::NO_RESOLV_CONF;
use crate::settings::{Cache, Forward};
use crate::stub_zone::{health_check, Ask};
use skyline_controlplane::etcd::SourceHealth;
use skyline_dataplane::cache::CacheConfig;
use skyline_dataplane::forward::{
    resolv_conf, Acl, ForwardConfig, ForwardOptions, Forwarding, StubZone, Tls, TlsError, Transport,
};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Where nameservers are read from when none are configured.
pub const DEFAULT_RESOLV_CONF: &str = "/etc/resolv.conf";

/// Why forwarding cannot be set up: a resolv.conf that gives no upstream, or TLS upstreams
/// without a usable name or CA file. For the file the operator named it stops the start
/// (or the reload); for the default one it is a warning, since a host without resolv.conf is
/// an ordinary place to serve only the zones.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResolvConfError {
    /// The file cannot be read (missing, a directory, not permitted).
    #[error("forward.resolv_conf (--resolv-conf): resolv.conf {path} cannot be read: {source}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file has no nameserver line, or names only skyline's own addresses.
    #[error("forward.resolv_conf (--resolv-conf): resolv.conf {path} lists no nameserver (other than skyline's own addresses)")]
    NoNameserver {
        /// The file.
        path: PathBuf,
    },
    /// The CA file of a set of TLS upstreams cannot be read.
    #[error("{set}: tls_ca {path} cannot be read: {source}")]
    TlsCa {
        /// `forward`, or the stub zone.
        set: String,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A set of TLS upstreams cannot be set up (its server name, its CA file's contents).
    #[error("{set}: {source}")]
    Tls {
        /// `forward`, or the stub zone.
        set: String,
        /// Why.
        source: TlsError,
    },
}

/// Forwarding as resolved, with what a start should warn about: the default resolv.conf
/// giving no upstream, so that names outside the zones are refused.
#[derive(Debug)]
pub struct Resolved {
    /// `None` when nothing is forwarded.
    pub config: Option<ForwardConfig>,
    /// Why the default resolv.conf gave no upstream, when it was read and did not.
    pub default_unusable: Option<ResolvConfError>,
}

/// The options of the default resolvers from the `[forward]` settings.
fn options(forward: &Forward) -> ForwardOptions {
    ForwardOptions {
        policy: forward.policy,
        max_fails: forward.max_fails,
        health_check: forward.health_check.map(|interval| {
            health_check(
                interval,
                forward.health_check_no_rec,
                forward.health_check_domain.clone(),
            )
        }),
        except: forward.except.clone(),
        max_concurrent: forward.max_concurrent,
    }
}

/// The data plane's transport for a set of upstreams asked as `ask`, named `set` in errors;
/// reads the CA file.
fn transport(ask: &Ask, set: &str) -> Result<Transport, ResolvConfError> {
    if !ask.tls {
        return Ok(if ask.force_tcp {
            Transport::ForceTcp
        } else {
            Transport::PreferUdp
        });
    }
    let ca = ask
        .tls_ca
        .as_ref()
        .map(|path| {
            std::fs::read(path).map_err(|source| ResolvConfError::TlsCa {
                set: set.to_owned(),
                path: path.clone(),
                source,
            })
        })
        .transpose()?;
    let tls = Tls::new(ask.tls_servername.as_deref(), ca.as_deref()).map_err(|source| ResolvConfError::Tls {
        set: set.to_owned(),
        source,
    })?;
    Ok(Transport::Tls(Arc::new(tls)))
}

/// The SkyDNS settings that decide forwarding, already stacked (flags, file, data, defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stacked {
    /// Configured nameservers; empty means "read resolv.conf".
    pub nameservers: Vec<SocketAddr>,
    /// Labels a name needs before it is forwarded.
    pub ndots: u32,
    /// Never forward.
    pub no_rec: bool,
    /// Rotate over the nameservers.
    pub ns_rotate: bool,
    /// SkyDNS `read_timeout` from `/<prefix>/config`, if set.
    pub read_timeout: Option<Duration>,
    /// The addresses skyline listens on, never taken as its own upstream.
    pub listen: Vec<SocketAddr>,
}

/// Resolves the forwarding configuration: `config` is `None` when nothing is to be forwarded
/// (`no_rec`, or no nameserver configured nor listed in resolv.conf). `read_file` reads
/// resolv.conf. A resolv.conf given explicitly (anything but [`NO_RESOLV_CONF`]) that cannot
/// be read or lists no nameserver is an error: falling back to refusing every name outside the
/// zones would hide the mistake.
pub fn forward_config(
    forward: &Forward,
    cache: &Cache,
    stacked: &Stacked,
    read_file: impl FnOnce(&Path) -> std::io::Result<String>,
) -> Result<Resolved, ResolvConfError> {
    if stacked.no_rec {
        return Ok(Resolved {
            config: None,
            default_unusable: None,
        });
    }
    let mut default_unusable = None;
    let upstreams = if !stacked.nameservers.is_empty() {
        stacked.nameservers.clone()
    } else {
        match forward.resolv_conf.as_deref() {
            Some(path) if path == Path::new(NO_RESOLV_CONF) => Vec::new(),
            Some(path) => upstreams_of(path, read_file, &stacked.listen)?,
            None => upstreams_of(Path::new(DEFAULT_RESOLV_CONF), read_file, &stacked.listen).unwrap_or_else(|e| {
                default_unusable = Some(e);
                Vec::new()
            }),
        }
    };
    let ask = Ask {
        force_tcp: forward.force_tcp,
        tls: forward.tls,
        tls_servername: forward.tls_servername.clone(),
        tls_ca: forward.tls_ca.clone(),
    };
    let stub_zones = forward
        .stub_zones
        .iter()
        .map(|s| {
            Ok(StubZone {
                zone: s.zone.clone(),
                servers: s.servers.clone(),
                options: s.options.clone(),
                transport: transport(&s.ask, &format!("forward.stub_zones {}", s.zone))?,
            })
        })
        .collect::<Result<Vec<_>, ResolvConfError>>()?;
    let config = ForwardConfig {
        transport: if upstreams.is_empty() {
            Transport::PreferUdp
        } else {
            transport(&ask, "forward.tls")?
        },
        upstreams,
        options: options(forward),
        loop_detect: forward.loop_detect,
        stub_zones,
        expire: forward.expire,
        rotate: stacked.ns_rotate,
        ndots: stacked.ndots,
        timeout: forward
            .timeout
            .or(stacked.read_timeout)
            .unwrap_or(ForwardConfig::default().timeout),
        max_in_flight: forward.max_in_flight,
        max_in_flight_per_client: forward.max_in_flight_per_client,
        acl: forward.recursion_acl.clone().map(Acl::new).unwrap_or_default(),
        cache: CacheConfig {
            max_bytes: cache.size,
            min_ttl: cache.min_ttl,
            max_ttl: cache.max_ttl,
            negative_max_ttl: cache.negative_ttl,
            negative_zone_caps: cache.negative_ttl_zones.clone(),
            stale_for: cache.serve_stale,
            prefetch: cache.prefetch,
            success_zone_caps: cache.success_ttl_zones.clone(),
            keep_ttl: cache.keep_ttl,
        },
    };
    Ok(Resolved {
        config: config.is_enabled().then_some(config),
        default_unusable,
    })
}

/// The nameservers `path` lists, less the addresses skyline listens on (it must not forward
/// to itself); none is an error.
fn upstreams_of(
    path: &Path,
    read_file: impl FnOnce(&Path) -> std::io::Result<String>,
    listen: &[SocketAddr],
) -> Result<Vec<SocketAddr>, ResolvConfError> {
    let text = read_file(path).map_err(|source| ResolvConfError::Unreadable {
        path: path.to_owned(),
        source,
    })?;
    let upstreams: Vec<SocketAddr> = resolv_conf::nameservers(&text)
        .into_iter()
        .filter(|ns| !listen.contains(ns))
        .collect();
    if upstreams.is_empty() {
        return Err(ResolvConfError::NoNameserver { path: path.to_owned() });
    }
    Ok(upstreams)
}

/// How often the stub zones read from records are looked at.
const STUB_RECORDS_POLL: Duration = Duration::from_secs(1);

/// Hands the stub zones the etcd source reads from `dns/stub/` records to the data plane
/// whenever they change; runs until the runtime stops.
pub async fn follow_stub_records(source: Arc<SourceHealth>, zones: Forwarding) {
    let mut applied: Option<Arc<Vec<skyline_controlplane::etcd::StubZone>>> = None;
    loop {
        let current = source.stub_zones();
        if applied.as_ref().is_none_or(|a| !Arc::ptr_eq(a, &current)) {
            zones.set_learnt_stubs(
                current
                    .iter()
                    .map(|z| StubZone::new(z.zone.clone(), z.nameservers.clone()))
                    .collect(),
            );
            if applied.is_some() || !current.is_empty() {
                tracing::info!(zones = current.len(), "stub zones from records in force");
            }
            applied = Some(current);
        }
        tokio::time::sleep(STUB_RECORDS_POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{CacheArgs, CacheFile, ForwardArgs, ForwardFile};
    use skyline_dataplane::forward::{HealthCheck, Policy, Prefix};
    use skyline_dataplane::wire::Name;

    fn stacked(nameservers: &[&str]) -> Stacked {
        Stacked {
            nameservers: nameservers.iter().map(|n| n.parse().unwrap()).collect(),
            ndots: 2,
            no_rec: false,
            ns_rotate: true,
            read_timeout: None,
            listen: vec!["127.0.0.1:53".parse().unwrap()],
        }
    }

    /// Forwarding from the flags `args` and `cache_args` over the `[forward]` and `[cache]`
    /// tables `forward` and `cache`.
    fn resolve(
        args: &(ForwardArgs, CacheArgs),
        forward: Option<&str>,
        cache: Option<&str>,
        s: &Stacked,
    ) -> Option<ForwardConfig> {
        let forward: Option<ForwardFile> = forward.map(|t| crate::settings::parse_group(t, ForwardFile::take).unwrap());
        let cache: Option<CacheFile> = cache.map(|t| crate::settings::parse_group(t, CacheFile::take).unwrap());
        let mut problems = Vec::new();
        let dir = Path::new("/etc/skyline");
        let forward = Forward::merge(&args.0, forward.as_ref(), dir, &mut problems);
        let cache = Cache::merge(&args.1, cache.as_ref(), dir, &mut problems);
        assert_eq!(problems, []);
        forward_config(&forward, &cache, s, |_| {
            Ok("nameserver 127.0.0.1\nnameserver 10.0.0.53\n".to_owned())
        })
        .unwrap()
        .config
    }

    fn missing(_: &Path) -> std::io::Result<String> {
        Err(std::io::ErrorKind::NotFound.into())
    }

    fn given_resolv_conf(path: &str) -> Forward {
        let args = ForwardArgs {
            resolv_conf: Some(PathBuf::from(path)),
            ..ForwardArgs::default()
        };
        Forward::merge(&args, None, Path::new(""), &mut Vec::new())
    }

    fn defaults() -> (Forward, Cache) {
        let dir = Path::new("");
        (
            Forward::merge(&ForwardArgs::default(), None, dir, &mut Vec::new()),
            Cache::merge(&CacheArgs::default(), None, dir, &mut Vec::new()),
        )
    }

    #[test]
    fn configured_nameservers_are_the_upstreams_with_private_acl_and_default_cache() {
        let c = resolve(&Default::default(), None, None, &stacked(&["192.0.2.1:53"])).unwrap();
        assert_eq!(c.upstreams, ["192.0.2.1:53".parse().unwrap()]);
        assert_eq!(c.acl, Acl::default());
        assert_eq!(c.cache, CacheConfig::default());
        assert_eq!((c.ndots, c.rotate, c.timeout), (2, true, Duration::from_millis(1500)));
    }

    #[test]
    fn without_nameservers_resolv_conf_is_read_minus_our_own_address() {
        let c = resolve(&Default::default(), None, None, &stacked(&[])).unwrap();
        assert_eq!(c.upstreams, ["10.0.0.53:53".parse().unwrap()]);
        let (forward, cache) = defaults();
        let none = forward_config(&forward, &cache, &stacked(&[]), missing).unwrap();
        assert!(none.config.is_none(), "no upstream anywhere: nothing to forward to");
        assert!(
            matches!(none.default_unusable, Some(ResolvConfError::Unreadable { ref path, .. }) if path == Path::new(DEFAULT_RESOLV_CONF)),
            "the missing default is reported for a warning: {:?}",
            none.default_unusable
        );
    }

    #[test]
    fn a_given_resolv_conf_that_is_missing_or_lists_no_nameserver_is_an_error() {
        let (_, cache) = defaults();
        let forward = given_resolv_conf("/etc/skyline/resolv.conf");
        let err = forward_config(&forward, &cache, &stacked(&[]), missing).unwrap_err();
        assert!(matches!(err, ResolvConfError::Unreadable { .. }), "{err}");
        assert!(err.to_string().contains("/etc/skyline/resolv.conf"), "{err}");
        let empty = forward_config(&forward, &cache, &stacked(&[]), |_| Ok("search example.\n".to_owned()));
        assert!(matches!(empty, Err(ResolvConfError::NoNameserver { .. })), "{empty:?}");
        let only_ours = forward_config(&forward, &cache, &stacked(&[]), |_| {
            Ok("nameserver 127.0.0.1\n".to_owned())
        });
        assert!(
            matches!(only_ours, Err(ResolvConfError::NoNameserver { .. })),
            "{only_ours:?}"
        );
        let configured = forward_config(&forward, &cache, &stacked(&["192.0.2.1:53"]), missing).unwrap();
        assert!(
            configured.config.is_some(),
            "with nameservers set, resolv.conf is not read"
        );
    }

    #[test]
    fn resolv_conf_none_reads_no_file_and_forwards_only_stub_zones() {
        let (_, cache) = defaults();
        let forward = given_resolv_conf(NO_RESOLV_CONF);
        let unread = |_: &Path| -> std::io::Result<String> { panic!("no file is read") };
        let resolved = forward_config(&forward, &cache, &stacked(&[]), unread).unwrap();
        assert!(resolved.config.is_none());
        assert!(resolved.default_unusable.is_none());
    }

    #[test]
    fn no_rec_turns_forwarding_off() {
        let s = Stacked {
            no_rec: true,
            ..stacked(&["192.0.2.1:53"])
        };
        assert!(resolve(&Default::default(), None, None, &s).is_none());
    }

    #[test]
    fn flags_beat_the_file_and_the_file_beats_the_defaults() {
        let forward =
            "recursion_acl = [\"10.0.0.0/8\"]\ntimeout = \"2s\"\nmax_in_flight = 64\nmax_in_flight_per_client = 8\n\
                       [[stub_zones]]\nzone = \"corp.example.\"\nservers = [\"10.1.1.1:53\"]\n";
        let cache = "size = \"1MiB\"\nmin_ttl = 5\nnegative_ttl = 60\nserve_stale = 0\nprefetch = false\n\
                     [negative_ttl_zones]\n\"svc.example.\" = 2\n";
        let from_file = resolve(
            &Default::default(),
            Some(forward),
            Some(cache),
            &stacked(&["192.0.2.1:53"]),
        )
        .unwrap();
        assert_eq!(from_file.acl.prefixes(), ["10.0.0.0/8".parse::<Prefix>().unwrap()]);
        assert_eq!(
            (
                from_file.timeout,
                from_file.max_in_flight,
                from_file.max_in_flight_per_client
            ),
            (Duration::from_secs(2), 64, 8)
        );
        assert_eq!(
            from_file.stub_zones[0].zone,
            Name::from_dotted("corp.example.").unwrap()
        );
        assert_eq!((from_file.cache.max_bytes, from_file.cache.min_ttl), (1 << 20, 5));
        assert_eq!((from_file.cache.negative_max_ttl, from_file.cache.stale_for), (60, 0));
        assert!(!from_file.cache.prefetch);
        assert_eq!(from_file.cache.negative_zone_caps[0].1, 2);

        let args = (
            ForwardArgs {
                timeout: Some(Duration::from_millis(700)),
                recursion_acl: Some(vec!["0.0.0.0/0".parse().unwrap()]),
                ..ForwardArgs::default()
            },
            CacheArgs {
                size: Some(4096),
                ..CacheArgs::default()
            },
        );
        let from_flags = resolve(&args, Some(forward), Some(cache), &stacked(&["192.0.2.1:53"])).unwrap();
        assert_eq!(from_flags.timeout, Duration::from_millis(700));
        assert_eq!(from_flags.cache.max_bytes, 4096);
        assert!(from_flags.acl.allows("8.8.8.8".parse().unwrap()));
    }

    /// The `[forward]` options reach the nameservers' set and a stub zone table's own keys
    /// its set, each key left out there taking its default rather than the table's.
    #[test]
    fn the_options_of_each_set_of_upstreams_come_from_their_own_table() {
        let table = r#"
            policy = "round_robin"
            max_fails = 2
            health_check = "250ms"
            health_check_no_rec = true
            except = ["internal.example."]
            max_concurrent = 100
            loop_detect = true
            [[stub_zones]]
            zone = "corp.example."
            servers = ["10.1.0.53:53"]
            policy = "sequential"
            health_check = "1s"
            health_check_domain = "corp.example."
        "#;
        let c = resolve(&Default::default(), Some(table), None, &stacked(&["10.0.0.53:53"])).unwrap();
        let name = |s: &str| Name::from_dotted(s).unwrap();
        assert_eq!(
            c.options,
            ForwardOptions {
                policy: Policy::RoundRobin,
                max_fails: 2,
                health_check: Some(HealthCheck {
                    interval: Duration::from_millis(250),
                    recursion_desired: false,
                    domain: Name::root(),
                }),
                except: vec![name("internal.example.")],
                max_concurrent: 100,
            }
        );
        assert!(c.loop_detect);
        assert_eq!(
            c.stub_zones[0].options,
            ForwardOptions {
                policy: Policy::Sequential,
                health_check: Some(HealthCheck {
                    interval: Duration::from_secs(1),
                    recursion_desired: true,
                    domain: name("corp.example."),
                }),
                ..ForwardOptions::default()
            }
        );
        let bad = r#"
            [[stub_zones]]
            zone = "corp.example."
            servers = ["10.1.0.53:53"]
            policy = "least_used"
        "#;
        let forward: ForwardFile = crate::settings::parse_group(bad, ForwardFile::take).unwrap();
        let mut problems = Vec::new();
        Forward::merge(&ForwardArgs::default(), Some(&forward), Path::new(""), &mut problems);
        assert!(problems[0].to_string().contains("least_used"), "{problems:?}");
    }

    #[test]
    fn each_set_of_upstreams_is_asked_its_own_way() {
        let ca = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/dataplane/src/forward/transport/test-ca.pem"
        );
        let forward = format!(
            "force_tcp = true\nexpire = \"3s\"\n\
             [[stub_zones]]\nzone = \"cluster.local.\"\nservers = [\"10.1.1.1:53\"]\n\
             [[stub_zones]]\nzone = \"dot.example.\"\nservers = [\"tls://10.1.1.2\"]\n\
             tls_servername = \"dns.example\"\ntls_ca = \"{ca}\"\n"
        );
        let c = resolve(&Default::default(), Some(&forward), None, &stacked(&["192.0.2.1:53"])).unwrap();
        assert_eq!(c.transport, Transport::ForceTcp);
        assert_eq!(c.expire, Duration::from_secs(3));
        assert_eq!(
            c.stub_zones[0].transport,
            Transport::PreferUdp,
            "a stub zone does not inherit"
        );
        assert!(matches!(c.stub_zones[1].transport, Transport::Tls(_)));
        assert_eq!(c.stub_zones[1].servers, ["10.1.1.2:853".parse::<SocketAddr>().unwrap()]);

        let missing_ca = "tls = true\ntls_ca = \"/nonexistent/ca.pem\"\n";
        let args = Default::default();
        let forward: ForwardFile = crate::settings::parse_group(missing_ca, ForwardFile::take).unwrap();
        let forward = Forward::merge(&args, Some(&forward), Path::new(""), &mut Vec::new());
        let (_, cache) = defaults();
        let err = forward_config(&forward, &cache, &stacked(&["192.0.2.1:853"]), missing).unwrap_err();
        assert!(matches!(err, ResolvConfError::TlsCa { .. }), "{err}");
    }

    #[test]
    fn skydns_read_timeout_sets_the_budget_when_nothing_else_does() {
        let s = Stacked {
            read_timeout: Some(Duration::from_secs(3)),
            ..stacked(&["192.0.2.1:53"])
        };
        assert_eq!(
            resolve(&Default::default(), None, None, &s).unwrap().timeout,
            Duration::from_secs(3)
        );
    }

    #[test]
    fn the_example_configuration_resolves() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/skyline-full.toml");
        let file = crate::settings::FileConfig::load(&path).unwrap();
        let mut problems = Vec::new();
        let forward = Forward::merge(&ForwardArgs::default(), file.forward.as_ref(), &file.dir, &mut problems);
        let cache = Cache::merge(&CacheArgs::default(), file.cache.as_ref(), &file.dir, &mut problems);
        assert_eq!(problems, []);
        let c = forward_config(&forward, &cache, &stacked(&["8.8.8.8:53"]), missing)
            .unwrap()
            .config
            .unwrap();
        assert_eq!(c.stub_zones.len(), 1);
        assert_eq!(c.cache.max_bytes, 64 << 20);
        assert_eq!(c.acl, Acl::default(), "the example spells out the default");
    }

    #[test]
    fn unknown_keys_in_the_tables_are_rejected() {
        assert!(crate::settings::parse_group("timeuot = \"1s\"", ForwardFile::take).is_err());
        assert!(crate::settings::parse_group("sise = \"1MiB\"", CacheFile::take).is_err());
    }
}
