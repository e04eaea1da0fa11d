//! How to reach the API server and what to watch there: the connection settings of CoreDNS's
//! `kubernetes` plugin (`kubeconfig FILE [CONTEXT]`, in-cluster by default, `apiserver_qps`) and
//! its watch filters (`labels`, `namespace_labels`, `noendpoints`).

use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use std::path::PathBuf;
use std::time::Duration;
use tower::limit::RateLimitLayer;

/// The connection and watch settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KubernetesOptions {
    /// A kubeconfig file; without one, `KUBECONFIG` or `~/.kube/config`, else the in-cluster
    /// service account.
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use instead of its current one.
    pub context: Option<String>,
    /// The API server's URL (CoreDNS `endpoint`), over the kubeconfig's; without a kubeconfig
    /// or the in-cluster service account, requests carry no credentials.
    pub endpoint: Option<String>,
    /// Label selector of the Service (and Pod) watches (`labels`): other services do not exist.
    pub labels: Option<String>,
    /// Label selector of the Namespace watch (`namespace_labels`): services of other namespaces
    /// do not exist.
    pub namespace_labels: Option<String>,
    /// Do not watch EndpointSlices (`noendpoints`): no headless or endpoint names.
    pub noendpoints: bool,
    /// Watch Pods, for `pods verified`.
    pub pods: bool,
    /// Requests per second to the API server at most (CoreDNS `apiserver_qps`); lists and
    /// watches restarted together after an outage then queue instead of arriving at once.
    pub qps: Option<u32>,
}

/// Why no client could be made; each names the configuration at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The `endpoint` is not a URL.
    #[error("kubernetes endpoint {url:?} is not a URL such as https://10.96.0.1:443")]
    Endpoint {
        /// What was given.
        url: String,
    },
    /// The kubeconfig file cannot be read or used.
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        source: KubeconfigError,
    },
    /// No kubeconfig was given and neither the default one nor the in-cluster settings work.
    #[error("no Kubernetes configuration found (kubeconfig, KUBECONFIG, ~/.kube/config, in-cluster): {0}")]
    Infer(#[from] kube::config::InferConfigError),
    /// The default kubeconfig has no such context.
    #[error("kubeconfig context {context}: {source}")]
    Context {
        /// The context.
        context: String,
        /// Why.
        source: KubeconfigError,
    },
    /// The settings were read but make no client (a bad certificate, an unsupported proxy).
    #[error("Kubernetes client: {0}")]
    Client(#[from] kube::Error),
}

/// The `endpoint` URL, checked.
fn endpoint_url(url: &str) -> Result<hyper::Uri, ConnectError> {
    url.parse().map_err(|_| ConnectError::Endpoint { url: url.to_owned() })
}

impl KubernetesOptions {
    /// A client as configured, and the URL of the API server it talks to (what names the
    /// cluster, e.g. for the persisted snapshot). Nothing is sent to the API server yet, so that
    /// a server that is not up at start only delays the first sync.
    pub async fn client(&self) -> Result<(kube::Client, String), ConnectError> {
        let options = KubeConfigOptions {
            context: self.context.clone(),
            ..KubeConfigOptions::default()
        };
        let config = match (&self.kubeconfig, &self.context) {
            (Some(path), _) => {
                let wrap = |source| ConnectError::Kubeconfig {
                    path: path.clone(),
                    source,
                };
                let file = Kubeconfig::read_from(path).map_err(wrap)?;
                kube::Config::from_custom_kubeconfig(file, &options)
                    .await
                    .map_err(wrap)?
            }
            (None, Some(context)) => {
                kube::Config::from_kubeconfig(&options)
                    .await
                    .map_err(|source| ConnectError::Context {
                        context: context.clone(),
                        source,
                    })?
            }
            (None, None) => match &self.endpoint {
                Some(url) => match kube::Config::infer().await {
                    Ok(config) => config,
                    Err(_) => kube::Config::new(endpoint_url(url)?),
                },
                None => kube::Config::infer().await?,
            },
        };
        let mut config = config;
        if let Some(url) = &self.endpoint {
            config.cluster_url = endpoint_url(url)?;
        }
        let server = config.cluster_url.to_string();
        let builder = kube::client::ClientBuilder::try_from(config)?;
        let client = match self.qps.filter(|&qps| qps > 0) {
            Some(qps) => builder
                .with_layer(&RateLimitLayer::new(u64::from(qps), Duration::from_secs(1)))
                .build(),
            None => builder.build(),
        };
        Ok((client, server))
    }
}
