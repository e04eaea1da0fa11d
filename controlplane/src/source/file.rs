//! The records-file source, skyline's embedded default: no etcd needed. It reads a records file
//! (see [`super::records_file`]), compiles a SkyDNS snapshot and publishes it, then watches the
//! file and republishes whenever it changes.
//!
//! Change detection polls the file's metadata (device, inode, size, modification and change
//! times) every [`POLL_INTERVAL`], which sees both an atomic replace (write aside, rename: a new
//! inode) and an in-place rewrite; a reload (new [`Overrides`], handed in on SIGHUP) reloads at
//! once whatever the metadata says, with those settings. A file
//! caught half-written fails to decode, keeps the current snapshot, and loads on the next poll
//! once the writer is done and the metadata has moved again. Reading, decoding and compiling run
//! on tokio's blocking pool, so a large file never stalls the runtime. With `--dnssec`, the file
//! is also loaded again when the signatures come due for renewal ([`super::renewal`]), changed
//! or not.

use super::overrides::Overrides;
use super::records_file::{config_key, parse_records_file, FileError, RecordsFile};
use super::renewal;
use super::seam::{Source, SourceReport, StartError};
use super::stats::SourceStats;
use crate::skydns::ConfigPatch;
use futures::future::BoxFuture;
use skyline_dataplane::signer::build;
use skyline_dataplane::snapshot::publish;
use skyline_dataplane::snapshot::skydns::Config;
use skyline_dataplane::SnapshotCell;
use std::future::Future;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::time::{Instant, MissedTickBehavior};

/// How often the file's metadata is checked: a change is served within about this long, while
/// a `stat` four times a second costs nothing measurable.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// Shortest period between two loads for the renewal of signatures: a file that cannot be
/// loaded when they come due is tried again at this pace, not in a loop.
const RENEWAL_RETRY: Duration = Duration::from_secs(60);

/// Rejected records logged one by one per load; past this only their number is logged, so that
/// a file full of bad records cannot flood the log on every reload.
const LOGGED_REJECTIONS: usize = 16;

/// A records file being served: where it is, how to read it, and where to publish.
#[derive(Debug)]
pub struct FileSource {
    shared: Arc<Shared>,
    /// Where reloads hand in new settings.
    reloads: Overrides,
    /// The file's metadata at the last load attempt; `None` before the first.
    seen: Option<Stamp>,
}

/// What a successful load published.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The generation of the published snapshot.
    pub generation: u64,
    /// Records in it.
    pub records: usize,
    /// Records skipped as invalid.
    pub rejected: usize,
    /// The file's own settings object (`/<prefix>/config`), as written there.
    pub config: Option<ConfigPatch>,
}

#[derive(Debug)]
struct Shared {
    path: PathBuf,
    path_prefix: String,
    overrides: Overrides,
    cell: SnapshotCell,
    stats: Arc<SourceStats>,
}

impl FileSource {
    /// A source for the file at `path`, whose keys live under `/<path_prefix>/`. `overrides` are
    /// the settings of the layers above the file's own `/<prefix>/config` (flags, environment,
    /// configuration file): they win over it, and SkyDNS's defaults fill what neither sets; a
    /// reload that replaces them reloads the file. Nothing is read until [`FileSource::load`] or
    /// [`FileSource::watch`].
    pub fn new(
        path: impl Into<PathBuf>,
        path_prefix: impl Into<String>,
        overrides: impl Into<Overrides>,
        cell: SnapshotCell,
    ) -> FileSource {
        let overrides = overrides.into();
        let shared = Shared {
            path: path.into(),
            path_prefix: path_prefix.into(),
            overrides: overrides.clone(),
            cell,
            stats: Arc::default(),
        };
        FileSource {
            shared: Arc::new(shared),
            reloads: overrides,
            seen: None,
        }
    }

    /// The source's counters, shared with whoever reports them.
    pub fn stats(&self) -> Arc<SourceStats> {
        Arc::clone(&self.shared.stats)
    }

