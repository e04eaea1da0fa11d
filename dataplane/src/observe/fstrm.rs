//! The Frame Streams protocol (the transport of dnstap) on a unix socket, as a writer: the
//! bidirectional handshake (READY with the content type, the reader's ACCEPT, START), data
//! frames (a 32-bit big-endian length, then the payload), and STOP, answered by FINISH, at the
//! end. A connection that fails or stalls past [`IO_TIMEOUT`] is closed and made again with
//! capped exponential backoff; what could not be written meanwhile is lost and counted.

use super::sink::Output;
use crate::stats::RateLimitedWarning;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Control frame types.
pub const ACCEPT: u32 = 1;
/// Starts a stream of data frames.
pub const START: u32 = 2;
/// Ends a stream.
pub const STOP: u32 = 3;
/// The writer's offer of content types.
pub const READY: u32 = 4;
/// The reader's acknowledgement of STOP.
pub const FINISH: u32 = 5;
/// The control field that names a content type.
pub const FIELD_CONTENT_TYPE: u32 = 1;
/// Longest control frame accepted from a reader.
const MAX_CONTROL: usize = 512;

/// Longest a read or write of the connection may block: past it, the reader is taken to be
/// stalled and the connection is made again.
pub const IO_TIMEOUT: Duration = Duration::from_secs(2);
/// First and longest wait before connecting again.
/// Bytes of frames gathered before one write: the writer's buffer never grows past this and
/// one record.
const WRITE_CHUNK: usize = 64 * 1024;
/// The longest record: a DNS message of 65,535 bytes and its dnstap fields.
const MAX_RECORD: usize = 65_535 + 1024;
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Appends a control frame of `kind` with `content_type` (if any) to `out`.
pub fn control_frame(kind: u32, content_type: Option<&[u8]>, out: &mut Vec<u8>) {
    let fields = content_type.map_or(0, |t| 8 + t.len());
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(&((4 + fields) as u32).to_be_bytes());
    out.extend_from_slice(&kind.to_be_bytes());
    if let Some(t) = content_type {
        out.extend_from_slice(&FIELD_CONTENT_TYPE.to_be_bytes());
        out.extend_from_slice(&(t.len() as u32).to_be_bytes());
        out.extend_from_slice(t);
    }
}

/// Reads one control frame; returns its type.
fn read_control(stream: &mut impl Read) -> io::Result<u32> {
    let mut word = [0; 4];
    stream.read_exact(&mut word)?;
    if word != [0; 4] {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a data frame where a control frame was due",
        ));
    }
    stream.read_exact(&mut word)?;
    let len = u32::from_be_bytes(word) as usize;
    if !(4..=MAX_CONTROL).contains(&len) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "control frame of a bad length",
        ));
    }
    let mut frame = vec![0; len];
    stream.read_exact(&mut frame)?;
    Ok(u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]))
}

/// A Frame Streams writer to the unix socket at `path`.
pub(crate) struct FstrmWriter {
    path: PathBuf,
    content_type: &'static [u8],
    conn: Option<UnixStream>,
    next_attempt: Instant,
    backoff: Duration,
    buf: Vec<u8>,
    warning: RateLimitedWarning,
}

impl FstrmWriter {
    /// A writer that connects on first use.
    pub(crate) fn new(path: PathBuf, content_type: &'static [u8]) -> FstrmWriter {
        FstrmWriter {
            path,
            content_type,
            conn: None,
            next_attempt: Instant::now(),
            backoff: BACKOFF_MIN,
            buf: Vec::with_capacity(WRITE_CHUNK + MAX_RECORD),
            warning: RateLimitedWarning::default(),
        }
    }

    fn connect(&mut self) {
        let now = Instant::now();
        if self.conn.is_some() || now < self.next_attempt {
            return;
        }
        match self.handshake() {
            Ok(stream) => {
                tracing::info!(socket = %self.path.display(), "dnstap reader connected");
                self.conn = Some(stream);
                self.backoff = BACKOFF_MIN;
            }
            Err(e) => self.failed("connecting to the dnstap reader failed", &e),
        }
    }

    fn handshake(&mut self) -> io::Result<UnixStream> {
        let mut stream = UnixStream::connect(&self.path)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        let mut frame = Vec::new();
        control_frame(READY, Some(self.content_type), &mut frame);
        stream.write_all(&frame)?;
        if read_control(&mut stream)? != ACCEPT {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "the reader did not ACCEPT"));
        }
        frame.clear();
        control_frame(START, Some(self.content_type), &mut frame);
        stream.write_all(&frame)?;
        Ok(stream)
    }

    fn failed(&mut self, what: &str, e: &io::Error) {
        self.conn = None;
        self.next_attempt = Instant::now() + self.backoff;
        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
        if let Some(suppressed) = self.warning.allow(Instant::now()) {
            tracing::warn!(socket = %self.path.display(), error = %e, suppressed, "{what}");
        }
    }
}

impl Output for FstrmWriter {
    fn write(&mut self, records: &[Vec<u8>]) -> io::Result<()> {
        self.connect();
        let Some(conn) = self.conn.as_mut() else {
            return Err(io::ErrorKind::NotConnected.into());
        };
        self.buf.clear();
        let mut written = Ok(());
        for record in records {
            if self.buf.len() + 4 + record.len() > WRITE_CHUNK && !self.buf.is_empty() {
                written = conn.write_all(&self.buf);
                self.buf.clear();
                if written.is_err() {
                    break;
                }
            }
            self.buf.extend_from_slice(&(record.len() as u32).to_be_bytes());
            self.buf.extend_from_slice(record);
        }
        if written.is_ok() {
            written = conn.write_all(&self.buf);
        }
        if let Err(e) = &written {
            self.failed("writing to the dnstap reader failed; connecting again", e);
        }
        written
    }

    fn idle(&mut self) {
        self.connect();
    }

    fn close(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        let mut frame = Vec::new();
        control_frame(STOP, None, &mut frame);
        let finished = conn.write_all(&frame).and_then(|()| read_control(&mut conn));
        if !matches!(finished, Ok(FINISH)) {
            tracing::debug!(socket = %self.path.display(), "the dnstap reader did not FINISH");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_frames_carry_their_type_and_content_type() {
        let mut out = Vec::new();
        control_frame(READY, Some(b"ab"), &mut out);
        assert_eq!(
            out,
            [0, 0, 0, 0, 0, 0, 0, 14, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 2, b'a', b'b']
        );
        assert_eq!(read_control(&mut out.as_slice()).unwrap(), READY);
        out.clear();
        control_frame(STOP, None, &mut out);
        assert_eq!(out, [0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 3]);
    }
}
