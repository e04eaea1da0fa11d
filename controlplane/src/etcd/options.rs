//! Where etcd is and how to talk to it: SkyDNS's `-machines`, `-tls-key`, `-tls-pem`, `-ca-cert`,
//! `-username` and `-password`, checked and turned into the client's connection settings.
//!
//! Every check runs at start, so that a typo in a path or a half-given identity stops the server
//! with a clear message instead of turning into an endless series of failed connections.

use etcd_client::{Certificate, ConnectOptions, Identity, TlsOptions};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long establishing one connection to one endpoint may take before the next is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// HTTP/2 keep-alive on the connection to etcd: a member that vanished without closing the
/// connection (a partition, a frozen host) is noticed within interval + timeout, and the watch
/// moves to another endpoint. etcd rejects pings more frequent than every 5 s.
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(10);
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(5);

/// The operator's etcd settings, as given.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct EtcdOptions {
    /// Endpoint URLs (`http://host:port`, `https://host:port`, or `host:port`); requests go to
    /// any that answers, so one member down is no outage.
    pub endpoints: Vec<String>,
    /// Client private key for TLS, PEM (`--tls-key`, `ETCD_TLSKEY`).
    pub tls_key: Option<PathBuf>,
    /// Client certificate for TLS, PEM (`--tls-pem`, `ETCD_TLSPEM`).
    pub tls_pem: Option<PathBuf>,
    /// Certificate authority that signed the members' certificates, PEM (`--ca-cert`,
    /// `ETCD_CACERT`).
    pub ca_cert: Option<PathBuf>,
    /// User for etcd authentication (`--username`, `ETCD_USERNAME`).
    pub username: Option<String>,
    /// Password of that user (`--password`, `ETCD_PASSWORD`).
    pub password: Option<String>,
    /// Follow the cluster's member list instead of keeping `endpoints` (`--discover`).
    pub discover: bool,
}

/// The password never reaches a log line.
impl fmt::Debug for EtcdOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdOptions")
            .field("endpoints", &self.endpoints)
            .field("tls_key", &self.tls_key)
            .field("tls_pem", &self.tls_pem)
            .field("ca_cert", &self.ca_cert)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<hidden>"))
            .field("discover", &self.discover)
            .finish()
    }
}

