//! The reply to a rewritten question, turned back into the reply to the client's own question
//! (CoreDNS's `ResponseReverter`): the client's question as it spelled it, and the owner names
//! of the answer section turned back by the rules that say so. The reply is read record by
//! record and written again, its names uncompressed but the client's question name, which the
//! records it owns point to: a compression pointer into a question of another length would
//! point elsewhere.

use super::text::Text;
use crate::wire::types::{flags, rcode, rtype, HEADER_LEN, MAX_NAME_LEN, MAX_POINTER_HOPS};

/// What the reply is turned back to.
pub(crate) struct Client<'a> {
    /// The client's question as it spelled it: name, type and class.
    pub(crate) question: &'a [u8],
    /// The client's question name, lower-cased.
    pub(crate) qname: &'a [u8],
    /// The size the reply may take (the client's EDNS size over UDP).
    pub(crate) limit: usize,
    /// The reply goes over TCP: one too large is SERVFAIL, not truncated.
    pub(crate) tcp: bool,
}

/// A restored reply's length and whether it was truncated.
pub(crate) struct Restored {
    pub(crate) len: usize,
    pub(crate) truncated: bool,
    pub(crate) rcode: u16,
}

/// Writes into `out` the reply `reply` to a rewritten question turned back for `client`,
/// `owner` turning an owner name of the answer section back (whether it changed it). A reply
/// that does not fit is cut to its header, question and OPT record, TC set (SERVFAIL over TCP);
/// one that cannot be read becomes SERVFAIL.
pub(crate) fn restore(
    reply: &[u8],
    out: &mut [u8],
    client: &Client<'_>,
    owner: impl FnMut(&mut Text) -> bool,
) -> Restored {
    let limit = client.limit.min(out.len());
    let mut writer = Writer { out, pos: 0, limit };
    match walk(reply, &mut writer, client, owner) {
        Walked::Whole => Restored {
            len: writer.pos,
            truncated: reply.get(2).is_some_and(|f| u16::from(*f) << 8 & flags::TC != 0),
            rcode: reply.get(3).map_or(0, |b| u16::from(b & 0x0F)),
        },
        Walked::TooLarge(opt) => cut(reply, &mut writer, client, opt),
        Walked::Unreadable => failed(reply, &mut writer, client),
    }
}

enum Walked {
    Whole,
    /// Out of room; where the reply's OPT record lies, if it has one.
    TooLarge(Option<(usize, usize)>),
    Unreadable,
}

struct Writer<'o> {
    out: &'o mut [u8],
    pos: usize,
    limit: usize,
}

impl Writer<'_> {
    fn put(&mut self, bytes: &[u8]) -> Option<()> {
        let end = self.pos + bytes.len();
        if end > self.limit {
            return None;
        }
        self.out[self.pos..end].copy_from_slice(bytes);
        self.pos = end;
        Some(())
    }

    /// The name `wire`, as a pointer to the question when it is the client's name.
    fn name(&mut self, wire: &[u8], client: &Client<'_>) -> Option<()> {
        if wire.eq_ignore_ascii_case(client.qname) {
            self.put(&[0xC0, HEADER_LEN as u8])
        } else {
            self.put(wire)
        }
    }
}

fn walk(reply: &[u8], w: &mut Writer<'_>, client: &Client<'_>, mut owner: impl FnMut(&mut Text) -> bool) -> Walked {
    let Some(header) = reply.get(..HEADER_LEN) else {
        return Walked::Unreadable;
    };
    let count = |i: usize| usize::from(u16::from_be_bytes([header[4 + 2 * i], header[5 + 2 * i]]));
    let mut pos = HEADER_LEN;
    for _ in 0..count(0) {
        match skip_name(reply, pos) {
            Some(end) if end + 4 <= reply.len() => pos = end + 4,
            _ => return Walked::Unreadable,
        }
    }
    let mut room = w.put(header).is_some();
    if count(0) > 0 {
        room = room && w.put(client.question).is_some();
    }
    let mut opt = None;
    let mut name = [0u8; MAX_NAME_LEN];
    for section in 1..4 {
        for _ in 0..count(section) {
            let start = pos;
            let Some((len, next)) = read_name(reply, pos, &mut name) else {
                return Walked::Unreadable;
            };
            let Some(fixed) = reply.get(next..next + 10) else {
                return Walked::Unreadable;
            };
            let rtype_ = u16::from_be_bytes([fixed[0], fixed[1]]);
            let rdlen = usize::from(u16::from_be_bytes([fixed[8], fixed[9]]));
            let rdata = next + 10;
            if rdata + rdlen > reply.len() {
                return Walked::Unreadable;
            }
            pos = rdata + rdlen;
            if rtype_ == rtype::OPT {
                opt = Some((start, pos));
            }
            if !room {
                continue;
            }
            let mut wire = &name[..len];
            let mut turned = [0u8; MAX_NAME_LEN];
            if section == 1 {
                if let Some(mut text) = Text::of_wire(wire) {
                    if owner(&mut text) {
                        if let Some(len) = text.to_wire(&mut turned) {
                            wire = &turned[..len];
                        }
                    }
                }
            }
            room = record(reply, w, client, wire, &fixed[..8], rtype_, rdata, rdlen) == Some(true);
        }
    }
    if room {
        Walked::Whole
    } else {
        Walked::TooLarge(opt)
    }
}

