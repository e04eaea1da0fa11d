//! The HTTP/1.1 listener and its routes. Every connection is bounded in time, header size and
//! number, so that a slow or hostile client costs at most a few kilobytes and one of
//! [`MAX_CONNECTIONS`] slots for at most [`CONNECTION_TIMEOUT`], and never touches the DNS
//! workers: the handlers only load atomics.

use super::metrics::{self, Metrics};
use super::process::Process;
use super::ready;
use super::report::{Observed, Report};
use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::Semaphore;

/// Connections served at once. Scrapers and probes need a handful; past this a new connection
/// is closed at once rather than queued, so a probe fails fast instead of timing out.
const MAX_CONNECTIONS: usize = 64;

/// How long a client may take to send its request line and headers, which a real client sends
/// in one packet.
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a connection may live, from accept to the end of the response: also bounds a
/// client that never reads its response. Prometheus' default scrape timeout is 10 s as well.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(10);

/// Request line and headers together, in bytes; larger requests get 431. The endpoints read no
/// header at all, so this only has to admit ordinary clients.
const MAX_HEADER_BYTES: usize = 8 * 1024;

/// Headers per request; more get 431.
const MAX_HEADERS: usize = 32;

/// The connection's read buffer at most (hyper's minimum is 8 KiB).
const MAX_BUFFER_BYTES: usize = 16 * 1024;

/// Pending-connection queue of the listener.
const LISTEN_BACKLOG: u32 = 128;

/// Pause after a failed accept (out of file descriptors, say), so that the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Why the endpoints could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// The address could not be bound (in use, not local, no permission).
    #[error("cannot serve HTTP on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// Another process listens on the address: the HTTP port is never shared, so that probes
    /// and scrapes reach this process and no other.
    #[error("cannot serve HTTP on {addr}: another process holds the address (the HTTP port is never shared)")]
    Held {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// A listener handed over by a replaced skyline is not usable.
    #[error("cannot serve HTTP on the listener handed over: {source}")]
    Adopt {
        /// Why.
        source: io::Error,
    },
}

/// What `/ready` and `/metrics` say: the DNS server's [`Observed`] sources and counters, or
/// another program's own (kube2etcd), served by the same bounded listener.
pub trait Endpoints: Send + Sync + 'static {
    /// `/ready`: `Ok(None)` when ready, `Ok(Some(note))` when ready with a note worth a line,
    /// `Err(why)` when not.
    fn readiness(&self) -> Result<Option<String>, String>;
    /// `/metrics`, in the Prometheus text format 0.0.4.
    fn metrics(&self) -> String;
}

impl Endpoints for Observed {
    fn readiness(&self) -> Result<Option<String>, String> {
        readiness(&self.report(SystemTime::now()))
    }

    fn metrics(&self) -> String {
        let mut text = Metrics(&self.report(SystemTime::now())).to_string();
        text.push_str(&Process::read().to_string());
        text
    }
}

/// A DNS server's readiness, as [`Endpoints::readiness`] says it.
fn readiness(report: &Report) -> Result<Option<String>, String> {
    match (ready::check(report), ready::stale(report)) {
        (Ok(()), stale) => Ok(stale.map(|stale| stale.to_string())),
        (Err(not_ready), _) => Err(not_ready.to_string()),
    }
}

/// The bound listener of `/health`, `/ready` and `/metrics`.
pub struct HttpServer {
    listener: TcpListener,
    local_addr: SocketAddr,
    endpoints: Arc<dyn Endpoints>,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

/// How often a held HTTP port is tried again ([`HttpServer::serve_once_free`]): its holder
/// drains within seconds, and a probe period is 10 s.
const HELD_PORT_RETRY: Duration = Duration::from_millis(500);

impl HttpServer {
    /// Binds `addr` now, so that a bad address is a start error rather than a log line later.
    /// Unlike the DNS ports the listener is never shared (no `SO_REUSEPORT`): a `/ready` probe
    /// must reach the process it asks about, and a port another process holds (another
    /// skyline's DNS over TCP, say) must be an error, not a listener that joins it. An in-place
    /// upgrade hands the listener over instead ([`HttpServer::from_std`]).
    /// Must run within a tokio runtime.
    pub async fn bind(addr: SocketAddr, endpoints: impl Endpoints) -> Result<HttpServer, HttpError> {
        let bind_error = |source| HttpError::Bind { addr, source };
        let socket = if addr.is_ipv4() {
            TcpSocket::new_v4()
        } else {
            TcpSocket::new_v6()
        }
        .map_err(bind_error)?;
        socket.set_reuseaddr(true).map_err(bind_error)?;
        socket.bind(addr).map_err(|source| match source.kind() {
            io::ErrorKind::AddrInUse => HttpError::Held { addr },
            _ => bind_error(source),
        })?;
        let listener = socket.listen(LISTEN_BACKLOG).map_err(bind_error)?;
        let local_addr = listener.local_addr().map_err(bind_error)?;
        Ok(HttpServer {
            listener,
            local_addr,
            endpoints: Arc::new(endpoints),
        })
    }