/// Why the etcd settings cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OptionsError {
    /// No endpoint at all.
    #[error("no etcd endpoint given (--machines, ETCD_MACHINES)")]
    NoEndpoints,
    /// A client certificate without its key, or the reverse.
    #[error("--tls-key and --tls-pem (ETCD_TLSKEY, ETCD_TLSPEM) go together: give both or neither")]
    HalfIdentity,
    /// A user without a password, or the reverse.
    #[error("--username and --password (ETCD_USERNAME, ETCD_PASSWORD) go together: give both or neither")]
    HalfCredentials,
    /// TLS settings with an endpoint that says plain HTTP.
    #[error("etcd endpoint {endpoint:?} is plain http:// but TLS settings are given; use https://")]
    PlainEndpointWithTls {
        /// The endpoint.
        endpoint: String,
    },
    /// An https endpoint with no certificate authority to check the member's certificate.
    #[error("etcd endpoint {endpoint:?} is https:// but no --ca-cert (ETCD_CACERT) says whom to trust")]
    NoCertificateAuthority {
        /// The endpoint.
        endpoint: String,
    },
    /// A TLS file that cannot be read.
    #[error("cannot read {what} {path}: {source}")]
    Read {
        /// Which setting names the file.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl EtcdOptions {
    /// Whether the members are reached over TLS: the scheme of an endpoint given without one.
    pub(crate) fn uses_tls(&self) -> bool {
        self.tls_pem.is_some() || self.ca_cert.is_some()
    }

    /// Checks the settings and reads the TLS files, producing what the client connects with.
    pub(crate) fn connect_options(&self) -> Result<(Vec<String>, ConnectOptions), OptionsError> {
        let endpoints: Vec<String> = self
            .endpoints
            .iter()
            .map(|e| e.trim().to_owned())
            .filter(|e| !e.is_empty())
            .collect();
        if endpoints.is_empty() {
            return Err(OptionsError::NoEndpoints);
        }
        let mut options = ConnectOptions::new()
            .with_connect_timeout(CONNECT_TIMEOUT)
            .with_keep_alive(KEEP_ALIVE_INTERVAL, KEEP_ALIVE_TIMEOUT)
            .with_keep_alive_while_idle(false)
            .with_require_leader(true);
        match (&self.username, &self.password) {
            (Some(user), Some(password)) => {
                options = options.with_user(user, password).with_auto_token_refresh(true);
            }
            (None, None) => {}
            _ => return Err(OptionsError::HalfCredentials),
        }
        let identity = match (&self.tls_pem, &self.tls_key) {
            (Some(pem), Some(key)) => Some(Identity::from_pem(read("--tls-pem", pem)?, read("--tls-key", key)?)),
            (None, None) => None,
            _ => return Err(OptionsError::HalfIdentity),
        };
        let ca = self
            .ca_cert
            .as_deref()
            .map(|path| read("--ca-cert", path).map(Certificate::from_pem))
            .transpose()?;
        let tls = identity.is_some() || ca.is_some();
        for endpoint in &endpoints {
            let lower = endpoint.to_ascii_lowercase();
            if tls && lower.starts_with("http://") {
                return Err(OptionsError::PlainEndpointWithTls {
                    endpoint: endpoint.clone(),
                });
            }
            if ca.is_none() && lower.starts_with("https://") {
                return Err(OptionsError::NoCertificateAuthority {
                    endpoint: endpoint.clone(),
                });
            }
        }
        if tls {
            let mut config = TlsOptions::new();
            if let Some(ca) = ca {
                config = config.ca_certificate(ca);
            }
            if let Some(identity) = identity {
                config = config.identity(identity);
            }
            options = options.with_tls(config);
        }
        Ok((endpoints, options))
    }
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, OptionsError> {
    std::fs::read(path).map_err(|source| OptionsError::Read {
        what,
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(endpoints: &[&str]) -> EtcdOptions {
        EtcdOptions {
            endpoints: endpoints.iter().map(|e| e.to_string()).collect(),
            ..EtcdOptions::default()
        }
    }

    #[test]
    fn plain_endpoints_need_nothing_else() {
        let (endpoints, _) = options(&["http://127.0.0.1:2379", " 127.0.0.2:2379 ", ""])
            .connect_options()
            .unwrap();
        assert_eq!(endpoints, ["http://127.0.0.1:2379", "127.0.0.2:2379"]);
    }

    #[test]
    fn incomplete_or_inconsistent_settings_are_refused() {
        assert!(matches!(
            options(&[" "]).connect_options(),
            Err(OptionsError::NoEndpoints)
        ));
        let half_user = EtcdOptions {
            username: Some("root".into()),
            ..options(&["http://127.0.0.1:2379"])
        };
        assert!(matches!(
            half_user.connect_options(),
            Err(OptionsError::HalfCredentials)
        ));
        let half_identity = EtcdOptions {
            tls_key: Some("/nonexistent/key.pem".into()),
            ..options(&["https://127.0.0.1:2379"])
        };
        assert!(matches!(
            half_identity.connect_options(),
            Err(OptionsError::HalfIdentity)
        ));
        assert!(matches!(
            options(&["https://127.0.0.1:2379"]).connect_options(),
            Err(OptionsError::NoCertificateAuthority { .. })
        ));
    }

    #[test]
    fn tls_files_must_exist_and_endpoints_must_be_https() {
        let missing = EtcdOptions {
            ca_cert: Some("/nonexistent/ca.pem".into()),
            ..options(&["https://127.0.0.1:2379"])
        };
        let err = missing.connect_options().unwrap_err();
        assert!(err.to_string().contains("/nonexistent/ca.pem"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, "not checked before the handshake").unwrap();
        let plain = EtcdOptions {
            ca_cert: Some(ca),
            ..options(&["http://127.0.0.1:2379"])
        };
        assert!(matches!(
            plain.connect_options(),
            Err(OptionsError::PlainEndpointWithTls { .. })
        ));
    }

    #[test]
    fn the_password_is_not_printed() {
        let o = EtcdOptions {
            username: Some("root".into()),
            password: Some("s3cret".into()),
            ..options(&["http://127.0.0.1:2379"])
        };
        let shown = format!("{o:?}");
        assert!(!shown.contains("s3cret") && shown.contains("root"), "{shown}");
    }
}
