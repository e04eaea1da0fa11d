//! A fake Kubernetes API server on 127.0.0.1 speaking the real list/watch protocol
//! (docs/kubernetes-dns.md, "The list/watch protocol"), for end-to-end tests of the Kubernetes
//! source through the real binary:
//! - LIST: `GET /api/v1/services` (and namespaces, pods, `/apis/discovery.k8s.io/v1/endpointslices`)
//!   answers a `…List` with `metadata.resourceVersion`, items filtered by `labelSelector`, in
//!   pages of `limit` items chained by `continue` tokens;
//! - WATCH: `?watch=true&resourceVersion=N` answers HTTP 200 with a chunked body of one JSON
//!   event per line (ADDED, MODIFIED, DELETED, BOOKMARK), replaying every event after N, then
//!   following new ones; a version older than the history kept gets an in-stream ERROR with a
//!   410 Status, as the real server sends for an expired version.
//!
//! Objects are real-shaped JSON (as `kubectl get -o json` shows them, lists without per-item
//! `kind`); resourceVersions come from one global counter. The server can expire every watch
//! ([`FakeApi::expire`]), be killed ([`FakeApi::kill`]), come back on the same port with the
//! same objects ([`FakeApi::restart`]), and hold back every LIST ([`FakeApi::hold_lists`]).
//!
//! [`FakeApi::start_tls`] serves HTTPS instead, as every real API server does: a fresh CA signs
//! its certificate for 127.0.0.1 and localhost and a client certificate, and a request
//! authenticated by neither that client certificate nor a bearer token gets 401.

#![allow(dead_code)]

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection, StreamOwned};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

/// How often an idle watch gets a BOOKMARK.
const BOOKMARK_EVERY: Duration = Duration::from_millis(500);

/// The kinds of objects served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Resource {
    Namespace,
    Service,
    EndpointSlice,
    Pod,
}

impl Resource {
    fn of_kind(kind: &str) -> Resource {
        match kind {
            "Namespace" => Resource::Namespace,
            "Service" => Resource::Service,
            "EndpointSlice" => Resource::EndpointSlice,
            "Pod" => Resource::Pod,
            other => panic!("the fake API server does not serve {other}"),
        }
    }

    fn kind(self) -> &'static str {
        match self {
            Resource::Namespace => "Namespace",
            Resource::Service => "Service",
            Resource::EndpointSlice => "EndpointSlice",
            Resource::Pod => "Pod",
        }
    }

    fn api_version(self) -> &'static str {
        match self {
            Resource::EndpointSlice => "discovery.k8s.io/v1",
            _ => "v1",
        }
    }

    fn of_path(path: &str) -> Option<Resource> {
        match path {
            "/api/v1/namespaces" => Some(Resource::Namespace),
            "/api/v1/services" => Some(Resource::Service),
            "/apis/discovery.k8s.io/v1/endpointslices" => Some(Resource::EndpointSlice),
            "/api/v1/pods" => Some(Resource::Pod),
            _ => None,
        }
    }
}

type Key = (Resource, String, String);

struct Event {
    rv: u64,
    resource: Resource,
    kind: &'static str,
    object: Value,
}

#[derive(Default)]
struct State {
    rv: u64,
    objects: BTreeMap<Key, Value>,
    log: Vec<Event>,
    /// Watches from a version below this get 410: the history before it is gone.
    oldest: u64,
    /// Bumped by [`FakeApi::expire`]: open watches end with a 410 ERROR.
    epoch: u64,
    down: bool,
    connections: Vec<TcpStream>,
    lists: BTreeMap<Resource, u64>,
    watches: BTreeMap<Resource, u64>,
    /// Set by [`FakeApi::hold_lists`]: LISTs wait until it is cleared.
    lists_held: bool,
    /// Requests by how they were authenticated: `client certificate`, `bearer <token>`, `none`.
    authenticated: BTreeMap<String, u64>,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    listener_generation: AtomicU64,
    /// In TLS mode, what each connection is served with.
    tls: Option<Arc<ServerConfig>>,
}

