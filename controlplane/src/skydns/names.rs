//! Domain names given as text in records and settings (`host`, `domain`, `hostmaster`, `local`).

use skyline_dataplane::wire::Name;

/// Parses a host name as it may appear in a record or a setting, lower-cased, absolute with or
/// without the final dot. Accepted: `.` (the root), or labels of 1 to 63 bytes of ASCII letters,
/// digits, `-` and `_` (service labels such as `_sip._udp`), at most 255 bytes in wire form, the
/// rightmost label not all digits (RFC 3696 §2: that would be an IPv4 address or a typo).
/// The error says what is wrong, for the caller's message.
pub fn parse_host_name(text: &str) -> Result<Name, &'static str> {
    if let Some(b) = text
        .bytes()
        .find(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')))
    {
        return Err(if b.is_ascii_whitespace() {
            "it contains white space"
        } else if b.is_ascii() {
            "it contains a character other than letters, digits, '-', '_' and '.'"
        } else {
            "it contains non-ASCII text (write internationalised names in their xn-- form)"
        });
    }
    if text.is_empty() {
        return Err("it is empty");
    }
    let name =
        Name::from_dotted(text).map_err(|_| "an empty label, a label over 63 bytes, or over 255 bytes in all")?;
    if name
        .labels()
        .last()
        .is_some_and(|label| label.iter().all(u8::is_ascii_digit))
    {
        return Err("its rightmost label is all digits");
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_are_lower_cased_and_absolute() {
        assert_eq!(
            parse_host_name("Web.SkyDNS.local").unwrap().to_string(),
            "web.skydns.local."
        );
        assert_eq!(
            parse_host_name("_sip._udp.example.com.").unwrap().to_string(),
            "_sip._udp.example.com."
        );
        assert_eq!(parse_host_name(".").unwrap(), Name::root());
    }

    #[test]
    fn malformed_names_are_rejected() {
        let long_label = format!("{}.com", "a".repeat(64));
        let long_name = format!("{}com", "a.".repeat(127));
        for text in [
            "",
            "a..b",
            ".a",
            "..",
            "web server.local",
            "wéb.local",
            "a/b",
            "a@b",
            "1234",
            "host.123",
            &long_label,
            &long_name,
        ] {
            assert!(parse_host_name(text).is_err(), "{text:?}");
        }
    }
}
