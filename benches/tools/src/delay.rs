//! A slowed upstream: a UDP relay that holds every query for a fixed time before passing it
//! on, for `benches/upstream_faults.sh` on machines without `netem`. Replies go back at once,
//! from the relay's own address, so a forwarder sees one upstream whose round trip is the
//! real one plus the delay.

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Queries passed on and not yet answered, by the ID the relay gave them: whom to answer, and
/// with which ID.
type Pending = Arc<Mutex<HashMap<u16, (SocketAddr, [u8; 2])>>>;

/// Relays datagrams from `front` to `upstream` after `delay`, and replies back; runs until an
/// I/O error.
pub fn relay(front: UdpSocket, upstream: SocketAddr, delay: Duration) -> io::Result<()> {
    let back = UdpSocket::bind(SocketAddr::new(upstream.ip(), 0))?;
    back.connect(upstream)?;
    let pending: Pending = Arc::default();
    let (queue, due) = mpsc::channel::<(Instant, SocketAddr, Vec<u8>)>();

    let sender = {
        let (back, pending) = (back.try_clone()?, Arc::clone(&pending));
        thread::spawn(move || -> io::Result<()> {
            let mut next_id = 0u16;
            for (at, client, mut query) in due {
                thread::sleep(at.saturating_duration_since(Instant::now()));
                next_id = next_id.wrapping_add(1);
                let original = [query[0], query[1]];
                query[..2].copy_from_slice(&next_id.to_be_bytes());
                pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(next_id, (client, original));
                back.send(&query)?;
            }
            Ok(())
        })
    };
    let replier = {
        let front = front.try_clone()?;
        thread::spawn(move || -> io::Result<()> {
            let mut buf = [0u8; 65535];
            loop {
                let len = back.recv(&mut buf)?;
                if len < 2 {
                    continue;
                }
                let id = u16::from_be_bytes([buf[0], buf[1]]);
                let asked = pending.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                if let Some((client, original)) = asked {
                    buf[..2].copy_from_slice(&original);
                    front.send_to(&buf[..len], client)?;
                }
            }
        })
    };

    let mut buf = [0u8; 65535];
    loop {
        if sender.is_finished() || replier.is_finished() {
            return Err(io::Error::other("a relay thread stopped"));
        }
        let (len, client) = front.recv_from(&mut buf)?;
        if len >= 12
            && queue
                .send((Instant::now() + delay, client, buf[..len].to_vec()))
                .is_err()
        {
            return Err(io::Error::other("the sending thread stopped"));
        }
    }
}