/// The fake API server.
pub struct FakeApi {
    pub addr: SocketAddr,
    /// The CA and client certificate of a server started with [`FakeApi::start_tls`].
    pub pki: Option<Pki>,
    shared: Arc<Shared>,
}

impl FakeApi {
    /// Starts on an ephemeral port of 127.0.0.1, with no objects.
    pub fn start() -> FakeApi {
        FakeApi::start_serving(None)
    }

    /// Starts serving HTTPS on an ephemeral port of 127.0.0.1, with no objects, under a fresh
    /// [`Pki`]: the server accepts requests authenticated by its client certificate or by any
    /// bearer token.
    pub fn start_tls() -> FakeApi {
        let pki = Pki::generate();
        let mut api = FakeApi::start_serving(Some(pki.server_config()));
        api.pki = Some(pki);
        api
    }

    fn start_serving(tls: Option<Arc<ServerConfig>>) -> FakeApi {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                rv: 1000,
                oldest: 0,
                ..State::default()
            }),
            changed: Condvar::new(),
            listener_generation: AtomicU64::new(0),
            tls,
        });
        spawn_listener(listener, Arc::clone(&shared));
        FakeApi {
            addr,
            pki: None,
            shared,
        }
    }

    /// Starts on `addr` (a port that was free), with no objects.
    pub fn start_on(addr: SocketAddr) -> FakeApi {
        let listener = bind_retrying(addr);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                rv: 1000,
                ..State::default()
            }),
            changed: Condvar::new(),
            listener_generation: AtomicU64::new(0),
            tls: None,
        });
        spawn_listener(listener, Arc::clone(&shared));
        FakeApi {
            addr,
            pki: None,
            shared,
        }
    }

    /// Writes a kubeconfig pointing at this server into `dir`: plain HTTP with a bearer token,
    /// or in TLS mode the server's CA and its client certificate, as `kubeadm` writes them.
    pub fn kubeconfig(&self, dir: &Path) -> PathBuf {
        match &self.pki {
            Some(pki) => self.kubeconfig_tls(dir, &pki.ca, Credential::ClientCertificate),
            None => kubeconfig_for(self.addr, dir),
        }
    }

    /// Writes a kubeconfig for this server in TLS mode into `dir`, trusting the CA
    /// `ca_pem` and authenticating with `credential`.
    pub fn kubeconfig_tls(&self, dir: &Path, ca_pem: &str, credential: Credential) -> PathBuf {
        let pki = self.pki.as_ref().expect("a server started with start_tls");
        let user = match credential {
            Credential::ClientCertificate => format!(
                "    client-certificate-data: {}\n    client-key-data: {}\n",
                base64(pki.client_cert.as_bytes()),
                base64(pki.client_key.as_bytes())
            ),
            Credential::Token(token) => format!("    token: {token}\n"),
        };
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: https://{}\n\
             \x20   certificate-authority-data: {}\n\
             contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: tester\n\
             current-context: fake\nusers:\n- name: tester\n  user:\n{user}",
            self.addr,
            base64(ca_pem.as_bytes())
        );
        let path = dir.join("kubeconfig");
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Makes every LIST wait, as an API server under load or still starting does, until
    /// [`FakeApi::release_lists`]; watches are not held.
    pub fn hold_lists(&self) {
        self.shared.state.lock().unwrap().lists_held = true;
    }

    /// Answers the LISTs held by [`FakeApi::hold_lists`], and every later one at once.
    pub fn release_lists(&self) {
        self.shared.state.lock().unwrap().lists_held = false;
        self.shared.changed.notify_all();
    }

    /// How many requests were authenticated as `how`: `client certificate`, `bearer <token>`
    /// or `none` (then refused in TLS mode).
    pub fn authenticated(&self, how: &str) -> u64 {
        *self.shared.state.lock().unwrap().authenticated.get(how).unwrap_or(&0)
    }

    /// Creates or replaces an object (ADDED or MODIFIED), stamping a new resourceVersion.
    pub fn apply(&self, mut object: Value) {
        let resource = Resource::of_kind(object["kind"].as_str().unwrap());
        let meta = &object["metadata"];
        let key = (
            resource,
            meta["namespace"].as_str().unwrap_or("").to_owned(),
            meta["name"].as_str().unwrap().to_owned(),
        );
        let mut state = self.shared.state.lock().unwrap();
        state.rv += 1;
        let rv = state.rv;
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        if object["metadata"]["uid"].is_null() {
            object["metadata"]["uid"] = json!(format!("uid-{}-{}-{}", key.1, key.2, rv));
        }
        let kind = if state.objects.contains_key(&key) {
            "MODIFIED"
        } else {
            "ADDED"
        };
        state.objects.insert(key, object.clone());
        state.log.push(Event {
            rv,
            resource,
            kind,
            object,
        });
        self.shared.changed.notify_all();
    }

    /// Deletes an object (DELETED with its last state).
    pub fn delete(&self, resource: Resource, namespace: &str, name: &str) {
        let mut state = self.shared.state.lock().unwrap();
        let Some(mut object) = state.objects.remove(&(resource, namespace.to_owned(), name.to_owned())) else {
            panic!("no {resource:?} {namespace}/{name} to delete");
        };
        state.rv += 1;
        let rv = state.rv;
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        state.log.push(Event {
            rv,
            resource,
            kind: "DELETED",
            object,
        });
        self.shared.changed.notify_all();
    }

    /// Deletes an object with no event, as if its DELETED event were compacted away before a
    /// watch saw it: only a re-list can tell.
    pub fn delete_unseen(&self, resource: Resource, namespace: &str, name: &str) {
        let mut state = self.shared.state.lock().unwrap();
        state.objects.remove(&(resource, namespace.to_owned(), name.to_owned()));
        state.rv += 1;
    }

    /// Forgets the event history and ends every open watch with an ERROR 410 Gone, as an API
    /// server does when the versions its clients hold have been compacted: they must list again.
    pub fn expire(&self) {
        let mut state = self.shared.state.lock().unwrap();
        state.oldest = state.rv + 1;
        state.log.clear();
        state.epoch += 1;
        self.shared.changed.notify_all();
    }

    /// Stops serving: the listener closes and every connection is cut. Objects are kept.
    /// Called from `Drop` too: a state lock left poisoned by a panicked server thread is taken
    /// all the same, not unwrapped.
    pub fn kill(&self) {
        let mut state = self.shared.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.down = true;
        for connection in state.connections.drain(..) {
            let _ = connection.shutdown(Shutdown::Both);
        }
        self.shared.listener_generation.fetch_add(1, Ordering::SeqCst);
        self.shared.changed.notify_all();
        drop(state);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }

    /// Serves again on the same port, with the same objects and history.
    pub fn restart(&self) {
        let listener = bind_retrying(self.addr);
        self.shared.state.lock().unwrap().down = false;
        spawn_listener(listener, Arc::clone(&self.shared));
    }

    /// How many LISTs of `resource` were answered.
    pub fn lists(&self, resource: Resource) -> u64 {
        *self.shared.state.lock().unwrap().lists.get(&resource).unwrap_or(&0)
    }

    /// How many WATCHes of `resource` were opened.
    pub fn watches(&self, resource: Resource) -> u64 {
        *self.shared.state.lock().unwrap().watches.get(&resource).unwrap_or(&0)
    }
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A kubeconfig for a plain-HTTP API server at `addr`.
pub fn kubeconfig_for(addr: SocketAddr, dir: &Path) -> PathBuf {
    let path = dir.join("kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: http://{addr}\n\
         contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: tester\n\
         current-context: fake\nusers:\n- name: tester\n  user:\n    token: not-a-secret\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn bind_retrying(addr: SocketAddr) -> TcpListener {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match TcpListener::bind(addr) {
            Ok(listener) => return listener,
            Err(_) if Instant::now() < deadline => thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("cannot bind {addr}: {e}"),
        }
    }
}

