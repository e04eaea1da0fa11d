//! Checks of the deployment files: the Kubernetes manifests under `deploy/kubernetes/` (cluster
//! DNS in skyline's layout), `deploy/coredns/` (cluster DNS in CoreDNS's layout, running its
//! Corefile) and `deploy/node-local/` (the node-local cache), and the `Dockerfile`.
//!
//! Every YAML document must parse, and read back unchanged through its Kubernetes API type
//! (k8s-openapi), so that no field is misspelled, misplaced or of the wrong type. The two cluster
//! DNS directories are alternatives: each is checked together with the node-local cache, as one
//! installation, never with the other. Each container of each Deployment and DaemonSet runs the
//! image's entrypoint (named as its `command`, or left to the image); its `command` and `args` (with `$(VAR)` expanded as Kubernetes does, from
//! the container's literal `env` values and the Service variables of its namespace) must pass
//! `skyline --check-config`, run as this build's binary with that environment and with the
//! files the pod would see: each ConfigMap volume it mounts written into a temporary directory,
//! and the pod's `/etc/resolv.conf`, each named by its stand-in path wherever the command line
//! or a mounted file names it. What the check prints (the listen addresses, the HTTP addresses,
//! the drain and the forwarding timeout) is then held against the rest of the manifest: liveness
//! and readiness probes ask `/health` and `/ready` on an `--http-addr` port; Prometheus scrapes
//! an `--http-addr` port that answers beyond loopback; every container port is an `--addr` port
//! (UDP or TCP) or an HTTP port; every Service port targets one of those;
//! `terminationGracePeriodSeconds` exceeds the drain plus the forwarding timeout plus the time to
//! finish; the ClusterRole of the identity running `--kubernetes` has exactly the rules
//! docs/kubernetes.md's "Permissions" lists (CoreDNS's layout: those and CoreDNS's Endpoints
//! rule); the node-local init container configures exactly the `--addr` addresses. Each check
//! counts what it looked at and fails when that is nothing. What skyline's own layouts choose beyond CoreDNS's (a
//! PodDisruptionBudget, surging updates, probes that tolerate a busy node, a non-root user set in
//! the pod) is not asked of CoreDNS's layout, which is held to CoreDNS's objects instead.
//!
//! One test runs the node-local DaemonSet's update end to end inside a network namespace it
//! makes (the init script and skyline's command line taken from the manifest, a second skyline
//! standing in for the cluster resolvers) and counts every query sent during it. It needs root,
//! `ip` (iproute2) and `nft` (nftables); under CI=true their absence fails it, elsewhere it skips.
//!
//! The node-local NOTRACK rules are one table in three places: the init container's script,
//! docs/node-local.md (which also names every `--setup-*` flag skyline has) and what
//! `--setup-notrack` installs, compared as `nft list` shows them inside a network namespace
//! (root, `ip`, `nft`, as above).

mod common;

use serde::Deserialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// The directories whose manifests are checked, relative to the repository root.
const MANIFEST_DIRS: [&str; 3] = ["deploy/kubernetes", "deploy/coredns", "deploy/node-local"];

/// Kubernetes' own NodeLocal DNSCache manifest with `skyline node-cache` in it: its command line
/// and Corefile hold `__PILLAR__` placeholders that node-cache fills at start, so
/// `tests/node_cache.rs` checks it, filled as node-cache fills it, instead of these tests.
const NODE_CACHE_MANIFEST: &str = "deploy/node-local/nodelocaldns.yaml";

/// The directories of which a cluster applies one: both deploy cluster DNS behind the same
/// `kube-dns` Service.
const CLUSTER_DNS_DIRS: [&str; 2] = ["deploy/kubernetes", "deploy/coredns"];

/// The directory of cluster DNS in CoreDNS's layout: kubeadm's objects, names and settings.
const COREDNS_LAYOUT: &str = "deploy/coredns";

/// What skyline needs after the forwarding timeout to finish what it holds and exit.
const FINISH: Duration = Duration::from_secs(2);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One YAML document of one manifest file.
struct Doc {
    dir: &'static str,
    file: PathBuf,
    value: Value,
}

impl Doc {
    /// Whether the document belongs to CoreDNS's layout rather than one skyline designs.
    fn in_coredns_layout(&self) -> bool {
        self.dir == COREDNS_LAYOUT
    }

    fn kind(&self) -> &str {
        self.value["kind"].as_str().unwrap_or("")
    }

    fn name(&self) -> &str {
        self.value["metadata"]["name"].as_str().unwrap_or("")
    }

    fn namespace(&self) -> &str {
        self.value["metadata"]["namespace"].as_str().unwrap_or("default")
    }

    fn what(&self) -> String {
        format!(
            "{} {}/{} ({})",
            self.kind(),
            self.namespace(),
            self.name(),
            self.file.display()
        )
    }
}

/// Every document of every `.yaml`/`.yml` file under the manifest directories, in file order.
fn manifests() -> Vec<Doc> {
    manifests_in(&MANIFEST_DIRS)
}

/// What a cluster applies: the documents of every manifest directory but the cluster DNS
/// directories other than one, for each of [`CLUSTER_DNS_DIRS`].
fn installations() -> Vec<Vec<Doc>> {
    CLUSTER_DNS_DIRS
        .iter()
        .map(|chosen| {
            let dirs: Vec<&'static str> = MANIFEST_DIRS
                .into_iter()
                .filter(|dir| dir == chosen || !CLUSTER_DNS_DIRS.contains(dir))
                .collect();
            manifests_in(&dirs)
        })
        .collect()
}

/// Every document of every `.yaml`/`.yml` file under `dirs`, in file order.
fn manifests_in(dirs: &[&'static str]) -> Vec<Doc> {
    let mut docs = Vec::new();
    for &dir in dirs {
        let mut files: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .map(|entry| entry.unwrap().path())
            .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")))
            .filter(|p| !p.ends_with(NODE_CACHE_MANIFEST))
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no manifest in {dir}");
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let mut count = 0;
            for document in serde_yaml_ng::Deserializer::from_str(&text) {
                let value =
                    Value::deserialize(document).unwrap_or_else(|e| panic!("{}: not valid YAML: {e}", file.display()));
                let doc = Doc {
                    dir,
                    file: file.clone(),
                    value,
                };
                assert!(
                    doc.value.is_object(),
                    "{}: a document that is not a mapping",
                    file.display()
                );
                for field in ["apiVersion", "kind"] {
                    assert!(
                        doc.value[field].is_string(),
                        "{}: a document without {field}",
                        file.display()
                    );
                }
                assert!(
                    !doc.name().is_empty(),
                    "{}: a {} without metadata.name",
                    file.display(),
                    doc.kind()
                );
                docs.push(doc);
                count += 1;
            }
            assert!(count > 0, "{}: no document", file.display());
        }
    }
    docs
}

fn of_kind<'a>(docs: &'a [Doc], kind: &str) -> Vec<&'a Doc> {
    docs.iter().filter(|d| d.kind() == kind).collect()
}

fn workloads(docs: &[Doc]) -> Vec<&Doc> {
    docs.iter()
        .filter(|d| matches!(d.kind(), "Deployment" | "DaemonSet"))
        .collect()
}

fn pod_spec(workload: &Doc) -> &Value {
    &workload.value["spec"]["template"]["spec"]
}

fn pod_labels(workload: &Doc) -> BTreeMap<String, String> {
    string_map(&workload.value["spec"]["template"]["metadata"]["labels"])
}

