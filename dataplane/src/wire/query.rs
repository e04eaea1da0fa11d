//! Zero-copy reading of a query in its receive buffer: header, question, and the EDNS OPT record.
//! Only the query name is copied (lower-cased, onto the stack) because lookups need it folded.

use super::error::WireError;
use super::name::{read_name, skip_name, LowerName};
use super::types::{flags, option, rtype, HEADER_LEN};

/// The first question of a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Question {
    /// Query type.
    pub qtype: u16,
    /// Query class.
    pub qclass: u16,
    /// Offset just past the question; `msg[12..end]` is copied byte-exact into replies so that
    /// 0x20 case randomisation survives.
    pub end: usize,
}

/// What the query's OPT record said (RFC 6891 §6.1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Edns {
    /// Requestor's UDP payload size, as sent.
    pub udp_size: u16,
    /// EDNS version; anything but 0 gets BADVERS.
    pub version: u8,
    /// The DO bit, copied into the reply's OPT (RFC 3225 §3).
    pub dnssec_ok: bool,
    /// The client sent an edns-tcp-keepalive option (RFC 7828).
    pub tcp_keepalive: bool,
    /// Where the data of the client's COOKIE option (RFC 7873) lies in the query, when it sent
    /// one of a valid length (a malformed one is a [`FormatError::BadCookie`]).
    pub cookie: Option<CookieAt>,
    /// The query carries SkyDNS's stub loop guard option (65011): it was already forwarded to a
    /// stub zone once and must not be forwarded again.
    pub skydns_stub_loop: bool,
    /// Number of options present.
    pub options: u16,
}

/// The data of a COOKIE option in a query: a client cookie of 8 bytes, and a server cookie of
/// 8 to 32 more when the client has one (RFC 7873 §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CookieAt {
    /// Offset of the option's data in the message.
    pub start: u16,
    /// Its length: 8, or 16 to 40.
    pub len: u8,
}

impl CookieAt {
    /// The option's data in `msg`, the message it was read from.
    pub fn data<'m>(&self, msg: &'m [u8]) -> &'m [u8] {
        let start = usize::from(self.start);
        msg.get(start..start + usize::from(self.len)).unwrap_or_default()
    }
}

/// Why a message whose header parsed deserves FORMERR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormatError {
    /// A name, record or field could not be read.
    Wire(WireError),
    /// An OPT record in the answer or authority section.
    OptMisplaced,
    /// More than one OPT record.
    DuplicateOpt,
    /// The OPT record's owner is not the root, or its options overrun its RDATA.
    BadOpt,
    /// A COOKIE option whose length is neither 8 nor 16 to 40 (RFC 7873 §5.2.2).
    BadCookie,
}

/// Why a datagram is dropped without a reply. Counted per reason by the workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Fewer than 12 bytes.
    TooShort,
    /// QR set: a response, which must never be answered.
    Response,
}

/// A query read in place. `error` being set means the reply is FORMERR; the other fields say
/// how much was understood before that (the question and OPT are echoed when they parsed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Query {
    /// Message ID.
    pub id: u16,
    /// The flags word (QR, opcode, AA, TC, RD, RA, Z, AD, CD, rcode).
    pub flags: u16,
    /// Number of questions claimed.
    pub qdcount: u16,
    /// Number of answer records claimed (ignored; counted).
    pub ancount: u16,
    /// Number of authority records claimed (ignored; counted).
    pub nscount: u16,
    /// The first question, when one parsed.
    pub question: Option<Question>,
    /// The OPT record, when one parsed.
    pub edns: Option<Edns>,
    /// The first format problem found.
    pub error: Option<FormatError>,
    /// Bytes followed the last record.
    pub trailing: bool,
}

impl Query {
    /// The opcode (0 = QUERY).
    pub fn opcode(&self) -> u8 {
        ((self.flags & flags::OPCODE_MASK) >> 11) as u8
    }
}

