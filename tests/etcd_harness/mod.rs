//! Harness for the etcd end-to-end tests: real `etcd` processes (one member or a cluster, plain
//! or TLS with certificates made on the spot) on 127.0.0.1 with free ports and temporary data
//! directories, stopped by PID; a client to change
//! their data (the `etcd-client` crate, as a second, independent user of etcd); and a TCP proxy
//! that can cut skyline off from etcd while etcd itself stays up; the DNS expectations the
//! etcd tests share. Test files that use it declare `mod common;` too.

#![allow(dead_code)]

pub use crate::common::free_port;
use crate::common::{eventually, stop_child, Skyline};
use etcd_client::{
    Certificate, Client, CompactionOptions, ConnectOptions, GetOptions, Identity, PutOptions, TlsOptions, Txn, TxnOp,
};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long an etcd member may take to serve after it was started.
const START_LIMIT: Duration = Duration::from_secs(20);

/// Whether the etcd tests can run. Under CI=true a missing `etcd` is a failure, not a skip.
pub fn etcd_available() -> bool {
    let found = Command::new("etcd")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("etcd is required under CI=true; scripts/setup.sh installs it (Debian etcd-server)");
        }
        eprintln!("etcd is not installed: skipping (scripts/setup.sh test installs it)");
    }
    found
}

/// One etcd member, killed on drop. Its data directory outlives a kill, so it can restart.
pub struct Etcd {
    pub name: String,
    pub client_port: u16,
    pub peer_port: u16,
    /// Where `/health` answers over plain HTTP (the client port, or a metrics port with TLS).
    health_port: u16,
    scheme: &'static str,
    extra: Vec<String>,
    cluster: String,
    initial_state: &'static str,
    data: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    _dir: Option<tempfile::TempDir>,
}

impl Etcd {
    /// Starts a single-member cluster and waits until it serves.
    pub fn start() -> Etcd {
        Etcd::start_on(free_port())
    }

    /// Starts a single-member cluster whose clients connect to `client_port`.
    pub fn start_on(client_port: u16) -> Etcd {
        let dir = tempfile::tempdir().unwrap();
        let peer_port = free_port();
        let name = "solo".to_string();
        let cluster = format!("{name}=http://127.0.0.1:{peer_port}");
        let mut etcd = Etcd::member(name, client_port, peer_port, cluster, dir.path());
        etcd._dir = Some(dir);
        etcd.spawn();
        etcd.wait_healthy();
        etcd
    }

    /// Starts a single-member cluster serving clients over TLS only, with the certificates of
    /// `pki` and client certificates required.
    pub fn start_tls(pki: &Pki) -> Etcd {
        let dir = tempfile::tempdir().unwrap();
        let peer_port = free_port();
        let name = "tls".to_string();
        let cluster = format!("{name}=http://127.0.0.1:{peer_port}");
        let mut etcd = Etcd::member(name, free_port(), peer_port, cluster, dir.path());
        etcd._dir = Some(dir);
        etcd.scheme = "https";
        etcd.health_port = free_port();
        let path = |p: &Path| p.to_str().unwrap().to_string();
        etcd.extra = vec![
            "--cert-file".into(),
            path(&pki.server_cert),
            "--key-file".into(),
            path(&pki.server_key),
            "--trusted-ca-file".into(),
            path(&pki.ca),
            "--client-cert-auth".into(),
            "--listen-metrics-urls".into(),
            format!("http://127.0.0.1:{}", etcd.health_port),
        ];
        etcd.spawn();
        etcd.wait_healthy();
        etcd
    }

    fn member(name: String, client_port: u16, peer_port: u16, cluster: String, dir: &Path) -> Etcd {
        Etcd {
            data: dir.join(format!("{name}.etcd")),
            log: dir.join(format!("{name}.log")),
            name,
            client_port,
            peer_port,
            health_port: client_port,
            scheme: "http",
            extra: Vec::new(),
            cluster,
            initial_state: "new",
            child: None,
            _dir: None,
        }
    }

    /// The client URL.
    pub fn endpoint(&self) -> String {
        format!("{}://127.0.0.1:{}", self.scheme, self.client_port)
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new("etcd")
            .arg("--name")
            .arg(&self.name)
            .arg("--data-dir")
            .arg(&self.data)
            .arg("--listen-client-urls")
            .arg(self.endpoint())
            .arg("--advertise-client-urls")
            .arg(self.endpoint())
            .arg("--listen-peer-urls")
            .arg(format!("http://127.0.0.1:{}", self.peer_port))
            .arg("--initial-advertise-peer-urls")
            .arg(format!("http://127.0.0.1:{}", self.peer_port))
            .arg("--initial-cluster")
            .arg(&self.cluster)
            .arg("--initial-cluster-state")
            .arg(self.initial_state)
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("etcd starts");
        self.child = Some(child);
    }

