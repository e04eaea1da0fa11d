//! The etcd source's data as persisted: every record under the prefix as a key and a SkyDNS
//! value, the settings object, and the revision and cluster it was read at.
//!
//! Values are written as SkyDNS JSON (from [`Entry::value`]: a record, a view map of records, or
//! an empty object for a `.wildcards` marker) and read back through the same parsing and checks
//! as values from etcd, so that what a file holds can never serve something etcd itself could
//! not have made the source serve. A leased record is written with the TTL
//! it answered with then, and without its lease: read back, it keeps that TTL and does not
//! expire, since no lease can be looked up while etcd is out of reach.

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;
use skyline_dataplane::snapshot::skydns::{Entry, Service, Value, ViewKey};
use std::sync::Arc;

/// What names an etcd source's data: the same prefix of another set of endpoints (another
/// cluster, or the same one moved) is another source's, so its file is foreign.
pub(crate) fn identity(endpoints: &[String], path_prefix: &str) -> String {
    let mut endpoints = endpoints.to_vec();
    endpoints.sort();
    endpoints.dedup();
    format!("endpoints={} prefix=/{path_prefix}/", endpoints.join(","))
}

/// The data read back from a file.
#[derive(Debug, Deserialize)]
pub(crate) struct EtcdData {
    /// Every change up to this revision was in the data.
    pub(crate) revision: i64,
    /// The cluster it was read from.
    pub(crate) cluster: u64,
    /// The settings object `/<prefix>/config`, as etcd held it.
    pub(crate) config: Option<String>,
    /// Each record's key and value.
    pub(crate) records: Vec<(String, Box<RawValue>)>,
}

/// What is written.
#[derive(Serialize)]
struct Written<'a> {
    revision: i64,
    cluster: u64,
    config: Option<String>,
    records: Records<'a>,
}

/// The records, each written as `[key, value]` while the file is encoded, so that a large
/// data set is not copied into another form first.
struct Records<'a> {
    path_prefix: &'a str,
    entries: &'a [Arc<Entry>],
}

impl Serialize for Records<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.entries.len()))?;
        for entry in self.entries {
            let key = entry.key(self.path_prefix);
            match entry.value() {
                Value::Record(service) => seq.serialize_element(&(key, Record::of(&service)))?,
                Value::Views(lists) => seq.serialize_element(&(key, ViewMap(&lists)))?,
                Value::Marker => seq.serialize_element(&(key, ViewMap(&[])))?,
            }
        }
        seq.end()
    }
}

/// A view map: each list under `default` or its prefix.
struct ViewMap<'a>(&'a [(ViewKey, Vec<Service>)]);

impl Serialize for ViewMap<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (view, records) in self.0 {
            let records: Vec<Record<'_>> = records.iter().map(Record::of).collect();
            match view {
                ViewKey::Default => map.serialize_entry("default", &records)?,
                ViewKey::Prefix(prefix) => map.serialize_entry(&prefix.to_string(), &records)?,
            }
        }
        map.end()
    }
}

impl Record<'_> {
    fn of(service: &Service) -> Record<'_> {
        Record {
            host: &service.host,
            port: service.port,
            priority: service.priority,
            weight: service.weight,
            text: &service.text,
            mail: service.mail,
            ttl: service.ttl,
            targetstrip: service.target_strip,
            group: &service.group,
        }
    }
}

/// A SkyDNS record value, its fields under SkyDNS's JSON names; unset ones left out.
#[derive(Serialize)]
struct Record<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    host: &'a str,
    #[serde(skip_serializing_if = "is_zero")]
    port: u16,
    #[serde(skip_serializing_if = "is_zero")]
    priority: u16,
    #[serde(skip_serializing_if = "is_zero")]
    weight: u16,
    #[serde(skip_serializing_if = "str::is_empty")]
    text: &'a str,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    mail: bool,
    #[serde(skip_serializing_if = "is_zero")]
    ttl: u32,
    #[serde(skip_serializing_if = "is_zero")]
    targetstrip: usize,
    #[serde(skip_serializing_if = "str::is_empty")]
    group: &'a str,
}

fn is_zero<T: Default + PartialEq>(n: &T) -> bool {
    *n == T::default()
}

