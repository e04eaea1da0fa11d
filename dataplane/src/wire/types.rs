//! Numeric constants of the DNS wire format, named as the RFCs name them.

/// Resource record types (IANA "Resource Record (RR) TYPEs"): the one list of the types skyline
/// names. Each has its number here and its mnemonic in [`crate::wire::types::rtype::MNEMONICS`];
/// the layout of its data, if it holds names or has a fixed length, is its row of
/// [`crate::wire::rdata::layout`].
pub mod rtype {
    /// IPv4 host address (RFC 1035).
    pub const A: u16 = 1;
    /// Authoritative name server (RFC 1035).
    pub const NS: u16 = 2;
    /// Mail destination, obsolete (RFC 1035).
    pub const MD: u16 = 3;
    /// Mail forwarder, obsolete (RFC 1035).
    pub const MF: u16 = 4;
    /// Canonical name, an alias (RFC 1035).
    pub const CNAME: u16 = 5;
    /// Start of authority (RFC 1035).
    pub const SOA: u16 = 6;
    /// Mailbox domain name, experimental (RFC 1035).
    pub const MB: u16 = 7;
    /// Mail group member, experimental (RFC 1035).
    pub const MG: u16 = 8;
    /// Mail rename domain name, experimental (RFC 1035).
    pub const MR: u16 = 9;
    /// Domain name pointer, for reverse lookups (RFC 1035).
    pub const PTR: u16 = 12;
    /// Host information (RFC 1035); RFC 8482 uses it for minimal ANY answers.
    pub const HINFO: u16 = 13;
    /// Mailbox or mail list information, experimental (RFC 1035).
    pub const MINFO: u16 = 14;
    /// Mail exchange (RFC 1035).
    pub const MX: u16 = 15;
    /// Text strings (RFC 1035).
    pub const TXT: u16 = 16;
    /// Responsible person (RFC 1183).
    pub const RP: u16 = 17;
    /// AFS database location (RFC 1183).
    pub const AFSDB: u16 = 18;
    /// Route through (RFC 1183).
    pub const RT: u16 = 21;
    /// Signature, obsolete (RFC 2535).
    pub const SIG: u16 = 24;
    /// X.400 mail mapping (RFC 2163).
    pub const PX: u16 = 26;
    /// IPv6 host address (RFC 3596).
    pub const AAAA: u16 = 28;
    /// Next domain, obsolete (RFC 2535).
    pub const NXT: u16 = 30;
    /// Service location (RFC 2782).
    pub const SRV: u16 = 33;
    /// Naming authority pointer (RFC 3403).
    pub const NAPTR: u16 = 35;
    /// Key exchanger (RFC 2230).
    pub const KX: u16 = 36;
    /// IPv6 address with a prefix name, historic (RFC 2874).
    pub const A6: u16 = 38;
    /// Delegation of a subtree (RFC 6672).
    pub const DNAME: u16 = 39;
    /// EDNS(0) pseudo-record (RFC 6891).
    pub const OPT: u16 = 41;
    /// Delegation signer (RFC 4034).
    pub const DS: u16 = 43;
    /// DNSSEC signature (RFC 4034).
    pub const RRSIG: u16 = 46;
    /// DNSSEC denial of existence (RFC 4034).
    pub const NSEC: u16 = 47;
    /// DNSSEC public key (RFC 4034).
    pub const DNSKEY: u16 = 48;
    /// Hashed denial of existence (RFC 5155).
    pub const NSEC3: u16 = 50;
    /// Hashed denial's parameters (RFC 5155).
    pub const NSEC3PARAM: u16 = 51;
    /// Service binding (RFC 9460).
    pub const SVCB: u16 = 64;
    /// Service binding for HTTP (RFC 9460).
    pub const HTTPS: u16 = 65;
    /// Incremental zone transfer (meta, RFC 1995).
    pub const IXFR: u16 = 251;
    /// Full zone transfer (meta, RFC 5936).
    pub const AXFR: u16 = 252;
    /// Any type (meta); answered minimally per RFC 8482.
    pub const ANY: u16 = 255;
    /// Certification authority authorization (RFC 8659).
    pub const CAA: u16 = 257;

    /// Every type above with its mnemonic, in type order: what the query log and rewrite
    /// templates print, and what rewrite rules and the bench tools read, besides the generic
    /// `TYPEnnn` (RFC 3597 §5).
    pub const MNEMONICS: [(u16, &str); 39] = [
        (A, "A"),
        (NS, "NS"),
        (MD, "MD"),
        (MF, "MF"),
        (CNAME, "CNAME"),
        (SOA, "SOA"),
        (MB, "MB"),
        (MG, "MG"),
        (MR, "MR"),
        (PTR, "PTR"),
        (HINFO, "HINFO"),
        (MINFO, "MINFO"),
        (MX, "MX"),
        (TXT, "TXT"),
        (RP, "RP"),
        (AFSDB, "AFSDB"),
        (RT, "RT"),
        (SIG, "SIG"),
        (PX, "PX"),
        (AAAA, "AAAA"),
        (NXT, "NXT"),
        (SRV, "SRV"),
        (NAPTR, "NAPTR"),
        (KX, "KX"),
        (A6, "A6"),
        (DNAME, "DNAME"),
        (OPT, "OPT"),
        (DS, "DS"),
        (RRSIG, "RRSIG"),
        (NSEC, "NSEC"),
        (DNSKEY, "DNSKEY"),
        (NSEC3, "NSEC3"),
        (NSEC3PARAM, "NSEC3PARAM"),
        (SVCB, "SVCB"),
        (HTTPS, "HTTPS"),
        (IXFR, "IXFR"),
        (AXFR, "AXFR"),
        (ANY, "ANY"),
        (CAA, "CAA"),
    ];

    /// The mnemonic of `rtype`, if [`MNEMONICS`] has one.
    pub const fn mnemonic(rtype: u16) -> Option<&'static str> {
        let mut i = 0;
        while i < MNEMONICS.len() {
            if MNEMONICS[i].0 == rtype {
                return Some(MNEMONICS[i].1);
            }
            i += 1;
        }
        None
    }

    /// The type a mnemonic of [`MNEMONICS`] names, in any case.
    pub fn of_mnemonic(text: &str) -> Option<u16> {
        MNEMONICS
            .iter()
            .find(|(_, mnemonic)| mnemonic.eq_ignore_ascii_case(text))
            .map(|&(rtype, _)| rtype)
    }

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

#[cfg(test)]
mod tests {
    use super::rtype;

    #[test]
    fn mnemonics_are_in_type_order_and_name_one_type_each() {
        for pair in rtype::MNEMONICS.windows(2) {
            assert!(pair[0].0 < pair[1].0, "{:?} before {:?}", pair[0], pair[1]);
        }
        for (code, mnemonic) in rtype::MNEMONICS {
            assert_eq!(rtype::mnemonic(code), Some(mnemonic));
            assert_eq!(rtype::of_mnemonic(&mnemonic.to_ascii_lowercase()), Some(code));
        }
        assert_eq!(rtype::mnemonic(99), None);
        assert_eq!(rtype::of_mnemonic("TYPE1"), None);
    }
}