    /// Waits until `/health` reports a member that can serve (it has a leader).
    pub fn wait_healthy(&self) {
        let deadline = Instant::now() + START_LIMIT;
        while Instant::now() < deadline {
            if healthy(self.health_port) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "etcd {} did not become healthy on port {}; its log:\n{}",
            self.name,
            self.client_port,
            std::fs::read_to_string(&self.log).unwrap_or_default()
        );
    }

    /// Kills the member (SIGKILL, by PID) and reaps it. Called from `Drop` too, so a failure
    /// is reported, not a panic.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            stop_child(&mut child, &format!("etcd {}", self.name));
        }
    }

    /// Starts the member again on the same ports and data directory.
    pub fn restart(&mut self) {
        self.kill();
        self.initial_state = "existing";
        self.spawn();
    }

    /// Whether the process runs.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Asks `/health` on the client port; true when etcd says it is healthy.
fn healthy(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    reply.contains("\"health\":\"true\"")
}

/// A cluster of members on loopback, each killed on drop.
pub struct Cluster {
    pub members: Vec<Etcd>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    /// Starts `n` members and waits until each serves.
    pub fn start(n: usize) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let ports: Vec<(u16, u16)> = (0..n).map(|_| (free_port(), free_port())).collect();
        let cluster = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer))| format!("m{i}=http://127.0.0.1:{peer}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut members: Vec<Etcd> = ports
            .iter()
            .enumerate()
            .map(|(i, &(client, peer))| Etcd::member(format!("m{i}"), client, peer, cluster.clone(), dir.path()))
            .collect();
        for m in &mut members {
            m.spawn();
        }
        for m in &members {
            m.wait_healthy();
        }
        Cluster { members, _dir: dir }
    }

    /// Every member's client URL.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(Etcd::endpoint).collect()
    }

    /// Adds a member named `name` to the running cluster (etcd's member add, then the new
    /// member started to join it) and waits until it serves; returns its index.
    pub fn grow(&mut self, name: &str) -> usize {
        let (client_port, peer_port) = (free_port(), free_port());
        let peer = format!("http://127.0.0.1:{peer_port}");
        let client = EtcdClient::connect(&self.endpoints());
        client.run(async {
            let mut c = client.client.clone();
            c.member_add([peer.clone()], None).await
        });
        let mut cluster: Vec<String> = self
            .members
            .iter()
            .filter(|m| m.child.is_some())
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect();
        cluster.push(format!("{name}={peer}"));
        let mut member = Etcd::member(
            name.to_owned(),
            client_port,
            peer_port,
            cluster.join(","),
            self._dir.path(),
        );
        member.initial_state = "existing";
        member.spawn();
        member.wait_healthy();
        self.members.push(member);
        self.members.len() - 1
    }

    /// Removes member `index` from the cluster (etcd's member remove: the member stops
    /// serving) and stops its process.
    pub fn shrink(&mut self, index: usize) {
        let others: Vec<String> = self
            .members
            .iter()
            .enumerate()
            .filter(|&(i, m)| i != index && m.child.is_some())
            .map(|(_, m)| m.endpoint())
            .collect();
        let client = EtcdClient::connect(&others);
        let name = self.members[index].name.clone();
        let listed = client.run(async {
            let mut c = client.client.clone();
            c.member_list().await
        });
        let id = listed
            .members()
            .iter()
            .find(|m| m.name() == name)
            .map(|m| m.id())
            .expect("the member is listed");
        // etcd refuses while the others have not been connected for 5 s (it protects quorum).
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let mut c = client.client.clone();
            match client.runtime.block_on(c.member_remove(id)) {
                Ok(_) => break,
                Err(e) if Instant::now() < deadline && e.to_string().contains("unhealthy") => {
                    std::thread::sleep(Duration::from_millis(500));
                }
                Err(e) => panic!("etcd refuses to remove member {name}: {e}"),
            }
        }
        self.members[index].kill();
        for member in self.members.iter().filter(|m| m.child.is_some()) {
            member.wait_healthy();
        }
    }
}

/// A synchronous etcd client for tests, on a runtime of its own.
pub struct EtcdClient {
    runtime: tokio::runtime::Runtime,
    client: Client,
}

impl EtcdClient {
    /// Connects to `endpoints`.
    pub fn connect(endpoints: &[String]) -> EtcdClient {
        EtcdClient::connect_with(endpoints, None)
    }

