//! One value of the configuration file, converted on its own: each key's value is read apart
//! from the others, so that a file with several values of the wrong type has every one of them
//! named (a single deserialisation of the whole file stops at the first), and the message says
//! what the value must be in words, not in the name of a Rust type.

use crate::flag_value::missing_port;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

/// A type a configuration file key holds, with what its values must look like.
pub trait FileValue: DeserializeOwned {
    /// What a value must be, as a person reads it: "a whole number", "true or false".
    const EXPECTED: &'static str;

    /// A word more than [`FileValue::EXPECTED`] about `value`, when there is one to say.
    fn hint(_value: &toml::Value) -> Option<String> {
        None
    }
}

/// One listening address or several, as `addr` may be written in the TOML file.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Addrs {
    /// `addr = "127.0.0.1:53"`.
    One(SocketAddr),
    /// `addr = ["169.254.20.10:53", "10.96.0.10:53"]`.
    Many(Vec<SocketAddr>),
}

/// `value` as a `T`, or why not: the value as the file wrote it, and what it must be.
pub fn convert<T: FileValue>(value: toml::Value) -> Result<T, String> {
    match value.clone().try_into::<T>() {
        Ok(converted) => Ok(converted),
        Err(_) => Err(T::hint(&value).unwrap_or_else(|| format!("{} is not {}", shown(&value), T::EXPECTED))),
    }
}

/// `value` as the file wrote it, tables summed up.
fn shown(value: &toml::Value) -> String {
    match value {
        toml::Value::Table(_) => "a table".to_owned(),
        other => other.to_string(),
    }
}

/// [`missing_port`] of `value` when it is a string, or of the first such string of a list.
pub fn address_hint(value: &toml::Value) -> Option<String> {
    match value {
        toml::Value::String(text) => missing_port(text),
        toml::Value::Array(items) => items.iter().find_map(address_hint),
        _ => None,
    }
}

impl FileValue for String {
    const EXPECTED: &'static str = "a string";
}

impl FileValue for PathBuf {
    const EXPECTED: &'static str = "a path (a string)";
}

impl FileValue for bool {
    const EXPECTED: &'static str = "true or false";
}

impl FileValue for u8 {
    const EXPECTED: &'static str = "a whole number from 0 to 255";
}

impl FileValue for u32 {
    const EXPECTED: &'static str = "a whole number from 0 to 4294967295";
}

impl FileValue for u64 {
    const EXPECTED: &'static str = "a whole number, 0 or more";
}

impl FileValue for usize {
    const EXPECTED: &'static str = "a whole number, 0 or more";
}

impl FileValue for Vec<String> {
    const EXPECTED: &'static str = "a list of strings";
}

impl FileValue for SocketAddr {
    const EXPECTED: &'static str = "an \"IP:port\" address (a host name is not accepted)";

    fn hint(value: &toml::Value) -> Option<String> {
        address_hint(value)
    }
}

impl FileValue for Vec<SocketAddr> {
    const EXPECTED: &'static str = "a list of \"IP:port\" addresses (host names are not accepted)";

    fn hint(value: &toml::Value) -> Option<String> {
        address_hint(value)
    }
}

impl FileValue for Addrs {
    const EXPECTED: &'static str = "an \"IP:port\" address or a list of them (host names are not accepted)";

    fn hint(value: &toml::Value) -> Option<String> {
        address_hint(value)
    }
}

impl FileValue for BTreeMap<String, u32> {
    const EXPECTED: &'static str = "a table of zone = seconds, e.g. { \"cluster.local.\" = 5 }";
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(text: &str) -> toml::Value {
        text.parse::<toml::Table>().unwrap().remove("v").unwrap()
    }

    #[test]
    fn a_wrong_value_is_shown_with_what_it_must_be() {
        assert_eq!(
            convert::<usize>(value("v = \"two\"")).unwrap_err(),
            "\"two\" is not a whole number, 0 or more"
        );
        assert_eq!(
            convert::<u8>(value("v = 300")).unwrap_err(),
            "300 is not a whole number from 0 to 255"
        );
        assert_eq!(
            convert::<bool>(value("v = \"yes\"")).unwrap_err(),
            "\"yes\" is not true or false"
        );
        assert_eq!(convert::<u32>(value("v = 7")).unwrap(), 7);
    }

    #[test]
    fn an_address_without_its_port_says_so() {
        let one = convert::<Addrs>(value("v = \"127.0.0.1\"")).unwrap_err();
        assert_eq!(one, "\"127.0.0.1\" has no port: write IP:port, e.g. \"127.0.0.1:53\"");
        let many = convert::<Addrs>(value("v = [\"127.0.0.1:53\", \"::1\"]")).unwrap_err();
        assert!(
            many.contains("\"::1\" has no port") && many.contains("[::1]:53"),
            "{many}"
        );
        let host = convert::<Addrs>(value("v = \"localhost:53\"")).unwrap_err();
        assert!(!host.contains("enum") && host.contains("\"localhost:53\""), "{host}");
        assert_eq!(
            convert::<Addrs>(value("v = [\"127.0.0.1:53\"]")).unwrap(),
            Addrs::Many(vec!["127.0.0.1:53".parse().unwrap()])
        );
    }
}
