//! Publishing snapshots, and freeing the ones they replace off the answer path.
//!
//! Freeing a snapshot of a large zone takes tens to hundreds of milliseconds. Whoever drops the
//! last reference pays for it, and after a swap that is often a worker, reloading the cell
//! between two batches: a stall clients would see. So a replaced snapshot is handed to a
//! thread of its own, which keeps it until it holds the only reference, then frees it.
//!
//! The same thread hands freed memory back to the kernel, at most every [`TRIM_EVERY`], after a
//! snapshot was published or freed: the allocator would otherwise keep what a build's
//! temporaries and a replaced snapshot took, resident and unused.

use super::{Snapshot, SnapshotCell};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// How often the retiring thread looks whether the workers have let go of what it holds.
/// Workers reload the cell at least once a second (see the worker's idle wake-up).
const CHECK_EVERY: Duration = Duration::from_millis(100);

/// Least time between two returns of free memory to the kernel: each walks the allocator's free
/// lists, which takes milliseconds on a heap of a million records, holding each arena's lock in
/// turn.
const TRIM_EVERY: Duration = Duration::from_secs(1);

/// Makes `snapshot` the one answered from. The snapshot it replaces is freed on the retiring
/// thread once no worker reads it any more.
pub fn publish(cell: &SnapshotCell, snapshot: Arc<Snapshot>) {
    let replaced = cell.swap(snapshot);
    match retiring() {
        Some(retiring) => {
            // A send fails only when the thread is gone: then the snapshot is freed here.
            let _ = retiring.send(replaced);
        }
        None => drop(replaced),
    }
}

/// The retiring thread's inbox, started on first use; `None` when no thread could be started.
fn retiring() -> Option<&'static Sender<Arc<Snapshot>>> {
    static RETIRING: OnceLock<Option<Sender<Arc<Snapshot>>>> = OnceLock::new();
    RETIRING
        .get_or_init(|| {
            let (sender, inbox) = channel::<Arc<Snapshot>>();
            let spawned = std::thread::Builder::new()
                .name("skyline-retire".into())
                .spawn(move || {
                    let mut held: Vec<Arc<Snapshot>> = Vec::new();
                    // A snapshot was published or freed since memory was last handed back.
                    let mut untrimmed = false;
                    let mut trimmed: Option<Instant> = None;
                    loop {
                        match inbox.recv_timeout(CHECK_EVERY) {
                            Ok(snapshot) => {
                                held.push(snapshot);
                                untrimmed = true;
                            }
                            Err(RecvTimeoutError::Timeout) => {}
                            Err(RecvTimeoutError::Disconnected) => return,
                        }
                        let before = held.len();
                        held.retain(|snapshot| Arc::strong_count(snapshot) > 1);
                        untrimmed |= held.len() < before;
                        if untrimmed && trimmed.is_none_or(|at| at.elapsed() >= TRIM_EVERY) {
                            crate::sys::release_free_memory();
                            untrimmed = false;
                            trimmed = Some(Instant::now());
                        }
                    }
                });
            match spawned {
                Ok(_) => Some(sender),
                Err(error) => {
                    tracing::warn!(%error, "cannot start the snapshot retiring thread; replaced snapshots are freed where they are released");
                    None
                }
            }
        })
        .as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_replaced_snapshot_is_freed_once_its_last_reader_lets_go() {
        let cell = super::super::empty_cell();
        publish(
            &cell,
            Arc::new(Snapshot {
                generation: 1,
                ..Snapshot::default()
            }),
        );
        let reader = cell.load_full();
        let watch = Arc::downgrade(&reader);
        publish(
            &cell,
            Arc::new(Snapshot {
                generation: 2,
                ..Snapshot::default()
            }),
        );
        std::thread::sleep(CHECK_EVERY * 3);
        assert!(watch.upgrade().is_some(), "freed while a reader holds it");
        drop(reader);
        let deadline = Instant::now() + Duration::from_secs(5);
        while watch.upgrade().is_some() {
            assert!(Instant::now() < deadline, "never freed");
            std::thread::sleep(CHECK_EVERY);
        }
        assert_eq!(cell.load().generation, 2);
    }
}
