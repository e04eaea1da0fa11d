//! One SkyDNS record value (the JSON stored under an etcd key) into a typed [`Service`].
//!
//! Decoding follows Go's `encoding/json` into SkyDNS's `msg.Service` (field names matched
//! case-insensitively, unknown fields ignored, wrong types rejected: see [`super::JsonError`]),
//! with one deliberate difference: integers must fit their field. SkyDNS decodes `port`,
//! `priority` and `weight` into a Go `int` and casts them to `uint16` when answering, so
//! `"port": 65616` silently serves port 80; here such a value rejects the record instead, as does
//! a negative number. Beyond the types, the `host` is checked: something that looks like an IP
//! address must be one, and anything else must be a valid domain name, so that a typo skips one
//! record with a clear reason instead of serving a CNAME to garbage.

use super::json::{self, JsonError};
use super::names;
use skyline_dataplane::snapshot::skydns::Service;
use std::net::{Ipv4Addr, Ipv6Addr};

/// The JSON keys of `msg.Service` (its `key` field is `json:"-"`, so a `"key"` is ignored).
const FIELDS: &[&str] = &[
    "host",
    "port",
    "priority",
    "weight",
    "text",
    "mail",
    "ttl",
    "targetstrip",
    "group",
];

/// Why a record value was rejected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The value is not a JSON object of the record schema (syntax, type or range error).
    #[error(transparent)]
    Json(#[from] JsonError),
    /// `host` looks like an IP address but is not one (e.g. `10.0.0.300`).
    #[error("bad IP address {host:?} in field \"host\"")]
    BadIp {
        /// The host as written.
        host: String,
    },
    /// `host` is neither an IP address nor a valid domain name.
    #[error("field \"host\": {host:?} is not a valid domain name: {reason}")]
    BadHostName {
        /// The host as written.
        host: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// Parses one record value, e.g. `{"host": "10.0.0.1", "port": 80}`.
pub fn parse_record(bytes: &[u8]) -> Result<Service, RecordError> {
    let mut service = Service::default();
    for (field, value) in json::decode_object(bytes, FIELDS)? {
        match field {
            "host" => service.host = json::string(field, value)?,
            "port" => service.port = json::bounded(field, &value, "0..=65535")?,
            "priority" => service.priority = json::bounded(field, &value, "0..=65535")?,
            "weight" => service.weight = json::bounded(field, &value, "0..=65535")?,
            "text" => service.text = json::string(field, value)?,
            "mail" => service.mail = json::boolean(field, &value)?,
            "ttl" => service.ttl = json::bounded(field, &value, "0..=4294967295")?,
            "targetstrip" => service.target_strip = json::bounded(field, &value, "0 or more")?,
            "group" => service.group = json::string(field, value)?,
            _ => {}
        }
    }
    check_host(&service.host)?;
    Ok(service)
}

/// Accepts an empty host (a TXT-only record), an IP address, or a domain name.
///
/// Go's `net.ParseIP` decides what SkyDNS takes for an address; what it rejects becomes a name.
/// Here a host made only of digits and dots, or holding a `:`, is meant as an address and must
/// parse as one (Rust's parsers accept the same forms as `net.ParseIP`: dotted-quad IPv4 without
/// leading zeros, and IPv6 including the IPv4-mapped form). Anything else must be a host name as
/// [`names::parse_host_name`] accepts it.
fn check_host(host: &str) -> Result<(), RecordError> {
    if host.is_empty() {
        return Ok(());
    }
    let looks_v4 = host.bytes().all(|b| b.is_ascii_digit() || b == b'.') && host.bytes().any(|b| b.is_ascii_digit());
    if host.contains(':') || looks_v4 {
        let parses = host.parse::<Ipv6Addr>().is_ok() || host.parse::<Ipv4Addr>().is_ok();
        return if parses {
            Ok(())
        } else {
            Err(RecordError::BadIp { host: host.to_owned() })
        };
    }
    match names::parse_host_name(host) {
        Ok(_) => Ok(()),
        Err(reason) => Err(RecordError::BadHostName {
            host: host.to_owned(),
            reason,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<Service, RecordError> {
        parse_record(json.as_bytes())
    }

    #[test]
    fn every_field_is_read() {
        let s = parse(
            r#"{"host":"web.skydns.local.","port":8080,"priority":20,"weight":50,"text":"hi",
                "mail":true,"ttl":7200,"targetstrip":1,"group":"g1","key":"/ignored"}"#,
        )
        .unwrap();
        assert_eq!(
            s,
            Service {
                host: "web.skydns.local.".into(),
                port: 8080,
                priority: 20,
                weight: 50,
                text: "hi".into(),
                mail: true,
                ttl: 7200,
                target_strip: 1,
                group: "g1".into(),
            }
        );
    }

    #[test]
    fn field_names_are_case_insensitive() {
        let s = parse(r#"{"HOST":"10.0.0.1","Port":53,"TargetStrip":2,"TTL":5,"Mail":true}"#).unwrap();
        assert_eq!(
            (s.host.as_str(), s.port, s.target_strip, s.ttl, s.mail),
            ("10.0.0.1", 53, 2, 5, true)
        );
    }

    #[test]
    fn unknown_fields_and_nulls_are_ignored() {
        let s = parse(r#"{"host":"10.0.0.1","colour":"blue","nested":{"a":[1]},"port":null}"#).unwrap();
        assert_eq!((s.host.as_str(), s.port), ("10.0.0.1", 0));
    }

    #[test]
    fn the_last_duplicate_wins() {
        assert_eq!(
            parse(r#"{"host":"10.0.0.1","HOST":"10.0.0.2"}"#).unwrap().host,
            "10.0.0.2"
        );
    }

    #[test]
    fn an_empty_object_is_a_record_without_host() {
        assert_eq!(parse("{}").unwrap(), Service::default());
        assert_eq!(parse(r#"{"text":"only txt"}"#).unwrap().text, "only txt");
    }

    #[test]
    fn wrong_types_are_rejected_naming_the_field() {
        for (json, field) in [
            (r#"{"host":"10.0.0.1","port":"80"}"#, "port"),
            (r#"{"host":10}"#, "host"),
            (r#"{"mail":"true"}"#, "mail"),
            (r#"{"ttl":1.5}"#, "ttl"),
            (r#"{"priority":1e1}"#, "priority"),
            (r#"{"group":["a"]}"#, "group"),
            (r#"{"text":{}}"#, "text"),
        ] {
            match parse(json) {
                Err(RecordError::Json(JsonError::WrongType { field: f, .. })) => {
                    assert_eq!(f, field, "{json}")
                }
                other => panic!("{json}: {other:?}"),
            }
        }
    }

    #[test]
    fn numbers_out_of_range_are_rejected_not_wrapped() {
        for json in [
            r#"{"port":65536}"#,
            r#"{"port":-1}"#,
            r#"{"weight":70000}"#,
            r#"{"ttl":4294967296}"#,
            r#"{"ttl":-5}"#,
            r#"{"targetstrip":-1}"#,
        ] {
            assert!(
                matches!(parse(json), Err(RecordError::Json(JsonError::OutOfRange { .. }))),
                "{json}"
            );
        }
        assert_eq!(parse(r#"{"port":65535,"ttl":4294967295}"#).unwrap().port, 65535);
    }

    #[test]
    fn values_that_are_not_records_are_rejected() {
        assert!(matches!(
            parse("not json at all"),
            Err(RecordError::Json(JsonError::Syntax(_)))
        ));
        assert!(matches!(
            parse("[]"),
            Err(RecordError::Json(JsonError::NotAnObject { .. }))
        ));
        assert!(matches!(
            parse(r#""{}""#),
            Err(RecordError::Json(JsonError::NotAnObject { .. }))
        ));
    }

    #[test]
    fn addresses_must_parse() {
        for host in ["10.0.0.1", "2001:db8::1", "::ffff:10.0.0.1", "::1"] {
            assert!(check_host(host).is_ok(), "{host}");
        }
        for host in [
            "10.0.0.300",
            "10.0.0",
            "10.0.0.1.",
            "1234",
            "010.0.0.1",
            "2001:db8:::1",
            "fe80::1%eth0",
            "1:2",
        ] {
            match check_host(host) {
                Err(RecordError::BadIp { host: h }) => assert_eq!(h, host),
                other => panic!("{host}: {other:?}"),
            }
        }
        let err = parse(r#"{"host":"10.0.0.300"}"#).unwrap_err();
        assert!(err.to_string().contains("bad IP"), "{err}");
    }

    #[test]
    fn names_must_be_valid() {
        for host in [
            "web.skydns.local",
            "web.skydns.local.",
            "_sip._udp.example.com.",
            "x",
            "a-b.c0",
            ".",
        ] {
            assert!(check_host(host).is_ok(), "{host}");
        }
        let long_label = format!("{}.com", "a".repeat(64));
        let long_name = format!("{}com", "a.".repeat(127));
        for host in [
            "a..b",
            ".a",
            "web server.local",
            "wéb.local",
            "a/b",
            "a@b",
            "host.123",
            &long_label,
            &long_name,
        ] {
            assert!(
                matches!(check_host(host), Err(RecordError::BadHostName { .. })),
                "{host}"
            );
        }
    }
}
