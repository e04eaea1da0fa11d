//! Decoding JSON objects the way Go's `encoding/json` decodes them into a struct, which is how
//! SkyDNS reads record values and its `/<prefix>/config`: keys are matched to field names
//! case-insensitively (Unicode simple folding, so `"HOST"` and `"Host"` are `host`), unknown keys
//! are ignored, a `null` value leaves the field untouched, duplicate keys are applied in document
//! order (the last one wins), and a value of the wrong type is an error. Invalid UTF-8 inside
//! strings is replaced by U+FFFD, as Go does, instead of failing the whole value.
//!
//! Two literals Go accepts are rejected here, both too odd to matter in real data: `-0` in an
//! integer field (the JSON parser reads it as a float), and a lone UTF-16 surrogate escape such
//! as `"\ud800"` in a string (Go replaces it with U+FFFD).

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;

/// Why a JSON value could not be decoded into a record or a config.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JsonError {
    /// The bytes are not JSON at all (syntax error, empty input, trailing garbage).
    #[error("not valid JSON: {0}")]
    Syntax(#[source] serde_json::Error),
    /// Valid JSON, but not an object (SkyDNS cannot decode e.g. an array into a struct).
    #[error("expected a JSON object, found {found}")]
    NotAnObject {
        /// What the value is instead, e.g. `an array`.
        found: &'static str,
    },
    /// A known field holds a value of another JSON type, e.g. `"port": "80"`.
    #[error("field {field:?}: expected {expected}, found {found}")]
    WrongType {
        /// The field, by its canonical (lower-case) name.
        field: &'static str,
        /// What the field takes, e.g. `an integer`.
        expected: &'static str,
        /// What was there, e.g. `a string`.
        found: &'static str,
    },
    /// A known integer field holds an integer outside what the field can hold.
    #[error("field {field:?}: {value} is out of range ({range})")]
    OutOfRange {
        /// The field, by its canonical (lower-case) name.
        field: &'static str,
        /// The number as written.
        value: String,
        /// The accepted range, e.g. `0..=65535`.
        range: &'static str,
    },
}

/// The known fields of a JSON object, in document order, each with the value it was given.
/// `null` values are already dropped: Go leaves the field as it was.
pub(crate) type Fields = Vec<(&'static str, Value)>;

/// Decodes `bytes` as an object whose interesting keys are `known` (lower-case field names).
/// A top-level `null` decodes to no fields, as Go's `Unmarshal` leaves the struct untouched.
pub(crate) fn decode_object(bytes: &[u8], known: &'static [&'static str]) -> Result<Fields, JsonError> {
    let text = String::from_utf8_lossy(bytes);
    let mut de = serde_json::Deserializer::from_str(&text);
    let object = KnownFields(known).deserialize(&mut de).map_err(JsonError::Syntax)?;
    de.end().map_err(JsonError::Syntax)?;
    match object {
        Object::Fields(fields) => Ok(fields),
        Object::Other(found) => Err(JsonError::NotAnObject { found }),
    }
}

/// Whether the object key `key` names the field `field` under Go's case folding. Besides ASCII
/// case, two non-ASCII letters fold onto ASCII ones: KELVIN SIGN onto `k`, LONG S onto `s`.
pub(crate) fn key_matches(key: &str, field: &str) -> bool {
    let mut expected = field.chars();
    for c in key.chars() {
        let folded = match c {
            '\u{212A}' => 'k',
            '\u{017F}' => 's',
            c if c.is_ascii() => c.to_ascii_lowercase(),
            _ => return false,
        };
        if expected.next() != Some(folded) {
            return false;
        }
    }
    expected.next().is_none()
}

/// A JSON type in words, for error messages.
pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The value of a Go `string` field.
pub(crate) fn string(field: &'static str, value: Value) -> Result<String, JsonError> {
    match value {
        Value::String(s) => Ok(s),
        other => Err(JsonError::WrongType {
            field,
            expected: "a string",
            found: kind(&other),
        }),
    }
}

/// The value of a Go `bool` field.
pub(crate) fn boolean(field: &'static str, value: &Value) -> Result<bool, JsonError> {
    match value {
        Value::Bool(b) => Ok(*b),
        other => Err(JsonError::WrongType {
            field,
            expected: "a boolean",
            found: kind(other),
        }),
    }
}

/// The value of a Go `[]string` field.
pub(crate) fn strings(field: &'static str, value: Value) -> Result<Vec<String>, JsonError> {
    match value {
        Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Value::String(s) => Ok(s),
                other => Err(JsonError::WrongType {
                    field,
                    expected: "an array of strings",
                    found: kind(&other),
                }),
            })
            .collect(),
        other => Err(JsonError::WrongType {
            field,
            expected: "an array of strings",
            found: kind(&other),
        }),
    }
}

