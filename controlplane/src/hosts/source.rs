//! The hosts source as the process runs it: the file read at start (a file that cannot be read
//! stops the start), laid under the snapshot of the sources before it, and read again when it
//! changes; a file that becomes unreadable or wrong leaves the last good data served.

use super::health::{HostsHealth, HostsReport};
use super::parse::{parse, HostsError};
use crate::source::{Source, SourceReport, StartError};
use futures::future::BoxFuture;
use skyline_dataplane::snapshot::hosts_file::{self, Config as HostsConfig, Entry};
use skyline_dataplane::snapshot::skydns::Config;
use skyline_dataplane::snapshot::{lay_under, publish, Layer, Snapshot};
use skyline_dataplane::SnapshotCell;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::time::MissedTickBehavior;

/// How often the snapshot below the hosts names is checked for a new generation, as the
/// Kubernetes source checks the SkyDNS one.
const BASE_POLL: Duration = Duration::from_millis(20);

/// Why the hosts source cannot start: its file cannot be read or has a line that is not an
/// entry.
#[derive(Debug, thiserror::Error)]
#[error("hosts file {path}: {source}")]
pub struct HostsStartError {
    /// The file.
    pub path: PathBuf,
    /// Why.
    pub source: HostsError,
}

/// What the hosts source serves, as the settings give it.
#[derive(Debug, Clone, PartialEq)]
pub struct HostsOptions {
    /// The hosts file, if any.
    pub file: Option<PathBuf>,
    /// The inline entries, served beside the file's.
    pub inline: Vec<Entry>,
    /// Zones, TTL, PTRs, fallthrough.
    pub config: HostsConfig,
    /// How often the file is checked for a change; zero never.
    pub reload: Duration,
}

/// What identifies a version of the file without reading it: CoreDNS reads it again when its
/// modification time or size changes; the inode catches a file replaced by a rename.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

impl Stamp {
    fn of(metadata: &std::fs::Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        Stamp {
            modified: metadata.modified().ok(),
            len: metadata.len(),
            inode: metadata.ino(),
        }
    }
}

/// Serves the names of a hosts file and inline entries under the snapshot of the sources
/// before it in the list.
#[derive(Debug)]
pub struct HostsSource {
    options: HostsOptions,
    base: SnapshotCell,
    cell: SnapshotCell,
    health: Arc<HostsHealth>,
    /// The file's entries now served.
    file_entries: Vec<Entry>,
    /// The version of the file last looked at (`Err` when it could not be), read or not;
    /// `None` before the first look.
    seen: Option<Result<Stamp, ()>>,
    layer: Layer,
    /// The snapshot below the one last published.
    laid_over: Option<Arc<Snapshot>>,
}

impl HostsSource {
    /// A source serving what `options` say under the snapshots published into `base`, into
    /// `cell`. Nothing is read until [`Source::start`].
    pub fn new(options: HostsOptions, base: SnapshotCell, cell: SnapshotCell) -> HostsSource {
        HostsSource {
            options,
            base,
            cell,
            health: Arc::default(),
            file_entries: Vec::new(),
            seen: None,
            layer: Layer::default(),
            laid_over: None,
        }
    }

    /// Reads the file, if it changed since it was last looked at: `None` when it did not,
    /// else its entries or why they cannot be had.
    async fn read(&mut self) -> Option<Result<Vec<Entry>, HostsError>> {
        let path = self.options.file.as_ref()?;
        let stamp = tokio::fs::metadata(path).await.map(|m| Stamp::of(&m));
        let seen = Some(stamp.as_ref().copied().map_err(drop));
        if seen == self.seen {
            return None;
        }
        self.seen = seen;
        let read = match stamp {
            Ok(_) => tokio::fs::read_to_string(path).await.map_err(HostsError::Read),
            Err(e) => Err(HostsError::Read(e)),
        };
        Some(read.and_then(|text| parse(&text)))
    }

    /// Compiles the entries now held, and counts them.
    fn compile(&mut self) {
        let entries: Vec<Entry> = self.file_entries.iter().chain(&self.options.inline).cloned().collect();
        self.layer = hosts_file::layer(&self.options.config, &entries);
        let records = hosts_file::records(&self.options.config, &entries);
        self.health.loaded(records, SystemTime::now());
    }

    /// Publishes the hosts names under the snapshot now below.
    fn publish(&mut self) {
        let base = self.base.load_full();
        let generation = self.cell.load().generation + 1;
        publish(&self.cell, Arc::new(lay_under(&base, &self.layer, generation)));
        self.laid_over = Some(base);
    }

    /// Reads the file again if it changed, and serves it; a file that cannot be read or is
    /// wrong leaves the last good data served, and says so once per change.
    async fn reload(&mut self) {
        match self.read().await {
            None => {}
            Some(Ok(entries)) => {
                self.file_entries = entries;
                self.compile();
                self.publish();
                tracing::info!(
                    file = %self.path(),
                    records = self.health.entries(),
                    "hosts file changed: serving its new entries"
                );
            }
            Some(Err(error)) => tracing::warn!(
                file = %self.path(),
                %error,
                "hosts file: keeping the last good data"
            ),
        }
    }

    fn path(&self) -> String {
        self.options
            .file
            .as_ref()
            .map_or_else(String::new, |p| p.display().to_string())
    }

    async fn run(mut self) {
        let mut poll = tokio::time::interval(BASE_POLL);
        poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let reloading = !self.options.reload.is_zero() && self.options.file.is_some();
        let mut reload = tokio::time::interval(self.options.reload.max(BASE_POLL));
        reload.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = poll.tick() => {
                    let current = self.base.load();
                    if !self.laid_over.as_ref().is_some_and(|held| Arc::ptr_eq(held, &current)) {
                        self.publish();
                    }
                }
                _ = reload.tick(), if reloading => self.reload().await,
            }
        }
    }
}

/// The hosts names as the process runs them: under the snapshot of the sources before this one
/// in the list (the SkyDNS source's, or the Kubernetes source's over it).
impl Source for HostsSource {
    fn report(&self) -> Arc<dyn SourceReport> {
        Arc::new(HostsReport {
            health: Arc::clone(&self.health),
        })
    }

    /// Reads the file: one that cannot be read, or has a line that is not an entry, stops the
    /// start.
    fn start(&mut self) -> BoxFuture<'_, Result<Option<crate::skydns::ConfigPatch>, StartError>> {
        Box::pin(async move {
            match self.read().await {
                Some(Ok(entries)) => self.file_entries = entries,
                Some(Err(source)) => {
                    return Err(StartError::Source(Box::new(HostsStartError {
                        path: self.options.file.clone().unwrap_or_default(),
                        source,
                    })))
                }
                None => {}
            }
            Ok(None)
        })
    }

    /// Publishes the names at once, then follows the snapshot below and the file. `_settings`
    /// shape only the SkyDNS snapshot.
    fn serve(mut self: Box<Self>, _settings: &Config) -> BoxFuture<'static, ()> {
        self.compile();
        self.publish();
        tracing::info!(
            file = %self.path(),
            inline = self.options.inline.len(),
            records = self.health.entries(),
            zones = %self.options.config.zones.iter().map(ToString::to_string).collect::<Vec<_>>().join(","),
            "serving hosts names"
        );
        Box::pin(self.run())
    }
}
