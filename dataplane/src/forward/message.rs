//! Upstream messages: the query skyline sends for a question, and the checks a reply must pass
//! before anything in it is believed.

use crate::cache::{Cache, Entry, Key};
use crate::wire::types::{flags, option, rcode, rtype, ADVERTISED_UDP_LEN, HEADER_LEN};
use std::time::Instant;

/// Longest upstream query: header, question, OPT with the loop guard option.
pub const MAX_QUERY_LEN: usize = HEADER_LEN + 255 + 4 + 11 + 5 + 4;

/// Why a datagram on an upstream socket is not the reply awaited. Each is counted: a stream of
/// them is what a spoofing attempt looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mismatch {
    /// Not a response, or its ID is not the query's.
    Id,
    /// The question differs from the one asked (or there is not exactly one).
    Question,
}

/// What a matching reply says before its records are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyShape {
    /// Where the records start: just past the question.
    pub body_start: usize,
    /// TC was set: the full answer needs TCP.
    pub truncated: bool,
    /// The response code (low four bits).
    pub rcode: u16,
}

/// Writes the upstream query for `key` with message ID `id` into `out` and returns its length.
/// RD is set, CD and DO follow the client's; the OPT advertises 1232 bytes. `stub_guard` adds
/// SkyDNS's loop guard option so that a SkyDNS-compatible stub server does not forward it back;
/// `keepalive` an empty edns-tcp-keepalive option, which a query on a persistent connection
/// carries so that the upstream keeps it open while idle (RFC 7828 §3.2.1; never over UDP).
pub fn write_query(out: &mut [u8; MAX_QUERY_LEN], id: u16, key: &Key, stub_guard: bool, keepalive: bool) -> usize {
    let name = key.name_wire();
    let mut flag_word = flags::RD;
    if key.checking_disabled() {
        flag_word |= flags::CD;
    }
    out[0..2].copy_from_slice(&id.to_be_bytes());
    out[2..4].copy_from_slice(&flag_word.to_be_bytes());
    out[4..12].copy_from_slice(&[0, 1, 0, 0, 0, 0, 0, 1]);
    let mut pos = HEADER_LEN;
    out[pos..pos + name.len()].copy_from_slice(name);
    pos += name.len();
    out[pos..pos + 2].copy_from_slice(&key.qtype().to_be_bytes());
    out[pos + 2..pos + 4].copy_from_slice(&key.qclass().to_be_bytes());
    pos += 4;
    let mut space = [0u8; 9];
    let mut len = 0;
    if stub_guard {
        space[..5].copy_from_slice(&[
            (option::SKYDNS_STUB_LOOP >> 8) as u8,
            option::SKYDNS_STUB_LOOP as u8,
            0,
            1,
            1,
        ]);
        len = 5;
    }
    if keepalive {
        space[len..len + 2].copy_from_slice(&option::TCP_KEEPALIVE.to_be_bytes());
        len += 4;
    }
    let options = &space[..len];
    let opt_flags: u16 = if key.dnssec_ok() { 0x8000 } else { 0 };
    out[pos] = 0;
    out[pos + 1..pos + 3].copy_from_slice(&rtype::OPT.to_be_bytes());
    out[pos + 3..pos + 5].copy_from_slice(&ADVERTISED_UDP_LEN.to_be_bytes());
    out[pos + 5..pos + 7].copy_from_slice(&[0, 0]);
    out[pos + 7..pos + 9].copy_from_slice(&opt_flags.to_be_bytes());
    out[pos + 9..pos + 11].copy_from_slice(&(options.len() as u16).to_be_bytes());
    pos += 11;
    out[pos..pos + options.len()].copy_from_slice(options);
    pos + options.len()
}

/// Clears the RD flag of a query [`write_query`] wrote: a health check of an upstream that
/// answers only what it holds (CoreDNS `health_check ... no_rec`).
pub fn without_recursion(query: &mut [u8; MAX_QUERY_LEN]) {
    query[2] &= !((flags::RD >> 8) as u8);
}

