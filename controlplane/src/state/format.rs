//! The layout of a state file, and every reason one is not served.
//!
//! ```text
//! "skyline-state\n"      14 bytes, the magic string
//! version                u32, little-endian: FORMAT_VERSION
//! checksum               32 bytes, SHA-256 of everything after it
//! header length          u32, little-endian
//! header                 JSON: {"source":…,"identity":…,"written_ms":…}
//! data                   the source's data, JSON, to the end of the file
//! ```
//!
//! The checksum covers the header too, so that a flipped bit in the time or the identity is
//! caught like one in the data. A change to the layout or to a source's data bumps
//! [`FORMAT_VERSION`]: a file of another version is ignored, never half read.

use super::Source;
use ring::digest::{digest, Context, SHA256, SHA256_OUTPUT_LEN};
use serde::{Deserialize, Serialize};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The first bytes of every state file.
const MAGIC: &[u8; 14] = b"skyline-state\n";

/// The version of the layout and of the sources' data written by this build.
pub(crate) const FORMAT_VERSION: u32 = 1;

const VERSION_AT: usize = MAGIC.len();
const CHECKSUM_AT: usize = VERSION_AT + 4;
const HEADER_LEN_AT: usize = CHECKSUM_AT + SHA256_OUTPUT_LEN;
const HEADER_AT: usize = HEADER_LEN_AT + 4;

