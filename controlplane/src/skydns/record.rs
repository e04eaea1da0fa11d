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
//!
//! A value may also be a view map (docs/skydns-semantics.md, "Views"): an object whose keys are
//! `default` and IP prefixes, each holding an array of records. It is told from a record by its
//! shape: at least one key, every value an array, and no key naming a field of the record (so
//! that `{"group": ["a"]}` stays a record of the wrong type). A key that is not a prefix, and a
//! record of a list that cannot serve, are left out and reported; the rest of the map serves.

use super::json::{self, JsonError};
use super::names;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use skyline_dataplane::snapshot::skydns::{Service, Value, ViewKey, MAX_TEXT_LEN};
use skyline_dataplane::snapshot::views::{Prefix, PrefixError};
use std::fmt;
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
    /// A view map none of whose lists can serve.
    #[error("a view map with no list that can serve ({skipped} left out)")]
    NoView {
        /// Its parts left out.
        skipped: usize,
    },
}

/// A part of a view map left out of it.
#[derive(Debug, thiserror::Error)]
#[error("view {view:?}: {error}")]
pub struct SkippedView {
    /// The map's key the part is under.
    pub view: String,
    /// What is wrong with it.
    pub error: ViewError,
}

/// Why a part of a view map is left out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ViewError {
    /// The key is neither `default` nor an IP prefix.
    #[error("the key is neither \"default\" nor an IP prefix: {0}")]
    Prefix(#[from] PrefixError),
    /// The key's list is not an array of JSON values.
    #[error("the list is not a JSON array")]
    NotAList,
    /// A record of the list cannot serve.
    #[error("record {index} of the list: {error}")]
    Record {
        /// Its place in the list, from 0.
        index: usize,
        /// Why.
        error: Box<RecordError>,
    },
    /// A record's text does not fit one TXT record.
    #[error(
        "record {index} of the list: field \"text\" holds {len} bytes; one TXT record holds at most {MAX_TEXT_LEN}"
    )]
    TextTooLong {
        /// Its place in the list, from 0.
        index: usize,
        /// The text's length.
        len: usize,
    },
}

/// The parts of one view map left out, reported together.
#[derive(Debug, Default, thiserror::Error)]
pub struct SkippedViews(pub Vec<SkippedView>);

impl fmt::Display for SkippedViews {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("left out of the view map: ")?;
        for (i, part) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{part}")?;
        }
        Ok(())
    }
}

/// A value decoded: a record or a view map, and the parts of a view map left out of it.
#[derive(Debug)]
pub struct Decoded {
    /// What the key holds.
    pub value: Value,
    /// Parts of a view map left out, each to be reported.
    pub skipped: Vec<SkippedView>,
}

/// Parses one value: a record, e.g. `{"host": "10.0.0.1", "port": 80}`, or a view map, e.g.
/// `{"default": [{"host": "10.0.0.1"}], "10.0.0.0/8": [{"host": "10.1.0.1"}]}`.
pub fn parse_value(bytes: &[u8]) -> Result<Decoded, RecordError> {
    // A view map holds arrays; most records hold none, and are read once.
    if bytes.contains(&b'[') {
        if let Some(views) = view_map(bytes) {
            return views;
        }
    }
    Ok(Decoded {
        value: Value::Record(parse_record(bytes)?),
        skipped: Vec::new(),
    })
}

/// The view map `bytes` holds, or `None` when they are not one.
fn view_map(bytes: &[u8]) -> Option<Result<Decoded, RecordError>> {
    let text = String::from_utf8_lossy(bytes);
    let mut de = serde_json::Deserializer::from_str(&text);
    let members = Members.deserialize(&mut de).ok()?;
    de.end().ok()?;
    let shaped = !members.is_empty()
        && members.iter().all(|(key, value)| {
            value.get().starts_with('[') && !FIELDS.iter().any(|field| json::key_matches(key, field))
        });
    if !shaped {
        return None;
    }
    let mut lists: Vec<(ViewKey, Vec<Service>)> = Vec::with_capacity(members.len());
    let mut skipped = Vec::new();
    for (key, value) in members {
        let view = match key.as_str() {
            "default" => ViewKey::Default,
            prefix => match prefix.parse::<Prefix>() {
                Ok(prefix) => ViewKey::Prefix(prefix),
                Err(error) => {
                    skipped.push(SkippedView {
                        view: key,
                        error: error.into(),
                    });
                    continue;
                }
            },
        };
        let Ok(items) = serde_json::from_str::<Vec<&RawValue>>(value.get()) else {
            skipped.push(SkippedView {
                view: key,
                error: ViewError::NotAList,
            });
            continue;
        };
        let mut records = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            let error = match parse_record(item.get().as_bytes()) {
                Ok(service) if service.text.len() <= MAX_TEXT_LEN => {
                    records.push(service);
                    continue;
                }
                Ok(service) => ViewError::TextTooLong {
                    index,
                    len: service.text.len(),
                },
                Err(error) => ViewError::Record {
                    index,
                    error: Box::new(error),
                },
            };
            skipped.push(SkippedView {
                view: key.clone(),
                error,
            });
        }
        // Of a key given twice, as of a field, the last one wins.
        match lists.iter_mut().find(|(known, _)| *known == view) {
            Some(list) => list.1 = records,
            None => lists.push((view, records)),
        }
    }
    if lists.is_empty() {
        return Some(Err(RecordError::NoView { skipped: skipped.len() }));
    }
    Some(Ok(Decoded {
        value: Value::Views(lists),
        skipped,
    }))
}