fn string_map(value: &Value) -> BTreeMap<String, String> {
    value
        .as_object()
        .map(|map| {
            map.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.as_str()
                            .unwrap_or_else(|| panic!("label {k}: not a string"))
                            .to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `labels` hold every pair of `selector` (a non-empty selector).
fn selects(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

fn array(value: &Value) -> &[Value] {
    value.as_array().map(Vec::as_slice).unwrap_or(&[])
}

fn strings(value: &Value) -> Vec<String> {
    array(value)
        .iter()
        .map(|v| v.as_str().unwrap_or_else(|| panic!("{v}: not a string")).to_owned())
        .collect()
}

/// The Dockerfile's stages, each as its `FROM` line and the instructions after it (continuation
/// lines joined).
fn dockerfile_stages() -> Vec<(String, Vec<String>)> {
    let text = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    let mut instructions = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if current.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        if let Some(head) = trimmed.strip_suffix('\\') {
            current.push_str(head);
            current.push(' ');
        } else {
            current.push_str(trimmed);
            instructions.push(std::mem::take(&mut current));
        }
    }
    let mut stages: Vec<(String, Vec<String>)> = Vec::new();
    for instruction in instructions {
        if instruction.starts_with("FROM ") {
            stages.push((instruction, Vec::new()));
        } else {
            stages
                .last_mut()
                .unwrap_or_else(|| panic!("Dockerfile: {instruction:?} before any FROM"))
                .1
                .push(instruction);
        }
    }
    stages
}

/// The image's entrypoint: the exec-form `ENTRYPOINT` of the Dockerfile's last stage.
fn image_entrypoint() -> String {
    let stages = dockerfile_stages();
    let (_, last) = stages.last().expect("Dockerfile: no stage");
    let entry = last
        .iter()
        .rev()
        .find_map(|i| i.strip_prefix("ENTRYPOINT "))
        .expect("Dockerfile: the last stage has no ENTRYPOINT");
    let words: Vec<String> = serde_json::from_str(entry).expect("Dockerfile: ENTRYPOINT is not in exec (JSON) form");
    assert_eq!(
        words.len(),
        1,
        "Dockerfile: ENTRYPOINT should be the binary alone: {words:?}"
    );
    words[0].clone()
}

/// Kubernetes's `$(VAR)` expansion of command and args: a defined variable is replaced, an
/// undefined reference is left as written, `$$` is a literal `$`.
fn expand(text: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some((name, tail)) = after.strip_prefix('(').and_then(|s| s.split_once(')')) {
            match vars.get(name) {
                Some(value) => out.push_str(value),
                None => out.push_str(&format!("$({name})")),
            }
            rest = tail;
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The variables Kubernetes gives a pod for the Services of its namespace (and `kubernetes` of
/// `default`): `<NAME>_SERVICE_HOST` and `<NAME>_SERVICE_PORT`. A Service without a fixed
/// `clusterIP` gets a stand-in address from 10.96.100.0/24, distinct per Service.
fn service_variables(docs: &[Doc], namespace: &str, links: bool) -> BTreeMap<String, String> {
    let mut vars = BTreeMap::from([
        ("KUBERNETES_SERVICE_HOST".to_owned(), "10.96.0.1".to_owned()),
        ("KUBERNETES_SERVICE_PORT".to_owned(), "443".to_owned()),
    ]);
    if !links {
        return vars;
    }
    for (i, service) in of_kind(docs, "Service").into_iter().enumerate() {
        if service.namespace() != namespace {
            continue;
        }
        let prefix = service.name().to_ascii_uppercase().replace('-', "_");
        let host = service.value["spec"]["clusterIP"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| format!("10.96.100.{}", i + 1));
        vars.insert(format!("{prefix}_SERVICE_HOST"), host);
        if let Some(port) = array(&service.value["spec"]["ports"]).first() {
            vars.insert(format!("{prefix}_SERVICE_PORT"), port["port"].to_string());
        }
    }
    vars
}

/// The container's literal `env` values; variables from `valueFrom` are not known here.
fn literal_env(container: &Value) -> Vec<(String, String)> {
    array(&container["env"])
        .iter()
        .filter_map(|e| Some((e["name"].as_str()?.to_owned(), e["value"].as_str()?.to_owned())))
        .collect()
}

/// What `skyline --check-config` says a container would run with.
#[derive(Debug)]
struct Settings {
    addrs: Vec<SocketAddr>,
    /// Every `--http-addr` address: each serves /health, /ready and /metrics alike.
    http: Vec<SocketAddr>,
    drain: Duration,
    forward_timeout: Duration,
    upstreams: Vec<SocketAddr>,
    kubernetes: bool,
}

impl Settings {
    fn http_ports(&self) -> BTreeSet<u16> {
        self.http.iter().map(SocketAddr::port).collect()
    }
}

fn duration(text: &str) -> Duration {
    let number = |n: &str| n.parse::<u64>().unwrap_or_else(|_| panic!("duration {text:?}"));
    if let Some(ms) = text.strip_suffix("ms") {
        Duration::from_millis(number(ms))
    } else if let Some(s) = text.strip_suffix('s') {
        Duration::from_secs(number(s))
    } else if let Some(m) = text.strip_suffix('m') {
        Duration::from_secs(number(m) * 60)
    } else if let Some(h) = text.strip_suffix('h') {
        Duration::from_secs(number(h) * 3600)
    } else {
        panic!("duration {text:?}: no unit")
    }
}

fn socket_addrs(text: &str) -> Vec<SocketAddr> {
    text.split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.trim().parse().unwrap_or_else(|_| panic!("address {s:?}")))
        .collect()
}

/// The nameserver of the pod's resolv.conf as the test writes it.
const POD_NAMESERVER: &str = "192.0.2.53";

/// The pod's resolv.conf, which `dnsPolicy: Default` gives it from its node.
const POD_RESOLV_CONF: &str = "/etc/resolv.conf";

/// The files a container would see, made in a temporary directory: the pod's resolv.conf (not
/// this machine's), a kubeconfig standing in for the pod's service account (which this machine
/// lacks, while the check, like a start, requires a connection), and the data of each ConfigMap
/// volume it mounts. Each stands in for a path of the pod.
struct PodFiles {
    dir: tempfile::TempDir,
    resolv_conf: PathBuf,
    kubeconfig: PathBuf,
    /// `(path in the pod, path here)`, longest pod path first.
    stand_ins: Vec<(String, PathBuf)>,
}

impl PodFiles {
    fn new(docs: &[Doc], workload: &Doc, container: &Value) -> PodFiles {
        let what = format!(
            "container {} of {}",
            container["name"].as_str().unwrap_or("?"),
            workload.what()
        );
        let dir = tempfile::tempdir().unwrap();
        let resolv_conf = dir.path().join("resolv.conf");
        std::fs::write(&resolv_conf, format!("nameserver {POD_NAMESERVER}\n")).unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, "apiVersion: v1\nkind: Config\n").unwrap();
        let mut stand_ins = vec![(POD_RESOLV_CONF.to_owned(), resolv_conf.clone())];
        let volumes = array(&pod_spec(workload)["volumes"]);
        let mut mounted = Vec::new();
        for (i, mount) in array(&container["volumeMounts"]).iter().enumerate() {
            let volume = volumes
                .iter()
                .find(|v| v["name"] == mount["name"])
                .unwrap_or_else(|| panic!("{what}: mounts volume {}, which the pod lacks", mount["name"]));
            let config_map = &volume["configMap"];
            if config_map.is_null() {
                continue;
            }
            assert!(
                mount["subPath"].is_null(),
                "{what}: a ConfigMap mounted by subPath, which this test does not stand in for"
            );
            let name = config_map["name"].as_str().unwrap();
            let data = of_kind(docs, "ConfigMap")
                .into_iter()
                .find(|m| m.name() == name && m.namespace() == workload.namespace())
                .map(|m| string_map(&m.value["data"]))
                .unwrap_or_else(|| panic!("{what}: no ConfigMap {}/{name}", workload.namespace()));
            // Without items every key is a file of its own name.
            let files: Vec<(String, String)> = match config_map["items"].as_array() {
                Some(items) => items
                    .iter()
                    .map(|item| {
                        let key = item["key"].as_str().unwrap();
                        let text = data
                            .get(key)
                            .unwrap_or_else(|| panic!("{what}: ConfigMap {name} has no key {key}"));
                        (item["path"].as_str().unwrap().to_owned(), text.clone())
                    })
                    .collect(),
                None => data.into_iter().collect(),
            };
            let here = dir.path().join(format!("volume-{i}"));
            let pod_path = mount["mountPath"].as_str().unwrap().trim_end_matches('/').to_owned();
            stand_ins.push((pod_path, here.clone()));
            mounted.push((here, files));
        }
        stand_ins.sort_by_key(|(pod, _)| std::cmp::Reverse(pod.len()));
        let pod = PodFiles {
            dir,
            resolv_conf,
            kubeconfig,
            stand_ins,
        };
        // A mounted file may name another file of the pod (a Corefile its resolv.conf, an
        // import): it names the stand-in here.
        for (here, files) in mounted {
            for (path, text) in files {
                let file = here.join(&path);
                std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                std::fs::write(&file, pod.stand_in(&text)).unwrap();
            }
        }
        pod
    }

    /// `text` with every path of the pod that has a stand-in replaced by it.
    fn stand_in(&self, text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        'scan: while !rest.is_empty() {
            for (pod, here) in &self.stand_ins {
                if let Some(tail) = rest.strip_prefix(pod.as_str()) {
                    // A path, not the start of a longer name.
                    if tail.is_empty() || tail.starts_with(['/', '"', ' ', '\n', '\t', ',', '}']) {
                        out.push_str(&here.display().to_string());
                        rest = tail;
                        continue 'scan;
                    }
                }
            }
            let next = rest.chars().next().unwrap();
            out.push(next);
            rest = &rest[next.len_utf8()..];
        }
        out
    }
}

/// Runs this build's skyline with `--check-config` and the container's arguments and
/// environment (nothing of this process's environment) among the files `pod` makes, and parses
/// the settings it prints.
fn check_config(what: &str, pod: &PodFiles, args: &[String], env: &[(String, String)]) -> Settings {
    let args: Vec<String> = args.iter().map(|arg| pod.stand_in(arg)).collect();
    let run = |resolv_conf: Option<&PathBuf>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_skyline"));
        command
            .arg("--check-config")
            .args(&args)
            .env_clear()
            .env("KUBECONFIG", &pod.kubeconfig)
            .env("NO_COLOR", "1");
        if let Some(path) = resolv_conf {
            command.env("SKYLINE_RESOLV_CONF", path);
        }
        command
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output()
            .unwrap()
    };
    // A configuration that names a resolv.conf is checked with the file it names. One that
    // names none reads skyline's default, /etc/resolv.conf: the variable points that at the
    // pod's (it would override a named one, so it is not given at first).
    let mut output = run(None);
    if output.status.success() && !String::from_utf8_lossy(&output.stdout).contains("\nresolv_conf = ") {
        output = run(Some(&pod.resolv_conf));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{what}: skyline --check-config {} failed ({}):\n{stderr}{stdout}",
        args.join(" "),
        output.status
    );
    // What is printed is a configuration file; where names outside the zones go is a comment.
    let values: toml::Table = stdout
        .parse()
        .unwrap_or_else(|e| panic!("{what}: --check-config printed no TOML: {e}\n{stdout}"));
    let text = |table: &toml::Table, key: &str| -> String {
        table
            .get(key)
            .and_then(toml::Value::as_str)
            .unwrap_or_else(|| panic!("{what}: --check-config printed no {key}:\n{stdout}"))
            .to_owned()
    };
    let forwarding = stdout.lines().find_map(|line| line.strip_prefix("# forwarding to "));
    let forward = values.get("forward").and_then(toml::Value::as_table);
    if let Some(resolv_conf) = forward.and_then(|f| f.get("resolv_conf")).and_then(toml::Value::as_str) {
        assert!(
            resolv_conf == "none" || std::path::Path::new(resolv_conf).starts_with(pod.dir.path()),
            "{what}: reads {resolv_conf}, a file of this machine rather than one the pod has"
        );
    }
    let strings_of = |key: &str| -> Vec<String> {
        values
            .get(key)
            .and_then(toml::Value::as_array)
            .unwrap_or_else(|| panic!("{what}: --check-config printed no {key} list:\n{stdout}"))
            .iter()
            .map(|a| {
                a.as_str()
                    .unwrap_or_else(|| panic!("{what}: {key}: {a} is not a string"))
                    .to_owned()
            })
            .collect()
    };
    Settings {
        addrs: strings_of("addr").iter().flat_map(|a| socket_addrs(a)).collect(),
        http: if values.contains_key("http_addr") {
            strings_of("http_addr").iter().flat_map(|a| socket_addrs(a)).collect()
        } else {
            Vec::new()
        },
        drain: duration(&text(&values, "drain")),
        // Without forwarding nothing waits on an upstream.
        forward_timeout: match (forwarding, forward) {
            (Some(_), Some(forward)) => duration(&text(forward, "timeout")),
            _ => Duration::ZERO,
        },
        upstreams: forwarding.map_or_else(Vec::new, socket_addrs),
        kubernetes: values.contains_key("kubernetes"),
    }
}

/// A skyline container of a workload, with what its check said.
struct Checked<'a> {
    workload: &'a Doc,
    container: &'a Value,
    settings: Settings,
}

impl Checked<'_> {
    fn what(&self) -> String {
        format!(
            "container {} of {}",
            self.container["name"].as_str().unwrap_or("?"),
            self.workload.what()
        )
    }

    fn dns_ports(&self) -> BTreeSet<u16> {
        self.settings.addrs.iter().map(SocketAddr::port).collect()
    }
}