fn u16_at(msg: &[u8], pos: usize) -> Result<u16, WireError> {
    match msg.get(pos..pos + 2) {
        Some(b) => Ok(u16::from_be_bytes([b[0], b[1]])),
        None => Err(WireError::Truncated),
    }
}

/// Parses a query, lower-casing the first question's name into `qname`.
#[inline(always)]
pub fn parse_query(msg: &[u8], qname: &mut LowerName) -> Result<Query, DropReason> {
    let mut q = Query::default();
    parse_query_into(msg, qname, &mut q)?;
    Ok(q)
}

/// [`parse_query`] into the caller's `q`, for the answer path: every field is written where it
/// is read from afterwards, where a query returned by value was put together in registers and
/// the stack and then copied whole. `q` is left as it was when the message is dropped.
#[inline(always)]
pub fn parse_query_into(msg: &[u8], qname: &mut LowerName, q: &mut Query) -> Result<(), DropReason> {
    parse_query_at(msg, qname, None, q)
}

/// [`parse_query_into`] of a message whose first question's name the caller may have read into
/// `qname` already, with [`read_name`] at the end of the header (returning `name_end`): a
/// caller that looks the name up before it parses the rest does not read it twice. With a
/// `name_end`, the message must have a question.
#[inline(always)]
pub fn parse_query_at(
    msg: &[u8],
    qname: &mut LowerName,
    name_end: Option<usize>,
    q: &mut Query,
) -> Result<(), DropReason> {
    let Some(header) = msg.first_chunk::<HEADER_LEN>() else {
        return Err(DropReason::TooShort);
    };
    let word = |i: usize| u16::from_be_bytes([header[i], header[i + 1]]);
    let flags_word = word(2);
    if flags_word & flags::QR != 0 {
        return Err(DropReason::Response);
    }
    *q = Query {
        id: word(0),
        flags: flags_word,
        qdcount: word(4),
        ancount: word(6),
        nscount: word(8),
        question: None,
        edns: None,
        error: None,
        trailing: false,
    };
    let arcount = word(10);
    if let Err(e) = parse_body(msg, q, arcount, qname, name_end) {
        q.error.get_or_insert(e);
    }
    Ok(())
}

#[inline(always)]
fn parse_body(
    msg: &[u8],
    q: &mut Query,
    arcount: u16,
    qname: &mut LowerName,
    name_end: Option<usize>,
) -> Result<(), FormatError> {
    let mut pos = HEADER_LEN;
    if q.qdcount > 0 {
        let end = match name_end {
            Some(end) => end,
            None => read_name(msg, pos, Some(qname)).map_err(FormatError::Wire)?,
        };
        let Some(&[t0, t1, c0, c1]) = msg.get(end..).and_then(|rest| rest.first_chunk::<4>()) else {
            return Err(FormatError::Wire(WireError::Truncated));
        };
        pos = end + 4;
        q.question = Some(Question {
            qtype: u16::from_be_bytes([t0, t1]),
            qclass: u16::from_be_bytes([c0, c1]),
            end: pos,
        });
        for _ in 1..q.qdcount {
            let end = skip_name(msg, pos).map_err(FormatError::Wire)?;
            if end + 4 > msg.len() {
                return Err(FormatError::Wire(WireError::Truncated));
            }
            pos = end + 4;
        }
    }
    for _ in 0..(q.ancount as u32 + q.nscount as u32) {
        let (rtype_, next, _) = skip_record(msg, pos)?;
        if rtype_ == rtype::OPT {
            return Err(FormatError::OptMisplaced);
        }
        pos = next;
    }
    for _ in 0..arcount {
        let (rtype_, next, rdata_start) = skip_record(msg, pos)?;
        if rtype_ == rtype::OPT {
            if q.edns.is_some() {
                return Err(FormatError::DuplicateOpt);
            }
            if msg[pos] != 0 {
                return Err(FormatError::BadOpt);
            }
            let (edns, bad_cookie) = parse_opt(msg, pos + 1, rdata_start, next)?;
            q.edns = Some(edns);
            if bad_cookie {
                return Err(FormatError::BadCookie);
            }
        }
        pos = next;
    }
    q.trailing = pos < msg.len();
    Ok(())
}