/// The members of a JSON object in document order, their values unread; anything else fails.
struct Members;

impl<'de> DeserializeSeed<'de> for Members {
    type Value = Vec<(String, &'de RawValue)>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Members {
    type Value = Vec<(String, &'de RawValue)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            members.push((key, map.next_value::<&RawValue>()?));
        }
        Ok(members)
    }
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

    fn views(json: &str) -> (Vec<(String, Vec<String>)>, Vec<String>) {
        let decoded = parse_value(json.as_bytes()).unwrap();
        let Value::Views(lists) = decoded.value else {
            panic!("{json}: not a view map");
        };
        let lists = lists
            .into_iter()
            .map(|(key, records)| {
                let key = match key {
                    ViewKey::Default => "default".to_owned(),
                    ViewKey::Prefix(prefix) => prefix.to_string(),
                };
                (key, records.into_iter().map(|r| r.host).collect())
            })
            .collect();
        (lists, decoded.skipped.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn a_view_map_holds_its_lists_in_order() {
        let (lists, skipped) = views(
            r#"{"10.1.2.3/16": [{"host": "10.1.0.1"}, {"HOST": "web.skydns.test."}],
                "default": [], "2001:db8::/32": [{"host": "10.6.0.1"}]}"#,
        );
        assert_eq!(
            lists,
            [
                (
                    "10.1.0.0/16".to_owned(),
                    vec!["10.1.0.1".to_owned(), "web.skydns.test.".to_owned()]
                ),
                ("default".to_owned(), vec![]),
                ("2001:db8::/32".to_owned(), vec!["10.6.0.1".to_owned()]),
            ]
        );
        assert!(skipped.is_empty());
    }

    #[test]
    fn malformed_prefixes_and_records_are_left_out_and_reported() {
        let (lists, skipped) = views(
            r#"{"10.0.0.0/33": [{"host": "10.0.0.1"}], "web": [], "10.0.0.0/8": [{"host": "10.0.0.300"},
                {"host": "10.0.0.2"}, 7, {"text": "x"}], "default": [{"host": "10.9.9.9"}]}"#,
        );
        assert_eq!(
            lists,
            [
                ("10.0.0.0/8".to_owned(), vec!["10.0.0.2".to_owned(), String::new()]),
                ("default".to_owned(), vec!["10.9.9.9".to_owned()]),
            ]
        );
        assert_eq!(skipped.len(), 4, "{skipped:?}");
        assert!(skipped[0].contains("\"10.0.0.0/33\"") && skipped[0].contains("IP prefix"));
        assert!(
            skipped[2].contains("record 0") && skipped[2].contains("bad IP"),
            "{skipped:?}"
        );
        assert!(skipped[3].contains("record 2"), "{skipped:?}");
        let long = format!(
            r#"{{"default": [{{"text": "{}"}}, {{"host": "10.0.0.1"}}]}}"#,
            "a".repeat(MAX_TEXT_LEN + 1)
        );
        let (lists, skipped) = views(&long);
        assert_eq!(lists[0].1, ["10.0.0.1"]);
        assert!(skipped[0].contains("one TXT record"), "{skipped:?}");
    }

    #[test]
    fn a_key_given_twice_keeps_its_last_list() {
        let (lists, _) = views(r#"{"10.0.0.0/8": [{"host": "10.0.0.1"}], "10.0.0.9/8": [{"host": "10.0.0.2"}]}"#);
        assert_eq!(lists, [("10.0.0.0/8".to_owned(), vec!["10.0.0.2".to_owned()])]);
    }

    #[test]
    fn a_view_map_with_nothing_that_serves_is_rejected() {
        assert!(matches!(
            parse_value(br#"{"ten": [{"host": "10.0.0.1"}], "11/8": []}"#),
            Err(RecordError::NoView { skipped: 2 })
        ));
    }

    #[test]
    fn only_the_shape_of_a_view_map_makes_one() {
        for json in [
            r#"{"host": "10.0.0.1", "text": "[not a list]"}"#,
            r#"{"host": "10.0.0.1", "extra": [1, 2]}"#,
            "{}",
            "null",
        ] {
            assert!(
                matches!(parse_value(json.as_bytes()).unwrap().value, Value::Record(_)),
                "{json}"
            );
        }
        assert!(matches!(
            parse_value(br#"{"group": ["a"], "default": []}"#),
            Err(RecordError::Json(JsonError::WrongType { field: "group", .. }))
        ));
        assert!(matches!(
            parse_value(b"[]"),
            Err(RecordError::Json(JsonError::NotAnObject { .. }))
        ));
    }
}