fn spawn_listener(listener: TcpListener, shared: Arc<Shared>) {
    let generation = shared.listener_generation.load(Ordering::SeqCst);
    thread::spawn(move || {
        for stream in listener.incoming() {
            if shared.listener_generation.load(Ordering::SeqCst) != generation {
                return;
            }
            let Ok(stream) = stream else { continue };
            {
                let mut state = shared.state.lock().unwrap();
                if state.down {
                    return;
                }
                if let Ok(clone) = stream.try_clone() {
                    state.connections.push(clone);
                }
            }
            let shared = Arc::clone(&shared);
            thread::spawn(move || match shared.tls.clone() {
                Some(config) => {
                    if let Ok(connection) = ServerConnection::new(config) {
                        serve_connection(StreamOwned::new(connection, stream), &shared);
                    }
                }
                None => serve_connection(stream, &shared),
            });
        }
    });
}

/// A connection, plain or TLS (the handshake happens on its first read).
trait Connection: Read + Write {
    /// Whether the client presented a certificate the server's CA signed (the TLS handshake
    /// refuses any other).
    fn client_certificate(&self) -> bool;
}

impl Connection for TcpStream {
    fn client_certificate(&self) -> bool {
        false
    }
}

impl Connection for StreamOwned<ServerConnection, TcpStream> {
    fn client_certificate(&self) -> bool {
        self.conn
            .peer_certificates()
            .is_some_and(|certificates| !certificates.is_empty())
    }
}