/// Checks that `msg` answers the query with ID `id` for `key`: a response, same ID, one
/// question equal to the one asked (name compared case-insensitively, written without
/// compression so that record offsets line up with replies built from it).
pub fn check_reply(msg: &[u8], id: u16, key: &Key) -> Result<ReplyShape, Mismatch> {
    if msg.len() < HEADER_LEN {
        return Err(Mismatch::Id);
    }
    let flag_word = u16::from_be_bytes([msg[2], msg[3]]);
    if u16::from_be_bytes([msg[0], msg[1]]) != id || flag_word & flags::QR == 0 {
        return Err(Mismatch::Id);
    }
    if flag_word & flags::OPCODE_MASK != 0 || u16::from_be_bytes([msg[4], msg[5]]) != 1 {
        return Err(Mismatch::Question);
    }
    // The key's name is lower-case, uncompressed and well formed: a question that matches it
    // byte for byte but for the case of letters is that name, uncompressed, ending where it
    // ends. Label lengths (below 64) and pointers (0xC0 and up) are no letters, so no other
    // spelling can match.
    let expected = key.name_wire();
    let name_end = HEADER_LEN + expected.len();
    if !msg
        .get(HEADER_LEN..name_end)
        .is_some_and(|name| name.eq_ignore_ascii_case(expected))
    {
        return Err(Mismatch::Question);
    }
    let fields = msg.get(name_end..name_end + 4).ok_or(Mismatch::Question)?;
    if u16::from_be_bytes([fields[0], fields[1]]) != key.qtype()
        || u16::from_be_bytes([fields[2], fields[3]]) != key.qclass()
    {
        return Err(Mismatch::Question);
    }
    Ok(ReplyShape {
        body_start: name_end + 4,
        truncated: flag_word & flags::TC != 0,
        rcode: flag_word & 0x000F,
    })
}

/// What a message received for a forwarded question means.
#[derive(Debug)]
pub enum Verdict {
    /// Not the awaited reply: counted and ignored, the try goes on listening.
    Mismatched(Mismatch),
    /// The awaited reply, truncated over UDP: the question is asked again over TCP.
    Truncated,
    /// A usable answer (NOERROR or NXDOMAIN with readable records), to hand to the clients
    /// and, when its lifetime allows, to cache.
    Answer(Entry),
    /// The awaited reply, but a failure rcode or unreadable records: the next upstream is
    /// asked.
    Bad,
}

