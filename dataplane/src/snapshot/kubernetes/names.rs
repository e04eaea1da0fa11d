//! The names of the cluster zones: endpoint labels from addresses, reverse names, and reading a
//! dashed address back from a pod name.

use crate::wire::Name;
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

/// The address whose reverse name (see [`reverse`]) `name` is: four decimal octets under
/// `in-addr.arpa.` or 32 hex nibbles under `ip6.arpa.`, spelled exactly as [`reverse`] spells
/// them. Any other name, a partial one included, is no address's.
pub fn unreverse(name: &Name) -> Option<IpAddr> {
    let labels: Vec<&[u8]> = name.labels().collect();
    let address = match labels.as_slice() {
        [d, c, b, a, b"in-addr", b"arpa"] => {
            let octet = |label: &[u8]| std::str::from_utf8(label).ok()?.parse::<u8>().ok();
            IpAddr::V4(Ipv4Addr::new(octet(a)?, octet(b)?, octet(c)?, octet(d)?))
        }
        [nibbles @ .., b"ip6", b"arpa"] if nibbles.len() == 32 => {
            let mut bits: u128 = 0;
            for label in nibbles.iter().rev() {
                let [digit] = label else { return None };
                bits = bits << 4 | u128::from(char::from(*digit).to_digit(16)?);
            }
            IpAddr::V6(Ipv6Addr::from(bits))
        }
        _ => return None,
    };
    (reverse(address) == *name).then_some(address)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            "1.0.3.10.example.",
            "1.0.ip6.arpa.",
            "10.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.",
        ] {
            assert_eq!(unreverse(&Name::from_dotted(junk).unwrap()), None, "{junk}");
        }
    }
}