/// The value of an integer field, as a signed 64-bit number. Go decodes only integer literals
/// into integer fields: `1.5`, `1e2` and numbers beyond 64 bits are type errors.
pub(crate) fn integer(field: &'static str, value: &Value) -> Result<i128, JsonError> {
    let Value::Number(n) = value else {
        return Err(JsonError::WrongType {
            field,
            expected: "an integer",
            found: kind(value),
        });
    };
    if let Some(u) = n.as_u64() {
        return Ok(i128::from(u));
    }
    if let Some(i) = n.as_i64() {
        return Ok(i128::from(i));
    }
    Err(JsonError::WrongType {
        field,
        expected: "an integer",
        found: "a number with a fraction or exponent",
    })
}

/// The value of an integer field that must fit `T`; `range` describes `T`'s range for the error.
pub(crate) fn bounded<T: TryFrom<i128>>(
    field: &'static str,
    value: &Value,
    range: &'static str,
) -> Result<T, JsonError> {
    let n = integer(field, value)?;
    T::try_from(n).map_err(|_| JsonError::OutOfRange {
        field,
        value: n.to_string(),
        range,
    })
}

/// What the top-level value turned out to be.
enum Object {
    Fields(Fields),
    Other(&'static str),
}

/// Deserializes an object keeping only the `.0` keys, in document order.
struct KnownFields(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for KnownFields {
    type Value = Object;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Object, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for KnownFields {
    type Value = Object;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Object, A::Error> {
        let mut fields = Vec::new();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match self.0.iter().find(|field| key_matches(&key, field)) {
                Some(field) => match map.next_value::<Value>()? {
                    Value::Null => {}
                    value => fields.push((*field, value)),
                },
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Object::Fields(fields))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Object, E> {
        Ok(Object::Fields(Vec::new()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Object, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Object::Other("an array"))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Object, E> {
        Ok(Object::Other("a boolean"))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Object, E> {
        Ok(Object::Other("a number"))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Object, E> {
        Ok(Object::Other("a number"))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Object, E> {
        Ok(Object::Other("a number"))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Object, E> {
        Ok(Object::Other("a string"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNOWN: &[&str] = &["host", "port", "key"];

    #[test]
    fn keys_fold_like_go() {
        assert!(key_matches("HOST", "host"));
        assert!(key_matches("hOsT", "host"));
        assert!(key_matches("ho\u{017F}t", "host"));
        assert!(key_matches("\u{212A}ey", "key"));
        assert!(!key_matches("hosts", "host"));
        assert!(!key_matches("hos", "host"));
        assert!(!key_matches("hóst", "host"));
    }

    #[test]
    fn fields_come_in_document_order_with_nulls_and_unknowns_dropped() {
        let fields = decode_object(br#"{"Host":"a","x":[1,{"y":2}],"port":null,"HOST":"b"}"#, KNOWN).unwrap();
        assert_eq!(fields, vec![("host", Value::from("a")), ("host", Value::from("b"))]);
    }

    #[test]
    fn top_level_null_is_an_empty_object() {
        assert!(decode_object(b" null ", KNOWN).unwrap().is_empty());
    }

    #[test]
    fn non_objects_are_named() {
        for (input, found) in [
            ("[1,2]", "an array"),
            ("\"x\"", "a string"),
            ("true", "a boolean"),
            ("-1.5", "a number"),
        ] {
            match decode_object(input.as_bytes(), KNOWN) {
                Err(JsonError::NotAnObject { found: f }) => assert_eq!(f, found, "{input}"),
                other => panic!("{input}: {other:?}"),
            }
        }
    }

    #[test]
    fn syntax_errors_and_trailing_data_fail() {
        for input in ["", "{", "{\"host\":}", "{} {}", "not json at all"] {
            assert!(
                matches!(decode_object(input.as_bytes(), KNOWN), Err(JsonError::Syntax(_))),
                "{input}"
            );
        }
    }

    #[test]
    fn invalid_utf8_in_strings_is_replaced() {
        let fields = decode_object(b"{\"host\":\"a\xffb\"}", KNOWN).unwrap();
        assert_eq!(fields, vec![("host", Value::from("a\u{fffd}b"))]);
    }

    #[test]
    fn integers_are_integer_literals_only() {
        assert_eq!(integer("port", &serde_json::json!(80)).unwrap(), 80);
        assert_eq!(integer("port", &serde_json::json!(-3)).unwrap(), -3);
        assert!(matches!(
            integer("port", &serde_json::json!(80.5)),
            Err(JsonError::WrongType { .. })
        ));
        assert!(matches!(
            integer("port", &serde_json::json!("80")),
            Err(JsonError::WrongType { .. })
        ));
        assert!(matches!(
            bounded::<u16>("port", &serde_json::json!(65536), "0..=65535"),
            Err(JsonError::OutOfRange { .. })
        ));
        assert!(matches!(
            bounded::<u16>("port", &serde_json::json!(-1), "0..=65535"),
            Err(JsonError::OutOfRange { .. })
        ));
    }
}