/// Judges `msg`, received over TCP when `over_tcp`, as the reply to the query with ID `id`
/// for `key`, with `cache`'s TTL caps for the name and `now` as the time it arrived.
///
/// This is everything a worker decides about an upstream's reply before it touches sockets,
/// the cache or the clients, kept apart from the I/O so that tests and the `upstream` fuzz
/// target judge replies exactly as the worker does.
pub fn read_reply(msg: &[u8], id: u16, key: &Key, over_tcp: bool, cache: &Cache, now: Instant) -> Verdict {
    let shape = match check_reply(msg, id, key) {
        Ok(shape) => shape,
        Err(mismatch) => return Verdict::Mismatched(mismatch),
    };
    if shape.truncated && !over_tcp {
        return Verdict::Truncated;
    }
    if !matches!(shape.rcode, rcode::NOERROR | rcode::NXDOMAIN) {
        return Verdict::Bad;
    }
    match Entry::from_reply(msg, shape.body_start, cache.caps_for(key.name_wire()), now) {
        // The header's rcode may have upper bits in the OPT, which only the records tell.
        Ok(entry) if matches!(entry.rcode(), rcode::NOERROR | rcode::NXDOMAIN) => Verdict::Answer(entry),
        Ok(_) | Err(_) => Verdict::Bad,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{LowerName, Name};

    fn key(name: &str, dnssec_ok: bool) -> Key {
        let n = LowerName::from_wire(Name::from_dotted(name).unwrap().wire()).unwrap();
        Key::new(&n, rtype::A, 1, dnssec_ok, false)
    }

    fn reply_to(query: &[u8], question_case: impl Fn(u8) -> u8) -> Vec<u8> {
        let mut r = query.to_vec();
        r[2] |= 0x80;
        let end = HEADER_LEN + key("www.example.", false).name_wire().len();
        for b in &mut r[HEADER_LEN..end] {
            *b = question_case(*b);
        }
        r
    }

    #[test]
    fn queries_carry_the_question_rd_and_an_opt() {
        let mut out = [0u8; MAX_QUERY_LEN];
        let len = write_query(&mut out, 0xABCD, &key("www.example.", true), false, false);
        let q = &out[..len];
        assert_eq!(&q[0..4], &[0xAB, 0xCD, 0x01, 0x00]);
        assert_eq!(&q[4..12], &[0, 1, 0, 0, 0, 0, 0, 1]);
        assert_eq!(&q[12..25], b"\x03www\x07example\x00");
        assert_eq!(&q[len - 11..], &[0, 0, 41, 4, 0xD0, 0, 0, 0x80, 0, 0, 0]);
        let guarded = write_query(&mut out, 1, &key("www.example.", false), true, false);
        assert_eq!(&out[guarded - 5..guarded], &[0xFD, 0xF3, 0, 1, 1]);
        let kept = write_query(&mut out, 1, &key("www.example.", false), true, true);
        assert_eq!(
            &out[kept - 20..kept],
            &[0, 0, 41, 4, 0xD0, 0, 0, 0, 0, 0, 9, 0xFD, 0xF3, 0, 1, 1, 0, 11, 0, 0],
            "the loop guard, then an empty edns-tcp-keepalive"
        );
    }

    #[test]
    fn a_reply_must_match_id_and_question() {
        let k = key("www.example.", false);
        let mut out = [0u8; MAX_QUERY_LEN];
        let len = write_query(&mut out, 7, &k, false, false);
        let good = reply_to(&out[..len], |b| b.to_ascii_uppercase());
        let shape = check_reply(&good, 7, &k).unwrap();
        assert_eq!(shape.body_start, 12 + 13 + 4);
        assert!(!shape.truncated);
        assert_eq!(check_reply(&good, 8, &k), Err(Mismatch::Id));
        assert_eq!(
            check_reply(&out[..len], 7, &k),
            Err(Mismatch::Id),
            "a query is no reply"
        );
        assert_eq!(
            check_reply(&good, 7, &key("www.example.", true).clone()).map(|s| s.rcode),
            Ok(0)
        );
        assert_eq!(
            check_reply(&good, 7, &key("ftp.example.", false)),
            Err(Mismatch::Question)
        );
        let mut other_type = good.clone();
        other_type[26] = 28;
        assert_eq!(check_reply(&other_type, 7, &k), Err(Mismatch::Question));
        assert_eq!(check_reply(&good[..5], 7, &k), Err(Mismatch::Id));
        assert_eq!(check_reply(&good[..20], 7, &k), Err(Mismatch::Question));
    }

    /// Found by the `upstream` fuzz target: an OPT's extended rcode turned a NOERROR header into
    /// rcode 4080, which went to the clients (and the cache) as NOERROR.
    #[test]
    fn replies_are_judged_as_the_worker_acts_on_them() {
        let k = key("www.example.", false);
        let cache = Cache::new(crate::cache::CacheConfig::default());
        let now = Instant::now();
        let mut out = [0u8; MAX_QUERY_LEN];
        let len = write_query(&mut out, 7, &k, false, false);
        let mut answer = reply_to(&out[..len], |b| b);
        answer[3] = 0x80;
        let opt_ttl = answer.len() - 6;
        assert!(matches!(
            read_reply(&answer, 7, &k, false, &cache, now),
            Verdict::Answer(_)
        ));
        assert!(matches!(
            read_reply(&answer, 8, &k, false, &cache, now),
            Verdict::Mismatched(Mismatch::Id)
        ));
        let mut truncated = answer.clone();
        truncated[2] |= 0x02;
        assert!(matches!(
            read_reply(&truncated, 7, &k, false, &cache, now),
            Verdict::Truncated
        ));
        assert!(
            matches!(read_reply(&truncated, 7, &k, true, &cache, now), Verdict::Answer(_)),
            "TC means nothing over TCP"
        );
        let mut servfail = answer.clone();
        servfail[3] |= 2;
        assert!(matches!(read_reply(&servfail, 7, &k, false, &cache, now), Verdict::Bad));
        let mut extended = answer;
        extended[opt_ttl] = 0xFF;
        assert!(matches!(read_reply(&extended, 7, &k, false, &cache, now), Verdict::Bad));
    }
}
