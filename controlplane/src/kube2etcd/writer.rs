//! The etcd side of kube2etcd: one leader among the replicas, elected through an etcd lease,
//! writes the difference between the wanted keys and what etcd holds, in transactions of
//! bounded size and rate, each conditioned on still holding the leadership.
//!
//! - **Election.** Each replica grants itself a lease, keeps it alive, and campaigns with etcd's
//!   election service under one election name. The winner's election key lives as long as its
//!   lease: a leader killed without a word is replaced once its lease expires; one that stops
//!   cleanly resigns and revokes, and is replaced at once.
//! - **Resync.** On becoming leader, after a re-list of the Kubernetes objects, after a write
//!   refused because someone else changed a PTR, and on every new session after an etcd failure,
//!   the leader reads what etcd holds of its keys and writes only the difference: a key whose
//!   value is already right is not touched, one kube2etcd no longer wants is deleted.
//! - **Conditioned writes.** Every transaction compares the election key's creation revision
//!   with the leader's own: a leader whose lease has expired (partitioned, frozen) writes nothing
//!   more, whatever it still believes. PTR keys are shared with other writers, so a PTR is only
//!   written over or deleted at the revision kube2etcd last saw.

use super::layout::{digest, Desired, Layout};
use super::stats::Stats;
use crate::backoff::Backoff;
use crate::etcd::range::{self, RangeError};
use crate::etcd::EtcdOptions;
use etcd_client::{Client, Compare, CompareOp, ConnectOptions, LeaderKey, ResignOptions, Txn, TxnOp, TxnOpResponse};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

/// First pause after an etcd failure.
const RETRY_FIRST: Duration = Duration::from_millis(200);
/// Longest pause: etcd's return is noticed within about this long.
const RETRY_CAP: Duration = Duration::from_secs(5);
/// Longest wait for one etcd request, a transaction or a page of the resync read.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How the writer writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriterOptions {
    /// Operations per transaction at most (etcd refuses more than its `--max-txn-ops`, 128 by
    /// default).
    pub txn_ops: usize,
    /// Transactions per second at most.
    pub txn_rate: u32,
    /// The lease's TTL in seconds: how long a dead leader holds the election.
    pub lease_ttl: i64,
    /// The election's name (an etcd key prefix outside the records).
    pub election: String,
    /// What this replica campaigns with: how etcd's election names the leader.
    pub identity: String,
}

/// What the Kubernetes side wants written, shared with the writer.
#[derive(Debug, Default)]
pub struct Plan {
    state: Mutex<PlanState>,
    changed: Notify,
}

/// The plan's contents.
#[derive(Debug, Default)]
pub struct PlanState {
    /// Every wanted key.
    pub desired: Desired,
    /// Whether every watch has listed once: before that, the wanted keys are incomplete and
    /// nothing is written (a partial list would delete the rest).
    pub complete: bool,
    /// Keys whose wanted value changed since the writer last looked.
    pub dirty: BTreeSet<String>,
    /// The writer must read etcd again before writing (a re-list may have missed deletions).
    pub resync: bool,
    /// When the oldest change not yet written was made.
    pub since: Option<Instant>,
}

impl Plan {
    /// The plan, to read or change.
    pub fn lock(&self) -> MutexGuard<'_, PlanState> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Wakes the writer after a change.
    pub fn changed(&self) {
        self.changed.notify_one();
    }
}

/// Why a session ended.
#[derive(Debug, thiserror::Error)]
enum SessionError {
    #[error("{}", crate::etcd::plain::plain(.0))]
    Etcd(#[from] etcd_client::Error),
    #[error(transparent)]
    Range(#[from] RangeError),
    #[error("the lease of this replica expired or could not be kept alive")]
    LeaseLost,
    #[error("this replica no longer holds the leadership")]
    Deposed,
}

/// What etcd holds of one key kube2etcd owns: the digest of its value, and the revision that
/// last changed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Held {
    digest: u64,
    revision: i64,
}

/// The writer of one process.
pub struct Writer {
    endpoints: Vec<String>,
    connect: ConnectOptions,
    options: WriterOptions,
    layout: Layout,
    plan: Arc<Plan>,
    stats: Arc<Stats>,
}

impl Writer {
    /// A writer with its connection settings checked now, so that a bad one stops the start.
    pub fn new(
        etcd: &EtcdOptions,
        options: WriterOptions,
        layout: Layout,
        plan: Arc<Plan>,
        stats: Arc<Stats>,
    ) -> Result<Writer, crate::etcd::OptionsError> {
        let (endpoints, connect) = etcd.connect_options()?;
        Ok(Writer {
            endpoints,
            connect,
            options,
            layout,
            plan,
            stats,
        })
    }