/// The file data of `entries` (records under `/<path_prefix>/`) and the settings object
/// `config`, complete up to `revision` of `cluster`.
pub(crate) fn encode(
    path_prefix: &str,
    revision: i64,
    cluster: u64,
    config: Option<&[u8]>,
    entries: &[Arc<Entry>],
) -> Result<Vec<u8>, serde_json::Error> {
    serde_json::to_vec(&Written {
        revision,
        cluster,
        config: config.map(|bytes| String::from_utf8_lossy(bytes).into_owned()),
        records: Records { path_prefix, entries },
    })
}

/// The data of a file.
pub(crate) fn decode(bytes: &[u8]) -> Result<EtcdData, serde_json::Error> {
    serde_json::from_slice(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use skyline_dataplane::snapshot::skydns::KeyPath;

    fn entry(key: &str, service: Service) -> Arc<Entry> {
        let at = KeyPath::parse(key, "skydns").unwrap().unwrap();
        Arc::new(Entry::new(&at, &service).unwrap())
    }

    #[test]
    fn view_maps_and_markers_are_written_as_etcd_holds_them() {
        let at = |key: &str| KeyPath::parse(key, "skydns").unwrap().unwrap();
        let host = |host: &str| Service {
            host: host.into(),
            ..Service::default()
        };
        let views = Value::Views(vec![
            (ViewKey::Prefix("10.0.0.0/8".parse().unwrap()), vec![host("10.0.0.1")]),
            (ViewKey::Default, vec![host("10.0.0.2"), host("web.skydns.test.")]),
        ]);
        let entries = [
            Arc::new(Entry::of(&at("/skydns/test/dir/.wildcards"), &Value::Marker).unwrap()),
            Arc::new(Entry::of(&at("/skydns/test/dir/.self"), &views).unwrap()),
        ];
        let bytes = encode("skydns", 1, 1, None, &entries).unwrap();
        let data = decode(&bytes).unwrap();
        let records: Vec<(&str, &str)> = data.records.iter().map(|(k, v)| (k.as_str(), v.get())).collect();
        assert_eq!(
            records,
            [
                ("/skydns/test/dir/.wildcards", "{}"),
                (
                    "/skydns/test/dir/.self",
                    r#"{"10.0.0.0/8":[{"host":"10.0.0.1"}],"default":[{"host":"10.0.0.2"},{"host":"web.skydns.test."}]}"#
                ),
            ]
        );
        let read = crate::skydns::parse_value(data.records[1].1.get().as_bytes()).unwrap();
        assert_eq!(read.value, views);
    }

    #[test]
    fn records_and_settings_read_back_as_written() {
        let entries = [
            entry(
                "/skydns/test/Web/a",
                Service {
                    host: "10.0.0.1".into(),
                    port: 80,
                    ttl: 30,
                    ..Service::default()
                },
            ),
            entry(
                "/skydns/test/txt",
                Service {
                    text: "hello \"world\"".into(),
                    mail: true,
                    ..Service::default()
                },
            ),
        ];
        let config = br#"{"domain":"skydns.test."}"#;
        let bytes = encode("skydns", 42, 7, Some(config), &entries).unwrap();
        let data = decode(&bytes).unwrap();
        assert_eq!((data.revision, data.cluster), (42, 7));
        assert_eq!(data.config.as_deref(), Some(r#"{"domain":"skydns.test."}"#));
        let records: Vec<(&str, &str)> = data.records.iter().map(|(k, v)| (k.as_str(), v.get())).collect();
        assert_eq!(
            records,
            [
                ("/skydns/test/Web/a", r#"{"host":"10.0.0.1","port":80,"ttl":30}"#),
                ("/skydns/test/txt", r#"{"text":"hello \"world\"","mail":true}"#),
            ]
        );
    }

    #[test]
    fn the_identity_is_the_endpoints_in_any_order_and_the_prefix() {
        let a = identity(&["http://b:2379".into(), "http://a:2379".into()], "skydns");
        let b = identity(&["http://a:2379".into(), "http://b:2379".into()], "skydns");
        assert_eq!(a, b);
        assert_eq!(a, "endpoints=http://a:2379,http://b:2379 prefix=/skydns/");
        assert_ne!(a, identity(&["http://a:2379".into(), "http://b:2379".into()], "other"));
    }
}
