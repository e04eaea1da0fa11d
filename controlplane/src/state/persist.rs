//! When a source's data is written, and its one read back: a source notes each change with
//! [`Persist::changed`], waits on [`due`] beside its other work, and hands over its data then
//! with [`Persist::write`]; encoding and writing run on the blocking pool, never on the
//! runtime's thread.

use super::file::StateFile;
use super::format::StateError;
use super::health::StateHealth;
use super::{human, rfc3339, REFRESH, WRITE_INTERVAL};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::task::{JoinError, JoinHandle};
use tokio::time::Instant;

/// The pause between writes as a multiple of the last write's duration: a data set that takes
/// a second to write is written at most every ten, so writing costs at most a tenth of a core.
const INTERVAL_PER_WRITE: u32 = 10;

/// Why a write did not replace the file; the previous file stays.
#[derive(Debug, thiserror::Error)]
enum WriteError {
    /// The data did not encode.
    #[error("cannot encode the data: {0}")]
    Encode(#[from] serde_json::Error),
    /// The file system refused (missing directory, no space, permissions).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// A write on the blocking pool: how long it took, or why it failed.
type Writing = JoinHandle<Result<Duration, WriteError>>;

/// One source's state file and the pacing of its writes.
#[derive(Debug)]
pub(crate) struct Persist {
    file: Arc<StateFile>,
    health: Arc<StateHealth>,
    /// The data changed since the last write started.
    dirty: bool,
    /// The earliest the next write may start.
    next: Instant,
    /// When the last write that succeeded started.
    last_written: Option<Instant>,
    /// The write in flight, with when its data was current.
    writing: Option<(Writing, SystemTime)>,
    /// The last write failed: a further failure is logged at debug level only.
    failing: bool,
    /// The file was read back already: that happens once per process at most.
    restore_tried: bool,
}

impl Persist {
    /// Paces the writes of `file`, reporting to `health`.
    pub(crate) fn new(file: StateFile, health: Arc<StateHealth>) -> Persist {
        health.set_persisting();
        Persist {
            file: Arc::new(file),
            health,
            dirty: false,
            next: Instant::now(),
            last_written: None,
            writing: None,
            failing: false,
            restore_tried: false,
        }
    }

    /// The source's complete data changed: it is to be written.
    pub(crate) fn changed(&mut self) {
        self.dirty = true;
    }

    /// When the next write should start: once the pause after the last one is over, for data
    /// that changed; every [`REFRESH`] while the source is `following` its origin, so that
    /// the file says the data was current then. `None` while a write is in flight.
    fn due_at(&self, following: bool) -> Option<Instant> {
        if self.writing.is_some() {
            return None;
        }
        if self.dirty {
            return Some(self.next);
        }
        let refresh = self.last_written.filter(|_| following)? + REFRESH;
        Some(refresh.max(self.next))
    }

    /// Completes when a write should start (see [`Persist::due_at`]), having taken the outcome
    /// of the write in flight first. Safe to drop at any await, as `select!` does.
    async fn due(&mut self, following: bool) {
        if let Some((writing, current_at)) = self.writing.as_mut() {
            let current_at = *current_at;
            let outcome = writing.await;
            self.writing = None;
            self.finished(outcome, current_at);
        }
        match self.due_at(following) {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    }

    /// Writes the data `encode` makes, on the blocking pool: the source's complete data as it
    /// stands now.
    pub(crate) fn write(&mut self, encode: impl FnOnce() -> Result<Vec<u8>, serde_json::Error> + Send + 'static) {
        self.dirty = false;
        let file = Arc::clone(&self.file);
        let current_at = SystemTime::now();
        let writing = tokio::task::spawn_blocking(move || {
            let started = std::time::Instant::now();
            let data = encode()?;
            file.write(&data, current_at)?;
            Ok(started.elapsed())
        });
        self.writing = Some((writing, current_at));
    }

    fn finished(&mut self, outcome: Result<Result<Duration, WriteError>, JoinError>, current_at: SystemTime) {
        let now = Instant::now();
        let path = self.file.path().display();
        match outcome {
            Ok(Ok(took)) => {
                self.health.written(current_at);
                self.last_written = Some(now);
                self.next = now + WRITE_INTERVAL.max(took * INTERVAL_PER_WRITE);
                if std::mem::take(&mut self.failing) {
                    tracing::info!("persisted snapshot written to {path} again");
                }
                tracing::debug!(?took, "persisted snapshot written to {path}");
            }
            Ok(Err(error)) => self.failed(&error, now),
            Err(error) => self.failed(&error, now),
        }
    }

    fn failed(&mut self, error: &dyn std::error::Error, now: Instant) {
        self.health.write_failed();
        self.dirty = true;
        self.next = now + WRITE_INTERVAL;
        let path = self.file.path().display();
        if std::mem::replace(&mut self.failing, true) {
            tracing::debug!(%error, "persisted snapshot still not written to {path}");
        } else {
            tracing::warn!(%error, "persisted snapshot not written to {path}; the previous file stays, retrying");
        }
    }

    /// The data in the file, decoded by `decode`, with when it was current; once per process,
    /// `None` ever after. A file that is missing or not served (corrupt, foreign, too old, of
    /// another version, undecodable) gives `None` and one log line saying why.
    pub(crate) async fn restore<T: Send + 'static>(
        &mut self,
        decode: impl FnOnce(&[u8]) -> Result<T, serde_json::Error> + Send + 'static,
    ) -> Option<(T, SystemTime)> {
        if std::mem::replace(&mut self.restore_tried, true) {
            return None;
        }
        let file = Arc::clone(&self.file);
        let read = tokio::task::spawn_blocking(move || {
            let restored = file.read(SystemTime::now())?;
            let data = decode(&restored.data).map_err(StateError::Data)?;
            Ok::<_, StateError>((data, restored.written))
        })
        .await;
        let source = self.file.source().name();
        let path = self.file.path().display();
        match read {
            Ok(Ok((data, written))) => {
                let age = SystemTime::now().duration_since(written).unwrap_or(Duration::ZERO);
                tracing::warn!(
                    current_at = %rfc3339(written),
                    age = %human(age),
                    "{source} unreachable at start: serving its data persisted in {path}, marked stale, until it answers"
                );
                Some((data, written))
            }
            Ok(Err(StateError::Missing)) => {
                tracing::info!("no persisted {source} data in {path} yet; its zones answer SERVFAIL until it answers");
                None
            }
            Ok(Err(error)) => {
                tracing::warn!(%error, "persisted {source} data in {path} ignored; its zones answer SERVFAIL until it answers");
                None
            }
            Err(error) => {
                tracing::warn!(%error, "reading the persisted {source} data in {path} did not complete");
                None
            }
        }
    }
}

/// Completes when `persist`'s next write should start (see [`Persist::due_at`]); never when
/// there is nothing to persist. `following`: the source follows its origin now, so its data is
/// current.
pub(crate) async fn due(persist: Option<&mut Persist>, following: bool) {
    match persist {
        Some(persist) => persist.due(following).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Source, StateDir, DEFAULT_MAX_AGE};

    fn persist(dir: &std::path::Path) -> (Persist, Arc<StateHealth>) {
        let health = Arc::new(StateHealth::default());
        let file = StateDir::new(dir, DEFAULT_MAX_AGE).file(Source::Etcd, "id".into());
        (Persist::new(file, Arc::clone(&health)), health)
    }

    /// Takes the outcome of the write in flight.
    async fn settle(p: &mut Persist) {
        let (writing, current_at) = p.writing.take().unwrap();
        p.finished(writing.await, current_at);
    }

    #[tokio::test]
    async fn changes_are_written_at_most_every_interval_and_refreshed_while_following() {
        let dir = tempfile::tempdir().unwrap();
        let (mut p, health) = persist(dir.path());
        assert!(health.is_persisting());
        assert_eq!(p.due_at(true), None, "nothing to write before the first change");
        p.changed();
        let limit = Duration::from_secs(5);
        tokio::time::timeout(limit, due(Some(&mut p), false))
            .await
            .expect("the first change is written at once");
        p.write(|| Ok(b"one".to_vec()));
        assert_eq!(p.due_at(false), None, "not while a write is in flight");
        settle(&mut p).await;
        assert_eq!(health.writes(), 1);
        let last = p.last_written.unwrap();
        p.changed();
        assert!(
            p.due_at(false).unwrap() >= last + WRITE_INTERVAL,
            "the next change waits for the interval"
        );
        p.write(|| Ok(b"two".to_vec()));
        settle(&mut p).await;
        let last = p.last_written.unwrap();
        assert_eq!(p.due_at(false), None, "no refresh while the source is not followed");
        assert_eq!(p.due_at(true), Some(last + REFRESH), "a refresh while it is");
        let restored = p.file.read(SystemTime::now()).unwrap();
        assert_eq!(restored.data, b"two");
        assert!(health.last_write().is_some());
    }

    #[tokio::test]
    async fn a_failed_write_is_counted_and_retried() {
        let dir = tempfile::tempdir().unwrap();
        let (mut p, health) = persist(&dir.path().join("missing"));
        p.changed();
        p.write(|| Ok(b"data".to_vec()));
        settle(&mut p).await;
        assert_eq!((health.writes(), health.write_failures()), (0, 1));
        assert!(p.due_at(false).is_some(), "written again later");
    }

    #[tokio::test]
    async fn the_file_is_read_back_once() {
        let dir = tempfile::tempdir().unwrap();
        let (mut p, _) = persist(dir.path());
        p.file.write(b"data", SystemTime::now()).unwrap();
        let (data, _) = p.restore(|bytes| Ok(bytes.to_vec())).await.unwrap();
        assert_eq!(data, b"data");
        assert!(p.restore(|bytes| Ok(bytes.to_vec())).await.is_none());
    }

    #[tokio::test]
    async fn undecodable_data_is_not_served() {
        let dir = tempfile::tempdir().unwrap();
        let (mut p, _) = persist(dir.path());
        p.file.write(b"not json", SystemTime::now()).unwrap();
        let restored = p.restore(|bytes| serde_json::from_slice::<Vec<u32>>(bytes)).await;
        assert!(restored.is_none());
    }
}
