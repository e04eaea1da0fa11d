//! The names of the cluster zones: endpoint labels from addresses, reverse names, port names
//! with their underscores put back, and reading an address back from a pod name or a reverse
//! name.

use crate::wire::types::{HEADER_LEN, MAX_LABEL_LEN, MAX_NAME_LEN};
use crate::wire::writer::Shift;
use crate::wire::{LowerName, Name};
use std::fmt::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An address as one label, as CoreDNS names endpoints without a hostname and pods: IPv4 dots
/// and IPv6 colons become dashes, and a `0` follows a trailing dash (`2001:db8::` is
/// `2001-db8--0`), since a label ending in `-` is not a valid hostname.
pub fn dashed(address: IpAddr) -> String {
    let mut label = address.to_string().replace(['.', ':'], "-");
    if label.ends_with('-') {
        label.push('0');
    }
    label
}

/// The address a pod label spells, as CoreDNS reads it: exactly three dashes and no `--` is
/// IPv4, anything else is IPv6 with dashes as colons. Reads without allocating, on the query
/// path.
pub fn undashed(label: &[u8]) -> Option<IpAddr> {
    let mut buf = [0u8; 64];
    let text = buf.get_mut(..label.len())?;
    for (out, &b) in text.iter_mut().zip(label) {
        *out = if b == b'-' { b':' } else { b };
    }
    let dashes = label.iter().filter(|&&b| b == b'-').count();
    let doubled = label.windows(2).any(|w| w == b"--");
    if dashes == 3 && !doubled {
        text.iter_mut().filter(|b| **b == b':').for_each(|b| *b = b'.');
        return std::str::from_utf8(text).ok()?.parse::<Ipv4Addr>().ok().map(IpAddr::V4);
    }
    std::str::from_utf8(text).ok()?.parse::<Ipv6Addr>().ok().map(IpAddr::V6)
}

/// The port name `_<port>._<proto>.<service>.<ns>.svc.<zone>` that `qname` spells without the
/// leading `_` of one or both of its first two labels (CoreDNS strips one `_` from each and
/// requires none; docs/kubernetes-dns.md, "Port names"), with the [`Shift`] that moves an answer
/// compiled for it to the shorter question. `None` for a name not five labels below an apex of
/// `apex_labels` labels, not of that shape (`svc` fifth, a protocol second), or whose two labels
/// both start with `_` already. Allocation-free, for the query path: the shape is checked first
/// because search-path expansions (`www.example.com.<ns>.svc.<zone>`) have as many labels.
pub fn underscored(qname: &LowerName, apex_labels: usize) -> Option<(LowerName, Shift)> {
    if qname.label_count().checked_sub(apex_labels) != Some(5) || qname.label(4) != b"svc" {
        return None;
    }
    let (port, protocol) = (qname.label(0), qname.label(1));
    let bare = protocol.strip_prefix(b"_").unwrap_or(protocol);
    if ![b"tcp".as_slice(), b"udp", b"sctp"].contains(&bare) {
        return None;
    }
    if port.starts_with(b"_") && protocol.starts_with(b"_") {
        return None;
    }
    let mut wire = [0u8; MAX_NAME_LEN];
    let mut len = 0;
    for label in [port, protocol] {
        let underscore: &[u8] = if label.starts_with(b"_") { b"" } else { b"_" };
        let size = underscore.len() + label.len();
        if size > MAX_LABEL_LEN {
            return None;
        }
        wire[len] = size as u8;
        wire[len + 1..len + 1 + underscore.len()].copy_from_slice(underscore);
        wire[len + 1 + underscore.len()..len + 1 + size].copy_from_slice(label);
        len += 1 + size;
    }
    let rest = qname.suffix(2);
    wire.get_mut(len..len + rest.len())?.copy_from_slice(rest);
    let underscored = LowerName::from_wire(&wire[..len + rest.len()]).ok()?;
    let shift = Shift {
        from: (HEADER_LEN + len) as u16,
        by: (len - qname.label_start(2)) as u16,
    };
    Some((underscored, shift))
}

