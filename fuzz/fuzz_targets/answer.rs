//! Any bytes through the whole answer function, against a snapshot with every record kind and
//! the cluster zones of a small Kubernetes cluster beside them:
//! as one UDP datagram, as one TCP message, and as a TCP byte stream cut into messages by their
//! 2-byte length prefixes. Every reply must keep the properties in `skyline_fuzz::check`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use skyline_dataplane::wire::types::MAX_MESSAGE_LEN;
use skyline_dataplane::Transport;
use skyline_fuzz::{check, fixture};

/// Length of the TCP framing prefix (RFC 1035 §4.2.2).
const PREFIX_LEN: usize = 2;

fuzz_target!(|data: &[u8]| {
    let snapshot = fixture::composed();
    let mut out = vec![0u8; MAX_MESSAGE_LEN];
    let rotation = data.len() as u32;
    for transport in [Transport::Udp, Transport::Tcp] {
        check::answered(data, snapshot, transport, rotation, &mut out);
    }
    let mut stream = data;
    while let Some(prefix) = stream.get(..PREFIX_LEN) {
        let len = usize::from(u16::from_be_bytes([prefix[0], prefix[1]]));
        let Some(message) = stream.get(PREFIX_LEN..PREFIX_LEN + len) else {
            break;
        };
        check::answered(message, snapshot, Transport::Tcp, rotation, &mut out);
        stream = &stream[PREFIX_LEN + len..];
    }
});
