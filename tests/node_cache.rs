//! `skyline node-cache` in NodeLocal DNSCache's place: the upstream-shaped manifest of
//! `deploy/node-local/nodelocaldns.yaml`, and the real binary run with that manifest's command
//! line and ConfigMap in network namespaces these tests make (each test runs itself again inside
//! one, so that its stand-ins bind there): the cluster DNS (the kube-dns pods behind
//! `kube-dns-upstream`, and behind the kube-dns Service IP through a DNAT rule as kube-proxy
//! makes it), the node's resolver named by a test resolv.conf, and a stub domain's server are
//! recorders on loopback addresses; queries are made with `dig`. Needs root, `ip`, `nft`,
//! `iptables` and `dig`; under CI=true their absence fails the tests, elsewhere they skip.
//!
//! The ConfigMap's Corefile uses `force_tcp` and `loop`, which the Corefile front end takes once
//! the forwarder's support for them is in; every test here that runs the ConfigMap needs it.

mod common;

use hickory_proto::op::{Message, MessageType, ResponseCode};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{RData, Record, RecordType};
use serde_yaml_ng::Value;
use skyline_dataplane::sys::{send_signal, Signal};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const MANIFEST: &str = "deploy/node-local/nodelocaldns.yaml";
/// Set in the environment of the test run again inside a namespace.
const IN_NAMESPACE: &str = "SKYLINE_NODE_CACHE_TEST_NAMESPACE";

/// The installation's values, as its instructions `sed` them into the manifest.
const DNS_DOMAIN: &str = "cluster.local";
const LOCAL_DNS: &str = "169.254.20.10";
/// The kube-dns Service IP (`__PILLAR__DNS__SERVER__`), which the cache serves too.
const DNS_SERVER: &str = "10.96.0.10";
/// The kube-dns pods: `KUBE_DNS_UPSTREAM_SERVICE_HOST`, and where kube-proxy sends the kube-dns
/// Service IP when the cache does not hold it.
const KUBE_DNS: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 10);
/// The node's resolver, the only nameserver of the test resolv.conf.
const NODE_RESOLVER: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 20);
/// A stub domain's server, named by the kube-dns ConfigMap.
const STUB_SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 30);
const INTERFACE: &str = "nodelocaldns";
const SYNC: Duration = Duration::from_secs(1);

fn manifests() -> Vec<Value> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(MANIFEST)).unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("each document parses"))
        .filter(|doc: &Value| !doc.is_null())
        .collect()
}

