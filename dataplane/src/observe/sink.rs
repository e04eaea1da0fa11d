//! One writer thread behind bounded per-worker queues: how dnstap messages and query-log lines
//! leave a worker without it ever waiting on a reader, a disk or a socket.
//!
//! A worker offers a record with `try_send`; when its queue is full the record is dropped and
//! counted by the worker, so a slow or stalled reader costs lost records, never answering
//! speed. The writer thread takes every queue in turn, writes what it took in one batch, and
//! ends once every queue is closed (its worker ended) and empty, closing its output cleanly.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Records each worker's queue holds before it drops new ones.
pub const QUEUE_LEN: usize = 8192;
/// Most records written in one batch.
const BATCH: usize = 1024;
/// Shortest and longest sleep of the writer when every queue was empty: it doubles while
/// nothing comes, so that an idle writer costs next to nothing and a busy one waits little.
const IDLE_MIN: Duration = Duration::from_millis(1);
const IDLE_MAX: Duration = Duration::from_millis(20);

/// Where the writer thread puts its batches.
pub(crate) trait Output: Send + 'static {
    /// Writes `records`; an error means they are lost (the writer counts them dropped).
    fn write(&mut self, records: &[Vec<u8>]) -> io::Result<()>;
    /// Called when there was nothing to write: a chance to reconnect.
    fn idle(&mut self) {}
    /// Called once, when every queue is closed and empty.
    fn close(&mut self) {}
}

/// What a writer thread did, read by the metrics endpoint.
#[derive(Debug, Default)]
pub struct SinkStats {
    /// Records written.
    pub sent: AtomicU64,
    /// Records the writer lost: its output failed or was not connected.
    pub dropped: AtomicU64,
}

/// A worker's end of its queue.
#[derive(Debug, Clone)]
pub(crate) struct Feed(SyncSender<Vec<u8>>);

impl Feed {
    /// Queues `record`; `false` (and the record dropped) when the queue is full or the writer
    /// is gone.
    #[inline]
    pub(crate) fn offer(&self, record: Vec<u8>) -> bool {
        self.0.try_send(record).is_ok()
    }
}

/// Starts the writer thread `name` over `output`, with one queue per worker.
pub(crate) fn spawn(
    name: &str,
    workers: usize,
    output: impl Output,
) -> io::Result<(Vec<Feed>, JoinHandle<()>, Arc<SinkStats>)> {
    let mut feeds = Vec::with_capacity(workers);
    let mut queues = Vec::with_capacity(workers);
    for _ in 0..workers {
        let (tx, rx) = sync_channel(QUEUE_LEN);
        feeds.push(Feed(tx));
        queues.push(rx);
    }
    let stats = Arc::new(SinkStats::default());
    let counted = Arc::clone(&stats);
    let thread = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || run(queues, output, &counted))?;
    Ok((feeds, thread, stats))
}

fn run(queues: Vec<Receiver<Vec<u8>>>, mut output: impl Output, stats: &SinkStats) {
    let mut batch = Vec::with_capacity(BATCH);
    let mut idle = IDLE_MIN;
    loop {
        let mut open = false;
        for queue in &queues {
            loop {
                if batch.len() >= BATCH {
                    open = true;
                    break;
                }
                match queue.try_recv() {
                    Ok(record) => batch.push(record),
                    Err(TryRecvError::Empty) => {
                        open = true;
                        break;
                    }
                    Err(TryRecvError::Disconnected) => break,
                }
            }
        }
        if !batch.is_empty() {
            let n = batch.len() as u64;
            match output.write(&batch) {
                Ok(()) => stats.sent.fetch_add(n, Ordering::Relaxed),
                Err(_) => stats.dropped.fetch_add(n, Ordering::Relaxed),
            };
            batch.clear();
            idle = IDLE_MIN;
            continue;
        }
        if !open {
            output.close();
            return;
        }
        output.idle();
        std::thread::sleep(idle);
        idle = (idle * 2).min(IDLE_MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    struct Collect(Arc<Mutex<Vec<Vec<u8>>>>, Arc<Mutex<bool>>);

    impl Output for Collect {
        fn write(&mut self, records: &[Vec<u8>]) -> io::Result<()> {
            self.0.lock().unwrap().extend_from_slice(records);
            Ok(())
        }

        fn close(&mut self) {
            *self.1.lock().unwrap() = true;
        }
    }

    #[test]
    fn records_of_every_worker_are_written_and_the_writer_ends_with_them() {
        let written = Arc::new(Mutex::new(Vec::new()));
        let closed = Arc::new(Mutex::new(false));
        let (feeds, thread, stats) = spawn("test-sink", 2, Collect(Arc::clone(&written), Arc::clone(&closed))).unwrap();
        assert!(feeds[0].offer(b"a".to_vec()));
        assert!(feeds[1].offer(b"b".to_vec()));
        drop(feeds);
        thread.join().unwrap();
        let mut got = written.lock().unwrap().clone();
        got.sort();
        assert_eq!(got, [b"a".to_vec(), b"b".to_vec()]);
        assert!(*closed.lock().unwrap());
        assert_eq!(stats.sent.load(Ordering::Relaxed), 2);
    }
}
