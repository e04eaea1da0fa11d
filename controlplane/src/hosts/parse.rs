//! The hosts(5) format as CoreDNS reads it: `ADDRESS NAME [NAME...]` per line, `#` to the end
//! of a line a comment, blank lines ignored. Where CoreDNS skips a line it cannot read, skyline
//! names it: a start, `--check-config` and a reload all refuse the file, so that a typo does not
//! drop a host without a word.

use skyline_dataplane::snapshot::hosts_file::Entry;
use skyline_dataplane::wire::Name;
use std::net::IpAddr;

/// Why hosts data cannot be served.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostsError {
    /// The file cannot be read.
    #[error("cannot read it: {0}")]
    Read(#[source] std::io::Error),
    /// A line of the file is not an entry.
    #[error("line {line}: {problem}")]
    Line {
        /// The line's number, from 1.
        line: usize,
        /// What is wrong with it.
        problem: LineError,
    },
    /// An inline entry is not an entry.
    #[error("inline entry {entry}: {problem}")]
    Inline {
        /// The entry's number, from 1.
        entry: usize,
        /// What is wrong with it.
        problem: LineError,
    },
}

/// What is wrong with one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LineError {
    /// The first field is no address.
    #[error("{0:?} is not an IPv4 or IPv6 address")]
    Address(String),
    /// An address without a name.
    #[error("address {0} has no name")]
    NoName(String),
    /// A field is no host name.
    #[error("{0:?} is not a domain name")]
    Name(String),
}

/// The entries of a hosts file's text, in order.
pub fn parse(text: &str) -> Result<Vec<Entry>, HostsError> {
    let mut entries = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let entry = line_entry(line).map_err(|problem| HostsError::Line { line: i + 1, problem })?;
        entries.extend(entry);
    }
    Ok(entries)
}

/// The entries of inline lines (CoreDNS's INLINE, one line each), in order.
pub fn parse_inline(lines: &[String]) -> Result<Vec<Entry>, HostsError> {
    let mut entries = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let entry = line_entry(line).map_err(|problem| HostsError::Inline { entry: i + 1, problem })?;
        entries.extend(entry);
    }
    Ok(entries)
}

/// The entry of one line; `None` for a blank line or a comment.
fn line_entry(line: &str) -> Result<Option<Entry>, LineError> {
    let line = line.split_once('#').map_or(line, |(before, _)| before);
    let mut fields = line.split_whitespace();
    let Some(address) = fields.next() else {
        return Ok(None);
    };
    // A scoped IPv6 address (fe80::1%eth0) names its address without the scope, as in Go.
    let unscoped = address.split_once('%').map_or(address, |(a, _)| a);
    let parsed: IpAddr = unscoped.parse().map_err(|_| LineError::Address(address.to_owned()))?;
    let names = fields
        .map(|field| match Name::from_dotted(field) {
            Ok(name) if name.label_count() > 0 => Ok(name),
            _ => Err(LineError::Name(field.to_owned())),
        })
        .collect::<Result<Vec<_>, _>>()?;
    if names.is_empty() {
        return Err(LineError::NoName(address.to_owned()));
    }
    Ok(Some(Entry { address: parsed, names }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(entry: &Entry) -> Vec<String> {
        entry.names.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn lines_give_an_address_and_its_names_lower_cased_and_absolute() {
        let text = "# nodes\n127.0.0.1 localhost\n\n192.168.1.10\tNode-A node-a.lan. # the first\n\
                    fe80::1%eth0 link\n  ::1 ip6-localhost ip6-loopback\n";
        let entries = parse(text).unwrap();
        assert_eq!(entries.len(), 4);
        assert_eq!(entries[1].address, "192.168.1.10".parse::<IpAddr>().unwrap());
        assert_eq!(names(&entries[1]), ["node-a.", "node-a.lan."]);
        assert_eq!(entries[2].address, "fe80::1".parse::<IpAddr>().unwrap());
        assert_eq!(names(&entries[3]), ["ip6-localhost.", "ip6-loopback."]);
    }

    #[test]
    fn a_bad_line_is_named_by_its_number() {
        let bad = |text: &str| parse(text).unwrap_err().to_string();
        assert_eq!(
            bad("127.0.0.1 localhost\n10.0.0.300 x\n"),
            "line 2: \"10.0.0.300\" is not an IPv4 or IPv6 address"
        );
        assert_eq!(bad("\n\n10.0.0.1 # no name\n"), "line 3: address 10.0.0.1 has no name");
        assert_eq!(bad("10.0.0.1 a..b\n"), "line 1: \"a..b\" is not a domain name");
        let long = format!("10.0.0.1 {}\n", "x".repeat(64));
        assert!(bad(&long).starts_with("line 1: "));
    }

    #[test]
    fn inline_entries_are_named_by_their_number() {
        let lines = ["10.0.0.1 a".to_owned(), "nonsense".to_owned()];
        assert_eq!(
            parse_inline(&lines).unwrap_err().to_string(),
            "inline entry 2: \"nonsense\" is not an IPv4 or IPv6 address"
        );
        assert_eq!(parse_inline(&lines[..1]).unwrap().len(), 1);
    }
}