/// One request: path, query parameters and the bearer token, if any.
struct Request {
    path: String,
    query: BTreeMap<String, String>,
    token: Option<String>,
}

fn read_request(reader: &mut BufReader<impl Read>) -> Option<Request> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let target = line.split_whitespace().nth(1)?.to_owned();
    let mut token = None;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).ok()? == 0 {
            return None;
        }
        if header == "\r\n" || header == "\n" {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("authorization") {
                token = value.trim().strip_prefix("Bearer ").map(str::to_owned);
            }
        }
    }
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let query = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_owned(), percent_decode(v))
        })
        .collect();
    Some(Request {
        path: path.to_owned(),
        query,
        token,
    })
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 3 <= bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => out.push(b),
                    Err(_) => out.extend_from_slice(&bytes[i..i + 3]),
                }
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn serve_connection(stream: impl Connection, shared: &Shared) {
    let mut reader = BufReader::new(stream);
    while let Some(request) = read_request(&mut reader) {
        let how = match (&request.token, reader.get_ref().client_certificate()) {
            (_, true) => "client certificate".to_owned(),
            (Some(token), false) => format!("bearer {token}"),
            (None, false) => "none".to_owned(),
        };
        {
            let mut state = shared.state.lock().unwrap();
            if state.down {
                return;
            }
            *state.authenticated.entry(how.clone()).or_default() += 1;
        }
        let writer = reader.get_mut();
        let ok = if shared.tls.is_some() && how == "none" {
            respond(
                writer,
                401,
                &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                        "message": "Unauthorized", "reason": "Unauthorized", "code": 401}),
            )
        } else if request.path == "/version" {
            respond(
                writer,
                200,
                &json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0"}),
            )
        } else if let Some(resource) = Resource::of_path(&request.path) {
            let watch = matches!(request.query.get("watch").map(String::as_str), Some("true" | "1"));
            if watch {
                watch_stream(writer, shared, resource, &request)
            } else {
                list(writer, shared, resource, &request)
            }
        } else {
            respond(
                writer,
                404,
                &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                        "message": format!("the server could not find the requested resource {}", request.path),
                        "reason": "NotFound", "code": 404}),
            )
        };
        if !ok {
            return;
        }
    }
}

fn respond(writer: &mut impl Write, code: u16, body: &Value) -> bool {
    let body = body.to_string();
    let reason = match code {
        200 => "OK",
        401 => "Unauthorized",
        _ => "Not Found",
    };
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    writer.write_all(head.as_bytes()).is_ok() && writer.write_all(body.as_bytes()).is_ok() && writer.flush().is_ok()
}

