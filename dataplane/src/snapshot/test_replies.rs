//! The tests' comparison of two snapshots on the wire: a name kept in a compact table (a
//! cluster host, a SkyDNS leaf) must answer byte for byte as the node it stands for would.

use crate::answer::{answer, Context, Outcome, Transport};
use crate::snapshot::Snapshot;
use hickory_proto::op::{Edns, Message, Query};
use hickory_proto::rr::{Name as HName, RecordType};

/// The reply bytes to `name`/`rtype` over `transport`, the query with or without EDNS.
pub(crate) fn reply(s: &Snapshot, name: &str, rtype: RecordType, transport: Transport, edns: bool) -> Vec<u8> {
    let mut query = Message::new();
    query
        .set_id(7)
        .add_query(Query::query(HName::from_ascii(name).unwrap(), rtype));
    if edns {
        query.set_edns(Edns::new());
    }
    let mut out = vec![0; 65535];
    let Outcome::Reply(reply) = answer(&query.to_vec().unwrap(), s, &Context::new(transport), &mut out) else {
        panic!("no reply to {name} {rtype}");
    };
    out.truncate(reply.len());
    out
}

/// Asserts that `a` and `b` give the same reply bytes for each of `names`, spelled as given
/// and in capitals, to each of `types` over UDP with and without EDNS and over TCP.
pub(crate) fn assert_same_replies(a: &Snapshot, b: &Snapshot, names: &[String], types: &[RecordType], what: &str) {
    for spelled in names {
        for spelling in [spelled.clone(), spelled.to_uppercase()] {
            for &rtype in types {
                for (transport, edns) in [(Transport::Udp, false), (Transport::Udp, true), (Transport::Tcp, true)] {
                    assert_eq!(
                        reply(a, &spelling, rtype, transport, edns),
                        reply(b, &spelling, rtype, transport, edns),
                        "{spelling} {rtype} {transport:?} ({what})"
                    );
                }
            }
        }
    }
}