/// The command line a container runs: its `command`, or the image's entrypoint where it has
/// none, then its `args`, with `$(VAR)` expanded from `vars`.
fn command_line(container: &Value, vars: &BTreeMap<String, String>) -> Vec<String> {
    let command = strings(&container["command"]);
    let command = if command.is_empty() {
        vec![image_entrypoint()]
    } else {
        command
    };
    command
        .into_iter()
        .chain(strings(&container["args"]))
        .map(|a| expand(&a, vars))
        .collect()
}

/// Runs the check of every container of every workload.
fn checked(docs: &[Doc]) -> Vec<Checked<'_>> {
    let entrypoint = image_entrypoint();
    let mut out = Vec::new();
    for workload in workloads(docs) {
        let spec = pod_spec(workload);
        let containers = array(&spec["containers"]);
        assert!(!containers.is_empty(), "{}: no container", workload.what());
        let links = spec["enableServiceLinks"].as_bool().unwrap_or(true);
        for container in containers {
            let name = container["name"].as_str().unwrap_or("?");
            let what = format!("container {name} of {}", workload.what());
            let env = literal_env(container);
            let mut vars = service_variables(docs, workload.namespace(), links);
            vars.extend(env.iter().cloned());
            let line = command_line(container, &vars);
            assert_eq!(
                line[0], entrypoint,
                "{what}: command should start with the image's entrypoint"
            );
            let args = &line[1..];
            for arg in args {
                assert!(
                    !arg.contains("$("),
                    "{what}: {arg:?} names a variable the pod does not have"
                );
            }
            let pod = PodFiles::new(docs, workload, container);
            let settings = check_config(&what, &pod, args, &env);
            out.push(Checked {
                workload,
                container,
                settings,
            });
        }
    }
    out
}

#[test]
fn every_manifest_parses_and_names_what_it_deploys() {
    let docs = manifests();
    let kinds: BTreeSet<&str> = docs.iter().map(Doc::kind).collect();
    for kind in [
        "Deployment",
        "DaemonSet",
        "Service",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "PodDisruptionBudget",
        "ConfigMap",
    ] {
        assert!(kinds.contains(kind), "no {kind} among {kinds:?}");
    }
    for docs in installations() {
        let mut seen = BTreeSet::new();
        for doc in &docs {
            assert!(
                seen.insert((doc.kind(), doc.namespace(), doc.name())),
                "{} is defined twice",
                doc.what()
            );
        }
    }
}

/// Reads `doc` as the Kubernetes API type `T` and back: the apiVersion and kind must be `T`'s,
/// and every field must survive, so a misspelled or misplaced field (which the API server would
/// reject, or drop) or a value of the wrong type fails.
fn round_trip<T>(doc: &Doc)
where
    T: k8s_openapi::Resource + serde::de::DeserializeOwned + serde::Serialize,
{
    let what = doc.what();
    assert_eq!(doc.value["apiVersion"], T::API_VERSION, "{what}: apiVersion");
    let typed: T = serde_json::from_value(doc.value.clone()).unwrap_or_else(|e| panic!("{what}: {e}"));
    let back = serde_json::to_value(&typed).unwrap();
    if let Some(path) = first_difference(&doc.value, &back, String::new()) {
        panic!(
            "{what}: {path} is not read as written: not a field of {} there",
            T::KIND
        );
    }
}

/// The path of the first place where `written` and `read` differ.
fn first_difference(written: &Value, read: &Value, path: String) -> Option<String> {
    match (written, read) {
        (Value::Object(a), Value::Object(b)) => a
            .iter()
            .find_map(|(k, v)| match b.get(k) {
                Some(w) => first_difference(v, w, format!("{path}.{k}")),
                None => Some(format!("{path}.{k}")),
            })
            .or_else(|| b.keys().find(|k| !a.contains_key(*k)).map(|k| format!("{path}.{k}"))),
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (v, w))| first_difference(v, w, format!("{path}[{i}]"))),
        _ => (written != read).then_some(path),
    }
}

#[test]
fn every_manifest_is_made_of_api_fields() {
    use k8s_openapi::api::{apps, core, policy, rbac};
    let docs = manifests();
    for doc in &docs {
        match doc.kind() {
            "Deployment" => round_trip::<apps::v1::Deployment>(doc),
            "DaemonSet" => round_trip::<apps::v1::DaemonSet>(doc),
            "Service" => round_trip::<core::v1::Service>(doc),
            "ServiceAccount" => round_trip::<core::v1::ServiceAccount>(doc),
            "ConfigMap" => round_trip::<core::v1::ConfigMap>(doc),
            "ClusterRole" => round_trip::<rbac::v1::ClusterRole>(doc),
            "ClusterRoleBinding" => round_trip::<rbac::v1::ClusterRoleBinding>(doc),
            "PodDisruptionBudget" => round_trip::<policy::v1::PodDisruptionBudget>(doc),
            other => panic!("{}: no API type known here for kind {other}", doc.what()),
        }
    }
    assert!(!docs.is_empty());
}

#[test]
fn every_container_command_line_passes_check_config() {
    for docs in installations() {
        let checked = checked(&docs);
        assert!(
            checked.len() >= 2,
            "expected skyline containers in both the Deployment and the DaemonSet"
        );
        for kind in ["Deployment", "DaemonSet"] {
            assert!(
                checked.iter().any(|c| c.workload.kind() == kind),
                "no skyline container in a {kind}"
            );
        }
        for c in &checked {
            assert!(!c.settings.addrs.is_empty(), "{}: no --addr", c.what());
        }
    }
}

/// The port a probe or a Service's targetPort names: a number, or a container port's name.
fn resolve_port(value: &Value, container: &Value, protocol: &str) -> Option<u16> {
    if let Some(n) = value.as_u64() {
        return u16::try_from(n).ok();
    }
    let name = value.as_str()?;
    array(&container["ports"])
        .iter()
        .find(|p| p["name"].as_str() == Some(name) && p["protocol"].as_str().unwrap_or("TCP") == protocol)
        .and_then(|p| p["containerPort"].as_u64())
        .and_then(|n| u16::try_from(n).ok())
}

#[test]
fn probes_ask_health_and_ready_on_an_http_port() {
    let docs = manifests();
    let mut probes = 0;
    for c in checked(&docs) {
        let what = c.what();
        if c.workload.kind() == "Deployment" {
            for probe in ["livenessProbe", "readinessProbe"] {
                assert!(c.container[probe].is_object(), "{what}: no {probe}");
            }
        }
        for (probe, path) in [
            ("livenessProbe", "/health"),
            ("readinessProbe", "/ready"),
            ("startupProbe", "/health"),
        ] {
            let spec = &c.container[probe];
            if spec.is_null() {
                continue;
            }
            let get = &spec["httpGet"];
            assert!(
                get.is_object(),
                "{what}: {probe} is not an httpGet of skyline's HTTP endpoints"
            );
            assert!(
                !c.settings.http.is_empty(),
                "{what}: {probe} but no --http-addr: nothing answers it"
            );
            assert_eq!(get["path"].as_str(), Some(path), "{what}: {probe} path");
            assert_eq!(
                get["scheme"].as_str().unwrap_or("HTTP"),
                "HTTP",
                "{what}: {probe} scheme"
            );
            let port = resolve_port(&get["port"], c.container, "TCP")
                .unwrap_or_else(|| panic!("{what}: {probe} port {} is not a container port", get["port"]));
            let http = c
                .settings
                .http
                .iter()
                .find(|h| h.port() == port)
                .unwrap_or_else(|| panic!("{what}: {probe} port {port} against --http-addr {:?}", c.settings.http));
            // The kubelet asks the pod's IP unless the probe names a host.
            let host: Option<IpAddr> = get["host"].as_str().map(|h| h.parse().unwrap());
            if !http.ip().is_unspecified() {
                assert_eq!(host, Some(http.ip()), "{what}: {probe} host against --http-addr {http}");
            }
            probes += 1;
        }
        // CoreDNS's layout keeps CoreDNS's probes (its readiness probe gives up after 1 s).
        if !c.workload.in_coredns_layout() {
            for probe in ["livenessProbe", "readinessProbe"] {
                let spec = &c.container[probe];
                if spec.is_object() {
                    busy_node_tolerant(&what, probe, spec);
                }
            }
        }
    }
    assert!(
        probes >= 2,
        "expected a liveness and a readiness probe at least, found {probes}"
    );
}

