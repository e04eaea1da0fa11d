//! `--discover`, SkyDNS's `-discover`: the client follows etcd's member list instead of keeping
//! the endpoints it was given. The list is read as soon as a connection is made, then every
//! [`DISCOVER_EVERY`]; a member added to the cluster is connected to and a removed one dropped,
//! without a restart. A reconnection after a failure starts from the members last seen, so the
//! endpoints first given may all be gone by then.

use super::health::SourceHealth;
use etcd_client::Client;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;

/// How often the member list is read: etcd v3 has no watch on it, and a membership change is
/// an operator's act, rare and slow to settle, so a few seconds' delay costs nothing.
pub const DISCOVER_EVERY: Duration = Duration::from_secs(5);

/// How long one member-list request may take.
const LIST_TIMEOUT: Duration = Duration::from_secs(5);

/// The endpoints to connect to: those given, until the member list replaces them.
#[derive(Debug)]
pub struct Members {
    /// Client URLs as the client knows them (an endpoint given without a scheme gets the one
    /// the client would add), so that a removal names the endpoint exactly as it was added.
    current: Arc<Mutex<Vec<String>>>,
    /// Follows the member list on the client of the current connection.
    follower: Option<JoinHandle<()>>,
}

impl Members {
    /// Starts from the endpoints given; `tls` picks the scheme of those given without one.
    pub fn new(given: &[String], tls: bool) -> Members {
        let scheme = if tls { "https://" } else { "http://" };
        let current = given
            .iter()
            .map(|e| {
                if e.contains("://") {
                    e.clone()
                } else {
                    format!("{scheme}{e}")
                }
            })
            .collect();
        Members {
            current: Arc::new(Mutex::new(current)),
            follower: None,
        }
    }

    /// The endpoints a new connection should use.
    pub fn endpoints(&self) -> Vec<String> {
        self.current.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// Follows the member list on `client`, a new connection, instead of the previous one.
    pub fn follow(&mut self, client: &Client, health: &Arc<SourceHealth>) {
        self.stop();
        let task = follow(client.clone(), Arc::clone(&self.current), Arc::clone(health));
        self.follower = Some(tokio::spawn(task));
    }

    /// Stops following: the connection is dropped.
    pub fn stop(&mut self) {
        if let Some(task) = self.follower.take() {
            task.abort();
        }
    }
}

impl Drop for Members {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn follow(client: Client, current: Arc<Mutex<Vec<String>>>, health: Arc<SourceHealth>) {
    let mut every = tokio::time::interval(DISCOVER_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let listed = tokio::time::timeout(LIST_TIMEOUT, client.cluster_client().member_list()).await;
        let members = match listed {
            Ok(Ok(response)) => response,
            Ok(Err(error)) => {
                tracing::debug!(%error, "etcd member list not read; the endpoints stay as they are");
                continue;
            }
            Err(_) => {
                tracing::debug!("etcd member list not read in time; the endpoints stay as they are");
                continue;
            }
        };
        // A member added but not yet started has no client URL; it is taken up once it has.
        let listed: BTreeSet<String> = members
            .members()
            .iter()
            .flat_map(|m| m.client_urls().iter().cloned())
            .collect();
        if listed.is_empty() {
            continue;
        }
        let known: BTreeSet<String> = current.lock().map(|c| c.iter().cloned().collect()).unwrap_or_default();
        if listed == known {
            continue;
        }
        for url in listed.difference(&known) {
            match client.add_endpoint(url).await {
                Ok(()) => tracing::info!(endpoint = %url, "etcd member discovered; its endpoint is used"),
                Err(error) => {
                    tracing::warn!(endpoint = %url, %error, "etcd member discovered but its endpoint is unusable")
                }
            }
        }
        for url in known.difference(&listed) {
            match client.remove_endpoint(url).await {
                Ok(()) => tracing::info!(endpoint = %url, "etcd endpoint no longer a member's; dropped"),
                Err(error) => tracing::warn!(endpoint = %url, %error, "dropping an etcd endpoint failed"),
            }
        }
        health.set_endpoints(listed.len());
        if let Ok(mut current) = current.lock() {
            *current = listed.into_iter().collect();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_given_without_a_scheme_get_the_one_the_client_adds() {
        let given = ["127.0.0.1:2379".to_owned(), "https://etcd-1:2379".to_owned()];
        assert_eq!(
            Members::new(&given, false).endpoints(),
            ["http://127.0.0.1:2379", "https://etcd-1:2379"]
        );
        assert_eq!(
            Members::new(&given, true).endpoints(),
            ["https://127.0.0.1:2379", "https://etcd-1:2379"]
        );
    }
}
