//! Query files in dnsperf's format — one `name type` per line, `#` comments — turned into
//! ready DNS messages once, before a run, so that sending costs a copy and an ID.

use skyline_dataplane::wire::types::rtype;
use std::fmt;

/// Offset of the question section in a DNS message (after the 12-byte header).
pub const QUESTION_START: usize = 12;

/// How the messages are built: the same defaults as dnsperf (recursion desired, no EDNS), so
/// that both load generators send the same bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryOptions {
    /// Set the RD flag, as dnsperf does unless told `-R`.
    pub recursion_desired: bool,
    /// Append an EDNS(0) OPT record advertising this UDP payload size.
    pub edns_payload: Option<u16>,
}

impl Default for QueryOptions {
    fn default() -> QueryOptions {
        QueryOptions {
            recursion_desired: true,
            edns_payload: None,
        }
    }
}

/// One prepared query: the whole message with ID 0, and the length of its question section,
/// which a reply must repeat byte for byte (case included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// The wire-format message; bytes 0..2 are the ID, written at send time.
    pub message: Vec<u8>,
    /// Length of the question (name, type, class) starting at [`QUESTION_START`].
    pub question_len: usize,
}

impl Query {
    /// The question bytes a reply must echo.
    pub fn question(&self) -> &[u8] {
        &self.message[QUESTION_START..QUESTION_START + self.question_len]
    }
}

/// Why a line of a query file was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong with it.
    pub reason: String,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

impl std::error::Error for LineError {}

/// Parses a whole query file. Blank lines and lines starting with `#` are skipped; a line
/// with a bad name or an unknown type is an error, since a silently shorter file would skew
/// the mix being measured.
pub fn parse_file(text: &str, options: QueryOptions) -> Result<Vec<Query>, LineError> {
    let mut queries = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let err = |reason: String| LineError { line: i + 1, reason };
        let mut fields = line.split_whitespace();
        let name = fields.next().unwrap_or_default();
        let qtype = fields.next().unwrap_or("A");
        let qtype = qtype_code(qtype).ok_or_else(|| err(format!("unknown type {qtype:?}")))?;
        queries.push(build(name, qtype, options).map_err(err)?);
    }
    Ok(queries)
}

/// The numeric code of a record type written as a mnemonic or as `TYPEnnn` (RFC 3597).
pub fn qtype_code(text: &str) -> Option<u16> {
    rtype::of_mnemonic(text).or_else(|| text.to_ascii_uppercase().strip_prefix("TYPE")?.parse().ok())
}

/// Builds a query message for `name` (absolute or not, case kept as written) and `qtype`.
pub fn build(name: &str, qtype: u16, options: QueryOptions) -> Result<Query, String> {
    let mut m = Vec::with_capacity(64);
    let flags: u16 = if options.recursion_desired { 0x0100 } else { 0 };
    let additional: u16 = options.edns_payload.is_some().into();
    for field in [0, flags, 1, 0, 0, additional] {
        m.extend_from_slice(&field.to_be_bytes());
    }
    let trimmed = name.strip_suffix('.').unwrap_or(name);
    if !trimmed.is_empty() {
        for label in trimmed.split('.') {
            if label.is_empty() || label.len() > 63 {
                return Err(format!("bad label in {name:?}"));
            }
            m.push(label.len() as u8);
            m.extend_from_slice(label.as_bytes());
        }
    }
    m.push(0);
    if m.len() - QUESTION_START > 255 {
        return Err(format!("name {name:?} is longer than 255 bytes"));
    }
    m.extend_from_slice(&qtype.to_be_bytes());
    m.extend_from_slice(&1u16.to_be_bytes());
    let question_len = m.len() - QUESTION_START;
    if let Some(payload) = options.edns_payload {
        // Root owner, type OPT, class = payload size, TTL 0 (version 0, no flags), no RDATA.
        m.push(0);
        m.extend_from_slice(&41u16.to_be_bytes());
        m.extend_from_slice(&payload.to_be_bytes());
        m.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    }
    Ok(Query {
        message: m,
        question_len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_matches_the_wire_format_byte_for_byte() {
        let q = build("Ab.c.", 1, QueryOptions::default()).unwrap();
        let want = [
            0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 2, b'A', b'b', 1, b'c', 0, 0, 1, 0, 1,
        ];
        assert_eq!(q.message, want);
        assert_eq!(q.question(), &want[12..]);
    }

    #[test]
    fn edns_adds_an_opt_record_after_the_question() {
        let options = QueryOptions {
            recursion_desired: false,
            edns_payload: Some(1232),
        };
        let q = build("x", 33, options).unwrap();
        assert_eq!(&q.message[2..4], &[0, 0]);
        assert_eq!(&q.message[10..12], &[0, 1]);
        assert_eq!(q.question_len, 7);
        assert_eq!(&q.message[19..], &[0, 0, 41, 0x04, 0xD0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn files_skip_comments_and_blank_lines_and_name_bad_lines() {
        let text = "# mix\nh1.svc1.skydns.local A\n\nsvc1.skydns.local srv\n";
        let qs = parse_file(text, QueryOptions::default()).unwrap();
        assert_eq!(qs.len(), 2);
        assert_eq!(&qs[1].question()[qs[1].question_len - 4..], &[0, 33, 0, 1]);
        let err = parse_file("ok A\nbad BOGUS\n", QueryOptions::default()).unwrap_err();
        assert_eq!(err.line, 2);
        assert!(parse_file("a..b A", QueryOptions::default()).is_err());
    }

    #[test]
    fn numeric_types_follow_rfc_3597() {
        assert_eq!(qtype_code("TYPE65"), Some(65));
        assert_eq!(qtype_code("aaaa"), Some(28));
        assert_eq!(qtype_code("TYPEx"), None);
    }

    #[test]
    fn the_root_name_is_one_zero_byte() {
        let q = build(".", 2, QueryOptions::default()).unwrap();
        assert_eq!(q.question(), &[0, 0, 2, 0, 1]);
    }
}
