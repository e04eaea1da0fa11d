//! One writer thread behind bounded per-worker queues: how dnstap messages and query-log lines
//! leave a worker without it ever waiting on a reader, a disk or a socket.
//!
//! A worker offers a record with `try_send`; when its queue is full the record is dropped and
//! counted by the worker, so a slow or stalled reader costs lost records, never answering
//! speed. The writer thread takes every queue in turn, writes what it took in one batch, and
//! ends once every queue is closed (its worker ended) and empty, closing its output cleanly.
//! It hands each written record's buffer back to the queue it came from, so that a worker
//! encodes its records into recycled buffers and allocates none once its traffic is steady.

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
/// Written buffers each queue keeps for its worker to reuse.
const FREE_LEN: usize = 1024;
/// Buffers that grew larger than this (a record of a large reply) are freed, not reused, so
/// that a burst of them does not stay allocated.
const REUSED_CAPACITY: usize = 4096;
/// What a fresh buffer holds before it has to grow: a record of a typical reply.
const FRESH_CAPACITY: usize = 1024;
/// Buffers each queue starts with (512 KiB): enough for the records a busy worker makes
/// while its writer sleeps, so that the worker allocates none from its first query on.
const PREFILLED: usize = 512;
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

/// A worker's end of its queue: records go in, written buffers come back.
#[derive(Debug)]
pub(crate) struct Feed {
    queue: SyncSender<Vec<u8>>,
    free: Receiver<Vec<u8>>,
}

impl Feed {
    /// An empty buffer to encode a record into: one the writer gave back, or a new one.
    #[inline]
    pub(crate) fn buffer(&self) -> Vec<u8> {
        self.free
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(FRESH_CAPACITY))
    }

    /// Queues `record`; `false` (and the record dropped) when the queue is full or the writer
    /// is gone.
    #[inline]
    pub(crate) fn offer(&self, record: Vec<u8>) -> bool {
        self.queue.try_send(record).is_ok()
    }
}

/// The writer's end of one queue.
struct Queue {
    records: Receiver<Vec<u8>>,
    free: SyncSender<Vec<u8>>,
}

/// Starts the writer thread `name` over `output`, with `count` queues.
pub(crate) fn spawn(
    name: &str,
    count: usize,
    output: impl Output,
) -> io::Result<(Vec<Feed>, JoinHandle<()>, Arc<SinkStats>)> {
    let mut feeds = Vec::with_capacity(count);
    let mut queues = Vec::with_capacity(count);
    for _ in 0..count {
        let (queue, records) = sync_channel(QUEUE_LEN);
        let (free_tx, free) = sync_channel(FREE_LEN);
        for _ in 0..PREFILLED {
            let _ = free_tx.try_send(Vec::with_capacity(FRESH_CAPACITY));
        }
        feeds.push(Feed { queue, free });
        queues.push(Queue { records, free: free_tx });
    }
    let stats = Arc::new(SinkStats::default());
    let counted = Arc::clone(&stats);
    let thread = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || run(queues, output, &counted))?;
    Ok((feeds, thread, stats))
}

fn run(queues: Vec<Queue>, mut output: impl Output, stats: &SinkStats) {
    let mut batch = Vec::with_capacity(BATCH);
    let mut origins = Vec::with_capacity(BATCH);
    let mut idle = IDLE_MIN;
    loop {
        let mut open = false;
        for (at, queue) in queues.iter().enumerate() {
            loop {
                if batch.len() >= BATCH {
                    open = true;
                    break;
                }
                match queue.records.try_recv() {
                    Ok(record) => {
                        batch.push(record);
                        origins.push(at);
                    }
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
            for (mut record, at) in batch.drain(..).zip(origins.drain(..)) {
                if record.capacity() <= REUSED_CAPACITY {
                    record.clear();
                    // A full free list, or a worker gone: the buffer is simply freed.
                    let _ = queues[at].free.try_send(record);
                }
            }
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

    #[test]
    fn written_buffers_come_back_to_the_queue_they_came_from() {
        let written = Arc::new(Mutex::new(Vec::new()));
        let closed = Arc::new(Mutex::new(false));
        let (feeds, thread, _) = spawn("test-sink", 2, Collect(Arc::clone(&written), Arc::clone(&closed))).unwrap();
        let prefilled = |feed: &Feed| std::iter::from_fn(|| feed.free.try_recv().ok()).count();
        assert_eq!(prefilled(&feeds[1]), PREFILLED);
        let mut record = feeds[1].buffer();
        record.extend_from_slice(b"record");
        let at = record.as_ptr();
        assert!(feeds[1].offer(record));
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let back = loop {
            if let Ok(buffer) = feeds[1].free.try_recv() {
                break buffer;
            }
            assert!(std::time::Instant::now() < deadline, "the buffer never came back");
            std::thread::sleep(Duration::from_millis(1));
        };
        assert_eq!((back.as_ptr(), back.len()), (at, 0), "the same buffer, emptied");
        assert_eq!(prefilled(&feeds[0]), PREFILLED, "nothing came back to another queue");
        drop(feeds);
        thread.join().unwrap();
    }
}
