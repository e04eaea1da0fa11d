//! The `nameserver` lines of `/etc/resolv.conf` (resolv.conf(5)): the upstreams used when none
//! are configured, as SkyDNS does.

use std::net::{IpAddr, SocketAddr};

/// The port resolv.conf nameservers listen on; the format cannot say otherwise.
const DNS_PORT: u16 = 53;

/// The nameservers listed in resolv.conf text, in order. Lines that are not `nameserver <IP>`
/// are ignored, as the C library ignores them; a scoped IPv6 address (`fe80::1%eth0`) is kept
/// without its scope.
pub fn nameservers(text: &str) -> Vec<SocketAddr> {
    text.lines()
        .filter_map(|line| {
            let line = line.split(['#', ';']).next()?;
            let mut words = line.split_whitespace();
            if words.next()? != "nameserver" {
                return None;
            }
            let addr = words.next()?;
            let addr = addr.split_once('%').map_or(addr, |(ip, _)| ip);
            addr.parse::<IpAddr>().ok().map(|ip| SocketAddr::new(ip, DNS_PORT))
        })
        .collect()
}

/// The search domains of resolv.conf text, as the C library takes them: those of the last
/// `search` or `domain` line, each with its final dot; the root is left out.
pub fn search_domains(text: &str) -> Vec<String> {
    let mut domains = Vec::new();
    for line in text.lines() {
        let line = line.split(['#', ';']).next().unwrap_or_default();
        let mut words = line.split_whitespace();
        if let Some("search" | "domain") = words.next() {
            domains = words
                .map(|w| w.trim_end_matches('.').to_ascii_lowercase())
                .filter(|w| !w.is_empty())
                .map(|w| w + ".")
                .collect();
        }
    }
    domains
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_search_or_domain_line_gives_the_search_domains() {
        let text = "domain old.example
search Svc.Cluster.Local cluster.local. . # comment
nameserver 10.0.0.1
";
        assert_eq!(search_domains(text), ["svc.cluster.local.", "cluster.local."]);
        assert!(search_domains(
            "nameserver 10.0.0.1
"
        )
        .is_empty());
    }

    #[test]
    fn nameserver_lines_are_read_in_order() {
        let text = "# generated\nsearch default.svc.cluster.local svc.cluster.local\nnameserver 10.96.0.10\n\
                    options ndots:5\nnameserver  2001:db8::53 # second\n;nameserver 9.9.9.9\n\
                    nameserver fe80::1%eth0\nnameserver not-an-ip\nnameserver\n";
        assert_eq!(
            nameservers(text),
            [
                "10.96.0.10:53".parse().unwrap(),
                "[2001:db8::53]:53".parse().unwrap(),
                "[fe80::1]:53".parse().unwrap(),
            ]
        );
    }

    #[test]
    fn an_empty_file_lists_none() {
        assert!(nameservers("").is_empty());
    }
}
