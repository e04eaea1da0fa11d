//! The records file format: SkyDNS's etcd data as one JSON object mapping each etcd key to its
//! value, e.g. `{"/skydns/local/skydns/east/web": {"host": "10.0.0.1", "port": 80}}`.
//!
//! A value is either the record object itself (or a view map of records) or, as etcd stores it,
//! a JSON string holding that JSON. The key `/<prefix>/config` holds SkyDNS's settings object
//! instead of a record, and a `.wildcards` key a marker whose value is not read. A record that
//! fails to decode is skipped and reported, never fatal, as is a part of a view map; a file that
//! is not a JSON object, or whose settings object is invalid, fails as a whole.

use crate::skydns::{parse_value, ConfigError, ConfigPatch, RecordError, SkippedView};
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use skyline_dataplane::snapshot::skydns::{KeyKind, KeyPath, Value};
use std::collections::BTreeMap;

/// Why a records file as a whole was not loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// The file could not be read.
    #[error("cannot read the records file: {0}")]
    Read(#[source] std::io::Error),
    /// The file is not JSON (or not yet completely written).
    #[error("the records file is not valid JSON: {0}")]
    Syntax(#[source] serde_json::Error),
    /// The file is JSON but not an object of key → value.
    #[error("the records file must hold a JSON object mapping etcd keys to records, found {found}")]
    NotAnObject {
        /// What the top-level value is instead.
        found: &'static str,
    },
    /// The settings object under `/<prefix>/config` is invalid, or the settings it leads to are.
    #[error("settings under {key}: {source}")]
    Config {
        /// The key holding the settings.
        key: String,
        /// What is wrong.
        #[source]
        source: ConfigError,
    },
}

/// Why one entry of the file was skipped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EntryError {
    /// The key is not below `/<prefix>/`, so it names no DNS name.
    #[error("the key is not below /{prefix}/")]
    OutsidePrefix {
        /// The path prefix in force.
        prefix: String,
    },
    /// The value is not a valid record.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// A part of the key's view map is left out; the rest serves.
    #[error(transparent)]
    View(#[from] SkippedView),
}

/// One skipped entry.
#[derive(Debug)]
pub struct Rejected {
    /// The entry's key.
    pub key: String,
    /// Why it was skipped.
    pub error: EntryError,
}

/// The decoded contents of a records file.
#[derive(Debug, Default)]
pub struct RecordsFile {
    /// Valid records (and view maps, and markers) with their keys, sorted by key (so that every
    /// choice made "in key order" is the same from one load to the next).
    pub records: Vec<(String, Value)>,
    /// The settings object, when the file has one.
    pub config: Option<ConfigPatch>,
    /// Entries skipped, and parts of view maps left out, in key order.
    pub rejected: Vec<Rejected>,
}

/// The key of the settings object for `path_prefix`.
pub fn config_key(path_prefix: &str) -> String {
    format!("/{path_prefix}/config")
}

/// Decodes a records file. Duplicate keys: the last one wins, as for any JSON object read into a
/// map. Invalid UTF-8 is replaced by U+FFFD, as SkyDNS's decoder does.
pub fn parse_records_file(bytes: &[u8], path_prefix: &str) -> Result<RecordsFile, FileError> {
    let text = String::from_utf8_lossy(bytes);
    let entries: BTreeMap<String, Box<RawValue>> = match serde_json::from_str(&text) {
        Ok(entries) => entries,
        Err(e) => return Err(classify(&text, e)),
    };
    let key_for_config = config_key(path_prefix);
    let below = format!("/{path_prefix}/");
    let mut file = RecordsFile::default();
    for (key, raw) in entries {
        let value = value_bytes(&raw);
        if key == key_for_config {
            let patch = ConfigPatch::parse(value.as_bytes()).map_err(|source| FileError::Config { key, source })?;
            file.config = Some(patch);
            continue;
        }
        if key.len() <= below.len() || !key.starts_with(&below) {
            file.rejected.push(Rejected {
                key,
                error: EntryError::OutsidePrefix {
                    prefix: path_prefix.to_owned(),
                },
            });
            continue;
        }
        if KeyPath::parse(&key, path_prefix).is_ok_and(|at| at.is_some_and(|at| at.kind() == KeyKind::Wildcards)) {
            file.records.push((key, Value::Marker));
            continue;
        }
        match parse_value(value.as_bytes()) {
            Ok(decoded) => {
                let skipped = decoded.skipped.into_iter().map(|part| Rejected {
                    key: key.clone(),
                    error: part.into(),
                });
                file.rejected.extend(skipped);
                file.records.push((key, decoded.value));
            }
            Err(e) => file.rejected.push(Rejected { key, error: e.into() }),
        }
    }
    Ok(file)
}

/// The record JSON of an entry: the text of a string value (how etcd stores it), else the value
/// itself. A string that cannot be decoded is handed on as is and fails as a record.
fn value_bytes(raw: &RawValue) -> std::borrow::Cow<'_, str> {
    let json = raw.get();
    if json.starts_with('"') {
        if let Ok(inner) = serde_json::from_str::<String>(json) {
            return inner.into();
        }
    }
    json.into()
}