    /// The file being served.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Loads the file and publishes its snapshot now, on the calling thread: at startup, so that
    /// a missing or broken file is reported before anything is served. On error the published
    /// snapshot is left as it was.
    pub fn load(&mut self) -> Result<Loaded, FileError> {
        let stamp = Stamp::of(&std::fs::metadata(&self.shared.path).map_err(FileError::Read)?);
        self.seen = Some(stamp);
        self.shared.publish()
    }

    /// The future that polls the file and reloads it, and reloads it at once with the settings
    /// each reload hands in, forever. Spawn it on a tokio runtime with time enabled. If the file
    /// was never loaded, the first poll loads it.
    pub fn watch(self) -> impl Future<Output = ()> + Send + 'static {
        self.run()
    }

    async fn run(mut self) {
        let mut poll = tokio::time::interval(POLL_INTERVAL);
        poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut missing = false;
        let mut renewal_tried: Option<Instant> = None;
        loop {
            let since_tried = renewal_tried.map(|at| RENEWAL_RETRY.saturating_sub(at.elapsed()));
            let renewal = renewal::wait(&self.shared.cell.load(), SystemTime::now())
                .map(|wait| wait.max(since_tried.unwrap_or_default()));
            let forced = tokio::select! {
                _ = poll.tick() => false,
                () = self.reloads.changed() => true,
                () = renewal::sleep(renewal) => {
                    let due = renewal::wait(&self.shared.cell.load(), SystemTime::now()) == Some(Duration::ZERO);
                    if due {
                        renewal_tried = Some(Instant::now());
                    }
                    due
                }
            };
            let stamp = match tokio::fs::metadata(&self.shared.path).await {
                Ok(meta) => Stamp::of(&meta),
                Err(e) => {
                    if !missing || forced {
                        self.shared.stats.reload_failures.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(
                            path = %self.shared.path.display(),
                            error = %e,
                            "records file unavailable; keeping the current snapshot"
                        );
                    }
                    missing = true;
                    continue;
                }
            };
            missing = false;
            if !forced && self.seen == Some(stamp) {
                continue;
            }
            self.seen = Some(stamp);
            let shared = Arc::clone(&self.shared);
            match tokio::task::spawn_blocking(move || shared.publish()).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    tracing::warn!(
                        path = %self.shared.path.display(),
                        error = %e,
                        "records file not loaded; keeping the current snapshot"
                    );
                }
                Err(e) => {
                    self.shared.stats.reload_failures.fetch_add(1, Ordering::Relaxed);
                    tracing::error!(
                        path = %self.shared.path.display(),
                        error = %e,
                        "records file load did not complete; keeping the current snapshot"
                    );
                }
            }
        }
    }
}

/// The records file as the process runs it: loaded at start, before anything is served, so
/// that a missing or broken file stops the start with its reason; then watched.
impl Source for FileSource {
    fn report(&self) -> Arc<dyn SourceReport> {
        Arc::new(FileReport(self.stats()))
    }

    fn start(&mut self) -> BoxFuture<'_, Result<Option<ConfigPatch>, StartError>> {
        let loaded = self.load().map_err(|source| StartError::RecordsFile {
            path: self.shared.path.clone(),
            source,
        });
        Box::pin(std::future::ready(loaded.map(|loaded| loaded.config)))
    }

    /// Each load resolves the operator's settings over the file's own again, so the settings
    /// of the start are not needed.
    fn serve(self: Box<Self>, _settings: &Config) -> BoxFuture<'static, ()> {
        Box::pin(self.watch())
    }
}

/// What the records file source reports: its load counters; ready once a load published.
#[derive(Debug)]
struct FileReport(Arc<SourceStats>);