/// How late a probe's answer may come on a busy node and still count: a whole build of the
/// cluster zones takes about 0.26 s of CPU at 100,000 endpoints (tuning.md), and a pod that asks
/// for a tenth of a core may get no more while the node is busy.
const BUSY_ANSWER: Duration = Duration::from_secs(3);

/// How long a probe must go unanswered before the pod is taken out of its Service (readiness)
/// or restarted (liveness).
const BUSY_STALL: Duration = Duration::from_secs(10);

/// A probe of a pod that serves must not fail because its node is busy. A pod being deleted
/// leaves the Service's endpoints at once (marked terminating), so readiness need not be quick
/// to notice a drain.
fn busy_node_tolerant(what: &str, probe: &str, spec: &Value) {
    let period = spec["periodSeconds"].as_u64().unwrap_or(10);
    let timeout = spec["timeoutSeconds"].as_u64().unwrap_or(1);
    let failures = spec["failureThreshold"].as_u64().unwrap_or(3);
    assert!(
        Duration::from_secs(timeout) >= BUSY_ANSWER,
        "{what}: {probe} gives up on an answer after {timeout} s"
    );
    assert!(
        failures >= 3,
        "{what}: {probe} fails after {failures} failures in a row"
    );
    let stall = Duration::from_secs((failures - 1) * period + timeout);
    assert!(
        stall >= BUSY_STALL,
        "{what}: {probe} fails after {stall:?} without an answer"
    );
}

#[test]
fn container_ports_are_what_skyline_listens_on() {
    let docs = manifests();
    let mut ports = 0;
    for c in checked(&docs) {
        let what = c.what();
        let dns = c.dns_ports();
        let http = c.settings.http_ports();
        let host_network = pod_spec(c.workload)["hostNetwork"].as_bool().unwrap_or(false);
        for addr in &c.settings.http {
            assert!(!dns.contains(&addr.port()), "{what}: --http-addr {addr} on a DNS port");
        }
        let declared = array(&c.container["ports"]);
        let surge = &c.workload.value["spec"]["updateStrategy"]["rollingUpdate"]["maxSurge"];
        if host_network && !(surge.is_null() || surge == 0 || surge == "0%") {
            // On the host network container ports are host ports, and a host port can be held
            // by one pod only: the surge pod of an update could not be scheduled.
            assert!(
                declared.is_empty(),
                "{what}: host-network ports keep maxSurge from working"
            );
        }
        let mut found = BTreeSet::new();
        for port in declared {
            let number = port["containerPort"]
                .as_u64()
                .and_then(|n| u16::try_from(n).ok())
                .unwrap();
            let protocol = port["protocol"].as_str().unwrap_or("TCP");
            if dns.contains(&number) {
                assert!(
                    matches!(protocol, "UDP" | "TCP"),
                    "{what}: DNS port {number}/{protocol}"
                );
            } else if http.contains(&number) {
                assert_eq!(protocol, "TCP", "{what}: HTTP port {number}/{protocol}");
            } else {
                panic!("{what}: container port {number}/{protocol} is neither an --addr nor an --http-addr port");
            }
            if host_network {
                if let Some(host) = port["hostPort"].as_u64() {
                    assert_eq!(host, u64::from(number), "{what}: hostPort differs on the host network");
                }
            }
            assert!(
                found.insert((number, protocol)),
                "{what}: {number}/{protocol} declared twice"
            );
            ports += 1;
        }
        if !declared.is_empty() {
            for port in &dns {
                for protocol in ["UDP", "TCP"] {
                    assert!(
                        found.contains(&(*port, protocol)),
                        "{what}: DNS port {port}/{protocol} not declared"
                    );
                }
            }
            // Probes may name a port by number; what other pods reach is declared.
            if !http.is_empty() {
                assert!(
                    http.iter().any(|port| found.contains(&(*port, "TCP"))),
                    "{what}: none of the HTTP ports {http:?} declared"
                );
            }
        }
    }
    assert!(
        ports >= 3,
        "expected DNS over UDP and TCP and an HTTP port declared, found {ports}"
    );
}

#[test]
fn services_target_the_ports_skyline_listens_on() {
    let mut targets = 0;
    for docs in installations() {
        targets += service_targets(&docs);
    }
    assert!(
        targets >= 3,
        "expected Service ports for DNS over UDP and TCP and metrics, found {targets}"
    );
}

/// Checks that every Service port of `docs` targets a port its backends listen on; returns how
/// many targets it checked.
fn service_targets(docs: &[Doc]) -> usize {
    let checked = checked(docs);
    let mut targets = 0;
    for service in of_kind(docs, "Service") {
        let what = service.what();
        let selector = string_map(&service.value["spec"]["selector"]);
        let backends: Vec<&Checked> = checked
            .iter()
            .filter(|c| c.workload.namespace() == service.namespace() && selects(&selector, &pod_labels(c.workload)))
            .collect();
        assert!(
            !backends.is_empty(),
            "{what}: its selector {selector:?} matches no workload here"
        );
        let ports = array(&service.value["spec"]["ports"]);
        assert!(!ports.is_empty(), "{what}: no port");
        for port in ports {
            let protocol = port["protocol"].as_str().unwrap_or("TCP");
            let target = if port["targetPort"].is_null() {
                &port["port"]
            } else {
                &port["targetPort"]
            };
            for c in &backends {
                let number = resolve_port(target, c.container, protocol)
                    .unwrap_or_else(|| panic!("{what}: targetPort {target}/{protocol} is not a port of {}", c.what()));
                assert!(
                    c.dns_ports().contains(&number) || (protocol == "TCP" && c.settings.http_ports().contains(&number)),
                    "{what}: {number}/{protocol} is not a port {} listens on",
                    c.what()
                );
                targets += 1;
            }
        }
    }
    targets
}

/// The port a pod asks Prometheus to scrape, if its template or `service` says to scrape it.
fn scrape_port(annotations: &Value) -> Option<u16> {
    (annotations["prometheus.io/scrape"].as_str() == Some("true")).then(|| {
        annotations["prometheus.io/port"]
            .as_str()
            .and_then(|p| p.parse().ok())
            .expect("prometheus.io/scrape without a numeric prometheus.io/port")
    })
}

#[test]
fn prometheus_scrapes_each_pod_once_on_its_metrics_port() {
    let mut scraped = 0;
    for docs in installations() {
        scraped += scrapes(&docs);
    }
    assert!(
        scraped >= 2,
        "the cluster DNS and the node-local cache are both scraped"
    );
}

/// Checks that Prometheus is asked to scrape each skyline pod of `docs` once, on a port that
/// serves /metrics to other pods; returns how many pods it checked.
fn scrapes(docs: &[Doc]) -> usize {
    let services = of_kind(docs, "Service");
    let mut scraped = 0;
    for c in checked(docs) {
        let what = c.what();
        let labels = pod_labels(c.workload);
        let by_pod = scrape_port(&c.workload.value["spec"]["template"]["metadata"]["annotations"]);
        let by_services: Vec<(String, u16)> = services
            .iter()
            .filter(|s| s.namespace() == c.workload.namespace())
            .filter(|s| selects(&string_map(&s.value["spec"]["selector"]), &labels))
            .filter_map(|s| Some((s.what(), scrape_port(&s.value["metadata"]["annotations"])?)))
            .collect();
        let ports: Vec<u16> = by_pod.into_iter().chain(by_services.iter().map(|(_, p)| *p)).collect();
        assert!(
            ports.len() <= 1,
            "{what}: scraped {} times: its pod template and {by_services:?} each ask Prometheus to",
            ports.len()
        );
        let http = &c.settings.http;
        assert!(!http.is_empty(), "{what}: no --http-addr, so no /metrics");
        let Some(&port) = ports.first() else {
            panic!("{what}: serves /metrics on {http:?}, which nothing asks Prometheus to scrape")
        };
        let addr = http
            .iter()
            .find(|h| h.port() == port)
            .unwrap_or_else(|| panic!("{what}: scraped on {port}, /metrics on {http:?}"));
        // Prometheus asks the pod's IP (through the Service's endpoints or the pod's own).
        assert!(
            !addr.ip().is_loopback(),
            "{what}: scraped on port {port}, where /metrics answers on loopback alone ({addr})"
        );
        scraped += 1;
    }
    scraped
}