/// Whether `object`'s labels satisfy a label selector (`k=v`, `k==v`, `k!=v`, `k`, `!k`).
fn selected(object: &Value, selector: Option<&String>) -> bool {
    let Some(selector) = selector.filter(|s| !s.is_empty()) else {
        return true;
    };
    let labels = &object["metadata"]["labels"];
    selector.split(',').all(|term| {
        if let Some((k, v)) = term.split_once("!=") {
            labels[k].as_str() != Some(v)
        } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
            labels[k].as_str() == Some(v)
        } else if let Some(k) = term.strip_prefix('!') {
            labels[k].is_null()
        } else {
            !labels[term].is_null()
        }
    })
}

fn list(writer: &mut impl Write, shared: &Shared, resource: Resource, request: &Request) -> bool {
    let body = {
        let mut state = shared.state.lock().unwrap();
        while state.lists_held && !state.down {
            state = shared
                .changed
                .wait_timeout(state, Duration::from_millis(100))
                .unwrap()
                .0;
        }
        if state.down {
            return false;
        }
        *state.lists.entry(resource).or_default() += 1;
        let offset: usize = request.query.get("continue").and_then(|c| c.parse().ok()).unwrap_or(0);
        let limit: usize = request
            .query
            .get("limit")
            .and_then(|l| l.parse().ok())
            .filter(|&l| l > 0)
            .unwrap_or(usize::MAX);
        let mut matching = state
            .objects
            .iter()
            .filter(|((r, _, _), object)| *r == resource && selected(object, request.query.get("labelSelector")))
            .skip(offset);
        let items: Vec<Value> = matching
            .by_ref()
            .take(limit)
            .map(|(_, object)| {
                let mut item = object.clone();
                if let Some(map) = item.as_object_mut() {
                    map.remove("kind");
                    map.remove("apiVersion");
                }
                item
            })
            .collect();
        let more = matching.next().is_some();
        let mut metadata = json!({"resourceVersion": state.rv.to_string()});
        if more {
            metadata["continue"] = json!((offset + items.len()).to_string());
        }
        json!({
            "kind": format!("{}List", resource.kind()),
            "apiVersion": resource.api_version(),
            "metadata": metadata,
            "items": items,
        })
    };
    respond(writer, 200, &body)
}

fn chunk(writer: &mut impl Write, line: &Value) -> bool {
    let mut data = line.to_string();
    data.push('\n');
    let framed = format!("{:x}\r\n{data}\r\n", data.len());
    writer.write_all(framed.as_bytes()).is_ok() && writer.flush().is_ok()
}

fn gone(rv: u64, oldest: u64) -> Value {
    json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": format!("too old resource version: {rv} ({oldest})"),
        "reason": "Expired", "code": 410}})
}