/// Writes one record; `Some(false)` when it does not fit, `None` when its data cannot be read.
#[allow(clippy::too_many_arguments)]
fn record(
    reply: &[u8],
    w: &mut Writer<'_>,
    client: &Client<'_>,
    owner: &[u8],
    fixed: &[u8],
    rtype_: u16,
    rdata: usize,
    rdlen: usize,
) -> Option<bool> {
    if w.name(owner, client).is_none() || w.put(fixed).is_none() {
        return Some(false);
    }
    let length_at = w.pos;
    if w.put(&[0, 0]).is_none() {
        return Some(false);
    }
    // The types whose data holds compressible names (RFC 3597 §4): a name is read whole and
    // written uncompressed; any other data is copied as it is.
    let (lead, names) = match rtype_ {
        rtype::NS | rtype::CNAME | rtype::PTR | 39 => (0, 1),
        rtype::MX => (2, 1),
        rtype::SRV => (6, 1),
        rtype::SOA => (0, 2),
        _ => (rdlen, 0),
    };
    let mut at = rdata;
    if w.put(reply.get(at..at + lead)?).is_none() {
        return Some(false);
    }
    at += lead;
    let mut name = [0u8; MAX_NAME_LEN];
    for _ in 0..names {
        let (len, next) = read_name(reply, at, &mut name)?;
        if w.put(&name[..len]).is_none() {
            return Some(false);
        }
        at = next;
    }
    if at < rdata + rdlen && w.put(reply.get(at..rdata + rdlen)?).is_none() {
        return Some(false);
    }
    let written = u16::try_from(w.pos - length_at - 2).ok()?;
    w.out[length_at..length_at + 2].copy_from_slice(&written.to_be_bytes());
    Some(true)
}

/// The reply cut to its header, the client's question and its OPT record: TC over UDP, so that
/// the client asks again over TCP; SERVFAIL over TCP.
fn cut(reply: &[u8], w: &mut Writer<'_>, client: &Client<'_>, opt: Option<(usize, usize)>) -> Restored {
    let mut word = u16::from_be_bytes([reply[2], reply[3]]);
    if client.tcp {
        word = (word & !0x000F & !flags::AA) | rcode::SERVFAIL;
    } else {
        word |= flags::TC;
    }
    header_only(reply, w, client, word, opt)
}

/// SERVFAIL with the client's question, for a reply that cannot be read back.
fn failed(reply: &[u8], w: &mut Writer<'_>, client: &Client<'_>) -> Restored {
    let word = reply
        .get(2..4)
        .map_or(flags::QR, |b| u16::from_be_bytes([b[0], b[1]]) & !0x000F & !flags::AA)
        | flags::QR
        | rcode::SERVFAIL;
    header_only(reply, w, client, word, None)
}

fn header_only(
    reply: &[u8],
    w: &mut Writer<'_>,
    client: &Client<'_>,
    word: u16,
    opt: Option<(usize, usize)>,
) -> Restored {
    w.pos = 0;
    let mut header = [0u8; HEADER_LEN];
    header[..2].copy_from_slice(reply.get(..2).unwrap_or(&[0, 0]));
    header[2..4].copy_from_slice(&word.to_be_bytes());
    header[5] = 1;
    let opt = opt.and_then(|(start, end)| reply.get(start..end));
    header[11] = u8::from(opt.is_some());
    w.limit = w.out.len();
    let _ = w.put(&header);
    let _ = w.put(client.question);
    if let Some(opt) = opt {
        let _ = w.put(opt);
    }
    Restored {
        len: w.pos,
        truncated: word & flags::TC != 0,
        rcode: word & 0x000F,
    }
}