/// The reverse name of `address`: `d.c.b.a.in-addr.arpa.`, or 32 nibbles under `ip6.arpa.`.
pub fn reverse(address: IpAddr) -> Name {
    let mut text = String::with_capacity(72);
    match address {
        IpAddr::V4(v4) => {
            let [a, b, c, d] = v4.octets();
            let _ = write!(text, "{d}.{c}.{b}.{a}.in-addr.arpa.");
        }
        IpAddr::V6(v6) => {
            for byte in v6.octets().iter().rev() {
                let _ = write!(text, "{:x}.{:x}.", byte & 0x0f, byte >> 4);
            }
            text.push_str("ip6.arpa.");
        }
    }
    Name::from_dotted(&text).unwrap_or_else(|_| Name::root())
}

/// The address whose reverse name (see [`reverse`]) `name` is: see [`reversed`].
pub fn unreverse(name: &Name) -> Option<IpAddr> {
    reversed(&LowerName::from_wire(name.wire()).ok()?)
}

/// The address whose reverse name [`reverse`] spells as `qname`, read without allocating:
/// four decimal octets without leading zeros under `in-addr.arpa.`, or 32 single hex nibbles
/// under `ip6.arpa.`. Any other spelling names no address.
pub fn reversed(qname: &LowerName) -> Option<IpAddr> {
    let labels = qname.label_count();
    match labels {
        6 if qname.suffix(4) == b"\x07in-addr\x04arpa\x00" => {
            let mut octets = [0u8; 4];
            for (i, octet) in octets.iter_mut().rev().enumerate() {
                *octet = decimal(qname.label(i))?;
            }
            Some(IpAddr::V4(Ipv4Addr::from(octets)))
        }
        34 if qname.suffix(32) == b"\x03ip6\x04arpa\x00" => {
            let mut bits: u128 = 0;
            for i in (0..32).rev() {
                let &[digit] = qname.label(i) else { return None };
                let nibble = match digit {
                    b'0'..=b'9' => digit - b'0',
                    b'a'..=b'f' => digit - b'a' + 10,
                    _ => return None,
                };
                bits = bits << 4 | u128::from(nibble);
            }
            Some(IpAddr::V6(Ipv6Addr::from(bits)))
        }
        _ => None,
    }
}