#[test]
fn the_node_local_cache_serves_metrics_and_health_on_nodelocal_dnscaches_port() {
    let docs = manifests();
    let mut caches = 0;
    for c in checked(&docs).into_iter().filter(|c| c.workload.kind() == "DaemonSet") {
        let what = c.what();
        assert_eq!(
            c.settings.http_ports(),
            BTreeSet::from([9253]),
            "{what}: NodeLocal DNSCache's metrics port"
        );
        assert!(
            strings(&c.container["args"]).iter().any(|a| a == "--reuse-port"),
            "{what}: without --reuse-port the surge pod would fail on the HTTP port the old one holds"
        );
        let liveness = &c.container["livenessProbe"];
        assert_eq!(liveness["httpGet"]["path"], "/health", "{what}: liveness");
        assert!(
            c.container["readinessProbe"].is_null(),
            "{what}: a readiness probe would keep the surge pod unready while the old pod holds the \
             HTTP port, and the update waits for it"
        );
        // The surge pod answers HTTP once the old pod has gone: after minReadySeconds and at
        // most the old pod's grace period. Its liveness probe must not restart it before.
        let seconds = |v: &Value, default: u64| v.as_u64().unwrap_or(default);
        let overlap = seconds(&c.workload.value["spec"]["minReadySeconds"], 0)
            + seconds(&pod_spec(c.workload)["terminationGracePeriodSeconds"], 30);
        let tolerated = seconds(&liveness["initialDelaySeconds"], 0)
            + seconds(&liveness["periodSeconds"], 10) * seconds(&liveness["failureThreshold"], 3);
        assert!(
            tolerated > overlap,
            "{what}: liveness restarts a surge pod after {tolerated} s without HTTP; the old pod may hold the port {overlap} s"
        );
        caches += 1;
    }
    assert!(caches > 0, "no node-local DaemonSet");
}

#[test]
fn the_grace_period_covers_the_drain_and_what_follows() {
    let docs = manifests();
    let checked = checked(&docs);
    for c in &checked {
        // Kubernetes's default where the pod sets none, as CoreDNS's layout does.
        let grace = pod_spec(c.workload)["terminationGracePeriodSeconds"]
            .as_u64()
            .unwrap_or(30);
        let needed = c.settings.drain + c.settings.forward_timeout + FINISH;
        assert!(
            Duration::from_secs(grace) > needed,
            "{}: terminationGracePeriodSeconds {grace} does not exceed the drain {:?} + the forwarding \
             timeout {:?} + {FINISH:?}",
            c.what(),
            c.settings.drain,
            c.settings.forward_timeout
        );
    }
    assert!(!checked.is_empty());
}

/// `(apiGroup, resource, verb)` for every combination a list of RBAC rules allows.
fn rule_triples(rules: &Value, what: &str) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for rule in array(rules) {
        let keys: BTreeSet<&str> = rule.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            BTreeSet::from(["apiGroups", "resources", "verbs"]),
            "{what}: a rule with other fields than apiGroups, resources and verbs"
        );
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    out.insert((group.clone(), resource.clone(), verb));
                }
            }
        }
    }
    out
}

/// The rules in the first YAML block of docs/kubernetes.md's "Permissions" section.
fn documented_rules() -> BTreeSet<(String, String, String)> {
    let doc = std::fs::read_to_string(root().join("docs/kubernetes.md")).unwrap();
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with("Permissions\n"))
        .expect("docs/kubernetes.md has no Permissions section");
    let block = section
        .split("```yaml\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("docs/kubernetes.md's Permissions section has no yaml block");
    let value: Value = serde_yaml_ng::from_str(block).expect("docs/kubernetes.md's rules are not YAML");
    let rules = rule_triples(&value["rules"], "docs/kubernetes.md");
    assert!(
        !rules.is_empty(),
        "docs/kubernetes.md's Permissions section lists no rule"
    );
    rules
}

#[test]
fn the_cluster_role_grants_exactly_what_the_readme_lists() {
    let docs = manifests();
    let expected = documented_rules();
    let mut identities = 0;
    for c in checked(&docs) {
        let spec = pod_spec(c.workload);
        if !c.settings.kubernetes {
            // Nothing to ask the API server: no token in the pod.
            assert_eq!(
                spec["automountServiceAccountToken"].as_bool(),
                Some(false),
                "{}: does not watch the API server but mounts a token",
                c.what()
            );
            continue;
        }
        let namespace = c.workload.namespace();
        let account = spec["serviceAccountName"]
            .as_str()
            .unwrap_or_else(|| panic!("{}: runs --kubernetes as the default ServiceAccount", c.what()));
        assert!(
            of_kind(&docs, "ServiceAccount")
                .iter()
                .any(|a| a.name() == account && a.namespace() == namespace),
            "no ServiceAccount {namespace}/{account}"
        );
        let mut granted = BTreeSet::new();
        let mut bindings = 0;
        for binding in of_kind(&docs, "ClusterRoleBinding") {
            let bound = array(&binding.value["subjects"])
                .iter()
                .any(|s| s["kind"] == "ServiceAccount" && s["name"] == account && s["namespace"] == namespace);
            if !bound {
                continue;
            }
            let role_ref = &binding.value["roleRef"];
            assert_eq!(role_ref["kind"], "ClusterRole", "{}: roleRef", binding.what());
            let role = of_kind(&docs, "ClusterRole")
                .into_iter()
                .find(|r| role_ref["name"] == r.name())
                .unwrap_or_else(|| panic!("{}: no ClusterRole {}", binding.what(), role_ref["name"]));
            granted.extend(rule_triples(&role.value["rules"], &role.what()));
            bindings += 1;
        }
        assert!(
            bindings > 0,
            "no ClusterRoleBinding for ServiceAccount {namespace}/{account}"
        );
        // CoreDNS's ClusterRole also lets it read Endpoints, which skyline does not watch.
        let extra: BTreeSet<(String, String, String)> = if c.workload.in_coredns_layout() {
            ["list", "watch"]
                .map(|verb| (String::new(), "endpoints".to_owned(), verb.to_owned()))
                .into()
        } else {
            BTreeSet::new()
        };
        assert_eq!(
            granted,
            &expected | &extra,
            "{namespace}/{account}: the rules differ from docs/kubernetes.md's"
        );
        identities += 1;
    }
    assert!(identities > 0, "no container runs --kubernetes");
}

#[test]
fn cluster_dns_survives_disruption_and_updates() {
    let docs = manifests();
    let deployments = of_kind(&docs, "Deployment");
    assert!(!deployments.is_empty());
    for deployment in deployments {
        let what = deployment.what();
        let labels = pod_labels(deployment);
        assert!(
            deployment.value["spec"]["replicas"].as_u64().unwrap_or(1) >= 2,
            "{what}: one replica"
        );
        let selector = string_map(&deployment.value["spec"]["selector"]["matchLabels"]);
        assert!(selects(&selector, &labels), "{what}: the selector misses its own pods");
        // CoreDNS's layout has CoreDNS's updates (one replica down at a time) and no budget.
        if deployment.in_coredns_layout() {
            continue;
        }
        let budgets: Vec<&Doc> = of_kind(&docs, "PodDisruptionBudget")
            .into_iter()
            .filter(|b| {
                b.namespace() == deployment.namespace()
                    && selects(&string_map(&b.value["spec"]["selector"]["matchLabels"]), &labels)
            })
            .collect();
        assert_eq!(budgets.len(), 1, "{what}: one PodDisruptionBudget should cover it");
        let rolling = &deployment.value["spec"]["strategy"]["rollingUpdate"];
        assert_eq!(
            rolling["maxUnavailable"], 0,
            "{what}: an update should not take a replica away first"
        );
        let anti = &pod_spec(deployment)["affinity"]["podAntiAffinity"];
        let terms: Vec<&Value> = array(&anti["requiredDuringSchedulingIgnoredDuringExecution"])
            .iter()
            .chain(
                array(&anti["preferredDuringSchedulingIgnoredDuringExecution"])
                    .iter()
                    .map(|t| &t["podAffinityTerm"]),
            )
            .collect();
        assert!(
            terms.iter().any(|t| t["topologyKey"] == "kubernetes.io/hostname"
                && selects(&string_map(&t["labelSelector"]["matchLabels"]), &labels)),
            "{what}: no anti-affinity keeping its replicas on different nodes"
        );
    }
}

#[test]
fn the_node_local_cache_updates_by_surge_on_the_addresses_it_sets_up() {
    let docs = manifests();
    let checked = checked(&docs);
    let cluster_ips: BTreeSet<IpAddr> = of_kind(&docs, "Service")
        .iter()
        .filter_map(|s| s.value["spec"]["clusterIP"].as_str())
        .filter_map(|ip| ip.parse().ok())
        .collect();
    let mut caches = 0;
    for c in checked.iter().filter(|c| c.workload.kind() == "DaemonSet") {
        let what = c.what();
        let spec = pod_spec(c.workload);
        assert_eq!(
            spec["hostNetwork"].as_bool(),
            Some(true),
            "{what}: not on the host network"
        );
        let rolling = &c.workload.value["spec"]["updateStrategy"];
        assert_eq!(rolling["type"], "RollingUpdate", "{what}: update strategy");
        assert_eq!(
            rolling["rollingUpdate"]["maxUnavailable"], 0,
            "{what}: a node would be left without a cache"
        );
        let surge = &rolling["rollingUpdate"]["maxSurge"];
        assert!(
            !(surge.is_null() || surge == 0 || surge == "0%"),
            "{what}: no surge, so a gap on every node"
        );
        let ips: BTreeSet<IpAddr> = c.settings.addrs.iter().map(SocketAddr::ip).collect();
        assert!(
            ips.iter().any(|ip| matches!(ip, IpAddr::V4(v4) if v4.is_link_local())),
            "{what}: no link-local address among {ips:?}"
        );
        for ip in &ips {
            assert!(!ip.is_unspecified(), "{what}: listens on {ip} of every node address");
            let link_local = matches!(ip, IpAddr::V4(v4) if v4.is_link_local());
            assert!(
                link_local || cluster_ips.contains(ip),
                "{what}: {ip} is neither link-local nor the address of a Service it stands in for"
            );
        }
        assert!(!c.settings.upstreams.is_empty(), "{what}: forwards nowhere");
        for upstream in &c.settings.upstreams {
            assert!(
                !ips.contains(&upstream.ip()),
                "{what}: forwards to {upstream}, its own address: a loop"
            );
        }
        // The init container puts exactly these addresses on the node.
        let mut setups = 0;
        for init in array(&spec["initContainers"]) {
            let env: BTreeMap<String, String> = literal_env(init).into_iter().collect();
            let Some(addresses) = env.get("ADDRESSES") else {
                continue;
            };
            let configured: BTreeSet<IpAddr> = addresses.split_whitespace().map(|a| a.parse().unwrap()).collect();
            assert_eq!(configured, ips, "{what}: the init container's ADDRESSES against --addr");
            let interface = env.get("INTERFACE").expect("the init container names no INTERFACE");
            assert!(
                (1..=15).contains(&interface.len()),
                "interface name {interface:?}: 1-15 characters"
            );
            let command = strings(&init["command"]);
            assert_eq!(
                command[..2],
                ["/bin/sh", "-c"],
                "{what}: the init container is not a shell script"
            );
            let syntax = Command::new("sh")
                .arg("-n")
                .arg("-c")
                .arg(&command[2])
                .output()
                .unwrap();
            assert!(
                syntax.status.success(),
                "{what}: the init script does not parse: {}",
                String::from_utf8_lossy(&syntax.stderr)
            );
            let caps = strings(&init["securityContext"]["capabilities"]["add"]);
            assert_eq!(caps, ["NET_ADMIN"], "{what}: the init container's capabilities");
            setups += 1;
        }
        assert_eq!(setups, 1, "{what}: one init container should set up its addresses");
        caches += 1;
    }
    assert!(caches > 0, "no node-local DaemonSet");
}