impl SourceReport for FileReport {
    fn name(&self) -> &'static str {
        "records_file"
    }

    fn ready(&self) -> Result<(), &'static str> {
        if self.0.reloads.load(Ordering::Relaxed) > 0 {
            Ok(())
        } else {
            Err("records file (not loaded yet)")
        }
    }

    fn loads(&self) -> Option<&SourceStats> {
        Some(&self.0)
    }
}

impl Shared {
    /// Loads and publishes, counting the outcome; a failure is left to the caller to report.
    fn publish(&self) -> Result<Loaded, FileError> {
        let result = self.load();
        match &result {
            Ok(loaded) => {
                self.stats.reloads.fetch_add(1, Ordering::Relaxed);
                tracing::info!(
                    path = %self.path.display(),
                    generation = loaded.generation,
                    records = loaded.records,
                    rejected = loaded.rejected,
                    "records file loaded"
                );
            }
            Err(_) => {
                self.stats.reload_failures.fetch_add(1, Ordering::Relaxed);
            }
        }
        result
    }

    fn load(&self) -> Result<Loaded, FileError> {
        let bytes = std::fs::read(&self.path).map_err(FileError::Read)?;
        let file = parse_records_file(&bytes, &self.path_prefix)?;
        let settings = self.overrides.current().or(file.config.clone().unwrap_or_default());
        let config = settings
            .skydns_config(&self.path_prefix)
            .map_err(|source| FileError::Config {
                key: config_key(&self.path_prefix),
                source,
            })?;
        self.log_rejected(&file);
        let generation = self.cell.load().generation + 1;
        let snapshot = build(&config, &file.records, generation, SystemTime::now());
        publish(&self.cell, Arc::new(snapshot));
        let stats = &self.stats;
        stats.records_loaded.store(file.records.len() as u64, Ordering::Relaxed);
        stats
            .records_rejected
            .store(file.rejected.len() as u64, Ordering::Relaxed);
        stats.generation.store(generation, Ordering::Relaxed);
        Ok(Loaded {
            generation,
            records: file.records.len(),
            rejected: file.rejected.len(),
            config: file.config,
        })
    }

    fn log_rejected(&self, file: &RecordsFile) {
        for rejected in file.rejected.iter().take(LOGGED_REJECTIONS) {
            tracing::warn!(
                path = %self.path.display(),
                key = %rejected.key,
                error = %rejected.error,
                "record skipped"
            );
        }
        if file.rejected.len() > LOGGED_REJECTIONS {
            tracing::warn!(
                path = %self.path.display(),
                skipped = file.rejected.len(),
                logged = LOGGED_REJECTIONS,
                "more records skipped than logged one by one"
            );
        }
    }
}

/// The metadata that changes whenever the file's contents may have: a rename brings a new inode,
/// a rewrite a new size or modification time; the change time also moves on `touch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    #[test]
    fn the_report_is_ready_once_the_file_is_loaded_and_counts_its_loads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("records.json");
        std::fs::write(&path, r#"{"/skydns/local/skydns/web": {"host": "10.0.0.1"}}"#).unwrap();
        let mut source = FileSource::new(
            &path,
            "skydns",
            ConfigPatch::default(),
            skyline_dataplane::snapshot::empty_cell(),
        );
        let report = source.report();
        assert_eq!(report.name(), "records_file");
        assert_eq!(report.ready(), Err("records file (not loaded yet)"));
        source.load().unwrap();
        assert_eq!(report.ready(), Ok(()));
        let loads = report.loads().unwrap();
        assert_eq!(loads.records_loaded.load(Ordering::Relaxed), 1);
        assert!(report.persisted().is_none() && report.families(SystemTime::now()).is_empty());
    }

    #[test]
    fn a_broken_file_stops_the_start_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing.json");
        let mut source = FileSource::new(
            &path,
            "skydns",
            ConfigPatch::default(),
            skyline_dataplane::snapshot::empty_cell(),
        );
        let started = source.start().now_or_never().expect("the records file loads at once");
        let error = started.unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with(&format!("records file {}: ", path.display())),
            "{error}"
        );
    }
}