/// An octet as `Display` writes it: 1 to 3 digits, no leading zero, at most 255.
fn decimal(label: &[u8]) -> Option<u8> {
    if label.is_empty() || label.len() > 3 || (label.len() > 1 && label[0] == b'0') {
        return None;
    }
    let mut value: u16 = 0;
    for &digit in label {
        if !digit.is_ascii_digit() {
            return None;
        }
        value = value * 10 + u16::from(digit - b'0');
    }
    u8::try_from(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lower(text: &str) -> LowerName {
        LowerName::from_wire(Name::from_dotted(text).unwrap().wire()).unwrap()
    }

    /// The underscored name `underscored` gives for `text` under `cluster.local.`, as text.
    fn underscored_text(text: &str) -> Option<(String, Shift)> {
        let (name, shift) = underscored(&lower(text), 2)?;
        Some((Name::from_wire(name.wire()).unwrap().to_string(), shift))
    }

    #[test]
    fn port_names_get_their_underscores_back() {
        let base = "svc.ns.svc.cluster.local.";
        let underscored = format!("_http._tcp.{base}");
        let from = (HEADER_LEN + "_http._tcp.".len()) as u16;
        for (spelling, by) in [("http.tcp", 2), ("http._tcp", 1), ("_http.tcp", 1), ("HTTP.Tcp", 2)] {
            assert_eq!(
                underscored_text(&format!("{spelling}.{base}")),
                Some((underscored.clone(), Shift { from, by })),
                "{spelling}"
            );
        }
        assert_eq!(
            underscored_text(&format!("_x.tcp.{base}")).map(|(name, _)| name),
            Some(format!("_x._tcp.{base}")),
            "one `_` is stripped, so `_x` is port `x`"
        );
        assert_eq!(
            underscored_text(&format!("__x.tcp.{base}")).map(|(name, _)| name),
            Some(format!("__x._tcp.{base}"))
        );
        assert_eq!(underscored_text(&underscored), None, "already underscored");
        assert_eq!(underscored_text("http.tcp.ns.svc.cluster.local."), None, "four labels");
        assert_eq!(underscored_text(&format!("x.http.tcp.{base}")), None, "six labels");
        assert_eq!(
            underscored_text("www.example.com.ns.svc.cluster.local."),
            None,
            "a search-path expansion"
        );
        assert_eq!(
            underscored_text("http.tcp.svc.ns.pod.cluster.local."),
            None,
            "not below `svc`"
        );
        assert_eq!(
            underscored_text(&format!("dns.udp.{base}")).map(|(name, _)| name),
            Some(format!("_dns._udp.{base}"))
        );
        assert_eq!(
            underscored_text(&format!("x._sctp.{base}")).map(|(name, _)| name),
            Some(format!("_x._sctp.{base}"))
        );
        let longest = "p".repeat(63);
        assert_eq!(
            underscored_text(&format!("{longest}.tcp.{base}")),
            None,
            "a 63-byte label has no room for its `_`"
        );
        let near_limit = format!(
            "{}.tcp.{}.{}.svc.{}.{}.",
            "h".repeat(15),
            "s".repeat(63),
            "n".repeat(63),
            "z".repeat(50),
            "y".repeat(49)
        );
        assert_eq!(Name::from_dotted(&near_limit).unwrap().wire().len(), 254);
        assert_eq!(
            underscored_text(&near_limit),
            None,
            "a name 255 bytes long with its underscores back is too long"
        );
    }

    #[test]
    fn addresses_become_one_label_as_coredns_writes_them() {
        assert_eq!(dashed("10.0.0.1".parse().unwrap()), "10-0-0-1");
        assert_eq!(dashed("2001:db8::".parse().unwrap()), "2001-db8--0");
        assert_eq!(dashed("5678:abcd::1".parse().unwrap()), "5678-abcd--1");
    }

    #[test]
    fn pod_labels_read_back_as_addresses() {
        assert_eq!(undashed(b"10-0-0-1"), Some("10.0.0.1".parse().unwrap()));
        assert_eq!(undashed(b"fd00-10--f"), Some("fd00:10::f".parse().unwrap()));
        assert_eq!(undashed(b"2001-db8--0"), Some("2001:db8::".parse().unwrap()));
        for junk in [&b"10-0-0"[..], b"10-0-0-256", b"web-0", b"", b"1-2-3-4-5", &[b'1'; 70]] {
            assert_eq!(undashed(junk), None, "{junk:?}");
        }
    }

    #[test]
    fn reverse_names_follow_rfc_1035_and_3596() {
        assert_eq!(
            reverse("10.3.0.1".parse().unwrap()).to_string(),
            "1.0.3.10.in-addr.arpa."
        );
        let v6 = reverse("2001:db8::1".parse().unwrap()).to_string();
        assert!(v6.starts_with("1.0.0.0.0.0.0.0."), "{v6}");
        assert!(v6.ends_with(".8.b.d.0.1.0.0.2.ip6.arpa."), "{v6}");
        assert_eq!(v6.matches('.').count(), 34);
    }

    #[test]
    fn reverse_names_read_back_only_when_complete_and_canonical() {
        for address in ["10.3.0.1", "0.0.0.0", "255.255.255.255", "2001:db8::1", "fd00::a:b"] {
            let address: IpAddr = address.parse().unwrap();
            assert_eq!(unreverse(&reverse(address)), Some(address), "{address}");
        }
        for junk in [
            "0.3.10.in-addr.arpa.",
            "01.0.3.10.in-addr.arpa.",
            "256.0.3.10.in-addr.arpa.",
            "1.1.0.3.10.in-addr.arpa.",
            "x.0.3.10.in-addr.arpa.",
            "in-addr.arpa.",
            "-1.0.3.10.in-addr.arpa.",
            "1.0.3.10.example.",
            "1.0.ip6.arpa.",
            "10.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.",
            "g.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.",
        ] {
            assert_eq!(unreverse(&Name::from_dotted(junk).unwrap()), None, "{junk}");
        }
    }
}
