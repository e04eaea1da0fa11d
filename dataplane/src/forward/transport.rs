//! How a set of upstreams is asked (CoreDNS `forward`'s `prefer_udp`, `force_tcp` and
//! `tls://`): over UDP with TCP after a truncated answer, or every query over persistent,
//! pipelined TCP connections, plain or under TLS (DNS over TLS, RFC 7858). The transport
//! belongs to a set of upstreams (the default resolvers, or one stub zone's servers), so that
//! one server can forward `cluster.local` over TCP and `.` over UDP, as NodeLocal DNSCache does.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

/// Port of DNS over TLS (RFC 7858 §3.1).
pub const TLS_PORT: u16 = 853;

/// How the upstreams of one set are asked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Transport {
    /// UDP first, TCP (on a connection of its own) after a truncated answer: what a stub
    /// resolver does, and the cheapest for an upstream near by (CoreDNS `prefer_udp`).
    #[default]
    PreferUdp,
    /// Every query over TCP, on persistent connections shared by the worker's queries to the
    /// upstream (CoreDNS `force_tcp`).
    ForceTcp,
    /// Every query over TLS on persistent connections (CoreDNS `tls://`).
    Tls(Arc<Tls>),
}

impl Transport {
    /// Whether every query goes over a persistent connection.
    pub fn is_stream(&self) -> bool {
        !matches!(self, Transport::PreferUdp)
    }
}

/// The TLS side of DNS over TLS upstreams: whom the certificates must name and whom to trust.
pub struct Tls {
    server_name: Option<ServerName<'static>>,
    ca: Option<Vec<u8>>,
    config: Arc<ClientConfig>,
}

/// Why a TLS upstream set cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// `tls_servername` is neither a DNS name nor an IP address.
    #[error("tls_servername {0:?} is not a DNS name or an IP address")]
    ServerName(String),
    /// The CA file holds no certificate that reads as one.
    #[error("the CA file holds no PEM certificate that can be trusted: {0}")]
    Ca(String),
    /// Neither the platform nor the CA file gives a root to trust.
    #[error("no root certificate to trust: the platform has none and no CA file is given")]
    NoRoots,
}

impl Tls {
    /// Upstreams whose certificates must name `server_name` (each upstream's IP address when
    /// `None`), signed by a root of the platform's store or of `ca_pem` (PEM certificates).
    pub fn new(server_name: Option<&str>, ca_pem: Option<&[u8]>) -> Result<Tls, TlsError> {
        let name = server_name
            .map(|n| ServerName::try_from(n.to_owned()).map_err(|_| TlsError::ServerName(n.to_owned())))
            .transpose()?;
        let mut roots = RootCertStore::empty();
        // The platform's store as the host sees it now; an unreadable certificate in it is
        // skipped, as every TLS client of the host skips it.
        roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        if let Some(pem) = ca_pem {
            let certs = CertificateDer::pem_slice_iter(pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| TlsError::Ca(e.to_string()))?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(TlsError::Ca("no certificate".to_owned()));
            }
        }
        if roots.is_empty() {
            return Err(TlsError::NoRoots);
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Ca(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Tls {
            server_name: name,
            ca: ca_pem.map(<[u8]>::to_vec),
            config: Arc::new(config),
        })
    }

    /// A client side of a new connection to `upstream`, checking the configured name, or the
    /// upstream's address (RFC 7858 §4.2's out-of-band key-pinned privacy profile is not
    /// offered: the name or address is the authentication domain name).
    pub(crate) fn connect(&self, upstream: SocketAddr) -> Result<rustls::ClientConnection, rustls::Error> {
        let name = match &self.server_name {
            Some(name) => name.clone(),
            None => ServerName::IpAddress(upstream.ip().into()),
        };
        rustls::ClientConnection::new(Arc::clone(&self.config), name)
    }
}

impl PartialEq for Tls {
    fn eq(&self, other: &Tls) -> bool {
        self.server_name == other.server_name && self.ca == other.ca
    }
}

impl Eq for Tls {}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("server_name", &self.server_name)
            .field("ca", &self.ca.as_ref().map(Vec::len))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_name_that_is_no_name_is_refused() {
        assert!(matches!(
            Tls::new(Some("not a name!"), None),
            Err(TlsError::ServerName(_)) | Err(TlsError::NoRoots)
        ));
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused() {
        assert!(matches!(Tls::new(None, Some(b"no pem here\n")), Err(TlsError::Ca(_))));
    }

    #[test]
    fn two_sets_with_the_same_name_and_roots_are_the_same_transport() {
        let ca = test_ca();
        let a = Tls::new(Some("dns.example"), Some(&ca)).unwrap();
        let b = Tls::new(Some("dns.example"), Some(&ca)).unwrap();
        let c = Tls::new(Some("other.example"), Some(&ca)).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    /// A self-signed certificate in PEM, made once with `openssl`: the data plane has no
    /// certificate generator among its dependencies.
    fn test_ca() -> Vec<u8> {
        include_bytes!("transport/test-ca.pem").to_vec()
    }
}