    /// Campaigns, writes while leading, and campaigns again after any failure, until
    /// `shutdown` turns true; then resigns.
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let mut backoff = Backoff::new(RETRY_FIRST, RETRY_CAP);
        loop {
            let ended = self.session(&mut shutdown).await;
            self.stats.leader.store(false, Ordering::Relaxed);
            match ended {
                Ok(()) => return,
                Err(error) => {
                    self.stats.etcd_errors.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(%error, "kube2etcd: etcd session ended; campaigning again after a pause");
                }
            }
            tokio::select! {
                () = tokio::time::sleep(backoff.next_pause()) => {}
                _ = shutdown.wait_for(|&stop| stop) => return,
            }
        }
    }

    /// One connection's life: lease, campaign, resync, then writes as the plan changes. `Ok`
    /// only when asked to stop.
    async fn session(&mut self, shutdown: &mut watch::Receiver<bool>) -> Result<(), SessionError> {
        let mut client = Client::connect(&self.endpoints, Some(self.connect.clone())).await?;
        let lease = client.lease_grant(self.options.lease_ttl, None).await?.id();
        let (lost_tx, mut lost) = watch::channel(false);
        let keeper = tokio::spawn(keep_alive(client.clone(), lease, self.options.lease_ttl, lost_tx));
        let result = self.lead(&mut client, lease, shutdown, &mut lost).await;
        keeper.abort();
        if let Ok(Some(leader)) = &result {
            let resign = client.resign(Some(ResignOptions::new().with_leader(leader.clone())));
            if let Ok(Err(error)) = tokio::time::timeout(REQUEST_TIMEOUT, resign).await {
                tracing::debug!(%error, "kube2etcd: resigning failed; revoking the lease ends the leadership");
            }
        }
        if !matches!(result, Err(SessionError::Etcd(_) | SessionError::Range(_))) {
            // The lease is of no use any more: revoking it frees the election at once.
            let _ = tokio::time::timeout(REQUEST_TIMEOUT, client.lease_revoke(lease)).await;
        }
        result.map(|_| ())
    }