    /// Binds `addr` as soon as no other process holds it, then serves, forever: for a process
    /// started beside another on purpose (`--reuse-port`, a surge update), whose HTTP port it
    /// takes over once that process exits, never sharing it. Any other bind error is logged and
    /// ends the future. Spawn it on a tokio runtime with time enabled.
    pub async fn serve_once_free(addr: SocketAddr, endpoints: impl Endpoints + Clone) {
        loop {
            match HttpServer::bind(addr, endpoints.clone()).await {
                Ok(server) => {
                    tracing::info!("http on http://{}", server.local_addr());
                    return server.serve().await;
                }
                Err(HttpError::Held { .. }) => tokio::time::sleep(HELD_PORT_RETRY).await,
                Err(e) => return tracing::error!(error = %e, "no HTTP listener"),
            }
        }
    }

    /// Serves on a listener bound elsewhere: the one a replaced skyline handed over. Must run
    /// within a tokio runtime.
    pub fn from_std(listener: std::net::TcpListener, endpoints: impl Endpoints) -> Result<HttpServer, HttpError> {
        let local_addr = listener.local_addr().map_err(|source| HttpError::Adopt { source })?;
        let adopt = |source| HttpError::Bind {
            addr: local_addr,
            source,
        };
        listener.set_nonblocking(true).map_err(adopt)?;
        let listener = TcpListener::from_std(listener).map_err(adopt)?;
        Ok(HttpServer {
            listener,
            local_addr,
            endpoints: Arc::new(endpoints),
        })
    }

    /// A second descriptor of the listener, for handing it to the skyline that replaces this
    /// one while this one still serves on it.
    pub fn handover(&self) -> io::Result<std::os::fd::OwnedFd> {
        use std::os::fd::AsFd as _;
        self.listener.as_fd().try_clone_to_owned()
    }

    /// The address bound, with the port the kernel chose when asked for port 0.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The future that accepts and serves connections, forever. Spawn it on a tokio runtime
    /// with time enabled.
    pub fn serve(self) -> impl Future<Output = ()> + Send + 'static {
        self.run()
    }

    async fn run(self) {
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let mut builder = http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_TIMEOUT)
            .max_header_size(MAX_HEADER_BYTES)
            .max_headers(MAX_HEADERS)
            .max_buf_size(MAX_BUFFER_BYTES)
            // One request per connection: nothing to bound between requests, and a scraper's
            // reconnect every few seconds costs nothing.
            .keep_alive(false);
        let mut failing = false;
        loop {
            let (stream, peer) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(error) => {
                    if !std::mem::replace(&mut failing, true) {
                        tracing::warn!(%error, "accepting HTTP connections fails; retrying");
                    }
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            };
            failing = false;
            let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                tracing::debug!(%peer, limit = MAX_CONNECTIONS, "HTTP connection closed: too many at once");
                continue;
            };
            let endpoints = Arc::clone(&self.endpoints);
            let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                let response = respond(&request, &*endpoints);
                async move { Ok::<_, Infallible>(response) }
            });
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            tokio::spawn(async move {
                let _slot = slot;
                match tokio::time::timeout(CONNECTION_TIMEOUT, connection).await {
                    Ok(Ok(())) => {}
                    Ok(Err(error)) => tracing::debug!(%peer, %error, "HTTP connection failed"),
                    Err(_) => tracing::debug!(%peer, "HTTP connection closed: too slow"),
                }
            });
        }
    }
}

/// The endpoints.
#[derive(Debug, Clone, Copy)]
enum Endpoint {
    Health,
    Ready,
    Metrics,
}

/// Answers one request; `endpoints` are read only for the paths that need them.
fn respond<B>(request: &Request<B>, endpoints: &dyn Endpoints) -> Response<Full<Bytes>> {
    let endpoint = match request.uri().path() {
        "/health" => Endpoint::Health,
        "/ready" => Endpoint::Ready,
        "/metrics" => Endpoint::Metrics,
        _ => return text(StatusCode::NOT_FOUND, PLAIN, "not found\n".into()),
    };
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response = text(StatusCode::METHOD_NOT_ALLOWED, PLAIN, "only GET and HEAD\n".into());
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    match endpoint {
        // Alive is all it says: the process answers HTTP, so its runtime is not wedged.
        Endpoint::Health => text(StatusCode::OK, PLAIN, "OK".into()),
        Endpoint::Ready => match endpoints.readiness() {
            Ok(None) => text(StatusCode::OK, PLAIN, "OK".into()),
            Ok(Some(note)) => text(StatusCode::OK, PLAIN, format!("{note}\n")),
            Err(not_ready) => text(StatusCode::SERVICE_UNAVAILABLE, PLAIN, format!("{not_ready}\n")),
        },
        Endpoint::Metrics => text(StatusCode::OK, metrics::CONTENT_TYPE, endpoints.metrics()),
    }
}

const PLAIN: &str = "text/plain; charset=utf-8";

