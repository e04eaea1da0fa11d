//! A setting's value as text: what a flag's value parser takes, and the configuration file's
//! strings that name a duration, a size, an address prefix, a policy or a zone. The flags, the
//! file's conversions (`crate::settings`) and the Corefile's translation read values through
//! these, so that a value means the same wherever it is written.

use skyline_controlplane::skydns::config;
use skyline_dataplane::forward::{Policy, Prefix};
use skyline_dataplane::wire::Name;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// The `--resolv-conf` value that reads no file: without `--nameservers`, only stub zones are
/// forwarded. The way to say so on purpose, since a file given that lists no nameserver is an
/// error.
pub const NO_RESOLV_CONF: &str = "none";

/// The `--query-log` value that writes the lines to stderr, not to a file (also what the flag
/// without a value means).
pub const STDERR: &str = "-";

/// An `IP:port` address; a host name is refused, and an address without its port says so.
pub(crate) fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    config::address("addr", text).map_err(|_| {
        missing_port(text)
            .unwrap_or_else(|| format!("\"{text}\" is not an IP:port address (a host name is not accepted)"))
    })
}

/// A domain name, lower-cased and absolute (`--domain`).
pub(crate) fn parse_domain(text: &str) -> Result<Name, String> {
    config::domain("domain", text).map_err(|e| e.to_string())
}

/// The SOA contact, the mail form `hostmaster@skydns.local.` accepted.
pub(crate) fn parse_hostmaster(text: &str) -> Result<Name, String> {
    config::hostmaster(text).map_err(|e| e.to_string())
}

/// Boolean values as Go's `strconv.ParseBool` takes them, so SkyDNS command lines keep working.
pub(crate) fn parse_go_bool(text: &str) -> Result<bool, String> {
    match text {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(format!("{text:?} is not a boolean (true or false)")),
    }
}

/// Why `text` is not an `IP:port` address, when it is an address without its port: the most
/// common slip (`127.0.0.1` for `127.0.0.1:53`).
pub fn missing_port(text: &str) -> Option<String> {
    let text = text.trim();
    let bare = text.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<IpAddr>().ok().map(|ip| {
        let example = SocketAddr::new(ip, 53);
        format!("\"{text}\" has no port: write IP:port, e.g. \"{example}\"")
    })
}

/// An address prefix, `10.0.0.0/8`.
pub(crate) fn parse_prefix(text: &str) -> Result<Prefix, String> {
    text.parse()
        .map_err(|e: skyline_dataplane::forward::PrefixError| e.to_string())
}

/// A zone, its errors naming `setting`.
pub(crate) fn parse_zone(setting: &'static str, text: &str) -> Result<Name, String> {
    config::domain(setting, text).map_err(|e| e.to_string())
}

/// A duration as `1500ms`, `2s`, `1m` or `24h`.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration such as 1500ms or 2s"))?;
    match unit.trim() {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n.saturating_mul(60))),
        "h" => Ok(Duration::from_secs(n.saturating_mul(3600))),
        _ => Err(format!("{text:?} is not a duration such as 1500ms or 2s")),
    }
}

/// A memory size as bytes, or with a unit: `64MiB`, `64M`, `512KiB`, `1GiB`.
pub(crate) fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: usize = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size such as 64MiB"))?;
    let scale: usize = match unit.trim() {
        "" | "B" => 1,
        "K" | "KiB" | "k" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        _ => return Err(format!("{text:?} is not a size such as 64MiB")),
    };
    n.checked_mul(scale).ok_or_else(|| format!("{text:?} is too large"))
}

/// `ZONE=SECS`.
pub(crate) fn parse_zone_ttl(text: &str) -> Result<(Name, u32), String> {
    let (zone, secs) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not ZONE=SECS"))?;
    let zone = parse_zone("ZONE", zone)?;
    let secs = secs.trim().parse().map_err(|_| format!("{text:?} is not ZONE=SECS"))?;
    Ok((zone, secs))
}

/// A forwarding policy: fastest, random, round_robin or sequential.
pub(crate) fn parse_policy(text: &str) -> Result<Policy, String> {
    text.parse()
        .map_err(|e: skyline_dataplane::forward::UnknownPolicy| e.to_string())
}

/// A domain name, as a zone or a name to ask.
pub(crate) fn parse_name(text: &str) -> Result<Name, String> {
    parse_zone("name", text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse() {
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("24h"), Ok(Duration::from_secs(86_400)));
        assert!(parse_duration("fast").is_err());
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("lots").is_err());
        let (zone, secs) = parse_zone_ttl("cluster.local.=5").unwrap();
        assert_eq!((zone.to_string(), secs), ("cluster.local.".to_owned(), 5));
        assert!(parse_prefix("10.0.0.0/33").is_err());
    }

    #[test]
    fn go_booleans_are_accepted() {
        for (text, value) in [
            ("true", true),
            ("T", true),
            ("1", true),
            ("false", false),
            ("F", false),
            ("0", false),
        ] {
            assert_eq!(parse_go_bool(text), Ok(value));
        }
        assert!(parse_go_bool("yes").is_err());
    }
}