    /// Connects over TLS to `endpoints`, trusting `pki`'s CA and showing its client certificate.
    pub fn connect_tls(endpoints: &[String], pki: &Pki) -> EtcdClient {
        let read = |p: &PathBuf| std::fs::read(p).unwrap();
        let tls = TlsOptions::new()
            .ca_certificate(Certificate::from_pem(read(&pki.ca)))
            .identity(Identity::from_pem(read(&pki.client_cert), read(&pki.client_key)));
        EtcdClient::connect_with(endpoints, Some(ConnectOptions::new().with_tls(tls)))
    }

    /// Connects to `endpoints` as `user` with `password`.
    pub fn connect_as(endpoints: &[String], user: &str, password: &str) -> EtcdClient {
        EtcdClient::connect_with(endpoints, Some(ConnectOptions::new().with_user(user, password)))
    }

    fn connect_with(endpoints: &[String], options: Option<ConnectOptions>) -> EtcdClient {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let client = runtime
            .block_on(Client::connect(endpoints, options))
            .expect("connect to etcd");
        EtcdClient { runtime, client }
    }

    fn run<T>(&self, op: impl std::future::Future<Output = Result<T, etcd_client::Error>>) -> T {
        let deadline = Duration::from_secs(10);
        self.runtime
            .block_on(async { tokio::time::timeout(deadline, op).await })
            .expect("etcd answers within 10 s")
            .expect("etcd request succeeds")
    }

    /// Puts `value` at `key`; returns the revision it made.
    pub fn put(&self, key: &str, value: &str) -> i64 {
        let mut c = self.client.clone();
        let r = self.run(async move { c.put(key, value, None).await });
        r.header().map_or(0, |h| h.revision())
    }

    /// Puts `value` at `key` on a new lease of `ttl` seconds, never renewed; returns the lease.
    pub fn put_leased(&self, key: &str, value: &str, ttl: i64) -> i64 {
        let mut c = self.client.clone();
        let lease = self.run(async move { c.lease_grant(ttl, None).await }).id();
        let mut c = self.client.clone();
        self.run(async move { c.put(key, value, Some(PutOptions::new().with_lease(lease))).await });
        lease
    }

    /// Puts every `(key, value)`, a transaction of 128 at a time (etcd's default limit).
    pub fn put_all(&self, pairs: &[(String, String)]) {
        for chunk in pairs.chunks(128) {
            let ops: Vec<TxnOp> = chunk
                .iter()
                .map(|(k, v)| TxnOp::put(k.as_str(), v.as_str(), None))
                .collect();
            let mut c = self.client.clone();
            self.run(async move { c.txn(Txn::new().and_then(ops)).await });
        }
    }

    /// Every key under `prefix` with its value and the revision that last changed it.
    pub fn get_prefix(&self, prefix: &str) -> Vec<(String, String, i64)> {
        let mut c = self.client.clone();
        let r = self.run(async move { c.get(prefix, Some(GetOptions::new().with_prefix())).await });
        r.kvs()
            .iter()
            .map(|kv| {
                let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                (text(kv.key()), text(kv.value()), kv.mod_revision())
            })
            .collect()
    }

    /// Deletes `key`.
    pub fn delete(&self, key: &str) {
        let mut c = self.client.clone();
        self.run(async move { c.delete(key, None).await });
    }

    /// The store's current revision.
    pub fn revision(&self) -> i64 {
        let mut c = self.client.clone();
        let r = self.run(async move { c.get("/", None).await });
        r.header().map_or(0, |h| h.revision())
    }

    /// Compacts history up to `revision`, waiting until it is applied.
    pub fn compact(&self, revision: i64) {
        let mut c = self.client.clone();
        self.run(async move {
            c.compact(revision, Some(CompactionOptions::new().with_physical()))
                .await
        });
    }

    /// Creates `root` with `password`, gives it the root role and turns authentication on.
    pub fn enable_auth(&self, password: &str) {
        let mut c = self.client.clone();
        self.run(async move { c.user_add("root", password, None).await });
        let mut c = self.client.clone();
        self.run(async move { c.user_grant_role("root", "root").await });
        let mut c = self.client.clone();
        self.run(async move { c.auth_enable().await });
    }

    /// The member ID of the leader, as the member at `endpoint` sees it, and that member's own ID.
    pub fn leader_seen_by(endpoint: &str) -> Option<(u64, u64)> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let mut c = Client::connect([endpoint], None).await.ok()?;
            let status = tokio::time::timeout(Duration::from_secs(2), c.status())
                .await
                .ok()?
                .ok()?;
            let own = status.header().map(|h| h.member_id())?;
            Some((status.leader(), own))
        })
    }
}