fn watch_stream(writer: &mut impl Write, shared: &Shared, resource: Resource, request: &Request) -> bool {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    if writer.write_all(head.as_bytes()).is_err() {
        return false;
    }
    let selector = request.query.get("labelSelector");
    let timeout = request
        .query
        .get("timeoutSeconds")
        .and_then(|t| t.parse().ok())
        .filter(|&t: &u64| t > 0)
        .unwrap_or(290);
    let deadline = Instant::now() + Duration::from_secs(timeout);
    let mut state = shared.state.lock().unwrap();
    *state.watches.entry(resource).or_default() += 1;
    let mut from: u64 = request
        .query
        .get("resourceVersion")
        .and_then(|v| v.parse().ok())
        .filter(|&v| v != 0)
        .unwrap_or(state.rv);
    if from < state.oldest {
        let event = gone(from, state.oldest);
        drop(state);
        return chunk(writer, &event) && writer.write_all(b"0\r\n\r\n").is_ok();
    }
    let epoch = state.epoch;
    let mut last_write = Instant::now();
    loop {
        if state.down {
            return false;
        }
        if state.epoch != epoch {
            let event = gone(from, state.oldest);
            drop(state);
            return chunk(writer, &event) && writer.write_all(b"0\r\n\r\n").is_ok();
        }
        let pending: Vec<Value> = state
            .log
            .iter()
            .filter(|e| e.rv > from && e.resource == resource && selected(&e.object, selector))
            .map(|e| json!({"type": e.kind, "object": e.object}))
            .collect();
        from = state.rv;
        let bookmark = pending.is_empty() && last_write.elapsed() >= BOOKMARK_EVERY;
        let rv = state.rv;
        drop(state);
        for event in &pending {
            if !chunk(writer, event) {
                return false;
            }
            last_write = Instant::now();
        }
        if bookmark {
            let event = json!({"type": "BOOKMARK", "object": {"kind": resource.kind(),
                "apiVersion": resource.api_version(), "metadata": {"resourceVersion": rv.to_string()}}});
            if !chunk(writer, &event) {
                return false;
            }
            last_write = Instant::now();
        }
        if Instant::now() >= deadline {
            return writer.write_all(b"0\r\n\r\n").is_ok();
        }
        state = shared.state.lock().unwrap();
        if state.rv == from && !state.down && state.epoch == epoch {
            state = shared
                .changed
                .wait_timeout(state, Duration::from_millis(100))
                .unwrap()
                .0;
        }
    }
}

/// How a TLS kubeconfig authenticates.
pub enum Credential<'a> {
    /// `client-certificate-data` and `client-key-data`: the client certificate of the
    /// server's [`Pki`].
    ClientCertificate,
    /// `token`: a bearer token.
    Token(&'a str),
}

/// A certificate authority with a server certificate for 127.0.0.1 and localhost and a client
/// certificate, in PEM.
pub struct Pki {
    /// The CA's certificate.
    pub ca: String,
    server_cert: CertificateDer<'static>,
    server_key: Vec<u8>,
    ca_der: CertificateDer<'static>,
    client_cert: String,
    client_key: String,
}

impl Pki {
    /// Makes a fresh CA and signs the two certificates with it.
    pub fn generate() -> Pki {
        use rcgen::{
            BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
            KeyUsagePurpose,
        };
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "fake API server CA");
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
        let leaf = |name: &str, usage: ExtendedKeyUsagePurpose| {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
            params.distinguished_name.push(DnType::CommonName, name);
            params.extended_key_usages = vec![usage];
            (params.signed_by(&key, &ca).unwrap(), key)
        };
        let (server, server_key) = leaf("kube-apiserver", ExtendedKeyUsagePurpose::ServerAuth);
        let (client, client_key) = leaf("skyline", ExtendedKeyUsagePurpose::ClientAuth);
        Pki {
            ca: ca.pem(),
            ca_der: ca.der().clone(),
            server_cert: server.der().clone(),
            server_key: server_key.serialize_der(),
            client_cert: client.pem(),
            client_key: client_key.serialize_pem(),
        }
    }

    /// The server's TLS settings: its certificate, and client certificates verified against
    /// the CA when presented (a bearer token may authenticate instead).
    fn server_config(&self) -> Arc<ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = RootCertStore::empty();
        roots.add(self.ca_der.clone()).unwrap();
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
            .allow_unauthenticated()
            .build()
            .unwrap();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.server_key.clone()));
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(vec![self.server_cert.clone()], key)
            .unwrap();
        Arc::new(config)
    }
}