#[test]
fn containers_run_unprivileged_with_at_most_the_capability_for_port_53() {
    let docs = manifests();
    let checked = checked(&docs);
    let stages = dockerfile_stages();
    let file_capability = stages
        .iter()
        .flat_map(|(_, instructions)| instructions)
        .any(|i| i.contains("setcap cap_net_bind_service=+ep"));
    let image_user: Option<u64> = stages
        .last()
        .and_then(|(_, instructions)| instructions.iter().rev().find_map(|i| i.strip_prefix("USER ")))
        .and_then(|user| user.split(':').next()?.parse().ok());
    for c in &checked {
        let what = c.what();
        let spec = pod_spec(c.workload);
        let security = &c.container["securityContext"];
        let pod_security = &spec["securityContext"];
        let coredns_layout = c.workload.in_coredns_layout();
        let user = security["runAsUser"].as_u64().or(pod_security["runAsUser"].as_u64());
        if coredns_layout {
            // CoreDNS's layout sets no user: the image's runs.
            assert_eq!(
                user, None,
                "{what}: runAsUser, which CoreDNS's layout leaves to the image"
            );
            assert!(
                image_user.is_some_and(|u| u != 0),
                "{what}: the image's user {image_user:?}"
            );
        } else {
            let non_root = security["runAsNonRoot"]
                .as_bool()
                .or(pod_security["runAsNonRoot"].as_bool());
            assert_eq!(non_root, Some(true), "{what}: runAsNonRoot");
            assert!(user.is_some_and(|u| u != 0), "{what}: runAsUser {user:?}");
        }
        assert_eq!(
            security["readOnlyRootFilesystem"].as_bool(),
            Some(true),
            "{what}: writable root"
        );
        let caps = &security["capabilities"];
        assert_eq!(strings(&caps["drop"]), ["ALL"], "{what}: capabilities.drop");
        let added = strings(&caps["add"]);
        assert!(
            added.iter().all(|c| c == "NET_BIND_SERVICE"),
            "{what}: capabilities.add {added:?}"
        );
        if file_capability {
            // The kernel refuses to execute a binary whose file capabilities exceed the bounding set.
            assert_eq!(
                added,
                ["NET_BIND_SERVICE"],
                "{what}: the image's binary needs it in the bounding set"
            );
        }
        let privileged_port = c.dns_ports().into_iter().chain(c.settings.http_ports()).min().unwrap();
        if privileged_port < 1024 {
            let unprivileged_from = array(&pod_security["sysctls"])
                .iter()
                .find(|s| s["name"] == "net.ipv4.ip_unprivileged_port_start")
                .and_then(|s| s["value"].as_str())
                .map(|v| v.parse::<u16>().unwrap());
            let by_sysctl = unprivileged_from.is_some_and(|from| from <= privileged_port);
            let by_capability = file_capability && security["allowPrivilegeEscalation"].as_bool() != Some(false);
            // allowPrivilegeEscalation: false (no_new_privs) keeps an exec from gaining more than
            // the permitted set its process had. CoreDNS's layout relies on the container
            // runtime putting the added capability in that set, as runc does, so that the
            // file capability still takes effect; skyline's own layouts do not rely on it.
            let by_runtime = coredns_layout && file_capability && added == ["NET_BIND_SERVICE"];
            assert!(
                by_sysctl || by_capability || by_runtime,
                "{what}: nothing lets the unprivileged user bind port {privileged_port}"
            );
        }
    }
    assert!(!checked.is_empty());
}

#[test]
fn the_dockerfile_builds_in_one_stage_and_runs_unprivileged_in_another() {
    let stages = dockerfile_stages();
    assert!(stages.len() >= 2, "Dockerfile: not multi-stage");
    let (from, last) = stages.last().unwrap();
    assert!(
        stages[..stages.len() - 1].iter().any(|(_, i)| i
            .iter()
            .any(|i| i.contains("cargo build --release --locked -p skyline"))),
        "Dockerfile: no stage before the last builds skyline"
    );
    assert!(
        !last.iter().any(|i| i.starts_with("RUN ")),
        "Dockerfile: the runtime stage runs commands ({from})"
    );
    let user = last
        .iter()
        .rev()
        .find_map(|i| i.strip_prefix("USER "))
        .expect("Dockerfile: the runtime stage sets no USER");
    let name = user.split(':').next().unwrap();
    assert!(!matches!(name, "0" | "root"), "Dockerfile: runs as {user}");
    assert!(
        last.iter().any(|i| i.starts_with("COPY --from=")),
        "Dockerfile: the runtime stage copies nothing from the build"
    );
    let entrypoint = image_entrypoint();
    assert!(
        last.iter()
            .any(|i| i.starts_with("COPY --from=") && i.ends_with(&format!(" {entrypoint}"))),
        "Dockerfile: {entrypoint} is not what the runtime stage copies in"
    );
    let ignore = std::fs::read_to_string(root().join(".dockerignore")).unwrap();
    assert!(
        ignore.lines().any(|l| l.trim() == "target"),
        ".dockerignore: target/ goes into the context"
    );
}

/// The Corefile kubeadm writes into the `coredns` ConfigMap for the cluster domain
/// `cluster.local`.
const KUBEADM_COREFILE: &str = "\
.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30
    loop
    reload
    loadbalance
}
";

/// The path of the first field of `expected` that `actual` lacks or holds otherwise (arrays
/// compared whole).
fn unmet(expected: &Value, actual: &Value, path: String) -> Option<String> {
    match (expected, actual) {
        (Value::Object(want), Value::Object(have)) => want.iter().find_map(|(k, v)| {
            let path = format!("{path}.{k}");
            match have.get(k) {
                Some(w) => unmet(v, w, path),
                None => Some(path),
            }
        }),
        _ => (expected != actual).then_some(path),
    }
}

/// CoreDNS's layout is the objects kubeadm installs for CoreDNS, with their names, labels,
/// ports, probes, volume and securityContext, so that what knows CoreDNS's objects finds them;
/// only the container's image and args differ. The args run the ConfigMap's Corefile, which is
/// kubeadm's, and what skyline makes of it is what the rest of the layout expects.
#[test]
fn the_coredns_layout_is_kubeadms_objects_running_its_corefile() {
    use serde_json::json;
    let docs = manifests_in(&[COREDNS_LAYOUT]);
    let objects: BTreeSet<(&str, &str)> = docs.iter().map(|d| (d.kind(), d.name())).collect();
    assert_eq!(
        objects,
        BTreeSet::from([
            ("ServiceAccount", "coredns"),
            ("ClusterRole", "system:coredns"),
            ("ClusterRoleBinding", "system:coredns"),
            ("ConfigMap", "coredns"),
            ("Deployment", "coredns"),
            ("Service", "kube-dns"),
        ])
    );
    let expected = [
        json!({"kind": "ServiceAccount", "metadata": {"namespace": "kube-system"}}),
        json!({"kind": "ClusterRoleBinding",
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:coredns"},
            "subjects": [{"kind": "ServiceAccount", "name": "coredns", "namespace": "kube-system"}]}),
        json!({"kind": "ConfigMap", "metadata": {"namespace": "kube-system"},
            "data": {"Corefile": KUBEADM_COREFILE}}),
        json!({"kind": "Deployment", "metadata": {"namespace": "kube-system", "labels": {"k8s-app": "kube-dns"}},
            "spec": {"selector": {"matchLabels": {"k8s-app": "kube-dns"}},
                "template": {"metadata": {"labels": {"k8s-app": "kube-dns"}},
                    "spec": {"serviceAccountName": "coredns", "dnsPolicy": "Default",
                        "volumes": [{"name": "config-volume",
                            "configMap": {"name": "coredns", "items": [{"key": "Corefile", "path": "Corefile"}]}}]}}}}),
        json!({"kind": "Service", "metadata": {"namespace": "kube-system", "labels": {"k8s-app": "kube-dns"},
                "annotations": {"prometheus.io/port": "9153", "prometheus.io/scrape": "true"}},
            "spec": {"clusterIP": "10.96.0.10", "selector": {"k8s-app": "kube-dns"},
                "ports": [
                    {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                    {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53},
                    {"name": "metrics", "port": 9153, "protocol": "TCP", "targetPort": 9153}]}}),
    ];
    for want in &expected {
        let doc = docs.iter().find(|d| d.value["kind"] == want["kind"]).unwrap();
        if let Some(path) = unmet(want, &doc.value, String::new()) {
            panic!("{}: {path} is not CoreDNS's", doc.what());
        }
    }
    let container = json!({
        "name": "coredns",
        "args": ["--corefile", "/etc/coredns/Corefile"],
        "volumeMounts": [{"name": "config-volume", "mountPath": "/etc/coredns", "readOnly": true}],
        "ports": [
            {"containerPort": 53, "name": "dns", "protocol": "UDP"},
            {"containerPort": 53, "name": "dns-tcp", "protocol": "TCP"},
            {"containerPort": 9153, "name": "metrics", "protocol": "TCP"}],
        "livenessProbe": {"httpGet": {"path": "/health", "port": 8080, "scheme": "HTTP"}},
        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8181, "scheme": "HTTP"}},
        "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
            "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}},
    });
    let checked = checked(&docs);
    let [c] = checked.as_slice() else {
        panic!("CoreDNS's layout runs one container")
    };
    if let Some(path) = unmet(&container, c.container, String::new()) {
        panic!("{}: {path} is not CoreDNS's", c.what());
    }
    assert!(
        c.container["command"].is_null(),
        "{}: the image's entrypoint runs",
        c.what()
    );

    let what = c.what();
    let settings = &c.settings;
    assert_eq!(c.dns_ports(), BTreeSet::from([53]), "{what}: .:53");
    assert!(
        settings.addrs.iter().all(|a| a.ip().is_unspecified()),
        "{what}: .:53 on every address, not {:?}",
        settings.addrs
    );
    assert!(settings.kubernetes, "{what}: the kubernetes plugin");
    assert_eq!(
        settings.http_ports(),
        BTreeSet::from([8080, 8181, 9153]),
        "{what}: health, ready, prometheus"
    );
    assert_eq!(settings.drain, Duration::from_secs(5), "{what}: lameduck 5s");
    assert_eq!(
        settings.upstreams,
        [SocketAddr::new(POD_NAMESERVER.parse().unwrap(), 53)],
        "{what}: forward . /etc/resolv.conf, the pod's"
    );
}