/// A certificate authority with a server certificate for 127.0.0.1 and a client certificate,
/// as PEM files in a temporary directory.
pub struct Pki {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    _dir: tempfile::TempDir,
}

impl Pki {
    /// Makes a fresh CA and signs the two certificates with it.
    pub fn generate() -> Pki {
        use rcgen::{
            BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
            KeyUsagePurpose,
        };
        let dir = tempfile::tempdir().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(DnType::CommonName, "skyline test CA");
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
        let write = |name: &str, pem: String| {
            let path = dir.path().join(name);
            std::fs::write(&path, pem).unwrap();
            path
        };
        let leaf = |name: &str| {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
            params.distinguished_name.push(DnType::CommonName, name);
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
            let cert = params.signed_by(&key, &ca).unwrap();
            (
                write(&format!("{name}.pem"), cert.pem()),
                write(&format!("{name}-key.pem"), key.serialize_pem()),
            )
        };
        let (server_cert, server_key) = leaf("server");
        let (client_cert, client_key) = leaf("client");
        Pki {
            ca: write("ca.pem", ca.pem()),
            server_cert,
            server_key,
            client_cert,
            client_key,
            _dir: dir,
        }
    }
}

/// A TCP proxy in front of one etcd endpoint: `cut` closes every connection and refuses new
/// ones (skyline sees etcd gone while etcd stays up), `restore` lets connections through again.
pub struct Proxy {
    pub port: u16,
    open: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    /// Starts proxying 127.0.0.1:`port` to `target`.
    pub fn start(target: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let open = Arc::new(AtomicBool::new(true));
        let stop = Arc::new(AtomicBool::new(false));
        let connections: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (o, s, c) = (Arc::clone(&open), Arc::clone(&stop), Arc::clone(&connections));
        std::thread::spawn(move || {
            for incoming in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = incoming else { continue };
                if !o.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                let mut held = c.lock().unwrap();
                held.push(client.try_clone().unwrap());
                held.push(server.try_clone().unwrap());
                drop(held);
                pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
                pipe(server, client);
            }
        });
        Proxy {
            port,
            open,
            stop,
            connections,
        }
    }

    /// The URL skyline connects to.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Closes every proxied connection and refuses new ones. Called from `Drop` too: a lock
    /// left poisoned by a panicked proxy thread is taken all the same, not unwrapped.
    pub fn cut(&self) {
        self.open.store(false, Ordering::SeqCst);
        let mut connections = self.connections.lock().unwrap_or_else(PoisonError::into_inner);
        for s in connections.drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// Lets new connections through again.
    pub fn restore(&self) {
        self.open.store(true, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.cut();
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Copies `from` to `to` on a thread until either side closes.
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut from, &mut to);
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}

/// Longest wait for a change in etcd to show in answers (they take milliseconds; the bound is
/// for slow CI machines and reconnection backoff).
pub const VISIBLE: Duration = Duration::from_secs(10);

/// skyline on etcd at `endpoints`; `--no-rec` keeps names outside the zones from being
/// forwarded anywhere (tests send traffic to this machine only).
pub fn start_skyline(endpoints: &str) -> Skyline {
    Skyline::start_with(&["--machines", endpoints, "--no-rec"], &[])
}

/// The A and AAAA addresses of an answer.
pub fn addresses(reply: &Message) -> BTreeSet<String> {
    reply
        .answers()
        .iter()
        .filter(|r| matches!(r.record_type(), RecordType::A | RecordType::AAAA))
        .map(|r| r.data().unwrap().to_string())
        .collect()
}

/// A set of strings, to compare answers with.
pub fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Waits until `name` answers A with exactly `expected`.
pub fn wait_for(s: &Skyline, name: &str, expected: &[&str]) {
    let expected = (ResponseCode::NoError, set(expected));
    let deadline = Instant::now() + VISIBLE;
    loop {
        let reply = s.udp(name, RecordType::A);
        let got = (reply.response_code(), addresses(&reply));
        if got == expected {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} A: expected {expected:?} within {VISIBLE:?}, last {got:?}; log:\n{}",
            s.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until `name` answers with `rcode`.
pub fn wait_for_rcode(s: &Skyline, name: &str, rcode: ResponseCode) {
    eventually(VISIBLE, &format!("{name} A → {rcode:?}"), || {
        s.udp(name, RecordType::A).response_code() == rcode
    });
}