/// Skips one resource record, returning its type, the offset past it and where its RDATA starts.
fn skip_record(msg: &[u8], pos: usize) -> Result<(u16, usize, usize), FormatError> {
    let end = skip_name(msg, pos).map_err(FormatError::Wire)?;
    let rtype_ = u16_at(msg, end).map_err(FormatError::Wire)?;
    let rdlen = u16_at(msg, end + 8).map_err(FormatError::Wire)? as usize;
    let rdata = end + 10;
    if rdata + rdlen > msg.len() {
        return Err(if rtype_ == rtype::OPT {
            FormatError::BadOpt
        } else {
            FormatError::Wire(WireError::Truncated)
        });
    }
    Ok((rtype_, rdata + rdlen, rdata))
}

/// Reads an OPT record; the flag says a COOKIE option was malformed, which is FORMERR with the
/// OPT still answered.
fn parse_opt(msg: &[u8], fixed: usize, rdata: usize, end: usize) -> Result<(Edns, bool), FormatError> {
    let mut bad_cookie = false;
    let mut edns = Edns {
        udp_size: u16::from_be_bytes([msg[fixed + 2], msg[fixed + 3]]),
        version: msg[fixed + 5],
        dnssec_ok: msg[fixed + 6] & 0x80 != 0,
        ..Edns::default()
    };
    let mut pos = rdata;
    while pos < end {
        if pos + 4 > end {
            return Err(FormatError::BadOpt);
        }
        let code = u16::from_be_bytes([msg[pos], msg[pos + 1]]);
        let len = u16::from_be_bytes([msg[pos + 2], msg[pos + 3]]) as usize;
        if pos + 4 + len > end {
            return Err(FormatError::BadOpt);
        }
        match code {
            option::TCP_KEEPALIVE => edns.tcp_keepalive = true,
            option::COOKIE if edns.cookie.is_none() && !bad_cookie => match len {
                8 | 16..=40 => {
                    edns.cookie = Some(CookieAt {
                        start: (pos + 4) as u16,
                        len: len as u8,
                    })
                }
                _ => bad_cookie = true,
            },
            option::SKYDNS_STUB_LOOP => edns.skydns_stub_loop = true,
            _ => {}
        }
        edns.options = edns.options.saturating_add(1);
        pos += 4 + len;
    }
    Ok((edns, bad_cookie))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_whose_name_was_read_first_parses_as_one_read_whole() {
        let mut two_questions = query(b"\x01a\x00", 1, None);
        two_questions[5] = 2;
        two_questions.extend_from_slice(b"\x01b\x00\x00\x01\x00\x01");
        let mut trailing = query(b"\x03WwW\x07example\x00", 28, None);
        trailing.push(7);
        let mut with_answer = query(b"\x01a\x00", 1, None);
        with_answer[7] = 1;
        with_answer.extend_from_slice(&[0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 9, 0, 4, 10, 0, 0, 1]);
        let mut response = query(b"\x01a\x00", 1, None);
        response[2] |= 0x80;
        let cases = [
            query(b"\x03WwW\x07example\x03org\x00", 1, None),
            query(b"\x01a\x00", 33, Some(&[0, 0, 41, 4, 208, 0, 0, 0x80, 0, 0, 0])),
            query(
                b"\x01a\x00",
                1,
                Some(&[0, 0, 41, 4, 208, 0, 1, 0, 0, 0, 4, 0, 11, 0, 0]),
            ),
            query(b"\x01a\x00", 1, Some(&[0, 0, 41, 4, 208])),
            two_questions,
            trailing,
            with_answer,
            response,
        ];
        for msg in cases {
            let (mut whole, mut whole_name) = (Query::default(), LowerName::default());
            let read = parse_query_into(&msg, &mut whole_name, &mut whole);
            let mut named_name = LowerName::default();
            let end = read_name(&msg, HEADER_LEN, Some(&mut named_name)).unwrap();
            let mut named = Query::default();
            assert_eq!(
                parse_query_at(&msg, &mut named_name, Some(end), &mut named),
                read,
                "{msg:?}"
            );
            assert_eq!(named, whole, "{msg:?}");
            if read.is_ok() {
                assert_eq!(named_name.wire(), whole_name.wire());
            }
        }
    }

    fn query(name: &[u8], qtype: u16, opt: Option<&[u8]>) -> Vec<u8> {
        let mut m = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, opt.is_some() as u8];
        m.extend_from_slice(name);
        m.extend_from_slice(&qtype.to_be_bytes());
        m.extend_from_slice(&[0, 1]);
        if let Some(o) = opt {
            m.extend_from_slice(o);
        }
        m
    }

    const OPT_1232: [u8; 11] = [0, 0, 41, 0x04, 0xD0, 0, 0, 0x80, 0, 0, 0];

    #[test]
    fn plain_query_parses() {
        let m = query(b"\x03WwW\x00", 1, None);
        let mut n = LowerName::default();
        let q = parse_query(&m, &mut n).unwrap();
        assert_eq!(q.id, 0x1234);
        assert_eq!(
            q.question,
            Some(Question {
                qtype: 1,
                qclass: 1,
                end: m.len()
            })
        );
        assert_eq!(n.wire(), b"\x03www\x00");
        assert!(q.edns.is_none() && q.error.is_none() && !q.trailing);
    }

    #[test]
    fn opt_is_read() {
        let m = query(b"\x00", 1, Some(&OPT_1232));
        let q = parse_query(&m, &mut LowerName::default()).unwrap();
        let e = q.edns.unwrap();
        assert_eq!((e.udp_size, e.version, e.dnssec_ok), (1232, 0, true));
    }

    #[test]
    fn duplicate_opt_is_a_format_error() {
        let mut m = query(b"\x00", 1, Some(&OPT_1232));
        m.extend_from_slice(&OPT_1232);
        m[11] = 2;
        let q = parse_query(&m, &mut LowerName::default()).unwrap();
        assert_eq!(q.error, Some(FormatError::DuplicateOpt));
        assert!(q.edns.is_some());
    }

    #[test]
    fn opt_overrun_is_bad_opt() {
        let mut opt = OPT_1232.to_vec();
        opt[10] = 8;
        opt.extend_from_slice(&[0, 10, 0, 8]);
        let m = query(b"\x00", 1, Some(&opt));
        let q = parse_query(&m, &mut LowerName::default()).unwrap();
        assert_eq!(q.error, Some(FormatError::BadOpt));
    }

    #[test]
    fn cookie_lengths() {
        for (len, ok) in [
            (0, false),
            (7, false),
            (8, true),
            (9, false),
            (15, false),
            (16, true),
            (40, true),
            (41, false),
        ] {
            let mut opt = OPT_1232.to_vec();
            opt[10] = 4 + len as u8;
            opt.extend_from_slice(&[0, 10, 0, len as u8]);
            opt.extend(std::iter::repeat_n(0xAB, len));
            let m = query(b"\x00", 1, Some(&opt));
            let q = parse_query(&m, &mut LowerName::default()).unwrap();
            let edns = q.edns.unwrap();
            if ok {
                assert_eq!(q.error, None, "{len}");
                assert_eq!(edns.cookie.unwrap().data(&m), &m[m.len() - len..]);
            } else {
                assert_eq!(q.error, Some(FormatError::BadCookie), "{len}");
                assert_eq!(edns.cookie, None);
            }
        }
    }

    #[test]
    fn responses_and_runts_are_dropped() {
        let mut m = query(b"\x00", 1, None);
        m[2] |= 0x80;
        assert_eq!(parse_query(&m, &mut LowerName::default()), Err(DropReason::Response));
        assert_eq!(
            parse_query(&m[..11], &mut LowerName::default()),
            Err(DropReason::TooShort)
        );
    }
}