#[test]
fn expansion_follows_kubernetes() {
    let vars = BTreeMap::from([("A".to_owned(), "1".to_owned())]);
    assert_eq!(expand("$(A):53", &vars), "1:53");
    assert_eq!(expand("$(B):53", &vars), "$(B):53");
    assert_eq!(expand("$$(A)", &vars), "$(A)");
    assert_eq!(expand("a$b", &vars), "a$b");
}

/// Set in the environment of this test binary when it runs inside the network namespace that
/// [`a_node_local_update_by_surge_loses_no_query`] made.
const IN_NAMESPACE: &str = "SKYLINE_DEPLOY_TEST_NAMESPACE";

/// The cluster resolvers' stand-in inside the namespace: what `SKYLINE_UPSTREAM_SERVICE_HOST`
/// reads there.
const UPSTREAM: &str = "10.244.0.2";

/// Whether the end-to-end test can run here: root (network namespaces), `ip`, `nft` and `sh`.
fn can_run_in_a_namespace() -> bool {
    common::can_use_namespaces(&[("ip", "iproute2"), ("nft", "nftables"), ("sh", "dash")])
}

/// A process killed (if still running) on drop.
struct Running(std::process::Child, &'static str);

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            common::stop_child(&mut self.0, self.1);
        }
    }
}