fn of_kind<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"].as_str() == Some(kind) && d["metadata"]["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no {kind} {name} in {MANIFEST}"))
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_sequence()
        .map(|s| s.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

/// The installation's step: the three placeholders the instructions replace with `sed`.
fn installed(text: &str) -> String {
    text.replace("__PILLAR__DNS__DOMAIN__", DNS_DOMAIN)
        .replace("__PILLAR__LOCAL__DNS__", LOCAL_DNS)
        .replace("__PILLAR__DNS__SERVER__", DNS_SERVER)
}

/// The node-local-dns ConfigMap's Corefile template, as installed.
fn configmap_corefile() -> String {
    let docs = manifests();
    let configmap = of_kind(&docs, "ConfigMap", "node-local-dns");
    installed(
        configmap["data"]["Corefile"]
            .as_str()
            .expect("the ConfigMap has a Corefile"),
    )
}

/// The DaemonSet container's command line, as installed.
fn daemonset_command() -> Vec<String> {
    let docs = manifests();
    let daemonset = of_kind(&docs, "DaemonSet", "node-local-dns");
    let container = &daemonset["spec"]["template"]["spec"]["containers"][0];
    strings(&container["command"])
        .into_iter()
        .chain(strings(&container["args"]))
        .map(|a| installed(&a))
        .collect()
}

#[test]
fn the_manifest_is_kubernetes_own_with_skyline_node_cache_in_the_container() {
    let docs = manifests();
    of_kind(&docs, "ServiceAccount", "node-local-dns");
    let upstream = of_kind(&docs, "Service", "kube-dns-upstream");
    assert_eq!(upstream["spec"]["selector"]["k8s-app"].as_str(), Some("kube-dns"));
    let metrics = of_kind(&docs, "Service", "node-local-dns");
    assert_eq!(metrics["spec"]["clusterIP"].as_str(), Some("None"));
    let daemonset = of_kind(&docs, "DaemonSet", "node-local-dns");
    let pod = &daemonset["spec"]["template"]["spec"];
    assert_eq!(pod["hostNetwork"].as_bool(), Some(true));
    assert_eq!(pod["serviceAccountName"].as_str(), Some("node-local-dns"));
    let container = &pod["containers"][0];
    assert_eq!(container["name"].as_str(), Some("node-cache"));
    assert_eq!(strings(&container["command"]), ["/usr/local/bin/skyline", "node-cache"]);
    assert_eq!(
        strings(&container["args"]),
        [
            "-localip",
            "__PILLAR__LOCAL__DNS__,__PILLAR__DNS__SERVER__",
            "-conf",
            "/etc/Corefile",
            "-upstreamsvc",
            "kube-dns-upstream",
            "-pidfile",
            "/tmp/node-cache.pid"
        ]
    );
    let ports: Vec<(u64, String)> = container["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["containerPort"].as_u64().unwrap(),
                p["protocol"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        ports,
        [(53, "UDP".to_owned()), (53, "TCP".to_owned()), (9253, "TCP".to_owned())]
    );
    let probe = &container["livenessProbe"]["httpGet"];
    assert_eq!(
        (probe["path"].as_str(), probe["port"].as_u64(), probe["host"].as_str()),
        (Some("/health"), Some(8080), Some("__PILLAR__LOCAL__DNS__"))
    );
    let capabilities = strings(&container["securityContext"]["capabilities"]["add"]);
    assert_eq!(capabilities, ["NET_ADMIN"]);
    let mounts: Vec<(&str, &str)> = container["volumeMounts"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|m| (m["name"].as_str().unwrap(), m["mountPath"].as_str().unwrap()))
        .collect();
    for mount in [
        ("config-volume", "/etc/coredns"),
        ("kube-dns-config", "/etc/kube-dns"),
        ("xtables-lock", "/run/xtables.lock"),
    ] {
        assert!(mounts.contains(&mount), "{mount:?} not in {mounts:?}");
    }
    // node-cache reads its template from /etc/coredns/Corefile.base, the ConfigMap's key.
    let config = pod["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|v| v["name"].as_str() == Some("config-volume"))
        .unwrap();
    assert_eq!(config["configMap"]["items"][0]["path"].as_str(), Some("Corefile.base"));
}

/// The template filled as node-cache fills the rest (the kube-dns-upstream IP, the node's
/// resolv.conf, every local address in `bind`) runs: `--check-config --corefile` accepts it and
/// serves what node-cache would. Needs the forwarder's `force_tcp` and `loop`.
#[test]
fn the_configmaps_corefile_with_its_pillars_filled_passes_check_config() {
    let dir = tempfile::tempdir().unwrap();
    let resolv = dir.path().join("resolv.conf");
    std::fs::write(&resolv, format!("nameserver {NODE_RESOLVER}\n")).unwrap();
    let filled = configmap_corefile()
        .replace("__PILLAR__CLUSTER__DNS__", &KUBE_DNS.to_string())
        .replace("__PILLAR__UPSTREAM__SERVERS__", &resolv.display().to_string());
    assert!(!filled.contains("__PILLAR__"), "{filled}");
    let corefile = dir.path().join("Corefile");
    std::fs::write(&corefile, &filled).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_skyline"))
        .arg("--check-config")
        .arg("--corefile")
        .arg(&corefile)
        .env_remove("SKYLINE_RESOLV_CONF")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    for expected in [LOCAL_DNS, DNS_SERVER, "cluster.local", &KUBE_DNS.to_string()] {
        assert!(text.contains(expected), "{expected:?} not in the settings:\n{text}");
    }
}

/// `skyline node-cache -h` prints the usage; a flag neither node-cache nor CoreDNS has is
/// refused with Go's message and exit status 2, before anything is set up.
#[test]
fn the_command_line_is_refused_as_node_cache_refuses_it() {
    let out = Command::new(env!("CARGO_BIN_EXE_skyline"))
        .args(["node-cache", "-h"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("-localip"));
    let out = Command::new(env!("CARGO_BIN_EXE_skyline"))
        .args(["node-cache", "-localip", LOCAL_DNS, "-nosuchflag"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("flag provided but not defined: -nosuchflag"));
}

/// Without `KUBE_DNS_UPSTREAM_SERVICE_HOST` (a pod started before the Service), the cluster IP
/// of `-upstreamsvc` comes from the API server, in the kubeconfig context's namespace.
#[test]
fn without_the_service_variable_the_cluster_ip_comes_from_the_api_server() {
    let api = TcpListener::bind("127.0.0.1:0").unwrap();
    let api_addr = api.local_addr().unwrap();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&requests);
    std::thread::spawn(move || {
        for stream in api.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
                head.push(byte[0]);
            }
            let line = String::from_utf8_lossy(&head)
                .lines()
                .next()
                .unwrap_or_default()
                .to_owned();
            let found = line.starts_with("GET /api/v1/namespaces/kube-system/services/kube-dns-upstream ");
            seen.lock().unwrap().push(line);
            let (status, body) = if found {
                (
                    "200 OK",
                    r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"kube-dns-upstream","namespace":"kube-system"},"spec":{"clusterIP":"10.96.0.77"}}"#,
                )
            } else {
                (
                    "404 Not Found",
                    r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}"#,
                )
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: http://{api_addr}\n\
             users:\n- name: fake\n  user: {{}}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n\
             \x20   namespace: kube-system\ncurrent-context: fake\n"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("Corefile.base"),
        ".:53 {\n    forward . __PILLAR__CLUSTER__DNS__\n}\n",
    )
    .unwrap();
    let corefile = dir.path().join("Corefile");
    let port = common::free_port().to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_skyline"))
        .args(["node-cache", "-localip", "127.0.0.1", "-dns.port", &port])
        .args([
            "-setupinterface=false",
            "-setupiptables=false",
            "-upstreamsvc",
            "kube-dns-upstream",
        ])
        .arg("-basecorefile")
        .arg(dir.path().join("Corefile.base"))
        .arg("-conf")
        .arg(&corefile)
        .env_clear()
        .env("KUBECONFIG", &kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let written = loop {
        let text = std::fs::read_to_string(&corefile).unwrap_or_default();
        if !text.is_empty() {
            break text;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let mut log = String::new();
            child.stderr.take().unwrap().read_to_string(&mut log).unwrap();
            panic!("node-cache exited with {status}: {log}");
        }
        assert!(Instant::now() < deadline, "no Corefile written");
        std::thread::sleep(Duration::from_millis(50));
    };
    common::stop_child(&mut child, "skyline node-cache");
    assert_eq!(written, ".:53 {\n    forward . 10.96.0.77\n}\n");
    assert!(
        requests
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.contains("/namespaces/kube-system/services/kube-dns-upstream")),
        "{:?}",
        requests.lock().unwrap()
    );
}

// ---- in network namespaces ----

fn can_run() -> bool {
    common::can_use_namespaces(&[
        ("ip", "iproute2"),
        ("nft", "nftables"),
        ("iptables", "iptables"),
        ("dig", "bind9-dnsutils"),
    ])
}

/// Runs the test `name` again in a namespace of its own: see [`common::inside_a_namespace`].
fn inside_a_namespace(name: &str) -> bool {
    common::inside_a_namespace(name, IN_NAMESPACE, can_run)
}

/// Runs `command`, failing the test unless it succeeds; its standard output.
fn must(command: &mut Command) -> String {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn succeeds(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A DNS server that answers every A question with its own address, over UDP and TCP, and
/// records what it was asked.
struct Recorder {
    asked: Arc<Mutex<Vec<(String, &'static str)>>>,
}

impl Recorder {
    fn start(ip: Ipv4Addr) -> Recorder {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let udp = UdpSocket::bind((ip, 53)).unwrap();
        let tcp = TcpListener::bind((ip, 53)).unwrap();
        let log = Arc::clone(&asked);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok((len, from)) = udp.recv_from(&mut buf) {
                if let Some(reply) = answer(ip, &buf[..len], &log, "udp") {
                    let _ = udp.send_to(&reply, from);
                }
            }
        });
        let log = Arc::clone(&asked);
        std::thread::spawn(move || {
            for stream in tcp.incoming() {
                let Ok(mut stream) = stream else { continue };
                let log = Arc::clone(&log);
                std::thread::spawn(move || loop {
                    let mut len = [0u8; 2];
                    if stream.read_exact(&mut len).is_err() {
                        return;
                    }
                    let mut query = vec![0u8; usize::from(u16::from_be_bytes(len))];
                    if stream.read_exact(&mut query).is_err() {
                        return;
                    }
                    let Some(reply) = answer(ip, &query, &log, "tcp") else {
                        return;
                    };
                    let mut framed = (reply.len() as u16).to_be_bytes().to_vec();
                    framed.extend_from_slice(&reply);
                    if stream.write_all(&framed).is_err() {
                        return;
                    }
                });
            }
        });
        Recorder { asked }
    }

    /// The transports the name was asked over, in order.
    fn asked(&self, name: &str) -> Vec<&'static str> {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        self.asked
            .lock()
            .unwrap()
            .iter()
            .filter(|(n, _)| *n == name)
            .map(|(_, t)| *t)
            .collect()
    }
}

fn answer(
    ip: Ipv4Addr,
    query: &[u8],
    log: &Mutex<Vec<(String, &'static str)>>,
    transport: &'static str,
) -> Option<Vec<u8>> {
    let query = Message::from_vec(query).ok()?;
    let question = query.queries().first()?.clone();
    let name = question.name().to_ascii().trim_end_matches('.').to_ascii_lowercase();
    log.lock().unwrap().push((name, transport));
    let mut reply = Message::new();
    reply
        .set_id(query.id())
        .set_message_type(MessageType::Response)
        .set_recursion_desired(query.recursion_desired())
        .set_recursion_available(true)
        .set_response_code(ResponseCode::NoError)
        .add_query(question.clone());
    if question.query_type() == RecordType::A {
        reply.add_answer(Record::from_rdata(question.name().clone(), 30, RData::A(A(ip))));
    }
    reply.to_vec().ok()
}

/// How the node keeps its packet filter rules, which decides where skyline puts its own.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Rules {
    Iptables,
    Nftables,
}

/// The node inside the namespace: the stand-ins on loopback, kube-proxy's DNAT of the kube-dns
/// Service IP to the kube-dns pods, the node's resolv.conf, the ConfigMaps' files.
struct Node {
    dir: tempfile::TempDir,
    kube_dns: Recorder,
    resolver: Recorder,
    stub: Recorder,
    rules: Rules,
    started: u32,
}

impl Node {
    fn new(rules: Rules, corefile: &str) -> Node {
        for ip in [KUBE_DNS, NODE_RESOLVER, STUB_SERVER] {
            must(Command::new("ip").args(["addr", "add", &format!("{ip}/32"), "dev", "lo"]));
        }
        // The node's uplink: a route for the kube-dns Service IP once the cache lets it go,
        // which kube-proxy's DNAT then sends to the kube-dns pods.
        must(Command::new("ip").args(["link", "add", "uplink0", "type", "veth", "peer", "name", "uplink1"]));
        must(Command::new("ip").args(["link", "set", "uplink0", "up"]));
        must(Command::new("ip").args(["link", "set", "uplink1", "up"]));
        must(Command::new("ip").args(["route", "add", "default", "dev", "uplink0"]));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("resolv.conf"), format!("nameserver {NODE_RESOLVER}\n")).unwrap();
        std::fs::write(dir.path().join("Corefile.base"), corefile).unwrap();
        std::fs::create_dir(dir.path().join("kube-dns")).unwrap();
        let to = format!("{KUBE_DNS}:53");
        match rules {
            Rules::Iptables => {
                for proto in ["udp", "tcp"] {
                    must(Command::new("iptables").args([
                        "-t",
                        "nat",
                        "-A",
                        "OUTPUT",
                        "-d",
                        DNS_SERVER,
                        "-p",
                        proto,
                        "--dport",
                        "53",
                        "-j",
                        "DNAT",
                        "--to-destination",
                        &to,
                    ]));
                }
            }
            Rules::Nftables => {
                let script = format!(
                    "table ip kube_proxy {{\n  chain output {{\n    type nat hook output priority -100; policy accept;\n    \
                     ip daddr {DNS_SERVER} udp dport 53 dnat to {to}\n    ip daddr {DNS_SERVER} tcp dport 53 dnat to {to}\n  }}\n}}\n"
                );
                let mut nft = Command::new("nft")
                    .args(["-f", "-"])
                    .stdin(Stdio::piped())
                    .spawn()
                    .unwrap();
                nft.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
                assert!(nft.wait().unwrap().success());
            }
        }
        Node {
            dir,
            kube_dns: Recorder::start(KUBE_DNS),
            resolver: Recorder::start(NODE_RESOLVER),
            stub: Recorder::start(STUB_SERVER),
            rules,
            started: 0,
        }
    }

    /// Starts `skyline node-cache` with the DaemonSet's command line, the files of this node,
    /// and `extra` flags.
    fn start(&mut self, extra: &[&str]) -> NodeCache {
        self.started += 1;
        let command = daemonset_command();
        assert_eq!(command[..2], ["/usr/local/bin/skyline", "node-cache"]);
        let path = |name: &str| self.dir.path().join(name).display().to_string();
        let log = self.dir.path().join(format!("node-cache-{}.log", self.started));
        let child = Command::new(env!("CARGO_BIN_EXE_skyline"))
            .args(&command[1..])
            .args(["-basecorefile", &path("Corefile.base")])
            .args(["-conf", &path("Corefile")])
            .args(["-kubednscm", &path("kube-dns")])
            .args(["-resolvconf", &path("resolv.conf")])
            .args(["-pidfile", &path(&format!("node-cache-{}.pid", self.started))])
            .arg(format!("-syncinterval={}s", SYNC.as_secs()))
            .args(extra)
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("KUBE_DNS_UPSTREAM_SERVICE_HOST", KUBE_DNS.to_string())
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        NodeCache { child, log }
    }

    /// Whether the interface holds both local addresses and is up.
    fn interface_set_up(&self) -> bool {
        let Ok(out) = Command::new("ip")
            .args(["-o", "addr", "show", "dev", INTERFACE])
            .output()
        else {
            return false;
        };
        let text = String::from_utf8_lossy(&out.stdout);
        out.status.success() && text.contains(&format!("{LOCAL_DNS}/32")) && text.contains(&format!("{DNS_SERVER}/32"))
    }

    fn interface_exists(&self) -> bool {
        succeeds("ip", &["link", "show", "dev", INTERFACE])
    }

    /// Whether every NOTRACK rule for both local addresses is in place, where this node keeps
    /// its rules.
    fn rules_set_up(&self) -> bool {
        match self.rules {
            Rules::Iptables => [LOCAL_DNS, DNS_SERVER].iter().all(|ip| {
                ["udp", "tcp"].iter().all(|proto| {
                    succeeds(
                        "iptables",
                        &[
                            "-t",
                            "raw",
                            "-C",
                            "PREROUTING",
                            "-p",
                            proto,
                            "-d",
                            ip,
                            "--dport",
                            "53",
                            "-j",
                            "NOTRACK",
                        ],
                    ) && succeeds(
                        "iptables",
                        &[
                            "-t", "raw", "-C", "OUTPUT", "-p", proto, "-s", ip, "--sport", "53", "-j", "NOTRACK",
                        ],
                    ) && succeeds(
                        "iptables",
                        &[
                            "-t", "filter", "-C", "INPUT", "-p", proto, "-d", ip, "--dport", "53", "-j", "ACCEPT",
                        ],
                    )
                })
            }),
            Rules::Nftables => {
                let out = Command::new("nft")
                    .args(["list", "table", "inet", "skyline_nodelocaldns"])
                    .output()
                    .unwrap();
                let text = String::from_utf8_lossy(&out.stdout);
                out.status.success() && text.matches(" notrack").count() == 6 && text.contains(DNS_SERVER)
            }
        }
    }

    /// Whether any of the rules is left.
    fn any_rule_left(&self) -> bool {
        match self.rules {
            Rules::Iptables => {
                let saved = must(&mut Command::new("iptables-save"));
                saved.contains("NOTRACK") || saved.contains(&format!("{LOCAL_DNS}/32"))
            }
            Rules::Nftables => succeeds("nft", &["list", "table", "inet", "skyline_nodelocaldns"]),
        }
    }

    /// Removes the rules by hand, as an operator or another agent on the node might.
    fn remove_rules_by_hand(&self) {
        match self.rules {
            Rules::Iptables => must(Command::new("iptables").args([
                "-t",
                "raw",
                "-D",
                "PREROUTING",
                "-p",
                "udp",
                "-d",
                LOCAL_DNS,
                "--dport",
                "53",
                "-j",
                "NOTRACK",
            ])),
            Rules::Nftables => must(Command::new("nft").args(["delete", "table", "inet", "skyline_nodelocaldns"])),
        };
    }
}

/// A running `skyline node-cache`, killed on drop; its log is printed when the test fails.
struct NodeCache {
    child: Child,
    log: PathBuf,
}

impl NodeCache {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until `name` is answered with `expected` on `server`.
    fn wait_answer(&mut self, server: &str, name: &str, expected: Ipv4Addr) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let answer = dig(server, name);
            if answer == [expected.to_string()] {
                return;
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("skyline node-cache exited with {status}; log:\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "{name} on {server}: {answer:?}, not {expected}; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGTERM, then the exit status within the grace period.
    fn terminate(&mut self) -> std::process::ExitStatus {
        send_signal(self.child.id(), Signal::Terminate).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "no exit after SIGTERM; log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for NodeCache {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            eprintln!("skyline node-cache log:\n{}", self.log());
        }
    }
}

/// `dig +short` for an A record, from inside the namespace.
fn dig(server: &str, name: &str) -> Vec<String> {
    let out = Command::new("dig")
        .args(["+short", "+time=1", "+tries=1", &format!("@{server}"), name, "A"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .filter(|l| !l.starts_with(';'))
        .collect()
}

fn eventually(limit: Duration, what: &str, cache: &NodeCache, check: impl Fn() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(
            Instant::now() < deadline,
            "not within {limit:?}: {what}; log:\n{}",
            cache.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The whole life of one node-cache on a node whose rules live in `rules`, with `corefile`
/// as the ConfigMap's template.
fn serves_restores_and_tears_down(rules: Rules, corefile: &str) {
    let mut node = Node::new(rules, corefile);
    let mut cache = node.start(&[]);

    // Both local addresses answer: cluster names from the kube-dns pods (over TCP, the
    // template's force_tcp), other names from the node's resolver of the test resolv.conf.
    for (i, server) in [LOCAL_DNS, DNS_SERVER].iter().enumerate() {
        let cluster = format!("web{i}.default.svc.cluster.local");
        cache.wait_answer(server, &cluster, KUBE_DNS);
        if corefile.contains("force_tcp") {
            assert_eq!(
                node.kube_dns.asked(&cluster),
                ["tcp"],
                "{cluster} reached the kube-dns pods once, over TCP"
            );
        }
        let outside = format!("www{i}.example.org");
        cache.wait_answer(server, &outside, NODE_RESOLVER);
        assert!(!node.resolver.asked(&outside).is_empty());
        assert!(
            node.kube_dns.asked(&outside).is_empty(),
            "{outside} went to the cluster DNS"
        );
    }
    assert!(node.interface_set_up(), "{}", cache.log());
    assert!(
        node.rules_set_up(),
        "the NOTRACK rules are not in {rules:?}; log:\n{}",
        cache.log()
    );
    let written = std::fs::read_to_string(node.dir.path().join("Corefile")).unwrap();
    assert!(written.contains(&format!("forward . {KUBE_DNS}")), "{written}");
    assert!(!written.contains("__PILLAR__"), "{written}");

    // Removed by hand, both come back within a sync interval (and a check's own time).
    must(Command::new("ip").args(["link", "del", "dev", INTERFACE]));
    node.remove_rules_by_hand();
    assert!(!node.rules_set_up());
    eventually(
        SYNC * 2 + Duration::from_secs(1),
        "the interface restored",
        &cache,
        || node.interface_set_up(),
    );
    eventually(SYNC * 2 + Duration::from_secs(1), "the rules restored", &cache, || {
        node.rules_set_up()
    });
    cache.wait_answer(LOCAL_DNS, "after-restore.example.org", NODE_RESOLVER);

    // At exit both go, and the kube-dns Service IP reaches the cluster DNS again.
    let status = cache.terminate();
    assert!(status.success(), "{status}; log:\n{}", cache.log());
    assert!(!node.interface_exists(), "the interface is left; log:\n{}", cache.log());
    assert!(!node.any_rule_left(), "rules are left; log:\n{}", cache.log());
    let after = "after-teardown.default.svc.cluster.local";
    assert_eq!(dig(DNS_SERVER, after), [KUBE_DNS.to_string()]);
    assert_eq!(
        node.kube_dns.asked(after),
        ["udp"],
        "the query went to the kube-dns pods, through kube-proxy's DNAT"
    );
}

#[test]
fn node_cache_on_an_iptables_node_serves_restores_and_tears_down_its_rules_there() {
    if inside_a_namespace("node_cache_on_an_iptables_node_serves_restores_and_tears_down_its_rules_there") {
        serves_restores_and_tears_down(Rules::Iptables, &configmap_corefile());
    }
}

#[test]
fn node_cache_on_an_nftables_node_serves_restores_and_tears_down_its_table() {
    if inside_a_namespace("node_cache_on_an_nftables_node_serves_restores_and_tears_down_its_table") {
        serves_restores_and_tears_down(Rules::Nftables, &configmap_corefile());
    }
}

fn skipteardown_keeps(corefile: &str) {
    let mut node = Node::new(Rules::Nftables, corefile);
    let mut cache = node.start(&["-skipteardown"]);
    cache.wait_answer(LOCAL_DNS, "www.example.org", NODE_RESOLVER);
    let status = cache.terminate();
    assert!(status.success(), "{status}");
    assert!(node.interface_set_up(), "-skipteardown keeps the interface");
    assert!(node.rules_set_up(), "-skipteardown keeps the rules");
}

#[test]
fn with_skipteardown_the_interface_and_rules_outlive_the_process() {
    if inside_a_namespace("with_skipteardown_the_interface_and_rules_outlive_the_process") {
        skipteardown_keeps(&configmap_corefile());
    }
}

fn follows_stub_domains(corefile: &str) {
    let mut node = Node::new(Rules::Nftables, corefile);
    let mut cache = node.start(&[]);
    cache.wait_answer(LOCAL_DNS, "before.corp.example", NODE_RESOLVER);
    assert!(node.stub.asked("before.corp.example").is_empty());
    std::fs::write(
        node.dir.path().join("kube-dns").join("stubDomains"),
        format!(r#"{{"corp.example": ["{STUB_SERVER}"]}}"#),
    )
    .unwrap();
    // Within a sync interval (and the reload it sets off) the stub domain goes to its server.
    let deadline = Instant::now() + SYNC * 3 + Duration::from_secs(2);
    let mut n = 0;
    loop {
        let name = format!("n{n}.corp.example");
        if dig(LOCAL_DNS, &name) == [STUB_SERVER.to_string()] {
            assert!(!node.stub.asked(&name).is_empty());
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the stub domain is not followed; log:\n{}",
            cache.log()
        );
        n += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    let written = std::fs::read_to_string(node.dir.path().join("Corefile")).unwrap();
    assert!(written.contains("corp.example:53 {"), "{written}");
    // Names outside the stub domain still go to the node's resolver.
    cache.wait_answer(LOCAL_DNS, "still.example.org", NODE_RESOLVER);
}

#[test]
fn the_kube_dns_configmaps_stub_domains_are_followed_from_its_directory() {
    if inside_a_namespace("the_kube_dns_configmaps_stub_domains_are_followed_from_its_directory") {
        follows_stub_domains(&configmap_corefile());
    }
}

/// Queries sent by [`load`] and what became of them.
#[derive(Debug, Default)]
struct Tally {
    sent: usize,
    answered: usize,
    lost: Vec<(f64, SocketAddr)>,
}

/// Sends `rate` queries a second, each from a fresh socket (a stub resolver's new flow),
/// alternating over `targets`, for names that are all cache misses; a query without its reply
/// within 2 s is lost.
fn load(targets: Vec<SocketAddr>, rate: u32, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Tally> {
    std::thread::spawn(move || {
        let start = Instant::now();
        let interval = Duration::from_secs(1) / rate;
        let mut next = start;
        let mut tally = Tally::default();
        let mut pending: Vec<(UdpSocket, u16, Instant, SocketAddr)> = Vec::new();
        let mut buf = [0u8; 4096];
        let mut n: u32 = 0;
        loop {
            let now = Instant::now();
            let stopping = stop.load(Ordering::Relaxed);
            if stopping && pending.is_empty() {
                return tally;
            }
            if !stopping && now >= next {
                let socket = UdpSocket::bind("0.0.0.0:0").unwrap();
                socket.set_nonblocking(true).unwrap();
                let target = targets[n as usize % targets.len()];
                let id = n as u16;
                let query = common::query(&format!("q{n}.surge.example.org"), RecordType::A, None);
                let mut query = query;
                query.set_id(id);
                tally.sent += 1;
                match socket.send_to(&query.to_vec().unwrap(), target) {
                    Ok(_) => pending.push((socket, id, now, target)),
                    Err(_) => tally.lost.push(((now - start).as_secs_f64(), target)),
                }
                n += 1;
                next += interval;
            }
            pending.retain(|(socket, id, sent, target)| {
                if let Ok(len) = socket.recv(&mut buf) {
                    if len >= 2 && u16::from_be_bytes([buf[0], buf[1]]) == *id {
                        tally.answered += 1;
                        return false;
                    }
                }
                if now.duration_since(*sent) > Duration::from_secs(2) {
                    tally.lost.push(((*sent - start).as_secs_f64(), *target));
                    return false;
                }
                true
            });
            std::thread::sleep(Duration::from_micros(200));
        }
    })
}

/// A DaemonSet update by surge on one node: the new pod's node-cache starts beside the old one
/// (both serve the local addresses), the old one gets SIGTERM and exits; under a steady load of
/// cache misses to both addresses no query goes unanswered, and the interface and rules stay
/// for the new one.
fn surge_loses_no_query(corefile: &str) {
    let mut node = Node::new(Rules::Nftables, corefile);
    let mut old = node.start(&[]);
    old.wait_answer(LOCAL_DNS, "warm.example.org", NODE_RESOLVER);
    old.wait_answer(DNS_SERVER, "warm.example.org", NODE_RESOLVER);
    let targets: Vec<SocketAddr> = [LOCAL_DNS, DNS_SERVER]
        .iter()
        .map(|ip| SocketAddr::new(ip.parse().unwrap(), 53))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let load = load(targets, 1000, Arc::clone(&stop));
    std::thread::sleep(Duration::from_secs(1));
    let mut new = node.start(&[]);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        new.child.try_wait().unwrap().is_none(),
        "the new node-cache could not start; log:\n{}",
        new.log()
    );
    let status = old.terminate();
    assert!(
        status.success(),
        "the old node-cache exited with {status}; log:\n{}",
        old.log()
    );
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    let tally = load.join().unwrap();
    eprintln!("{tally:?}");
    assert!(tally.sent > 3000, "too few queries to tell: {tally:?}");
    assert!(
        tally.lost.is_empty(),
        "{} of {} queries unanswered: {:?}",
        tally.lost.len(),
        tally.sent,
        tally.lost
    );
    assert_eq!(tally.answered, tally.sent);
    assert!(
        node.interface_set_up(),
        "the old pod's exit took the interface from the new one"
    );
    assert!(
        node.rules_set_up(),
        "the old pod's exit took the rules from the new one"
    );
    new.wait_answer(DNS_SERVER, "after.example.org", NODE_RESOLVER);
}

#[test]
fn a_surge_update_under_load_loses_no_query() {
    if inside_a_namespace("a_surge_update_under_load_loses_no_query") {
        surge_loses_no_query(&configmap_corefile());
    }
}