    /// Campaigns, then writes while leading; `Ok` when asked to stop, with the leader key when
    /// this replica led.
    async fn lead(
        &mut self,
        client: &mut Client,
        lease: i64,
        shutdown: &mut watch::Receiver<bool>,
        lost: &mut watch::Receiver<bool>,
    ) -> Result<Option<LeaderKey>, SessionError> {
        let campaign = client.campaign(self.options.election.as_str(), self.options.identity.as_str(), lease);
        let leader = tokio::select! {
            won = campaign => won?.take_leader().ok_or(SessionError::Deposed)?,
            _ = lost.wait_for(|&l| l) => return Err(SessionError::LeaseLost),
            _ = shutdown.wait_for(|&stop| stop) => return Ok(None),
        };
        self.stats.leader.store(true, Ordering::Relaxed);
        self.stats.elected.fetch_add(1, Ordering::Relaxed);
        tracing::info!(election = %self.options.election, identity = %self.options.identity, "kube2etcd: leading; writing the cluster's records");
        let mut written: BTreeMap<String, Held> = BTreeMap::new();
        let mut foreign: HashSet<String> = HashSet::new();
        let mut todo: BTreeSet<String> = BTreeSet::new();
        let mut need_resync = true;
        let mut next_txn = Instant::now();
        loop {
            let (complete, since) = {
                let mut plan = self.plan.lock();
                need_resync |= std::mem::take(&mut plan.resync);
                todo.append(&mut plan.dirty);
                (plan.complete, plan.since)
            };
            if complete && need_resync {
                (written, foreign) = self.read_held(client).await?;
                todo = self.plan.lock().desired.keys().cloned().collect();
                todo.extend(written.keys().cloned());
                need_resync = false;
                // Pending first: a scrape between the two never sees a resync with nothing to do.
                self.stats.pending.store(todo.len() as u64, Ordering::Relaxed);
                self.stats.resyncs.fetch_add(1, Ordering::Relaxed);
                tracing::info!(
                    held = written.len(),
                    wanted = todo.len(),
                    "kube2etcd: etcd read; writing the difference"
                );
            }
            self.stats.pending.store(todo.len() as u64, Ordering::Relaxed);
            while complete && !todo.is_empty() {
                let batch = self.batch(&mut todo, &written, &foreign);
                if batch.is_empty() {
                    continue;
                }
                tokio::time::sleep_until(next_txn).await;
                next_txn = Instant::now() + Duration::from_secs(1) / self.options.txn_rate.max(1);
                if !self.commit(client, &leader, &batch, &mut written).await? {
                    self.stats.conflicts.fetch_add(1, Ordering::Relaxed);
                    need_resync = true;
                    break;
                }
                self.stats.pending.store(todo.len() as u64, Ordering::Relaxed);
                if *lost.borrow() {
                    return Err(SessionError::LeaseLost);
                }
            }
            self.stats.pending.store(todo.len() as u64, Ordering::Relaxed);
            if need_resync && complete {
                continue;
            }
            if let Some(since) = since.filter(|_| complete && todo.is_empty()) {
                let mut plan = self.plan.lock();
                if plan.dirty.is_empty() && plan.since == Some(since) {
                    plan.since = None;
                    self.stats.lag(since.elapsed());
                }
            }
            tokio::select! {
                () = self.plan.changed.notified() => {}
                _ = lost.wait_for(|&l| l) => return Err(SessionError::LeaseLost),
                _ = shutdown.wait_for(|&stop| stop) => return Ok(Some(leader)),
            }
        }
    }

    /// Reads what etcd holds of the keys kube2etcd owns, and the PTR keys others hold.
    async fn read_held(&self, client: &Client) -> Result<(BTreeMap<String, Held>, HashSet<String>), SessionError> {
        let mut held = BTreeMap::new();
        let mut foreign = HashSet::new();
        let mut keep = |kv: &etcd_client::KeyValue, owned: bool| {
            let (Ok(key), Ok(value)) = (kv.key_str(), kv.value_str()) else {
                return;
            };
            if owned {
                let revision = kv.mod_revision();
                held.insert(
                    key.to_owned(),
                    Held {
                        digest: digest(&value),
                        revision,
                    },
                );
            } else {
                foreign.insert(key.to_owned());
            }
        };
        let services = self.layout.services_prefix();
        range::read_prefix(client, services.as_bytes(), REQUEST_TIMEOUT, |kv| keep(kv, true)).await?;
        let version = self.layout.version_key();
        let mut kv = client.kv_client();
        let got = range::within(REQUEST_TIMEOUT, kv.get(version.as_str(), None)).await?;
        got.kvs().iter().for_each(|kv| keep(kv, true));
        let layout = &self.layout;
        range::read_prefix(client, layout.arpa_prefix().as_bytes(), REQUEST_TIMEOUT, |kv| {
            keep(kv, layout.owns_pointer(kv.value()));
        })
        .await?;
        self.stats.foreign.store(foreign.len() as u64, Ordering::Relaxed);
        Ok((held, foreign))
    }