/// Skips a name at `pos`; the offset after it.
fn skip_name(msg: &[u8], mut pos: usize) -> Option<usize> {
    loop {
        let b = *msg.get(pos)?;
        match b & 0xC0 {
            0xC0 => return Some(pos + 2),
            0x00 if b == 0 => return Some(pos + 1),
            0x00 => pos += 1 + usize::from(b),
            _ => return None,
        }
    }
}

/// Reads the name at `pos`, following compression pointers, into `out` with its case kept; its
/// length and the offset after it where it lies.
fn read_name(msg: &[u8], mut pos: usize, out: &mut [u8; MAX_NAME_LEN]) -> Option<(usize, usize)> {
    let mut len = 0;
    let mut next = None;
    let mut hops = 0;
    loop {
        let b = *msg.get(pos)?;
        match b & 0xC0 {
            0xC0 => {
                hops += 1;
                if hops > MAX_POINTER_HOPS {
                    return None;
                }
                next.get_or_insert(pos + 2);
                pos = usize::from(b & 0x3F) << 8 | usize::from(*msg.get(pos + 1)?);
            }
            0x00 => {
                let label = usize::from(b);
                if len + 1 + label > MAX_NAME_LEN {
                    return None;
                }
                out[len..len + 1 + label].copy_from_slice(msg.get(pos..pos + 1 + label)?);
                len += 1 + label;
                pos += 1 + label;
                if label == 0 {
                    return Some((len, next.unwrap_or(pos)));
                }
            }
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::types::class;
    use hickory_proto::op::Message;
    use hickory_proto::rr::{RData, RecordType};

    /// A reply to `b.example.` A with one A record owned by the question (a pointer to it) and
    /// a CNAME whose target is compressed against it.
    fn reply_to_b() -> Vec<u8> {
        let mut m = vec![0x12, 0x34, 0x84, 0x00, 0, 1, 0, 2, 0, 0, 0, 0];
        m.extend_from_slice(b"\x01b\x07example\x00\x00\x01\x00\x01");
        m.extend_from_slice(&[0xC0, 12, 0, 5, 0, 1, 0, 0, 0, 60, 0, 4]);
        m.extend_from_slice(&[1, b'c', 0xC0, 12]);
        m.extend_from_slice(&[0x01, b'c', 0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1]);
        m
    }

    #[test]
    fn the_client_sees_its_own_question_and_owner_names_turned_back() {
        let reply = reply_to_b();
        let question = b"\x0bLonger-Name\x07example\x00\x00\x01\x00\x01";
        let client = Client {
            question,
            qname: b"\x0blonger-name\x07example\x00",
            limit: 512,
            tcp: false,
        };
        let mut out = [0u8; 512];
        let restored = restore(&reply, &mut out, &client, |owner| {
            if owner.as_str() == "b.example." {
                *owner = Text::of("longer-name.example.").unwrap();
                return true;
            }
            false
        });
        let message = Message::from_vec(&out[..restored.len]).unwrap();
        assert_eq!(message.queries()[0].name().to_ascii(), "Longer-Name.example.");
        assert_eq!(message.queries()[0].query_type(), RecordType::A);
        let answers = message.answers();
        assert_eq!(
            answers[0].name().to_ascii(),
            "Longer-Name.example.",
            "a pointer to the question"
        );
        assert_eq!(
            answers[0].data(),
            Some(&RData::CNAME(hickory_proto::rr::rdata::CNAME(
                "c.b.example.".parse().unwrap()
            )))
        );
        assert_eq!(
            answers[1].name().to_ascii(),
            "c.b.example.",
            "an owner no rule turns back stays"
        );
        assert_eq!(u16::from(message.queries()[0].query_class()), class::IN);
    }

    #[test]
    fn a_reply_that_no_longer_fits_is_cut_and_truncated() {
        let reply = reply_to_b();
        let long = [b"\x3f".as_slice(), &[b'x'; 63], b"\x07example\x00\x00\x01\x00\x01"].concat();
        let client = Client {
            question: &long,
            qname: &long[..long.len() - 4],
            limit: 12 + long.len() + 10,
            tcp: false,
        };
        let mut out = [0u8; 512];
        let restored = restore(&reply, &mut out, &client, |_| false);
        assert!(restored.truncated);
        let message = Message::from_vec(&out[..restored.len]).unwrap();
        assert!(message.truncated() && message.answers().is_empty());
        assert_eq!(message.queries().len(), 1);
    }
}