/// Why a state file is not served; each says which kind of problem it is and what was found.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// There is no file yet (no complete data was ever written there).
    #[error("missing: no file yet")]
    Missing,
    /// The file exists but cannot be read.
    #[error("unreadable: {0}")]
    Read(#[source] std::io::Error),
    /// The file does not start as a state file does.
    #[error("foreign: not a skyline state file")]
    NotAStateFile,
    /// The file is of a format version this build does not read.
    #[error("unknown version: format version {found}, this skyline reads version {FORMAT_VERSION}")]
    Version {
        /// The version in the file.
        found: u32,
    },
    /// The file ends before its header does (a write cut short outside skyline).
    #[error("corrupt: the file is truncated")]
    Truncated,
    /// The checksum does not match what follows it.
    #[error("corrupt: the checksum does not match the contents")]
    Checksum,
    /// The header is not what a writer writes, checksum and all.
    #[error("corrupt: unreadable header: {0}")]
    Header(#[source] serde_json::Error),
    /// The data was written for another source, cluster or path prefix.
    #[error("foreign: written for {found:?}, this skyline serves {expected:?}")]
    Foreign {
        /// The source and identity in the file.
        found: String,
        /// This skyline's.
        expected: String,
    },
    /// The data is older than the maximum age.
    #[error("too old: written {} ago, the maximum age is {}", super::human(*.age), super::human(*.max_age))]
    TooOld {
        /// How long ago it was written.
        age: Duration,
        /// The maximum age (`--state-max-age`).
        max_age: Duration,
    },
    /// The data does not decode as the source's data, checksum and all.
    #[error("corrupt: unreadable data: {0}")]
    Data(#[source] serde_json::Error),
}

/// What the header says.
#[derive(Debug, Serialize, Deserialize)]
struct Header {
    source: String,
    identity: String,
    written_ms: u64,
}

/// The bytes that go before `data` of `source` (as `identity` names it), current at `written`:
/// the file is these, then `data`, written one after the other so that a large data set is not
/// copied once more.
pub(crate) fn prefix(source: Source, identity: &str, written: SystemTime, data: &[u8]) -> Vec<u8> {
    let header = Header {
        source: source.name().to_owned(),
        identity: identity.to_owned(),
        written_ms: written
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
    };
    let header = serde_json::to_vec(&header).expect("a header of strings and a number serializes");
    let mut bytes = Vec::with_capacity(HEADER_AT + header.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    bytes.extend_from_slice(&[0; SHA256_OUTPUT_LEN]);
    bytes.extend_from_slice(&(header.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&header);
    let mut sum = Context::new(&SHA256);
    sum.update(&bytes[HEADER_LEN_AT..]);
    sum.update(data);
    bytes[CHECKSUM_AT..HEADER_LEN_AT].copy_from_slice(sum.finish().as_ref());
    bytes
}

/// The data in `bytes` and when it was current, if the file is intact, of this format version,
/// of `source` as `identity` names it, and no older than `max_age` at `now`.
pub(crate) fn decode<'a>(
    bytes: &'a [u8],
    source: Source,
    identity: &str,
    max_age: Duration,
    now: SystemTime,
) -> Result<(SystemTime, &'a [u8]), StateError> {
    if bytes.len() < VERSION_AT || &bytes[..VERSION_AT] != MAGIC {
        return Err(StateError::NotAStateFile);
    }
    let version = u32_at(bytes, VERSION_AT).ok_or(StateError::Truncated)?;
    if version != FORMAT_VERSION {
        return Err(StateError::Version { found: version });
    }
    let header_len = u32_at(bytes, HEADER_LEN_AT).ok_or(StateError::Truncated)? as usize;
    let data_at = HEADER_AT.checked_add(header_len).ok_or(StateError::Truncated)?;
    if bytes.len() < data_at {
        return Err(StateError::Truncated);
    }
    if digest(&SHA256, &bytes[HEADER_LEN_AT..]).as_ref() != &bytes[CHECKSUM_AT..HEADER_LEN_AT] {
        return Err(StateError::Checksum);
    }
    let header: Header = serde_json::from_slice(&bytes[HEADER_AT..data_at]).map_err(StateError::Header)?;
    if header.source != source.name() || header.identity != identity {
        return Err(StateError::Foreign {
            found: format!("{} {}", header.source, header.identity),
            expected: format!("{} {identity}", source.name()),
        });
    }
    let written = UNIX_EPOCH + Duration::from_millis(header.written_ms);
    let age = now.duration_since(written).unwrap_or(Duration::ZERO);
    if age > max_age {
        return Err(StateError::TooOld { age, max_age });
    }
    Ok((written, &bytes[data_at..]))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    let four = bytes.get(at..at + 4)?;
    Some(u32::from_le_bytes(four.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(86_400);

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn written() -> Vec<u8> {
        let data = b"{\"records\":[]}";
        let mut bytes = prefix(Source::Etcd, "a", at(1_000_000), data);
        bytes.extend_from_slice(data);
        bytes
    }

    #[test]
    fn what_is_written_decodes_with_its_time() {
        let bytes = written();
        let (time, data) = decode(&bytes, Source::Etcd, "a", DAY, at(1_000_060)).unwrap();
        assert_eq!((time, data), (at(1_000_000), &b"{\"records\":[]}"[..]));
        let clock_behind = decode(&bytes, Source::Etcd, "a", DAY, at(999_000));
        assert!(clock_behind.is_ok(), "a file from the future counts as new");
    }

    #[test]
    fn every_single_byte_changed_is_rejected() {
        let bytes = written();
        for i in 0..bytes.len() {
            let mut corrupt = bytes.clone();
            corrupt[i] ^= 0x20;
            let error = decode(&corrupt, Source::Etcd, "a", DAY, at(1_000_060)).unwrap_err();
            assert!(
                matches!(
                    error,
                    StateError::NotAStateFile
                        | StateError::Version { .. }
                        | StateError::Checksum
                        | StateError::Truncated
                ),
                "byte {i}: {error}"
            );
        }
    }

    #[test]
    fn truncated_files_are_rejected_at_every_length() {
        let bytes = written();
        for len in 0..bytes.len() {
            assert!(
                decode(&bytes[..len], Source::Etcd, "a", DAY, at(1_000_060)).is_err(),
                "{len} bytes"
            );
        }
    }

    #[test]
    fn another_identity_or_source_is_foreign() {
        let bytes = written();
        let other_prefix = decode(&bytes, Source::Etcd, "b", DAY, at(1_000_060)).unwrap_err();
        assert_eq!(
            other_prefix.to_string(),
            r#"foreign: written for "etcd a", this skyline serves "etcd b""#
        );
        let other_source = decode(&bytes, Source::Kubernetes, "a", DAY, at(1_000_060)).unwrap_err();
        assert!(matches!(other_source, StateError::Foreign { .. }), "{other_source}");
    }

    #[test]
    fn data_older_than_the_maximum_age_is_rejected() {
        let bytes = written();
        let error = decode(&bytes, Source::Etcd, "a", DAY, at(1_000_000 + 3 * 86_400)).unwrap_err();
        assert_eq!(error.to_string(), "too old: written 3d ago, the maximum age is 1d");
        assert!(decode(&bytes, Source::Etcd, "a", DAY, at(1_000_000 + 86_400)).is_ok());
    }

    #[test]
    fn another_format_version_is_rejected_before_anything_else() {
        let mut bytes = written();
        bytes[VERSION_AT..CHECKSUM_AT].copy_from_slice(&2u32.to_le_bytes());
        let error = decode(&bytes, Source::Etcd, "a", DAY, at(1_000_060)).unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown version: format version 2, this skyline reads version 1"
        );
    }

    #[test]
    fn other_files_are_not_state_files() {
        for bytes in [&b""[..], b"{\"records\":[]}", b"skyline-stat"] {
            assert!(matches!(
                decode(bytes, Source::Etcd, "a", DAY, at(0)),
                Err(StateError::NotAStateFile)
            ));
        }
    }
}
