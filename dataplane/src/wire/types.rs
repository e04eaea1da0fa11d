//! Numeric constants of the DNS wire format, named as the RFCs name them.

/// Resource record types (RFC 1035 §3.2.2, RFC 3596, RFC 2782, RFC 6891, RFC 8482).
pub mod rtype {
    /// IPv4 host address.
    pub const A: u16 = 1;
    /// Authoritative name server.
    pub const NS: u16 = 2;
    /// Canonical name (alias).
    pub const CNAME: u16 = 5;
    /// Start of authority.
    pub const SOA: u16 = 6;
    /// Domain name pointer (reverse lookups).
    pub const PTR: u16 = 12;
    /// Host information; RFC 8482 uses it for minimal ANY answers.
    pub const HINFO: u16 = 13;
    /// Mail exchange.
    pub const MX: u16 = 15;
    /// Text strings.
    pub const TXT: u16 = 16;
    /// IPv6 host address.
    pub const AAAA: u16 = 28;
    /// Service location.
    pub const SRV: u16 = 33;
    /// EDNS(0) pseudo-record.
    pub const OPT: u16 = 41;
    /// Incremental zone transfer (meta).
    pub const IXFR: u16 = 251;
    /// Full zone transfer (meta).
    pub const AXFR: u16 = 252;
    /// Any type (meta); answered minimally per RFC 8482.
    pub const ANY: u16 = 255;

    /// Whether a qtype is a meta type the server does not implement: qtype 0 and 128–255 other
    /// than the transfers and ANY (RFC 6895 §3.1). skyline answers them NOTIMP.
    pub fn is_unsupported_meta(qtype: u16) -> bool {
        qtype == 0 || ((128..=255).contains(&qtype) && !matches!(qtype, IXFR | AXFR | ANY))
    }
}

/// Classes (RFC 1035 §3.2.4, RFC 2136).
pub mod class {
    /// Internet.
    pub const IN: u16 = 1;
    /// CHAOS, for server identification queries.
    pub const CH: u16 = 3;
}

/// Response codes, including the EDNS extended ones (RFC 6891 §6.1.3).
pub mod rcode {
    /// No error.
    pub const NOERROR: u16 = 0;
    /// Format error.
    pub const FORMERR: u16 = 1;
    /// Server failure.
    pub const SERVFAIL: u16 = 2;
    /// Name does not exist.
    pub const NXDOMAIN: u16 = 3;
    /// Not implemented.
    pub const NOTIMP: u16 = 4;
    /// Refused.
    pub const REFUSED: u16 = 5;
    /// Bad EDNS version; needs an OPT to carry its upper bits.
    pub const BADVERS: u16 = 16;
    /// Bad or missing server cookie (RFC 7873 §8); needs an OPT, as BADVERS does.
    pub const BADCOOKIE: u16 = 23;
}

/// EDNS option codes (IANA "DNS EDNS0 Option Codes").
pub mod option {
    /// DNS cookie (RFC 7873).
    pub const COOKIE: u16 = 10;
    /// TCP keepalive (RFC 7828).
    pub const TCP_KEEPALIVE: u16 = 11;
    /// Extended DNS error (RFC 8914).
    pub const EDE: u16 = 15;
    /// SkyDNS's stub-forwarding loop guard (`EDNS0LOCALSTART + 10`), a local-use code: a query
    /// carrying it was already forwarded to a stub zone by a SkyDNS-compatible server.
    pub const SKYDNS_STUB_LOOP: u16 = 65011;
}

/// Extended DNS error info codes (RFC 8914 §4) that a forwarding cache sends.
pub mod ede {
    /// None of the specific reasons; used when too many questions are in flight.
    pub const OTHER: u16 = 0;
    /// An answer served from cache past its TTL because upstreams failed (RFC 8767).
    pub const STALE_ANSWER: u16 = 3;
    /// The client may not have this answered here: outside the recursion ACL.
    pub const PROHIBITED: u16 = 18;
    /// A stale NXDOMAIN served from cache because upstreams failed (RFC 8767).
    pub const STALE_NXDOMAIN: u16 = 19;
    /// No upstream could be reached within the time allowed.
    pub const NO_REACHABLE_AUTHORITY: u16 = 22;
    /// Upstreams could be reached but gave no usable answer.
    pub const NETWORK_ERROR: u16 = 23;
}

/// Header flag bits in the second 16-bit word of the header.
pub mod flags {
    /// Query (0) or response (1).
    pub const QR: u16 = 0x8000;
    /// Mask of the four opcode bits.
    pub const OPCODE_MASK: u16 = 0x7800;
    /// Authoritative answer.
    pub const AA: u16 = 0x0400;
    /// Truncated.
    pub const TC: u16 = 0x0200;
    /// Recursion desired.
    pub const RD: u16 = 0x0100;
    /// Recursion available.
    pub const RA: u16 = 0x0080;
    /// Reserved, must be zero.
    pub const Z: u16 = 0x0040;
    /// Authentic data.
    pub const AD: u16 = 0x0020;
    /// Checking disabled.
    pub const CD: u16 = 0x0010;
}

/// Size of the fixed DNS header.
pub const HEADER_LEN: usize = 12;
/// Longest name in wire form (RFC 1035 §3.1).
pub const MAX_NAME_LEN: usize = 255;
/// Longest label (RFC 1035 §3.1).
pub const MAX_LABEL_LEN: usize = 63;
/// Largest DNS message, the TCP length prefix's limit.
pub const MAX_MESSAGE_LEN: usize = 65535;
/// UDP payload size a client without EDNS may receive (RFC 1035 §4.2.1).
pub const CLASSIC_UDP_LEN: usize = 512;
/// UDP payload size skyline advertises and caps its replies at (DNS flag day 2020).
pub const ADVERTISED_UDP_LEN: u16 = 1232;
/// Bound on compression pointers followed while reading one name; more means a loop.
pub const MAX_POINTER_HOPS: usize = 16;