/// Standard base64 with padding (RFC 4648 §4), as kubeconfig `*-data` fields hold.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let b = [group[0], *group.get(1).unwrap_or(&0), *group.get(2).unwrap_or(&0)];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= group.len() {
                out.push(char::from(ALPHABET[(n >> shift & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Objects as the API server returns them.
pub mod objects {
    use serde_json::{json, Value};

    /// A Namespace.
    pub fn namespace(name: &str) -> Value {
        json!({"kind": "Namespace", "apiVersion": "v1",
            "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name},
                         "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
    }

    /// A port: `(name, port, protocol)`; an empty name is an unnamed port.
    pub type Port<'a> = (&'a str, u16, &'a str);

    fn service_ports(ports: &[Port<'_>], target: u16) -> Vec<Value> {
        ports
            .iter()
            .map(|(name, port, protocol)| {
                let mut p = json!({"port": port, "protocol": protocol, "targetPort": target});
                if !name.is_empty() {
                    p["name"] = json!(name);
                }
                p
            })
            .collect()
    }

    /// A ClusterIP service with `ips` (dual stack when two), target port 8080.
    pub fn cluster_ip(ns: &str, name: &str, ips: &[&str], ports: &[Port<'_>]) -> Value {
        let families: Vec<&str> = ips
            .iter()
            .map(|ip| if ip.contains(':') { "IPv6" } else { "IPv4" })
            .collect();
        json!({"kind": "Service", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": name},
                         "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"type": "ClusterIP", "clusterIP": ips[0], "clusterIPs": ips,
                     "ipFamilies": families,
                     "ipFamilyPolicy": if ips.len() > 1 { "PreferDualStack" } else { "SingleStack" },
                     "ports": service_ports(ports, 8080), "selector": {"app": name},
                     "sessionAffinity": "None", "internalTrafficPolicy": "Cluster"},
            "status": {"loadBalancer": {}}})
    }

    /// A headless service.
    pub fn headless(ns: &str, name: &str, ports: &[Port<'_>]) -> Value {
        json!({"kind": "Service", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
            "spec": {"type": "ClusterIP", "clusterIP": "None", "clusterIPs": ["None"],
                     "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                     "ports": service_ports(ports, 8080), "selector": {"app": name},
                     "sessionAffinity": "None"},
            "status": {"loadBalancer": {}}})
    }

    /// An ExternalName service.
    pub fn external(ns: &str, name: &str, target: &str) -> Value {
        json!({"kind": "Service", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"type": "ExternalName", "externalName": target, "sessionAffinity": "None"},
            "status": {"loadBalancer": {}}})
    }

    /// One endpoint of a slice: `(address, ready, hostname)`.
    pub type Endpoint<'a> = (&'a str, bool, Option<&'a str>);

    /// An EndpointSlice of `service` with the addresses' family, target ports `ports`.
    pub fn slice(ns: &str, name: &str, service: &str, ports: &[Port<'_>], endpoints: &[Endpoint<'_>]) -> Value {
        let family = if endpoints.first().is_some_and(|e| e.0.contains(':')) {
            "IPv6"
        } else {
            "IPv4"
        };
        let endpoints: Vec<Value> = endpoints
            .iter()
            .enumerate()
            .map(|(i, (address, ready, hostname))| {
                let pod = format!("{service}-pod-{i}");
                let mut e = json!({"addresses": [address],
                    "conditions": {"ready": ready, "serving": ready, "terminating": false},
                    "nodeName": "node-1",
                    "targetRef": {"kind": "Pod", "namespace": ns, "name": pod, "uid": format!("uid-{pod}")}});
                if let Some(h) = hostname {
                    e["hostname"] = json!(h);
                }
                e
            })
            .collect();
        let ports: Vec<Value> = ports
            .iter()
            .map(|(name, port, protocol)| json!({"name": name, "port": port, "protocol": protocol}))
            .collect();
        json!({"kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
            "metadata": {"name": name, "namespace": ns, "generateName": format!("{service}-"),
                "labels": {"kubernetes.io/service-name": service,
                           "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": service,
                                     "uid": format!("uid-{service}"), "controller": true,
                                     "blockOwnerDeletion": true}]},
            "addressType": family, "endpoints": endpoints, "ports": ports})
    }

    /// A running Pod with `ip`.
    pub fn pod(ns: &str, name: &str, ip: &str) -> Value {
        json!({"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
            "spec": {"containers": [{"name": "main", "image": "registry.example/app:1"}],
                     "nodeName": "node-1"},
            "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}})
    }
}
