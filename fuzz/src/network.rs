//! A simulated network under the forwarder's state machine (`forward::machine`): it carries out
//! the machine's actions as the worker's socket layer does, checking each one, hands tries the
//! replies an upstream would send, and fails sends when told to.
//!
//! Checked on every action: a transmit is a recursive query with one question of class IN and
//! skyline's OPT; a TCP try appears only while a truncated reply is being handed to the UDP try
//! it replaces, to the same upstream; no two open tries share an index; a close names a try that
//! is open, or one whose transmit failed in the same batch of actions (the machine had already
//! ended it when the transmit was carried out); no try is left open once nothing is in flight.

use hickory_proto::op::{Message, MessageType, OpCode};
use hickory_proto::rr::DNSClass;
use skyline_dataplane::cache::Cache;
use skyline_dataplane::forward::machine::{Action, Machine, Protocol, SendError, Transmit, TryId};
use skyline_dataplane::wire::types::ADVERTISED_UDP_LEN;
use std::io;
use std::net::SocketAddr;
use std::time::Instant;

/// How the next transmit fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsent {
    /// This host is out of sockets.
    Local,
    /// The upstream cannot be reached.
    Upstream,
}

/// The tries on the wire.
#[derive(Debug, Default)]
pub struct Network {
    /// Tries whose transmit went out and that the machine has not closed, oldest first.
    pub open: Vec<Transmit>,
    /// Set to make the next transmit fail.
    pub fail_next: Option<Unsent>,
    /// The UDP try being handed a truncated reply, and its upstream.
    truncated: Option<(TryId, SocketAddr)>,
}

impl Network {
    /// Carries out `machine`'s actions.
    pub fn step<W>(&mut self, machine: &mut Machine<W>, now: Instant) {
        let mut unsent = Vec::new();
        while let Some(action) = machine.poll_action() {
            match action {
                Action::Transmit(transmit) => {
                    query(transmit.query());
                    assert!(
                        self.open.iter().all(|o| o.id.index() != transmit.id.index()),
                        "{:?} takes the index of a try still open",
                        transmit.id
                    );
                    if transmit.protocol == Protocol::Tcp {
                        assert!(
                            self.truncated
                                .is_some_and(|(udp, to)| udp.index() == transmit.id.index() && to == transmit.upstream),
                            "a TCP try that no truncated reply asked for: {transmit:?}"
                        );
                    }
                    let id = transmit.id;
                    match self.fail_next.take() {
                        None => self.open.push(transmit),
                        Some(failure) => {
                            unsent.push(id);
                            let error = match failure {
                                Unsent::Local => SendError::Local(io::Error::from(io::ErrorKind::OutOfMemory)),
                                Unsent::Upstream => {
                                    SendError::Upstream(io::Error::from(io::ErrorKind::ConnectionRefused))
                                }
                            };
                            machine.on_send_error(id, error, now);
                        }
                    }
                }
                Action::Close(id) => match self.open.iter().position(|o| o.id == id) {
                    Some(at) => {
                        self.open.remove(at);
                    }
                    None => {
                        let at = unsent.iter().position(|&u| u == id);
                        let at = at.unwrap_or_else(|| panic!("{id:?} closed, but it is not open"));
                        unsent.remove(at);
                    }
                },
            }
        }
        if machine.in_flight() == 0 {
            assert!(
                self.open.is_empty(),
                "tries left open with nothing in flight: {:?}",
                self.open
            );
        }
    }

    /// The open try `n` names (counting from the oldest, round).
    pub fn pick(&self, n: usize) -> Option<Transmit> {
        (!self.open.is_empty()).then(|| self.open[n % self.open.len()].clone())
    }

    /// Hands `msg` to try `to` as received now.
    pub fn deliver<W>(&mut self, machine: &mut Machine<W>, to: &Transmit, msg: &[u8], cache: &Cache, now: Instant) {
        let tc = msg.get(2).is_some_and(|b| b & 0x02 != 0);
        if to.protocol == Protocol::Udp && tc {
            self.truncated = Some((to.id, to.upstream));
        }
        machine.on_reply(to.id, msg, cache, now);
        self.step(machine, now);
        self.truncated = None;
    }

    /// Fails try `to` after its query went out (refused, reset).
    pub fn refuse<W>(&mut self, machine: &mut Machine<W>, to: &Transmit, cache: &Cache, now: Instant) {
        machine.on_receive_error(to.id, cache, now);
        self.step(machine, now);
    }
}

/// Checks that `bytes` is a query as skyline sends upstream, and returns it.
fn query(bytes: &[u8]) -> Message {
    let message =
        Message::from_vec(bytes).unwrap_or_else(|e| panic!("an unreadable upstream query ({e}): {bytes:02x?}"));
    assert_eq!(message.message_type(), MessageType::Query);
    assert_eq!(message.op_code(), OpCode::Query);
    assert!(message.recursion_desired(), "RD set");
    assert_eq!(message.queries().len(), 1, "one question");
    assert_eq!(message.queries()[0].query_class(), DNSClass::IN);
    let edns = message.extensions().as_ref().expect("an OPT");
    assert_eq!(edns.max_payload(), ADVERTISED_UDP_LEN);
    message
}

/// The query ID of a transmit.
pub fn query_id(transmit: &Transmit) -> u16 {
    u16::from_be_bytes([transmit.query()[0], transmit.query()[1]])
}

/// `msg` with the ID `id` (unchanged when shorter than an ID).
pub fn with_id(msg: &[u8], id: u16) -> Vec<u8> {
    let mut out = msg.to_vec();
    if let Some(head) = out.get_mut(..2) {
        head.copy_from_slice(&id.to_be_bytes());
    }
    out
}

/// The reply an upstream would send to `query`: its ID and question, RA, `rcode`, TC when
/// `truncated`, and an SOA living `ttl` in the authority section (NODATA, or NXDOMAIN: an answer
/// any question can take).
pub fn canned(query: &[u8], rcode: u8, truncated: bool, ttl: u32) -> Vec<u8> {
    let mut end = 12;
    while let Some(&len) = query.get(end) {
        end += 1 + usize::from(len);
        if len == 0 {
            break;
        }
    }
    let question = query.get(12..end + 4).unwrap_or_default();
    let mut reply = vec![
        query[0],
        query[1],
        0x81 | if truncated { 0x02 } else { 0 },
        0x80 | (rcode & 0x0F),
    ];
    reply.extend_from_slice(&[0, 1, 0, 0, 0, 1, 0, 0]);
    reply.extend_from_slice(question);
    reply.extend_from_slice(&[0xC0, 12, 0, 6, 0, 1]);
    reply.extend_from_slice(&ttl.to_be_bytes());
    reply.extend_from_slice(&22u16.to_be_bytes());
    reply.extend_from_slice(&[0, 0]);
    for field in [1u32, 3600, 600, 86400, ttl] {
        reply.extend_from_slice(&field.to_be_bytes());
    }
    reply
}