/// Tells "not JSON" from "JSON, but not an object" for a file that failed to decode as a map.
fn classify(text: &str, error: serde_json::Error) -> FileError {
    let first = text.trim_start().bytes().next();
    if first == Some(b'{') || serde_json::from_str::<IgnoredAny>(text).is_err() {
        return FileError::Syntax(error);
    }
    let found = match first {
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    };
    FileError::NotAnObject { found }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skydns::JsonError;

    #[test]
    fn object_and_string_values_are_both_records() {
        let file = parse_records_file(
            br#"{"/skydns/local/skydns/b": "{\"host\":\"10.0.0.2\"}", "/skydns/local/skydns/a": {"host":"10.0.0.1","port":80}}"#,
            "skydns",
        )
        .unwrap();
        let keys: Vec<_> = file
            .records
            .iter()
            .map(|(k, value)| match value {
                Value::Record(s) => (k.as_str(), s.host.as_str()),
                other => panic!("{k}: a record expected, found {other:?}"),
            })
            .collect();
        assert_eq!(
            keys,
            [
                ("/skydns/local/skydns/a", "10.0.0.1"),
                ("/skydns/local/skydns/b", "10.0.0.2")
            ]
        );
        assert!(file.rejected.is_empty());
        assert!(file.config.is_none());
    }

    #[test]
    fn the_config_key_holds_settings() {
        let file = parse_records_file(
            br#"{"/skydns/config": "{\"domain\":\"skydns.test.\",\"ttl\":30}", "/skydns/test/skydns/x": {}}"#,
            "skydns",
        )
        .unwrap();
        let config = file.config.unwrap();
        assert_eq!(config.ttl, Some(30));
        assert_eq!(config.domain.unwrap().to_string(), "skydns.test.");
        assert_eq!(file.records.len(), 1);
    }

    #[test]
    fn the_prefix_decides_the_config_key_and_the_records() {
        let file = parse_records_file(
            br#"{"/skydns/config": {"ttl": 30}, "/dns/config": {"ttl": 40}, "/dns/local/x": {}}"#,
            "dns",
        )
        .unwrap();
        assert_eq!(file.config.unwrap().ttl, Some(40));
        assert_eq!(file.records.len(), 1);
        assert_eq!(file.rejected.len(), 1);
        assert!(matches!(file.rejected[0].error, EntryError::OutsidePrefix { .. }));
    }

    #[test]
    fn bad_records_are_skipped_and_reported() {
        let file = parse_records_file(
            br#"{"/skydns/a": {"host":"10.0.0.1"}, "/skydns/b": "not json at all", "/skydns/c": {"port":"80"},
                 "/skydns/d": {"host":"10.0.0.300"}, "/skydns/": {}, "/other/e": {}}"#,
            "skydns",
        )
        .unwrap();
        assert_eq!(file.records.len(), 1);
        let rejected: Vec<_> = file.rejected.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(
            rejected,
            ["/other/e", "/skydns/", "/skydns/b", "/skydns/c", "/skydns/d"]
        );
        assert!(matches!(
            file.rejected[2].error,
            EntryError::Record(RecordError::Json(JsonError::Syntax(_)))
        ));
        assert!(matches!(
            file.rejected[4].error,
            EntryError::Record(RecordError::BadIp { .. })
        ));
    }

    #[test]
    fn files_that_are_not_objects_fail_whole() {
        assert!(matches!(parse_records_file(b"", "skydns"), Err(FileError::Syntax(_))));
        assert!(matches!(
            parse_records_file(br#"{"/skydns/a": {"host""#, "skydns"),
            Err(FileError::Syntax(_))
        ));
        assert!(matches!(
            parse_records_file(b"[1]", "skydns"),
            Err(FileError::NotAnObject { found: "an array" })
        ));
        assert!(matches!(
            parse_records_file(b" 12 ", "skydns"),
            Err(FileError::NotAnObject { found: "a number" })
        ));
        assert!(matches!(
            parse_records_file(br#"{"/skydns/a": 1} x"#, "skydns"),
            Err(FileError::Syntax(_))
        ));
    }

    #[test]
    fn an_invalid_config_fails_the_file() {
        let err = parse_records_file(br#"{"/skydns/config": {"ttl": "x"}}"#, "skydns").unwrap_err();
        assert!(matches!(err, FileError::Config { .. }), "{err}");
    }

    #[test]
    fn view_maps_and_markers_are_read_and_bad_views_reported() {
        let file = parse_records_file(
            br#"{"/skydns/local/skydns/web": {"default": [{"host": "10.0.0.1"}], "10.0.0.0/40": [],
                                               "10.0.0.0/8": [{"host": "10.0.0.2"}, {"port": "80"}]},
                 "/skydns/local/skydns/dir/.wildcards": "anything at all",
                 "/skydns/local/skydns/dir/.self": "{\"host\": \"10.0.0.3\"}"}"#,
            "skydns",
        )
        .unwrap();
        let kinds: Vec<(&str, &str)> = file
            .records
            .iter()
            .map(|(k, value)| {
                let kind = match value {
                    Value::Record(_) => "record",
                    Value::Views(lists) if lists.len() == 2 => "two views",
                    Value::Views(_) => "views",
                    Value::Marker => "marker",
                };
                (k.as_str(), kind)
            })
            .collect();
        assert_eq!(
            kinds,
            [
                ("/skydns/local/skydns/dir/.self", "record"),
                ("/skydns/local/skydns/dir/.wildcards", "marker"),
                ("/skydns/local/skydns/web", "two views")
            ]
        );
        let rejected: Vec<String> = file
            .rejected
            .iter()
            .map(|r| format!("{}: {}", r.key, r.error))
            .collect();
        assert_eq!(rejected.len(), 2, "{rejected:?}");
        assert!(rejected[0].contains("\"10.0.0.0/40\""), "{rejected:?}");
        assert!(rejected[1].contains("record 1"), "{rejected:?}");
    }
}