fn text(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::report::Status;
    use http_body_util::BodyExt;

    impl Endpoints for Report {
        fn readiness(&self) -> Result<Option<String>, String> {
            readiness(self)
        }

        fn metrics(&self) -> String {
            Metrics(self).to_string()
        }
    }

    /// Endpoints that must not be read.
    struct Untouchable;

    impl Endpoints for Untouchable {
        fn readiness(&self) -> Result<Option<String>, String> {
            panic!("/health reads no counter")
        }

        fn metrics(&self) -> String {
            panic!("/health reads no counter")
        }
    }

    fn get(method: Method, path: &str, report: Report) -> (StatusCode, Response<Full<Bytes>>) {
        let request = Request::builder().method(method).uri(path).body(()).unwrap();
        let response = respond(&request, &report);
        (response.status(), response)
    }

    async fn body(response: Response<Full<Bytes>>) -> String {
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    fn etcd_not_ready() -> Report {
        Report {
            sources: vec![Status {
                name: "etcd",
                ready: Err("etcd (no complete read yet)"),
                loads: None,
                persisted: None,
                families: Vec::new(),
                histograms: Vec::new(),
            }],
            ..Report::default()
        }
    }

    #[tokio::test]
    async fn health_is_ok_whatever_the_sources_say() {
        let (status, response) = get(Method::GET, "/health", etcd_not_ready());
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body(response).await, "OK");
    }

    #[tokio::test]
    async fn ready_names_the_source_that_is_not() {
        let (status, response) = get(Method::GET, "/ready", etcd_not_ready());
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body(response).await, "not ready: etcd (no complete read yet)\n");
        let (status, response) = get(Method::GET, "/ready?verbose", Report::default());
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body(response).await, "OK");
    }

    #[tokio::test]
    async fn metrics_are_prometheus_text() {
        let (status, response) = get(Method::GET, "/metrics", Report::default());
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "text/plain; version=0.0.4; charset=utf-8"
        );
        assert!(body(response).await.contains(
            "\ncoredns_dns_requests_total{server=\"\",zone=\".\",proto=\"udp\",family=\"1\",type=\"A\"} 0\n"
        ));
    }

    #[test]
    fn other_paths_are_not_found_and_other_methods_not_allowed() {
        for path in ["/", "/metrics/", "/healthz", "/Health"] {
            assert_eq!(
                get(Method::GET, path, Report::default()).0,
                StatusCode::NOT_FOUND,
                "{path}"
            );
        }
        assert_eq!(get(Method::POST, "/nope", Report::default()).0, StatusCode::NOT_FOUND);
        for method in [Method::POST, Method::PUT, Method::DELETE, Method::OPTIONS] {
            let (status, response) = get(method, "/metrics", Report::default());
            assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
            assert_eq!(response.headers()[header::ALLOW], "GET, HEAD");
        }
        assert_eq!(get(Method::HEAD, "/ready", Report::default()).0, StatusCode::OK);
    }

    #[tokio::test]
    async fn a_port_another_listener_shares_out_is_not_joined() {
        // A listener with SO_REUSEPORT, as another skyline's DNS over TCP has: one without the
        // option cannot join its group.
        let other = TcpSocket::new_v4().unwrap();
        other.set_reuseport(true).unwrap();
        other.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let other = other.listen(16).unwrap();
        let addr = other.local_addr().unwrap();
        match HttpServer::bind(addr, Report::default()).await {
            Err(HttpError::Held { addr: named }) => assert_eq!(named, addr),
            other => panic!("bound a held port: {other:?}"),
        }
        let free = HttpServer::bind("127.0.0.1:0".parse().unwrap(), Report::default())
            .await
            .unwrap();
        assert!(matches!(
            HttpServer::bind(free.local_addr(), Report::default()).await,
            Err(HttpError::Held { .. })
        ));
    }

    #[tokio::test]
    async fn a_held_port_is_served_once_its_holder_lets_it_go() {
        let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = holder.local_addr().unwrap();
        let serving = tokio::spawn(HttpServer::serve_once_free(addr, Report::default()));
        tokio::time::sleep(HELD_PORT_RETRY * 2).await;
        assert!(!serving.is_finished(), "it waits while the port is held");
        let refused_or_holder = tokio::net::TcpStream::connect(addr).await;
        assert!(refused_or_holder.is_ok(), "the holder still accepts");
        drop(refused_or_holder);
        drop(holder);
        let mut answered = None;
        for _ in 0..40 {
            tokio::time::sleep(HELD_PORT_RETRY / 4).await;
            if let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                stream
                    .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                    .await
                    .unwrap();
                let mut reply = String::new();
                let _ = stream.read_to_string(&mut reply).await;
                answered = Some(reply);
                break;
            }
        }
        let reply = answered.expect("the port is served within 10 s of its release");
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        serving.abort();
    }

    #[test]
    fn the_report_is_read_only_where_it_is_needed() {
        let request = Request::builder().uri("/health").body(()).unwrap();
        let response = respond(&request, &Untouchable);
        assert_eq!(response.status(), StatusCode::OK);
    }
}