    /// The next operations to write, at most `txn_ops` of them and of their compares, taken from
    /// `todo`: keys whose wanted value differs from what etcd holds. A PTR key someone else
    /// holds is left alone.
    fn batch(
        &self,
        todo: &mut BTreeSet<String>,
        written: &BTreeMap<String, Held>,
        foreign: &HashSet<String>,
    ) -> Vec<(String, Option<String>)> {
        let plan = self.plan.lock();
        let arpa = self.layout.arpa_prefix();
        let mut batch = Vec::new();
        // etcd bounds the compares of a transaction as it bounds its operations: one for the
        // leadership, one per PTR key.
        let mut compares = 1;
        while batch.len() < self.options.txn_ops {
            let Some(key) = todo.first() else { break };
            let pointer = key.starts_with(arpa);
            if pointer && compares >= self.options.txn_ops {
                break;
            }
            let Some(key) = todo.pop_first() else { break };
            let wanted = plan.desired.get(&key);
            let held = written.get(&key).map(|h| h.digest);
            if wanted.map(|w| digest(&w.as_str())) == held || (foreign.contains(&key) && held.is_none()) {
                continue;
            }
            compares += usize::from(pointer);
            batch.push((key, wanted.cloned()));
        }
        batch
    }

    /// Writes `batch` in one transaction conditioned on the leadership (and, for PTR keys, on
    /// their revision). `Ok(false)`: a PTR changed under us; the caller reads etcd again.
    async fn commit(
        &self,
        client: &mut Client,
        leader: &LeaderKey,
        batch: &[(String, Option<String>)],
        written: &mut BTreeMap<String, Held>,
    ) -> Result<bool, SessionError> {
        let mut compares = vec![Compare::create_revision(leader.key(), CompareOp::Equal, leader.rev())];
        let arpa = self.layout.arpa_prefix();
        for (key, _) in batch.iter().filter(|(key, _)| key.starts_with(arpa)) {
            let revision = written.get(key).map_or(0, |h| h.revision);
            compares.push(Compare::mod_revision(key.as_str(), CompareOp::Equal, revision));
        }
        let ops: Vec<TxnOp> = batch
            .iter()
            .map(|(key, value)| match value {
                Some(value) => TxnOp::put(key.as_str(), value.as_str(), None),
                None => TxnOp::delete(key.as_str(), None),
            })
            .collect();
        let txn = Txn::new()
            .when(compares)
            .and_then(ops)
            .or_else([TxnOp::get(leader.key(), None)]);
        let response = range::within(REQUEST_TIMEOUT, client.txn(txn)).await?;
        if !response.succeeded() {
            let still_leading = response.op_responses().iter().any(|op| match op {
                TxnOpResponse::Get(get) => get.kvs().iter().any(|kv| kv.create_revision() == leader.rev()),
                _ => false,
            });
            if !still_leading {
                return Err(SessionError::Deposed);
            }
            tracing::info!("kube2etcd: a PTR changed under a write; reading etcd again");
            return Ok(false);
        }
        let revision = response.header().map_or(0, |h| h.revision());
        for (key, value) in batch {
            match value {
                Some(value) => {
                    written.insert(
                        key.clone(),
                        Held {
                            digest: digest(&value.as_str()),
                            revision,
                        },
                    );
                    self.stats.puts.fetch_add(1, Ordering::Relaxed);
                }
                None => {
                    written.remove(key);
                    self.stats.deletes.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        self.stats.txns.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }
}

/// Keeps `lease` alive at a third of its TTL; turns `lost` true once it has gone a whole TTL
/// without a renewal, or etcd says it expired.
async fn keep_alive(mut client: Client, lease: i64, ttl: i64, lost: watch::Sender<bool>) {
    let ttl = Duration::from_secs(ttl.max(1).unsigned_abs());
    let every = ttl / 3;
    let kept = async {
        let (mut keeper, mut responses) = client.lease_keep_alive(lease).await?;
        let mut renewed = Instant::now();
        loop {
            keeper.keep_alive().await?;
            match tokio::time::timeout(every, responses.message()).await {
                Ok(Ok(Some(response))) if response.ttl() > 0 => renewed = Instant::now(),
                Ok(Ok(_)) => return Ok::<(), etcd_client::Error>(()),
                Ok(Err(error)) => return Err(error),
                Err(_) => {}
            }
            if renewed.elapsed() >= ttl {
                return Ok(());
            }
            tokio::time::sleep(every).await;
        }
    };
    if let Err(error) = kept.await {
        tracing::warn!(%error, "kube2etcd: the lease could not be kept alive");
    }
    let _ = lost.send(true);
}