fn must(command: &mut Command) -> String {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{command:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A DNS query for `name` type A with ID `id`, recursion desired.
fn a_query(id: u16, name: &str) -> Vec<u8> {
    let mut q = Vec::with_capacity(64);
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.').filter(|l| !l.is_empty()) {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

/// Queries sent by [`Load`] and what became of them.
#[derive(Debug, Default)]
struct Tally {
    sent: usize,
    answered: usize,
    /// Seconds since the start at which each unanswered query was sent, and where to.
    lost: Vec<(f64, SocketAddr)>,
    /// Queries sent after `mark` was set (the old process had exited), and of those answered.
    sent_after_mark: usize,
    answered_after_mark: usize,
}

/// Sends `rate` queries a second, each from a fresh socket (a new flow, as a stub resolver
/// that opens a socket per lookup does), alternating over `targets`, for names that are all
/// cache misses; a query without its reply within 2 s is lost.
fn load(
    targets: Vec<SocketAddr>,
    rate: u32,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    mark: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<Tally> {
    use std::sync::atomic::Ordering;
    std::thread::spawn(move || {
        let start = std::time::Instant::now();
        let interval = Duration::from_secs(1) / rate;
        let mut next = start;
        let mut tally = Tally::default();
        let mut pending: Vec<(std::net::UdpSocket, u16, std::time::Instant, SocketAddr, bool)> = Vec::new();
        let mut buf = [0u8; 4096];
        let mut n: u32 = 0;
        loop {
            let now = std::time::Instant::now();
            let stopping = stop.load(Ordering::Relaxed);
            if stopping && pending.is_empty() {
                return tally;
            }
            if !stopping && now >= next {
                let socket = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
                socket.set_nonblocking(true).unwrap();
                let target = targets[n as usize % targets.len()];
                let id = n as u16;
                let name = format!("q{n}-{}.example.org", std::process::id());
                let marked = mark.load(Ordering::Relaxed);
                tally.sent += 1;
                tally.sent_after_mark += usize::from(marked);
                // A query the kernel refuses to send (no such address) is lost as well.
                match socket.send_to(&a_query(id, &name), target) {
                    Ok(_) => pending.push((socket, id, now, target, marked)),
                    Err(_) => tally.lost.push(((now - start).as_secs_f64(), target)),
                }
                n += 1;
                next += interval;
            }
            pending.retain(|(socket, id, sent, target, marked)| {
                if let Ok(len) = socket.recv(&mut buf) {
                    if len >= 2 && u16::from_be_bytes([buf[0], buf[1]]) == *id {
                        tally.answered += 1;
                        tally.answered_after_mark += usize::from(*marked);
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

/// End-to-end, in a network namespace this test makes: the node-local DaemonSet's update as
/// the kubelet would carry it out on one node, with the manifest's own init script and
/// command line. The old pod's init container sets up the addresses and skyline serves on
/// them, forwarding to a stand-in for the cluster resolvers (a skyline serving `example.org.`);
/// under a steady load of cache misses to both addresses, the surge pod's init container runs
/// again and the new skyline starts beside the old one; the old one gets SIGTERM, drains and
/// exits 0; the new one answers everything from then on. No query may go unanswered, and the
/// addresses stay on the node.
#[test]
fn a_node_local_update_by_surge_loses_no_query() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    if !common::inside_a_namespace(
        "a_node_local_update_by_surge_loses_no_query",
        IN_NAMESPACE,
        can_run_in_a_namespace,
    ) {
        return;
    }

    let docs = manifests();
    let daemonset = of_kind(&docs, "DaemonSet").into_iter().next().expect("no DaemonSet");
    let spec = pod_spec(daemonset);
    let init = array(&spec["initContainers"])
        .iter()
        .find(|c| !literal_env(c).is_empty())
        .expect("no init container with an environment");
    let init_env = literal_env(init);
    let script = strings(&init["command"]);
    let container = &array(&spec["containers"])[0];
    let mut vars = service_variables(&docs, daemonset.namespace(), true);
    for (name, value) in vars.iter_mut() {
        if name.ends_with("_SERVICE_HOST") {
            *value = UPSTREAM.to_owned();
        }
    }
    vars.extend(literal_env(container));
    let args: Vec<String> = command_line(container, &vars)[1..].to_vec();
    let pod = PodFiles::new(&docs, daemonset, container);
    let settings = check_config("the DaemonSet's container", &pod, &args, &literal_env(container));
    assert_eq!(settings.upstreams, [SocketAddr::new(UPSTREAM.parse().unwrap(), 53)]);
    let interface = init_env
        .iter()
        .find(|(k, _)| k == "INTERFACE")
        .map(|(_, v)| v.clone())
        .unwrap();

    let set_up = || {
        must(
            Command::new(&script[0])
                .args(&script[1..])
                .env_clear()
                .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
                .envs(init_env.iter().cloned()),
        )
    };
    set_up();
    must(Command::new("ip").args(["addr", "add", &format!("{UPSTREAM}/32"), "dev", "lo"]));
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join("records.json");
    std::fs::write(
        &records,
        r#"{"/skydns/config": {"domain": "example.org."}, "/skydns/org/example/www": {"host": "10.0.0.1"}}"#,
    )
    .unwrap();
    let skyline = |args: &[String], what: &'static str| {
        let child = Command::new(env!("CARGO_BIN_EXE_skyline"))
            .args(args)
            .env_clear()
            .env("SKYLINE_RESOLV_CONF", "none")
            .envs(literal_env(container))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        Running(child, what)
    };
    let upstream_args: Vec<String> = [
        format!("--addr={UPSTREAM}:53"),
        format!("--records={}", records.display()),
        "--no-rec".to_owned(),
        "--workers=1".to_owned(),
        "--no-pin".to_owned(),
    ]
    .into();
    let _upstream = skyline(&upstream_args, "the upstream");
    let mut old = skyline(&args, "the old pod's skyline");

    // Serving: a name of the upstream, through the cache, on every address.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    for target in &settings.addrs {
        loop {
            let socket = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
            socket.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
            socket.send_to(&a_query(7, "www.example.org"), target).unwrap();
            let mut buf = [0u8; 512];
            if socket.recv(&mut buf).is_ok_and(|n| n > 2 && buf[..2] == [0, 7]) {
                break;
            }
            assert!(old.0.try_wait().unwrap().is_none(), "the old skyline exited at start");
            assert!(std::time::Instant::now() < deadline, "no answer on {target}");
        }
    }

    let stop = Arc::new(AtomicBool::new(false));
    let mark = Arc::new(AtomicBool::new(false));
    let load = load(settings.addrs.clone(), 1000, Arc::clone(&stop), Arc::clone(&mark));
    std::thread::sleep(Duration::from_secs(1));
    // The surge pod: its init container, then its skyline beside the old one.
    set_up();
    let mut new = skyline(&args, "the new pod's skyline");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        new.0.try_wait().unwrap().is_none(),
        "the new skyline could not start beside the old one"
    );
    // The old pod is deleted: SIGTERM, the drain, then exit within the grace period.
    skyline_dataplane::sys::send_signal(old.0.id(), skyline_dataplane::sys::Signal::Terminate).unwrap();
    let grace = Duration::from_secs(pod_spec(daemonset)["terminationGracePeriodSeconds"].as_u64().unwrap());
    let deadline = std::time::Instant::now() + grace;
    let status = loop {
        if let Some(status) = old.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the old skyline outlived the grace period"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "the old skyline exited with {status}");
    mark.store(true, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    let tally = load.join().unwrap();
    eprintln!("{tally:?}");
    assert!(tally.sent > 5000, "too few queries to tell: {tally:?}");
    assert!(
        tally.sent_after_mark > 500,
        "too few queries after the old pod's exit: {tally:?}"
    );
    assert_eq!(tally.answered_after_mark, tally.sent_after_mark, "{tally:?}");
    assert!(
        tally.lost.is_empty(),
        "{} of {} queries unanswered: {:?}",
        tally.lost.len(),
        tally.sent,
        tally.lost
    );
    assert_eq!(tally.answered, tally.sent);
    assert!(new.0.try_wait().unwrap().is_none(), "the new skyline stopped");
    // The old pod's exit left the node's set-up in place.
    let shown = must(Command::new("ip").args(["-o", "addr", "show", "dev", &interface]));
    for addr in &settings.addrs {
        assert!(
            shown.contains(&format!("{}/32", addr.ip())),
            "{} gone from {interface}: {shown}",
            addr.ip()
        );
    }
    must(Command::new("nft").args(["list", "table", "inet", &format!("skyline_{interface}")]));
}

/// The node-local DaemonSet's init container that sets up its addresses: its environment and
/// its NOTRACK table, the nftables script of its `nft -f -` with `$INTERFACE` and `$list`
/// put in as the script puts them in.
fn init_notrack_table(docs: &[Doc]) -> (BTreeMap<String, String>, String) {
    let daemonset = of_kind(docs, "DaemonSet").into_iter().next().expect("no DaemonSet");
    let init = array(&pod_spec(daemonset)["initContainers"])
        .iter()
        .find(|c| literal_env(c).iter().any(|(k, _)| k == "ADDRESSES"))
        .expect("no init container with ADDRESSES");
    let env: BTreeMap<String, String> = literal_env(init).into_iter().collect();
    let script = strings(&init["command"]).pop().unwrap();
    let rules = script
        .split_once("nft -f - <<RULES\n")
        .and_then(|(_, rest)| rest.split_once("\nRULES"))
        .map(|(rules, _)| rules)
        .expect("the init script has no nft -f - <<RULES here-document");
    let list = env["ADDRESSES"].split_whitespace().collect::<Vec<_>>().join(", ");
    let table = rules.replace("$INTERFACE", &env["INTERFACE"]).replace("$list", &list);
    (env, table)
}

/// The NOTRACK rules of an nftables table, as `(chain, rule)`, the members of each `{ ... }`
/// set sorted: `nft list` prints them sorted, a script in any order.
fn notrack_rules(table: &str) -> BTreeSet<(String, String)> {
    let mut chain = String::new();
    let mut rules = BTreeSet::new();
    for line in table.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("chain ") {
            chain = name.trim_end_matches(['{', ' ']).to_owned();
        } else if line.ends_with("notrack") {
            let rule = match (line.find('{'), line.find('}')) {
                (Some(open), Some(close)) => {
                    let mut members: Vec<&str> = line[open + 1..close].split(',').map(str::trim).collect();
                    members.sort_unstable();
                    format!("{}{{ {} }}{}", &line[..open], members.join(", "), &line[close + 1..])
                }
                _ => line.to_owned(),
            };
            rules.insert((chain.clone(), rule));
        }
    }
    rules
}

/// docs/node-local.md's NOTRACK table: its code block that holds `table inet skyline_`.
fn documented_notrack_table() -> String {
    let text = std::fs::read_to_string(root().join("docs/node-local.md")).unwrap();
    text.split("```")
        .skip(1)
        .step_by(2)
        .find(|block| block.contains("table inet skyline_") && block.contains("notrack"))
        .expect("docs/node-local.md shows no skyline_ NOTRACK table")
        .to_owned()
}

/// The `--setup-*` flags skyline has: the `setup_*` settings of src/settings.rs.
fn setup_flags() -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join("src/settings.rs")).unwrap();
    let flags: BTreeSet<String> = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| word.starts_with("setup_"))
        .map(|word| format!("--{}", word.replace('_', "-")))
        .collect();
    assert!(!flags.is_empty(), "src/settings.rs declares no setup_ setting");
    flags
}

/// Every `--setup-...` flag that `text` names (`--setup-*`, the family, left out).
fn named_setup_flags(text: &str) -> BTreeSet<String> {
    text.match_indices("--setup-")
        .map(|(at, _)| {
            text[at..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '-')
                .collect::<String>()
        })
        .filter(|flag| !flag.ends_with('-'))
        .collect()
}

#[test]
fn docs_and_the_node_local_manifest_agree_on_the_notrack_rules_and_the_setup_flags() {
    let docs = manifests();
    let (env, table) = init_notrack_table(&docs);
    let documented = documented_notrack_table();
    let header = format!("table inet skyline_{} {{", env["INTERFACE"]);
    assert!(
        table.contains(&header),
        "the init script's table is not {header:?}:\n{table}"
    );
    assert!(
        documented.contains(&header),
        "docs/node-local.md's table is not {header:?}:\n{documented}"
    );
    let installed = notrack_rules(&table);
    assert!(installed.len() >= 4, "{installed:?}");
    assert_eq!(
        notrack_rules(&documented),
        installed,
        "docs/node-local.md's NOTRACK rules differ from the init container's"
    );
    for chain in ["prerouting", "output"] {
        let hook = format!("type filter hook {chain} priority raw;");
        assert!(table.contains(&hook) && documented.contains(&hook), "{hook:?}");
    }
    let flags = setup_flags();
    let guide = std::fs::read_to_string(root().join("docs/node-local.md")).unwrap();
    assert_eq!(
        named_setup_flags(&guide),
        flags,
        "the --setup-* flags docs/node-local.md names"
    );
    let manifest = std::fs::read_to_string(root().join("deploy/node-local/node-local.yaml")).unwrap();
    let named = named_setup_flags(&manifest);
    assert!(
        !named.is_empty() && named.is_subset(&flags),
        "the manifest names {named:?}; skyline has {flags:?}"
    );
}

/// Inside a network namespace this test makes: the init container's script installs its table,
/// then skyline's `--setup-interface` and `--setup-notrack` on the same addresses install
/// theirs, and `nft list` shows the same NOTRACK rules in the same table for both.
#[test]
fn setup_notrack_installs_what_the_node_local_init_container_installs() {
    if !can_run_in_a_namespace() {
        return;
    }
    let docs = manifests();
    let (env, table) = init_notrack_table(&docs);
    let ns = common::Namespace::new("skyline-notrack");
    let in_ns = |args: &[&str]| {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &ns.0]).args(args);
        command
    };
    let table_name = format!("skyline_{}", env["INTERFACE"]);
    let list = || in_ns(&["nft", "list", "table", "inet", &table_name]).output().unwrap();

    let mut nft = in_ns(&["nft", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut nft.stdin.take().unwrap(), table.as_bytes()).unwrap();
    assert!(
        nft.wait().unwrap().success(),
        "nft -f - of the init script's table:\n{table}"
    );
    let by_init = notrack_rules(&must(&mut in_ns(&["nft", "list", "table", "inet", &table_name])));
    must(&mut in_ns(&["nft", "delete", "table", "inet", &table_name]));

    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join("records.json");
    std::fs::write(&records, "{}").unwrap();
    let addrs: Vec<String> = env["ADDRESSES"].split_whitespace().map(|a| format!("{a}:53")).collect();
    must(&mut in_ns(&["ip", "link", "set", "lo", "up"]));
    let child = in_ns(&[env!("CARGO_BIN_EXE_skyline"), "--addr", &addrs.join(",")])
        .args(["--setup-interface", &env["INTERFACE"], "--setup-notrack"])
        .args(["--no-rec", "--workers", "1", "--no-pin", "--drain", "0s", "--records"])
        .arg(&records)
        .env("SKYLINE_RESOLV_CONF", "none")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut skyline = Running(child, "skyline with --setup-notrack");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let listed = loop {
        let out = list();
        if out.status.success() {
            break String::from_utf8_lossy(&out.stdout).into_owned();
        }
        assert!(skyline.0.try_wait().unwrap().is_none(), "skyline exited at start");
        assert!(
            std::time::Instant::now() < deadline,
            "no table {table_name} within 20 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let by_skyline = notrack_rules(&listed);
    assert!(by_init.len() >= 4, "{by_init:?}");
    assert_eq!(by_skyline, by_init, "--setup-notrack against the init container");
    common::stop_child(&mut skyline.0, "skyline");
}
